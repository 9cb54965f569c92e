"""The quick path: an exercise on a function of tensors, from its reference and what its task allows.

Writing a probe and a judge by hand is what makes the course's checks good, and what makes an
instructor's own exercise expensive. For the common case, a function that takes tensors and
returns one, most of what a check must try is the same for every task (the design notes'
list): each dtype the task allows, a non-contiguous input, an empty and a batch-of-one input,
a second call with the same inputs, inputs left as they were, no global setting changed. So
the instructor gives the reference, the texts and ``Inputs`` (the shapes, dtypes and edge
cases the task allows), and ``tensor_function`` derives the probe and the judge, with the
course's generic messages (shape, dtype, device, values, changed input). Named mistakes
(``Slip``) come later, where a generic message is not enough: a slip is a function that
computes what the mistaken answer gives, and its message is shown when an answer gives that.

The probe computes no right answer: it records each input it gave (``given``: its numbers,
dtype, shape, device and strides) and what the learner's function returned and did; on the
judge's side, ``expect`` works out what the reference, and each slip, gives on those inputs,
rebuilt from the record, and the judge decides. So a grading kernel, where the probe runs,
computes no expected value, and its probe holds neither the reference nor a slip: ``expect``
reads the reference from the exercise when it runs (``exercise.reference``, which grading
replaces by a stub in the kernel).

The public cases an exam checks (``course_utils.exercises.public``) and the known answers
(``tests/test_known_answers.py``) come from the same declaration, so one module holds it all.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.edges import (ANY, Allowed, edge_tensor, edge_values, generated, near_ties, not_contiguous,
                                          resized)
from course_utils.exercises.facts import given, shape_text, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.public import PublicCase, PublicCases
from course_utils.exercises.running import learner_state_preserved
from course_utils.exercises.states import changed_settings as _changed_settings
from course_utils.exercises.states import session_settings as _settings

PRACTICE_SEED, PUBLIC_SEED = 0, 1000  # the hidden (practice) inputs and the public ones differ

# Relative and absolute tolerance per dtype: a right answer written another way rounds otherwise.
_TOLERANCE = {torch.float16: (1e-2, 1e-3), torch.bfloat16: (2e-2, 1e-2), torch.float32: (1e-5, 1e-6),
              torch.float64: (1e-7, 1e-9)}


@dataclass(frozen=True)
class Inputs:
    """The inputs a task allows: what the check tries, and the public cases an exam shows.

    ``shapes``: one entry per case, a shape (one argument) or a tuple of shapes (one per
    argument). ``dtypes``: every dtype the task allows; the first is the one the first shapes
    use. ``batch_dim``: a dimension every argument has and the task allows to be any size,
    also 0 and 1 (None: the task fixes it). ``edge_cases``: named inputs (``{"a constant
    column": lambda: (torch.ones(4, 3),)}``). Values are drawn uniformly from [low, high),
    rounded for integer dtypes.

    ``allowed`` (``edges.Allowed``): which values the task allows (finite only, no negatives, a
    range); the check then tries the classic edges of every allowed dtype that fall inside it
    (``edges.edge_values``: ±0, subnormals, the dtype's extremes, magnitudes that overflow,
    ±inf, nan) and ``generated`` inputs from ``torch.testing.make_tensor``. ``edges=False``
    turns the edges off (a task whose inputs are not numbers of any size, which then says why).
    ``ties=True``: also values one or two steps of the dtype apart, for a task whose answer
    compares values (a maximum, a threshold, a ranking), where a narrower dtype decides them
    otherwise; off by default, for arithmetic on near-ties is ill-conditioned and right
    formulas differ there (a column standardised from values one step apart).
    """

    shapes: Sequence
    dtypes: Sequence[torch.dtype] = (torch.float32, torch.float64)
    batch_dim: int | None = 0
    edge_cases: Mapping[str, Callable[[], tuple]] = field(default_factory=dict)
    low: float = -3.0
    high: float = 3.0
    allowed: Allowed = ANY
    edges: bool = True
    ties: bool = False
    generated: int = 2


@dataclass(frozen=True)
class Slip:
    """A named mistake: ``wrong(*arguments)`` gives what the mistaken answer returns."""

    id: str
    wrong: Callable
    message: str


@dataclass(frozen=True)
class _Case:
    on: str
    make: Callable[[], tuple]  # the arguments, made afresh on every call
    at_edges: bool = False  # the classic edges: where the reference gives inf or nan, so must the answer


def _shapes_of(entry, count: int) -> list[tuple]:
    if count == 1:
        return [tuple(entry)]
    if len(entry) != count or not all(isinstance(shape, (tuple, list)) for shape in entry):
        raise ValueError(f"with {count} arguments, each shape entry is a tuple of {count} shapes, not {entry!r}")
    return [tuple(shape) for shape in entry]


def _draw(shape, dtype, generator, low, high) -> torch.Tensor:
    values = torch.rand(shape, generator=generator, dtype=torch.float64) * (high - low) + low
    return (values.round() if not dtype.is_floating_point else values).to(dtype)


def _describe_arguments(names, shapes, dtype) -> str:
    return ", ".join(f"{name} of shape {shape_text(shape)}" for name, shape in zip(names, shapes)) + \
        f", {str(dtype).replace('torch.', '')}"


def cases(inputs: Inputs, names: Sequence[str], seed: int, *, every_variant: bool = True) -> list[_Case]:
    """The cases a check tries, simplest first: each shape, each dtype, a non-contiguous input,
    a batch of one and an empty batch, then the edge cases. ``every_variant=False`` (the public
    cases): each shape and each dtype, and the edge cases."""
    found: list[_Case] = []

    def add(on, shapes, dtype, change=lambda t: t):
        index = len(found)

        def make():
            generator = torch.Generator().manual_seed(seed + index)
            return tuple(change(_draw(shape, dtype, generator, inputs.low, inputs.high)) for shape in shapes)

        found.append(_Case(on, make))

    first_dtype, *other_dtypes = inputs.dtypes
    all_shapes = [_shapes_of(entry, len(names)) for entry in inputs.shapes]
    for shapes in all_shapes:
        add(_describe_arguments(names, shapes, first_dtype), shapes, first_dtype)
    for dtype in other_dtypes:
        add(_describe_arguments(names, all_shapes[0], dtype), all_shapes[0], dtype)
    if every_variant:
        shapes = all_shapes[0]
        if any(len(shape) and shape[-1] > 1 for shape in shapes):
            add(_describe_arguments(names, shapes, first_dtype) + ", not contiguous", shapes, first_dtype,
                not_contiguous)
        if inputs.batch_dim is not None:
            for size, what in ((1, "a batch of one"), (0, "an empty batch")):
                sized = [resized(shape, inputs.batch_dim, size) for shape in shapes]
                add(_describe_arguments(names, sized, first_dtype) + f" ({what})", sized, first_dtype)
        _add_edges(found, inputs, names, all_shapes[0], seed)
    for name, make in inputs.edge_cases.items():
        found.append(_Case(name, make))
    return found


def _add_edges(found: list, inputs: Inputs, names, shapes, seed: int) -> None:
    """The classic edges of every allowed dtype (with several arguments, cycled from starts that
    pair each edge with itself, its negation and others), near-ties where the task compares values, then ``generated``
    inputs from ``torch.testing.make_tensor``."""
    if not inputs.edges or not any(shape for shape in shapes):
        return
    cells = min(math.prod(shape) for shape in shapes if shape) or 1
    for dtype in inputs.dtypes:
        what = _describe_arguments(names, shapes, dtype)
        count = len(edge_values(dtype, inputs.allowed))
        # With several arguments, each edge meets itself (max + max), its negation (inf - inf)
        # and others: the arguments start 0, 1 and 5 places apart in the cycle.
        pairings = (0, 1, 5) if len(shapes) > 1 else (0,)
        starts = list(range(0, count, cells))
        for apart in pairings:
            for part, start in enumerate(starts):  # as many inputs as every edge needs
                found.append(_Case(
                    f"{what}, at the edges of {str(dtype).replace('torch.', '')} (±0, subnormals, its largest "
                    "values, magnitudes that overflow, ±inf, nan, as the task allows)"
                    + (f", part {part + 1}" if len(starts) > 1 else "")
                    + (f", the arguments {apart} apart in the cycle of edges" if len(shapes) > 1 else ""),
                    lambda dtype=dtype, start=start, apart=apart: tuple(
                        edge_tensor(shape, dtype, inputs.allowed, shift=start + apart * i)
                        for i, shape in enumerate(shapes)), at_edges=True))
        if inputs.ties and dtype.is_floating_point and inputs.allowed.admits(1.0):
            found.append(_Case(f"{what}, with ties and near-ties (values one step of "
                               f"{str(dtype).replace('torch.', '')} apart)",
                               lambda dtype=dtype: tuple(near_ties(shape, dtype) for shape in shapes)))
    dtype = inputs.dtypes[0]
    low = max(inputs.low, inputs.allowed.low) if inputs.allowed.low is not None else inputs.low
    high = min(inputs.high, inputs.allowed.high) if inputs.allowed.high is not None else inputs.high
    for index in range(inputs.generated):
        found.append(_Case(f"{_describe_arguments(names, shapes, dtype)}, generated input {index + 1}",
                           lambda index=index: tuple(generated(shape, dtype, seed=seed + 7919 * (index + 1) + i,
                                                               low=low, high=high)
                                                     for i, shape in enumerate(shapes))))


# --------------------------------------------------------------------------------------------
# The derived probe and judge
# --------------------------------------------------------------------------------------------
def _same_input(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether input ``a`` is still what ``b``, made the same way, is: its numbers (nan where
    nan was), or, on ``meta``, which holds none, its shape, dtype and strides."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.device.type == "meta":
        return a.stride() == b.stride()
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def _changed_inputs(names, given, kept) -> list[str]:
    return [name for name, a, b in zip(names, given, kept) if not _same_input(a, b)]


def _probe_for(names: Sequence[str], inputs: Inputs):
    """The probe: only the declared inputs in its closure, nothing that computes an answer."""

    def probe(answer, run):
        return _record(answer, run, names, inputs)

    return probe


def _given(tensor) -> dict:
    """An input as the judge rebuilds it (``facts.given``: numbers, dtype, shape, device), and
    how it lay in memory (a fact of the record: the reference's result does not depend on it)."""
    facts = given(tensor)
    if facts["kind"] == "tensor":
        facts["stride"] = [int(n) for n in tensor.stride()]
        facts["contiguous"] = bool(tensor.is_contiguous())
    return facts


def _record(answer, run, names: Sequence[str], inputs: Inputs) -> list[dict]:
    """Run ``answer`` on every case; record the inputs it was given and what it returned and did."""
    record = []
    for case in cases(inputs, names, PRACTICE_SEED):
        given_, kept = case.make(), case.make()
        arguments = {name: _given(value) for name, value in zip(names, kept)}  # before the answer runs
        before = _settings()
        got = value_facts(run(answer, *given_, on=case.on))
        changed_settings = _changed_settings(before, _settings())
        changed = _changed_inputs(names, given_, kept)
        if not changed and not changed_settings:  # the second call is watched as the first
            again = value_facts(run(answer, *given_, on=case.on + ", second call"))
            changed_settings = _changed_settings(before, _settings())
            changed = _changed_inputs(names, given_, kept)
        else:
            again = got
        record.append({"on": case.on, "given": arguments, "got": got, "again": again,
                       "changed": changed, "settings": changed_settings})
    return record


# --------------------------------------------------------------------------------------------
# The judge's side: the inputs rebuilt from the record, the reference and the slips run on them
# --------------------------------------------------------------------------------------------
def _rebuilt_input(facts: dict) -> torch.Tensor:
    """The tensor an input's record describes, made afresh (``facts.tensor_of``: the same
    numbers, dtype and shape, laid out contiguously, for what a function of tensors computes
    does not depend on strides; a ``meta`` input, which has no numbers, on ``meta``), on the
    device it was given on and requiring grad where it did."""
    if type(facts) is not dict or facts.get("kind") != "tensor":
        raise ValueError(f"an input recorded as {facts.get('kind') if type(facts) is dict else facts!r}, not a tensor")
    dtype = getattr(torch, str(facts["dtype"]).removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"an input's dtype {facts['dtype']!r} is no torch dtype")
    device = torch.device(facts["device"])
    if "values" not in facts and device.type != "meta":
        raise ValueError(f"an input on {device} recorded without its numbers")
    tensor = tensor_of(facts)
    if device.type not in ("cpu", "meta"):
        tensor = tensor.to(device)
    if facts.get("requires_grad") and (dtype.is_floating_point or dtype.is_complex):
        tensor.requires_grad_(True)
    return tensor


def _worked_out(function: Callable, arguments: list) -> dict:
    """What ``function`` (the reference or a slip, never the learner's code) gives on the
    recorded inputs, as facts; the session's random streams and settings left as they were."""
    with learner_state_preserved(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the check's own computation says nothing to the learner
        return value_facts(function(*[_rebuilt_input(facts) for facts in arguments]))


def _expect_for(reference_of: Callable[[], Callable], names: Sequence[str], inputs: Inputs,
                slips: Sequence[Slip]):
    """The judge's first half (``Exercise(expect=...)``): to each case of the record, what the
    reference gives on its inputs (``expected``) and what each slip gives (``slips``, None
    where a slip cannot run on them). ``reference_of()`` is the exercise's reference, read now:
    where the probe runs in a grading kernel, the exercise holds only a stub."""

    def expect(record):
        if [case["on"] for case in record] != [case.on for case in cases(inputs, names, PRACTICE_SEED)]:
            raise ValueError("its cases are not the ones this check tries")
        reference = reference_of()
        for case in record:
            arguments = [case["given"][name] for name in names]
            try:
                case["expected"] = _worked_out(reference, arguments)
            except Exception as error:  # a record Exercise.judge says it could not use
                raise ValueError(f"the reference solution raised {type(error).__name__} on the recorded "
                                 f"inputs (on {case['on']}): {error}") from None
            case["slips"] = {}
            for slip in slips:
                try:
                    case["slips"][slip.id] = _worked_out(slip.wrong, arguments)
                except Exception:  # a slip that cannot run on these inputs explains no answer on them
                    case["slips"][slip.id] = None
        return record

    return expect


def _tolerance(facts: dict) -> dict:
    dtype = getattr(torch, facts.get("dtype", "torch.float32").replace("torch.", ""), torch.float32)
    rtol, atol = _TOLERANCE.get(dtype, (0.0, 0.0))
    return {"rtol": rtol, "atol": atol}


def _non_finite_alike(got: dict, expected: dict) -> dict:
    """``got`` with each number that is inf or nan where the reference's is too taken as the
    reference's: at a dtype's edges, right formulas differ in which non-finite value they give
    (0/0 is nan, -tiny/tiny**2 is -inf), not in whether they give one."""
    if got.get("kind") != "tensor" or "values" not in got or "values" not in expected \
            or got.get("shape") != expected.get("shape"):
        return got
    mine = np.asarray(got["values"], dtype=np.float64)
    theirs = np.asarray(expected["values"], dtype=np.float64)
    both = ~np.isfinite(mine) & ~np.isfinite(theirs)
    return {**got, "values": np.where(both, theirs, mine).tolist()} if both.any() else got


# What the derived judge says, by mistake id: the generic messages of every quick exercise;
# ``messages_for`` adds each slip's own.
GENERIC_MESSAGES = {
    "changed-input": Message(
        "Your function changed its input {name} in place (on {on}); the task asks for a new tensor and "
        "{name} left as it was. Use out-of-place operations (x - m, not x.sub_(m)) or work on a clone."),
    "changed-global-state": (
        "Your function changed {setting} (on {on}); a function of tensors must leave the process's "
        "settings as it found them. Use a torch.Generator or a local context (torch.no_grad()) instead."),
    "wrong-on-second-call": (
        "Your function was right on its first call, not on a second call with the same inputs: "
        "{problem} Keep no state between calls."),
}


def messages_for(name: str, slips: Sequence[Slip]) -> Messages:
    """A quick exercise's table: the generic messages, then each slip's, with where it showed."""
    escaped = {slip.id: slip.message.replace("{", "{{").replace("}", "}}") + " (on {on})" for slip in slips}
    return Messages(name, {**GENERIC_MESSAGES, **escaped})


def _judge_for(slips: Sequence[Slip], inputs: Inputs, names: Sequence[str], messages: Messages):
    """The judge's second half: it decides from the record, ``expected`` and ``slips`` added."""

    def judge(record):
        at_edges = [case.at_edges for case in cases(inputs, names, PRACTICE_SEED)]
        for index, case in enumerate(record):
            on, got, expected = case["on"], case["got"], case["expected"]
            if index < len(at_edges) and at_edges[index]:
                got = _non_finite_alike(got, expected)
                case = {**case, "again": _non_finite_alike(case["again"], expected)}
            if case["changed"]:  # a plain message: the generic "changed-input" a class report counts
                return messages.text("changed-input", name=case["changed"][0], on=on)
            if case["settings"]:
                return messages("changed-global-state", setting=case["settings"][0], on=on)
            tolerance = _tolerance(expected)
            problem = tensor_problem(got, expected, on=on, **tolerance)
            if problem:
                for slip in slips:
                    facts = case["slips"][slip.id]
                    if facts is not None and tensor_problem(got, facts, **tolerance) is None \
                            and tensor_problem(expected, facts, **tolerance) is not None:
                        return messages(slip.id, on=on)
                return problem
            problem = tensor_problem(case["again"], expected, what="the second result", on=on, **tolerance)
            if problem:
                return messages("wrong-on-second-call", problem=problem)
        return None

    return judge


# --------------------------------------------------------------------------------------------
# The exercise
# --------------------------------------------------------------------------------------------
def tensor_function(
    name: str,
    *,
    chapter: str,
    title: str,
    reference: Callable,
    params: Sequence[str],
    returns: str,
    inputs: Inputs,
    hints: Sequence[str],
    passed_message: str = "Correct.",
    slips: Sequence[Slip] = (),
    known: Sequence[tuple[tuple, Any]] = (),
    error_notes: Sequence = (),
) -> Exercise:
    """An ``Exercise`` for ``name(*params)`` whose probe and judge are derived from ``inputs``.

    ``known``: pairs ``(arguments, expected)`` written out by hand, which the reference must
    give (``tests/test_known_answers.py`` runs them, and fails while there is none).
    """
    # The probe gets the inputs and nothing else; the judge's side reads the reference from the
    # exercise when it judges (grading withholds it in the kernel, where the probe runs).
    messages = messages_for(name, slips)
    exercise = Exercise(
        name,
        chapter=chapter,
        title=title,
        expects=Function(name, tuple(params), returns=returns),
        probe=_probe_for(tuple(params), inputs),
        expect=_expect_for(lambda: exercise.reference, tuple(params), inputs, tuple(slips)),
        judge=_judge_for(tuple(slips), inputs, tuple(params), messages),
        hints=hints,
        reference=reference,
        passed_message=passed_message,
        error_notes=error_notes,
        messages=messages,
    )
    exercise.public = PublicCases(
        [PublicCase(case.on, case.make) for case in cases(inputs, tuple(params), PUBLIC_SEED, every_variant=False)])
    exercise.known_answers = tuple(known)
    exercise.inputs = inputs
    return exercise
