"""T1 — match_reference: shape, dtype, device.

Engine: applies edges.edge_tensor / edges.edge_values (every int edge of int64 and int16, every
float edge of float64, float32 and bfloat16, the whole-number float edges an integer reference
can hold) and an empty x, plus a reference that requires grad (a model's weight); hand-written
because the task's second input is a reference on another device (meta), which the quick path
does not make, and its named mistakes read what the answer did across all the cases (always x's
dtype, one fixed dtype, a detour through a narrower dtype).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Raised, later_error
from course_utils.exercises.edges import Allowed, edge_values
from course_utils.exercises.facts import (
    given, same_values, shape_text, tensor_of, tensor_problem, value_facts,
)
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
)

_ONE_STEP = "x.to(dtype=reference.dtype, device=reference.device)"

MESSAGES = Messages("match_reference", {
    "changed-reference": "Your function changed the caller's reference ({on}); only read its dtype and device.",
    "took-reference-shape": (
        "Your result has the reference's shape ({on}); only its dtype and device should change. Keep x's "
        "own shape and values."),
    "returned-x-unchanged": Message(
        "Your result keeps x's dtype and device in every case: {got_dtype} on {got_device} where the "
        "reference is {expected_dtype} on {expected_device} ({on}). Change both: "
        ".to(dtype=reference.dtype, device=reference.device).", advises=(_ONE_STEP,)),
    "moved-device-only": (
        "Your result keeps x's dtype in every case: {got_dtype} where the reference is {expected_dtype} "
        "({on}). Only the device moved; .to(dtype=..., device=...) changes both."),
    "fixed-dtype": (
        "Your result is {got_dtype} in every case, whatever the reference's dtype ({on}: expected "
        "{expected_dtype}). Take the dtype from the reference, reference.dtype, instead of a fixed one."),
    "kept-x-dtype": "Your result kept x's dtype {got_dtype} ({on}); it should have the reference's, {expected_dtype}.",
    "wrong-dtype": "Your result has dtype {got_dtype} ({on}); expected the reference's, {expected_dtype}.",
    "wrong-device": Message(
        "Your result is on {got_device}, the reference on {expected_device} ({on}). Move it with "
        ".to(reference.device).", advises=("x.to(reference.device)",)),
    "copied-requires-grad": (
        "Your result requires grad and x does not ({on}): only the reference's dtype and device belong "
        "on x, not its requires_grad (a model's weights require grad; the tensor you made stays as it was)."),
    "changed-x-requires-grad": (
        "Your function left the caller's x requiring grad ({on}). When x already has the reference's "
        "dtype and device, x.to(...) returns x itself, so setting requires_grad (or any in-place change) "
        "on the result changes the caller's x; change nothing but the dtype and device."),
    "float32-detour": Message(
        "Your numbers were rounded on the way ({on}): they match x only to about 7 digits, as if they "
        "passed through float32, but a {expected_dtype} result holds x's numbers exactly. Convert in one "
        "step, straight to the reference's dtype: x.to(dtype=reference.dtype, device=reference.device).",
        advises=(_ONE_STEP,)),
    "detour": Message(
        "Your numbers were rounded on the way ({on}): they are what x gives through {via}, which cannot "
        "hold every {x_dtype} number, but a result of dtype {expected_dtype} holds x's numbers exactly. Convert in "
        "one step, straight to the reference's dtype: x.to(dtype=reference.dtype, device=reference.device).",
        advises=(_ONE_STEP,)),
    "integer-values": (
        "your result has the right shape but wrong values (on {on}): {count} of {size} differ; first{at}: "
        "got {got}, expected {expected}."),
    "at-index": " at index {index}",
    "at-nothing": "",
    "wrong-on-second-call": (
        "Your function returned the right tensor on its first call but not on a second call with the "
        "same x and reference ({on}): {problem}"),
    "passed": "Correct: same values and shape as x, the dtype and device of the reference.",
    "hint-1": "Print the three attributes of both tensors first: shape, dtype, device.",
    "hint-2": "x.to(...) can change the dtype and the device in one call.",
    "hint-3": "x.to(dtype=reference.dtype, device=reference.device)",
    "copy-into-reference": (
        "reference.copy_(x) writes x's numbers into the reference tensor itself: it changes the caller's "
        "reference, and needs x's shape to fit into reference's. The task asks for a new tensor from x: "
        "x.to(dtype=reference.dtype, device=reference.device)."),
    "to-arguments-swapped": (
        "with both given by position, .to() takes the device first: x.to(reference.device, "
        "reference.dtype); or name them, x.to(dtype=reference.dtype, device=reference.device)."),
    "assigned-to-data": (
        "an assignment to .data cannot move a tensor to another device (here meta), and on the caller's x "
        "it would change the caller's own tensor. Return a new tensor instead: "
        "x.to(dtype=reference.dtype, device=reference.device)."),
    "type-for-device": (
        "x.type(...) knows only the tensor types with a name (CPU, CUDA), not every device (here meta). "
        "Use x.to(dtype=reference.dtype, device=reference.device)."),
    "took-reference-shape-raised": (
        "your function takes the reference's shape: it brings x together with a tensor shaped "
        "like the reference (torch.empty_like(reference) filled by .copy_(x), x * "
        "torch.ones_like(reference), x + reference * 0, ...), and the reference's shape is not "
        "x's. The result keeps x's shape; take only the dtype and device from the reference: "
        "x.to(dtype=reference.dtype, device=reference.device), or torch.empty_like(x, "
        "dtype=reference.dtype, device=reference.device).copy_(x)."),
    "numpy-has-no-dtype": (
        "numpy has no bfloat16 (nor a meta device): a detour through x.numpy() cannot hold every tensor "
        "the task allows. Convert with torch itself: x.to(dtype=reference.dtype, device=reference.device)."),
})


# ============================================================================================
# T1 — shape, dtype, device
# ============================================================================================
def match_reference(x, reference):
    return x.to(dtype=reference.dtype, device=reference.device)


# (x's dtype, x's shape, x non-contiguous, reference's dtype, reference's device). "meta"
# tensors have a device but no data, so moving to another device can be checked on a machine
# with only a CPU. Float x meeting an integer reference holds whole numbers, so truncating and
# rounding agree.
_MATCH_CASES = [
    (torch.float64, (3,), False, torch.float32, "cpu"),
    (torch.int64, (2, 3), False, torch.float32, "cpu"),
    (torch.float32, (4, 1), False, torch.float16, "cpu"),
    (torch.float32, (2, 2), False, torch.float32, "meta"),
    (torch.float64, (5,), False, torch.bfloat16, "meta"),
    (torch.float32, (3, 4), True, torch.float64, "cpu"),
    (torch.float32, (2, 3), False, torch.int64, "cpu"),
    (torch.int32, (4,), False, torch.int64, "meta"),
    (torch.float16, (), False, torch.float64, "cpu"),
    # Numbers float32 cannot hold: a detour through float32 (x.float().to(...)) shows.
    (torch.float64, (4,), False, torch.float64, "cpu"),
    (torch.int64, (3,), False, torch.float64, "cpu"),
]

# Then the edges the task allows ("integer and float inputs", any values): (x's dtype, its
# values, the reference's dtype and device, whether the reference requires grad, what x is).
# Every int edge (the extremes, 2**24 + 1, 2**53 + 1: a detour through float32 or float64 shows)
# towards an integer reference that holds them; every float edge (±0, subnormals, the largest
# values, ±inf, nan) towards a float reference; the whole numbers among float64's edges and
# int32's extremes towards an int32 reference (a float x meeting an integer one holds whole
# numbers, where truncating and rounding agree); bfloat16, which numpy has no type for; an empty
# x of two dimensions; a reference that requires grad, as a model's weights do.
_ALL_FLOAT = "at the edges of {dtype} (±0, subnormals, its largest values, ±inf, nan)"


def _whole_float_edges():
    int32 = torch.iinfo(torch.int32)
    return [v for v in edge_values(torch.float64, Allowed(finite=True, low=int32.min, high=int32.max))
            if math.trunc(v) == round(v)] + [float(int32.max), float(int32.min)]


_EDGE_CASES = [
    (torch.int64, lambda: edge_values(torch.int64), torch.int64, "cpu", False,
     "at the edges of {dtype} (0, ±1, its extremes, 2**24 + 1 and 2**53 + 1)"),
    (torch.int16, lambda: edge_values(torch.int16), torch.int32, "cpu", False,
     "at the edges of {dtype} (0, ±1, its extremes)"),
    (torch.float64, lambda: edge_values(torch.float64), torch.float32, "cpu", False, _ALL_FLOAT),
    (torch.float32, lambda: edge_values(torch.float32), torch.float64, "cpu", False, _ALL_FLOAT),
    (torch.bfloat16, lambda: edge_values(torch.bfloat16), torch.float32, "cpu", False, _ALL_FLOAT),
    (torch.float64, _whole_float_edges, torch.int32, "cpu", False,
     "whole numbers among the edges of {dtype} (±0, ±1, int32's extremes) and values below one"),
    (torch.float32, lambda: torch.zeros(0, 3), torch.float16, "cpu", False, "empty"),
    (torch.float64, lambda: [[0.5, -2.0, 3.0]], torch.float32, "cpu", True, ""),
    (torch.float32, lambda: [[0.5, -2.0], [3.0, 1.0]], torch.float32, "cpu", True, ""),
]


def _match_tolerance(dtype) -> float:
    """How far a right answer's numbers can be from x.to(dtype): none for float64 and integer
    results (every way to convert gives the same numbers), a rounding step for the rest."""
    if not dtype.is_floating_point or dtype == torch.float64:
        return 0.0
    return 1e-6 if dtype == torch.float32 else 1e-2


def _random_cases(generator):
    for x_dtype, shape, permuted, ref_dtype, ref_device in _MATCH_CASES:
        raw = torch.rand(tuple(reversed(shape)) if permuted else shape, generator=generator,
                         dtype=torch.float64) * 10 - 3
        if not (x_dtype.is_floating_point and ref_dtype.is_floating_point):
            raw = raw.round()
        x = (raw.T if permuted else raw).to(x_dtype)
        if x_dtype == torch.int64 and ref_dtype == torch.float64:
            # Odd and past 2**24: float32 would round them. (Added in int64: a float64 tensor
            # of these numbers is what the right answer gives.)
            x = x + (2**40 + 1)
        layout = " (a transposed, non-contiguous view)" if permuted else ""
        yield x, permuted, torch.zeros(7, dtype=ref_dtype, device=ref_device), layout


def _edge_cases():
    for x_dtype, values, ref_dtype, ref_device, ref_grad, what in _EDGE_CASES:
        made = values()
        x = made.to(x_dtype) if isinstance(made, torch.Tensor) else torch.tensor(made, dtype=x_dtype)
        reference = torch.zeros(7, dtype=ref_dtype, device=ref_device, requires_grad=ref_grad)
        grad = ", requiring grad (as a model's weights do)" if ref_grad else ""
        yield x, False, reference, what and ", " + what.format(dtype=_dtype_name(x_dtype)), grad


def _probe_match_reference(answer, run):
    """What the answer gives on each input, and the inputs themselves (x and the reference):
    never what a right answer gives (``_expect_match_reference`` adds that, on the judge's side)."""
    cases = []
    record = {"cases": cases}
    made = [(*case, "") for case in _random_cases(_generator(1))] + list(_edge_cases())
    for x, permuted, reference, layout, grad in made:
        on = (
            f"x: {shape_text(list(x.shape))} {_dtype_name(x.dtype)} on cpu{layout}, "
            f"reference: {_dtype_name(reference.dtype)} on {reference.device}{grad}"
        )
        inputs = {"x": given(x), "reference": given(reference)}
        given_x = x.clone() if not permuted else x.T.clone().T
        try:
            got_facts = value_facts(run(answer, given_x, reference, on=on))
        except LearnerRaised as raised:
            # The judge decides: a mistake an earlier input already shows (the caller's x
            # changed in place) is the one to report, not the error a later input (a meta
            # reference) led to.
            record["raised"] = later_error(raised, answer, cases)
            break
        again = (
            value_facts(run(answer, given_x, reference, on=on + ", second call"))
            if _left_as_it_was(given_x, x) and not given_x.requires_grad else got_facts
        )
        cases.append(
            {
                "on": on,
                "got": got_facts,
                "again": again,
                "given": inputs,
                "x_dtype": str(x.dtype),
                "tolerance": _match_tolerance(reference.dtype),
                "reference_shape": [7],
                "x_after": value_facts(given_x),
                "reference_after": value_facts(reference),
            }
        )
    return record


_DETOURS = (torch.float32, torch.float64)


def _expect_match_reference(record):
    """What the reference solution gives on each recorded x and reference tensor, for the judge;
    and, where the result holds numbers, what x gives through float32 and float64 on its way
    (``detours``: a narrower dtype's rounding, named when an answer's numbers are those)."""
    for case in record["cases"]:
        x, reference = tensor_of(case["given"]["x"]), tensor_of(case["given"]["reference"])
        case["expected"] = value_facts(match_reference.reference(x, reference))
        case["detours"] = {}
        if reference.device.type != "meta":
            for via in _DETOURS:
                if via not in (x.dtype, reference.dtype):
                    case["detours"][_dtype_name(via)] = value_facts(x.to(via).to(reference.dtype))
    return record


def _integer_values_problem(got, expected, on):
    """Where an integer result's numbers differ, compared as integers (``facts.values_problem``
    compares in float64, which cannot tell 2**53 + 1 from 2**53)."""
    mine, theirs = np.asarray(got["values"]), np.asarray(expected["values"])
    if mine.shape != theirs.shape or np.array_equal(mine, theirs):
        return None
    differ = mine != theirs
    index = tuple(int(i) for i in np.argwhere(differ)[0])
    at = MESSAGES.text("at-index", index=index) if index else MESSAGES.text("at-nothing")
    return MESSAGES.text("integer-values", on=on, count=int(np.count_nonzero(differ)), size=int(differ.size),
                         at=at, got=int(mine[index]), expected=int(theirs[index]))


def _dtype_mistake(case, cases):
    got, expected, on = case["got"], case["expected"], case["on"]
    names = {"got_dtype": _dtype_name(got["dtype"]), "expected_dtype": _dtype_name(expected["dtype"])}
    tensors = [c["got"] for c in cases if c["got"]["kind"] == "tensor"]
    always_x = all(c["got"].get("dtype") == c["x_dtype"] for c in cases)
    fixed = len(tensors) == len(cases) and len({t["dtype"] for t in tensors}) == 1
    device_right = all(c["got"].get("device") == c["expected"]["device"] for c in cases)
    if always_x and not device_right:
        moved = [c for c in cases if c["got"]["device"] != c["expected"]["device"]]
        shown = next((c for c in moved if c["got"]["dtype"] != c["expected"]["dtype"]), moved[0])
        return MESSAGES("returned-x-unchanged", got_dtype=_dtype_name(shown["got"]["dtype"]),
                        got_device=shown["got"]["device"], expected_dtype=_dtype_name(shown["expected"]["dtype"]),
                        expected_device=shown["expected"]["device"], on=shown["on"])
    if always_x:
        return MESSAGES("moved-device-only", on=on, **names)
    if fixed:
        return MESSAGES("fixed-dtype", on=on, **names)
    if got["dtype"] == case["x_dtype"]:
        return MESSAGES("kept-x-dtype", on=on, **names)
    return MESSAGES("wrong-dtype", on=on, **names)


def _values_mistake(case):
    got, expected, on, tol = case["got"], case["expected"], case["on"], case["tolerance"]
    integer = not getattr(torch, expected["dtype"].removeprefix("torch.")).is_floating_point
    if integer and got["kind"] == "tensor" and got["shape"] == expected["shape"] and "values" in got \
            and got["dtype"] == expected["dtype"] and got["device"] == expected["device"] and "values" in expected:
        problem = _integer_values_problem(got, expected, on)
    else:
        problem = tensor_problem(got, expected, on=on, rtol=tol, atol=tol)
    if not problem:
        return None
    if tol == 0 and got["kind"] == "tensor" and got["shape"] == expected["shape"] and "values" in got:
        for via, detour in case.get("detours", {}).items():
            if detour["shape"] == got["shape"] and np.array_equal(np.asarray(detour["values"]),
                                                                   np.asarray(got["values"]), equal_nan=not integer):
                if via == "float32" and not integer:
                    return MESSAGES("float32-detour", on=on, expected_dtype=_dtype_name(expected["dtype"]))
                return MESSAGES("detour", on=on, via=via, x_dtype=_dtype_name(case["x_dtype"]),
                                expected_dtype=_dtype_name(expected["dtype"]))
        if not integer and same_values(got["values"], expected["values"], rtol=1e-6, atol=0):
            return MESSAGES("float32-detour", on=on, expected_dtype=_dtype_name(expected["dtype"]))
    return problem


def _judge_match_reference(record):
    cases = record["cases"]
    for case in cases:
        got, expected, on = case["got"], case["expected"], case["on"]
        changed = _input_changed(case["given"]["x"], case["x_after"], "x", on)
        if changed:
            return changed
        if case["x_after"].get("requires_grad") and not case["given"]["x"].get("requires_grad"):
            return MESSAGES("changed-x-requires-grad", on=on)
        ref_after = case["reference_after"]
        if ref_after["shape"] != case["reference_shape"] or ref_after["dtype"] != expected["dtype"]:
            return MESSAGES("changed-reference", on=on)
        if got["kind"] == "tensor":
            if got["shape"] == case["reference_shape"] and expected["shape"] != case["reference_shape"]:
                return MESSAGES("took-reference-shape", on=on)
            if got["dtype"] != expected["dtype"]:
                return _dtype_mistake(case, cases)
            if got["device"] != expected["device"]:
                return MESSAGES("wrong-device", got_device=got["device"], expected_device=expected["device"], on=on)
        problem = _values_mistake(case)
        if problem:
            return problem
        if got["kind"] == "tensor" and got["requires_grad"] != expected["requires_grad"]:
            return MESSAGES("copied-requires-grad", on=on)
        tol = case["tolerance"]
        again = tensor_problem(case["again"], expected, what="the second result", rtol=tol, atol=tol)
        if again:
            return MESSAGES("wrong-on-second-call", on=on, problem=again)
    if record.get("raised"):
        return Raised(record["raised"])
    return None


match_reference = Exercise(
    "match_reference",
    chapter=CHAPTER,
    title="Match a reference's dtype and device",
    expects=Function("match_reference", ("x", "reference"),
                     returns="a tensor with x's shape and values, on the reference's dtype and device"),
    probe=_probe_match_reference,
    expect=_expect_match_reference,
    judge=_judge_match_reference,
    reference=match_reference,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "copy-into-reference": "reference.copy_(",
        "to-arguments-swapped": "to() received an invalid combination of arguments - got (torch.dtype, torch.device",
        "assigned-to-data": "have incompatible tensor type",
        "type-for-device": "invalid type: 'torch.meta",
        "numpy-has-no-dtype": "unsupported ScalarType BFloat16",
        # Only x and the reference have shapes here, and the reference's never equals x's.
        "took-reference-shape-raised": "must match the size of tensor",
    }),
    messages=MESSAGES,
)
