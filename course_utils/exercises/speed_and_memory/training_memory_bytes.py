"""Chapter 05, P4: training_memory_bytes, the fixed memory of training (parameters, gradients,
optimizer state).

Engine: applies states.module_states ("eval", "grad-large", "grad-large" then "first-frozen": a
layer frozen after training that still holds its .grad, a second call on the same model) and
states.snapshot/differences (what the answer left, against what the reference leaves on the
rebuilt model), and the dtypes the task allows (float32, float16, bfloat16, float64, mixed,
complex64, a frozen int64 parameter: "each parameter's element_size()"); hand-written because the input is a module, not tensors, and the answer is a
count whose classic mistakes (elements, one element size, a shared weight twice, state_dict)
are named from the judge's own counts.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.facts import same_values
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised, judge_side
from course_utils.exercises.speed_and_memory.common import CHAPTER, _flat, _kind, _number
from course_utils.exercises.states import MODULE_STATES, differences, snapshot

_AS_IT_WAS = (
    " (on {on}): counting must leave the model as it was. Read numel(), element_size() and "
    "requires_grad; don't convert, train or step the model you were given (work on a "
    "copy.deepcopy(model) if you must)."
)
_RETURN = "training_memory_bytes returned {kind} (on {on}); return the number of bytes as an int, e.g. `return total`."
MESSAGES = Messages("training_memory_bytes", {
    "trains-the-model": "Your function changed the values of its parameters" + _AS_IT_WAS,
    "converts-the-model": "Your function changed the dtype of its parameters (.float() or .to() work "
                          "in place on a module)" + _AS_IT_WAS,
    "changes-requires-grad": "Your function changed which of its parameters require gradients" + _AS_IT_WAS,
    "leaves-gradients": "Your function left gradients in (or removed them from) its parameters' .grad"
                        + _AS_IT_WAS,
    "leaves-the-model-changed": "Your function left the model otherwise than it found it: {difference}"
                                + _AS_IT_WAS,
    "returns-none": _RETURN,
    "returns-not-a-number": _RETURN,
    "one-element-size": Message(
        "You used one element size, {one} bytes, for every parameter, but this model's parameters "
        "take {sizes} bytes per element: multiply each tensor's numel() by its own "
        "p.element_size().{where}", advises=("p.element_size()",)),
    "shared-weight-counted-twice": (
        "You counted the shared weight twice, once for each layer that uses it: it is one tensor, "
        "with one gradient and one optimizer state. Loop over model.parameters(), which yields "
        "each parameter once.{where}"),
    "counts-state-dict": (
        "You counted the tensors of model.state_dict(): it also holds buffers (batch norm's "
        "running statistics, which get no gradient and no optimizer state) and lists a shared "
        "weight once per layer. Loop over model.parameters().{where}"),
    "counts-state-dict-once": (
        "You counted the tensors of model.state_dict() once each: they are detached copies "
        "(requires_grad=False), it holds buffers too, and it lists a shared weight twice. Loop "
        "over model.parameters().{where}"),
    "counts-elements": (
        "You counted elements, not bytes: multiply each tensor's numel() by its element_size() "
        "(4 bytes for float32, 2 for bfloat16, 8 for float64).{where}"),
    "fixed-element-size": (
        "This model's parameters take {size} bytes per element, but you counted 4: use "
        "p.element_size() rather than a fixed size.{where}"),
    "element-size-by-hand": Message(
        "This model is float64, 8 bytes per element, but you counted 2: use p.element_size() "
        "rather than a size chosen from the dtype by hand.{where}", advises=("p.element_size()",)),
    "float32-sized-gradient-or-state": (
        "You counted the gradients or the optimizer state at 4 bytes an element, as if they were "
        "float32, but this model's parameters take {size} bytes per element: a gradient and each "
        "state tensor have their parameter's dtype, so they take its element_size() too.{where}"),
    "complex-element-size": Message(
        "This model's parameters are {dtype}: {size} bytes per element (a real and an imaginary "
        "part), but you counted {half}, the size of one part (torch.finfo(dtype).bits gives the "
        "width of the real part). Use p.element_size(), which knows every dtype.{where}",
        advises=("p.element_size()",)),
    "old-grad-counted-as-trainable": (
        "You counted a gradient and optimizer state for a frozen parameter because it still holds "
        "a .grad from before it was frozen: whether a parameter trains is its requires_grad. With "
        "requires_grad=False it gets no new gradient, and the optimizer keeps no state for it."
        "{where}"),
    "frozen-parameters-counted": (
        "You counted a gradient and optimizer state for the frozen parameters too: a parameter "
        "with requires_grad=False gets no gradient, and the optimizer keeps no state for it.{where}"),
    "eval-mode-counted-as-not-training": (
        "The model was in eval mode, and you counted no gradients and no optimizer state for it: "
        "the mode (model.training) only says how dropout and batch norm behave, not whether the "
        "model is trained. A parameter gets a gradient and optimizer state when it requires_grad."
        "{where}"),
    "remembers-an-earlier-answer": (
        "This is the model of the first case, changed since (its first layer frozen), and you "
        "returned the count you gave for it before: your function remembered its answer (a "
        "cache by id(model), or a global). Count from the model's parameters on every call."
        "{where}"),
    "adam-one-state": (
        "You counted one state tensor for Adam; it keeps two per parameter, exp_avg and "
        "exp_avg_sq (the running mean of gradients and of their squares).{where}"),
    "no-optimizer-state": (
        "The optimizer state is missing: SGD with momentum keeps one buffer per parameter, Adam "
        "keeps two.{where}"),
    "momentum-two-states": "SGD with momentum keeps one buffer per parameter, not two (two is Adam).{where}",
    "state-for-plain-sgd": "Plain SGD (no momentum) keeps no state at all: parameters plus gradients.{where}",
    "no-gradients": (
        "The gradients are missing: after backward() every trainable parameter has a .grad of its "
        "own size.{where}"),
    "parameters-only": (
        "You counted the parameters only; training also holds their gradients and the optimizer's "
        "state.{where}"),
    "wrong-count": (
        "Not the right count{where}. Add, for each parameter p of model.parameters(): its bytes "
        "(p.numel() * p.element_size()); if p.requires_grad, as much again for the gradient and "
        "that many times 0 (SGD), 1 (momentum) or 2 (Adam) for the state."),
    "finfo-of-an-integer": (
        "a parameter may have an integer dtype (a frozen nn.Parameter of ids or counts): "
        "torch.finfo only knows floating-point dtypes, while p.element_size() gives the bytes of "
        "any dtype."),
    "passed": (
        "Correct: parameters once, and for each trainable one a gradient and 0, 1 or 2 state "
        "tensors of the same size. None of it depends on the batch size."),
    "hint-1": "Loop over model.parameters(). A tensor's bytes are p.numel() * p.element_size().",
    "hint-2": (
        "Every parameter counts once. A parameter with requires_grad=True adds a gradient of the "
        "same size, and the optimizer's state: 0 tensors for 'sgd', 1 for 'momentum', 2 for 'adam'."),
    "hint-3": (
        "states = {{'sgd': 0, 'momentum': 1, 'adam': 2}}[optimizer_name]; for each p: "
        "size = p.numel() * p.element_size(); total += size; if p.requires_grad: "
        "total += size * (1 + states)."),
})


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


def _mlp(dtype=torch.float32, frozen_first=False, last_dtype=None, int_ids=False):
    if dtype.is_complex:  # made complex (Module.to warns that complex modules are new)
        model = nn.Sequential(nn.Linear(20, 30, dtype=dtype), nn.ReLU(), nn.Linear(30, 5, dtype=dtype))
    else:
        model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5)).to(dtype)
    if int_ids:  # an integer parameter: it cannot require grad, finfo does not know its dtype
        model.register_parameter("ids", nn.Parameter(torch.arange(12), requires_grad=False))
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


class _OwnModel(nn.Module):
    """A model of its own class: a convolution (a 4-d weight) one level down, inside an
    nn.Sequential, and a 0-d parameter registered on the model itself."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU())
        self.head = nn.Linear(12, 2)
        self.temperature = nn.Parameter(torch.tensor(1.0))

    def forward(self, x):
        return self.head(self.features(x).flatten(1)) / self.temperature


_MEMORY_CASES = [
    ("a float32 MLP (785 parameters) with plain SGD", "sgd", {}),
    ("the same MLP with SGD and momentum", "momentum", {}),
    ("the same MLP with Adam", "adam", {}),
    ("a model with batch norm (running statistics are buffers) and one weight shared by two "
     "layers, with Adam", "adam", {"tied": True}),
    ("an MLP whose first layer is frozen (requires_grad=False), with Adam", "adam", {"frozen_first": True}),
    ("a bfloat16 MLP with SGD and momentum", "momentum", {"dtype": torch.bfloat16}),
    ("a float64 MLP with plain SGD", "sgd", {"dtype": torch.float64}),
    ("an MLP whose first layer is float32 and last layer bfloat16, with SGD and momentum",
     "momentum", {"last_dtype": torch.bfloat16}),
    # The states a model arrives in (states.py), the dtypes the task leaves open, other shapes
    ("a float16 MLP with Adam", "adam", {"dtype": torch.float16}),
    ("an MLP in eval mode (model.eval()), with SGD and momentum", "momentum", {"states": ["eval"]}),
    ("an MLP whose every .grad already holds a gradient of 1e8 (from an earlier step), with Adam",
     "adam", {"states": ["grad-large"]}),
    ("a complex64 MLP (8 bytes per element: a float32 real and imaginary part), with Adam",
     "adam", {"dtype": torch.complex64}),
    ("an MLP that also holds a frozen int64 parameter (12 ids, requires_grad=False), with SGD and "
     "momentum", "momentum", {"int_ids": True}),
    ("an MLP frozen after some training: its first weight set to requires_grad=False while its "
     ".grad still holds the gradient (1e8) of an earlier step, with Adam", "adam",
     {"states": ["grad-large", "first-frozen"]}),
    ("a model of its own class: a convolution (4-d weight) inside an nn.Sequential, and a 0-d "
     "parameter on the model itself, with SGD and momentum", "momentum", {"own": True}),
    # A second call, on the model of the first case: the same object, its first layer frozen since
    ("the float32 MLP of the first case again (the same object), after its first layer was "
     "frozen, with plain SGD", "sgd", {"frozen_first": True, "again": True}),
]


def _model_state(model) -> dict:
    params = list(model.parameters())
    return {
        "dtypes": [str(p.dtype) for p in params],
        "requires_grad": [bool(p.requires_grad) for p in params],
        "grads": sum(p.grad is not None for p in params),
        "values": _flat([(torch.view_as_real(p) if p.is_complex() else p).double() for p in params]),
    }


def _snapshot(model) -> dict:
    """states.snapshot, which reads a complex parameter's real part (its values are compared
    whole by ``_model_state``) and warns that it does."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Casting complex values to real")
        return snapshot(model)


def _built(model: dict):
    """The model a case describes (its recorded construction: "tied", "own", or the MLP's dtypes
    and frozen layer, then the states it is put in), seeded as the probe seeds it."""
    torch.manual_seed(model["seed"])
    if model.get("tied"):
        built = _tied_model()
    elif model.get("own"):
        built = _OwnModel()
    else:
        dtypes = {key: getattr(torch, model[key]) for key in ("dtype", "last_dtype") if key in model}
        built = _mlp(frozen_first=model.get("frozen_first", False), int_ids=model.get("int_ids", False),
                     **dtypes)
    for state in model.get("states", []):
        MODULE_STATES[state].put(built)  # eval, frozen, an old .grad: no context to enter
    return built


def _construction(options: dict, seed: int = 0) -> dict:
    """A case's options as plain data (dtypes by name), with the seed the model is built with."""
    plain = {key: str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else value
             for key, value in options.items() if key != "again"}
    return {**plain, "seed": seed}


def _probe_training_memory_bytes(answer, run):
    """What the answer returned for each model, how that model was built ("given"), whether the
    call changed it and what it left ("left", a states.snapshot): never a count of bytes
    (``_expect_training_memory_bytes`` counts those on the rebuilt model, and what the
    reference leaves of it, on the judge's side)."""
    cases = []
    record = {"cases": cases}
    first = None
    for on, name, options in _MEMORY_CASES:
        construction = _construction(options)
        if options.get("again"):  # the first case's model, as the learner's code left it
            model = first
            model[0].requires_grad_(False)
        else:
            model = _built(construction)
        first = first if first is not None else model
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
            "left": _snapshot(model),
            "again": bool(options.get("again")),
        })
    return record


def _expect_training_memory_bytes(record):
    """The byte and element counts of each case's model, rebuilt from its recorded construction
    (its parameters, the trainable ones, what state_dict() and each layer list), from which the
    judge computes the right count and each classic mistake's; and what the reference leaves of
    the rebuilt model ("expected_left")."""
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
                "complex": sorted({str(p.dtype).removeprefix("torch.") for p in params if p.is_complex()}),
                "old_grad_frozen": any(p.grad is not None and not p.requires_grad for p in params),
                "listed_bytes": sum(p.numel() * p.element_size() for p in listed),
                "stored_bytes": sum(t.numel() * t.element_size() for t in stored),
            })
            training_memory_bytes.reference(model, case["optimizer"])
            case["expected_left"] = _snapshot(model)
    return record


def _judge_training_memory_bytes(record):
    problem = _judge_memory_cases(record["cases"])
    if problem is None and record.get("raised"):
        return Raised(record["raised"])
    return problem


_CHANGED = {"values": "trains-the-model", "dtypes": "converts-the-model",
            "requires_grad": "changes-requires-grad", "grads": "leaves-gradients"}


def _named(case, expected):
    """Each classic mistake's count on this case, as (count or None, message id, fields)."""
    name, s, size = case["optimizer"], _STATES[case["optimizer"]], case["element_size"]
    params, trainable = case["param_bytes"], case["trainable_bytes"]
    listed, stored = case["listed_bytes"], case["stored_bytes"]
    elements = case["param_elements"] + case["trainable_elements"] * (1 + s)
    sizes = case.get("element_sizes", [size])
    complex_ = case.get("complex", [])
    frozen_counted = "old-grad-counted-as-trainable" if case.get("old_grad_frozen") else "frozen-parameters-counted"
    return [
        (expected / 2 if complex_ and len(sizes) == 1 else None, "complex-element-size",
         {"dtype": " and ".join(complex_), "size": size, "half": size // 2}),
        *((elements * one if len(sizes) > 1 else None, "one-element-size",
           {"one": one, "sizes": " or ".join(map(str, sizes))}) for one in sizes),
        (listed * (2 + s) if listed != params else None, "shared-weight-counted-twice", {}),
        (stored * (2 + s) if stored != params else None, "counts-state-dict", {}),
        (stored if stored != params else None, "counts-state-dict-once", {}),
        (case["param_elements"] + case["trainable_elements"] * (1 + s), "counts-elements", {}),
        (expected * 4 / size if size != 4 else None, "fixed-element-size", {"size": size}),
        (expected * 2 / size if size == 8 and not complex_ else None, "element-size-by-hand", {}),
        *((value if size != 4 and trainable else None, "float32-sized-gradient-or-state", {"size": size})
          for value in (params + trainable * 4 / size + trainable * s,
                        params + trainable + trainable * s * 4 / size)),
        (params * (2 + s) if trainable != params else None, frozen_counted, {}),
        (params + trainable * 2 if name == "adam" else None, "adam-one-state", {}),
        (params + trainable if s > 0 else None, "no-optimizer-state", {}),
        (params + trainable * 3 if name == "momentum" else None, "momentum-two-states", {}),
        (params + trainable * 2 if name == "sgd" else None, "state-for-plain-sgd", {}),
        (params + trainable * s, "no-gradients", {}),
        (params, "parameters-only", {}),
    ]


# Mistakes of the formula, whatever the dtype: an earlier model on which one would have shown,
# and did not, rules it out as the explanation of a later count.
_FORMULA_SLIPS = {"adam-one-state", "no-optimizer-state", "momentum-two-states", "state-for-plain-sgd",
                  "no-gradients", "parameters-only"}


def _judge_memory_cases(cases):
    ruled_out = set()  # formula slips an earlier model would have shown, and did not
    for case in cases:
        on, name, got = case["on"], case["optimizer"], case["got"]
        changed = case["changed"]
        if changed:
            return MESSAGES(_CHANGED[changed[0]], on=on)
        found = differences(case["left"], case["expected_left"]) if "expected_left" in case else []
        if found:
            return MESSAGES("leaves-the-model-changed", difference=found[0], on=on)
        if got is None:
            mistake = "returns-none" if case["got_kind"] == "NoneType" else "returns-not-a-number"
            return MESSAGES(mistake, kind=case["got_kind"], on=on)
        s = _STATES[name]
        params, trainable = case["param_bytes"], case["trainable_bytes"]
        expected = params + trainable * (1 + s)
        accepted = [expected]
        if name == "adam":  # Adam also keeps a 4-byte step counter per parameter tensor
            accepted.append(expected + 4 * case["trainable_tensors"])
        named = _named(case, expected)
        if any(abs(got - a) < 0.5 for a in accepted):
            ruled_out.update(id for value, id, _ in named
                             if id in _FORMULA_SLIPS and value is not None and abs(value - expected) >= 0.5)
            continue
        where = f" (on {on}: expected {expected:,} bytes, got {got:,.0f})"
        if "eval" in case["given"]["model"].get("states", []) and abs(got - params) < 0.5:
            return MESSAGES("eval-mode-counted-as-not-training", where=where)
        earlier = cases[0]["got"] if cases and cases[0] is not case else None
        if case.get("again") and earlier == got:
            return MESSAGES("remembers-an-earlier-answer", where=where)
        for value, mistake, fields in named:
            if value is not None and abs(got - value) < 0.5 and mistake not in ruled_out:
                id = "counts-state-dict" if mistake == "counts-state-dict-once" else mistake
                return Mistake(id, MESSAGES.text(mistake, where=where, **fields))
        return MESSAGES("wrong-count", where=where)
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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    messages=MESSAGES,
    # No note for a KeyError: its message is the key alone ('sgd'), and the generic likely cause
    # already says that the dictionary lacks it.
    error_notes=MESSAGES.notes({"finfo-of-an-integer": "torch.finfo() requires a floating point"}),
)
