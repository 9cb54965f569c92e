"""Chapter 05's scaled_clipped_step: its catalogue of right and wrong answers."""

import pytest
import torch

from course_utils.exercises import speed_and_memory as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- round 2: answers outside testers wrote ------------------------------------------------------
def update_before_step(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.update()
    scaler.step(optimizer)


def with_a_scaler_of_its_own(model, optimizer, scaler, loss_fn, batch, max_norm):
    scaler = torch.amp.GradScaler("cpu")
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


# -- scaled_clipped_step (P11) ---------------------------------------------------------------
def amp_autocast_zero_to_zeros(model, optimizer, scaler, loss_fn, batch, max_norm):
    optimizer.zero_grad(set_to_none=False)
    with torch.amp.autocast(device_type=batch[0].device.type, dtype=torch.float16):
        prediction = model(batch[0])
        loss = loss_fn(prediction, batch[1])
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
    scaler.step(optimizer)
    scaler.update()


def backward_inside_autocast_param_groups(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None
    with torch.autocast("cpu", torch.float16):
        scaler.scale(loss_fn(model(x), y)).backward()
    scaler.unscale_(optimizer)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
    scaler.step(optimizer)
    scaler.update()


def model_zero_grad_and_clip_the_grads_that_exist(model, optimizer, scaler, loss_fn, batch, max_norm):
    model.zero_grad(set_to_none=True)
    inputs, targets = batch
    with torch.autocast(device_type=inputs.device.type, dtype=torch.float16, enabled=True):
        output = model(inputs)
    loss = loss_fn(output.float(), targets)  # the loss outside autocast, in float32
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], max_norm)
    scaler.step(optimizer)
    scaler.update()


def model_zero_grad_loss_inside(model, optimizer, scaler, loss_fn, batch, max_norm):
    model.zero_grad(set_to_none=True)
    inputs, targets = batch
    with torch.autocast(device_type=inputs.device.type, dtype=torch.float16, enabled=True):
        loss = loss_fn(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], max_norm)
    scaler.step(optimizer)
    scaler.update()


# -- issue 45, second fresh round (from the task text) --------------------------------------
def sc2_loss_outside_on_float16(model, optimizer, scaler, loss_fn, batch, max_norm):
    """only the model under autocast; the loss outside, on its float16 outputs."""
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        out = model(x)
    loss = loss_fn(out, y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def _scaled(order="right", zero="before", autocast=True, own_scaler=False, update=True,
            step="scaler", hard_norm=None):
    def answer(model, optimizer, scaler, loss_fn, batch, max_norm):
        x, y = batch
        scaler_ = torch.amp.GradScaler("cpu", init_scale=1024.0) if own_scaler else scaler
        if zero == "before":
            optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
            loss = loss_fn(model(x), y)
        if order == "unscaled backward":
            scaler_.scale(loss)
            loss.backward()
        else:
            scaler_.scale(loss).backward()
        if zero == "after backward":
            optimizer.zero_grad()
        norm = max_norm if hard_norm is None else hard_norm
        if order == "clip first":
            torch.nn.utils.clip_grad_norm_(model.parameters(), norm)
            scaler_.unscale_(optimizer)
        elif order == "no unscale":
            torch.nn.utils.clip_grad_norm_(model.parameters(), norm)
        elif order == "no clip":
            pass
        elif order == "clip after step":
            pass
        else:
            scaler_.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), norm)
        if step == "scaler":
            scaler_.step(optimizer)
        else:
            if order == "no unscale":
                scaler_.unscale_(optimizer)
            optimizer.step()
        if order == "clip after step":
            torch.nn.utils.clip_grad_norm_(model.parameters(), norm)
        if update:
            scaler_.update()

    return answer


def an_optimizer_of_its_own(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer = torch.optim.SGD(model.parameters(), lr=optimizer.param_groups[0]["lr"])  # a new one
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def nan_to_num_before_the_step(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    for p in model.parameters():
        p.grad = torch.nan_to_num(p.grad, nan=0.0, posinf=1.0, neginf=-1.0)  # "make it finite"
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    scaler.update()


def error_if_nonfinite(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, error_if_nonfinite=True)
    scaler.step(optimizer)
    scaler.update()


def clip_grad_value_instead(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def bfloat16_autocast(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def scales_the_inputs(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    x.mul_(1.0)  # harmless? it writes into the caller's tensor
    y.sub_(y.mean())  # "centre the targets" in place
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def sc_manual_clip(model, optimizer, scaler, loss_fn, batch, max_norm):
    """clips by hand over every parameter (a frozen one has .grad None)."""
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters()))
    coefficient = max_norm / (norm + 1e-6)
    if coefficient < 1:
        for p in model.parameters():
            p.grad.mul_(coefficient)
    scaler.step(optimizer)
    scaler.update()


def sc_half_model(model, optimizer, scaler, loss_fn, batch, max_norm):
    """model.half(): "a float16 training step"."""
    x, y = batch
    model.half()
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x.half()), y.half())
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def sc_train_mode(model, optimizer, scaler, loss_fn, batch, max_norm):
    """model.train() first."""
    x, y = batch
    model.train()
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def sc_skips_on_inf_only(model, optimizer, scaler, loss_fn, batch, max_norm):
    """its own skip test, isinf(norm) only (a nan norm steps), then optimizer.step()."""
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    if not torch.isinf(norm):
        optimizer.step()
    scaler.update()


def sc_clips_group_zero(model, optimizer, scaler, loss_fn, batch, max_norm):
    """clips the optimizer's first parameter group only."""
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(optimizer.param_groups[0]["params"], max_norm)
    scaler.step(optimizer)
    scaler.update()


def sc_default_dtype_float16(model, optimizer, scaler, loss_fn, batch, max_norm):
    """torch.set_default_dtype(torch.float16) for "a float16 step", left set."""
    torch.set_default_dtype(torch.float16)
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def sc_half_targets(model, optimizer, scaler, loss_fn, batch, max_norm):
    """y.half(): the targets in float16 too."""
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y.half())
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def sc_unscales_by_hand(model, optimizer, scaler, loss_fn, batch, max_norm):
    """divides .grad by get_scale() by hand: scaler.step divides again."""
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    for p in model.parameters():
        if p.grad is not None:
            p.grad /= scaler.get_scale()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def sc_zeroes_by_multiplying(model, optimizer, scaler, loss_fn, batch, max_norm):
    """clears .grad with p.grad *= 0 (inf * 0 is nan)."""
    x, y = batch
    for p in model.parameters():
        if p.grad is not None:
            p.grad *= 0
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def sc_seeds(model, optimizer, scaler, loss_fn, batch, max_norm):
    """torch.manual_seed(0) first: the caller's RNG is reset."""
    torch.manual_seed(0)
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def sc_clip_at_scaled_norm(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=x.device.type, dtype=torch.float16):
        out = model(x)
        loss = loss_fn(out, y)
    scaler.scale(loss).backward()
    # the gradients are scale times too large: clip them at scale times max_norm instead
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm * scaler.get_scale())
    scaler.step(optimizer)
    scaler.update()


def sc_steps_only_when_finite(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    for p in model.parameters():
        p.grad = None
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    if torch.isfinite(norm):
        scaler.step(optimizer)
    scaler.update()


CATALOGUE = Catalogue({
    ex.scaled_clipped_step: [
        wrong("update() before step()", update_before_step, "scaler.update() ran before scaler.step(optimizer)"),
        wrong("a default GradScaler of its own (scale 65536)", with_a_scaler_of_its_own,
              "The GradScaler you were given was never used", "65536 by default"),
        right("torch.amp.autocast, zero_grad(set_to_none=False), max_norm=", amp_autocast_zero_to_zeros),
        right("backward inside autocast, the optimizer's parameters, foreach", backward_inside_autocast_param_groups),
        right("model.zero_grad(), the grads that exist clipped", model_zero_grad_loss_inside),
        wrong("clips before unscale_", _scaled(order="clip first"), "clipping the *scaled* gradients",
              "scaler.unscale_(optimizer) right after"),
        wrong("no unscale_ at all", _scaled(order="no unscale"), "clipping the *scaled* gradients"),
        wrong("no clipping", _scaled(order="no clip"), "the unclipped one", "max_norm=0.5"),
        wrong("clips after the step", _scaled(order="clip after step"), "the unclipped one"),
        wrong("backward on the plain loss", _scaled(order="unscaled backward"),
              "backward() ran on the plain loss", "scaler.scale(loss).backward()"),
        wrong("no autocast", _scaled(autocast=False), "did not run under float16 autocast"),
        wrong("bfloat16 autocast", bfloat16_autocast, "torch.bfloat16", "dtype=torch.float16"),
        wrong("never zeroes the gradients", _scaled(zero="never"), ".grad held inf",
              "optimizer.zero_grad()", kind=STATEFUL),
        wrong("zero_grad between backward and step", _scaled(zero="after backward"),
              "No inf checks were recorded", "zero_grad() belongs before backward()",
              outcome=Outcome.RAISED),
        wrong("optimizer.step() instead of scaler.step", _scaled(step="optimizer"),
              "gradients that overflowed was applied", "became inf or nan", kind=EDGE),
        wrong("no scaler.update()", _scaled(update=False), "unscale_() is being called after step()",
              "was not followed by scaler.update()", kind=STATEFUL, outcome=Outcome.RAISED),
        wrong("a GradScaler of its own", _scaled(own_scaler=True), "The GradScaler you were given was never used",
              "Use the scaler passed in", kind=STATEFUL),
        wrong("clips to norm 1.0 always", _scaled(hard_norm=1.0), "times the right length",
              "max_norm you are given (0.5)", kind=EDGE),
        wrong("a new SGD every call", an_optimizer_of_its_own, "The first call was right",
              "Use the optimizer and scaler passed in", kind=STATEFUL),
        wrong("makes inf gradients finite", nan_to_num_before_the_step,
              "gradients that overflowed was applied", "moved", kind=EDGE),
        wrong("error_if_nonfinite=True", error_if_nonfinite, "non-finite",
              "leave error_if_nonfinite at its default", kind=EDGE, outcome=Outcome.RAISED),
        wrong("clip_grad_value_", clip_grad_value_instead, "the weight change of the step"),
        wrong("changes the caller's targets in place", scales_the_inputs,
              "changed the batch it was given", kind=STATEFUL),
        # -- issue 45, fresh round (from the task text) --
        wrong('clips by hand over every parameter (a frozen one has .grad None)', sc_manual_clip,
              'AttributeError', 'first weight frozen', kind=STATEFUL, outcome=Outcome.RAISED),
        wrong('model.half() for a float16 step', sc_half_model,
              'Attempting to unscale FP16 gradients', outcome=Outcome.RAISED),
        wrong('model.train() on a model given in eval mode', sc_train_mode,
              'left in train mode', 'eval mode', kind=STATEFUL),
        wrong('its own skip on isinf(norm), optimizer.step()', sc_skips_on_inf_only,
              'overflowed was applied', kind=EDGE),
        wrong('clips the first parameter group only', sc_clips_group_zero,
              'times the right length', 'over all the gradients together', kind=EDGE),
        wrong('torch.set_default_dtype(torch.float16), left set', sc_default_dtype_float16,
              'default dtype', kind=STATEFUL),
        wrong("y.half() as the loss's target", sc_half_targets,
              'targets of torch.float16', 'pass y as it is', kind=EDGE),
        wrong('divides .grad by get_scale() by hand, then scaler.step', sc_unscales_by_hand,
              'clipping the *scaled* gradients'),
        wrong('clears .grad with p.grad *= 0 (inf * 0 is nan)', sc_zeroes_by_multiplying,
              '.grad held inf', 'optimizer.zero_grad()', kind=EDGE),
        wrong('torch.manual_seed(0) inside the step', sc_seeds,
              'global random state', kind=STATEFUL),
        right('no unscale_: clips the scaled gradients at max_norm * get_scale()', sc_clip_at_scaled_norm),
        right('grads set to None by hand, scaler.step only on a finite norm', sc_steps_only_when_finite),
        # -- issue 45, second fresh round (from the task text) --
        # (was right("model.zero_grad(), the loss in float32 outside autocast"): the task computes
        # loss_fn(model(x), y) under autocast, and the checklist names "missing around the loss")
        wrong("model.zero_grad(), the loss in float32 outside autocast", model_zero_grad_and_clip_the_grads_that_exist,
              "loss_fn ran outside autocast", "loss_fn(model(x), y) inside it"),
        wrong("the loss outside autocast, on the float16 outputs", sc2_loss_outside_on_float16,
              "loss_fn ran outside autocast", "float16"),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
