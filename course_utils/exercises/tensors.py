"""Chapter 01 — Tensors: the three attributes, shared memory, views, dimensions, broadcasting.

Each probe runs the learner's function on several generated shapes, so an answer that only
works for one example does not pass. Each reference solution is what ``.solution()`` shows.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.facts import same_values, shape_text, tensor_problem, value_facts

CHAPTER = "tensors"


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ============================================================================================
# T1 — shape, dtype, device
# ============================================================================================
def match_reference(x, reference):
    return x.to(dtype=reference.dtype, device=reference.device)


# (x's dtype, reference's dtype, reference's device, x's shape). "meta" tensors have a device
# but no data, so moving to another device can be checked on a machine with only a CPU.
_MATCH_CASES = [
    (torch.float64, torch.float32, "cpu", (3,)),
    (torch.int64, torch.float32, "cpu", (2, 3)),
    (torch.float32, torch.float16, "cpu", (4, 1)),
    (torch.float32, torch.float32, "meta", (2, 2)),
    (torch.float64, torch.bfloat16, "meta", (5,)),
]


def _probe_match_reference(answer, run):
    generator = _generator(1)
    cases = []
    for x_dtype, ref_dtype, ref_device, shape in _MATCH_CASES:
        x = (torch.rand(shape, generator=generator) * 10).to(x_dtype)
        reference = torch.zeros(7, dtype=ref_dtype, device=ref_device)
        on = (
            f"x: {shape_text(list(shape))} {str(x_dtype)[6:]} on cpu, "
            f"reference: {str(ref_dtype)[6:]} on {ref_device}"
        )
        got = run(answer, x.clone(), reference, on=on)
        cases.append(
            {
                "on": on,
                "got": value_facts(got),
                "expected": value_facts(x.to(dtype=ref_dtype, device=ref_device)),
                "x_dtype": str(x_dtype),
                "reference_shape": [7],
            }
        )
    return cases


def _judge_match_reference(cases):
    for case in cases:
        got, expected, on = case["got"], case["expected"], case["on"]
        if got["kind"] == "tensor":
            if got["shape"] == case["reference_shape"] and expected["shape"] != case["reference_shape"]:
                return (
                    f"Your result has the reference's shape ({on}); only its dtype and device "
                    "should change. Keep x's own shape and values."
                )
            if got["dtype"] == case["x_dtype"] and got["dtype"] != expected["dtype"]:
                return (
                    f"Your result kept x's dtype {got['dtype']} ({on}); it should have the "
                    f"reference's, {expected['dtype']}. Did you move only the device? "
                    ".to(dtype=..., device=...) changes both."
                )
            if got["device"] != expected["device"]:
                return (
                    f"Your result is on {got['device']}, the reference on {expected['device']} "
                    f"({on}). Move it with .to(reference.device)."
                )
        problem = tensor_problem(got, expected, on=on, rtol=1e-2, atol=1e-2)
        if problem:
            return problem
    return None


match_reference = Exercise(
    "match_reference",
    chapter=CHAPTER,
    title="Match a reference's dtype and device",
    expects=Function("match_reference", ("x", "reference")),
    probe=_probe_match_reference,
    judge=_judge_match_reference,
    reference=match_reference,
    passed_message="Correct: same values and shape as x, the dtype and device of the reference.",
    hints=[
        "Print the three attributes of both tensors first: shape, dtype, device.",
        "x.to(...) can change the dtype and the device in one call.",
        "x.to(dtype=reference.dtype, device=reference.device)",
    ],
)


# ============================================================================================
# T3 — shared memory with NumPy
# ============================================================================================
def independent_copy(array):
    return torch.tensor(array)


def _probe_independent_copy(answer, run):
    # The probe records numbers only; whether memory is shared is decided by the judge, so a
    # patched np.array_equal in the learner's session cannot decide it.
    rng = np.random.default_rng(3)
    cases = []
    for shape, dtype in [((4,), np.float64), ((2, 3), np.float32), ((3,), np.int64)]:
        array = (rng.random(shape) * 10).astype(dtype)
        original = array.copy()
        on = f"a NumPy array of shape {shape_text(list(shape))}, {np.dtype(dtype).name}"
        got = run(answer, array, on=on)
        case = {"on": on, "got": value_facts(got), "expected": value_facts(torch.from_numpy(original))}
        if isinstance(got, torch.Tensor) and tuple(got.shape) == shape:
            array += 1  # does the tensor see a change of the array?
            case["array_changed_to"] = array.copy()
            case["tensor_after_array_change"] = got.detach().cpu().numpy().copy()
            array[...] = original
            got.add_(100)  # does the array see a change of the tensor?
            case["array_after_tensor_change"] = array.copy()
            got.sub_(100)
        cases.append(case)
    return cases


def _shares_memory(case) -> bool:
    if "array_changed_to" not in case:
        return False
    followed_array = same_values(case["tensor_after_array_change"], case["array_changed_to"], rtol=0, atol=0)
    followed_tensor = not same_values(case["array_after_tensor_change"], case["expected"]["values"], rtol=0, atol=0)
    return followed_array or followed_tensor


def _judge_independent_copy(cases):
    for case in cases:
        got, on = case["got"], case["on"]
        if got["kind"] == "tensor" and got["shape"] == case["expected"]["shape"]:
            if _shares_memory(case):
                return (
                    f"Your tensor shares memory with the array ({on}): changing one changed "
                    "the other. torch.from_numpy and torch.as_tensor share; torch.tensor(array) "
                    "copies (so does torch.from_numpy(array).clone())."
                )
            if got["dtype"] != case["expected"]["dtype"]:
                legacy = (
                    " torch.Tensor(array) always makes float32; torch.tensor(array) keeps the "
                    "array's dtype."
                    if got["dtype"] == "torch.float32"
                    else ""
                )
                return (
                    f"Your tensor has dtype {got['dtype']}, the array {case['expected']['dtype']} "
                    f"({on}); a copy should keep the dtype.{legacy}"
                )
        problem = tensor_problem(got, case["expected"], what="your tensor", on=on)
        if problem:
            return problem
    return None


independent_copy = Exercise(
    "independent_copy",
    chapter=CHAPTER,
    title="A tensor that does not share the array's memory",
    expects=Function("independent_copy", ("array",)),
    probe=_probe_independent_copy,
    judge=_judge_independent_copy,
    reference=independent_copy,
    passed_message="Correct: same values and dtype, and changing one no longer changes the other.",
    hints=[
        "Of torch.from_numpy, torch.as_tensor and torch.tensor, only one copies the data.",
        "torch.tensor(array) copies and keeps the dtype; torch.from_numpy(array).clone() too.",
    ],
)


# ============================================================================================
# T5 — transposes are views with other strides
# ============================================================================================
def flatten_transposed(x):
    return x.T.reshape(-1)


_FLATTEN_SHAPES = [(2, 3), (4, 5), (1, 6), (3, 1)]


def _probe_flatten_transposed(answer, run):
    cases = []
    for shape in _FLATTEN_SHAPES:
        x = torch.arange(float(shape[0] * shape[1])).reshape(shape)
        on = f"x of shape {shape_text(list(shape))}"
        got = run(answer, x.clone(), on=on)
        cases.append(
            {
                "on": on,
                "got": value_facts(got),
                "expected": value_facts(x.T.reshape(-1)),
                "untransposed": x.reshape(-1).numpy().copy(),
            }
        )
    return cases


def _judge_flatten_transposed(cases):
    for case in cases:
        got, on = case["got"], case["on"]
        if (
            got["kind"] == "tensor"
            and got["shape"] == case["expected"]["shape"]
            and not same_values(case["untransposed"], case["expected"]["values"])
            and same_values(got["values"], case["untransposed"])
        ):
            return (
                f"These are x's values in x's own order ({on}): transpose first (x.T), then "
                "flatten."
            )
        if got["kind"] == "tensor" and len(got["shape"]) == 2:
            return (
                f"Your result has shape {shape_text(got['shape'])} ({on}); expected one "
                f"dimension, {shape_text(case['expected']['shape'])}. Flatten after transposing."
            )
        problem = tensor_problem(got, case["expected"], on=on)
        if problem:
            return problem
    return None


flatten_transposed = Exercise(
    "flatten_transposed",
    chapter=CHAPTER,
    title="Flatten a transposed matrix",
    expects=Function("flatten_transposed", ("x",)),
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
            "view size is not compatible with input tensor's size and stride",
            "view() cannot reorder memory, and a transposed tensor is not contiguous. Use "
            ".reshape(-1), or .contiguous().view(-1).",
        ),
    ],
)


# ============================================================================================
# T6 — squeeze only drops size-1 dimensions
# ============================================================================================
def remove_batch_dim(x):
    return x.squeeze(0)


_BATCH_SHAPES = [(1, 5), (1, 3, 4), (1, 1, 5), (1, 2, 1), (1, 1)]


def _probe_remove_batch_dim(answer, run):
    generator = _generator(6)
    cases = []
    for shape in _BATCH_SHAPES:
        x = torch.rand(shape, generator=generator)
        on = f"x of shape {shape_text(list(shape))}"
        given = x.clone()
        got = run(answer, given, on=on)
        cases.append(
            {
                "on": on,
                "got": value_facts(got),
                "expected": value_facts(x[0]),
                "squeezed_all": list(x.squeeze().shape),
                "x": x.numpy().copy(),
                "x_after": value_facts(given),
            }
        )
    return cases


def _judge_remove_batch_dim(cases):
    for case in cases:
        got, on = case["got"], case["on"]
        after = case["x_after"]
        if after["shape"] != list(case["x"].shape):
            return (
                f"Your function changed its input x in place ({on}): the caller's x has shape "
                f"{shape_text(after['shape'])} afterwards instead of "
                f"{shape_text(list(case['x'].shape))}. An in-place method with an underscore "
                "(such as squeeze_) reshapes the caller's own tensor; use x.squeeze(0), which "
                "returns a new tensor and leaves x as it was."
            )
        if "values" in after and not same_values(after["values"], case["x"], rtol=0, atol=0):
            return (
                f"Your function changed the numbers in its input x ({on}). Compute a new "
                "tensor; leave x as it was."
            )
        if got["kind"] == "tensor" and got["shape"] != case["expected"]["shape"]:
            if got["shape"] == case["squeezed_all"]:
                return (
                    f"Your result has shape {shape_text(got['shape'])}; expected "
                    f"{shape_text(case['expected']['shape'])} ({on}). squeeze() with no "
                    "argument drops EVERY size-1 dimension, not only the batch one: "
                    "say which, squeeze(0)."
                )
            if len(got["shape"]) == len(case["expected"]["shape"]) + 1:
                return (
                    f"Your result still has shape {shape_text(got['shape'])} ({on}): "
                    "squeeze(d) silently does nothing when dimension d is not of size 1. The "
                    "batch dimension is dimension 0."
                )
        problem = tensor_problem(got, case["expected"], on=on)
        if problem:
            return problem
    return None


remove_batch_dim = Exercise(
    "remove_batch_dim",
    chapter=CHAPTER,
    title="Remove the batch dimension, and only that",
    expects=Function("remove_batch_dim", ("x",)),
    probe=_probe_remove_batch_dim,
    judge=_judge_remove_batch_dim,
    reference=remove_batch_dim,
    passed_message="Correct: only dimension 0 is gone, other size-1 dimensions are kept.",
    hints=[
        "The check also uses shapes like (1, 1, 5): only the first 1 is the batch.",
        "squeeze() drops every dimension of size 1; squeeze(0) only the first (x[0] works too).",
    ],
)


# ============================================================================================
# T7 — broadcasting, on purpose
# ============================================================================================
def outer_sum(a, b):
    return a[:, None] + b[None, :]


_OUTER_SHAPES = [(3, 4), (5, 5), (1, 3), (4, 1), (2, 6)]


def _probe_outer_sum(answer, run):
    generator = _generator(7)
    cases = []
    for n, m in _OUTER_SHAPES:
        a, b = torch.rand(n, generator=generator), torch.rand(m, generator=generator)
        on = f"a of shape ({n},), b of shape ({m},)"
        got = run(answer, a.clone(), b.clone(), on=on)
        cases.append(
            {
                "on": on,
                "n": n,
                "m": m,
                "got": value_facts(got),
                "expected": value_facts(a[:, None] + b[None, :]),
                "swapped": (b[:, None] + a[None, :]).numpy().copy(),
            }
        )
    return cases


def _judge_outer_sum(cases):
    for case in cases:
        got, on, n, m = case["got"], case["on"], case["n"], case["m"]
        if got["kind"] == "tensor" and got["shape"] == [n] and n == m:
            return (
                f"Your result has shape ({n},); expected ({n}, {m}) ({on}). Two (N,) tensors "
                "meet element by element: a + b pairs a[i] with b[i] only. Give a a second "
                "dimension, a[:, None], so it broadcasts against b."
            )
        if got["kind"] == "tensor" and got["shape"] == [m, n] and n != m:
            return (
                f"Your result has shape ({m}, {n}); expected ({n}, {m}) ({on}): rows should "
                "follow a, columns b. Put the new dimension on the other side."
            )
        if got["kind"] == "tensor" and got["shape"] == [n, m] and n == m and n > 1:
            if "values" in got and same_values(got["values"], case["swapped"]) and not same_values(
                got["values"], case["expected"]["values"]
            ):
                return f"Your result is transposed ({on}): out[i, j] should be a[i] + b[j]."
        problem = tensor_problem(got, case["expected"], on=on)
        if problem:
            return problem
    return None


outer_sum = Exercise(
    "outer_sum",
    chapter=CHAPTER,
    title="Every pair: out[i, j] = a[i] + b[j]",
    expects=Function("outer_sum", ("a", "b")),
    probe=_probe_outer_sum,
    judge=_judge_outer_sum,
    reference=outer_sum,
    passed_message="Correct: broadcasting (N, 1) against (1, M) made every pair.",
    hints=[
        "Broadcasting aligns shapes from the right; a size-1 dimension stretches.",
        "(N, 1) + (1, M) gives (N, M). a[:, None] or a.unsqueeze(1) makes a (N, 1).",
    ],
)


def residuals(pred, target):
    return pred.squeeze(1) - target


_RESIDUAL_SIZES = [4, 1, 7, 3]


def _probe_residuals(answer, run):
    generator = _generator(8)
    cases = []
    for n in _RESIDUAL_SIZES:
        pred, target = torch.rand(n, 1, generator=generator), torch.rand(n, generator=generator)
        on = f"pred of shape ({n}, 1), target of shape ({n},)"
        given_pred, given_target = pred.clone(), target.clone()
        got = run(answer, given_pred, given_target, on=on)
        cases.append(
            {
                "on": on,
                "n": n,
                "got": value_facts(got),
                "expected": value_facts(pred[:, 0] - target),
                "pred": pred.numpy().copy(),
                "target": target.numpy().copy(),
                "pred_after": value_facts(given_pred),
                "target_after": value_facts(given_target),
            }
        )
    return cases


def _judge_residuals(cases):
    for case in cases:
        got, on, n = case["got"], case["on"], case["n"]
        for name, shape in (("pred", f"({n}, 1)"), ("target", f"({n},)")):
            before, after = case[name], case[f"{name}_after"]
            if after["shape"] != list(before.shape):
                fix = (
                    "use pred.squeeze(1), which returns a new tensor"
                    if name == "pred"
                    else "use operations that return a new tensor"
                )
                return (
                    f"Your function changed its input {name} in place ({on}): the caller's "
                    f"{name} has shape {shape_text(after['shape'])} afterwards instead of "
                    f"{shape}. An in-place method with an underscore (such as squeeze_) "
                    f"reshapes the caller's own tensor; {fix} and leaves {name} as it was."
                )
            if "values" in after and not same_values(after["values"], before, rtol=0, atol=0):
                return (
                    f"Your function changed the numbers in its input {name} ({on}). Compute "
                    f"a new tensor; leave {name} as it was."
                )
        if got["kind"] == "tensor" and got["shape"] == [n, n] and n > 1:
            return (
                f"Your result has shape ({n}, {n}); expected ({n},) ({on}). The classic "
                f"broadcasting bug: a ({n}, 1) tensor met a ({n},) tensor and broadcast to "
                f"({n}, {n}), every prediction minus every target. Drop pred's last dimension "
                "first: pred.squeeze(1), or pred[:, 0]."
            )
        if got["kind"] == "tensor" and got["shape"] == [n, 1]:
            return (
                f"Your result has shape ({n}, 1); expected ({n},) ({on}). One value per "
                "sample, in one dimension."
            )
        problem = tensor_problem(got, case["expected"], on=on)
        if problem:
            return problem
    return None


residuals = Exercise(
    "residuals",
    chapter=CHAPTER,
    title="Per-sample errors without the (N, N) bug",
    expects=Function("residuals", ("pred", "target")),
    probe=_probe_residuals,
    judge=_judge_residuals,
    reference=residuals,
    passed_message="Correct: one error per sample, shape (N,).",
    hints=[
        "Print both shapes: pred is (N, 1), target is (N,). What does broadcasting make of them?",
        "Make both (N,) before subtracting: pred.squeeze(1) or pred[:, 0] (or pred.view(-1)).",
    ],
)


# ============================================================================================
# T8 — assert shapes before a key operation
# ============================================================================================
def checked_mse(pred, target):
    assert pred.shape == target.shape, f"pred {tuple(pred.shape)} vs target {tuple(target.shape)}"
    return ((pred - target) ** 2).mean()


_MSE_GOOD = [(4,), (3, 2), (5, 1)]
_MSE_BAD = [((4, 1), (4,)), ((3,), (3, 1)), ((2, 3), (3, 2))]


def _probe_checked_mse(answer, run):
    generator = _generator(9)
    cases = []
    for shape in _MSE_GOOD:
        pred, target = torch.rand(shape, generator=generator), torch.rand(shape, generator=generator)
        on = f"pred and target of shape {shape_text(list(shape))}"
        got = run(answer, pred.clone(), target.clone(), on=on)
        cases.append(
            {"on": on, "got": value_facts(got), "expected": value_facts(((pred - target) ** 2).mean())}
        )
    refusals = []
    for pred_shape, target_shape in _MSE_BAD:
        pred, target = torch.rand(pred_shape, generator=generator), torch.rand(target_shape, generator=generator)
        on = f"pred {shape_text(list(pred_shape))} and target {shape_text(list(target_shape))}"
        try:
            returned = answer(pred, target)  # here raising is the right answer: record it
        except NotImplementedError as error:
            raise LearnerRaised(error, on) from None
        except Exception as error:
            refusals.append(
                {"on": on, "raised": type(error).__name__, "message": str(error)[:300],
                 "shapes": [shape_text(list(pred_shape)), shape_text(list(target_shape)),
                            str(list(pred_shape)), str(list(target_shape)),
                            str(tuple(pred_shape)), str(tuple(target_shape))]}
            )
        else:
            refusals.append({"on": on, "raised": None, "returned": value_facts(returned)})
    return {"cases": cases, "refusals": refusals}


def _mentions(message: str, forms) -> bool:
    """Whether a shape appears in the message, written as (4, 1), [4, 1] or torch.Size([4, 1])."""
    compact = message.replace(" ", "")
    return any(form.replace(" ", "") in compact for form in forms)


def _judge_checked_mse(record):
    for case in record["cases"]:
        problem = tensor_problem(case["got"], case["expected"], what="your loss", on=case["on"], rtol=1e-4)
        if problem:
            return problem
    for refusal in record["refusals"]:
        on = refusal["on"]
        if refusal["raised"] is None:
            returned = refusal["returned"]
            shown = f" ({returned['shape']})" if returned["kind"] == "tensor" else ""
            return (
                f"For {on} your function returned a {returned['kind']}{shown} instead of stopping. "
                "Broadcasting made the shapes fit silently; assert pred.shape == target.shape "
                "before computing."
            )
        if refusal["raised"] not in ("AssertionError", "ValueError"):
            return (
                f"For {on} your function raised {refusal['raised']} ({refusal['message']}), not "
                "your own check. Assert the shapes first, before any arithmetic."
            )
        message = refusal["message"]
        if not message:
            return (
                f"For {on} your assertion stopped the code but says nothing. Put both shapes in "
                "its message: assert a.shape == b.shape, f\"{a.shape} vs {b.shape}\"."
            )
        shapes = refusal["shapes"]
        if not (_mentions(message, shapes[0::2]) and _mentions(message, shapes[1::2])):
            return (
                f"For {on} your message was {message!r}: include both shapes, so the person who "
                "sees it knows what to fix."
            )
    return None


checked_mse = Exercise(
    "checked_mse",
    chapter=CHAPTER,
    title="Assert shapes before the loss",
    expects=Function("checked_mse", ("pred", "target")),
    probe=_probe_checked_mse,
    judge=_judge_checked_mse,
    reference=checked_mse,
    passed_message="Correct: right loss for equal shapes, and a clear stop for unequal ones.",
    hints=[
        "First line: assert pred.shape == target.shape, <a message>.",
        "Put both shapes in the message, e.g. f\"pred {tuple(pred.shape)} vs target {tuple(target.shape)}\".",
        "Then the loss: ((pred - target) ** 2).mean().",
    ],
)
