"""Chapter 05 — Speed and memory: the fixed memory of training, gradient accumulation, and
finding out whether the data loader is what you wait for.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it. Probes build their own small, seeded models on the CPU and record plain data
only. The timing exercise is checked against what its fake loader measured of its own waits,
with wide margins: a busy machine makes every sleep a little longer, never a wrong answer right.
"""

from __future__ import annotations

import copy
import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.running import set_up_torch_once
from course_utils.exercises.facts import same_values, values_problem

CHAPTER = "speed_and_memory"

# The checks build optimizers: torch's one-time set-up for them is paid here, in the notebook's
# import cell, not by the first check.
set_up_torch_once()


def _kind(value) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _number(value):
    """A returned count as a float, or None when it is not a single finite real number."""
    try:
        if isinstance(value, torch.Tensor):
            if value.numel() != 1 or value.is_complex() or value.device.type == "meta":
                return None
            value = torch.Tensor.detach(value).reshape(-1)[0].item()
        if isinstance(value, (bool, np.bool_)):
            return None
        if isinstance(value, (int, float, np.integer, np.floating)):
            number = float(value)
            return number if math.isfinite(number) else None
    except (RuntimeError, OverflowError, ValueError, TypeError):  # a number too big for a float
        return None
    return None


# ============================================================================================
# P4 — the fixed memory of training: parameters, gradients, optimizer state
# ============================================================================================
def training_memory_bytes(model, optimizer_name):
    states_per_parameter = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer_name]
    total = 0
    for p in model.parameters():
        size = p.numel() * p.element_size()  # bytes, not elements
        total += size  # the parameter itself
        if p.requires_grad:  # frozen parameters get no gradient and no optimizer state
            total += size  # its gradient, same shape and dtype
            total += states_per_parameter * size  # momentum buffer, or Adam's two moments
    return total


_STATES = {"sgd": 0, "momentum": 1, "adam": 2}


def _mlp(dtype=torch.float32, frozen_first=False, last_dtype=None):
    model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5)).to(dtype)
    if frozen_first:
        model[0].requires_grad_(False)
    if last_dtype is not None:  # layers of different dtypes: one element size will not do
        model[2].to(last_dtype)
    return model


def _tied_model():
    """Batch norm (its running statistics are buffers, not parameters) and one weight shared
    by two layers (model.parameters() yields it once; the optimizer keeps one state for it)."""
    model = nn.Sequential(nn.Linear(20, 20), nn.BatchNorm1d(20), nn.ReLU(), nn.Linear(20, 20))
    model[3].weight = model[0].weight
    return model


_MEMORY_CASES = [
    ("a float32 MLP (785 parameters) with plain SGD", "sgd", {}),
    ("the same MLP with SGD and momentum", "momentum", {}),
    ("the same MLP with Adam", "adam", {}),
    ("an MLP whose first layer is frozen (requires_grad=False), with Adam", "adam", {"frozen_first": True}),
    ("a bfloat16 MLP with SGD and momentum", "momentum", {"dtype": torch.bfloat16}),
    ("a float64 MLP with plain SGD", "sgd", {"dtype": torch.float64}),
    ("an MLP whose first layer is float32 and last layer bfloat16, with SGD and momentum",
     "momentum", {"last_dtype": torch.bfloat16}),
]
_MEMORY_CASES.insert(3, (
    "a model with batch norm (running statistics are buffers) and one weight shared by two "
    "layers, with Adam",
    "adam",
    {"tied": True},
))


def _model_state(model) -> dict:
    params = list(model.parameters())
    return {
        "dtypes": [str(p.dtype) for p in params],
        "requires_grad": [bool(p.requires_grad) for p in params],
        "grads": sum(p.grad is not None for p in params),
        "values": _flat([p.double() for p in params]),
    }


def _probe_training_memory_bytes(answer, run):
    cases = []
    for on, name, options in _MEMORY_CASES:
        torch.manual_seed(0)
        model = _tied_model() if options.get("tied") else _mlp(**options)
        params = list(model.parameters())
        trainable = [p for p in params if p.requires_grad]
        before = _model_state(model)
        got = run(answer, model, name, on=f"{on}, optimizer_name={name!r}")
        after = _model_state(model)
        listed = [p for m in model.modules() for p in m.parameters(recurse=False)]  # shared twice
        stored = list(model.state_dict().values())  # buffers too, shared weight twice
        cases.append({
            "on": on,
            "optimizer": name,
            "got": _number(got),
            "got_kind": _kind(got),
            "param_bytes": sum(p.numel() * p.element_size() for p in params),
            "trainable_bytes": sum(p.numel() * p.element_size() for p in trainable),
            "param_elements": sum(p.numel() for p in params),
            "trainable_elements": sum(p.numel() for p in trainable),
            "trainable_tensors": len(trainable),
            "element_size": params[0].element_size(),
            "element_sizes": sorted({p.element_size() for p in params}),
            "listed_bytes": sum(p.numel() * p.element_size() for p in listed),
            "stored_bytes": sum(t.numel() * t.element_size() for t in stored),
            "changed": ([] if same_values(before["values"], after["values"], rtol=0, atol=0) else ["values"])
            + [what for what in ("dtypes", "requires_grad", "grads") if before[what] != after[what]],
        })
        if _judge_training_memory_bytes(cases) is not None:
            break
    return cases


def _judge_training_memory_bytes(cases):
    for case in cases:
        on, name, got = case["on"], case["optimizer"], case["got"]
        changed = case["changed"]
        if changed:
            mistake, what = {
                "values": ("trains-the-model", "changed the values of its parameters"),
                "dtypes": ("converts-the-model", "changed the dtype of its parameters (.float() "
                           "or .to() work in place on a module)"),
                "requires_grad": ("changes-requires-grad",
                                  "changed which of its parameters require gradients"),
                "grads": ("leaves-gradients",
                          "left gradients in (or removed them from) its parameters' .grad"),
            }[changed[0]]
            return Mistake(mistake, (
                f"Your function {what} (on {on}): counting must leave the model as it was. Read "
                "numel(), element_size() and requires_grad; don't convert, train or step the "
                "model you were given (work on a copy.deepcopy(model) if you must)."
            ))
        if got is None:
            mistake = "returns-none" if case["got_kind"] == "NoneType" else "returns-not-a-number"
            return Mistake(mistake, (
                f"training_memory_bytes returned {case['got_kind']} (on {on}); return the number "
                "of bytes as an int, e.g. `return total`."
            ))
        s = _STATES[name]
        params, trainable = case["param_bytes"], case["trainable_bytes"]
        expected = params + trainable * (1 + s)
        accepted = [expected]
        if name == "adam":  # Adam also keeps a 4-byte step counter per parameter tensor
            accepted.append(expected + 4 * case["trainable_tensors"])
        if any(abs(got - a) < 0.5 for a in accepted):
            continue
        where = f" (on {on}: expected {expected:,} bytes, got {got:,.0f})"
        size = case["element_size"]
        listed, stored = case["listed_bytes"], case["stored_bytes"]
        elements = case["param_elements"] + case["trainable_elements"] * (1 + s)
        sizes = case.get("element_sizes", [size])
        named = [
            *(
                (elements * one if len(sizes) > 1 else None, "one-element-size",
                 f"You used one element size, {one} bytes, for every parameter, but this model's "
                 f"parameters take {' or '.join(map(str, sizes))} bytes per element: multiply "
                 "each tensor's numel() by its own p.element_size().")
                for one in sizes
            ),
            (listed * (2 + s) if listed != params else None, "shared-weight-counted-twice",
             "You counted the shared weight twice, once for each layer that uses it: it is one "
             "tensor, with one gradient and one optimizer state. Loop over model.parameters(), "
             "which yields each parameter once."),
            (stored * (2 + s) if stored != params else None, "counts-state-dict",
             "You counted the tensors of model.state_dict(): it also holds buffers (batch norm's "
             "running statistics, which get no gradient and no optimizer state) and lists a "
             "shared weight once per layer. Loop over model.parameters()."),
            (stored if stored != params else None, "counts-state-dict",
             "You counted the tensors of model.state_dict() once each: they are detached copies "
             "(requires_grad=False), it holds buffers too, and it lists a shared weight twice. "
             "Loop over model.parameters()."),
            (case["param_elements"] + case["trainable_elements"] * (1 + s), "counts-elements",
             "You counted elements, not bytes: multiply each tensor's numel() by its "
             "element_size() (4 bytes for float32, 2 for bfloat16, 8 for float64)."),
            (expected * 4 / size if size != 4 else None, "fixed-element-size",
             f"This model's parameters take {size} bytes per element, but you counted 4: use "
             "p.element_size() rather than a fixed size."),
            (expected * 2 / size if size == 8 else None, "element-size-by-hand",
             "This model is float64, 8 bytes per element, but you counted 2: use "
             "p.element_size() rather than a size chosen from the dtype by hand."),
            (params * (2 + s) if trainable != params else None, "frozen-parameters-counted",
             "You counted a gradient and optimizer state for the frozen parameters too: a "
             "parameter with requires_grad=False gets no gradient, and the optimizer keeps no "
             "state for it."),
            (params + trainable * 2 if name == "adam" else None, "adam-one-state",
             "You counted one state tensor for Adam; it keeps two per parameter, exp_avg and "
             "exp_avg_sq (the running mean of gradients and of their squares)."),
            (params + trainable if s > 0 else None, "no-optimizer-state",
             "The optimizer state is missing: SGD with momentum keeps one buffer per parameter, "
             "Adam keeps two."),
            (params + trainable * 3 if name == "momentum" else None, "momentum-two-states",
             "SGD with momentum keeps one buffer per parameter, not two (two is Adam)."),
            (params + trainable * 2 if name == "sgd" else None, "state-for-plain-sgd",
             "Plain SGD (no momentum) keeps no state at all: parameters plus gradients."),
            (params + trainable * s, "no-gradients",
             "The gradients are missing: after backward() every trainable parameter has a "
             ".grad of its own size."),
            (params, "parameters-only", "You counted the parameters only; training also holds "
             "their gradients and the optimizer's state."),
        ]
        for value, mistake, message in named:
            if value is not None and abs(got - value) < 0.5:
                return Mistake(mistake, message + where)
        return Mistake("wrong-count", (
            "Not the right count" + where + ". Add, for each parameter p of model.parameters(): "
            "its bytes (p.numel() * p.element_size()); if p.requires_grad, as much again for the "
            "gradient and that many times 0 (SGD), 1 (momentum) or 2 (Adam) for the state."
        ))
    return None


training_memory_bytes = Exercise(
    "training_memory_bytes",
    chapter=CHAPTER,
    title="The fixed memory of training",
    expects=Function(
        "training_memory_bytes", ("model", "optimizer_name"), returns="a number of bytes (an int)"
    ),
    probe=_probe_training_memory_bytes,
    judge=_judge_training_memory_bytes,
    reference=training_memory_bytes,
    passed_message=(
        "Correct: parameters once, and for each trainable one a gradient and 0, 1 or 2 state "
        "tensors of the same size. None of it depends on the batch size."
    ),
    hints=[
        "Loop over model.parameters(). A tensor's bytes are p.numel() * p.element_size().",
        "Every parameter counts once. A parameter with requires_grad=True adds a gradient of the "
        "same size, and the optimizer's state: 0 tensors for 'sgd', 1 for 'momentum', 2 for 'adam'.",
        "states = {'sgd': 0, 'momentum': 1, 'adam': 2}[optimizer_name]; for each p: "
        "size = p.numel() * p.element_size(); total += size; if p.requires_grad: "
        "total += size * (1 + states).",
    ],
    # No notes: a KeyError's message is the key alone ('sgd'), and the generic likely cause
    # already says that the dictionary lacks it.
)


# ============================================================================================
# P5 — gradient accumulation that matches one big batch
# ============================================================================================
def accumulation_step(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()  # once, before the first micro-batch
    k = len(batches)
    for x, y in batches:
        loss = loss_fn(model(x), y) / k  # each micro-batch is 1/k of the big batch's mean
        loss.backward()  # adds into .grad; this micro-batch's graph is freed here
    optimizer.step()  # once, after all k micro-batches


accumulation_step_reference = accumulation_step  # the name becomes the Exercise below
_LR = 0.1
_STALE = 0.5  # what .grad holds before the call: a previous step's gradient, left there


def _accumulation_case(seed, k, micro, sizes, loss_name):
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    n_in, n_hidden, n_out = sizes
    model = nn.Sequential(nn.Linear(n_in, n_hidden), nn.Tanh(), nn.Linear(n_hidden, n_out))
    xs = [torch.randn(micro, n_in, generator=generator) for _ in range(k)]
    if loss_name == "cross_entropy":
        ys = [torch.randint(0, n_out, (micro,), generator=generator) for _ in range(k)]
        loss_fn = F.cross_entropy
    else:
        # Targets on a larger scale: a gradient whose norm is well above 1 (about 2.4), so that
        # clipping it to norm 1 changes the step.
        ys = [5 * torch.randn(micro, n_out, generator=generator) for _ in range(k)]
        loss_fn = F.mse_loss
    return model, list(zip(xs, ys)), loss_fn


def _flat(tensors) -> np.ndarray:
    return torch.cat([t.detach().reshape(-1) for t in tensors]).numpy().copy()


def _grads_of(model, loss_fn, batches, divide=True):
    """The gradient accumulated over ``batches`` by a fresh copy, as one flat array."""
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    for x, y in batches:
        loss = loss_fn(model(x), y)
        (loss / len(batches) if divide else loss).backward()
    return _flat(p.grad for p in model.parameters())


_ACCUMULATION_CASES = [
    # (seed, k, micro-batch size, layer sizes, loss, momentum: the optimizer's state, calls)
    (0, 4, 5, (6, 10, 4), "cross_entropy", 0.9, 2),
    (1, 3, 4, (3, 5, 2), "mse_loss", 0.0, 1),
]


def _gradient_state(model):
    grads = [p.grad for p in model.parameters()]
    if all(g is None for g in grads):
        return "none"
    flat = _flat((torch.zeros_like(p) if g is None else g) for p, g in zip(model.parameters(), grads))
    return "zero" if not flat.any() else flat


def _batches_problem(given, kept):
    if len(given) != len(kept):
        return f"the list had {len(kept)} micro-batches before the call and {len(given)} after"
    for index, ((x, y), (x0, y0)) in enumerate(zip(given, kept)):
        for name, a, b in (("x", x, x0), ("y", y, y0)):
            if not (isinstance(a, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                    and bool(torch.equal(a, b))):
                return f"{name} of micro-batch {index} changed"
    return None


def _probe_accumulation_step(answer, run):
    cases = []
    for seed, k, micro, sizes, loss_name, momentum, calls in _ACCUMULATION_CASES:
        model, batches, loss_fn = _accumulation_case(seed, k, micro, sizes, loss_name)
        reference_model = copy.deepcopy(model)
        reference_optimizer = torch.optim.SGD(reference_model.parameters(), lr=_LR, momentum=momentum)
        for p in model.parameters():
            p.grad = torch.full_like(p, _STALE)
        optimizer = torch.optim.SGD(model.parameters(), lr=_LR, momentum=momentum)
        steps, backwards, eval_forwards = [], [], []
        # Each hook is bound to this case's lists: a model or optimizer of an earlier case, kept
        # by the learner's code, must not count as the one given now.
        optimizer.register_step_post_hook(lambda *args, steps=steps: steps.append(1))
        model[0].register_forward_hook(  # the model arrives in train mode: a step trains in it
            lambda module, inputs, output, seen=eval_forwards: None if module.training else seen.append(1)
        )
        next(model.parameters()).register_hook(lambda grad, backwards=backwards: backwards.append(1))
        for call in range(calls):
            if call:  # the next step, on new micro-batches, with the same model and optimizer
                _, batches, _ = _accumulation_case(seed + 10, k, micro, sizes, loss_name)
            setting = (
                f"{k} micro-batches of {micro} examples, loss {loss_name}, "
                + (f"SGD with momentum={momentum}" if momentum else "plain SGD")
            )
            on = setting if calls == 1 else f"{setting}, call {call + 1} of {calls} in a row"
            big_x = torch.cat([x for x, _ in batches])
            big_y = torch.cat([y for _, y in batches])
            big = copy.deepcopy(reference_model)
            loss_fn(big(big_x), big_y).backward()
            case = {
                "on": on,
                "k": k,
                "micro": micro,
                "call": call,
                "big_batch": _flat(p.grad for p in big.parameters()),
                "summed": _grads_of(reference_model, loss_fn, batches, divide=False),
                "last_only": _grads_of(reference_model, loss_fn, batches[-1:], divide=False) / k,
                "last_only_undivided": _grads_of(reference_model, loss_fn, batches[-1:], divide=False),
            }
            steps.clear()
            backwards.clear()
            eval_forwards.clear()
            before = _flat(model.parameters())
            learner_batches = [(x.clone(), y.clone()) for x, y in batches]
            given = list(learner_batches)
            run(answer, model, optimizer, loss_fn, given, on=on)
            case["steps"] = len(steps)
            case["backwards"] = len(backwards)
            case["eval_forwards"] = len(eval_forwards)
            case["training_after"] = all(m.training for m in model.modules())
            case["update"] = (before - _flat(model.parameters())) / _LR
            case["lr_after"] = [float(group["lr"]) for group in optimizer.param_groups]
            case["grads_after"] = _gradient_state(model)
            case["batches_changed"] = _batches_problem(given, [(x, y) for x, y in batches])
            accumulation_step_reference(reference_model, reference_optimizer, loss_fn, batches)
            case["expected"] = _flat(reference_model.parameters())
            case["parameters"] = _flat(model.parameters())
            cases.append(case)
            if _judge_accumulation_step(cases) is not None:
                return cases
    return cases


_TOL = {"rtol": 1e-4, "atol": 1e-6}


def _judge_accumulation_step(cases):
    for index, case in enumerate(cases):
        on, k, update, big = case["on"], case["k"], case["update"], case["big_batch"]
        if case["batches_changed"]:
            return Mistake("changes-the-batches", (
                f"Your function changed the list of micro-batches it was given (on {on}): "
                f"{case['batches_changed']}. The caller may use them again; loop over them "
                "with `for x, y in batches:` and leave them as they are."
            ))
        if case["steps"] == 0 and not same_values(update, np.zeros_like(update)):
            return Mistake("ignores-given-optimizer", (
                f"The weights moved, but not through the optimizer you were given (on {on}): "
                "call optimizer.step() on the `optimizer` argument rather than making a new one."
            ))
        if case["steps"] == 0:
            # After calls whose steps ran: an optimizer other than the one given now (kept from
            # an earlier call) took this one.
            stepped_before = any(c["steps"] for c in cases[:index])
            return Mistake("ignores-given-optimizer" if stepped_before else "no-optimizer-step", (
                f"optimizer.step() of the optimizer you were given never ran (on {on}), so the "
                "weights did not move. Call it on the `optimizer` argument, once, after the loop "
                "over the micro-batches."
            ))
        if case["steps"] > 1:
            return Mistake("step-per-micro-batch", (
                f"optimizer.step() ran {case['steps']} times for {k} micro-batches (on {on}): "
                "stepping every micro-batch is ordinary small-batch training, not accumulation. "
                f"Step once, after all {k} backward() calls."
            ))
        if case.get("eval_forwards"):
            return Mistake("accumulates-in-eval-mode", (
                f"The micro-batches' forward passes ran with the model in eval mode (on {on}), "
                "although it was given in train mode: an accumulation step trains in the mode "
                "it is given (with dropout and batch norm, eval mode gives other gradients). "
                "Leave the mode alone (no model.eval())."
            ))
        if not case.get("training_after", True):
            return Mistake("leaves-eval-mode", (
                f"Your function gave the model back in eval mode (on {on}), although it was "
                "given in train mode: every later step would then train without dropout and "
                "without batch norm learning. Leave the mode as it was given."
            ))
        if any(lr != _LR for lr in case["lr_after"]):
            return Mistake("changes-learning-rate", (
                f"After your function ran (on {on}), the optimizer's learning rate was "
                f"{case['lr_after'][0]:g} instead of {_LR:g}: your function changed it, so every "
                "later step uses that rate too. Leave the optimizer's settings alone; to scale "
                "the gradient, divide each micro-batch's loss by len(batches)."
            ))
        if case["call"] == 0 and same_values(update, big, **_TOL):
            if case["backwards"] == 1 and k > 1:
                return Mistake("one-backward-for-all", (
                    f"The gradients are right, but backward() ran once for {k} micro-batches "
                    f"(on {on}): one backward() for all of them (on the sum of their losses, or "
                    f"on one big batch) keeps all {k} graphs in memory until then, which is the "
                    "memory accumulation is meant to save. Call backward() on each micro-batch's "
                    "loss inside the loop."
                ))
            if case["backwards"] != k:
                return Mistake("wrong-backward-count", (
                    f"The gradients are right, but backward() ran {case['backwards']} times for "
                    f"{k} micro-batches (on {on}): call it once per micro-batch, on that "
                    "micro-batch's loss."
                ))
            grads = case["grads_after"]
            if not isinstance(grads, str) and same_values(grads, big * k, **_TOL):
                return Mistake("rescales-the-step-not-the-loss", (
                    f"The step is right, but .grad holds {k} times the big batch's gradient after "
                    f"your function (on {on}): the losses were not divided by {k}, and the "
                    "step was scaled some other way. Divide each micro-batch's loss by "
                    "len(batches), so that the gradient itself is the big batch's."
                ))
            continue
        if case["call"] > 0:
            if case["backwards"] != k:
                return Mistake("wrong-backward-count", (
                    f"backward() ran {case['backwards']} times for {k} micro-batches (on {on}): "
                    "call it once per micro-batch, on that micro-batch's loss, inside the loop."
                ))
            if same_values(case["parameters"], case["expected"], **_TOL):
                continue
            return Mistake("wrong-later-step", (
                f"The first call was right, but on {on} the parameters are not what a second "
                "accumulation step gives with this optimizer (its momentum carries the first "
                "step's gradient over). Each call must start from zero gradients, add the k "
                "micro-batches' gradients (each loss divided by k), and step the optimizer it "
                "was given once."
            ))
        named = [  # (what the step gives, the mistake, its message)
            (big + _STALE, "no-zero-grad",
             "Gradients left over from before the call were added in: .grad "
             "already held an old gradient. Call optimizer.zero_grad() once, before the first "
             "micro-batch."),
            (case["summed"], "no-division-by-k",
             f"Your update is {k} times too large ({k} micro-batches): each "
             "loss is a mean over its micro-batch, so summing k of them gives k times the big "
             f"batch's gradient. Divide each micro-batch's loss by {k} (len(batches)) before "
             "backward()."),
            (case["summed"] + _STALE, "no-division-no-zero-grad",
             f"Two mistakes: the update is {k} times too large (divide "
             "each loss by len(batches)) and old gradients were added in (zero_grad() first)."),
            (case["last_only"], "zero-grad-in-loop",
             "Only the last micro-batch's gradient reached the step: "
             "zero_grad() inside the loop wipes what the earlier micro-batches accumulated. "
             "Zero once, before the loop."),
            (case["last_only_undivided"], "zero-grad-in-loop-no-division",
             "Only the last micro-batch's gradient reached the "
             "step (zero_grad() inside the loop), and it was not divided by the number of "
             "micro-batches. Zero once before the loop; divide each loss by len(batches)."),
            (big / k, "divides-twice",
             f"Your update is {k} times too small: divide each micro-batch's loss by "
             f"the number of micro-batches ({k}) once, not twice."),
        ]
        for expected, mistake, message in named:
            if same_values(update, expected, **_TOL):
                return Mistake(mistake, f"{message} (on {on})")
        length, big_length = float(np.linalg.norm(update)), float(np.linalg.norm(big))
        if length > 0 and big_length > 0 and same_values(update * (big_length / length), big, **_TOL):
            ratio = length / big_length
            micro = case.get("micro")
            if micro and abs(ratio - k / micro) < 1e-3 * ratio:
                return Mistake("divides-by-micro-batch-size", (
                    f"Your step is {ratio:.3g} times the big batch's gradient (on {on}): you "
                    f"divided each loss by the micro-batch size ({micro}) instead of the number "
                    f"of micro-batches ({k}). loss_fn already averages over a micro-batch; "
                    "divide by len(batches). It should equal the gradient of one big batch."
                ))
            return Mistake("rescaled-gradient", (
                f"Your step goes the way of the big batch's gradient, but is {ratio:.3g} times "
                f"its length (on {on}; the big batch's gradient has norm {big_length:.3g}): "
                "the accumulated gradient was rescaled, by a division by another number than "
                f"len(batches) ({k}), by gradient clipping (clip_grad_norm_) or by an extra "
                "factor. It should equal the gradient of one big batch: divide each loss by "
                "len(batches), and nothing more."
            ))
        return values_problem(
            update, big, what="the step's gradient (weight change / lr)", on=on, rtol=1e-4, atol=1e-6
        ) + " It should equal the gradient of one big batch made of all the micro-batches."
    return None


accumulation_step = Exercise(
    "accumulation_step",
    chapter=CHAPTER,
    title="Gradient accumulation",
    expects=Function(
        "accumulation_step", ("model", "optimizer", "loss_fn", "batches"),
        returns="nothing: it changes the model's parameters through optimizer.step()",
    ),
    probe=_probe_accumulation_step,
    judge=_judge_accumulation_step,
    reference=accumulation_step,
    passed_message=(
        "Correct: one step whose gradient equals the big batch's, while only one micro-batch's "
        "activations were in memory at a time."
    ),
    hints=[
        "Three parts: clear the old gradients, run forward and backward on each micro-batch "
        "(backward adds into .grad), then step once.",
        "loss_fn returns a mean over its micro-batch; the big batch's loss is the mean of k such "
        "means, so divide each loss by k = len(batches) before backward().",
        "optimizer.zero_grad(); for x, y in batches: (loss_fn(model(x), y) / len(batches))"
        ".backward(); then optimizer.step().",
    ],
    error_notes=[
        ("Trying to backward through the graph a second time",
         "backward() on a loss whose graph was already used: call it once per micro-batch, on "
         "that micro-batch's loss.",
         "second-backward"),
        ("too many values to unpack", "batches is a list of (x, y) pairs: `for x, y in batches:`.",
         "batches-not-unpacked-as-pairs"),
    ],
)


# ============================================================================================
# P7 — is the loader the bottleneck?
# ============================================================================================
def split_step_time(loader, step_fn):
    data_seconds = compute_seconds = 0.0
    start = time.perf_counter()  # the clock runs before the first batch: it is often the slowest
    for batch in loader:
        fetched = time.perf_counter()
        data_seconds += fetched - start  # waiting for the loader
        step_fn(batch)
        start = time.perf_counter()
        compute_seconds += start - fetched  # the step itself
    return data_seconds, compute_seconds


class _UnsizedLoader:
    """Batches that take known times to arrive, each wait measured by the loader itself. No
    len(), like a DataLoader over an IterableDataset or a generator."""

    def __init__(self, delays, start_delay=0.0):
        self.delays = delays
        self.start_delay = start_delay  # spent in iter(loader) itself, before any batch
        self.waited = 0.0
        self.fetched = 0
        self.first = 0.0
        self.started = 0.0
        self.last = 0.0  # the last batch's wait alone

    def __iter__(self):
        if self.start_delay:  # like a DataLoader with workers: iter() starts them
            start = time.perf_counter()
            time.sleep(self.start_delay)
            self.started = time.perf_counter() - start
            self.waited += self.started
            self.first += self.started
        return self._batches()

    def _batches(self):
        for index, delay in enumerate(self.delays):
            start = time.perf_counter()
            time.sleep(delay)
            waited = time.perf_counter() - start
            self.waited += waited
            self.last = waited
            if index == 0:
                self.first += waited
            self.fetched += 1
            yield torch.full((2, 3), float(index))


class _FakeLoader(_UnsizedLoader):
    """The same, with a len() like a DataLoader over a map-style dataset."""

    def __len__(self):
        return len(self.delays)


class _FakeStep:
    def __init__(self, seconds, loader=None):
        self.seconds = seconds
        self.loader = loader
        self.spent = 0.0
        self.last = 0.0  # the last step's time alone
        self.calls = 0
        self.seen = []
        self.fetched_before = []  # how many batches the loader had given at each call

    def __call__(self, batch):
        start = time.perf_counter()
        self.fetched_before.append(self.loader.fetched if self.loader is not None else None)
        self.seen.append(
            float(batch[0, 0]) if isinstance(batch, torch.Tensor) and batch.shape == (2, 3) else None
        )
        time.sleep(self.seconds)
        self.last = time.perf_counter() - start
        self.spent += self.last
        self.calls += 1


# (input, loader class, delay of each batch, seconds per step, seconds iter(loader) takes). The
# sleeps only need to tell the two kinds of time apart: the judge checks inclusions that hold on
# any machine (the loader's own waits lie inside your data time, the steps inside your compute
# time, both inside the call).
_STARTS_WORKERS = "a loader that starts its workers in iter(loader)"
_TIMING_CASES = [
    ("a slow loader (8 ms a batch, 20 ms for the first) and a 1 ms step",
     _FakeLoader, [0.02] + [0.008] * 4, 0.001, 0.0),
    ("a loader with no len(), like a DataLoader over an IterableDataset (1 ms a batch, 20 ms for "
     "the first), and an 8 ms step", _UnsizedLoader, [0.02] + [0.001] * 4, 0.008, 0.0),
    (f"{_STARTS_WORKERS}, as a DataLoader with num_workers > 0 does (20 ms), then 3 ms a batch, "
     "and a 3 ms step", _FakeLoader, [0.003] * 3, 0.003, 0.02),
    ("an empty loader (no batches at all)", _FakeLoader, [], 0.001, 0.0),
]


def _code_names(fn) -> list:
    """The global and attribute names the learner's code reads (time, perf_counter, ...)."""
    code = getattr(fn, "__code__", None)
    names, todo = set(), [code] if code is not None else []
    while todo:
        code = todo.pop()
        names.update(code.co_names)
        todo.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    return sorted(names)


def _probe_split_step_time(answer, run):
    cases = []
    for on, make, delays, step_s, start_s in _TIMING_CASES:
        loader = make(delays, start_s)
        step = _FakeStep(step_s, loader)
        start = time.perf_counter()
        got = run(answer, loader, step, on=on)
        wall = time.perf_counter() - start
        case = {
            "on": on,
            "batches": len(delays),
            "fetched": loader.fetched,
            "steps": step.calls,
            "in_order": step.seen == [float(i) for i in range(step.calls)],
            "data": loader.waited,
            "compute": step.spent,
            "first": loader.first,
            "started": loader.started,
            "last_wait": loader.last,
            "last_step": step.last,
            "interleaved": step.fetched_before == list(range(1, step.calls + 1)),
            "wall": wall,
            "got_kind": _kind(got),
        }
        if isinstance(got, (np.ndarray, torch.Tensor)) and tuple(got.shape) == (2,):
            got = list(got)  # two numbers all the same: `data, compute = ...` unpacks them
        if isinstance(got, (tuple, list)) and len(got) == 2:
            case["got"] = [_number(got[0]), _number(got[1])]
        cases.append(case)
        record = {"cases": cases, "names": _code_names(answer)}
        if _judge_split_step_time(record) is not None:  # stop at the first input that shows
            break  # a mistake, so that an error on a later one does not hide it
    return record


def _tol(seconds):
    """Room for clocks read a few instructions apart (and for time.time's resolution)."""
    return 0.001 + 0.01 * seconds


def _judge_split_step_time(record):
    cases = record["cases"]
    for case in cases:
        on, n = case["on"], case["batches"]
        if "got" not in case:
            return Mistake("returns-not-a-pair", (
                f"split_step_time returned {case['got_kind']} (on {on}); return two numbers of "
                "seconds: `return data_seconds, compute_seconds`."
            ))
        if None in case["got"]:
            return Mistake("returns-not-numbers", (
                f"split_step_time returned a {case['got_kind']} of two items, but not two finite "
                f"numbers (on {on}); return two numbers of seconds: "
                "`return data_seconds, compute_seconds`."
            ))
        if case["fetched"] > n:
            return Mistake("iterates-twice", (
                f"The loader was iterated more than once ({case['fetched']} batches drawn from a "
                f"loader of {n}) (on {on}): loop over it once, timing as you go."
            ))
        if case["fetched"] < n:
            return Mistake("misses-batches", (
                f"Only {case['fetched']} of the loader's {n} batches were drawn (on {on}): time "
                "the whole loop, every batch."
            ))
        if case["steps"] != case["fetched"]:
            return Mistake("wrong-step-count", (
                f"step_fn ran {case['steps']} times for {case['fetched']} batches (on {on}): call "
                "it once per batch, inside the loop."
            ))
        if not case["in_order"]:
            return Mistake("steps-on-something-else", (
                f"step_fn was not given the loader's batches, one by one in order (on {on}): "
                "call step_fn(batch) with the batch the loop just received."
            ))
        if not case.get("interleaved", True):
            return Mistake("fetches-all-first", (
                f"Your function drew batches from the loader before stepping on the ones it "
                f"already had (on {on}): with a real loader that keeps them all in memory, and "
                "it is not the loop you are timing. Call step_fn(batch) on each batch as it "
                "arrives, inside `for batch in loader:`."
            ))
    previous = None
    for case in cases:
        on, n = case["on"], case["batches"]
        data, compute, first, wall = case["data"], case["compute"], case["first"], case["wall"]
        got_data, got_compute = case["got"]
        shown = (
            f" (on {on}: the loader spent {1000 * data:.1f} ms producing batches, the steps took "
            f"{1000 * compute:.1f} ms and the whole call {1000 * wall:.1f} ms; you returned "
            f"{1000 * got_data:.1f} ms and {1000 * got_compute:.1f} ms)"
        )

        def covers(got, truth):
            return got >= truth - _tol(truth)

        def fits(total):
            return total <= wall + _tol(wall)

        if min(got_data, got_compute) < -_tol(0):
            return Mistake("negative-time", (
                "A time cannot be negative: subtract the earlier reading from the later one." + shown
            ))
        if covers(got_data, data) and covers(got_compute, compute) and fits(got_data + got_compute):
            previous = case
            continue
        if (
            previous is not None
            and covers(got_data, data + previous["got"][0])
            and covers(got_compute, compute + previous["got"][1])
        ):
            return Mistake("totals-carried-over", (
                "Your totals carried over from the previous call: they include its times too. "
                "Start both at 0.0 inside the function, on every call (not in a global)." + shown
            ))
        longer = [name for name, got in (("data", got_data), ("compute", got_compute)) if not fits(got)]
        scaled = [  # both numbers in another unit: what seconds times 1000 (or 1e6, 1e9) gives
            (factor, unit) for factor, unit in ((1e3, "milliseconds"), (1e6, "microseconds"),
                                                (1e9, "nanoseconds"))
            if wall > 0 and covers(got_data, factor * data) and covers(got_compute, factor * compute)
            and got_data + got_compute <= factor * (wall + _tol(wall))
        ]
        if longer and scaled:
            return Mistake("not-seconds", (
                f"Your numbers are {scaled[0][1]}, not seconds: they are about {scaled[0][0]:g} "
                "times the times measured. Return seconds, as differences of time.perf_counter() "
                "readings are (no * 1000; divide time.perf_counter_ns() differences by 1e9)."
                + shown
            ))
        if longer:
            return Mistake("time-from-outside-the-call", (
                f"Your {longer[0]} time is longer than the whole call took, so it holds time "
                "carried over from outside this call: totals kept from an earlier call (in a "
                "global), a clock read before the call, or a clock reading added as it is "
                "instead of the difference of two readings. Start both totals at 0.0 inside the "
                "function and add only differences of time.perf_counter() readings taken "
                "during the call." + shown
            ))
        if covers(got_compute, data) and covers(got_data, compute) and fits(got_data + got_compute):
            return Mistake("swapped", (
                "The two numbers are swapped: return (data_seconds, compute_seconds)." + shown
            ))
        averages = (
            n > 0 and covers(got_data * n, data) and covers(got_compute * n, compute)
            and fits((got_data + got_compute) * n)
        )
        last_only = (
            n > 1 and "last_wait" in case
            and abs(got_data - case["last_wait"]) <= _tol(case["last_wait"])
            and abs(got_compute - case["last_step"]) <= _tol(case["last_step"])
        )
        if averages and last_only:  # a busy machine can make the last wait close to the mean:
            # the reading that fits far better (an average is the totals / n, to within the
            # clock reads; the last batch's times are its wait and step) names the slip
            off_average = abs(got_data * n - data) / n + abs(got_compute * n - compute) / n
            off_last = abs(got_data - case["last_wait"]) + abs(got_compute - case["last_step"])
            averages, last_only = off_average < 2 * off_last, off_last < 2 * off_average
        if averages and last_only:  # on this machine's timings the two cannot be told apart
            return Mistake("one-batch-times", (
                "You returned the times of one batch (an average, or the last batch's alone); "
                "return the totals over the whole loop, adding each wait and each step into "
                "them (data_seconds += ...)." + shown
            ))
        if averages:
            return Mistake("averages-per-batch", (
                "You returned averages per batch; return the totals over the whole loop." + shown
            ))
        if last_only:
            return Mistake("last-batch-only", (
                "You returned the last batch's times only: each batch replaced the totals "
                "instead of adding to them. Add each wait and each step into the totals "
                "(data_seconds += ...)." + shown
            ))
        near_zero = got_data < 0.2 * data and got_compute < 0.2 * compute
        if n > 0 and "process_time" in record["names"] and (near_zero or not covers(got_data, data)):
            # A CPU clock misses the sleeps; on a busy machine the process's other threads
            # still add CPU time, so its readings need not be near zero.
            return Mistake("cpu-clock", (
                ("Both times are near zero, yet the loop slept for most of its time: " if near_zero
                 else "Your times leave out the waiting: ")
                + "time.process_time() counts CPU time, not waiting. Use time.perf_counter()."
                + shown
            ))
        if n > 0 and near_zero:
            return Mistake("no-wall-clock", (
                "Both times are near zero, yet the loop slept for most of its time: read a wall "
                "clock, time.perf_counter(), before and after each wait and each step." + shown
            ))
        # The data clock ran through the steps, so the data time spans the whole call. (On a
        # busy machine the loader's own total can exceed the learner's by more than the clock
        # tolerance; the data time against the whole call is the steadier sign.)
        data_spans_the_call = got_compute > 0 and abs(got_data - wall) <= 0.5 * got_compute
        if not fits(got_data + got_compute) and (covers(got_data, data + compute) or data_spans_the_call):
            return Mistake("data-clock-spans-step", (
                "Your data time includes the steps: the clock for the next batch must restart "
                "after step_fn returns, not at the previous fetch." + shown
            ))
        if n > 1 and covers(got_compute, compute + data - first) and not covers(got_data, data):
            return Mistake("compute-clock-spans-wait", (
                "Your compute time includes waiting for the next batch: stop the step's clock "
                "as soon as step_fn returns." + shown
            ))
        if (
            case.get("started", 0) > 0 and covers(got_data, data - case["started"])
            and not covers(got_data, data)
        ):
            return Mistake("iter-outside-the-clock", (
                "The wait in iter(loader) is missing: a DataLoader with workers starts them "
                "when it is asked for an iterator, before the first batch. Start the clock "
                "before the `for` statement (or before iter(loader)), so that this wait counts "
                "as data time." + shown
            ))
        if n > 0 and covers(got_data, data - first) and not covers(got_data, data):
            return Mistake("first-wait-missed", (
                "The first batch's wait is missing: start the clock before the loop. The first "
                "batch is often the slowest one (a DataLoader starts its workers then)." + shown
            ))
        if not covers(got_data, data):
            return Mistake("data-time-short", (
                "Your data time is shorter than the time the loader itself spent producing "
                "batches: each wait runs from just before the `for` asks for a batch to just "
                "after it arrives." + shown
            ))
        if not covers(got_compute, compute):
            return Mistake("compute-time-short", (
                "Your compute time is shorter than the time spent inside step_fn: read the "
                "clock just before step_fn(batch) and just after it returns." + shown
            ))
        return Mistake("counted-twice", (
            "Your two times add up to more than the whole call took: some moments were counted "
            "twice. Each moment of the loop is either waiting for a batch or inside step_fn."
            + shown
        ))
    return None


split_step_time = Exercise(
    "split_step_time",
    chapter=CHAPTER,
    title="Waiting for data, or computing?",
    expects=Function(
        "split_step_time", ("loader", "step_fn"),
        returns="two numbers of seconds: (data_seconds, compute_seconds)",
    ),
    probe=_probe_split_step_time,
    judge=_judge_split_step_time,
    reference=split_step_time,
    passed_message=(
        "Correct: every moment of the loop is either waiting for the next batch or inside "
        "step_fn, and you counted each in its place."
    ),
    hints=[
        "Read the clock (time.perf_counter()) at three moments: before asking for a batch, when "
        "it arrives, and when step_fn returns.",
        "Arrival minus asking is data time; return minus arrival is compute time. The `for` "
        "statement itself asks for the batch, so read the clock before the loop and again at "
        "the end of each step.",
        "start = time.perf_counter(); for batch in loader: got = time.perf_counter(); "
        "data += got - start; step_fn(batch); start = time.perf_counter(); compute += start - got.",
    ],
    error_notes=[
        ("not iterable", "loader is something to loop over with `for batch in loader:`.",
         "loader-not-looped-over"),
        ("has no len()", "a loader may have no length (a DataLoader over an IterableDataset, a "
         "generator): loop over it and count the batches as they come instead of len(loader).",
         "len-of-loader"),
        ("division by zero", "an empty loader has no batches: dividing by their number fails. "
         "Return the totals, which are then 0.0 and 0.0.",
         "average-of-empty-loader"),
        ("where it is not associated with a value", "a variable first set inside the loop: with "
         "an empty loader the loop body never runs. Set the totals (and the clock) before the "
         "loop.",
         "total-set-in-loop"),
        ("referenced before assignment", "a variable first set inside the loop: with an empty "
         "loader the loop body never runs. Set the totals (and the clock) before the loop.",
         "total-set-in-loop-python-3-10"),
    ],
)


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


scaled_clipped_step_reference = scaled_clipped_step  # the name becomes the Exercise below
_SCALE = 1024.0  # the probes' initial scale: large enough to matter, small enough not to overflow
_OVERFLOW_TARGET = 1e4  # targets this far make the float16 gradients overflow


def _scaled_setting(kind, seed):
    """A fresh model, optimizer and scaler of one case; built twice, they are identical."""
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


# Wrong orders, run on a fresh copy of a case's first call, to name a mistake only when the
# learner's update is exactly what that order gives.
def _clips_scaled(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # on scaled gradients
    scaler.step(optimizer)
    scaler.update()


def _no_clip(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def _unscaled_backward(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss)  # made, but not back-propagated
    loss.backward()  # not scaled: unscale_ then divides the true gradients by the scale
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def _float32_forward(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def _update_before_step(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.update()  # forgets that unscale_ ran: step() divides by the scale a second time
    scaler.step(optimizer)


_WRONG_ORDERS = {
    "update_first": _update_before_step,
    "clips_scaled": _clips_scaled,
    "no_clip": _no_clip,
    "unscaled_backward": _unscaled_backward,
}

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
    calls = []
    for on_case, kind, seed, max_norm, kinds, inf_grads in _SCALED_CASES:
        loss_fn = F.cross_entropy if kind == "adam" else F.mse_loss
        model, optimizer, scaler = _scaled_setting(kind, seed)
        reference = _scaled_setting(kind, seed)
        steps, dtypes = [], []
        optimizer.register_step_post_hook(lambda *args, steps=steps: steps.append(1))
        model[0].register_forward_hook(
            lambda module, inputs, output, seen=dtypes: seen.append(str(output.dtype))
        )
        if inf_grads:
            for p in list(model.parameters()) + list(reference[0].parameters()):
                p.grad = torch.full_like(p, float("inf"))
        for index, batch_kind in enumerate(kinds):
            batch = _scaled_batch(seed * 10 + index, overflow=batch_kind == "overflow",
                                  classes=loss_fn is F.cross_entropy)
            on = f"{on_case}; call {index + 1} of {len(kinds)} in a row ({batch_kind} batch)"
            call = {"on": on, "index": index, "overflow": batch_kind == "overflow",
                    "inf_before": inf_grads and index == 0, "max_norm": max_norm}
            if index == 0 and inf_grads:  # what each wrong order gives from the same start
                alternatives = {}
                for name, wrong in _WRONG_ORDERS.items():
                    alt_model, alt_optimizer, alt_scaler = _scaled_setting(kind, seed)
                    alt_model.zero_grad()  # the wrong orders all clear .grad: only the order differs
                    alt_before = _flat(alt_model.parameters())
                    wrong(alt_model, alt_optimizer, alt_scaler, loss_fn, batch, max_norm)
                    alternatives[name] = alt_before - _flat(alt_model.parameters())
                call["alternatives"] = alternatives
            before = _flat(model.parameters())
            kept = [t.clone() for t in batch]
            steps.clear()
            dtypes.clear()
            call["scale_before"] = float(scaler.get_scale())
            used_before = getattr(scaler, "_scale", None) is not None  # made by its first scale()
            run(answer, model, optimizer, scaler, loss_fn, batch, max_norm, on=on)
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
            ref_model, ref_optimizer, ref_scaler = reference
            ref_before = _flat(ref_model.parameters())
            scaled_clipped_step_reference(ref_model, ref_optimizer, ref_scaler, loss_fn,
                                          [t.clone() for t in kept], max_norm)
            call["expected"] = ref_before - _flat(ref_model.parameters())
            call["expected_scale"] = float(ref_scaler.get_scale())
            calls.append(call)
            problem = _judge_scaled_clipped_step(calls)
            if problem is not None and getattr(problem, "id", "") != _TWO_SLIPS:
                return calls  # named already; two slips alike go on to an input that tells them apart
    return calls


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


def _judge_scaled_clipped_step(calls):
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
