"""Chapter 04's public cases (see ``course_utils.exercises.public``).

A training step and an evaluation are judged by what they do to the model and the optimizer
they are given: these uses record the model after the call (parameters, buffers, modes), how
many forward passes, backward passes and optimizer steps the call made, and the loss it
returned (a float; a NumPy float counts as one). EarlyStopping is driven through a fixed
sequence of validation losses, as a training loop would. Every model here is small, seeded and
on the CPU; nothing here computes what a right answer gives.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from torch import nn

from course_utils.exercises.public import PublicCase, PublicCases, describe
from course_utils.exercises.running import set_up_torch_once

# Answers step optimizers: torch's one-time set-up for them is paid here, when the notebook
# imports the exercises, not by the first check.
set_up_torch_once()


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _seeded(model: nn.Module, seed: int, scale: float = 1.0) -> nn.Module:
    """The model with numbers of its own in every parameter, whatever the global random state."""
    generator = _generator(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * scale)
    return model


def _a_float(value):
    """A loss returned as a float: float subclasses (numpy.float64) count as floats, as in the
    practice check; anything else is recorded as it is."""
    return float(value) if isinstance(value, float) else value


def _grad_mode_put_back() -> bool:
    enabled = torch.is_grad_enabled()
    torch.set_grad_enabled(True)  # (the check puts the learner's own mode back at the end)
    return enabled


def _unchanged(given: torch.Tensor, kept: torch.Tensor) -> bool:
    return (given.shape == kept.shape and given.dtype == kept.dtype
            and given.requires_grad == kept.requires_grad and bool(torch.equal(given.detach(), kept)))


# ============================================================================================
# train_step
# ============================================================================================
def _step_case(seed, optimizer, dtype, smoothing):
    def make():
        model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 4)).to(dtype)
        _seeded(model, seed, scale=3.0)  # a gradient of norm about 1.5: clipping it shows
        if optimizer == "sgd":
            made = torch.optim.SGD(model.parameters(), lr=0.2)
        else:
            made = torch.optim.Adam(model.parameters(), lr=0.01)
        generator = _generator(seed + 1)
        x = torch.randn(6, 3, generator=generator, dtype=dtype)
        y = torch.randint(0, 4, (6,), generator=generator)
        return model, made, nn.CrossEntropyLoss(label_smoothing=smoothing), x, y
    return make


def _one_step(answer, arguments, run, on):
    """One call: the loss returned, how many forward passes, backward passes and optimizer
    steps it made, the model afterwards (parameters and mode) and its inputs afterwards."""
    model, optimizer, loss_fn, x, y = arguments
    x_before, y_before = x.clone(), y.clone()
    counts = {"forwards": 0, "backwards": 0, "steps": 0}

    def count(name):
        counts[name] += 1

    first_layer = next(iter(model.children()))  # model.forward(x) skips model's own hooks
    handles = [
        first_layer.register_forward_hook(lambda *args: count("forwards")),
        next(model.parameters()).register_hook(lambda grad: count("backwards")),
        optimizer.register_step_post_hook(lambda *args: count("steps")),
    ]
    try:
        returned = run(answer, model, optimizer, loss_fn, x, y, on=on)
    finally:
        for handle in handles:
            handle.remove()
    return {
        "returned": describe(_a_float(returned)),
        "forward passes of the model": describe(counts["forwards"]),
        "backward passes that reached the parameters": describe(counts["backwards"]),
        "steps of the optimizer you were given": describe(counts["steps"]),
        "the model after your step": describe(model),
        "modes of the model's layers after your step": describe([m.training for m in model.modules()]),
        "the optimizer's learning rate after your step": describe(
            [float(group["lr"]) for group in optimizer.param_groups]),
        "autograd enabled after your step": describe(_grad_mode_put_back()),
        "x changed": describe(not _unchanged(x, x_before)),
        "y changed": describe(not _unchanged(y, y_before)),
    }


train_step = PublicCases(
    cases=[
        PublicCase("a float32 model in train mode, plain SGD (lr=0.2), nn.CrossEntropyLoss(), "
                   "a batch of 6", _step_case(91, "sgd", torch.float32, 0.0)),
        PublicCase("a float64 model in train mode, Adam (lr=0.01), "
                   "nn.CrossEntropyLoss(label_smoothing=0.1), a batch of 6",
                   _step_case(93, "adam", torch.float64, 0.1)),
    ],
    use=_one_step,
)


# ============================================================================================
# evaluate
# ============================================================================================
_EVAL_BATCH = 23  # a prime: the mean of unequal chunks' means is not the batch's mean
_INSIDE_NO_GRAD = "called inside the caller's torch.no_grad()"


def _eval_case(seed, training, dtype, smoothing):
    def make():  # (the case's description says whether the call runs inside torch.no_grad())
        model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.4),
                              nn.Linear(8, 3)).to(dtype)
        _seeded(model, seed)
        generator = _generator(seed + 1)
        batch_norm = model[1]
        with torch.no_grad():  # running statistics unlike any one batch's, as after 5 batches
            batch_norm.running_mean.copy_(torch.randn(8, generator=generator, dtype=dtype) * 0.5)
            batch_norm.running_var.copy_(torch.rand(8, generator=generator, dtype=dtype) + 0.5)
            batch_norm.num_batches_tracked.fill_(5)
        model.train(training)
        x = torch.randn(_EVAL_BATCH, 4, generator=generator, dtype=dtype)
        y = torch.randint(0, 3, (_EVAL_BATCH,), generator=generator)
        return model, x, y, nn.CrossEntropyLoss(label_smoothing=smoothing)
    return make


def _evaluated(answer, arguments, run, on):
    """The loss returned, whether any forward pass recorded a graph, and the model afterwards:
    parameters and buffers (batch norm's running statistics), every layer's mode and which
    parameters require grad; the grad mode (as it was before the call) and the inputs
    afterwards."""
    model, x, y, loss_fn = arguments
    x_before, y_before = x.clone(), y.clone()
    frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
    graphs = []
    first_layer = model[0]  # a hook on a layer also fires in a copy of the model

    def record(module, inputs, output, graphs=graphs):
        graphs.append(isinstance(output, torch.Tensor) and bool(output.requires_grad))

    handle = first_layer.register_forward_hook(record)
    torch.manual_seed(0)  # dropout in train mode draws from here
    torch.set_grad_enabled(_INSIDE_NO_GRAD not in on)  # (put back by the check at the end)
    try:
        returned = run(answer, model, x, y, loss_fn, on=on)
    finally:
        handle.remove()
    return {
        "returned": describe(_a_float(returned)),
        "a forward pass recorded a graph for backward()": describe(any(graphs)),
        "the model after your function ran": describe(model),
        "modes of the model's layers after your function ran": describe(
            [m.training for m in model.modules()]),
        "parameters that do not require grad after your function ran": describe(
            [name for name, p in model.named_parameters() if not p.requires_grad]),
        "parameters that did not require grad before": describe(frozen),
        "autograd enabled after your function ran": describe(_grad_mode_put_back()),
        "x changed": describe(not _unchanged(x, x_before)),
        "y changed": describe(not _unchanged(y, y_before)),
    }


def _frozen_first_layer(make):
    def made():
        model, x, y, loss_fn = make()
        model[0].requires_grad_(False)  # the caller froze it
        return model, x, y, loss_fn
    return made


evaluate = PublicCases(
    cases=[
        PublicCase("a float32 model with batch norm and dropout, in train mode, a batch of 23",
                   _eval_case(101, True, torch.float32, 0.0)),
        PublicCase("a float64 model with batch norm and dropout, in eval mode, its first layer "
                   "frozen (requires_grad=False), loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1), "
                   + _INSIDE_NO_GRAD,
                   _frozen_first_layer(_eval_case(103, False, torch.float64, 0.1))),
    ],
    use=_evaluated,
)


# ============================================================================================
# EarlyStopping
# ============================================================================================
# (description, patience, validation losses): EarlyStopping(patience) takes only the patience,
# so the losses step() gets, one per epoch, are found by the case's description.
_STOPPING = (
    ("patience=4, losses that start at inf, rise, recover and then only drift down", 4,
     [math.inf, 2.0, 1.5, 1.6, 1.2, 1.3, 1.25, 1.22, 1.21, 1.3, 1.4]),
    ("patience=5, losses that reach exactly 0.0, then stay at 0.0 or above", 5,
     [0.9, 0.0, 0.0, 0.3, 0.0, 0.2, 0.1, 0.4]),
    # strictly lower is an improvement however small: no margin, no rounding
    ("patience=4, losses that improve by tiny steps (1e-10), then stay flat", 4,
     [0.5, 0.4999999999, 0.4999999998, 0.4999999997] + [0.4999999997] * 4),
)
_LOSSES = {on: losses for on, _, losses in _STOPPING}


def _patience(patience):
    return lambda: (patience,)


def _a_number(value):
    """best_loss and best_epoch as plain numbers: NumPy numbers count as what they hold."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def _a_truth_value(value):
    """step()'s answer: a NumPy bool counts as True or False, as in the practice check."""
    return bool(value) if isinstance(value, np.bool_) else value


def _driven_through_losses(answer, arguments, run, on):
    """EarlyStopping(patience), then step() once per loss, as a training loop calls it: what
    each call answered (after the first stop only while no loss improves on the best, as a loop
    that ignored the stop would), which attributes exist right after __init__, and best_loss
    and best_epoch at the end."""
    (patience,) = arguments
    losses = _LOSSES[on]
    stopper = run(answer, patience, on=f"EarlyStopping({patience})")
    facts = {"attributes a new EarlyStopping lacks before its first step()": describe(
        [name for name in ("best_loss", "best_epoch") if not hasattr(stopper, name)])}
    answers, stopped = [], False
    for index, loss in enumerate(losses):
        if stopped and loss < min(losses[:index]):
            break  # after a stop, only calls that bring no improvement either
        answer_now = _a_truth_value(run(stopper.step, loss, on=f"{on}, after losses {losses[:index + 1]}"))
        answers.append(answer_now)
        stopped = stopped or answer_now is True
    facts["what step() returned, epoch by epoch"] = describe(answers)
    facts["best_epoch at the end"] = describe(_a_number(getattr(stopper, "best_epoch", "missing")))
    facts["best_loss at the end"] = describe(_a_number(getattr(stopper, "best_loss", "missing")))
    return facts


EarlyStopping = PublicCases(
    cases=[PublicCase(on, _patience(patience)) for on, patience, _ in _STOPPING],
    use=_driven_through_losses,
)
