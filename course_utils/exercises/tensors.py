"""Chapter 01 — Tensors: the three attributes, shared memory, views, masks, dimensions,
broadcasting, matrix products.

Each probe runs the learner's function on several generated inputs (several dtypes, a
non-contiguous layout, an empty or a one-element size where the task allows them), calls it
more than once on the same objects, and records whether the caller's inputs were left as they
were, so an answer that only works for one example, or only on its first call, does not pass.
Each reference solution is what ``.solution()`` shows.
"""

from __future__ import annotations

import ast

import numpy as np
import torch
from course_utils.exercises.shape_mentions import mentions, shape_forms
from course_utils.exercises.torch_calls import TorchCallCounter

from course_utils.exercises.answer_source import answer_nodes as _answer_nodes
from course_utils.exercises.core import Exercise, Function, Mistake, a_or_an
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.facts import same_values, shape_text, tensor_problem, value_facts

CHAPTER = "tensors"


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


# --------------------------------------------------------------------------------------------
# The answer's own source: read (never run) to check a rule the task states ("without a Python
# loop"), or to name a mistake only when the answer really contains it.
# --------------------------------------------------------------------------------------------
_LOOP_NODES = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
               ast.GeneratorExp)


def _loops_in(answer) -> list[str]:
    """The Python loops (for, while, comprehensions) written in the answer's own source."""
    found = []
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            if isinstance(inner, _LOOP_NODES):
                text = ast.unparse(inner).splitlines()[0]
                found.append(text if len(text) <= 70 else text[:67] + "...")
    return found


def _calls_in(answer) -> list[str]:
    """Names of the functions and methods the answer's own source calls (``squeeze``, ...)."""
    names = []
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call):
                func = inner.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name:
                    names.append(name + ("()" if not inner.args and not inner.keywords else ""))
    return names


def _reshapes_to_two_sizes(answer) -> bool:
    """Whether the answer's own source reshapes (or views) to two or more sizes, as in
    x.reshape(x.shape[1], x.shape[0]): a reshape mistaken for a transpose."""
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                    and inner.func.attr in ("reshape", "view")):
                args = inner.args
                if len(args) >= 2 or (len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List))
                                      and len(args[0].elts) >= 2):
                    return True
    return False




def _left_as_it_was(given, kept) -> bool:
    """Whether the caller's tensor ``given`` still equals ``kept``, a copy made before the call.

    A second call on the same inputs only makes sense when the first call left them alone
    (a changed input is reported from the record of the first call).
    """
    return (
        given.shape == kept.shape and given.dtype == kept.dtype and given.device == kept.device
        and (given.device.type == "meta" or bool(torch.equal(given, kept)))
    )


def _input_changed(before: dict, after: dict, name: str, on: str) -> str | None:
    """The message when the learner's function changed the caller's tensor ``name``.

    ``before`` and ``after`` are ``value_facts`` of the tensor before and after the call.
    """
    if after["kind"] != "tensor":  # cannot happen to a tensor: only its attributes can change
        return None
    if after["shape"] != before["shape"] or after["dtype"] != before["dtype"] or (
        after["device"] != before["device"]
    ):
        def looks(facts):
            device = f" on {facts['device']}" if after["device"] != before["device"] else ""
            return f"{shape_text(facts['shape'])} {_dtype_name(facts['dtype'])}{device}"

        return Mistake("changed-input-in-place", (
            f"Your function changed its input {name} in place ({on}): the caller's {name} is "
            f"{looks(after)} afterwards instead of {looks(before)}. Methods ending in an "
            f"underscore (squeeze_, t_, ...) and assignments to {name}.data change the caller's "
            f"own tensor; compute a new tensor and leave {name} as it was."
        ))
    if "values" in after and "values" in before and not same_values(
        after["values"], before["values"], rtol=0, atol=0
    ):
        return Mistake("changed-input-in-place", (
            f"Your function changed the numbers in its input {name} ({on}). An in-place "
            f"operation (sub_, -=, ...) on {name} or on a view of it changes the caller's "
            f"tensor; compute a new tensor and leave {name} as it was."
        ))
    return None


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
    generator = _generator(1)
    cases = []
    for x_dtype, shape, permuted, ref_dtype, ref_device in _MATCH_CASES:
        raw = torch.rand(tuple(reversed(shape)) if permuted else shape, generator=generator,
                         dtype=torch.float64) * 10 - 3
        if not (x_dtype.is_floating_point and ref_dtype.is_floating_point):
            raw = raw.round()
        if x_dtype == torch.int64 and ref_dtype == torch.float64:
            raw = raw + 2.0**40 + 1  # odd and past 2**24: float32 would round them
        x = (raw.T if permuted else raw).to(x_dtype)
        reference = torch.zeros(7, dtype=ref_dtype, device=ref_device)
        layout = " (a transposed, non-contiguous view)" if permuted else ""
        on = (
            f"x: {shape_text(list(shape))} {_dtype_name(x_dtype)} on cpu{layout}, "
            f"reference: {_dtype_name(ref_dtype)} on {ref_device}"
        )
        expected = value_facts(x.to(dtype=ref_dtype, device=ref_device))
        given = x.clone() if not permuted else x.T.clone().T
        try:
            got_facts = value_facts(run(answer, given, reference, on=on))
        except LearnerRaised:
            # A mistake an earlier input already showed (the caller's x changed in place) is
            # the one to report, not the error a later input (a meta reference) led to.
            try:
                shown = bool(cases) and _judge_match_reference({"cases": cases}) is not None
            except Exception:  # a judge that cannot decide on a part of the record
                shown = False
            if shown:
                break
            raise
        again = (
            value_facts(run(answer, given, reference, on=on + ", second call"))
            if _left_as_it_was(given, x) else got_facts
        )
        cases.append(
            {
                "on": on,
                "got": got_facts,
                "again": again,
                "expected": expected,
                "x_dtype": str(x_dtype),
                "tolerance": _match_tolerance(ref_dtype),
                "reference_shape": [7],
                "x_before": value_facts(x),
                "x_after": value_facts(given),
                "reference_after": value_facts(reference),
            }
        )
    return {"cases": cases}


def _judge_match_reference(record):
    cases = record["cases"]
    for case in cases:
        got, expected, on = case["got"], case["expected"], case["on"]
        changed = _input_changed(case["x_before"], case["x_after"], "x", on)
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
    return None


match_reference = Exercise(
    "match_reference",
    chapter=CHAPTER,
    title="Match a reference's dtype and device",
    expects=Function("match_reference", ("x", "reference"),
                     returns="a tensor with x's shape and values, on the reference's dtype and device"),
    probe=_probe_match_reference,
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


def _probe_independent_copy(answer, run):
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
            "expected": value_facts(torch.from_numpy(original.copy())),
            "array_after": array.copy(),
            "array_writeable": bool(array.flags.writeable),
        }
        comparable = (
            isinstance(got, torch.Tensor) and tuple(got.shape) == array.shape and array.size > 0
            and got.device.type == "cpu" and got.dtype is not torch.bool and array.dtype != np.bool_
            and got.layout is torch.strided
        )
        if comparable and array.flags.writeable:
            # (An inference tensor can only be changed in place inside inference mode.)
            with torch.no_grad(), torch.inference_mode(got.is_inference()):
                array += 1  # does the tensor see a change of the array?
                case["array_changed_to"] = array.copy()
                case["tensor_after_array_change"] = value_facts(got)["values"]
                array[...] = original
                got.add_(100)  # does the array see a change of the tensor?
                case["array_after_tensor_change"] = array.copy()
                got.sub_(100)
                array[...] = original
            # Called again on the same array after it changed: a new copy of the new values,
            # and the first result left as it was.
            first = value_facts(got)
            array += 1
            again = run(answer, array, on=on + ", second call after the array changed")
            case["again"] = value_facts(again)
            case["again_expected"] = value_facts(torch.from_numpy(array.copy()))
            case["first_after_again"] = value_facts(got)
            case["first_before_again"] = first
            array[...] = original
        cases.append(case)
    return {"cases": cases, "calls": _calls_in(answer)}


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
            return Mistake("made-array-read-only", (
                f"Your function made the caller's array read-only ({case['on']}): its "
                "writeable flag is off afterwards. Leave the array as it was; copy it instead."
            ))
        if not same_values(case["array_after"], case["expected"]["values"], rtol=0, atol=0):
            return Mistake("changed-array", (
                f"Your function changed the numbers in the caller's array ({case['on']})."
            ))
        if _shares_memory(case):
            names = {call.rstrip("()") for call in calls}
            mistake, notes = "shares-memory", ""
            if names & {"float", "double", "half", "long", "int", "to", "type"}:
                notes += (
                    " A conversion to the dtype the array already has (.float() of a float32 "
                    "array) returns the same tensor, still sharing."
                )
            if "Tensor" in names:
                mistake = "legacy-tensor-constructor"
                notes += (
                    " torch.Tensor(array) (capital T) shares a float32 array's memory and "
                    "converts every other dtype to float32."
                )
            return Mistake(mistake, (
                f"Your tensor shares memory with the array ({case['on']}): changing one changed "
                "the other. torch.from_numpy and torch.as_tensor share; torch.tensor(array) "
                f"copies (so does torch.from_numpy(array).clone()).{notes}"
            ))
    for case in cases:
        got, on = case["got"], case["on"]
        if got["kind"] == "tensor" and got["shape"] == case["expected"]["shape"]:
            if got["dtype"] != case["expected"]["dtype"]:
                mistake, cause = "changed-dtype", ""
                if "Tensor" in calls:
                    mistake = "legacy-tensor-constructor"
                    cause = " torch.Tensor(array) always makes float32; torch.tensor(array) keeps the array's dtype."
                elif "tolist()" in calls:
                    mistake, cause = "through-python-list", (
                        " .tolist() turns the numbers into Python floats and ints, and "
                        "torch.tensor gives those its own defaults (float32, int64)."
                    )
                return Mistake(mistake, (
                    f"Your tensor has dtype {got['dtype']}, the array {case['expected']['dtype']} "
                    f"({on}); a copy should keep the dtype.{cause}"
                ))
        problem = tensor_problem(got, case["expected"], what="your tensor", on=on)
        if problem:
            return problem
        if "again" in case:
            if not same_values(case["first_after_again"]["values"], case["first_before_again"]["values"], rtol=0, atol=0):
                return Mistake("reused-buffer", (
                    f"Calling your function a second time changed the tensor it returned the "
                    f"first time ({on}): both calls return the same memory. Return a new tensor "
                    "on every call, e.g. torch.tensor(array)."
                ))
            problem = tensor_problem(case["again"], case["again_expected"], what="the second result", on=on)
            if problem:
                stale = case["again"]["kind"] == "tensor" and same_values(
                    case["again"].get("values", []), case["expected"]["values"]
                )
                if stale:
                    return Mistake("cached-result", (
                        f"Called a second time on the same array after the array changed, your "
                        f"function returned the old values ({on}): it gave back a result kept "
                        "from an earlier call. Copy the array as it is now, on every call."
                    ))
                return Mistake("wrong-on-second-call", (
                    f"Your function was right on its first call, not on a second one: {problem}"
                ))
    return None


independent_copy = Exercise(
    "independent_copy",
    chapter=CHAPTER,
    title="A tensor that does not share the array's memory",
    expects=Function("independent_copy", ("array",),
                     returns="a tensor with the array's values and dtype, in its own memory"),
    probe=_probe_independent_copy,
    judge=_judge_independent_copy,
    reference=independent_copy,
    passed_message="Correct: same values and dtype, and changing one no longer changes the other.",
    hints=[
        "Of torch.from_numpy, torch.as_tensor and torch.tensor, only one copies the data.",
        "torch.tensor(array) copies and keeps the dtype; torch.from_numpy(array).clone() too.",
    ],
    error_notes=[
        (
            "stack expects a non-empty TensorList",
            "an empty array has no rows, so the list given to torch.stack was empty. "
            "torch.tensor(array) copies an array of any shape, empty ones too, in one call.",
            "stack-of-empty-array",
        ),
        (
            "iteration over a 0-d array",
            "a 0-d array (a single number) has no rows to go through. torch.tensor(array) "
            "copies an array of any shape in one call.",
            "loop-over-0-d-array",
        ),
        (
            "expected np.ndarray (got numpy.",
            "torch.from_numpy takes an array, and arithmetic on a 0-d array (array + 0, "
            "array * 1, ...) gives a NumPy scalar, not an array. Copy without arithmetic: "
            "torch.from_numpy(array.copy()), or torch.tensor(array).",
            "from-numpy-of-scalar",
        ),
        (
            "output with shape [] doesn't match the broadcast shape [1]",
            "the tensor you copy into is 0-d (shape ()) but what you copy from has one "
            "dimension: np.ascontiguousarray (and np.atleast_1d) turn a 0-d array into shape "
            "(1,). torch.tensor(array) copies an array of any shape, 0-d too.",
            "0-d-made-1-d",
        ),
    ],
)


# ============================================================================================
# T5 — transposes are views with other strides
# ============================================================================================
def flatten_transposed(x):
    return x.T.reshape(-1)


# (shape, dtype, layout): "transposed" gives x as the transpose of a contiguous tensor, so x
# itself is not contiguous (and x.T is); "strided" takes every other column.
_FLATTEN_CASES = [
    ((2, 3), torch.float32, "contiguous"),
    ((4, 5), torch.float64, "contiguous"),
    ((1, 6), torch.int64, "contiguous"),
    ((3, 1), torch.float32, "contiguous"),
    ((3, 3), torch.int32, "contiguous"),
    ((3, 4), torch.float32, "transposed"),
    ((2, 3), torch.float32, "strided"),
    ((3, 0), torch.float32, "contiguous"),
    ((1, 1), torch.float64, "contiguous"),
    ((2, 3), torch.bfloat16, "transposed"),  # "of any dtype": NumPy has no bfloat16
]


def _flatten_input(shape, dtype, layout, generator):
    n, m = shape
    if layout == "transposed":
        base = torch.rand(m, n, generator=generator) * 20 - 10
        return base.to(dtype).T  # the transpose of a contiguous (m, n): not contiguous
    if layout == "strided":
        return (torch.rand(n, 2 * m, generator=generator) * 20 - 10).to(dtype)[:, ::2]
    return (torch.rand(n, m, generator=generator) * 20 - 10).to(dtype)


def _probe_flatten_transposed(answer, run):
    generator = _generator(5)
    cases = []
    for shape, dtype, layout in _FLATTEN_CASES:
        x = _flatten_input(shape, dtype, layout, generator)
        on = f"x of shape {shape_text(list(shape))}, {_dtype_name(dtype)}"
        if layout != "contiguous":
            on += f", {layout} (not contiguous)"
        expected = value_facts(x.T.reshape(-1))
        untransposed = value_facts(x.reshape(-1))["values"]
        before = value_facts(x)
        given = x.clone() if layout == "contiguous" else x  # (the layout is the point)
        kept = x.clone()
        try:
            got = value_facts(run(answer, given, on=on))
        except LearnerRaised:
            # What the earlier inputs show already (a NumPy array returned) is the mistake to
            # name, before an error that only a later one (bfloat16) raises.
            so_far = {"cases": cases, "calls": _calls_in(answer),
                      "reshapes_to_two_sizes": _reshapes_to_two_sizes(answer)}
            if cases and _judge_flatten_transposed(so_far) is not None:
                break
            raise
        x_after = value_facts(given)
        again = value_facts(run(answer, given, on=on + ", second call")) if _left_as_it_was(given, kept) else got
        cases.append(
            {
                "on": on,
                "layout": layout,
                "got": got,
                "again": again,
                "expected": expected,
                "untransposed": untransposed,
                "x_before": before,
                "x_after": x_after,
            }
        )
    return {"cases": cases, "calls": _calls_in(answer),
            "reshapes_to_two_sizes": _reshapes_to_two_sizes(answer)}


def _judge_flatten_transposed(record):
    cases = record["cases"]
    for case in cases:
        got, on = case["got"], case["on"]
        changed = _input_changed(case["x_before"], case["x_after"], "x", on)
        if changed:
            return changed
        if (
            got["kind"] == "tensor"
            and got["shape"] == case["expected"]["shape"]
            and not same_values(case["untransposed"], case["expected"]["values"])
            and same_values(got.get("values", []), case["untransposed"])
        ):
            mistake, note = "not-transposed", ""
            if record["reshapes_to_two_sizes"]:
                mistake = "reshape-not-transpose"
                note = " (Reshaping x to (columns, rows) is not a transpose: it keeps x's order.)"
            return Mistake(mistake, (
                f"These are x's values in x's own order ({on}): transpose first (x.T), then "
                f"flatten.{note}"
            ))
        if got["kind"] == "tensor" and len(got["shape"]) == 2:
            return Mistake("not-flattened", (
                f"Your result has shape {shape_text(got['shape'])} ({on}); expected one "
                f"dimension, {shape_text(case['expected']['shape'])}. Flatten after transposing."
            ))
        problem = tensor_problem(got, case["expected"], on=on)
        if problem:
            contiguous_right = all(
                tensor_problem(c["got"], c["expected"]) is None
                for c in cases if c["layout"] == "contiguous"
            )
            if case["layout"] != "contiguous" and contiguous_right:
                return Mistake("assumes-contiguous", (
                    f"Your function is right for every contiguous x, wrong for this one ({on}): "
                    f"{tensor_problem(got, case['expected'])} Work with x's dimensions (x.T, transpose, permute), not with "
                    "assumed strides or memory order."
                ))
            return problem
        if tensor_problem(case["again"], case["expected"]):
            return Mistake("wrong-on-second-call", (
                f"Your function was right on its first call, not on a second call with the same "
                f"x ({on}): {tensor_problem(case['again'], case['expected'], what='the second result')}"
            ))
    return None


flatten_transposed = Exercise(
    "flatten_transposed",
    chapter=CHAPTER,
    title="Flatten a transposed matrix",
    expects=Function("flatten_transposed", ("x",),
                     returns="a 1-D tensor: x's transpose, flattened, with x's dtype"),
    probe=_probe_flatten_transposed,
    judge=_judge_flatten_transposed,
    reference=flatten_transposed,
    passed_message="Correct: transposed, then flattened in the transposed order.",
    hints=[
        "x.T swaps the two dimensions without moving any data: it is a view with other strides.",
        "view() needs memory laid out in the order it reads; after a transpose it is not.",
        "x.T.reshape(-1), x.T.flatten() and x.T.contiguous().view(-1) all work.",
    ],
    error_notes=[
        (
            "Got unsupported ScalarType BFloat16",
            "NumPy has no bfloat16, so a tensor of that dtype cannot go through .numpy(). Stay "
            "in torch, which works for every dtype: x.T.reshape(-1).",
            "numpy-has-no-bfloat16",
        ),
        (
            "view size is not compatible with input tensor's size and stride",
            "view() cannot reorder memory, and a transposed tensor is not contiguous. Use "
            ".reshape(-1), or .contiguous().view(-1).",
            "view-of-transpose",
        ),
        (
            "expected a non-empty list of Tensors",
            "an x with no columns (shape (n, 0)) gives an empty list of columns, and torch.cat "
            "refuses an empty list. x.T.reshape(-1) handles every shape, empty ones too.",
            "cat-of-no-columns",
        ),
    ],
)


# ============================================================================================
# T9 — a write through a mask, in place
# ============================================================================================
def zero_negative_rows(x):
    negative = x.sum(dim=1) < 0
    x[negative] = 0
    return int(negative.sum())


_INF = float("inf")
# Rows chosen so that each classic mistake shows: a negative row with a positive element (a
# mask of elements zeroes less), a row summing to exactly 0 that is not all zeros (<= zeroes
# it), an all-zero row (<= counts it), columns whose sums are negative (a column mask).
_ROWS_4x3 = [[1.0, -3.0, 0.5], [2.0, 1.5, -0.5], [1.0, -1.0, 0.0], [-0.5, -0.25, 0.25]]
_ROWS_3x3 = [[0.5, 2.0, -0.75], [-2.0, 0.5, 1.0], [1.25, -1.5, -0.5]]
# The last row sums to nan (inf + -inf): nan < 0 is False, so it stays, and ~(sum >= 0) zeroes it.
_ROWS_INF = [[1.0, -_INF, 2.0], [_INF, 1.0, -3.0], [-1.0, 0.5, 0.25], [0.0, 0.0, 0.0], [_INF, -_INF, 1.0]]


def _rows(values, dtype):
    return lambda generator: torch.tensor(values, dtype=dtype)


def _random_rows(n, m, dtype):
    """Multiples of 0.25 between -2 and 2: sums are exact in every float dtype."""
    def make(generator):
        return ((torch.rand(n, m, generator=generator) * 16).floor() / 4 - 2).to(dtype)
    return make


# (description, make the base tensor, the view of it passed as x)
_ZERO_ROWS_CASES = [
    ("x of shape (4, 3), float32", _rows(_ROWS_4x3, torch.float32), lambda base: base),
    ("x of shape (3, 3), float32", _rows(_ROWS_3x3, torch.float32), lambda base: base),
    ("x of shape (6, 2), float64", _random_rows(6, 2, torch.float64), lambda base: base),
    ("x of shape (5, 4), float16", _random_rows(5, 4, torch.float16), lambda base: base),
    ("x of shape (5, 3), float32, the transpose of a (3, 5) tensor (not contiguous)",
     _random_rows(3, 5, torch.float32), lambda base: base.T),
    ("x of shape (4, 3), float64, every other column of a (4, 6) tensor (not contiguous)",
     _random_rows(4, 6, torch.float64), lambda base: base[:, ::2]),
    ("x of shape (4, 3), float32, rows 1 to 4 of a (6, 3) tensor",
     _random_rows(6, 3, torch.float32), lambda base: base[1:5]),
    ("x of shape (5, 3), float32, holding inf and -inf (one row sums to nan)", _rows(_ROWS_INF, torch.float32),
     lambda base: base),
    ("x of shape (1, 3), float32 (one row)", _rows([[-1.0, 0.5, 0.25]], torch.float32),
     lambda base: base),
    ("x of shape (0, 3), float32 (no rows)", _random_rows(0, 3, torch.float32), lambda base: base),
    ("x of shape (3, 0), float32 (no columns)", _random_rows(3, 0, torch.float32), lambda base: base),
]
_ZERO_LOOP_ROWS, _ZERO_LOOP_CALLS = 60, 30


def _count_facts(value) -> dict:
    """What the answer returned as its count: the kind, and the number when it is one."""
    if isinstance(value, bool):
        return {"kind": "bool", "value": None, "text": repr(value)}
    if isinstance(value, (int, np.integer)):
        return {"kind": "int", "value": int(value), "text": repr(int(value))}
    if isinstance(value, torch.Tensor):
        tensor = torch.Tensor.detach(value)
        text = f"a {_dtype_name(tensor.dtype)} tensor of shape {shape_text(list(tensor.shape))}"
        if tensor.numel() == 1 and tensor.device.type != "meta":
            number = tensor.reshape(()).to("cpu").item()
            integral = not (tensor.dtype.is_floating_point or tensor.dtype.is_complex
                            or tensor.dtype == torch.bool)
            return {"kind": "tensor" if integral else "other tensor",
                    "value": int(number) if integral else None,
                    "text": f"{text} holding {number!r}"}
        return {"kind": "other tensor", "value": None, "text": text}
    facts = value_facts(value)
    return {"kind": facts["kind"], "value": None, "text": f"{a_or_an(facts['kind'])} ({facts['repr']})"}


def _assigned_names(answer) -> set:
    """Names the answer's own source assigns to (x = ..., x += ...)."""
    names = set()
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            targets = inner.targets if isinstance(inner, ast.Assign) else (
                [inner.target] if isinstance(inner, (ast.AugAssign, ast.AnnAssign)) else [])
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _chained_write(answer) -> str | None:
    """The first assignment in the answer's source to an index of an index, x[m][...] = v."""
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            targets = inner.targets if isinstance(inner, ast.Assign) else (
                [inner.target] if isinstance(inner, ast.AugAssign) else [])
            for target in targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript):
                    return ast.unparse(target)
    return None


def _after(base, view, change):
    """The values of ``view(base.clone())`` after ``change`` was applied to it."""
    x = view(base.clone())
    change(x)
    return value_facts(x)["values"]


def _zero_rows_where(mask_of):
    def change(x):
        x[mask_of(x)] = 0
    return change


def _zero_columns_where(mask_of):
    def change(x):
        x[:, mask_of(x)] = 0
    return change


def _probe_zero_negative_rows(answer, run):
    generator = _generator(11)
    record = {"loops": _loops_in(answer), "calls": _calls_in(answer),
              "assigned": sorted(_assigned_names(answer)), "chained": _chained_write(answer)}
    big = _random_rows(_ZERO_LOOP_ROWS, 3, torch.float32)(generator)
    counter = TorchCallCounter()
    with counter:
        run(answer, big, on=f"x of shape ({_ZERO_LOOP_ROWS}, 3), float32")
    record["torch_calls"] = counter.count
    record["cases"] = cases = []
    if record["loops"] or counter.count >= _ZERO_LOOP_CALLS:
        return record
    for on, make, view in _ZERO_ROWS_CASES:
        base = make(generator)
        kept = base.clone()
        x = view(base)
        square = x.dim() == 2 and x.shape[0] == x.shape[1]
        expected_base = base.clone()
        expected_x = view(expected_base)
        negative = expected_x.sum(dim=1) < 0
        expected_x[negative] = 0
        case = {
            "on": on,
            "rows": int(x.shape[0]),
            "columns": int(x.shape[1]),
            "contiguous": bool(x.is_contiguous()),
            "has_inf": bool(torch.isinf(kept).any()),
            "negative_rows": [int(i) for i in torch.nonzero(negative).flatten()],
            "expected_count": int(negative.sum()),
            "expected_x": value_facts(expected_x),
            "expected_base": value_facts(expected_base),
            "x_before": value_facts(view(kept)),
            "elements": _after(kept, view, _zero_rows_where(lambda v: v < 0)),
            "by_columns": _after(kept, view, _zero_columns_where(lambda v: v.sum(dim=0) < 0)),
            "row_mask_on_columns": _after(kept, view, _zero_columns_where(
                lambda v: v.sum(dim=1) < 0)) if square else None,
            "or_equal": _after(kept, view, _zero_rows_where(lambda v: v.sum(dim=1) <= 0)),
        }
        storage = base.untyped_storage().data_ptr()
        try:
            returned = run(answer, x, on=on)
        except LearnerRaised:
            # A mistake the earlier inputs already showed is the one to report.
            try:
                shown = bool(cases) and _judge_zero_negative_rows(record) is not None
            except Exception:  # a judge that cannot decide on a part of the record
                shown = False
            if shown:
                break
            raise
        case["count"] = _count_facts(returned)
        case["returned"] = value_facts(returned) if isinstance(returned, torch.Tensor) else None
        case["x_after"] = value_facts(x)
        case["base_after"] = value_facts(base)
        case["same_memory"] = x.untyped_storage().data_ptr() == storage
        left = {"count": case["count"], "x_after": case["x_after"]}
        if (case["same_memory"] and tensor_problem(case["x_after"], case["expected_x"],
                                                   rtol=0, atol=0) is None):
            returned = run(answer, x, on=on + ", second call on the same x")
            left = {"count": _count_facts(returned), "x_after": value_facts(x)}
        case["again"] = left
        cases.append(case)
    return record


def _one_mask_for_the_whole_tensor(case, unchanged) -> bool:
    """x left alone when its total is >= 0, or zeroed entirely when it is < 0, and a count of
    0 or 1: what a mask made from x.sum() (one number, no dim) does."""
    before = np.asarray(case["x_before"].get("values", []), dtype=np.float64)
    got = np.asarray(case["x_after"].get("values", []), dtype=np.float64)
    if before.size == 0 or case["count"].get("value") not in (0, 1):
        return False
    total = np.nansum(before)
    return bool((unchanged and total >= 0) or (not np.any(got) and total < 0 and case["count"]["value"] == 1))


def _zeroed_nan_sum_rows(case) -> list[int]:
    """Rows whose sum is nan that the answer zeroed (and the task keeps)."""
    before = np.asarray(case["x_before"].get("values", []), dtype=np.float64)
    got = np.asarray(case["x_after"].get("values", []), dtype=np.float64)
    if before.ndim != 2 or got.shape != before.shape:
        return []
    with np.errstate(invalid="ignore"):
        sums = before.sum(axis=1)
    return [int(r) for r in np.flatnonzero(np.isnan(sums)) if not np.any(got[r])]


def _rows_text(rows) -> str:
    return "row " + str(rows[0]) if len(rows) == 1 else "rows " + ", ".join(map(str, rows))


def _judge_zero_negative_rows(record):
    if record["loops"]:
        return Mistake("python-loop", (
            f"The task asks for no Python loop; your function has one: `{record['loops'][0]}`. "
            "One mask marks every row at once: negative = x.sum(dim=1) < 0, then x[negative] = 0."
        ))
    if record["torch_calls"] >= _ZERO_LOOP_CALLS:
        return Mistake("python-loop", (
            f"The task asks for no Python loop; for x of {_ZERO_LOOP_ROWS} rows your function "
            f"made {record['torch_calls']} torch calls, one or more per row. One mask marks "
            "every row at once: negative = x.sum(dim=1) < 0, then x[negative] = 0."
        ))
    cases = record["cases"]
    for case in cases:
        on, after, expected = case["on"], case["x_after"], case["expected_x"]
        rows = case["negative_rows"]
        if after["shape"] != case["x_before"]["shape"] or after["dtype"] != case["x_before"]["dtype"]:
            return Mistake("changed-x-shape-or-dtype", _input_changed(case["x_before"], after, "x", on) + (
                " Here the task does ask for a change in place, but only of the numbers: "
                "x[negative] = 0."))
        got = after.get("values")
        unchanged = same_values(got, case["x_before"]["values"], rtol=0, atol=0)
        if rows and case["count"].get("value") != len(rows) and _one_mask_for_the_whole_tensor(case, unchanged):
            return Mistake("whole-tensor-sum", (
                f"Your function zeroed {'nothing' if unchanged else 'every row'} of x ({on}) and "
                f"counted {case['count']['text']}: its mask holds one True or False for the whole "
                "tensor, not one per row. x.sum() adds every element of x; sum each row with "
                "x.sum(dim=1), then x[negative] = 0."
            ))
        if unchanged and rows:
            returned = case["returned"]
            if record["chained"]:
                return Mistake("chained-index-write", (
                    f"The caller's x is unchanged ({on}): {_rows_text(rows)} should be zeros "
                    f"afterwards. Your write `{record['chained']} = ...` indexes twice: the "
                    "first indexing, with a mask, makes a copy, and the second writes into that "
                    "copy, which is thrown away. Write with one indexing: x[negative] = 0."
                ))
            if returned is not None and same_values(returned.get("values", []), expected["values"]):
                return Mistake("returned-copy-not-in-place", (
                    f"Your function returned a new tensor with the rows zeroed, but the caller's "
                    f"x is unchanged ({on}). The task asks for x itself to change, in place "
                    "(x[negative] = 0), and for the number of rows zeroed as the result."
                ))
            contiguous_right = all(
                same_values(c["x_after"].get("values"), c["expected_x"]["values"], rtol=0, atol=0)
                for c in cases if c["contiguous"])
            if not case["contiguous"] and contiguous_right:
                return Mistake("wrote-into-copy", (
                    f"The caller's x is unchanged ({on}), though your function works for every "
                    "contiguous x: it wrote into a copy. contiguous() (and reshape, flatten) "
                    "of a non-contiguous tensor is a copy; index x itself: x[negative] = 0."
                ))
            if "x" in record["assigned"]:
                return Mistake("rebinds-name", (
                    f"The caller's x is unchanged ({on}): {_rows_text(rows)} should be zeros "
                    "afterwards. Assigning a new tensor to the name x (x = ...) inside your "
                    "function does not change the caller's tensor; write into it: "
                    "x[negative] = 0."
                ))
            return Mistake("not-in-place", (
                f"The caller's x is unchanged ({on}): {_rows_text(rows)} should be zeros "
                "afterwards. Change x in place, with one indexing: x[negative] = 0."
            ))
        if not same_values(got, expected["values"], rtol=0, atol=0):
            if case["has_inf"] and np.isnan(np.asarray(got, dtype=np.float64)).any() and not np.isnan(
                    np.asarray(expected["values"], dtype=np.float64)).any():
                return Mistake("multiplied-by-mask", (
                    f"Your x holds nan afterwards ({on}): a row with -inf was multiplied by 0, and "
                    "inf * 0 is nan. Assign the zeros instead of multiplying: x[negative] = 0."
                ))
            nan_rows = _zeroed_nan_sum_rows(case)
            if nan_rows:
                return Mistake("zeroed-nan-sum-row", (
                    f"Your function zeroed {_rows_text(nan_rows)}, whose sum is nan (it holds inf "
                    f"and -inf) ({on}): nan is not below 0, so the row stays. ~(x.sum(dim=1) >= 0) "
                    "is True for nan; x.sum(dim=1) < 0 is not."
                ))
            if same_values(got, case["elements"], rtol=0, atol=0):
                return Mistake("zeroed-elements", (
                    f"You zeroed the negative elements, not the rows whose sum is negative "
                    f"({on}). The mask needs one value per row: x.sum(dim=1) < 0."
                ))
            if same_values(got, case["by_columns"], rtol=0, atol=0):
                return Mistake("summed-columns", (
                    f"You zeroed the columns whose sum is negative ({on}): sum(dim=0) adds down "
                    "each column. The rows' sums are sum(dim=1)."
                ))
            if case["row_mask_on_columns"] is not None and same_values(
                    got, case["row_mask_on_columns"], rtol=0, atol=0):
                return Mistake("row-mask-on-columns", (
                    f"Your row mask zeroed columns ({on}): a mask of shape (N,) meeting x of shape "
                    "(N, N) in an element-wise operation (torch.where, a product) lines up with "
                    "the last dimension, the columns. Give it a column dimension, negative[:, None], "
                    "or index with it: x[negative] = 0."
                ))
            if same_values(got, case["or_equal"], rtol=0, atol=0):
                return Mistake("less-or-equal", (
                    f"You also zeroed rows whose sum is exactly 0 ({on}). The task says strictly "
                    "below 0: < 0, not <= 0."
                ))
            return tensor_problem(after, expected, what="the caller's x after your call", on=on,
                                  rtol=0, atol=0)
        if not same_values(case["base_after"]["values"], case["expected_base"]["values"], rtol=0, atol=0):
            return Mistake("replaced-data", (
                f"x shows the zeros but the memory it was a view of does not ({on}): your function "
                "gave x new memory (x.data = ..., or x.set_(...)), so every other view of the "
                "caller's tensor misses the change. Write into x's own memory: x[negative] = 0."
            ))
        problem = _count_problem(case["count"], case, on)
        if problem:
            return problem
    for case in cases:
        on, again = case["on"], case["again"]
        if not same_values(again["x_after"].get("values"), case["expected_x"]["values"], rtol=0, atol=0):
            return Mistake("changed-x-again", (
                f"A second call on the same x changed it again ({on}, second call): its negative "
                "rows were already zeros, so nothing was left to change. "
                + (tensor_problem(again["x_after"], case["expected_x"], what="x", rtol=0, atol=0) or "")
            ))
        count = again["count"]
        if count["kind"] in ("int", "tensor") and count["value"] != 0:
            first = case["expected_count"]
            if count["value"] == first:
                mistake = "remembers-earlier-call"
                note = (" It is the first call's count: your function remembers rows of an earlier "
                        "call. Count the rows this call zeroed.")
            else:
                mistake, note = "wrong-count-on-second-call", " Count only the rows this call zeroed."
            return Mistake(mistake, (
                f"On a second call with the same x ({on}), whose negative rows were already zeros, "
                f"your function returned {count['value']}; expected 0.{note}"
            ))
    return None


def _count_problem(count, case, on) -> str | None:
    expected = case["expected_count"]
    if count["kind"] not in ("int", "tensor"):
        if count["kind"] == "other tensor" and case["returned"] is not None and (
                case["returned"]["shape"] == case["x_before"]["shape"]):
            return Mistake("returned-x", (
                f"Your function returned a tensor shaped like x ({on}); it should return the "
                f"number of rows it zeroed, here {expected}, as an int: int(negative.sum())."
            ))
        return Mistake("count-not-int", (
            f"Your function returned {count['text']} ({on}); expected the number of rows "
            f"zeroed, {expected}, as an int (int(negative.sum())) or a 0-d integer tensor."
        ))
    got = count["value"]
    if got == expected:
        return None
    rows, columns = case["rows"], case["columns"]
    if expected and got == 0:
        mistake = "counted-after-zeroing"
        note = (" Counting after the zeroing finds none: the zeroed rows now sum to 0. Keep the "
                "mask you made before the write and count it.")
    elif expected and got == expected * columns and columns > 1:
        mistake = "counted-elements"
        note = " That is the number of elements zeroed; count the rows: negative.sum()."
    elif got == rows - expected:
        mistake, note = "counted-kept-rows", " That is the number of rows kept; count the rows zeroed."
    else:
        mistake, note = "wrong-count", ""
    return Mistake(mistake, f"Your function returned {got}; {expected} rows were to be zeroed ({on}).{note}")


zero_negative_rows = Exercise(
    "zero_negative_rows",
    chapter=CHAPTER,
    title="Zero the rows whose sum is negative, in place",
    expects=Function("zero_negative_rows", ("x",),
                     returns="the number of rows zeroed, an int (x itself changed in place)"),
    probe=_probe_zero_negative_rows,
    judge=_judge_zero_negative_rows,
    reference=zero_negative_rows,
    passed_message="Correct: the rows are zeroed in the caller's x, and counted.",
    hints=[
        "One value per row: negative = x.sum(dim=1) < 0 is a mask of shape (N,).",
        "Write through the mask in one indexing operation: x[negative] = 0. "
        "x[negative][...] = 0 writes into a copy.",
        "Count the mask, made before the write: int(negative.sum()).",
    ],
    error_notes=[
        (
            "The shape of the mask",
            "a boolean mask must have the shape of the dimensions it indexes. x.sum(dim=1) < 0 "
            "is (N,), one value per row, and x[mask] picks rows; with keepdim=True it is (N, 1), "
            "which does not fit x's (N, M).",
            "mask-of-other-shape",
        ),
        (
            "must match the size of tensor",
            "a row mask of shape (N,) meeting x of shape (N, M) in an element-wise operation "
            "lines up with the columns. Give it a column dimension, mask[:, None], or index "
            "with it: x[mask] = 0.",
            "row-mask-against-columns",
        ),
        (
            "view size is not compatible",
            "x may be a non-contiguous view, which view() cannot reshape. Index x itself: "
            "x[mask] = 0.",
            "view-of-non-contiguous",
        ),
    ],
)


# ============================================================================================
# T6 — squeeze only drops size-1 dimensions
# ============================================================================================
def remove_batch_dim(x):
    return x.squeeze(0)


# (shape, dtype, permuted): "permuted" gives x as a non-contiguous view.
_BATCH_CASES = [
    ((1, 5), torch.float32, False),
    ((1, 3, 4), torch.float32, True),
    ((1, 1, 5), torch.int64, False),
    ((1, 2, 1), torch.float64, False),
    ((1, 1), torch.bool, False),
    ((1,), torch.float32, False),
    ((1, 0, 3), torch.float32, False),
    ((1, 4), torch.int8, False),
]


def _batch_input(shape, dtype, permuted, generator):
    if permuted:
        base = torch.rand(shape[0], shape[2], shape[1], generator=generator) * 20 - 10
        return base.to(dtype).transpose(1, 2)
    values = torch.rand(shape, generator=generator) * 20 - 10
    return values > 0 if dtype is torch.bool else values.to(dtype)


def _probe_remove_batch_dim(answer, run):
    generator = _generator(6)
    cases = []
    for shape, dtype, permuted in _BATCH_CASES:
        x = _batch_input(shape, dtype, permuted, generator)
        on = f"x of shape {shape_text(list(shape))}, {_dtype_name(dtype)}"
        if permuted:
            on += ", a permuted (non-contiguous) view"
        expected, squeezed_all, before = value_facts(x[0]), list(x.squeeze().shape), value_facts(x)
        given = x if permuted else x.clone()
        kept = x.clone()
        got = value_facts(run(answer, given, on=on))
        after = value_facts(given)
        again = value_facts(run(answer, given, on=on + ", second call")) if _left_as_it_was(given, kept) else got
        cases.append(
            {
                "on": on,
                "got": got,
                "again": again,
                "expected": expected,
                "squeezed_all": squeezed_all,
                "x_before": before,
                "x_after": after,
            }
        )
    return {"cases": cases, "calls": _calls_in(answer)}


def _judge_remove_batch_dim(record):
    cases, calls = record["cases"], record["calls"]
    for case in cases:
        got, on = case["got"], case["on"]
        changed = _input_changed(case["x_before"], case["x_after"], "x", on)
        if changed:
            return changed
        if got["kind"] == "tensor" and got["shape"] != case["expected"]["shape"]:
            if got["shape"] == case["squeezed_all"]:
                note = (
                    " squeeze() with no argument drops them all." if "squeeze()" in calls else ""
                )
                return Mistake("squeeze-all", (
                    f"Your result has shape {shape_text(got['shape'])}; expected "
                    f"{shape_text(case['expected']['shape'])} ({on}): every size-1 dimension is "
                    f"gone, not only the batch one.{note} Remove only dimension 0: x.squeeze(0) "
                    "or x[0]."
                ))
            if got["shape"] == case["x_before"]["shape"]:
                mistake, note = "batch-dim-kept", ""
                if "squeeze" in calls:
                    mistake = "squeezed-other-dim"
                    note = " squeeze(d) silently does nothing when dimension d is not of size 1."
                return Mistake(mistake, (
                    f"Your result still has shape {shape_text(got['shape'])} ({on}): the batch "
                    f"dimension, dimension 0, is still there.{note}"
                ))
        problem = tensor_problem(got, case["expected"], on=on)
        if problem:
            return problem
        problem = tensor_problem(case["again"], case["expected"], what="the second result", on=on)
        if problem:
            return Mistake("wrong-on-second-call", (
                f"Your function was right on its first call, not on a second call with the same x: {problem}"
            ))
    return None


remove_batch_dim = Exercise(
    "remove_batch_dim",
    chapter=CHAPTER,
    title="Remove the batch dimension, and only that",
    expects=Function("remove_batch_dim", ("x",),
                     returns="a tensor of shape x.shape[1:], with x's values and dtype"),
    probe=_probe_remove_batch_dim,
    judge=_judge_remove_batch_dim,
    reference=remove_batch_dim,
    passed_message="Correct: only dimension 0 is gone, other size-1 dimensions are kept.",
    hints=[
        "The check also uses shapes like (1, 1, 5): only the first 1 is the batch.",
        "squeeze() drops every dimension of size 1; squeeze(0) only the first (x[0] works too).",
    ],
    error_notes=[
        (
            'reshape() missing 1 required positional arguments: "shape"',
            "for x of shape (1,) the rest is (), so reshape(*x.shape[1:]) passes no size at "
            "all. Pass the shape as one tuple, x.reshape(x.shape[1:]), or use x.squeeze(0) or x[0].",
            "reshape-of-unpacked-empty-shape",
        ),
        (
            "view() received an invalid combination of arguments - got ()",
            "for x of shape (1,) the rest is (), so view(*x.shape[1:]) passes no size at all. "
            "Pass the shape as one tuple, x.view(x.shape[1:]), or use x.squeeze(0) or x[0].",
            "view-of-unpacked-empty-shape",
        ),
        (
            "view size is not compatible with input tensor's size and stride",
            "view() cannot reorder memory, and this x is a permuted (non-contiguous) view. Do "
            "not follow torch's advice to the letter here: reshape(-1) runs, but it flattens "
            "every dimension into one, and removing the batch dimension must keep the others. "
            "x.squeeze(0) (or x[0]) removes only that one, as a view, for any layout.",
            "view-flattens-everything",
        ),
        (
            "could not infer output dtype",
            "mean() computes an average, which needs a floating dtype; an integer x has none. "
            "Dropping a dimension needs no arithmetic: x.squeeze(0) or x[0].",
            "mean-of-integers",
        ),
    ],
)


# ============================================================================================
# T7 — broadcasting, on purpose
# ============================================================================================
def outer_sum(a, b):
    return a[:, None] + b[None, :]


# (N, M, dtype): square and not, size 1 on either side, integers, an empty a.
_OUTER_CASES = [
    (3, 4, torch.float32),
    (5, 5, torch.float32),
    (1, 3, torch.float64),
    (4, 1, torch.int64),
    (2, 6, torch.int32),
    (0, 3, torch.float32),
    (3, 2, (torch.int64, torch.float32)),  # mixed: the result has the dtype a + b has
]
# A loop over a or over b makes at least one torch call per element; broadcasting a handful.
_LOOP_N, _LOOP_M, _LOOP_CALLS = 40, 37, 30


def _outer_input(n, dtype, generator):
    values = torch.rand(n, generator=generator) * 20 - 10
    return values.round().to(dtype) if not dtype.is_floating_point else values.to(dtype)


def _probe_outer_sum(answer, run):
    generator = _generator(7)
    record = {"loops": _loops_in(answer)}
    a, b = _outer_input(_LOOP_N, torch.float32, generator), _outer_input(_LOOP_M, torch.float32, generator)
    counter = TorchCallCounter()
    with counter:
        big = run(answer, a, b, on=f"a of shape ({_LOOP_N},), b of shape ({_LOOP_M},)")
    record["torch_calls"] = counter.count
    record["big"] = {"got": value_facts(big), "expected": value_facts(a[:, None] + b[None, :])}
    record["cases"] = cases = []
    if record["loops"] or counter.count >= _LOOP_CALLS:
        return record  # the loop is recorded; its other inputs (an empty a) would only raise
    for n, m, dtype in _OUTER_CASES:
        a_dtype, b_dtype = dtype if isinstance(dtype, tuple) else (dtype, dtype)
        a, b = _outer_input(n, a_dtype, generator), _outer_input(m, b_dtype, generator)
        on = (f"a of shape ({n},), b of shape ({m},), {_dtype_name(dtype)}" if a_dtype == b_dtype
              else f"a of shape ({n},), {_dtype_name(a_dtype)}, b of shape ({m},), {_dtype_name(b_dtype)}")
        given_a, given_b = a.clone(), b.clone()
        try:
            got = value_facts(run(answer, given_a, given_b, on=on))
        except LearnerRaised:
            # A mistake the earlier inputs already showed is the one to report, not an error
            # a later input (an integer a with a float b) led to.
            try:
                shown = _judge_outer_sum(record) is not None
            except Exception:  # a judge that cannot decide on a part of the record
                shown = False
            if shown:
                break
            raise
        cases.append(
            {
                "on": on,
                "n": n,
                "m": m,
                "got": got,
                "expected": value_facts(a[:, None] + b[None, :]),
                "swapped": value_facts(b[:, None] + a[None, :])["values"],
                "product": value_facts(a[:, None] * b[None, :])["values"],
                "elementwise": value_facts(a + b)["values"] if n == m else None,
                "mixed": a_dtype != b_dtype,
                "a_before": value_facts(a),
                "a_after": value_facts(given_a),
                "b_before": value_facts(b),
                "b_after": value_facts(given_b),
            }
        )
        left = _left_as_it_was(given_a, a) and _left_as_it_was(given_b, b)
        cases[-1]["again"] = (
            value_facts(run(answer, given_a, given_b, on=on + ", second call")) if left else got
        )
    return record


def _judge_outer_sum(record):
    cases = record["cases"]
    if record["loops"]:
        return Mistake("python-loop", (
            f"The task asks for no Python loop; your function has one: `{record['loops'][0]}`. "
            "Let broadcasting make every pair: a[:, None] + b[None, :]."
        ))
    if record["torch_calls"] >= _LOOP_CALLS:
        return Mistake("python-loop", (
            f"The task asks for no Python loop; for a of {_LOOP_N} and b of {_LOOP_M} elements "
            f"your function made {record['torch_calls']} torch calls, one or more per element. "
            "Let broadcasting make every pair in one operation: a[:, None] + b[None, :]."
        ))
    for case in cases:
        got, on, n, m = case["got"], case["on"], case["n"], case["m"]
        for name in ("a", "b"):
            changed = _input_changed(case[f"{name}_before"], case[f"{name}_after"], name, on)
            if changed:
                return changed
        if got["kind"] == "tensor" and got["shape"] == [n] and n == m and same_values(
            got.get("values", []), case["elementwise"]
        ):
            return Mistake("elementwise-not-outer", (
                f"Your result has shape ({n},); expected ({n}, {m}) ({on}): it holds a[i] + b[i]. "
                "Two (N,) tensors meet element by element: a + b pairs a[i] with b[i] only. "
                "Give a a second dimension, a[:, None], so it broadcasts against b."
            ))
        if got["kind"] == "tensor" and got["shape"] == [m, n] and n != m:
            return Mistake("transposed", (
                f"Your result has shape ({m}, {n}); expected ({n}, {m}) ({on}): rows should "
                "follow a, columns b. Put the new dimension on the other side."
            ))
        if got["kind"] == "tensor" and got["shape"] == [n, m] and "values" in got and not same_values(
            got["values"], case["expected"]["values"]
        ):
            if n == m and n > 1 and same_values(got["values"], case["swapped"]):
                return Mistake("transposed", (
                    f"Your result is transposed ({on}): out[i, j] should be a[i] + b[j]."
                ))
            if same_values(got["values"], case["product"]):
                return Mistake("product-not-sum", (
                    f"Your result holds the products a[i] * b[j] ({on}); out[i, j] should be "
                    "the sum a[i] + b[j]."
                ))
        if (case.get("mixed") and got["kind"] == "tensor" and got["shape"] == [n, m]
                and got["dtype"] != case["expected"]["dtype"]):
            return Mistake("no-type-promotion", (
                f"Your result has dtype {got['dtype']}; a + b has {case['expected']['dtype']} "
                f"({on}). The task asks for the dtype a + b has: the one type promotion gives "
                "when a and b meet in one operation as they are."
            ))
        problem = tensor_problem(got, case["expected"], on=on)
        if problem:
            return problem
        problem = tensor_problem(case["again"], case["expected"], what="the second result", on=on)
        if problem:
            return Mistake("wrong-on-second-call", (
                f"Your function was right on its first call, not on a second call with the same a and b: {problem}"
            ))
    problem = tensor_problem(record["big"]["got"], record["big"]["expected"],
                             on=f"a of shape ({_LOOP_N},), b of shape ({_LOOP_M},)")
    return problem


outer_sum = Exercise(
    "outer_sum",
    chapter=CHAPTER,
    title="Every pair: out[i, j] = a[i] + b[j]",
    expects=Function("outer_sum", ("a", "b"), returns="an (N, M) tensor with out[i, j] = a[i] + b[j]"),
    probe=_probe_outer_sum,
    judge=_judge_outer_sum,
    reference=outer_sum,
    passed_message="Correct: broadcasting (N, 1) against (1, M) made every pair.",
    hints=[
        "Broadcasting aligns shapes from the right; a size-1 dimension stretches.",
        "(N, 1) + (1, M) gives (N, M). a[:, None] or a.unsqueeze(1) makes a (N, 1).",
    ],
    error_notes=[
        (
            "must match the size of tensor b",
            "a + b on two 1-D tensors pairs a[i] with b[i] only, so their sizes must be equal. "
            "For every pair give a a second dimension: a[:, None] + b[None, :].",
            "added-without-new-dimension",
        ),
        (
            "stack expects a non-empty TensorList",
            "with an empty a (N = 0) a loop over a gives torch.stack an empty list. The task "
            "asks for no loop: a[:, None] + b[None, :] handles every size.",
            "loop-over-empty-a",
        ),
        (
            "meshgrid expects all tensors to have the same dtype",
            "torch.meshgrid needs a and b of one dtype, and the check also passes an integer a "
            "with a float b. Broadcasting needs no grid: a[:, None] + b[None, :].",
            "meshgrid-of-mixed-dtypes",
        ),
        (
            "select(): index 0 out of range for tensor of size [0]",
            "an empty a (N = 0) has no element 0 to take, and mapping over a's elements "
            "(torch.vmap does, as does a.select(0, 0)) needs one. Broadcasting handles every N, "
            "0 too: a[:, None] + b[None, :].",
            "element-of-empty-a",
        ),
    ],
)


def residuals(pred, target):
    return pred.squeeze(1) - target


# (N, dtype, pred non-contiguous)
_RESIDUAL_CASES = [
    (4, torch.float32, False),
    (1, torch.float32, False),
    (7, torch.float64, False),
    (3, torch.float32, True),
    (0, torch.float32, False),
    (5, torch.float64, False),
]


class _EveryPairWatch(torch.overrides.TorchFunctionMode):
    """Whether a torch call inside it made the (N, N) tensor of every pred minus every target
    (``pairs``; or its negative, or either transposed), even when the answer keeps only a part
    of it."""

    def __init__(self, pairs):
        super().__init__()
        self.pairs = pairs
        self.built = 0  # the number of elements of the one it made, 0 if none

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for value in result if isinstance(result, (tuple, list)) else (result,):
            if (not self.built and isinstance(value, torch.Tensor) and value.shape == self.pairs.shape
                    and value.device == self.pairs.device and value.layout == torch.strided
                    and (value.is_floating_point() or value.is_complex())):
                data = value.detach().to(self.pairs.dtype)  # (in float64 too, say)
                if any(torch.allclose(data, form, rtol=1e-3, atol=1e-6) for form in
                       (self.pairs, -self.pairs, self.pairs.T, -self.pairs.T)):
                    self.built = value.numel()
        return result


def _probe_residuals(answer, run):
    generator = _generator(8)
    cases = []
    for n, dtype, strided in _RESIDUAL_CASES:
        if strided:
            pred = (torch.rand(n, 3, generator=generator)).to(dtype)[:, 1:2]
        else:
            pred = torch.rand(n, 1, generator=generator).to(dtype)
        target = torch.rand(n, generator=generator).to(dtype)
        on = f"pred of shape ({n}, 1), target of shape ({n},), {_dtype_name(dtype)}"
        if strided:
            on += ", pred a column of a wider tensor (not contiguous)"
        given_pred, given_target = (pred if strided else pred.clone()), target.clone()
        expected = pred[:, 0] - target
        pred = pred.clone()  # kept to compare with
        record = {
            "on": on,
            "n": n,
            "expected": value_facts(expected),
            "every_pair": value_facts(pred - target)["values"],
            "pred_before": value_facts(pred),
            "target_before": value_facts(target),
        }
        watch = _EveryPairWatch(pred - target)
        with watch:
            got = run(answer, given_pred, given_target, on=on)
        record["got"] = value_facts(got)
        record["every_pair_built"] = watch.built
        record["pred_after"] = value_facts(given_pred)
        record["target_after"] = value_facts(given_target)
        left = _left_as_it_was(given_pred, pred) and _left_as_it_was(given_target, target)
        record["again"] = (
            value_facts(run(answer, given_pred, given_target, on=on + ", second call"))
            if left else record["got"]
        )
        cases.append(record)
    return {"cases": cases, "calls": _calls_in(answer)}


def _judge_residuals(record):
    cases, calls = record["cases"], record["calls"]
    for case in cases:
        got, on, n = case["got"], case["on"], case["n"]
        for name in ("pred", "target"):
            changed = _input_changed(case[f"{name}_before"], case[f"{name}_after"], name, on)
            if changed:
                if name == "pred" and case["pred_after"]["shape"] == [n]:
                    return Mistake("squeezed-pred-in-place", changed + (
                        " (pred.squeeze(1), without the underscore, returns a new tensor.)"
                    ))
                return changed
        if got["kind"] == "tensor" and got["shape"] == [n, n] and n > 1 and same_values(
            got.get("values", []), case["every_pair"]
        ):
            return Mistake("broadcast-every-pair", (
                f"Your result has shape ({n}, {n}); expected ({n},) ({on}). The classic "
                f"broadcasting bug: a ({n}, 1) tensor met a ({n},) tensor and broadcast to "
                f"({n}, {n}), every prediction minus every target. Drop pred's last dimension "
                "first: pred.squeeze(1), or pred[:, 0]."
            ))
        if got["kind"] == "tensor" and got["shape"] == [n, 1]:
            return Mistake("column-result", (
                f"Your result has shape ({n}, 1); expected ({n},) ({on}). One value per "
                "sample, in one dimension."
            ))
        if got["kind"] == "tensor" and got["shape"] == [] and n == 1:
            mistake, note = "lost-sample-dim", ""
            if "squeeze()" in calls:
                mistake = "squeeze-all"
                note = (
                    " squeeze() with no argument drops every size-1 dimension, the sample one too "
                    "when N = 1: name the dimension, squeeze(1)."
                )
            return Mistake(mistake, (
                f"Your result has shape (); expected (1,) ({on}): with one sample the sample "
                f"dimension disappeared.{note}"
            ))
        expected = case["expected"]
        if got["kind"] == "tensor" and got["shape"] == expected["shape"] and "values" in got:
            values, right = np.asarray(got["values"], dtype=np.float64), np.asarray(expected["values"], dtype=np.float64)
            if not same_values(values, right):
                if same_values(values, -right):
                    return Mistake("opposite-sign", (
                        f"Your result has the opposite sign ({on}): it is target - pred; the "
                        "task asks for pred - target."
                    ))
                if same_values(values, np.abs(right)):
                    return Mistake("absolute-errors", (
                        f"Your result holds the absolute errors |pred - target| ({on}); the "
                        "task asks for pred - target, with its sign."
                    ))
                if same_values(values, right ** 2):
                    return Mistake("squared-errors", (
                        f"Your result holds the squared errors ({on}); the task asks for "
                        "pred - target itself."
                    ))
        problem = tensor_problem(got, expected, on=on)
        if problem:
            if n > 1 and case["every_pair_built"]:
                return Mistake("broadcast-every-pair", problem + (
                    f" On the way your function built the ({n}, {n}) tensor of every pair: "
                    f"pred ({n}, 1) minus target ({n},) broadcasts to every prediction minus "
                    "every target. Make pred (N,) first: pred.squeeze(1) or pred[:, 0]."
                ))
            return problem
        problem = tensor_problem(case["again"], expected, what="the second result", on=on)
        if problem:
            return Mistake("wrong-on-second-call", (
                f"Your function was right on its first call, not on a second call with the same pred and target: {problem}"
            ))
    for case in cases:
        n = case["n"]
        if n > 1 and case["every_pair_built"]:
            return Mistake("broadcast-every-pair", (
                f"Your numbers are right, but on the way your function built the ({n}, {n}) "
                f"tensor of every prediction minus every target ({case['on']}) and kept only a "
                "part of it (its diagonal, say). For a batch of 100,000 samples that is 10^10 "
                "numbers. Make pred (N,) first, pred.squeeze(1) or pred[:, 0], and subtract once."
            ))
    return None


residuals = Exercise(
    "residuals",
    chapter=CHAPTER,
    title="Per-sample errors without the (N, N) bug",
    expects=Function("residuals", ("pred", "target"), returns="an (N,) tensor: pred - target per sample"),
    probe=_probe_residuals,
    judge=_judge_residuals,
    reference=residuals,
    passed_message="Correct: one error per sample, shape (N,).",
    hints=[
        "Print both shapes: pred is (N, 1), target is (N,). What does broadcasting make of them?",
        "Make both (N,) before subtracting: pred.squeeze(1) or pred[:, 0] (or pred.view(-1)).",
    ],
    error_notes=[
        (
            "stack expects a non-empty TensorList",
            "an empty batch (N = 0) gives a loop over the samples nothing to collect, and "
            "torch.stack refuses an empty list. pred.squeeze(1) - target handles every N, 0 too.",
            "loop-over-empty-batch",
        ),
    ],
)


# ============================================================================================
# T10 — batched matrix products and argmax along a dimension
# ============================================================================================
def best_match(q, k):
    return (q @ k.mT).argmax(dim=-1)


# (B, n, m, d, dtype, k shared by every batch (m, d), q and k given as transposed views).
# n == m == d in one case, so that q @ k (no transpose) and an argmax over the queries keep the
# right shape; B == m in another, so that swapping k's first two dimensions does too.
_MATCH_SHAPES = [
    (2, 3, 4, 5, torch.float32, False, False),
    (3, 4, 4, 4, torch.float32, False, False),
    (1, 2, 3, 4, torch.float64, False, False),
    (2, 1, 3, 2, torch.float32, False, False),
    (2, 3, 1, 2, torch.float32, False, False),
    (3, 2, 3, 4, torch.float64, False, False),
    (2, 3, 4, 5, torch.float32, True, False),
    (2, 3, 4, 5, torch.float32, False, True),
    (3, 2, 5, 3, torch.float64, True, True),
    (1, 3, 4, 2, torch.float32, True, False),
    (0, 2, 3, 4, torch.float32, False, False),
]
_MATCH_LOOP_B, _MATCH_LOOP_CALLS = 40, 30


def _match_input(shape, dtype, transposed, generator):
    if transposed:  # the transpose of a contiguous tensor: not contiguous
        *batch, rows, columns = shape
        return (torch.randn(*batch, columns, rows, generator=generator)).to(dtype).mT
    return torch.randn(*shape, generator=generator).to(dtype)


def _match_text(b, n, m, d, dtype, shared, transposed):
    k_shape = (m, d) if shared else (b, m, d)
    text = (f"q of shape {shape_text([b, n, d])}, k of shape {shape_text(list(k_shape))}, "
            f"{_dtype_name(dtype)}")
    if shared:
        text += ", the same keys for every batch"
    if transposed:
        text += ", q and k transposed views (not contiguous)"
    return text


def _probe_best_match(answer, run):
    generator = _generator(12)
    record = {"loops": _loops_in(answer), "calls": _calls_in(answer)}
    q = torch.randn(_MATCH_LOOP_B, 2, 3, generator=generator)
    k = torch.randn(_MATCH_LOOP_B, 4, 3, generator=generator)
    counter = TorchCallCounter()
    with counter:
        run(answer, q, k, on=f"q of shape ({_MATCH_LOOP_B}, 2, 3), k of shape ({_MATCH_LOOP_B}, 4, 3)")
    record["torch_calls"] = counter.count
    record["cases"] = cases = []
    if record["loops"] or counter.count >= _MATCH_LOOP_CALLS:
        return record
    for b, n, m, d, dtype, shared, transposed in _MATCH_SHAPES:
        q = _match_input((b, n, d), dtype, transposed, generator)
        k = _match_input((m, d) if shared else (b, m, d), dtype, transposed, generator)
        on = _match_text(b, n, m, d, dtype, shared, transposed)
        scores = q.double() @ k.double().mT
        case = {
            "on": on, "b": b, "n": n, "m": m, "d": d, "shared": shared,
            "expected": value_facts(scores.argmax(dim=-1)),
            "smallest": value_facts(scores.argmin(dim=-1))["values"],
            "over_queries": value_facts(scores.argmax(dim=-2))["values"] if b else None,
            "untransposed": (value_facts((q.double() @ k.double()).argmax(dim=-1))["values"]
                             if d == m and b else None),
            "q_before": value_facts(q), "k_before": value_facts(k),
        }
        kept_q, kept_k = q.clone(), k.clone()
        try:
            got = run(answer, q, k, on=on)
        except LearnerRaised:
            try:
                shown = bool(cases) and _judge_best_match(record) is not None
            except Exception:  # a judge that cannot decide on a part of the record
                shown = False
            if shown:
                break
            raise
        case["got"] = value_facts(got)
        case["q_after"], case["k_after"] = value_facts(q), value_facts(k)
        left = _left_as_it_was(q, kept_q) and _left_as_it_was(k, kept_k)
        case["again"] = value_facts(run(answer, q, k, on=on + ", second call")) if left else case["got"]
        cases.append(case)
    _near_tie_case(answer, run, record, cases)
    return record


_NEAR_TIE_ON = ("one query and two keys whose dot products with it differ only in the last bit "
                "of float32 (0.1 and the next float32 above it)")


def _near_tie_case(answer, run, record, cases):
    """Two dot products one float32 step apart: exp() of their difference rounds to 1, so a
    softmax makes them equal and argmax then picks the first, the smaller one."""
    if _judge_best_match(record) is not None:
        return
    low = torch.tensor(0.1, dtype=torch.float32)
    high = torch.nextafter(low, torch.tensor(1.0))
    q, k = torch.ones(1, 1, 1), torch.stack([low, high]).reshape(1, 2, 1)
    scores = q.double() @ k.double().mT
    case = {
        "on": _NEAR_TIE_ON, "b": 1, "n": 1, "m": 2, "d": 1, "shared": False, "near_tie": True,
        "expected": value_facts(scores.argmax(dim=-1)),
        "smallest": value_facts(scores.argmin(dim=-1))["values"],
        "over_queries": None, "untransposed": None,
        "q_before": value_facts(q), "k_before": value_facts(k),
    }
    got = run(answer, q, k, on=_NEAR_TIE_ON)
    case["got"], case["again"] = value_facts(got), value_facts(got)
    case["q_after"], case["k_after"] = value_facts(q), value_facts(k)
    cases.append(case)


def _judge_best_match(record):
    if record["loops"]:
        return Mistake("python-loop", (
            f"The task asks for no Python loop; your function has one: `{record['loops'][0]}`. "
            "One matrix product handles every batch: (q @ k.mT).argmax(dim=-1)."
        ))
    if record["torch_calls"] >= _MATCH_LOOP_CALLS:
        return Mistake("python-loop", (
            f"The task asks for no Python loop; for a batch of {_MATCH_LOOP_B} your function "
            f"made {record['torch_calls']} torch calls, one or more per batch. One matrix "
            "product handles every batch: (q @ k.mT).argmax(dim=-1)."
        ))
    calls = record["calls"]
    for case in record["cases"]:
        on, got, expected = case["on"], case["got"], case["expected"]
        b, n, m = case["b"], case["n"], case["m"]
        for name in ("q", "k"):
            changed = _input_changed(case[f"{name}_before"], case[f"{name}_after"], name, on)
            if changed:
                return changed
        kind = got["kind"]
        if "return_types" in kind:
            return Mistake("returned-values-and-indices", (
                f"Your function returned {kind.split('.')[-1]}(values, indices) ({on}): a pair. "
                "Return only the indices: .argmax(dim=-1), or .max(dim=-1).indices."
            ))
        if kind == "tensor":
            shape, values = got["shape"], got.get("values")
            if shape == [] and expected["shape"] != []:
                return Mistake("argmax-without-dim", (
                    f"Your result is a single number ({on}): argmax() without a dim gives one "
                    "index into all the scores, flattened. Give it the keys' dimension: "
                    "argmax(dim=-1)."
                ))
            if shape == expected["shape"] and values is not None and got["dtype"] != "torch.int64" and (
                    got["dtype"].startswith("torch.float")):
                return Mistake("returned-scores", (
                    f"Your result has dtype {got['dtype']} ({on}): these are the largest scores "
                    "themselves, not their indices. argmax(dim=-1) gives the index of each."
                ))
            if shape == [b, m] and n != m and b:
                return Mistake("argmax-over-queries", (
                    f"Your result has shape {shape_text(shape)}; expected {shape_text(expected['shape'])} "
                    f"({on}): one index per key instead of one per query. The scores are "
                    "(B, n, m), the keys last: argmax(dim=-1)."
                ))
            if shape == expected["shape"] and values is not None and not same_values(
                    values, expected["values"], rtol=0, atol=0):
                if case["over_queries"] is not None and same_values(values, case["over_queries"], rtol=0, atol=0):
                    return Mistake("argmax-over-queries", (
                        f"Your argmax runs over the queries ({on}): for each key it gives the "
                        "best query. The scores are (B, n, m), the keys last: argmax(dim=-1)."
                    ))
                if case["untransposed"] is not None and same_values(values, case["untransposed"], rtol=0, atol=0):
                    return Mistake("k-not-transposed", (
                        f"Your product multiplies q by k without transposing it ({on}): with "
                        "n = m = d the shapes happen to fit, but each query meets k's columns, "
                        "not its keys. Transpose k's last two dimensions: q @ k.mT."
                    ))
                if case.get("near_tie"):
                    return Mistake("near-tie-rounded", (
                        f"Your index is the first key, with the smaller dot product ({on}): "
                        "something between the dot products and argmax (a softmax, a lower "
                        "precision, a rounding) made the two equal, and argmax takes the first of "
                        "equals. argmax the dot products themselves: (q @ k.mT).argmax(dim=-1)."
                    ))
                if same_values(values, case["smallest"], rtol=0, atol=0):
                    return Mistake("argmin-not-argmax", (
                        f"Your result picks the key with the smallest dot product ({on}); the "
                        "task asks for the largest: argmax."
                    ))
            if b == 1 and shape == [n] and expected["shape"] == [1, n]:
                note = " squeeze() drops it; name the dimension." if "squeeze()" in calls else ""
                return Mistake("squeezed-batch", (
                    f"Your result has shape {shape_text(shape)}; expected (1, {n}) ({on}): the "
                    f"batch dimension of a batch of one is gone.{note}"
                ))
        problem = tensor_problem(got, expected, on=on, rtol=0, atol=0)
        if problem:
            return problem
        problem = tensor_problem(case["again"], expected, what="the second result", on=on, rtol=0, atol=0)
        if problem:
            return Mistake("wrong-on-second-call", (
                f"Your function was right on its first call, not on a second call with the same q and k: {problem}"
            ))
    return None


best_match = Exercise(
    "best_match",
    chapter=CHAPTER,
    title="The best key for every query",
    expects=Function("best_match", ("q", "k"),
                     returns="an int64 tensor of shape (B, n): the index of each query's best key"),
    probe=_probe_best_match,
    judge=_judge_best_match,
    reference=best_match,
    passed_message="Correct: one batched product, one argmax over the keys.",
    hints=[
        "Every query against every key of its batch: (B, n, d) @ (B, d, m) gives the (B, n, m) scores.",
        "k.mT (or k.transpose(-2, -1)) swaps only the last two dimensions, for (B, m, d) and (m, d) alike.",
        "The keys are the last dimension of the scores: argmax(dim=-1).",
    ],
    error_notes=[
        (
            "Expected size for first two dimensions of batch2 tensor",
            "q @ k multiplies each (n, d) matrix of queries by an (m, d) matrix of keys: the "
            "inner sizes, d and m, do not fit. Transpose the keys' last two dimensions: q @ k.mT.",
            "batched-keys-not-transposed",
        ),
        (
            "shapes cannot be multiplied",
            "q @ k multiplies (n, d) queries by (m, d) keys: the inner sizes, d and m, do not "
            "fit. Transpose the keys' last two dimensions: q @ k.mT.",
            "keys-not-transposed",
        ),
        (
            "must be a 3D tensor",
            "torch.bmm takes two 3-D tensors only, and k may be (m, d), the same keys for every "
            "batch. @ (torch.matmul) broadcasts the batch dimensions: q @ k.mT.",
            "bmm-of-2-d-keys",
        ),
        (
            "Dimension out of range",
            "k may have two dimensions, (m, d), so dimension 2 does not exist. Count from the "
            "end, which works for both: k.transpose(-2, -1), or k.mT.",
            "transpose-of-missing-dimension",
        ),
        (
            "does not match the number of dimensions",
            "k may have two dimensions, (m, d), the same keys for every batch, and an einsum "
            "equation names a fixed number of them. q @ k.mT broadcasts the batch dimensions "
            "(so does an ellipsis: \"...nd,...md->...nm\").",
            "einsum-of-fixed-dimensions",
        ),
        (
            "must match the size of tensor",
            "the batch dimensions of a product broadcast like an element-wise operation, and "
            "these do not fit. Often a transpose moved k's batch dimension (k.T reverses all the "
            "dimensions of a 3-D k; transpose(0, 1) swaps batch and keys). k.mT swaps only the "
            "last two.",
            "batch-dimension-moved",
        ),
        (
            "stack expects a non-empty TensorList",
            "with an empty batch (B = 0) a loop over the batch gives torch.stack an empty list. "
            "One product handles every B: (q @ k.mT).argmax(dim=-1).",
            "loop-over-empty-batch",
        ),
        (
            "view size is not compatible",
            "q and k may be non-contiguous views, which view() cannot reshape; @ needs no "
            "reshaping: (q @ k.mT).argmax(dim=-1).",
            "view-of-non-contiguous",
        ),
    ],
)


# ============================================================================================
# T8 — assert shapes before a key operation
# ============================================================================================
def checked_mse(pred, target):
    assert pred.shape == target.shape, f"pred {tuple(pred.shape)} vs target {tuple(target.shape)}"
    return ((pred - target) ** 2).mean()


# (shape, dtype, transposed): equal shapes, one of them non-contiguous.
_MSE_GOOD = [
    ((4,), torch.float32, False),
    ((3, 2), torch.float32, True),
    ((5, 1), torch.float64, False),
    ((2, 2, 2), torch.float32, False),
]
# Unequal shapes, most of which broadcast silently: different numbers of dimensions, the same
# number (so comparing .dim() is not enough), the same first size, the same number of elements.
_MSE_BAD = [
    ((4, 1), (4,)),
    ((3,), (3, 1)),
    ((2, 3), (3, 2)),
    ((3, 1), (1, 3)),
    ((2, 3), (2, 1)),
]


def _probe_checked_mse(answer, run):
    generator = _generator(9)
    cases = []
    for shape, dtype, transposed in _MSE_GOOD:
        def make():
            raw = torch.rand(tuple(reversed(shape)) if transposed else shape, generator=generator)
            return (raw.T if transposed else raw).to(dtype)

        pred, target = make(), make()
        on = f"pred and target of shape {shape_text(list(shape))}, {_dtype_name(dtype)}"
        if transposed:
            on += ", transposed views (not contiguous)"
        squares = (pred.double() - target.double()) ** 2
        case = {
            "on": on,
            "expected": value_facts(((pred - target) ** 2).mean()),
            "rows_mean": float(squares.sum() / shape[0]),
            "rows": shape[0],
            "numel": pred.numel(),
            "pred_before": value_facts(pred),
            "target_before": value_facts(target),
        }
        kept_pred, kept_target = pred.clone(), target.clone()
        given_pred = pred if transposed else pred.clone()
        given_target = target if transposed else target.clone()
        case["got"] = value_facts(run(answer, given_pred, given_target, on=on))
        case["pred_after"] = value_facts(given_pred)
        case["target_after"] = value_facts(given_target)
        left = _left_as_it_was(given_pred, kept_pred) and _left_as_it_was(given_target, kept_target)
        case["again"] = (
            value_facts(run(answer, given_pred, given_target, on=on + ", second call"))
            if left else case["got"]
        )
        cases.append(case)
    refusals = []
    for pred_shape, target_shape in _MSE_BAD:
        pred, target = torch.rand(pred_shape, generator=generator), torch.rand(target_shape, generator=generator)
        on = f"pred {shape_text(list(pred_shape))} and target {shape_text(list(target_shape))}"
        try:
            returned = answer(pred, target)  # here raising is the right answer: record it
        except NotImplementedError as error:
            raise LearnerRaised(error, on) from None
        except Exception as error:
            try:
                message = str(error)[:300]
            except Exception:  # an exception whose __str__ is broken
                message = ""
            refusals.append(
                {"on": on, "raised": type(error).__name__, "message": message,
                 "asked_type": isinstance(error, (AssertionError, ValueError)),
                 "pred_forms": shape_forms(pred_shape), "target_forms": shape_forms(target_shape)}
            )
        else:
            refusals.append({"on": on, "raised": None, "returned": value_facts(returned)})
    return {"cases": cases, "refusals": refusals}


def _judge_checked_mse(record):
    for case in record["cases"]:
        on = case["on"]
        for name in ("pred", "target"):
            changed = _input_changed(case[f"{name}_before"], case[f"{name}_after"], name, on)
            if changed:
                return changed
        got, expected = case["got"], case["expected"]
        problem = tensor_problem(got, expected, what="your loss", on=on, rtol=1e-4)
        if problem:
            if (
                got["kind"] == "tensor" and got["shape"] == [] and "values" in got
                and case["rows"] != case["numel"]
                and same_values(got["values"], case["rows_mean"], rtol=1e-4)
            ):
                return Mistake("mean-over-rows", (
                    f"Your loss divides the sum of squares by the number of rows, "
                    f"{case['rows']}, not by the number of elements, {case['numel']} ({on}). "
                    "The mean is over every element: .mean(), or divide by pred.numel()."
                ))
            return problem
        problem = tensor_problem(case["again"], expected, what="the second loss", on=on, rtol=1e-4)
        if problem:
            return Mistake("wrong-on-second-call", (
                f"Your function was right on its first call, not on a second call with the same pred and target: {problem}"
            ))
    for refusal in record["refusals"]:
        on = refusal["on"]
        if refusal["raised"] is None:
            returned = refusal["returned"]
            shown = f" of shape {shape_text(returned['shape'])}" if returned["kind"] == "tensor" else ""
            return Mistake("no-shape-check", (
                f"For {on} your function returned {_kind_text(returned)}{shown} instead of "
                "stopping. Unequal shapes must not reach the arithmetic, where broadcasting (or "
                "a reshape) makes them fit silently: assert pred.shape == target.shape before "
                "computing."
            ))
        message = refusal["message"]
        mentions_both = bool(message) and mentions(message, refusal["pred_forms"]) and mentions(
            message, refusal["target_forms"])
        if not refusal["asked_type"]:
            shown = f" ({message})" if message else ""
            # torch's own words: the shapes went unchecked into the arithmetic, which refused them
            unchecked = "must match the size of tensor" in (message or "")
            return Mistake("error-from-arithmetic" if unchecked else "wrong-error-type", (
                f"For {on} your function raised {refusal['raised']}{shown}; the task asks for "
                "an AssertionError (or a ValueError) from your own check of the shapes, before "
                "any arithmetic."
            ))
        if not message:
            return Mistake("assert-without-message", (
                f"For {on} your {refusal['raised']} stopped the code but says nothing. Put both "
                "shapes in its message: assert a.shape == b.shape, f\"{a.shape} vs {b.shape}\"."
            ))
        if not mentions_both:
            return Mistake("message-lacks-shapes", (
                f"For {on} your message was {message!r}: include both shapes, so the person who "
                "sees it knows what to fix."
            ))
    return None


def _kind_text(facts: dict) -> str:
    return "a tensor" if facts["kind"] == "tensor" else f"a value of type {facts['kind']}"


checked_mse = Exercise(
    "checked_mse",
    chapter=CHAPTER,
    title="Assert shapes before the loss",
    expects=Function("checked_mse", ("pred", "target"),
                     returns="a 0-dim tensor, the mean squared error (and an AssertionError when the shapes differ)"),
    probe=_probe_checked_mse,
    judge=_judge_checked_mse,
    reference=checked_mse,
    passed_message="Correct: right loss for equal shapes, and a clear stop for unequal ones.",
    hints=[
        "First line: assert pred.shape == target.shape, <a message>.",
        "Put both shapes in the message, e.g. f\"pred {tuple(pred.shape)} vs target {tuple(target.shape)}\".",
        "Then the loss: ((pred - target) ** 2).mean().",
    ],
    error_notes=[
        (
            "view size is not compatible with input tensor's size and stride",
            "view() needs memory laid out in the order it reads; a transposed pred or target "
            "is not. The loss needs no reshaping: ((pred - target) ** 2).mean(), or reshape().",
            "view-of-non-contiguous",
        ),
    ],
)
