"""T7 — outer_sum: broadcasting, on purpose.

Engine: applies edges.edge_tensor / edges.edge_values (every edge of each float dtype and of
mixed float pairs, the integer edges whose sums stay inside the dtype) and edges.generated for
every pair of dtypes the task allows at N = 0, 1 and more; hand-written because the task states a
rule (no Python loop, counted from the answer's source and its torch calls), which the quick path
does not check.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Raised, later_error
from course_utils.exercises.edges import Allowed, edge_tensor, edge_values, generated
from course_utils.exercises.facts import given, same_values, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
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

_BROADCAST = "a[:, None] + b[None, :]"

MESSAGES = Messages("outer_sum", {
    "python-loop": (
        "The task asks for no Python loop; {found} Let broadcasting make every pair{how}: a[:, None] + b[None, :]."),
    "loop-in-source": "your function has one: `{loop}`.",
    "loop-by-calls": (
        "for a of {n} and b of {m} elements your function made {calls} torch calls, one or more per element."),
    "in-one-operation": " in one operation",
    "elementwise-not-outer": Message(
        "Your result has shape ({n},); expected ({n}, {m}) ({on}): it holds a[i] + b[i]. Two (N,) tensors "
        "meet element by element: a + b pairs a[i] with b[i] only. Give a a second dimension, a[:, None], "
        "so it broadcasts against b.", advises=("a[:, None]",)),
    "transposed": "Your result {what} ({on}): {how}",
    "transposed-shape": "has shape ({m}, {n}); expected ({n}, {m})",
    "rows-follow-a": "rows should follow a, columns b. Put the new dimension on the other side.",
    "is-transposed": "is transposed",
    "pairs-a-with-b": "out[i, j] should be a[i] + b[j].",
    "product-not-sum": "Your result holds the products a[i] * b[j] ({on}); out[i, j] should be the sum a[i] + b[j].",
    "no-type-promotion": (
        "Your result has dtype {got_dtype}; a + b has {expected_dtype} ({on}). The task asks for the dtype "
        "a + b has: the one type promotion gives when a and b meet in one operation as they are."),
    "exact-values": (
        "your result has the right shape but wrong values (on {on}): {count} of {size} differ; first at "
        "index {index}: got {got!r}, expected {expected!r} (a[{i}] + b[{j}] is exact up to one rounding, "
        "as a + b gives it)."),
    "wrong-on-second-call": (
        "Your function was right on its first call, not on a second call with the same a and b: {problem}"),
    "passed": "Correct: broadcasting (N, 1) against (1, M) made every pair.",
    "hint-1": "Broadcasting aligns shapes from the right; a size-1 dimension stretches.",
    "hint-2": "(N, 1) + (1, M) gives (N, M). a[:, None] or a.unsqueeze(1) makes a (N, 1).",
    "added-without-new-dimension": (
        "a + b on two 1-D tensors pairs a[i] with b[i] only, so their sizes must be equal. For every pair "
        "give a a second dimension: a[:, None] + b[None, :]."),
    "loop-over-empty-a": (
        "with an empty a (N = 0), a list with one entry per element of a (a copy of b for each, as "
        "[b] * len(a) makes, or a row for each) is empty, and torch.stack refuses an empty list. "
        "Broadcasting needs no list: a[:, None] + b[None, :] handles every size, N = 0 too."),
    "meshgrid-of-mixed-dtypes": (
        "torch.meshgrid needs a and b of one dtype, and the check also passes an integer a with a float b. "
        "Broadcasting needs no grid: a[:, None] + b[None, :]."),
    "element-of-empty-a": (
        "an empty a (N = 0) has no element 0 to take, and mapping over a's elements (torch.vmap does, as "
        "does a.select(0, 0)) needs one. Broadcasting handles every N, 0 too: a[:, None] + b[None, :]."),
})


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
    return MESSAGES.text("exact-values", on=on, count=int(differ.sum()), size=differ.size, index=index,
                         got=got_values[index].item(), expected=expected_values[index].item(),
                         i=index[0], j=index[1])


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


def _half_range(dtype) -> Allowed:
    """An integer dtype's edges whose sums stay inside it (a + b of int32 wraps past its extremes,
    and a right answer need not wrap as a + b does)."""
    if dtype.is_floating_point:
        return Allowed()
    info = torch.iinfo(dtype)
    return Allowed(low=math.ceil(info.min / 2), high=info.max // 2)


def _edge_pair(a_dtype, b_dtype):
    """a and b at the edges of their dtypes (edges.edge_values), b's cycled from another start,
    so that each edge of a meets several of b's."""
    a_allowed, b_allowed = _half_range(a_dtype), _half_range(b_dtype)
    n, m = len(edge_values(a_dtype, a_allowed)), len(edge_values(b_dtype, b_allowed))
    return edge_tensor((n,), a_dtype, a_allowed), edge_tensor((m,), b_dtype, b_allowed, shift=3)


# Mixed pairs the task allows ("a and b may have different dtypes"), at their edges, compared
# exactly: each sum is one rounding in the promoted dtype, whatever writes it.
_MIXED_EDGE_PAIRS = [(torch.float64, torch.float32), (torch.float16, torch.bfloat16), (torch.int32, torch.int64),
                     (torch.uint8, torch.int8), (torch.int64, torch.float64)]
_OUTER_EDGES += [
    ("at the edges of both dtypes (±0, subnormals, the largest values, ±inf, nan; integers whose sums "
     "stay inside the dtype)", _edge_pair(a_dtype, b_dtype)) for a_dtype, b_dtype in _MIXED_EDGE_PAIRS]

# Every pair of dtypes, with N of 4, 1 and 0: the result's dtype is a + b's for every N (a single
# a, or an empty one, made another way, must not take another dtype).
_SIZE_PAIRS = [(torch.float64, torch.float32), (torch.float32, torch.float64), (torch.int32, torch.float64),
               (torch.float16, torch.float32), (torch.bfloat16, torch.float16), (torch.uint8, torch.int8),
               (torch.int64, torch.int64)]
_SIZES = ((4, ""), (1, ", a single a (N = 1)"), (0, ", an empty a (N = 0)"))


def _generated_pairs():
    for index, (a_dtype, b_dtype) in enumerate(_SIZE_PAIRS):
        for n, what in _SIZES:
            low = 0 if torch.uint8 in (a_dtype, b_dtype) else -10
            a = generated((n,), a_dtype, seed=100 + index, low=low, high=10)
            b = generated((3,), b_dtype, seed=200 + index, low=low, high=10)
            yield (f"a of shape ({n},), {_dtype_name(a_dtype)}, b of shape (3,), {_dtype_name(b_dtype)}{what}",
                   a, b)
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
    for on, a, b in _generated_pairs():
        inputs.append((on, a, b, True))
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
        return MESSAGES("python-loop", found=MESSAGES.text("loop-in-source", loop=record["loops"][0]), how="")
    if record["torch_calls"] >= _LOOP_CALLS:
        return MESSAGES("python-loop", how=MESSAGES.text("in-one-operation"), found=MESSAGES.text(
            "loop-by-calls", n=_LOOP_N, m=_LOOP_M, calls=record["torch_calls"]))
    for case in cases:
        got, on, n, m = case["got"], case["on"], case["n"], case["m"]
        for name in ("a", "b"):
            changed = _input_changed(case["given"][name], case[f"{name}_after"], name, on)
            if changed:
                return changed
        if got["kind"] == "tensor" and got["shape"] == [n] and n == m and same_values(
            got.get("values", []), case["elementwise"]
        ):
            return MESSAGES("elementwise-not-outer", n=n, m=m, on=on)
        if got["kind"] == "tensor" and got["shape"] == [m, n] and n != m:
            return MESSAGES("transposed", what=MESSAGES.text("transposed-shape", n=n, m=m), on=on,
                            how=MESSAGES.text("rows-follow-a"))
        if got["kind"] == "tensor" and got["shape"] == [n, m] and "values" in got and not same_values(
            got["values"], case["expected"]["values"]
        ):
            if n == m and n > 1 and same_values(got["values"], case["swapped"]):
                return MESSAGES("transposed", what=MESSAGES.text("is-transposed"), on=on,
                                how=MESSAGES.text("pairs-a-with-b"))
            if same_values(got["values"], case["product"]):
                return MESSAGES("product-not-sum", on=on)
        if (case.get("mixed") and got["kind"] == "tensor" and got["shape"] == [n, m]
                and got["dtype"] != case["expected"]["dtype"]):
            return MESSAGES("no-type-promotion", got_dtype=got["dtype"], expected_dtype=case["expected"]["dtype"],
                            on=on)
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
            return MESSAGES("wrong-on-second-call", problem=problem)
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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "added-without-new-dimension": "must match the size of tensor b",
        "loop-over-empty-a": "stack expects a non-empty TensorList",
        "meshgrid-of-mixed-dtypes": "meshgrid expects all tensors to have the same dtype",
        "element-of-empty-a": "select(): index 0 out of range for tensor of size [0]",
    }),
    messages=MESSAGES,
)
