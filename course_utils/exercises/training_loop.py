"""Chapter 04 — Training loop: the six steps, evaluation that leaves no trace, early stopping.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it. Every probe builds its own small, seeded model on the CPU, runs the learner's
code on it and on an identical copy driven by the reference, and records only plain data.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.facts import same_values

CHAPTER = "training_loop"


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
        return f"{name} returned None (on {on}); end it with `return loss.item()`."
    if got["kind"] == "tensor":
        extra = (
            " that still records a graph (requires_grad=True)" if got.get("requires_grad") else ""
        )
        return (
            f"{name} returned the loss as a tensor{extra} (on {on}); return a Python float "
            "with loss.item(). A float is just a number to log and plot; a loss tensor kept for "
            "logging can keep its whole graph in memory, step after step."
        )
    if got["kind"] != "float":
        return f"{name} returned {got['kind']} (on {on}); return the loss as a Python float: loss.item()."
    if not same_values(got["value"], expected, rtol=1e-4, atol=1e-6):
        return (
            f"{name} returned {got['value']:.6g} (on {on}); the loss of this batch is "
            f"{expected:.6g}. Return the loss computed in this call's forward pass, as loss.item()."
        )
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


def _step_model():
    torch.manual_seed(4)  # the check restores the learner's random state afterwards
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))


def _step_batches():
    generator = torch.Generator().manual_seed(40)
    x1, x2 = torch.randn(8, 4, generator=generator), torch.randn(8, 4, generator=generator)
    y1 = torch.randint(0, 3, (8,), generator=generator)
    y2 = torch.randint(0, 3, (8,), generator=generator)
    return (x1, y1), (x2, y2)


def _gradient_at(model, x, y) -> np.ndarray:
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x), y).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy().copy()


_STEP_CALLS = (
    "the first call, with no gradients stored yet",
    "the second call, on the next batch with the same model and optimizer",
)


def _probe_train_step(answer, run):
    model = _step_model()
    reference_model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=_LR, momentum=0.0)
    reference_optimizer = torch.optim.SGD(reference_model.parameters(), lr=_LR, momentum=0.0)
    loss_fn = nn.CrossEntropyLoss()
    forwards = [0]
    model.register_forward_hook(lambda module, inputs, output: forwards.__setitem__(0, forwards[0] + 1))

    record = {"lr": _LR, "start": _flat_parameters(model), "calls": []}
    for on, (x, y) in zip(_STEP_CALLS, _step_batches()):
        before = copy.deepcopy(reference_model)
        forwards[0] = 0
        returned = run(answer, model, optimizer, loss_fn, x.clone(), y.clone(), on=on)
        got = {
            "on": on,
            "returned": _returned(returned),
            "parameters": _flat_parameters(model),
            "gradients": _gradient_state(model),
            "forwards": forwards[0],
        }
        expected_loss = _train_step(reference_model, reference_optimizer, loss_fn, x, y)
        got["expected_loss"] = expected_loss
        got["expected"] = _flat_parameters(reference_model)
        got["before"] = _flat_parameters(before)
        got["gradient"] = _gradient_at(before, x, y)
        record["calls"].append(got)
    return record


def _judge_train_step(record):
    lr = record["lr"]
    first_gradient = record["calls"][0]["gradient"]
    for index, call in enumerate(record["calls"]):
        on, before, gradient = call["on"], call["before"], call["gradient"]
        params, gradients = call["parameters"], call["gradients"]
        if call["forwards"] == 0:
            return (
                f"Your function never ran the model it was given (on {on}). Use its arguments "
                "(model, optimizer, loss_fn, x, y), not variables of the notebook with the same "
                "purpose."
            )
        if same_values(params, before, rtol=0, atol=0):
            if isinstance(gradients, str):
                return (
                    f"The parameters did not change (on {on}), and afterwards no gradient was "
                    "left in .grad. You cleared the gradients between backward() and step() "
                    "(or never called backward()): step() then finds nothing to apply. Clear "
                    "them before backward() (or after step()), never between the two."
                )
            return (
                f"The parameters did not change (on {on}), although backward() filled .grad: "
                "you forgot optimizer.step(), the step that actually moves the parameters."
            )
        if index == 1 and same_values(params, before - lr * (gradient + first_gradient)):
            return (
                f"On {on}, your update used the sum of both batches' gradients: gradients "
                "accumulate. backward() adds to .grad, so without optimizer.zero_grad() every "
                "step also applies all the earlier gradients again. Clear them once per batch, "
                "before backward()."
            )
        if same_values(params, before - 2 * lr * gradient):
            return (
                f"Your update was twice one SGD step (on {on}): the gradient was doubled, which "
                "is what two backward() calls (two forward passes, each with its own backward) "
                "add up to. Call backward() once per step."
            )
        if same_values(params, before + lr * gradient):
            return f"Your update went up the gradient (on {on}); optimizer.step() goes down it."
        if not same_values(params, call["expected"]):
            return (
                f"After your function ran (on {on}), the parameters are not what one SGD step "
                "on this batch gives. Do forward, loss, zero_grad(), backward(), step(), once each."
            )
        problem = _returned_problem(call["returned"], call["expected_loss"], name="train_step", on=on)
        if problem:
            return problem
    return None


train_step = Exercise(
    "train_step",
    chapter=CHAPTER,
    title="One training step",
    expects=Function("train_step", ("model", "optimizer", "loss_fn", "x", "y")),
    probe=_probe_train_step,
    judge=_judge_train_step,
    reference=train_step,
    passed_message=(
        "Correct: one forward, one loss, cleared gradients, one backward, one step, and the "
        "loss returned as a float. Two calls in a row give exactly two SGD steps."
    ),
    hints=[
        "The steps are: forward (model(x)), loss (loss_fn(prediction, y)), clear the old "
        "gradients, backward, step. The batch (x, y) is given to you.",
        "The optimizer clears the gradients of the parameters it was given: "
        "optimizer.zero_grad(). Do it before loss.backward(), or after optimizer.step(), but "
        "never between backward() and step().",
        "loss = loss_fn(model(x), y); optimizer.zero_grad(); loss.backward(); "
        "optimizer.step(); return loss.item()",
    ],
    error_notes=[
        (
            "backward through the graph a second time",
            "loss.backward() called twice on one forward pass. Call it once per step.",
        ),
        (
            "does not require grad and does not have a grad_fn",
            "the forward pass ran inside torch.no_grad(), or the loss was detached (.item(), "
            ".detach()) before backward(). Keep the loss tensor for backward(); call .item() "
            "only on the value you return.",
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


def _eval_model():
    torch.manual_seed(7)
    model = nn.Sequential(
        nn.Linear(5, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3)
    )
    generator = torch.Generator().manual_seed(70)
    with torch.no_grad():  # give batch norm running statistics that differ from any one batch
        for _ in range(3):
            model(torch.randn(32, 5, generator=generator) * 2 + 1)
    return model


def _batch_norm_state(model) -> dict:
    bn = model[1]
    return {
        "running_mean": bn.running_mean.detach().numpy().copy(),
        "running_var": bn.running_var.detach().numpy().copy(),
        "num_batches_tracked": int(bn.num_batches_tracked),
    }


_EVAL_CASES = (
    ("a model in train mode, as it is during training", True),
    ("a model in eval mode", False),
)


def _probe_evaluate(answer, run):
    generator = torch.Generator().manual_seed(71)
    x = torch.randn(64, 5, generator=generator)
    y = torch.randint(0, 3, (64,), generator=generator)
    loss_fn = nn.CrossEntropyLoss()
    cases = []
    for on, training in _EVAL_CASES:
        model = _eval_model()
        model.train(training)
        reference_model = copy.deepcopy(model)
        seen = []

        def record_forward(module, inputs, output, seen=seen):
            seen.append(
                {
                    "grad_enabled": torch.is_grad_enabled(),
                    "training": [m.training for m in module.modules()],
                }
            )

        model.register_forward_hook(record_forward)
        stats_before = _batch_norm_state(model)
        torch.manual_seed(72)  # dropout in train mode draws from here
        returned = run(answer, model, x.clone(), y.clone(), loss_fn, on=on)
        torch.set_grad_enabled(True)
        cases.append(
            {
                "on": on,
                "training_before": training,
                "returned": _returned(returned),
                "expected_loss": _evaluate(reference_model, x, y, loss_fn),
                "forwards": seen,
                "training_after": bool(model.training),
                "modules_training_after": [bool(m.training) for m in model.modules()],
                "stats_before": stats_before,
                "stats_after": _batch_norm_state(model),
            }
        )
    return cases


def _judge_evaluate(cases):
    for case in cases:
        on, forwards = case["on"], case["forwards"]
        if not forwards:
            return (
                f"Your function never ran the model it was given (on {on}). Use its arguments "
                "(model, x, y, loss_fn), not variables of the notebook."
            )
        if any(any(f["training"]) for f in forwards):
            before, after = case["stats_before"], case["stats_after"]
            moved = after["num_batches_tracked"] - before["num_batches_tracked"]
            stats = (
                f" Batch norm also updated its running statistics (num_batches_tracked went "
                f"from {before['num_batches_tracked']} to {after['num_batches_tracked']}): "
                "evaluating changed the model."
                if moved
                else ""
            )
            return (
                f"The forward pass ran in train mode (on {on}): you forgot model.eval(). "
                "Dropout then zeroes random units, so the loss changes from call to call, and "
                f"batch norm normalises with this batch's statistics.{stats}"
            )
        if any(f["grad_enabled"] for f in forwards):
            return (
                f"The forward pass recorded a graph for backward() (on {on}): wrap it in "
                "`with torch.no_grad():`. model.eval() changes what dropout and batch norm do; "
                "it does not stop autograd, so without no_grad every activation is kept."
            )
        problem = _returned_problem(case["returned"], case["expected_loss"], name="evaluate", on=on)
        if problem:
            return problem
        if not same_values(case["stats_before"]["running_mean"], case["stats_after"]["running_mean"]):
            return f"Batch norm's running statistics changed (on {on}); evaluation must not change the model."
        if case["training_before"] and not case["training_after"]:
            return (
                f"Your function left the model in eval mode (on {on}). The next training epoch "
                "would then run without dropout and would stop updating batch norm. Put it back: "
                "remember model.training first and call model.train(was_training) at the end."
            )
        if case["training_before"] and not all(case["modules_training_after"]):
            return (
                f"The model says training=True, but some of its layers are still in eval mode "
                f"(on {on}): setting model.training = True changes only the outer module. Call "
                "model.train(), which sets the flag on every layer."
            )
        if not case["training_before"] and case["training_after"]:
            return (
                f"Your function was given {on} and gave it back in train mode: you call "
                "model.train() at the end whatever the mode was. Remember it first "
                "(was_training = model.training) and restore exactly that: "
                "model.train(was_training)."
            )
    return None


evaluate = Exercise(
    "evaluate",
    chapter=CHAPTER,
    title="Evaluate without side effects",
    expects=Function("evaluate", ("model", "x", "y", "loss_fn")),
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
            "Expected more than 1 value per channel",
            "batch norm in train mode on a batch of one example; evaluate in eval mode.",
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

# (name, patience, validation losses): each separates the right rule from one classic mistake.
_STOPPING_CASES = (
    ("a loss that rises every epoch", 3, [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]),
    ("a loss that recovers before patience runs out", 3, [1.0, 0.8, 0.85, 0.7, 0.6, 0.65, 0.66, 0.67, 0.5, 0.4]),
    ("a loss that drifts down but never beats its best", 2, [1.0, 0.5, 0.9, 0.8, 0.7, 0.6, 0.55, 0.52]),
    ("a loss that stays flat", 2, [0.7, 0.7, 0.7, 0.7, 0.7, 0.7]),
    ("patience=1", 1, [0.9, 0.6, 0.61, 0.3]),
    # A diverged run: no loss ever beats math.inf, so the count's starting value decides.
    (_ALL_INF, 2, [math.inf] * 5),
)


def _run_stopper(make, patience, losses, run, on):
    stopper = run(make, patience=patience, on=f"EarlyStopping(patience={patience})")
    missing_after_init = [n for n in ("best_loss", "best_epoch") if not hasattr(stopper, n)]
    answers = []
    for loss in losses:
        answer = run(stopper.step, loss, on=f"{on}, after losses {losses[: len(answers) + 1]}")
        answers.append(answer)
        if answer is True:
            break
    kinds = [type(a).__name__ for a in answers]
    stop = len(answers) if answers and answers[-1] is True else None
    best_epoch = getattr(stopper, "best_epoch", "missing")
    best_loss = getattr(stopper, "best_loss", "missing")
    return {
        "missing_after_init": missing_after_init,
        "kinds": kinds,
        "stop": stop,
        "best_epoch": best_epoch if type(best_epoch) is int else repr(best_epoch),
        "best_loss": float(best_loss) if isinstance(best_loss, (int, float)) and type(best_loss) is not bool else repr(best_loss),
    }


def _probe_early_stopping(answer, run):
    cases = []
    for on, patience, losses in _STOPPING_CASES:
        cases.append(
            {
                "on": f"{on} (patience={patience}, losses {losses})",
                "patience": patience,
                "losses": list(losses),
                "got": _run_stopper(answer, patience, losses, run, on),
                "expected": _run_stopper(_EarlyStopping, patience, losses, run, on),
            }
        )
    return cases


def _first_rise(losses):
    return next((i + 1 for i in range(1, len(losses)) if losses[i] > losses[i - 1]), None)


def _judge_all_inf(on, got, expected, patience):
    """A first loss of inf is no improvement on math.inf, or (with a best that starts empty)
    the first best: both readings are correct, as long as the count starts at 0."""
    stop, right, best_epoch = got["stop"], expected["stop"], got["best_epoch"]
    no_best = best_epoch in ("None", 0)
    if got["best_loss"] != expected["best_loss"]:
        return (
            f"After {on}, best_loss is {got['best_loss']}; expected {expected['best_loss']}, "
            "the lowest loss seen so far."
        )
    if (stop == right and no_best) or (right is not None and stop == right + 1 and best_epoch == 1):
        return None
    said = "never said stop" if stop is None else f"said stop after epoch {stop}"
    if no_best and stop is not None and right is not None and stop < right:
        return (
            f"Your EarlyStopping {said} on {on}; it should stop after epoch {right}. No loss "
            "improved on the best, so each epoch adds 1 to the count of epochs without "
            f"improvement, and it reaches patience={patience} after epoch {right}: your count "
            "does not start at 0. Set it to 0 in __init__."
        )
    if no_best and (stop is None or (right is not None and stop > right)):
        return (
            f"Your EarlyStopping {said} on {on}; it should stop after epoch {right}. No loss "
            f"improved on the best (best_epoch is still {best_epoch}), so each epoch adds 1 to "
            f"the count of epochs without improvement and it reaches patience={patience} after "
            f"epoch {right}: your count starts below 0. Set it to 0 in __init__."
        )
    return (
        f"Your EarlyStopping {said} with best_epoch {best_epoch} on {on}. Either the first inf "
        f"is no improvement on a best that starts at math.inf (stop after epoch {right}, "
        f"best_epoch None), or it is the first best (best_epoch 1, stop after epoch "
        f"{None if right is None else right + 1}); your answer mixes the two."
    )


def _judge_early_stopping(cases):
    for case in cases:
        on, got, expected, losses = case["on"], case["got"], case["expected"], case["losses"]
        if got["missing_after_init"]:
            name = got["missing_after_init"][0]
            start = "math.inf" if name == "best_loss" else "None, no best epoch yet"
            return (
                f"A new EarlyStopping(patience={case['patience']}) has no attribute {name}: it "
                "appears only once step() sets it, so code that reads it before (or without) an "
                f"improvement crashes. Set it in __init__ ({name} = {start})."
            )
        wrong_kinds = [k for k in got["kinds"] if k != "bool"]
        if wrong_kinds:
            return (
                f"step() returned {wrong_kinds[0]} (on {on}); return True to stop now and False "
                "to go on, e.g. `return self.bad_epochs >= self.patience`."
            )
        if on.startswith(_ALL_INF):
            problem = _judge_all_inf(on, got, expected, case["patience"])
            if problem:
                return problem
            continue
        stop, right = got["stop"], expected["stop"]
        if stop != right:
            said = "never said stop" if stop is None else f"said stop after epoch {stop}"
            base = f"Your EarlyStopping {said} on {on}; it should stop after epoch {right}."
            if stop is not None and stop == _first_rise(losses) and stop != right:
                return (
                    base + " You stop at the first epoch that is worse than the one before: "
                    "that ignores patience. Count the epochs without a new best and stop when "
                    "that count reaches patience."
                )
            if on.startswith("a loss that drifts") and (stop is None or stop > right):
                return (
                    base + " From epoch 3 on, each epoch is better than the one before it, yet "
                    "none beats the best (0.5 at epoch 2). Compare with the best loss so far, not with the "
                    "previous epoch."
                )
            if on.startswith("a loss that stays flat") and (stop is None or stop > right):
                return (
                    base + " A loss equal to the best is not an improvement: use `<`, not "
                    "`<=`, or a flat validation loss never stops training."
                )
            if on.startswith("a loss that recovers") and stop is not None and stop < right:
                return (
                    base + " A new best loss must reset the count of epochs without "
                    "improvement to 0; you keep counting from before."
                )
            if stop is not None and right is not None and stop == right + 1:
                return (
                    base + " You stop one epoch late: stop as soon as the number of epochs "
                    "without improvement reaches patience (>=, not >)."
                )
            if stop is not None and right is not None and stop == right - 1:
                return (
                    base + " You stop one epoch early: patience=N means you wait N epochs "
                    "without improvement, and stop after the Nth (count >= patience)."
                )
            return base
        if got["best_epoch"] != expected["best_epoch"]:
            return (
                f"After {on}, best_epoch is {got['best_epoch']}; expected {expected['best_epoch']}. "
                "Count the calls to step() from 1, and remember the number of the call that "
                "gave the lowest loss."
            )
        if not isinstance(got["best_loss"], float) or got["best_loss"] != expected["best_loss"]:
            return (
                f"After {on}, best_loss is {got['best_loss']}; expected {expected['best_loss']}, "
                "the lowest loss seen so far."
            )
    return None


EarlyStopping = Exercise(
    "EarlyStopping",
    chapter=CHAPTER,
    title="Early stopping",
    expects=Function("EarlyStopping", ("patience",)),
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
        ),
    ],
)
