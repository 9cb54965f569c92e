"""Chapter 04, L1: train_step, one training step (the six steps, in order).

Engine: applies states.session_settings / changed_settings (the caller's RNG, default dtype and
grad mode, against what the reference leaves) and the module states the task allows (train
mode, frozen parameters, no .grad on the first call and this batch's on the second, a second
call; Adam with two param groups, a batch of one; a regression with nn.MSELoss on float
targets far from the prediction, whose large gradient shows clipping and whose float targets
show a y.long()), comparing the parameters and .grad left with
the reference's; not "eval" (the text gives train mode, and model.train() is accepted), not
"grad-large" on entry (the hints allow zero_grad() after step(), which then applies an old
.grad), not "no-grad" or "all-frozen" (the reference's backward() fails there). Hand-written
because the answer takes a model, an optimizer and a loss, and its judge names the classic
mistakes of a step from the parameters and gradients it leaves. Its words are in
step_call_judge.MESSAGES."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, PassNote, Raised, later_error
from course_utils.exercises.facts import given, tensor_of
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.states import changed_settings, session_settings
from course_utils.exercises.training_loop.common import CHAPTER, _returned
from course_utils.exercises.training_loop.step_call_judge import ERROR_CLUES, MESSAGES, _judge_step_call
from course_utils.exercises.training_loop.model_state import (
    _flat_parameters,
    _gradient_state,
    _optimizer_facts,
    _optimizer_of,
)


# ============================================================================================
# L1 — the six steps, in order
# ============================================================================================
def train_step(model, optimizer, loss_fn, x, y):
    prediction = model(x)             # forward
    loss = loss_fn(prediction, y)     # loss
    optimizer.zero_grad()             # clear the gradients of the previous step
    loss.backward()                   # backward: fill .grad of every parameter
    optimizer.step()                  # step: move the parameters
    return loss.item()                # a float, not a tensor that holds the graph


_train_step = train_step  # the name train_step becomes the Exercise below


_LR = 0.5
_ADAM_LR = 0.05
# The regression phase: targets about 1000 away from the prediction give a gradient of norm
# about 570 (clipping it to any usual max_norm changes the step); a small rate keeps it sane.
_MSE_LR = 1e-3
_TARGET_SCALE = 1000.0


def _step_model(dtype=torch.float32):
    torch.manual_seed(4)  # the check restores the learner's random state afterwards
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)).to(dtype)


def _step_batches(dtype=torch.float32, seed=40, sizes=(8, 8), regression=False):
    """Two batches: class indices as targets, or (``regression``) float targets of shape
    (n, 3), far from the prediction and not whole numbers."""
    generator = torch.Generator().manual_seed(seed)
    x1, x2 = torch.randn(sizes[0], 4, generator=generator), torch.randn(sizes[1], 4, generator=generator)
    if regression:
        y1 = torch.randn(sizes[0], 3, generator=generator, dtype=dtype) * _TARGET_SCALE
        y2 = torch.randn(sizes[1], 3, generator=generator, dtype=dtype) * _TARGET_SCALE
    else:
        y1 = torch.randint(0, 3, (sizes[0],), generator=generator)
        y2 = torch.randint(0, 3, (sizes[1],), generator=generator)
    return (x1.to(dtype), y1), (x2.to(dtype), y2)


def _loss_of(phase_given):
    """The loss_fn a phase gave the learner, rebuilt from its record."""
    if phase_given.get("loss") == "mse":
        return nn.MSELoss()
    return nn.CrossEntropyLoss(label_smoothing=phase_given.get("label_smoothing", 0.0))


def _gradient_at(model, x, y, loss_fn=nn.functional.cross_entropy) -> np.ndarray:
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy().copy()


# (what the two calls are given, optimizer, model dtype, loss_fn)
_STEP_PHASES = (
    ("plain SGD (lr=0.5), a float32 model and nn.CrossEntropyLoss()", "sgd", torch.float32, None),
    (
        "Adam (lr=0.05; 0.025 for the last layer, a second param group), whose state carries "
        "over from step to step, a float64 model and nn.CrossEntropyLoss(label_smoothing=0.2)",
        "adam",
        torch.float64,
        0.2,
    ),
    # Frozen parameters (part of a layer, and a whole layer), given to the optimizer all the
    # same, as model.parameters() gives them: they must neither move nor be unfrozen. Momentum
    # and weight decay move any parameter that has a .grad, even a zero one.
    (
        "SGD with momentum 0.9 and weight_decay 0.01 given all the parameters, a float32 model "
        "whose first layer's bias and whole second layer are frozen (requires_grad=False)",
        "frozen",
        torch.float32,
        None,
    ),
    # A regression: nn.MSELoss() on float targets (loss_fn is any loss; y is used as given),
    # far from the prediction, so that the gradient is large: clipping it shows.
    (
        "plain SGD (lr=0.001), a float32 model and nn.MSELoss() on float targets far from the "
        "prediction (a regression; a gradient of norm about 570)",
        "mse",
        torch.float32,
        None,
    ),
)

# Which parameters the "frozen" phase freezes, by name: the first layer's bias, all of the second.
_FROZEN = ("0.bias", "2.weight", "2.bias")


def _given_training(setting) -> bool:
    """The mode the model arrives in: train mode, except where the setting says eval mode.

    Every setting gives train mode: calling model.train() at the top of a training step is a
    common, sound habit, so the check does not fail it; model.eval() inside the step is caught."""
    return "eval mode" not in setting
_STEP_CALLS = (
    "the first call, with no gradients stored yet",
    "the second call, on the next batch with the same model and optimizer",
)
# The sizes of each phase's two batches: Adam's second batch holds one example (a batch the task
# allows, on which .squeeze() drops the batch dimension).
_BATCH_SIZES = {"sgd": (8, 8), "adam": (8, 1), "frozen": (8, 8), "mse": (8, 8)}


def _make_optimizer(kind, model):
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=_LR, momentum=0.0)
    if kind == "mse":
        return torch.optim.SGD(model.parameters(), lr=_MSE_LR, momentum=0.0)
    if kind == "frozen":
        return torch.optim.SGD(model.parameters(), lr=_LR, momentum=0.9, weight_decay=0.01)
    # Two param groups, as for a layer trained at its own rate: zero_grad() clears them all.
    return torch.optim.Adam([{"params": model[0].parameters()},
                             {"params": model[2].parameters(), "lr": _ADAM_LR / 2}], lr=_ADAM_LR)


def _probe_train_step(answer, run):
    """What the learner's steps did to the model and optimizer they were given, and what each
    phase started from: the model's parameters, the optimizer's settings and state, the loss's
    label smoothing and each call's batch ("given"). Never what the reference's steps give:
    ``_expect_train_step`` rebuilds the model and optimizer and takes those on the judge's side.
    A later call that raises is recorded; the judge decides whether an earlier one shows a slip."""
    phases = []
    record = {"lr": _LR, "phases": phases}
    for setting, kind, dtype, smoothing in _STEP_PHASES:
        model = _step_model(dtype)
        if kind == "sgd":  # larger weights: a gradient of norm well above 1 (about 1.8), so
            with torch.no_grad():  # that clipping it to norm 1 changes the step
                model[0].weight.mul_(5)
                model[2].weight.mul_(5)
        training = _given_training(setting)
        model.train(training)
        frozen = _FROZEN if kind == "frozen" else ()
        for name, parameter in model.named_parameters():
            if name in frozen:
                parameter.requires_grad_(False)
        optimizer = _make_optimizer(kind, model)
        lrs = [float(group["lr"]) for group in optimizer.param_groups]  # as given
        loss = "mse" if kind == "mse" else "cross_entropy"
        loss_fn = _loss_of({"loss": loss, "label_smoothing": float(smoothing or 0.0)})
        counts = {"forwards": 0, "eval_forwards": 0, "train_forwards": 0, "backwards": 0, "steps": 0}
        calls = []
        phases.append({
            "kind": kind,
            "given": {
                "dtype": str(dtype).replace("torch.", ""),
                "training": training,
                "parameters": [given(p) for p in model.parameters()],
                "optimizer": _optimizer_facts("adam" if kind == "adam" else "sgd", optimizer, model),
                "label_smoothing": float(smoothing or 0.0),
                "loss": loss,
                "frozen": list(frozen),
            },
            "calls": calls,
        })

        def count(name, counts=counts):
            counts[name] += 1

        # Every hook is bound to this phase's counts: a model or optimizer of an earlier phase,
        # kept by the learner's code, must not count as the one given now.
        def count_forward(module, inputs, output, count=count, training=training):
            count("forwards")
            if module.training != training:  # a step trains in the mode it is given
                count("eval_forwards" if training else "train_forwards")

        # On the first layer: model.forward(x) skips the hooks of model itself, not of its layers.
        model[0].register_forward_hook(count_forward)
        next(model.parameters()).register_hook(lambda grad, count=count: count("backwards"))
        optimizer.register_step_post_hook(lambda *args, count=count: count("steps"))

        for on, (x, y) in zip(_STEP_CALLS, _step_batches(dtype, sizes=_BATCH_SIZES[kind], regression=kind == "mse")):
            on = f"{on}{', a batch of one example' if len(x) == 1 else ''}; {setting}"
            for name in counts:
                counts[name] = 0
            given_x, given_y = x.clone(), y.clone()
            frozen_before = {n: p.detach().clone() for n, p in model.named_parameters() if n in frozen}
            settings = session_settings()  # the caller's RNG, default dtype, grad mode
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    returned = run(answer, model, optimizer, loss_fn, given_x, given_y, on=on)
            except LearnerRaised as raised:
                if len(phases) == 1 and not calls:
                    raise  # the first call: nothing before it to judge
                # The judge decides: a slip an earlier call already shows is the one to report,
                # not an error a later input led to.
                record["raised"] = later_error(raised, answer)
                if record["raised"] is None:
                    raise
                if not calls:
                    phases.pop()  # a phase is judged from its calls: this one has none
                return record
            scalar_warning = _shown_unless_scalar_warning(caught)
            calls.append({
                "on": on,
                "given": {"x": given(x), "y": given(y)},
                "returned": _returned(returned),
                "parameters": _flat_parameters(model),
                "gradients": _gradient_state(model),
                "grad_enabled_after": torch.is_grad_enabled(),
                "settings_changed": changed_settings(settings, session_settings()),
                "given_training": training,
                "dtype": str(dtype).replace("torch.", ""),
                "dtypes_after": sorted({str(p.dtype).replace("torch.", "") for p in model.parameters()}),
                "lr": float(optimizer.defaults["lr"]),
                "lr_before": lrs,
                "lr_after": [float(group["lr"]) for group in optimizer.param_groups],
                "training_after": all(m.training for m in model.modules()),
                "any_training_after": any(m.training for m in model.modules()),
                "inputs_changed": [
                    name for name, given_value, kept in (("x", given_x, x), ("y", given_y, y))
                    if not (given_value.shape == kept.shape and given_value.dtype == kept.dtype
                            and given_value.requires_grad == kept.requires_grad
                            and bool(torch.equal(given_value, kept)))
                ],
                "scalar_warning": scalar_warning,
                # of the parameters given frozen: those requires_grad now, and those that moved
                "unfrozen": [n for n, p in model.named_parameters() if n in frozen and p.requires_grad],
                "frozen_moved": [n for n, p in model.named_parameters()
                                 if n in frozen_before and not torch.equal(p.detach(), frozen_before[n])],
                **counts,
            })
            torch.set_grad_enabled(True)
    return record


def _model_of(phase_given):
    """The model a phase gave the learner, rebuilt: the architecture, with the recorded
    parameters and mode (built inside a forked RNG: it leaves torch's generator alone)."""
    with torch.random.fork_rng(devices=[]):
        model = _step_model(getattr(torch, phase_given["dtype"]))
    with torch.no_grad():
        for parameter, facts in zip(model.parameters(), phase_given["parameters"], strict=True):
            parameter.copy_(tensor_of(facts))
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name not in phase_given.get("frozen", ()))
    return model.train(phase_given["training"])


def _expect_train_step(record):
    """What the reference's steps give, from each phase's recorded start (the model, rebuilt
    with its parameters; the optimizer, rebuilt with its settings and state; the loss_fn) on the
    recorded batches: the parameters before and after each step and the loss it returns, and the
    classic mistakes' results (SGD: this batch's gradient; Adam: the step of a new Adam, the steps
    with plain cross entropy instead of loss_fn)."""
    reference = train_step.reference
    with torch.enable_grad():
        for phase in record["phases"]:
            start, kind = phase["given"], phase["kind"]
            model = _model_of(start)
            optimizer = _optimizer_of(start["optimizer"], model.parameters())
            loss_fn = _loss_of(start)
            if start["label_smoothing"]:  # the same steps with a loss of the learner's own
                own_loss_model = _model_of(start)
                own_loss_optimizer = _optimizer_of(start["optimizer"], own_loss_model.parameters())
            phase["parameter_sizes"] = {name: p.numel() for name, p in model.named_parameters()}
            for index, call in enumerate(phase["calls"]):
                x, y = tensor_of(call["given"]["x"]), tensor_of(call["given"]["y"])
                before = copy.deepcopy(model)
                settings = session_settings()
                call["expected_loss"] = reference(model, optimizer, loss_fn, x, y)
                call["expected_settings_changed"] = changed_settings(settings, session_settings())
                call["expected"] = _flat_parameters(model)
                call["expected_gradients"] = _gradient_state(model)
                call["before"] = _flat_parameters(before)
                if kind in ("sgd", "mse"):
                    call["gradient"] = _gradient_at(before, x, y, loss_fn)
                if kind == "mse":  # the classic slip: targets made class indices (y.long())
                    call["integer_targets_gradient"] = _gradient_at(before, x, y.long(), loss_fn)
                elif kind == "adam":
                    if index == 1:  # what a new Adam, made inside the call, would have done
                        fresh = copy.deepcopy(before)
                        new_optimizer = _optimizer_of({**start["optimizer"], "state": {}}, fresh.parameters())
                        reference(fresh, new_optimizer, loss_fn, x, y)
                        call["fresh_optimizer"] = _flat_parameters(fresh)
                    reference(own_loss_model, own_loss_optimizer, nn.functional.cross_entropy, x, y)
                    call["own_loss"] = _flat_parameters(own_loss_model)
    return record


def _judge_train_step(record):
    for phase in record["phases"]:
        lr = phase["given"]["optimizer"]["settings"]["lr"]
        first_gradient = phase["calls"][0].get("gradient")
        for index, call in enumerate(phase["calls"]):
            problem = _judge_step_call(
                call, kind=phase["kind"], lr=lr, index=index, first_gradient=first_gradient,
                sizes=phase.get("parameter_sizes", {}),
            )
            if problem:
                return problem
    if record.get("raised"):
        return Raised(record["raised"])
    if any(call.get("scalar_warning") for phase in record["phases"] for call in phase["calls"]):
        return PassNote(MESSAGES.text("float-of-loss-warns"))
    return None


_SCALAR_WARNING = "Converting a tensor with requires_grad=True to a scalar"


def _shown_unless_scalar_warning(caught) -> bool:
    """Show the learner every warning their step raised, except float(loss)'s, which the
    verdict explains instead; say whether that one was among them."""
    found = False
    for warning in caught:
        if _SCALAR_WARNING in str(warning.message):
            found = True
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return found


train_step = Exercise(
    "train_step",
    chapter=CHAPTER,
    title="One training step",
    expects=Function(
        "train_step", ("model", "optimizer", "loss_fn", "x", "y"), returns="the loss as a Python float"
    ),
    probe=_probe_train_step,
    expect=_expect_train_step,
    judge=_judge_train_step,
    reference=train_step,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes(ERROR_CLUES),
    messages=MESSAGES,
)
