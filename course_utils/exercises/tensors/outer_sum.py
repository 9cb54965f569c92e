"""T7 — outer_sum: broadcasting, on purpose."""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.facts import given, same_values, tensor_of, tensor_problem, value_facts
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
    _loops_in,
)
from course_utils.exercises.torch_calls import TorchCallCounter


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
_INF, _NAN = float("inf"), float("nan")


def _float_edges(dtype):
    """a and b at the float dtype's edges: subnormals, -0.0, its largest values (sums that
    overflow to inf, or cancel to 0), large magnitudes whose exp() overflows, inf, -inf, nan."""
    info = torch.finfo(dtype)
    tiny = float(torch.nextafter(torch.zeros((), dtype=dtype), torch.ones((), dtype=dtype)))
    big = {torch.float16: 12.0, torch.bfloat16: 90.0, torch.float32: 90.0}.get(dtype, 710.0)
    a = [0.0, -0.0, tiny, -tiny, info.max, -info.max, big, -8 * big, 1.0, _INF, -_INF, _NAN]
    b = [info.max, -info.max, tiny, -tiny, big, -8 * big, _INF, -_INF, 0.25]
    return torch.tensor(a, dtype=dtype), torch.tensor(b, dtype=dtype)


def _int_edges(dtype):
    """a and b with magnitudes beyond what a float of the same width holds exactly (2**53 past
    float64's, 2**24 past float32's) and sums up to the dtype's own extremes (none past them)."""
    half = 2 ** 62 if dtype == torch.int64 else 2 ** 30
    exact = 2 ** 53 if dtype == torch.int64 else 2 ** 24
    a = [half, -half, exact + 1, -(exact + 1), 0, 7]
    b = [half - 1, -half, 1, -1, 3]
    return torch.tensor(a, dtype=dtype), torch.tensor(b, dtype=dtype)


def _mixed_edges():
    """An int64 a too large for float32 exactly, with a float32 b: a + b rounds a to float32
    first (type promotion), then adds."""
    a = torch.tensor([2 ** 24 + 1, -(2 ** 24 + 1), 2 ** 40 + 1, 0, 2 ** 62], dtype=torch.int64)
    b = torch.tensor([0.5, -0.5, 3e38, -_INF], dtype=torch.float32)
    return a, b


def _exact_problem(got, expected, on):
    """Where ``got`` differs from ``expected`` at all, its numbers written in full (a %g of
    2**53 + 2 and of 2**53 would read alike)."""
    got_values = np.asarray(got["values"])
    expected_values = np.asarray(expected["values"])
    with np.errstate(invalid="ignore"):
        differ = ~((got_values == expected_values) | (np.isnan(got_values.astype(np.float64))
                                                       & np.isnan(expected_values.astype(np.float64))))
    if not differ.any():
        return None
    index = tuple(int(i) for i in np.argwhere(differ)[0])
    return (
        f"your result has the right shape but wrong values (on {on}): {int(differ.sum())} of "
        f"{differ.size} differ; first at index {index}: got {got_values[index].item()!r}, "
        f"expected {expected_values[index].item()!r} (a[{index[0]}] + b[{index[1]}] is exact "
        "up to one rounding, as a + b gives it)."
    )


# (how the case is described, (a, b)): compared exactly, as a + b gives them.
_OUTER_EDGES = [
    *[(f"at the edges of {_dtype_name(dtype)}: subnormals, -0.0, its largest values, large "
       "magnitudes, inf, -inf, nan", _float_edges(dtype))
      for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16)],
    *[(f"at the edges of {_dtype_name(dtype)}: magnitudes past 2**{53 if dtype == torch.int64 else 24}, "
       "sums up to its largest and smallest", _int_edges(dtype))
      for dtype in (torch.int64, torch.int32)],
    ("an int64 a past 2**24 with a float32 b, at float32's edges", _mixed_edges()),
]
# A loop over a or over b makes at least one torch call per element; broadcasting a handful.
_LOOP_N, _LOOP_M, _LOOP_CALLS = 40, 37, 30


def _outer_input(n, dtype, generator):
    values = torch.rand(n, generator=generator) * 20 - 10
    return values.round().to(dtype) if not dtype.is_floating_point else values.to(dtype)


def _probe_outer_sum(answer, run):
    """What the answer gives on each input, and the inputs themselves: never what a right answer
    gives (``_expect_outer_sum`` adds that, on the judge's side)."""
    generator = _generator(7)
    record = {"loops": _loops_in(answer)}
    a, b = _outer_input(_LOOP_N, torch.float32, generator), _outer_input(_LOOP_M, torch.float32, generator)
    counter = TorchCallCounter()
    with counter:
        big = run(answer, a, b, on=f"a of shape ({_LOOP_N},), b of shape ({_LOOP_M},)")
    record["torch_calls"] = counter.count
    record["big"] = {"got": value_facts(big), "given": {"a": given(a), "b": given(b)}}
    record["cases"] = cases = []
    if record["loops"] or counter.count >= _LOOP_CALLS:
        return record  # the loop is recorded; its other inputs (an empty a) would only raise
    inputs = []
    for n, m, dtype in _OUTER_CASES:
        a_dtype, b_dtype = dtype if isinstance(dtype, tuple) else (dtype, dtype)
        a, b = _outer_input(n, a_dtype, generator), _outer_input(m, b_dtype, generator)
        on = (f"a of shape ({n},), b of shape ({m},), {_dtype_name(dtype)}" if a_dtype == b_dtype
              else f"a of shape ({n},), {_dtype_name(a_dtype)}, b of shape ({m},), {_dtype_name(b_dtype)}")
        inputs.append((on, a, b, False))
    for text, (a, b) in _OUTER_EDGES:
        kinds = _dtype_name(a.dtype) if a.dtype == b.dtype else f"{_dtype_name(a.dtype)} and {_dtype_name(b.dtype)}"
        on = f"a of shape ({len(a)},), b of shape ({len(b)},), {kinds}, {text}"
        inputs.append((on, a.clone(), b.clone(), True))
    for on, a, b, exact in inputs:
        n, m, a_dtype, b_dtype = len(a), len(b), a.dtype, b.dtype
        given_a, given_b = a.clone(), b.clone()
        try:
            got = value_facts(run(answer, given_a, given_b, on=on))
        except LearnerRaised as raised:
            # The judge decides: a mistake the earlier inputs already show is the one to report,
            # not an error a later input (an integer a with a float b) led to.
            record["raised"] = later_error(raised, answer)
            break
        cases.append(
            {
                "on": on,
                "n": n,
                "m": m,
                "got": got,
                "given": {"a": given(a), "b": given(b)},
                "mixed": a_dtype != b_dtype,
                "exact": exact,
                "a_after": value_facts(given_a),
                "b_after": value_facts(given_b),
            }
        )
        left = _left_as_it_was(given_a, a) and _left_as_it_was(given_b, b)
        cases[-1]["again"] = (
            value_facts(run(answer, given_a, given_b, on=on + ", second call")) if left else got
        )
    return record


def _expect_outer_sum(record):
    """What the reference gives on the record's inputs, and what the classic mistakes give
    (b and a swapped, the product, the element-wise sum), for the judge."""
    reference = outer_sum.reference
    for part in [record["big"], *record["cases"]]:
        a, b = tensor_of(part["given"]["a"]), tensor_of(part["given"]["b"])
        part["expected"] = value_facts(reference(a, b))
    for case in record["cases"]:
        a, b = tensor_of(case["given"]["a"]), tensor_of(case["given"]["b"])
        case["swapped"] = value_facts(b[:, None] + a[None, :])["values"]
        case["product"] = value_facts(a[:, None] * b[None, :])["values"]
        case["elementwise"] = value_facts(a + b)["values"] if case["n"] == case["m"] else None
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
            changed = _input_changed(case["given"][name], case[f"{name}_after"], name, on)
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
        # a + b is one rounding of each sum, whatever writes it: at the dtype's edges, exactly
        tolerance = {"rtol": 0, "atol": 0} if case.get("exact") else {}
        problem = tensor_problem(got, case["expected"], on=on, **tolerance)
        if problem and case.get("exact") and "wrong values" in problem:
            problem = _exact_problem(got, case["expected"], on) or problem
        if problem:
            return problem
        problem = tensor_problem(case["again"], case["expected"], what="the second result", on=on,
                                 **tolerance)
        if problem:
            return Mistake("wrong-on-second-call", (
                f"Your function was right on its first call, not on a second call with the same a and b: {problem}"
            ))
    problem = tensor_problem(record["big"]["got"], record["big"]["expected"],
                             on=f"a of shape ({_LOOP_N},), b of shape ({_LOOP_M},)")
    if problem is None and record.get("raised"):
        return Raised(record["raised"])
    return problem


outer_sum = Exercise(
    "outer_sum",
    chapter=CHAPTER,
    title="Every pair: out[i, j] = a[i] + b[j]",
    expects=Function("outer_sum", ("a", "b"), returns="an (N, M) tensor with out[i, j] = a[i] + b[j]"),
    probe=_probe_outer_sum,
    expect=_expect_outer_sum,
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
