"""Chapter 05, P4: training_memory_bytes, the fixed memory of training (parameters, gradients,
optimizer state)."""

from __future__ import annotations

import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.facts import same_values
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.speed_and_memory.common import CHAPTER, _flat, _kind, _number
from course_utils.exercises.running import judge_side


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


def _built(model: dict):
    """The model a case describes (its recorded construction: "tied", or the MLP's dtypes and
    frozen layer), seeded as the probe seeds it."""
    torch.manual_seed(model["seed"])
    if model.get("tied"):
        return _tied_model()
    dtypes = {key: getattr(torch, model[key]) for key in ("dtype", "last_dtype") if key in model}
    return _mlp(frozen_first=model.get("frozen_first", False), **dtypes)


def _construction(options: dict, seed: int = 0) -> dict:
    """A case's options as plain data (dtypes by name), with the seed the model is built with."""
    plain = {key: str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else value
             for key, value in options.items()}
    return {**plain, "seed": seed}


def _probe_training_memory_bytes(answer, run):
    """What the answer returned for each model, how that model was built ("given") and whether
    the call left it as it was: never a count of bytes (``_expect_training_memory_bytes``
    counts those on the rebuilt model, on the judge's side)."""
    cases = []
    record = {"cases": cases}
    for on, name, options in _MEMORY_CASES:
        construction = _construction(options)
        model = _built(construction)
        before = _model_state(model)
        try:
            got = run(answer, model, name, on=f"{on}, optimizer_name={name!r}")
        except LearnerRaised as raised:
            # The judge decides: a mistake the earlier models already show is the one to
            # report, not the error a later one led to.
            record["raised"] = later_error(raised, answer, cases)
            break
        after = _model_state(model)
        cases.append({
            "on": on,
            "optimizer": name,
            "given": {"model": construction},
            "got": _number(got),
            "got_kind": _kind(got),
            "changed": ([] if same_values(before["values"], after["values"], rtol=0, atol=0) else ["values"])
            + [what for what in ("dtypes", "requires_grad", "grads") if before[what] != after[what]],
        })
    return record


def _expect_training_memory_bytes(record):
    """The byte and element counts of each case's model, rebuilt from its recorded construction
    (its parameters, the trainable ones, what state_dict() and each layer list), from which the
    judge computes the right count and each classic mistake's."""
    with judge_side():
        for case in record["cases"]:
            model = _built(case["given"]["model"])
            params = list(model.parameters())
            trainable = [p for p in params if p.requires_grad]
            listed = [p for m in model.modules() for p in m.parameters(recurse=False)]  # shared twice
            stored = list(model.state_dict().values())  # buffers too, shared weight twice
            case.update({
                "param_bytes": sum(p.numel() * p.element_size() for p in params),
                "trainable_bytes": sum(p.numel() * p.element_size() for p in trainable),
                "param_elements": sum(p.numel() for p in params),
                "trainable_elements": sum(p.numel() for p in trainable),
                "trainable_tensors": len(trainable),
                "element_size": params[0].element_size(),
                "element_sizes": sorted({p.element_size() for p in params}),
                "listed_bytes": sum(p.numel() * p.element_size() for p in listed),
                "stored_bytes": sum(t.numel() * t.element_size() for t in stored),
            })
    return record


def _judge_training_memory_bytes(record):
    problem = _judge_memory_cases(record["cases"])
    if problem is None and record.get("raised"):
        return Raised(record["raised"])
    return problem


def _judge_memory_cases(cases):
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
    expect=_expect_training_memory_bytes,
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
