"""Chapter 05, P11: scaled_clipped_step, a float16 GradScaler step with gradient clipping."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.facts import given, same_values, tensor_of, values_problem
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.speed_and_memory.common import CHAPTER, _LR, _flat
from course_utils.exercises.running import judge_side
from course_utils.exercises.facts import load_given
from course_utils.exercises.speed_and_memory.scaled_step_mistakes import _WRONG_ORDERS


# ============================================================================================
# P11 — a float16 GradScaler step with gradient clipping: unscale_ before clip_grad_norm_
# ============================================================================================
def scaled_clipped_step(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()  # .grad may hold inf from a skipped step: start from nothing
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()  # the gradients are multiplied by the scale
    scaler.unscale_(optimizer)  # divide them back, in place, before looking at their norm
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)  # skipped when unscale_ found inf or nan
    scaler.update()  # halve the scale after a skipped step, grow it after many good ones


_SCALE = 1024.0  # the probes' initial scale: large enough to matter, small enough not to overflow
_OVERFLOW_TARGET = 1e4  # targets this far make the float16 gradients overflow


def _scaled_setting(kind, seed):
    """A fresh model, optimizer and scaler of one case (the model from the seed)."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    if kind == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=_LR, momentum=0.9 if kind == "momentum" else 0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=_SCALE)
    return model, optimizer, scaler


def _scaled_batch(seed, overflow=False, classes=False):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 6, generator=generator)
    if classes:  # class labels for cross_entropy, whose two arguments cannot be swapped
        return x, torch.randint(0, 2, (8,), generator=generator)
    y = 3 * torch.randn(8, 2, generator=generator)  # far from the outputs: a gradient norm above 1
    return x, (y * _OVERFLOW_TARGET if overflow else y)


# (what the case is, optimizer kind, seed, max_norm, batches: each "normal" or "overflow",
# and whether .grad holds inf before the first call, as a skipped step leaves it)
_SCALED_CASES = [
    ("SGD with momentum=0.9, max_norm=0.5 (the gradients' norm is above it), .grad holding inf "
     "before the call (what a skipped step leaves)", "momentum", 0, 0.5, ["normal"] * 2, True),
    ("Adam, loss_fn=F.cross_entropy, max_norm=50.0 (the gradients' norm is below it: clipping "
     "changes nothing)", "adam", 1, 50.0, ["normal"] * 2, False),
    (f"plain SGD, max_norm=1.0, a batch whose targets are {_OVERFLOW_TARGET:g} times larger (its "
     "float16 gradients overflow to inf), then a normal batch", "sgd", 2, 1.0,
     ["overflow", "normal"], False),
]


def _scaled_state(model):
    flat = _flat(model.parameters())
    return flat, bool(np.isfinite(flat).all())


def _probe_scaled_clipped_step(answer, run):
    """What the answer's steps did to a model, optimizer and scaler the probe built, and the
    state they started from ("given": parameters, .grad, the optimizer's and the scaler's
    settings, each batch): never what the reference's step or a wrong order gives
    (``_expect_scaled_clipped_step`` replays them on a rebuilt model, on the judge's side)."""
    calls = []
    record = {"calls": calls}
    for on_case, kind, seed, max_norm, kinds, inf_grads in _SCALED_CASES:
        loss_fn = F.cross_entropy if kind == "adam" else F.mse_loss
        model, optimizer, scaler = _scaled_setting(kind, seed)
        steps, dtypes = [], []
        optimizer.register_step_post_hook(lambda *args, steps=steps: steps.append(1))
        model[0].register_forward_hook(
            lambda module, inputs, output, seen=dtypes: seen.append(str(output.dtype))
        )
        if inf_grads:
            for p in model.parameters():
                p.grad = torch.full_like(p, float("inf"))
        start = {  # what the first call starts from: a fresh optimizer and scaler
            "kind": kind, "seed": seed, "loss": "cross_entropy" if loss_fn is F.cross_entropy else "mse_loss",
            "parameters": [given(p) for p in model.parameters()],
            "grads": [None if p.grad is None else given(p.grad) for p in model.parameters()],
            "optimizer": {"kind": type(optimizer).__name__, "state": "empty",
                          **{key: float(optimizer.defaults[key]) for key in ("lr", "momentum")
                             if key in optimizer.defaults}},
            "scaler": {"init_scale": float(scaler.get_scale()), "growth_factor": float(scaler.get_growth_factor()),
                       "backoff_factor": float(scaler.get_backoff_factor()),
                       "growth_interval": int(scaler.get_growth_interval())},
        }
        for index, batch_kind in enumerate(kinds):
            batch = _scaled_batch(seed * 10 + index, overflow=batch_kind == "overflow",
                                  classes=loss_fn is F.cross_entropy)
            on = f"{on_case}; call {index + 1} of {len(kinds)} in a row ({batch_kind} batch)"
            # A later call starts from where the answer's earlier calls left the model: that is
            # no input of the probe's (the judge's side replays the reference's own steps).
            call = {"on": on, "index": index, "overflow": batch_kind == "overflow",
                    "inf_before": inf_grads and index == 0, "max_norm": max_norm,
                    "given": {"batch": [given(t) for t in batch], "max_norm": max_norm,
                              **({"start": start} if index == 0 else {})}}
            before = _flat(model.parameters())
            kept = [t.clone() for t in batch]
            steps.clear()
            dtypes.clear()
            call["scale_before"] = float(scaler.get_scale())
            used_before = getattr(scaler, "_scale", None) is not None  # made by its first scale()
            try:
                run(answer, model, optimizer, scaler, loss_fn, batch, max_norm, on=on)
            except LearnerRaised as raised:
                # The judge decides: a mistake the earlier calls already show is the one to
                # report, not the error a later call led to.
                record["raised"] = later_error(raised, answer, calls)
                return record
            call["scaler_used"] = used_before or getattr(scaler, "_scale", None) is not None
            after, finite = _scaled_state(model)
            call["scale_after"] = float(scaler.get_scale())
            # update() empties the scaler's per-optimizer record; a step() after it leaves one.
            call["stepped_after_update"] = bool(getattr(scaler, "_per_optimizer_states", {}))
            call["steps"] = len(steps)
            call["dtypes"] = sorted(set(dtypes))
            call["batch_changed"] = not all(torch.equal(a, b) for a, b in zip(batch, kept))
            call["finite"] = finite
            call["update"] = before - after if finite else None
            calls.append(call)
    return record


def _rebuilt(start, grads=True):
    """The probe's model, optimizer and scaler, rebuilt from a case's recorded start: the
    architecture, the recorded parameters (and .grad, unless ``grads`` is False: then none),
    the optimizer's and the scaler's recorded settings."""
    torch.manual_seed(start["seed"])  # inside judge_side(): the session's stream is put back
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    load_given(model, start["parameters"], start["grads"] if grads else [None] * len(start["grads"]))
    settings = start["optimizer"]
    if settings["kind"] == "Adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=settings["lr"])
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=settings["lr"], momentum=settings["momentum"])
    scaler = torch.amp.GradScaler("cpu", **start["scaler"])
    return model, optimizer, scaler


def _expect_scaled_clipped_step(record):
    """What the reference's steps give from each case's recorded start, call after call (the
    weight change and the scale after each), and, from the first call's start, what each wrong
    order of the calls gives, for the judge."""
    with judge_side():
        for call in record["calls"]:
            batch = [tensor_of(t) for t in call["given"]["batch"]]
            if call["index"] == 0:
                start = call["given"]["start"]
                model, optimizer, scaler = _rebuilt(start)
                loss_fn = F.cross_entropy if start["loss"] == "cross_entropy" else F.mse_loss
            if call["inf_before"]:  # what each wrong order gives from the same start
                alternatives = {}
                for name, wrong in _WRONG_ORDERS.items():
                    # The wrong orders all clear .grad: only the order differs.
                    alt_model, alt_optimizer, alt_scaler = _rebuilt(start, grads=False)
                    alt_before = _flat(alt_model.parameters())
                    wrong(alt_model, alt_optimizer, alt_scaler, loss_fn, [t.clone() for t in batch],
                          call["given"]["max_norm"])
                    alternatives[name] = alt_before - _flat(alt_model.parameters())
                call["alternatives"] = alternatives
            before = _flat(model.parameters())
            scaled_clipped_step.reference(model, optimizer, scaler, loss_fn, [t.clone() for t in batch],
                                          call["given"]["max_norm"])
            call["expected"] = before - _flat(model.parameters())
            call["expected_scale"] = float(scaler.get_scale())
    return record


_SCALED_TOL = {"rtol": 1e-4, "atol": 1e-7}


_TWO_SLIPS = "clips-before-unscale-or-updates-first"


def _one_of_two_slips(calls) -> str | None:
    """"update_first" or "clips_scaled" when some call's step matches exactly one of them."""
    if any(call.get("stepped_after_update") for call in calls):
        return "update_first"
    if calls and all("stepped_after_update" in call for call in calls):
        return "clips_scaled"  # every update() came last: the steps are short for the other reason
    for call in calls:
        alternatives = call.get("alternatives", {})
        found = [
            name for name in ("update_first", "clips_scaled")
            if alternatives.get(name) is not None
            and not same_values(alternatives[name], call["expected"], **_SCALED_TOL)
            and same_values(call["update"], alternatives[name], **_SCALED_TOL)
        ]
        if len(found) == 1:
            return found[0]
    return None


def _judge_scaled_clipped_step(record):
    """The first mistake of the calls, read as far as the first call that names one for sure:
    two slips alike go on to a call that tells them apart, a mistake named for sure ends the
    reading (the calls after it do not change the verdict), and an error of a later call is the
    verdict only when the calls before it show no such mistake."""
    calls = record["calls"]
    for seen in range(1, len(calls) + 1):
        problem = _judge_scaled_calls(calls[:seen])
        if problem is not None and getattr(problem, "id", "") != _TWO_SLIPS:
            return problem
    if record.get("raised"):
        return Raised(record["raised"])
    return _judge_scaled_calls(calls)


def _judge_scaled_calls(calls):
    for call in calls:
        on, update, expected = call["on"], call["update"], call["expected"]
        if call["batch_changed"]:
            return Mistake("changes-the-batch", (
                f"Your function changed the batch it was given (on {on}): unpack it with "
                "`x, y = batch` and leave x and y as they are."
            ))
        if not call["dtypes"]:
            return Mistake("no-forward", (
                f"The model never ran a forward pass (on {on}): compute loss_fn(model(x), y)."
            ))
        if call["dtypes"] != ["torch.float16"]:
            mistake = "bfloat16-autocast" if "torch.bfloat16" in call["dtypes"] else "no-autocast"
            return Mistake(mistake, (
                f"The model's first layer gave {' and '.join(call['dtypes'])} outputs (on {on}), "
                "so the forward pass did not run under float16 autocast: compute the loss inside "
                "`with torch.autocast(x.device.type, dtype=torch.float16):`."
            ))
        if call["overflow"]:
            if not call["finite"] or call["steps"] or not same_values(update, np.zeros_like(update), rtol=0, atol=0):
                return Mistake("steps-on-overflow", (
                    f"The step on gradients that overflowed was applied (on {on}): the weights "
                    + ("became inf or nan" if not call["finite"] else "moved")
                    + ". scaler.step(optimizer) skips optimizer.step() when the gradients hold "
                    "inf or nan; calling optimizer.step() yourself (or making the gradients "
                    "finite first) applies a step that must not happen."
                ))
            if call["scale_after"] != call["expected_scale"]:
                return _scale_message(call)
            continue
        if not call["finite"]:
            return Mistake("steps-on-non-finite-grads", (
                f"The weights became inf or nan (on {on}), on a batch whose gradients are "
                "finite: the step used gradients that were still scaled or left over. Zero the "
                "gradients first, and step with scaler.step(optimizer)."
            ))
        if call.get("scaler_used") is False:
            return Mistake("own-scaler", (
                f"The GradScaler you were given was never used (on {on}): your function scaled "
                "the loss with a scaler of its own. A new GradScaler starts from its init_scale "
                "(65536 by default, enough to make these float16 gradients overflow), and what it "
                "learns is lost after the call. Use the scaler passed in: its scale carries over "
                "from step to step."
            ))
        if call["steps"] == 0 and same_values(update, np.zeros_like(update), rtol=0, atol=0):
            if call["inf_before"]:
                return Mistake("no-zero-grad", (
                    f"The step was skipped (on {on}): .grad held inf from an earlier skipped "
                    "step, backward() added the new gradients to it, and the scaler saw inf. "
                    "Clear the gradients first: optimizer.zero_grad()."
                ))
            return Mistake("no-optimizer-step", (
                f"optimizer.step() of the optimizer you were given never ran (on {on}), so the "
                "weights did not move: finish with scaler.step(optimizer), then scaler.update()."
            ))
        if call["steps"] > 1:
            return Mistake("several-steps", (
                f"The optimizer stepped {call['steps']} times in one call (on {on}): step once, "
                "with scaler.step(optimizer)."
            ))
        if call["scale_after"] != call["expected_scale"]:
            return _scale_message(call)
        if same_values(update, expected, **_SCALED_TOL):
            continue
        if call["steps"] == 1 and same_values(update, np.zeros_like(update), rtol=0, atol=1e-12):
            return Mistake("zero-grad-between-backward-and-step", (
                f"The optimizer stepped, but the weights did not move (on {on}): the gradients "
                "were zero at the step. Call optimizer.zero_grad() before backward(), not "
                "between backward() and the step."
            ))
        named = {
            "update_first": ("update-before-step", (
                "Your step is as short as gradients divided by the scale twice: scaler.update() "
                "ran before scaler.step(optimizer). update() starts the next iteration and "
                "forgets that unscale_ ran, so step() unscales the gradients a second time. "
                "Finish with scaler.step(optimizer), then scaler.update()."
            )),
            "clips_scaled": ("clips-before-unscale", (
                "Your step is what clipping the *scaled* gradients gives: clip_grad_norm_ ran "
                "before scaler.unscale_(optimizer), so it compared max_norm with gradients "
                f"{call['scale_before']:g} times too large, and the step then divided them by "
                "the scale: far too short a step. Call scaler.unscale_(optimizer) right after "
                "backward(), then clip_grad_norm_."
            )),
            "no_clip": ("no-clipping", (
                "Your step is the unclipped one: the gradients reached the optimizer without "
                f"being clipped to max_norm={call['max_norm']:g}. Clip with "
                "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) after "
                "scaler.unscale_(optimizer) and before scaler.step(optimizer)."
            )),
            "unscaled_backward": ("backward-on-the-plain-loss", (
                "Your step is as short as gradients divided by the scale: backward() ran on the "
                "plain loss, and unscale_ then divided the true gradients by the scale. "
                "Back-propagate the scaled loss: scaler.scale(loss).backward()."
            )),
        }
        matches = [
            name for name in named
            if (alternative := call.get("alternatives", {}).get(name)) is not None
            and not same_values(alternative, expected, **_SCALED_TOL)
            and same_values(update, alternative, **_SCALED_TOL)
        ]
        if "update_first" in matches and "clips_scaled" in matches:
            # Above max_norm both slips shrink the step by the scale alike; a call below it
            # (where clipping does nothing) tells them apart, if the answer got that far.
            told = _one_of_two_slips(calls)
            if told:
                mistake, message = named[told]
                return Mistake(mistake, f"{message} (on {on})")
            return Mistake(_TWO_SLIPS, (
                "Your step is as short as two slips make it, and this input cannot tell them "
                "apart: clip_grad_norm_ before scaler.unscale_(optimizer), or scaler.update() "
                "before scaler.step(optimizer) (update() forgets that unscale_ ran, so step() "
                "divides the gradients by the scale again). The order is: scale(loss).backward(), "
                f"unscale_, clip_grad_norm_, step, update. (on {on})"
            ))
        if matches:
            mistake, message = named[matches[0]]
            return Mistake(mistake, f"{message} (on {on})")
        if call["index"] > 0:
            return Mistake("replaces-optimizer-or-scaler", (
                f"The first call was right, but on {on} the weights are not what the next step "
                "gives with the optimizer and scaler you were given (their state carries over "
                "from step to step). Use the optimizer and scaler passed in, every call."
            ))
        length, expected_length = float(np.linalg.norm(update)), float(np.linalg.norm(expected))
        if length > 0 and expected_length > 0 and same_values(
            update * (expected_length / length), expected, **_SCALED_TOL
        ):
            return Mistake("wrong-clip-norm", (
                f"Your step goes the right way but is {length / expected_length:.3g} times the "
                f"right length (on {on}): clip to the max_norm you are given "
                f"({call['max_norm']:g}), after unscale_, and change nothing else."
            ))
        return values_problem(
            update, expected, what="the weight change of the step", on=on, rtol=1e-4, atol=1e-7
        ) + (
            " It should be one step of: zero_grad(), the loss under float16 autocast, "
            "scaler.scale(loss).backward(), scaler.unscale_(optimizer), clip_grad_norm_, "
            "scaler.step(optimizer), scaler.update()."
        )
    return None


def _scale_message(call):
    before, after, expected = call["scale_before"], call["scale_after"], call["expected_scale"]
    if after == before:
        return Mistake("given-scaler-not-updated", (
            f"The scaler you were given still has the scale {before:g} after the step (on "
            f"{call['on']}), where it should be {expected:g}: scaler.update() never ran on it. "
            "Call scaler.update() after scaler.step(optimizer), on the scaler passed in."
        ))
    return Mistake("update-not-once", (
        f"After the step the scale is {after:g}, not {expected:g} (on {call['on']}): call "
        "scaler.update() once per step, after scaler.step(optimizer)."
    ))


scaled_clipped_step = Exercise(
    "scaled_clipped_step",
    chapter=CHAPTER,
    title="float16 with a GradScaler and clipping",
    expects=Function(
        "scaled_clipped_step", ("model", "optimizer", "scaler", "loss_fn", "batch", "max_norm"),
        returns="nothing: it changes the model through scaler.step(optimizer)",
    ),
    probe=_probe_scaled_clipped_step,
    expect=_expect_scaled_clipped_step,
    judge=_judge_scaled_clipped_step,
    reference=scaled_clipped_step,
    passed_message=(
        "Correct: the gradients were unscaled before clipping, so max_norm applied to the true "
        "gradients; a step on gradients that overflowed was skipped and the scale halved."
    ),
    hints=[
        "Clip the true gradients, not the scaled ones: between backward() and the step, "
        "scaler.unscale_(optimizer) divides .grad by the scale.",
        "The order: optimizer.zero_grad(); the loss under torch.autocast(x.device.type, "
        "dtype=torch.float16); scaler.scale(loss).backward(); scaler.unscale_(optimizer); "
        "clip_grad_norm_; scaler.step(optimizer); scaler.update().",
        "x, y = batch; optimizer.zero_grad(); with torch.autocast(x.device.type, "
        "dtype=torch.float16): loss = loss_fn(model(x), y); scaler.scale(loss).backward(); "
        "scaler.unscale_(optimizer); torch.nn.utils.clip_grad_norm_(model.parameters(), "
        "max_norm); scaler.step(optimizer); scaler.update()",
    ],
    error_notes=[
        ("_scale is None",
         "the scaler has no scale yet: scaler.scale(loss) makes it. Back-propagate the scaled "
         "loss, scaler.scale(loss).backward(), before scaler.unscale_(optimizer).",
         "unscale-before-scaled-backward"),
        ("unscale_() has already been called",
         "scaler.unscale_(optimizer) may run once per step: scaler.step() knows it ran and does "
         "not unscale again. Call it once, before clipping.",
         "unscale-twice"),
        ("No inf checks were recorded",
         "the scaler found no gradients to check: either they were cleared between backward() "
         "and the step (zero_grad() belongs before backward()), or step/update ran twice. "
         "The order: zero_grad(), scaled backward(), unscale_, clip, scaler.step(optimizer) "
         "once, scaler.update() once.",
         "no-gradients-at-step"),
        ("unscale_() is being called after step()",
         "the previous call's scaler.step(optimizer) was not followed by scaler.update() (it "
         "came after it, or not at all): end every step with scaler.step(optimizer), then "
         "scaler.update(), which also resets the scaler for the next one.",
         "update-missing"),
        ("is non-finite, so it cannot be clipped",
         "clip_grad_norm_(..., error_if_nonfinite=True) raises on a step whose gradients "
         "overflowed; leave error_if_nonfinite at its default: the scaler skips that step.",
         "error-if-nonfinite"),
    ],
)
