"""T3 — independent_copy: shared memory with NumPy.

Engine: applies edges.edge_values (the edges of int64 and float32, nan and ±inf among them, as
arrays: the task allows any dtype and values); hand-written because its inputs are NumPy arrays,
not tensors, and its point (no shared memory) is seen by changing the array and the tensor
after the answer returns, which the quick path does not do.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.edges import edge_values
from course_utils.exercises.facts import same_values, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.tensors.common import CHAPTER, _calls_in


MESSAGES = Messages("independent_copy", {
    "made-array-read-only": (
        "Your function made the caller's array read-only ({on}): its writeable flag is off afterwards. "
        "Leave the array as it was; copy it instead."),
    "changed-array": "Your function changed the numbers in the caller's array ({on}).",
    "shares-memory": Message(
        "Your tensor shares memory with the array ({on}): changing one changed the other. "
        "torch.from_numpy and torch.as_tensor share; torch.tensor(array) copies (so does "
        "torch.from_numpy(array).clone()).{notes}",
        advises=("torch.tensor(array)",)),
    "legacy-tensor-constructor": Message(
        "Your tensor shares memory with the array ({on}): changing one changed the other. "
        "torch.from_numpy and torch.as_tensor share; torch.tensor(array) copies (so does "
        "torch.from_numpy(array).clone()).{notes}",
        advises=("torch.tensor(array)",)),
    "same-dtype-conversion-note": (
        " A conversion to the dtype the array already has (.float() of a float32 array) returns the same "
        "tensor, still sharing."),
    "legacy-constructor-shares-note": (
        " torch.Tensor(array) (capital T) shares a float32 array's memory and converts every other dtype "
        "to float32."),
    "changed-dtype": "Your tensor has dtype {got}, the array {expected} ({on}); a copy should keep the dtype.{cause}",
    "through-python-list": (
        "Your tensor has dtype {got}, the array {expected} ({on}); a copy should keep the dtype.{cause}"),
    "legacy-constructor-dtype-note": (
        " torch.Tensor(array) always makes float32; torch.tensor(array) keeps the array's dtype."),
    "python-list-note": (
        " .tolist() turns the numbers into Python floats and ints, and torch.tensor gives those its own "
        "defaults (float32, int64)."),
    "reused-buffer": (
        "Calling your function a second time changed the tensor it returned the first time ({on}): both "
        "calls return the same memory. Return a new tensor on every call, e.g. torch.tensor(array)."),
    "cached-result": (
        "Called a second time on the same array after the array changed, your function returned the old "
        "values ({on}): it gave back a result kept from an earlier call. Copy the array as it is now, on "
        "every call."),
    "wrong-on-second-call": "Your function was right on its first call, not on a second one: {problem}",
    "passed": "Correct: same values and dtype, and changing one no longer changes the other.",
    "hint-1": "Of torch.from_numpy, torch.as_tensor and torch.tensor, only one copies the data.",
    "hint-2": "torch.tensor(array) copies and keeps the dtype; torch.from_numpy(array).clone() too.",
    "stack-of-empty-array": (
        "an empty array has no rows, so the list given to torch.stack was empty. torch.tensor(array) "
        "copies an array of any shape, empty ones too, in one call."),
    "loop-over-0-d-array": (
        "a 0-d array (a single number) has no rows to go through. torch.tensor(array) copies an array of "
        "any shape in one call."),
    "from-numpy-of-scalar": (
        "torch.from_numpy takes an array, and arithmetic on a 0-d array (array + 0, array * 1, ...) gives "
        "a NumPy scalar, not an array. Copy without arithmetic: torch.from_numpy(array.copy()), or "
        "torch.tensor(array)."),
    "0-d-made-1-d": (
        "the tensor you copy into is 0-d (shape ()) but what you copy from has one dimension: "
        "np.ascontiguousarray (and np.atleast_1d) turn a 0-d array into shape (1,). torch.tensor(array) "
        "copies an array of any shape, 0-d too."),
})


# ============================================================================================
# T3 — shared memory with NumPy
# ============================================================================================
def independent_copy(array):
    return torch.tensor(array)


def _array_cases():
    """(description, array): several dtypes, a transposed and a strided (non-contiguous)
    layout, an empty array and a 0-d one."""
    rng = np.random.default_rng(3)
    yield "shape (4,), float64", rng.random(4) * 10
    yield "shape (2, 3), float32", (rng.random((2, 3)) * 10).astype(np.float32)
    yield "shape (3,), int64", rng.integers(0, 10, 3).astype(np.int64)
    yield "shape (3, 2), float32, transposed (non-contiguous)", (rng.random((2, 3)) * 10).astype(np.float32).T
    yield "shape (2, 2), int32, every other column (non-contiguous)", rng.integers(0, 10, (2, 4)).astype(np.int32)[:, ::2]
    yield "shape (5,), uint8", rng.integers(0, 10, 5).astype(np.uint8)
    yield "shape (2, 2), float16", (rng.random((2, 2)) * 10).astype(np.float16)
    yield "shape (3,), bool", np.array([True, False, True])
    yield "shape (0,), float64 (empty)", np.zeros(0)
    yield "shape (), float64 (0-d)", np.array(2.5)
    # The edges of the dtypes (edges.edge_values), made in NumPy: a tensor the probe made of
    # them would be the right answer, computed where the learner's code runs.
    yield "shape (11,), int64, at the edges of int64", np.array(edge_values(torch.int64), dtype=np.int64)
    yield ("shape (3, 6), float32, at the edges of float32 (±0, subnormals, its largest values, "
           "±inf, nan)", np.array(edge_values(torch.float32), dtype=np.float32).reshape(3, 6))


def _probe_independent_copy(answer, run):
    """What the answer gives on each array, and the arrays themselves: never what a right answer
    gives (``_expect_independent_copy`` adds that, on the judge's side)."""
    # The probe records numbers only; whether memory is shared is decided by the judge, so a
    # patched np.array_equal in the learner's session cannot decide it.
    cases = []
    for description, array in _array_cases():
        original = array.copy()
        on = f"a NumPy array of {description}"
        got = run(answer, array, on=on)
        case = {
            "on": on,
            "got": value_facts(got),
            "given": {"array": original.copy()},
            "array_after": array.copy(),
            "array_writeable": bool(array.flags.writeable),
        }
        comparable = (
            isinstance(got, torch.Tensor) and tuple(got.shape) == array.shape and array.size > 0
            and got.device.type == "cpu" and got.dtype is not torch.bool and array.dtype != np.bool_
            and got.layout is torch.strided
        )
        if comparable and array.flags.writeable:
            # (An inference tensor can only be changed in place inside inference mode. The
            # changes of the answer's tensor read past any torch function mode the answer left
            # on, as value_facts does.)
            with torch.no_grad(), torch.inference_mode(got.is_inference()), torch._C.DisableTorchFunction():
                array += 1  # does the tensor see a change of the array?
                case["array_changed_to"] = array.copy()
                case["tensor_after_array_change"] = value_facts(got)["values"]
                array[...] = original
                got.add_(100)  # does the array see a change of the tensor?
                case["array_after_tensor_change"] = array.copy()
                got.sub_(100)
                array[...] = original
            # Called again on the same array after it changed (by + 1, as _expect_independent_copy
            # repeats): a new copy of the new values, and the first result left as it was.
            first = value_facts(got)
            array += 1
            again = run(answer, array, on=on + ", second call after the array changed")
            case["again"] = value_facts(again)
            case["first_after_again"] = value_facts(got)
            case["first_before_again"] = first
            array[...] = original
        cases.append(case)
    return {"cases": cases, "calls": _calls_in(answer)}


def _expect_independent_copy(record):
    """What the reference solution gives on each recorded array, and on the array the second
    call was given (the same plus one), for the judge."""
    reference = independent_copy.reference
    for case in record["cases"]:
        array = case["given"]["array"]
        case["expected"] = value_facts(reference(array.copy()))
        if "again" in case:
            changed = array.copy()
            changed += 1
            case["again_expected"] = value_facts(reference(changed))
    return record


def _shares_memory(case) -> bool:
    if "array_changed_to" not in case:
        return False
    followed_array = same_values(case["tensor_after_array_change"], case["array_changed_to"], rtol=0, atol=0)
    followed_tensor = not same_values(case["array_after_tensor_change"], case["expected"]["values"], rtol=0, atol=0)
    return followed_array or followed_tensor


def _judge_independent_copy(record):
    cases, calls = record["cases"], record["calls"]
    for case in cases:  # the point of the exercise first: no sharing, in any case
        if not case["array_writeable"]:
            return MESSAGES("made-array-read-only", on=case["on"])
        if not same_values(case["array_after"], case["expected"]["values"], rtol=0, atol=0):
            return MESSAGES("changed-array", on=case["on"])
        if _shares_memory(case):
            names = {call.rstrip("()") for call in calls}
            mistake, notes = "shares-memory", ""
            if names & {"float", "double", "half", "long", "int", "to", "type"}:
                notes += MESSAGES.text("same-dtype-conversion-note")
            if "Tensor" in names:
                mistake = "legacy-tensor-constructor"
                notes += MESSAGES.text("legacy-constructor-shares-note")
            return MESSAGES(mistake, on=case["on"], notes=notes)
    for case in cases:
        got, on = case["got"], case["on"]
        if got["kind"] == "tensor" and got["shape"] == case["expected"]["shape"]:
            if got["dtype"] != case["expected"]["dtype"]:
                mistake, template, cause = "changed-dtype", "changed-dtype", ""
                if "Tensor" in calls:  # the same mistake as sharing, said with what shows it
                    mistake, cause = "legacy-tensor-constructor", MESSAGES.text("legacy-constructor-dtype-note")
                elif "tolist()" in calls:
                    mistake = template = "through-python-list"
                    cause = MESSAGES.text("python-list-note")
                return Mistake(mistake, MESSAGES.text(template, got=got["dtype"], on=on, cause=cause,
                                                      expected=case["expected"]["dtype"]))
        problem = tensor_problem(got, case["expected"], what="your tensor", on=on)
        if problem:
            return problem
        if "again" in case:
            if not same_values(case["first_after_again"]["values"], case["first_before_again"]["values"], rtol=0, atol=0):
                return MESSAGES("reused-buffer", on=on)
            problem = tensor_problem(case["again"], case["again_expected"], what="the second result", on=on)
            if problem:
                stale = case["again"]["kind"] == "tensor" and same_values(
                    case["again"].get("values", []), case["expected"]["values"]
                )
                if stale:
                    return MESSAGES("cached-result", on=on)
                return MESSAGES("wrong-on-second-call", problem=problem)
    return None


independent_copy = Exercise(
    "independent_copy",
    chapter=CHAPTER,
    title="A tensor that does not share the array's memory",
    expects=Function("independent_copy", ("array",),
                     returns="a tensor with the array's values and dtype, in its own memory"),
    probe=_probe_independent_copy,
    expect=_expect_independent_copy,
    judge=_judge_independent_copy,
    reference=independent_copy,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "stack-of-empty-array": "stack expects a non-empty TensorList",
        "loop-over-0-d-array": "iteration over a 0-d array",
        "from-numpy-of-scalar": "expected np.ndarray (got numpy.",
        "0-d-made-1-d": "output with shape [] doesn't match the broadcast shape [1]",
    }),
    messages=MESSAGES,
)
