"""T1 — match_reference: shape, dtype, device."""

from __future__ import annotations

import torch

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.facts import (
    given, same_values, shape_text, tensor_of, tensor_problem, value_facts,
)
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
)


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


def _match_tolerance(dtype) -> float:
    """How far a right answer's numbers can be from x.to(dtype): none for float64 and integer
    results (every way to convert gives the same numbers), a rounding step for the rest."""
    if not dtype.is_floating_point or dtype == torch.float64:
        return 0.0
    return 1e-6 if dtype == torch.float32 else 1e-2


def _probe_match_reference(answer, run):
    """What the answer gives on each input, and the inputs themselves (x and the reference):
    never what a right answer gives (``_expect_match_reference`` adds that, on the judge's side)."""
    generator = _generator(1)
    cases = []
    record = {"cases": cases}
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
        reference = torch.zeros(7, dtype=ref_dtype, device=ref_device)
        layout = " (a transposed, non-contiguous view)" if permuted else ""
        on = (
            f"x: {shape_text(list(shape))} {_dtype_name(x_dtype)} on cpu{layout}, "
            f"reference: {_dtype_name(ref_dtype)} on {ref_device}"
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
            if _left_as_it_was(given_x, x) else got_facts
        )
        cases.append(
            {
                "on": on,
                "got": got_facts,
                "again": again,
                "given": inputs,
                "x_dtype": str(x_dtype),
                "tolerance": _match_tolerance(ref_dtype),
                "reference_shape": [7],
                "x_after": value_facts(given_x),
                "reference_after": value_facts(reference),
            }
        )
    return record


def _expect_match_reference(record):
    """What the reference solution gives on each recorded x and reference tensor, for the judge."""
    for case in record["cases"]:
        x, reference = tensor_of(case["given"]["x"]), tensor_of(case["given"]["reference"])
        case["expected"] = value_facts(match_reference.reference(x, reference))
    return record


def _judge_match_reference(record):
    cases = record["cases"]
    for case in cases:
        got, expected, on = case["got"], case["expected"], case["on"]
        changed = _input_changed(case["given"]["x"], case["x_after"], "x", on)
        if changed:
            return changed
        ref_after = case["reference_after"]
        if ref_after["shape"] != case["reference_shape"] or ref_after["dtype"] != expected["dtype"]:
            return Mistake("changed-reference", (
                f"Your function changed the caller's reference ({on}); only read its dtype and "
                "device."
            ))
        if got["kind"] == "tensor":
            if got["shape"] == case["reference_shape"] and expected["shape"] != case["reference_shape"]:
                return Mistake("took-reference-shape", (
                    f"Your result has the reference's shape ({on}); only its dtype and device "
                    "should change. Keep x's own shape and values."
                ))
            if got["dtype"] != expected["dtype"]:
                tensors = [c["got"] for c in cases if c["got"]["kind"] == "tensor"]
                always_x = all(c["got"].get("dtype") == c["x_dtype"] for c in cases)
                fixed = len(tensors) == len(cases) and len({t["dtype"] for t in tensors}) == 1
                device_right = all(c["got"].get("device") == c["expected"]["device"] for c in cases)
                if always_x and not device_right:
                    moved = [c for c in cases if c["got"]["device"] != c["expected"]["device"]]
                    shown = next((c for c in moved if c["got"]["dtype"] != c["expected"]["dtype"]), moved[0])
                    return Mistake("returned-x-unchanged", (
                        f"Your result keeps x's dtype and device in every case: "
                        f"{_dtype_name(shown['got']['dtype'])} on {shown['got']['device']} where "
                        f"the reference is {_dtype_name(shown['expected']['dtype'])} on "
                        f"{shown['expected']['device']} ({shown['on']}). Change both: "
                        ".to(dtype=reference.dtype, device=reference.device)."
                    ))
                if always_x:
                    return Mistake("moved-device-only", (
                        f"Your result keeps x's dtype in every case: {_dtype_name(got['dtype'])} "
                        f"where the reference is {_dtype_name(expected['dtype'])} ({on}). Only "
                        "the device moved; .to(dtype=..., device=...) changes both."
                    ))
                if fixed:
                    return Mistake("fixed-dtype", (
                        f"Your result is {_dtype_name(got['dtype'])} in every case, whatever "
                        f"the reference's dtype ({on}: expected {_dtype_name(expected['dtype'])})."
                        " Take the dtype from the reference, reference.dtype, instead of a "
                        "fixed one."
                    ))
                if got["dtype"] == case["x_dtype"]:
                    return Mistake("kept-x-dtype", (
                        f"Your result kept x's dtype {_dtype_name(got['dtype'])} ({on}); it "
                        f"should have the reference's, {_dtype_name(expected['dtype'])}."
                    ))
                return Mistake("wrong-dtype", (
                    f"Your result has dtype {_dtype_name(got['dtype'])} ({on}); expected the "
                    f"reference's, {_dtype_name(expected['dtype'])}."
                ))
            if got["device"] != expected["device"]:
                return Mistake("wrong-device", (
                    f"Your result is on {got['device']}, the reference on {expected['device']} "
                    f"({on}). Move it with .to(reference.device)."
                ))
        tol = case["tolerance"]
        problem = tensor_problem(got, expected, on=on, rtol=tol, atol=tol)
        if problem:
            if tol == 0 and got["kind"] == "tensor" and got["shape"] == expected["shape"] and (
                same_values(got.get("values", []), expected["values"], rtol=1e-6, atol=0)
            ):
                return Mistake("float32-detour", (
                    f"Your numbers were rounded on the way ({on}): they match x only to about 7 "
                    "digits, as if they passed through float32, but a "
                    f"{_dtype_name(expected['dtype'])} result holds x's numbers exactly. Convert "
                    "in one step, straight to the reference's dtype: "
                    "x.to(dtype=reference.dtype, device=reference.device)."
                ))
            return problem
        if tensor_problem(case["again"], expected, on=on, rtol=tol, atol=tol):
            return Mistake("wrong-on-second-call", (
                f"Your function returned the right tensor on its first call but not on a "
                f"second call with the same x and reference ({on}): "
                + tensor_problem(case["again"], expected, what="the second result", rtol=tol, atol=tol)
            ))
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
    passed_message="Correct: same values and shape as x, the dtype and device of the reference.",
    hints=[
        "Print the three attributes of both tensors first: shape, dtype, device.",
        "x.to(...) can change the dtype and the device in one call.",
        "x.to(dtype=reference.dtype, device=reference.device)",
    ],
    error_notes=[
        (
            "reference.copy_(",
            "reference.copy_(x) writes x's numbers into the reference tensor itself: it changes "
            "the caller's reference, and needs x's shape to fit into reference's. The task asks "
            "for a new tensor from x: x.to(dtype=reference.dtype, device=reference.device).",
            "copy-into-reference",
        ),
        (
            "to() received an invalid combination of arguments - got (torch.dtype, torch.device",
            "with both given by position, .to() takes the device first: "
            "x.to(reference.device, reference.dtype); or name them, "
            "x.to(dtype=reference.dtype, device=reference.device).",
            "to-arguments-swapped",
        ),
        (
            "have incompatible tensor type",
            "an assignment to .data cannot move a tensor to another device (here meta), and on "
            "the caller's x it would change the caller's own tensor. Return a new tensor "
            "instead: x.to(dtype=reference.dtype, device=reference.device).",
            "assigned-to-data",
        ),
        (
            "invalid type: 'torch.meta",
            "x.type(...) knows only the tensor types with a name (CPU, CUDA), not every device "
            "(here meta). Use x.to(dtype=reference.dtype, device=reference.device).",
            "type-for-device",
        ),
    ],
)
