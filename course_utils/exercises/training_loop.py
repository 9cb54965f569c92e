"""Chapter 04 — Training loop: the six steps, evaluation that leaves no trace, early stopping.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it. Every probe builds its own small, seeded model on the CPU, runs the learner's
code on it and on an identical copy driven by the reference, and records only plain data.
"""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, PassNote
from course_utils.exercises.running import set_up_torch_once
from course_utils.exercises.facts import same_values

CHAPTER = "training_loop"

# The checks build optimizers: torch's one-time set-up for them is paid here, in the notebook's
# import cell, not by the first check.
set_up_torch_once()


def _flat_parameters(model) -> np.ndarray:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().copy()


def _gradient_state(model):
    """'none' when no parameter holds a gradient, 'zero' when all are zero, else the values."""
    grads = [p.grad for p in model.parameters()]
    if all(g is None for g in grads):
        return "none"
    flat = torch.cat(
        [
            (torch.zeros_like(p) if g is None else g.detach()).reshape(-1)
            for p, g in zip(model.parameters(), grads)
        ]
    )
    if not bool(flat.any()):
        return "zero"
    return flat.numpy().copy()


def _returned(value) -> dict:
    """What a function that should return a loss as a Python float gave back."""
    if isinstance(value, torch.Tensor):
        facts = {"kind": "tensor", "numel": int(value.numel()), "requires_grad": bool(value.requires_grad)}
        if value.numel() == 1:
            facts["value"] = float(torch.Tensor.detach(value).reshape(-1)[0].item())
        return facts
    if isinstance(value, float):  # float and its subclasses, such as numpy.float64
        return {"kind": "float", "value": float(value)}
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    return {"kind": name}


def _returned_problem(got: dict, expected: float, *, name: str, on: str) -> str | None:
    if got["kind"] == "NoneType":
        return Mistake("returns-none", f"{name} returned None (on {on}); end it with `return loss.item()`.")
    if got["kind"] == "tensor":
        extra = (
            " that still records a graph (requires_grad=True)" if got.get("requires_grad") else ""
        )
        return Mistake("returns-tensor", (
            f"{name} returned the loss as a tensor{extra} (on {on}); return a Python float "
            "with loss.item(). A float is just a number to log and plot; a loss tensor kept for "
            "logging can keep its whole graph in memory, step after step."
        ))
    if got["kind"] != "float":
        return Mistake("returns-not-a-float", (
            f"{name} returned {got['kind']} (on {on}); return the loss as a Python float: loss.item()."
        ))
    if not same_values(got["value"], expected, rtol=1e-4, atol=1e-6):
        return Mistake("returns-another-loss", (
            f"{name} returned {got['value']:.6g} (on {on}); the loss of this batch is "
            f"{expected:.6g}. Return the loss computed in this call's forward pass, as loss.item()."
        ))
    return None


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


def _step_model(dtype=torch.float32):
    torch.manual_seed(4)  # the check restores the learner's random state afterwards
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)).to(dtype)


def _step_batches(dtype=torch.float32, seed=40):
    generator = torch.Generator().manual_seed(seed)
    x1, x2 = torch.randn(8, 4, generator=generator), torch.randn(8, 4, generator=generator)
    y1 = torch.randint(0, 3, (8,), generator=generator)
    y2 = torch.randint(0, 3, (8,), generator=generator)
    return (x1.to(dtype), y1), (x2.to(dtype), y2)


def _gradient_at(model, x, y) -> np.ndarray:
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy().copy()


# (what the two calls are given, optimizer, model dtype, loss_fn)
_STEP_PHASES = (
    ("plain SGD (lr=0.5), a float32 model and nn.CrossEntropyLoss()", "sgd", torch.float32, None),
    (
        "Adam (lr=0.05), whose state carries over from step to step, a float64 model and "
        "nn.CrossEntropyLoss(label_smoothing=0.2)",
        "adam",
        torch.float64,
        0.2,
    ),
)


def _given_training(setting) -> bool:
    """The mode the model arrives in: train mode, except where the setting says eval mode.

    Every setting gives train mode: calling model.train() at the top of a training step is a
    common, sound habit, so the check does not fail it; model.eval() inside the step is caught."""
    return "eval mode" not in setting
_STEP_CALLS = (
    "the first call, with no gradients stored yet",
    "the second call, on the next batch with the same model and optimizer",
)


def _make_optimizer(kind, parameters):
    if kind == "sgd":
        return torch.optim.SGD(parameters, lr=_LR, momentum=0.0)
    return torch.optim.Adam(parameters, lr=_ADAM_LR)


def _probe_train_step(answer, run):
    phases = []
    for setting, kind, dtype, smoothing in _STEP_PHASES:
        model = _step_model(dtype)
        if kind == "sgd":  # larger weights: a gradient of norm well above 1 (about 1.8), so
            with torch.no_grad():  # that clipping it to norm 1 changes the step
                model[0].weight.mul_(5)
                model[2].weight.mul_(5)
        training = _given_training(setting)
        model.train(training)
        reference_model = copy.deepcopy(model)
        optimizer = _make_optimizer(kind, model.parameters())
        reference_optimizer = _make_optimizer(kind, reference_model.parameters())
        loss_fn = nn.CrossEntropyLoss(label_smoothing=smoothing or 0.0)
        if smoothing:  # the same steps with a loss of the learner's own instead of loss_fn
            own_loss_model = copy.deepcopy(model)
            own_loss_optimizer = _make_optimizer(kind, own_loss_model.parameters())
        counts = {"forwards": 0, "eval_forwards": 0, "train_forwards": 0, "backwards": 0, "steps": 0}

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

        calls = []
        for index, (on, (x, y)) in enumerate(zip(_STEP_CALLS, _step_batches(dtype))):
            on = f"{on}; {setting}"
            before = copy.deepcopy(reference_model)
            for name in counts:
                counts[name] = 0
            given_x, given_y = x.clone(), y.clone()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                returned = run(answer, model, optimizer, loss_fn, given_x, given_y, on=on)
            scalar_warning = _shown_unless_scalar_warning(caught)
            got = {
                "on": on,
                "returned": _returned(returned),
                "parameters": _flat_parameters(model),
                "gradients": _gradient_state(model),
                "grad_enabled_after": torch.is_grad_enabled(),
                "given_training": training,
                "dtype": str(dtype).replace("torch.", ""),
                "dtypes_after": sorted({str(p.dtype).replace("torch.", "") for p in model.parameters()}),
                "lr": float(optimizer.defaults["lr"]),
                "lr_after": [float(group["lr"]) for group in optimizer.param_groups],
                "training_after": all(m.training for m in model.modules()),
                "any_training_after": any(m.training for m in model.modules()),
                "inputs_changed": [
                    name for name, given, kept in (("x", given_x, x), ("y", given_y, y))
                    if not (given.shape == kept.shape and given.dtype == kept.dtype
                            and given.requires_grad == kept.requires_grad
                            and bool(torch.equal(given, kept)))
                ],
                "scalar_warning": scalar_warning,
                **counts,
            }
            torch.set_grad_enabled(True)
            got["expected_loss"] = _train_step(reference_model, reference_optimizer, loss_fn, x, y)
            got["expected"] = _flat_parameters(reference_model)
            got["before"] = _flat_parameters(before)
            if kind == "sgd":
                got["gradient"] = _gradient_at(before, x, y)
            else:
                if index == 1:  # what a new Adam, made inside the call, would have done
                    fresh = copy.deepcopy(before)
                    _train_step(fresh, _make_optimizer(kind, fresh.parameters()), loss_fn, x, y)
                    got["fresh_optimizer"] = _flat_parameters(fresh)
                _train_step(own_loss_model, own_loss_optimizer, nn.functional.cross_entropy, x, y)
                got["own_loss"] = _flat_parameters(own_loss_model)
            calls.append(got)
            record = {"lr": _LR, "phases": phases + [{"kind": kind, "calls": calls}]}
            if _problem(_judge_train_step(record)):  # what is wrong shows already: stop
                return record  # here, so that an error on a later input does not hide it
        phases.append({"kind": kind, "calls": calls})
    return {"lr": _LR, "phases": phases}


def _judge_step_call(call, *, kind, lr, index, first_gradient):
    on, before = call["on"], call["before"]
    params, gradients = call["parameters"], call["gradients"]
    if call["forwards"] == 0:
        return Mistake("ignores-given-model", (
            f"Your function never ran the model it was given (on {on}). Use its arguments "
            "(model, optimizer, loss_fn, x, y), not variables of the notebook with the same "
            "purpose."
        ))
    if call["inputs_changed"]:
        name = call["inputs_changed"][0]
        return Mistake("changes-input-in-place", (
            f"Your function changed its input {name} in place (on {on}). The caller still uses "
            f"the batch (to log, to plot, for another model): leave {name} as it was given."
        ))
    if not call["grad_enabled_after"]:
        return Mistake("leaves-grad-disabled", (
            f"Your function left autograd switched off (on {on}): after it returned, "
            "torch.is_grad_enabled() was False, so the next training step cannot compute "
            "gradients. Use `with torch.no_grad():` blocks, which switch it back on, rather "
            "than torch.set_grad_enabled(False)."
        ))
    if call.get("eval_forwards"):
        return Mistake("trains-in-eval-mode", (
            f"The forward pass ran with the model in eval mode (on {on}), although it was given "
            "in train mode: a training step trains in the mode it is given. In eval mode dropout "
            "is off and batch norm stops learning its statistics; leave the mode alone in "
            "train_step (no model.eval())."
        ))
    if call.get("dtypes_after", [call.get("dtype")]) != [call.get("dtype")]:
        return Mistake("converts-model-dtype", (
            f"Your function changed the model's dtype (on {on}): it was given as {call['dtype']} "
            f"and its parameters are {', '.join(call['dtypes_after'])} after the call (.float(), "
            ".double() and .to(dtype) convert a module in place, for the caller too). Train the "
            "model as it is given, on the x it is given: they have the same dtype."
        ))
    if any(value != call.get("lr") for value in call.get("lr_after", [])):
        return Mistake("changes-learning-rate", (
            f"After your function ran (on {on}), the optimizer's learning rate was "
            f"{call['lr_after'][0]:g} instead of {call['lr']:g}: your function changed it, so "
            "every later step uses that rate too. Leave the optimizer's settings alone in "
            "train_step (a learning-rate schedule is the caller's business)."
        ))
    if call.get("train_forwards"):
        return Mistake("forces-train-mode", (
            f"The forward pass ran with the model in train mode (on {on}), although it was given "
            "in eval mode: you switched it with model.train(). A training step trains in the "
            "mode it is given (a caller may have switched dropout off on purpose); leave the "
            "mode alone in train_step."
        ))
    if call.get("given_training") is False and call.get("any_training_after"):
        return Mistake("forces-train-mode", (
            f"Your function gave the model back in train mode (on {on}), although it was given "
            "in eval mode. Leave the mode as it was given: no model.train() in train_step."
        ))
    if call.get("given_training", True) and not call.get("training_after", True):
        return Mistake("leaves-eval-mode", (
            f"Your function gave the model back in eval mode (on {on}), although it was given in "
            "train mode: every later training step would then run without dropout and without "
            "batch norm learning. Leave the mode as it was given."
        ))
    unchanged = same_values(params, before, rtol=0, atol=0)
    if call["backwards"] == 0:
        return Mistake("no-backward", (
            f"backward() never ran (on {on}), so no gradient reached .grad"
            + (" and the parameters did not change" if unchanged else "")
            + ". Call loss.backward() once, after the loss and before optimizer.step()."
        ))
    if call["steps"] == 0:
        if unchanged:
            # With Adam (the second phase), the SGD phase's steps ran: an optimizer other than
            # the one given now (kept from an earlier call) took them.
            mistake = "no-optimizer-step" if kind == "sgd" else "ignores-given-optimizer"
            return Mistake(mistake, (
                f"The parameters did not change (on {on}): optimizer.step() of the optimizer you "
                "were given never ran. Call optimizer.step() after backward(): it is the step "
                "that actually moves the parameters."
            ))
        return Mistake("ignores-given-optimizer", (
            f"The parameters moved (on {on}), but the optimizer you were given never took a "
            "step: you updated them another way (by hand, or with an optimizer of your own). "
            "Call optimizer.step() on the `optimizer` argument: it may be Adam or have "
            "momentum, and only it keeps that state from step to step."
        ))
    if unchanged:
        if isinstance(gradients, str):
            return Mistake("zero-grad-between-backward-and-step", (
                f"The parameters did not change (on {on}), and afterwards no gradient was "
                "left in .grad. You cleared the gradients between backward() and step(): "
                "step() then finds nothing to apply. Clear them before backward() (or after "
                "step()), never between the two."
            ))
        return Mistake("step-before-backward", (
            f"The parameters did not change (on {on}), although optimizer.step() ran and "
            "backward() filled .grad: step() ran before backward(), when there was no new "
            "gradient to apply yet. The order is zero_grad(), backward(), step()."
        ))
    if call["steps"] > 1:
        return Mistake("several-steps", (
            f"optimizer.step() ran {call['steps']} times in one call (on {on}); one training "
            "step is one optimizer.step()."
        ))
    if kind == "sgd":
        gradient = call["gradient"]
        if index == 1 and same_values(params, before - lr * (gradient + first_gradient)):
            return Mistake("no-zero-grad", (
                f"On {on}, your update used the sum of both batches' gradients: gradients "
                "accumulate. backward() adds to .grad, so without optimizer.zero_grad() every "
                "step also applies all the earlier gradients again. Clear them once per batch, "
                "before backward()."
            ))
        if call["backwards"] > 1 and same_values(params, before - call["backwards"] * lr * gradient):
            return Mistake("several-backwards", (
                f"backward() ran {call['backwards']} times in one call (on {on}), and the "
                f"update was {call['backwards']} SGD steps' worth: each backward() adds its "
                "gradient to .grad. Call backward() once per step, on one forward pass's loss."
            ))
        if same_values(params, before + lr * gradient):
            return Mistake("ascends-gradient", (
                f"Your update went up the gradient (on {on}); optimizer.step() goes down it."
            ))
        update = (before - params) / lr
        length, norm = float(np.linalg.norm(update)), float(np.linalg.norm(gradient))
        if (
            index == 0 and length > 0 and norm > 0 and abs(length - norm) > 1e-3 * norm
            and float(update @ gradient) / (length * norm) > 0.9999  # the same direction
        ):
            return Mistake("rescales-gradient", (
                f"Your step goes the way of this batch's gradient, but is {length / norm:.3g} "
                f"times its length (on {on}; the gradient has norm {norm:.3g}): something "
                "rescaled it, such as gradient clipping (clip_grad_norm_) or a factor on the "
                "loss. One training step applies the gradient as it is: forward, loss, "
                "zero_grad(), backward(), step()."
            ))
    elif not same_values(params, call["expected"]):
        if "own_loss" in call and same_values(params, call["own_loss"]):
            return Mistake("ignores-loss-fn", (
                f"Your step followed plain cross entropy, not the loss_fn you were given (on "
                f"{on}): this loss_fn uses label smoothing. Compute the loss with "
                "loss_fn(prediction, y)."
            ))
        if "fresh_optimizer" in call and same_values(params, call["fresh_optimizer"]):
            return Mistake("new-optimizer-each-call", (
                f"On {on}, your step is what a brand-new Adam takes: its running averages of "
                "the earlier gradients were lost. Use the optimizer you were given, every "
                "call; don't create one inside train_step."
            ))
    if call["backwards"] > 1:
        return Mistake("several-backwards", (
            f"backward() ran {call['backwards']} times in one call (on {on}); call it once per "
            "step, on the loss of this call's forward pass."
        ))
    if not same_values(params, call["expected"]):
        return Mistake("wrong-update", (
            f"After your function ran (on {on}), the parameters are not what one optimizer step "
            "on this batch gives. Do forward, loss (with loss_fn), zero_grad(), backward(), "
            "step(), once each."
        ))
    problem = _returned_problem(call["returned"], call["expected_loss"], name="train_step", on=on)
    if problem is None and call["forwards"] > 1:
        return Mistake("several-forwards", (
            f"The model ran {call['forwards']} forward passes in one call (on {on}); one training "
            "step is one forward pass. Compute the loss once, call backward() on it and return "
            "its .item(): another pass costs time, and with dropout its loss is not the one you "
            "trained on."
        ))
    return problem


def _judge_train_step(record):
    lr = record["lr"]
    for phase in record["phases"]:
        first_gradient = phase["calls"][0].get("gradient")
        for index, call in enumerate(phase["calls"]):
            problem = _judge_step_call(
                call, kind=phase["kind"], lr=lr, index=index, first_gradient=first_gradient
            )
            if problem:
                return problem
    if any(call.get("scalar_warning") for phase in record["phases"] for call in phase["calls"]):
        return PassNote(
            "torch warned \"Converting a tensor with requires_grad=True to a scalar may lead to "
            "unexpected behavior\": float(loss) on a loss that is part of the graph. loss.item() "
            "gives the same number without the warning."
        )
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


def _problem(judged) -> bool:
    """A judge's answer that means failed: a message, not None and not a note on a pass."""
    return judged is not None and not isinstance(judged, PassNote)


train_step = Exercise(
    "train_step",
    chapter=CHAPTER,
    title="One training step",
    expects=Function(
        "train_step", ("model", "optimizer", "loss_fn", "x", "y"), returns="the loss as a Python float"
    ),
    probe=_probe_train_step,
    judge=_judge_train_step,
    reference=train_step,
    passed_message=(
        "Correct: one forward, one loss, cleared gradients, one backward, one step, and the "
        "loss returned as a float. Two calls in a row give exactly two optimizer steps, with "
        "plain SGD as with Adam."
    ),
    hints=[
        "The steps are: forward (model(x)), loss (loss_fn(prediction, y)), clear the old "
        "gradients, backward, step. The batch (x, y) is given to you.",
        "The optimizer clears the gradients of the parameters it was given: "
        "optimizer.zero_grad(). Do it before loss.backward(), or after optimizer.step(), but "
        "never between backward() and step().",
        "Return the loss as a Python float, read after the step: the tensor's .item() "
        "(float(loss) works too, but warns on a tensor that requires grad). Check the order "
        "against chapter 04's six steps before you look at the solution.",
    ],
    error_notes=[
        (
            "backward through the graph a second time",
            "loss.backward() called twice on one forward pass. Call it once per step.",
            "second-backward",
        ),
        (
            "not implemented for 'Long'",
            "the loss received the integer class labels where it expects the model's output. "
            "A loss function takes (prediction, target), in that order: "
            "loss_fn(model(x), y).",
            "loss-arguments-swapped",
        ),
        (
            "does not require grad and does not have a grad_fn",
            "the forward pass ran inside torch.no_grad(), or the loss was detached (.item(), "
            ".detach()) before backward(). Keep the loss tensor for backward(); call .item() "
            "only on the value you return.",
            "loss-not-recorded",
        ),
        (
            "must have the same dtype",
            "the model and the batch you were given have the same dtype (float64 in this "
            "check), so the mismatch comes from a conversion in your code (.float(), dtype=...) "
            "or from a tensor or model of the notebook used instead of the arguments.",
            "dtype-converted",
        ),
    ],
)


# ============================================================================================
# L4 — validation: eval() and no_grad, then back to the mode the model was in
# ============================================================================================
def evaluate(model, x, y, loss_fn):
    was_training = model.training    # remember the mode the caller left the model in
    model.eval()                     # dropout off, batch norm uses its running statistics
    with torch.no_grad():            # no graph: nothing to backpropagate, less memory
        loss = loss_fn(model(x), y)
    model.train(was_training)        # give the model back as you found it
    return loss.item()


_evaluate = evaluate


def _eval_model(dtype=torch.float32):
    torch.manual_seed(7)
    model = nn.Sequential(
        nn.Linear(5, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3)
    ).to(dtype)
    generator = torch.Generator().manual_seed(70)
    bn = model[1]
    with torch.no_grad():  # running statistics that differ from any one batch's, as after 3 batches
        bn.running_mean.copy_(torch.randn(16, generator=generator) * 0.5)
        bn.running_var.copy_(torch.rand(16, generator=generator) + 0.5)
        bn.num_batches_tracked.fill_(3)
    return model


def _batch_norm_state(model) -> dict:
    bn = model[1]
    return {
        "running_mean": bn.running_mean.detach().double().numpy().copy(),
        "running_var": bn.running_var.detach().double().numpy().copy(),
        "num_batches_tracked": int(bn.num_batches_tracked),
    }


# (input, mode the model arrives in, dtype, label smoothing of loss_fn, a new model or the last)
_EVAL_CASES = (
    ("a float32 model in train mode, as it is during training", True, torch.float32, 0.0, True),
    ("the same model in train mode again, after a training step changed its weights, called "
     "inside the caller's own torch.no_grad()", True, torch.float32, 0.0, False),
    (
        "a float64 model in eval mode whose first layer is frozen (requires_grad=False), with "
        "loss_fn = nn.CrossEntropyLoss(label_smoothing=0.2)",
        False,
        torch.float64,
        0.2,
        True,
    ),
    ("the same float64 model, now back in train mode", True, torch.float64, 0.2, False),
)
_EVAL_BATCH = 61  # a prime: a mean of equal chunks' means would not be the batch's mean


def _probe_evaluate(answer, run):
    generator = torch.Generator().manual_seed(71)
    x = torch.randn(_EVAL_BATCH, 5, generator=generator)
    y = torch.randint(0, 3, (_EVAL_BATCH,), generator=generator)
    cases = []
    model = None
    for on, training, dtype, smoothing, new in _EVAL_CASES:
        if new:  # otherwise the call reuses the previous call's model
            model = _eval_model(dtype)
            if "frozen" in on:
                model[0].requires_grad_(False)
            seen, outer = [], []

            def record_forward(module, inputs, output, seen=seen, outer=outer, index=0):
                # Each module reads its own flag, so a copy of the model (copy.deepcopy copies
                # these hooks too) reports the mode of the copy that ran.
                if index == 0:
                    seen.append(
                        {
                            "grad_enabled": torch.is_grad_enabled(),
                            "graph": isinstance(output, torch.Tensor) and bool(output.requires_grad),
                            "outer": outer[-1] if outer else None,  # model(x): its own flag
                            "training": [],  # each layer's flag, as the layer ran
                        }
                    )
                    outer.clear()
                if seen:
                    seen[-1]["training"].append(bool(module.training))

            # The outer module's flag, when it is called as model(x) (model.forward(x) skips it).
            model.register_forward_pre_hook(
                lambda module, inputs, outer=outer: outer.append(bool(module.training))
            )
            for index, layer in enumerate(model):
                layer.register_forward_hook(  # bound to this model's record, not a later one's
                    lambda m, i, o, index=index, record=record_forward: record(m, i, o, index=index)
                )
        if "changed its weights" in on:  # as a training step between two validations does
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(0.8)
        model.train(training)
        frozen_before = [n for n, p in model.named_parameters() if not p.requires_grad]
        if new:  # a later call on the same model gets the same batch and loss_fn objects, as
            # validation does epoch after epoch: a cache keyed on them would answer from memory
            loss_fn = nn.CrossEntropyLoss(label_smoothing=smoothing)
            given_x, given_y = x.to(dtype).clone(), y.clone()
        reference_model = copy.deepcopy(model)
        seen.clear()
        stats_before = _batch_norm_state(model)
        torch.manual_seed(72)  # dropout in train mode draws from here
        grad_before = "no_grad" not in on
        torch.set_grad_enabled(grad_before)
        returned = run(answer, model, given_x, given_y, loss_fn, on=on)
        forwards = list(seen)  # before the reference runs its copy (with a copy of the hook)
        grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        case = {
            "on": on,
            "training_before": training,
            "returned": _returned(returned),
            "expected_loss": _evaluate(reference_model, x.to(dtype), y, loss_fn),
            "forwards": forwards,
            "grad_enabled_before": grad_before,
            "grad_enabled_after": grad_enabled_after,
            "frozen_before": frozen_before,
            "frozen_after": [n for n, p in model.named_parameters() if not p.requires_grad],
            "inputs_changed": [
                name for name, given, kept in (("x", given_x, x.to(dtype)), ("y", given_y, y))
                if not (given.shape == kept.shape and given.dtype == kept.dtype
                        and bool(torch.equal(given, kept)))
            ],
            "training_after": bool(model.training),
            "modules_training_after": [bool(m.training) for m in model.modules()],
            "dtype": str(dtype).replace("torch.", ""),
            "dtypes_after": sorted({str(t.dtype).replace("torch.", "")
                                    for t in list(model.parameters()) + list(model.buffers())
                                    if t.is_floating_point()}),
            "stats_before": stats_before,
            "stats_after": _batch_norm_state(model),
        }
        if smoothing:
            case["plain_loss"] = _evaluate(reference_model, x.to(dtype), y, nn.CrossEntropyLoss())
        cases.append(case)
        if _judge_evaluate(cases) is not None:  # stop at the first input that shows a mistake
            break
    return cases


def _stale_answer(case, previous):
    """The previous call's number again, on the same model whose weights changed since."""
    returned = case["returned"]
    if (
        previous is None or "changed its weights" not in case["on"]
        or returned.get("kind") != "float" or previous["returned"].get("kind") != "float"
        or returned["value"] != previous["returned"]["value"]
        or same_values(returned["value"], case["expected_loss"], rtol=1e-4, atol=1e-6)
    ):
        return None
    ran = "" if case["forwards"] else " without running the model"
    return Mistake("caches-the-loss", (
        f"evaluate returned {returned['value']:.6g} again{ran} (on {case['on']}): the number of "
        f"the previous call, although the weights changed since; the loss now is "
        f"{case['expected_loss']:.6g}. Compute the loss on every call (no cache): validation "
        "runs after each epoch precisely because the model keeps changing."
    ))


def _judge_evaluate(cases):
    for index, case in enumerate(cases):
        on, forwards = case["on"], case["forwards"]
        stale = _stale_answer(case, cases[index - 1] if index else None)
        if stale:
            return stale
        if not forwards:
            return Mistake("ignores-given-model", (
                f"Your function never ran the model it was given (on {on}). Use its arguments "
                "(model, x, y, loss_fn), not variables of the notebook."
            ))
        if case["inputs_changed"]:
            name = case["inputs_changed"][0]
            return Mistake("changes-input-in-place", (
                f"Your function changed its input {name} in place (on {on}); evaluation must "
                f"leave the batch as it was given."
            ))
        if case.get("dtypes_after", [case.get("dtype")]) != [case.get("dtype")]:
            return Mistake("converts-model-dtype", (
                f"Your function changed the model's dtype (on {on}): it was given as "
                f"{case['dtype']} and its weights are {', '.join(case['dtypes_after'])} after the "
                "call (.float(), .double() and .to(dtype) convert a module in place). Evaluation "
                "must leave the model as it was: run it as it is given, on the x it is given."
            ))
        if any(any(f["training"]) for f in forwards):  # what the layers did, whatever the outer flag
            before, after = case["stats_before"], case["stats_after"]
            moved = after["num_batches_tracked"] - before["num_batches_tracked"]
            stats = (
                f" Batch norm also updated its running statistics (num_batches_tracked went "
                f"from {before['num_batches_tracked']} to {after['num_batches_tracked']}): "
                "evaluating changed the model."
                if moved
                else ""
            )
            if not all(forwards[0]["training"]):
                mistake, layers = "eval-on-some-layers", "some of its layers were in train mode"
            elif forwards[0].get("outer") is False:
                mistake, layers = "sets-training-flag-only", (
                    "model.training was False, but its layers were in train mode: setting the "
                    "flag changes only the outer module"
                )
            else:
                layers = "the model was in train mode"
                # A later pass in eval mode: model.eval() came, but after a first forward pass.
                later_eval = any(not any(f["training"]) for f in forwards[1:])
                mistake = "forward-before-eval" if later_eval else "forgot-eval-mode"
            return Mistake(mistake, (
                f"The forward pass ran in train mode (on {on}: {layers}): call model.eval() "
                "before it. Dropout then zeroes random units, so the loss changes from call to "
                f"call, and batch norm normalises with this batch's statistics.{stats}"
            ))
        if any(f["graph"] for f in forwards):
            return Mistake("forgot-no-grad", (
                f"The forward pass recorded a graph for backward() (on {on}): wrap it in "
                "`with torch.no_grad():`. model.eval() changes what dropout and batch norm do; "
                "it does not stop autograd, so without no_grad every activation is kept."
            ))
        if not case["grad_enabled_before"] and case["grad_enabled_after"]:
            return Mistake("forces-grad-on", (
                f"Your function switched autograd on for its caller (on {on}): it was off when "
                "your function was called and on after it returned. Don't switch it with "
                "torch.set_grad_enabled(...); `with torch.no_grad():` puts back whatever state "
                "it found."
            ))
        if case["grad_enabled_before"] and not case["grad_enabled_after"]:
            return Mistake("leaves-grad-disabled", (
                f"Your function left autograd switched off (on {on}): after it returned, "
                "torch.is_grad_enabled() was False, so the next training step would compute no "
                "gradients. Use `with torch.no_grad():`, which switches it back on at the end "
                "of the block, rather than torch.set_grad_enabled(False)."
            ))
        frozen_before = case.get("frozen_before", [])
        frozen = [n for n in case["frozen_after"] if n not in frozen_before]
        if frozen:
            return Mistake("freezes-parameters", (
                f"After your function ran (on {on}), {frozen[0]} (and "
                f"{len(frozen) - 1} more parameters) had requires_grad=False: "
                "training could no longer update them. Don't freeze the parameters to avoid a "
                "graph; use `with torch.no_grad():`, which changes nothing in the model."
            ))
        unfrozen = [n for n in frozen_before if n not in case["frozen_after"]]
        if unfrozen:
            return Mistake("unfreezes-parameters", (
                f"After your function ran (on {on}), {unfrozen[0]} had requires_grad=True, but "
                "the caller had frozen it (requires_grad=False): training would now update a "
                "layer meant to stay fixed. Leave requires_grad as you found it; `with "
                "torch.no_grad():` avoids the graph without changing anything in the model."
            ))
        returned = case["returned"]
        if (
            len(forwards) > 1 and returned.get("kind") == "float"
            and not same_values(returned["value"], case["expected_loss"], rtol=1e-4, atol=1e-6)
        ):
            return Mistake("mean-of-unequal-chunks", (
                f"evaluate returned {returned['value']:.6g} (on {on}), after running the model "
                f"{len(forwards)} times; the loss of the whole batch is "
                f"{case['expected_loss']:.6g}. If you split the batch, weight each part's "
                "mean loss by its number of examples: parts of unequal size do not average to the "
                "batch's mean."
            ))
        if (
            "plain_loss" in case and returned.get("kind") == "float"
            and not same_values(returned["value"], case["expected_loss"], rtol=1e-4, atol=1e-6)
            and same_values(returned["value"], case["plain_loss"], rtol=1e-4, atol=1e-6)
        ):
            return Mistake("ignores-loss-fn", (
                f"evaluate returned {returned['value']:.6g} (on {on}): plain cross entropy, not "
                f"the loss_fn you were given ({case['expected_loss']:.6g} with its label "
                "smoothing). Compute the loss with loss_fn(model(x), y)."
            ))
        problem = _returned_problem(returned, case["expected_loss"], name="evaluate", on=on)
        if problem:
            return problem
        if not (
            same_values(case["stats_before"]["running_mean"], case["stats_after"]["running_mean"])
            and same_values(case["stats_before"]["running_var"], case["stats_after"]["running_var"])
        ):
            return Mistake("updates-batch-norm-stats", (
                f"Batch norm's running statistics changed (on {on}); evaluation must not change the model."
            ))
        if case["training_before"] and not case["training_after"]:
            # After an earlier call that came in train mode and left it so: a mode remembered
            # from another call, not this one's.
            restored_before = any(c["training_before"] for c in cases[:index])
            return Mistake("restores-a-stale-mode" if restored_before else "leaves-eval-mode", (
                f"Your function left the model in eval mode (on {on}). The next training epoch "
                "would then run without dropout and would stop updating batch norm. Put it back: "
                "remember model.training first and call model.train(was_training) at the end."
            ))
        if case["training_before"] and not all(case["modules_training_after"]):
            return Mistake("restores-outer-flag-only", (
                f"The model says training=True, but some of its layers are still in eval mode "
                f"(on {on}): setting model.training = True changes only the outer module. Call "
                "model.train(), which sets the flag on every layer."
            ))
        if not case["training_before"] and any(case["modules_training_after"]):
            return Mistake("always-train-at-end", (
                f"Your function was given {on} and gave it back in train mode: you call "
                "model.train() at the end whatever the mode was. Remember it first "
                "(was_training = model.training) and restore exactly that: "
                "model.train(was_training)."
            ))
    return None


evaluate = Exercise(
    "evaluate",
    chapter=CHAPTER,
    title="Evaluate without side effects",
    expects=Function("evaluate", ("model", "x", "y", "loss_fn"), returns="the loss as a Python float"),
    probe=_probe_evaluate,
    judge=_judge_evaluate,
    reference=evaluate,
    passed_message=(
        "Correct: eval mode for dropout and batch norm, no graph, and the model handed back in "
        "the mode it came in."
    ),
    hints=[
        "Three things: eval mode for the forward pass, no graph recorded, and the model's mode "
        "put back afterwards. model.training tells you which mode it is in now.",
        "model.eval() switches dropout and batch norm to inference behaviour; "
        "`with torch.no_grad():` stops autograd; model.train(mode) sets the mode to mode.",
        "was_training = model.training; model.eval(); with torch.no_grad(): loss = "
        "loss_fn(model(x), y); then model.train(was_training); return loss.item()",
    ],
    error_notes=[
        (
            "training mode is expected to be boolean",
            "model.train(mode) takes True or False: read was_training = model.training before "
            "model.eval(), and give it back with model.train(was_training).",
            "mode-not-boolean",
        ),
        (
            "Expected more than 1 value per channel",
            "batch norm in train mode on a batch of one example; evaluate in eval mode.",
            "batch-norm-in-train-mode",
        ),
        (
            "must have the same dtype",
            "the model and the batch you were given have the same dtype (float64 in one of "
            "this check's cases), so the mismatch comes from a conversion in your code "
            "(.float(), dtype=...) or from a tensor or model of the notebook used instead.",
            "dtype-converted",
        ),
    ],
)


# ============================================================================================
# L5 — early stopping
# ============================================================================================
class EarlyStopping:
    def __init__(self, patience):
        self.patience = patience
        self.best_loss = math.inf
        self.best_epoch = None
        self.epoch = 0
        self.bad_epochs = 0          # epochs since the best one

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:   # strictly lower: an equal loss is no progress
            self.best_loss = val_loss
            self.best_epoch = self.epoch
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


_EarlyStopping = EarlyStopping

_ALL_INF = "losses that are all inf (a run that diverged from the start)"
_REACHES_ZERO = "a loss that reaches exactly 0.0"
_TINY_STEPS = "a loss that improves by tiny steps"

# (name, patience, validation losses): each separates the right rule from one classic mistake.
_STOPPING_CASES = (
    ("a loss that rises every epoch", 3, [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]),
    ("a loss that recovers before patience runs out", 3, [1.0, 0.8, 0.85, 0.7, 0.6, 0.65, 0.66, 0.67, 0.5, 0.4]),
    ("a loss that drifts down but never beats its best", 2, [1.0, 0.5, 0.9, 0.8, 0.7, 0.6, 0.55, 0.52]),
    ("a loss that stays flat", 2, [0.7, 0.7, 0.7, 0.7, 0.7, 0.7]),
    ("patience=1", 1, [0.9, 0.6, 0.61, 0.3]),
    # A best of exactly 0.0 is falsy: `if not self.best_loss` would take it for "no best yet".
    (_REACHES_ZERO, 2, [0.5, 0.0, 0.1, 0.2, 0.3]),
    # Strictly lower is an improvement however small: no margin (min_delta), no rounding. Steps
    # of 1e-10 catch a margin of 1e-8 and rounding to up to 9 decimals alike.
    (_TINY_STEPS, 2, [0.5, 0.4999999999, 0.4999999998, 0.4999999998, 0.4999999998, 0.4999999998]),
    # A diverged run: no loss ever beats math.inf, so the count's starting value decides.
    (_ALL_INF, 2, [math.inf] * 5),
)


def _run_stopper(make, patience, losses, run, on):
    stopper = run(make, patience, on=f"EarlyStopping({patience})")
    missing_after_init = [n for n in ("best_loss", "best_epoch") if not hasattr(stopper, n)]
    answers, stop = [], None
    for loss in losses:
        if stop is not None and loss < min(losses[: len(answers)]):
            break  # after a stop, only the calls that bring no improvement either
        answer = run(stopper.step, loss, on=f"{on}, after losses {losses[: len(answers) + 1]}")
        if type(answer) is np.bool_:  # a comparison of NumPy numbers: True/False all the same
            answer = bool(answer)
        answers.append(answer)
        if stop is None and answer is True:
            stop = len(answers)
    kinds = [type(a).__name__ for a in answers]
    # What step() said on the later calls, none of which improved on the best either.
    after_stop = [bool(a) if type(a) is bool else repr(a) for a in answers[stop:]] if stop else []
    best_epoch = getattr(stopper, "best_epoch", "missing")
    best_loss = getattr(stopper, "best_loss", "missing")
    return {
        "missing_after_init": missing_after_init,
        "kinds": kinds,
        "stop": stop,
        "after_stop": after_stop,
        "best_epoch": best_epoch if type(best_epoch) is int else repr(best_epoch),
        "best_loss": float(best_loss) if isinstance(best_loss, (int, float)) and type(best_loss) is not bool else repr(best_loss),
    }


def _probe_early_stopping(answer, run):
    # The first sequence twice, on two objects one after the other: state kept on the class or
    # in a global (not on self) carries over from one EarlyStopping to the next.
    on, patience, losses = _STOPPING_CASES[0]
    shared = {  # containers on the class itself, which every object shares
        name: copy.copy(value)
        for name, value in (vars(answer).items() if isinstance(answer, type) else ())
        if type(value) in (list, dict, set)
    }
    first = _run_stopper(answer, patience, losses, run, on)
    changed = sorted(name for name, kept in shared.items() if getattr(answer, name, None) != kept)
    again = _run_stopper(answer, patience, losses, run, f"{on}, on a second EarlyStopping")
    again["class_attributes_changed"] = changed
    cases = []
    for on, patience, losses in _STOPPING_CASES:
        cases.append(
            {
                "on": f"{on} (patience={patience}, losses {losses})",
                "patience": patience,
                "losses": list(losses),
                "got": first if not cases else _run_stopper(answer, patience, losses, run, on),
                "expected": _run_stopper(_EarlyStopping, patience, losses, run, on),
            }
        )
        if _judge_early_stopping({"cases": cases, "again": again}) is not None:
            break  # stop at the first slip shown, so that an error later does not hide it
    return {"cases": cases, "again": again}


def _first_rise(losses):
    return next((i + 1 for i in range(1, len(losses)) if losses[i] > losses[i - 1]), None)


def _judge_all_inf(on, got, expected, patience):
    """A first loss of inf is no improvement on math.inf, or (with a best that starts empty)
    the first best: both readings are correct, as long as the count starts at 0."""
    stop, right, best_epoch = got["stop"], expected["stop"], got["best_epoch"]
    no_best = best_epoch in ("None", 0)
    if got["best_loss"] != expected["best_loss"]:
        return Mistake("wrong-best-loss", (
            f"After {on}, best_loss is {got['best_loss']}; expected {expected['best_loss']}, "
            "the lowest loss seen so far."
        ))
    if (stop == right and no_best) or (right is not None and stop == right + 1 and best_epoch == 1):
        return None
    said = "never said stop" if stop is None else f"said stop after epoch {stop}"
    if no_best and stop is not None and right is not None and stop < right:
        return Mistake("count-not-from-zero", (
            f"Your EarlyStopping {said} on {on}; it should stop after epoch {right}. No loss "
            "improved on the best, so each epoch adds 1 to the count of epochs without "
            f"improvement, and it reaches patience={patience} after epoch {right}: your count "
            "does not start at 0. Set it to 0 in __init__."
        ))
    if no_best and (stop is None or (right is not None and stop > right)):
        return Mistake("count-not-from-zero", (
            f"Your EarlyStopping {said} on {on}; it should stop after epoch {right}. No loss "
            f"improved on the best (best_epoch is still {best_epoch}), so each epoch adds 1 to "
            f"the count of epochs without improvement and it reaches patience={patience} after "
            f"epoch {right}: your count starts below 0. Set it to 0 in __init__."
        ))
    return Mistake("mixes-inf-readings", (
        f"Your EarlyStopping {said} with best_epoch {best_epoch} on {on}. Either the first inf "
        f"is no improvement on a best that starts at math.inf (stop after epoch {right}, "
        f"best_epoch None), or it is the first best (best_epoch 1, stop after epoch "
        f"{None if right is None else right + 1}); your answer mixes the two."
    ))


def _judge_early_stopping(record):
    cases = record["cases"]
    first, again = cases[0]["got"], record["again"]
    if again.get("class_attributes_changed"):
        name = again["class_attributes_changed"][0]
        return Mistake("state-on-class", (
            f"step() changed {name}, a class attribute: one container that every EarlyStopping "
            "shares, so the state of one object carries over from one object to the next (a "
            "second run of training would start with the first one's losses). Create it on "
            f"self in __init__: self.{name} = ..."
        ))
    if (again["stop"], again["best_epoch"], again["best_loss"]) != (
        first["stop"], first["best_epoch"], first["best_loss"]
    ):
        def said(got):
            return "never said stop" if got["stop"] is None else f"said stop after epoch {got['stop']}"

        return Mistake("state-on-class", (
            f"A second EarlyStopping, given {cases[0]['on']} after a first one, {said(again)} "
            f"with best_epoch {again['best_epoch']} and best_loss {again['best_loss']}; the first "
            f"object given the same losses {said(first)} with best_epoch {first['best_epoch']}. Something "
            "carries over from one object to the next: state kept on the class (a list or a "
            "counter written as a class attribute) or in a global. Set every attribute on self "
            "in __init__."
        ))
    for case in cases:
        on, got, expected, losses = case["on"], case["got"], case["expected"], case["losses"]
        if got["missing_after_init"]:
            name = got["missing_after_init"][0]
            start = "math.inf" if name == "best_loss" else "None, no best epoch yet"
            return Mistake("attribute-set-only-in-step", (
                f"A new EarlyStopping(patience={case['patience']}) has no attribute {name}: it "
                "appears only once step() sets it, so code that reads it before (or without) an "
                f"improvement crashes. Set it in __init__ ({name} = {start})."
            ))
        wrong_kinds = [k for k in got["kinds"] if k != "bool"]
        if wrong_kinds:
            return Mistake("returns-not-a-bool", (
                f"step() returned {wrong_kinds[0]} (on {on}); return True to stop now and False "
                "to go on, e.g. `return self.bad_epochs >= self.patience`."
            ))
        if on.startswith(_ALL_INF):
            problem = _judge_all_inf(on, got, expected, case["patience"]) or _after_stop_problem(on, got)
            if problem:
                return problem
            continue
        stop, right = got["stop"], expected["stop"]
        if (
            on.startswith(_REACHES_ZERO) and type(got["best_epoch"]) is int
            and got["best_epoch"] > expected["best_epoch"]
            and isinstance(got["best_loss"], float) and got["best_loss"] > 0
        ):
            return Mistake("falsy-zero-best", (
                f"On {on}, the best loss was 0.0 at epoch {expected['best_epoch']}, but your "
                f"class then took {got['best_loss']} (epoch {got['best_epoch']}) as a new best: "
                "0.0 counts as false, so a test like `if not self.best_loss` reads it as 'no best "
                "yet'. Start best_loss at math.inf and compare with `<` (or test `is None`)."
            ))
        if stop != right:
            said = "never said stop" if stop is None else f"said stop after epoch {stop}"
            base = f"Your EarlyStopping {said} on {on}; it should stop after epoch {right}."
            if stop is not None and stop == _first_rise(losses) and stop != right:
                return Mistake("ignores-patience", (
                    base + " You stop at the first epoch that is worse than the one before: "
                    "that ignores patience. Count the epochs without a new best and stop when "
                    "that count reaches patience."
                ))
            if on.startswith("a loss that drifts") and (stop is None or stop > right):
                return Mistake("compares-with-previous", (
                    base + " From epoch 3 on, each epoch is better than the one before it, yet "
                    "none beats the best (0.5 at epoch 2). Compare with the best loss so far, not with the "
                    "previous epoch."
                ))
            if on.startswith(_TINY_STEPS) and stop is not None and right is not None and stop < right:
                return Mistake("margin-or-rounding", (
                    base + " 0.4999999999 is lower than 0.5, and 0.4999999998 lower than "
                    "0.4999999999: each is a new best, however small the difference. Any loss "
                    "strictly lower than the best counts: compare val_loss < self.best_loss, with "
                    "no margin (min_delta) and no rounding."
                ))
            if on.startswith("a loss that stays flat") and (stop is None or stop > right):
                return Mistake("equal-counts-as-better", (
                    base + " A loss equal to the best is not an improvement: use `<`, not "
                    "`<=`, or a flat validation loss never stops training."
                ))
            if on.startswith("a loss that recovers") and stop is not None and stop < right:
                return Mistake("no-reset-on-new-best", (
                    base + " A new best loss must reset the count of epochs without "
                    "improvement to 0; you keep counting from before."
                ))
            if stop is not None and right is not None and stop == right + 1:
                return Mistake("stops-one-late", (
                    base + " You stop one epoch late: stop as soon as the number of epochs "
                    "without improvement reaches patience (>=, not >)."
                ))
            if stop is not None and right is not None and stop == right - 1:
                return Mistake("stops-one-early", (
                    base + " You stop one epoch early: patience=N means you wait N epochs "
                    "without improvement, and stop after the Nth (count >= patience)."
                ))
            return Mistake("wrong-stop-epoch", base)
        if got["best_epoch"] != expected["best_epoch"]:
            return Mistake("wrong-best-epoch", (
                f"After {on}, best_epoch is {got['best_epoch']}; expected {expected['best_epoch']}. "
                "Count the calls to step() from 1, and remember the number of the call that "
                "gave the lowest loss."
            ))
        if not isinstance(got["best_loss"], float) or got["best_loss"] != expected["best_loss"]:
            return Mistake("wrong-best-loss", (
                f"After {on}, best_loss is {got['best_loss']}; expected {expected['best_loss']}, "
                "the lowest loss seen so far."
            ))
        problem = _after_stop_problem(on, got)
        if problem:
            return problem
    return None


def _after_stop_problem(on, got):
    """After saying stop, step() goes on saying stop while no loss improves on the best."""
    after_stop = got.get("after_stop", [])
    if all(answer is True for answer in after_stop):
        return None
    later = got["stop"] + 1 + next(i for i, a in enumerate(after_stop) if a is not True)
    return Mistake("stop-not-kept", (
        f"Your EarlyStopping said stop after epoch {got['stop']} on {on}, then go on (False) "
        f"after epoch {later}, although no loss had improved on the best since. Training should "
        "still stop: the number of epochs without improvement only grows, so step() keeps "
        "returning True until a loss beats the best. Compare that number with `>=` patience, "
        "and don't reset it when you say stop."
    ))


EarlyStopping = Exercise(
    "EarlyStopping",
    chapter=CHAPTER,
    title="Early stopping",
    expects=Function(
        "EarlyStopping", ("patience",), returns="an object whose step(val_loss) returns True or False"
    ),
    probe=_probe_early_stopping,
    judge=_judge_early_stopping,
    reference=EarlyStopping,
    passed_message=(
        "Correct: you stop after `patience` epochs without a new best, compare with the best "
        "so far, and remember which epoch that was."
    ),
    hints=[
        "Keep three things: the best loss so far, the epoch it came from, and how many epochs "
        "have passed since. Start the best at math.inf so the first (finite) loss is always a new best.",
        "In step(): count the epoch; if val_loss < best_loss it is a new best (reset the count "
        "to 0), otherwise add 1 to the count. Return whether the count has reached patience.",
        "self.epoch += 1; if val_loss < self.best_loss: self.best_loss, self.best_epoch, "
        "self.bad_epochs = val_loss, self.epoch, 0; else: self.bad_epochs += 1; "
        "return self.bad_epochs >= self.patience",
    ],
    error_notes=[
        (
            "has no attribute",
            "an attribute used in step() that __init__ never set. Set every attribute in "
            "__init__ (best_loss = math.inf, best_epoch = None, the counters = 0).",
            "attribute-not-set-in-init",
        ),
        (
            "and 'NoneType'",
            "a loss compared (<, >) with None: an attribute that starts as None cannot be "
            "compared with a number. Start best_loss at math.inf, or test `is None` before "
            "comparing.",
            "loss-compared-with-none",
        ),
    ],
)
