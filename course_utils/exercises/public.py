"""Public cases: the part of a check that can run where no solution may be.

An exam release (``python -m course_utils.authoring release --exam``) ships no reference
solution and no code that computes what a right answer gives. Its ``check()`` runs on *public
cases* instead: fixed inputs, built afresh by code that only makes inputs, and the facts a right
answer produces on them, computed at release time by running the reference and shipped as
plain data. The learner's answer runs on the same inputs, its facts are recorded the same way,
and the two records are compared, field by field, with the messages the practice checks use
(shape, dtype, device, values; which argument changed). The practice course's full check, with
its other inputs, dtypes and stateful sequences, is what an exam's grader runs as *hidden*
cases.

One definition per exercise: ``Exercise(..., public=PublicCases(...))`` beside its probe.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from course_utils.exercises.core import Mistake, Outcome, mistake_of
from course_utils.exercises.facts import shape_text, tensor_problem, value_facts, values_problem

# A public record is a list, one entry per case: {"on": str, "facts": {...}}.
HYPERPARAMETERS = ("lr", "momentum", "dampening", "weight_decay", "nesterov", "betas", "eps",
                   "amsgrad", "alpha", "centered", "maximize")
Use = Callable[[Any, tuple, Callable, str], dict]


@dataclass(frozen=True)
class PublicCase:
    """One public input. ``arguments`` makes it afresh each time (seeded, no reference code)."""

    on: str
    arguments: Callable[[], tuple]


def call_and_describe(answer, arguments: tuple, run: Callable, on: str) -> dict:
    """The default use of a function answer: call it once; what it returned, and each argument
    as it is afterwards (an in-place change, or one the task asks for, shows there)."""
    returned = run(answer, *arguments, on=on)
    return {"returned": describe(returned), "arguments": [describe(value) for value in arguments]}


@dataclass(frozen=True)
class PublicCases:
    """An exercise's public cases, how its answer is used on them, and how closely to compare.

    ``use(answer, arguments, run, on)`` calls the learner's code only through ``run`` and returns
    ``describe``d facts; it must not compute what a right answer gives (that is the reference's
    job, at release time). ``names`` labels the facts in messages (``"returned"`` → "your
    result"; an argument's index → its parameter name).
    """

    cases: Sequence[PublicCase]
    use: Use = call_and_describe
    rtol: float = 1e-5
    atol: float = 1e-6
    # Facts compared with a loose tolerance instead: {"returned": (rtol, atol)} for a timing.
    loose: dict = field(default_factory=dict)
    # Whether a tensor's requires_grad is part of the answer (new_parameter: yes; a gradient
    # returned with or without its graph: no, as the practice checks accept both).
    requires_grad: bool = False
    # Classic mistakes (named as in the exercise's catalogue of answers, tests/) that these
    # cases cannot tell from a right answer, each with the reason; the hidden cases catch them.
    lets_through: dict = field(default_factory=dict)
    # A rule the task states that a record can show broken (a call of the course's worked
    # answer): ``refuses(record)`` gives the practice check's own named Mistake, or None; asked
    # before any fact is compared.
    refuses: Callable[[list], str | None] | None = None

    def probe(self, answer, run) -> list[dict]:
        return [{"on": case.on, "facts": self.use(answer, case.arguments(), run, case.on)}
                for case in self.cases]


def seeded_module(make: Callable, seed: int, scale: float = 0.5):
    """A module made by ``make()`` with every parameter drawn from ``seed``: the same numbers on
    every machine, and the global random stream left where it was."""
    import torch

    with torch.random.fork_rng(devices=[]):
        module = make()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)
    return module


# --------------------------------------------------------------------------------------------
# Describing what the code produced: plain data, comparable across processes and releases
# --------------------------------------------------------------------------------------------
def describe(value) -> dict:
    """Plain facts about ``value``: tensors with their numbers, a module's parameters and
    buffers, an optimizer's hyperparameters and state, containers item by item."""
    import torch

    if isinstance(value, torch.Tensor):
        facts = value_facts(value)
        if isinstance(value, torch.nn.Parameter):
            facts["kind"] = "tensor"
        return facts
    if isinstance(value, torch.nn.Module):
        state = value.state_dict(keep_vars=True)
        return {"kind": "module", "training": bool(value.training),
                "state": {name: describe(tensor) for name, tensor in state.items()}}
    if isinstance(value, torch.optim.Optimizer):
        # The hyperparameters an answer sets; not the implementation switches (foreach, fused,
        # capturable...), whose names change from one torch release to the next.
        groups = [{key: _number_or_text(item) for key, item in group.items() if key in HYPERPARAMETERS}
                  for group in value.param_groups]
        ordered = [p for group in value.param_groups for p in group["params"]]
        state = [{key: describe(item) for key, item in value.state.get(p, {}).items()}
                 for p in ordered]
        return {"kind": "optimizer", "groups": groups, "state": state}
    kind = type(value)
    if callable(value) and hasattr(value, "__qualname__") and not isinstance(value, type):
        # A function given as an input (a loss, a draw): known by its name, never by address.
        return {"kind": "function", "name": value.__qualname__}
    if value is None or kind in (bool, int, str):
        return {"kind": kind.__name__, "value": value}
    if kind is float:
        return {"kind": "float", "value": value if math.isfinite(value) else repr(value)}
    if kind in (list, tuple):
        return {"kind": kind.__name__, "items": [describe(item) for item in value]}
    if kind is dict:
        return {"kind": "dict", "keys": [repr(key) for key in value],
                "items": [describe(item) for item in value.values()]}
    if kind is np.ndarray and value.dtype.kind in "biufc":
        return {"kind": "ndarray", "shape": [int(n) for n in value.shape], "dtype": str(value.dtype),
                "values": np.array(value, copy=True)}
    return value_facts(value)  # anything else: its kind and repr


def _number_or_text(value):
    if type(value) in (bool, int, float, str) or value is None:
        return value if type(value) is not float or math.isfinite(value) else repr(value)
    if type(value) in (list, tuple):
        return [_number_or_text(item) for item in value]
    return repr(value)


# --------------------------------------------------------------------------------------------
# Comparing a learner's record with the expected one
# --------------------------------------------------------------------------------------------
def _kind_words(facts: dict) -> str:
    kind = facts["kind"]
    if kind == "tensor":
        return f"a tensor of shape {shape_text(facts['shape'])}"
    if kind in ("int", "float", "bool", "str", "NoneType"):
        return f"{facts['value']!r}" if kind != "NoneType" else "None"
    if kind in ("list", "tuple"):
        return f"a {kind} of {len(facts['items'])}"
    return {"module": "an nn.Module", "optimizer": "an optimizer", "dict": "a dict"}.get(
        kind, f"a {kind}" + (f" ({facts['repr']})" if "repr" in facts else ""))


def facts_problem(got: dict, expected: dict, what: str, on: str, rtol: float, atol: float,
                  grad: bool = False) -> str | None:
    """The first way ``got`` differs from ``expected``, said as the practice checks say it."""
    where = f" (on {on})"
    if got.get("kind") != expected.get("kind"):
        return f"{what} is {_kind_words(got)}; expected {_kind_words(expected)}{where}."
    kind = expected["kind"]
    if kind == "tensor":
        problem = tensor_problem(got, expected, what=what, on=on, rtol=rtol, atol=atol)
        if problem is None and grad and got.get("requires_grad") != expected.get("requires_grad"):
            wanted = "requires grad" if expected["requires_grad"] else "does not require grad"
            return f"{what} has requires_grad={got['requires_grad']}; expected a tensor that {wanted}{where}."
        return problem
    if kind == "float":
        a, b = got["value"], expected["value"]
        if isinstance(a, str) or isinstance(b, str):
            return None if a == b else f"{what} is {a}; expected {b}{where}."
        if math.isclose(a, b, rel_tol=rtol, abs_tol=atol):
            return None
        return f"{what} is {a:.6g}; expected {b:.6g}{where}."
    if kind in ("int", "bool", "str", "NoneType"):
        return None if got["value"] == expected["value"] else (
            f"{what} is {got['value']!r}; expected {expected['value']!r}{where}.")
    if kind in ("list", "tuple"):
        if len(got["items"]) != len(expected["items"]):
            return f"{what} holds {len(got['items'])} items; expected {len(expected['items'])}{where}."
        for index, (a, b) in enumerate(zip(got["items"], expected["items"])):
            problem = facts_problem(a, b, f"item {index} of {what}", on, rtol, atol, grad)
            if problem:
                return problem
        return None
    if kind == "dict":
        if got["keys"] != expected["keys"]:
            return f"{what} has the keys {', '.join(got['keys'])}; expected {', '.join(expected['keys'])}{where}."
        for key, a, b in zip(expected["keys"], got["items"], expected["items"]):
            problem = facts_problem(a, b, f"{what}[{key}]", on, rtol, atol, grad)
            if problem:
                return problem
        return None
    if kind == "module":
        if list(got["state"]) != list(expected["state"]):
            return (f"{what} has the parameters and buffers {', '.join(got['state']) or 'none'}; "
                    f"expected {', '.join(expected['state'])}{where}.")
        if got["training"] != expected["training"]:
            mode = "training" if expected["training"] else "eval"
            return f"{what} is left in {'training' if got['training'] else 'eval'} mode; expected {mode} mode{where}."
        for name in expected["state"]:
            problem = facts_problem(got["state"][name], expected["state"][name], f"{what}'s {name}", on, rtol, atol, grad)
            if problem:
                return problem
        return None
    if kind == "optimizer":
        if got["groups"] != expected["groups"]:
            return f"{what}'s settings are {got['groups']}; expected {expected['groups']}{where}."
        for index, (a, b) in enumerate(zip(got["state"], expected["state"])):
            if list(a) != list(b):
                return (f"{what}'s state for parameter {index} holds {', '.join(a) or 'nothing'}; "
                        f"expected {', '.join(b) or 'nothing'}{where}.")
            for key in b:
                problem = facts_problem(a[key], b[key], f"{what}'s {key} for parameter {index}", on, rtol, atol, grad)
                if problem:
                    return problem
        return None
    if kind == "ndarray":
        if got["shape"] != expected["shape"]:
            return f"{what} has shape {shape_text(got['shape'])}; expected {shape_text(expected['shape'])}{where}."
        if got["dtype"] != expected["dtype"]:
            return f"{what} has dtype {got['dtype']}; expected {expected['dtype']}{where}."
        return values_problem(got["values"], expected["values"], what=what, on=on, rtol=rtol, atol=atol)
    if kind == "function":
        return None if got["name"] == expected["name"] else (
            f"{what} is the function {got['name']}; expected {expected['name']}{where}.")
    return None if got.get("repr") == expected.get("repr") else (
        f"{what} is {got.get('repr')}; expected {expected.get('repr')}{where}.")


def _label(key: str, index: int | None, params: Sequence[str]) -> str:
    if key == "returned":
        return "your result"
    if key == "arguments" and index is not None:
        name = params[index] if index < len(params) else f"argument {index + 1}"
        return f"{name} after your function ran"
    return key if " " in key else key.replace("_", " ")  # a key with spaces is already a label


def _named(problem: str | None, label: str) -> str | None:
    """``problem`` with a mistake id where no generic kind fits its words: the fact that differs,
    in at most eight words (``fact-x-after-your-function-ran``), so that a class report can
    count it."""
    if problem is None or mistake_of(Outcome.FAILED, problem) != "other":
        return problem
    return Mistake("fact-" + "-".join(re.findall(r"[a-z0-9]+", label.lower())[:8]), problem)


def record_problem(got: list, expected: list, params: Sequence[str], spec: PublicCases) -> str | None:
    """The first difference between a learner's public record and the expected one."""
    if len(got) != len(expected):
        return f"the check recorded {len(got)} cases; expected {len(expected)}."
    for case_got, case_expected in zip(got, expected):
        on, facts, wanted = case_expected["on"], case_got["facts"], case_expected["facts"]
        for key, value in wanted.items():
            if key not in facts:  # a use() that stopped early records less: the facts before say why
                return f"the check could not record {_label(key, None, params)} of your answer (on {on})."
            rtol, atol = spec.loose.get(key, (spec.rtol, spec.atol))
            if key == "arguments":
                for index, (a, b) in enumerate(zip(facts[key], value)):
                    label = _label(key, index, params)
                    problem = facts_problem(a, b, label, on, rtol, atol, spec.requires_grad)
                    if problem:
                        return _named(problem, label)
                continue
            label = _label(key, None, params)
            problem = facts_problem(facts[key], value, label, on, rtol, atol, spec.requires_grad)
            if problem:
                return _named(problem, label)
    return None


def public_judge(expected: list, params: Sequence[str], spec: PublicCases) -> Callable[[list], str | None]:
    def judge(record: list) -> str | None:
        return (spec.refuses and spec.refuses(record)) or record_problem(record, expected, params, spec)
    return judge


def spec_of(exercise) -> PublicCases | None:
    """The public cases of ``exercise``: its own (``exercise.public``, the quick path's), else
    ``course_utils.exercises.public_cases.MODULE.NAME``, where MODULE is its chapter's exercise
    module; None while it has none."""
    import importlib

    own = getattr(exercise, "public", None)
    if isinstance(own, PublicCases):
        return own
    try:
        module = importlib.import_module(f"course_utils.exercises.public_cases.{exercise.chapter}")
    except ModuleNotFoundError:
        return None
    spec = getattr(module, exercise.name, None)
    return spec if isinstance(spec, PublicCases) else None


def same_facts(a, b) -> bool:
    """Whether two ``describe`` records are the same, numbers exactly (nan equal to nan)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_facts(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_facts(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    return a == b


# --------------------------------------------------------------------------------------------
# Public inputs as data: a quick-path exercise makes its public cases in its own module, which
# an exam release does not ship, so the release writes the inputs themselves
# --------------------------------------------------------------------------------------------
def inputs_as_data(spec: PublicCases) -> list:
    """The tensors each public case is called with, as plain data."""
    import torch

    return [{"on": case.on, "arguments": [
        {"dtype": str(a.dtype), "shape": list(a.shape),
         "values": a.to(torch.float64 if a.dtype.is_floating_point else torch.int64).numpy().copy()}
        for a in case.arguments()]} for case in spec.cases]


def cases_from_data(data: list) -> PublicCases:
    """``PublicCases`` that call the answer with the tensors ``inputs_as_data`` wrote."""
    import torch

    def maker(arguments):
        return lambda: tuple(torch.tensor(np.asarray(a["values"])).reshape(a["shape"]).to(
            getattr(torch, a["dtype"].replace("torch.", ""))) for a in arguments)

    return PublicCases([PublicCase(case["on"], maker(case["arguments"])) for case in data])
