"""T9 — zero_negative_rows: a write through a mask, in place."""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, a_or_an, later_error
from course_utils.exercises.facts import (
    given, same_values, shape_text, tensor_of, tensor_problem, value_facts,
)
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.tensors.zero_rows_source import (_assigned_names, _chained_write, _negates,
                                                             _or_equal_in)
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _calls_in,
    _dtype_name,
    _generator,
    _input_changed,
    _loops_in,
)
from course_utils.exercises.torch_calls import TorchCallCounter


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


def _edge_rows(dtype):
    """Rows at the dtype's edges whose sum has one sign (or is nan) in whatever order, and at
    whatever precision, it is added up: a negative subnormal (its mean rounds to -0.0), rows
    of -0.0 (not below 0), inf with -inf (nan, kept), -inf with the largest value (-inf:
    replacing inf by the largest value makes it finite), sums that overflow to -inf or inf."""
    info = torch.finfo(dtype)
    tiny = float(torch.nextafter(torch.zeros((), dtype=dtype), torch.ones((), dtype=dtype)))
    top = info.max
    return torch.tensor([
        [-tiny, 0.0, 0.0],
        [tiny, -0.0, -tiny],
        [-0.0, -0.0, -0.0],
        [_INF, -_INF, -1.0],
        [-_INF, top, 0.5],
        [-top, -top, top],
        [top, top, -top],
    ], dtype=dtype)


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
    *[(f"x of shape (7, 3), {_dtype_name(dtype)}, at the edges of {_dtype_name(dtype)}: subnormals, "
       "-0.0, inf and -inf, values near its largest (sums that overflow)",
       (lambda dtype: lambda generator: _edge_rows(dtype))(dtype), lambda base: base)
      for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16)],
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


def _called(record, name) -> bool:
    return any(call.removesuffix("()") == name for call in record["calls"])


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
    """What the answer returns and what it leaves in x (and in the tensor x is a view of) on
    each input, and the inputs as they were before the call: never what a right answer gives
    (``_expect_zero_negative_rows`` adds that, on the judge's side)."""
    generator = _generator(11)
    record = {"loops": _loops_in(answer), "calls": _calls_in(answer),
              "assigned": sorted(_assigned_names(answer)), "chained": _chained_write(answer),
              "or_equal_in_source": _or_equal_in(answer), "negates": _negates(answer)}
    big = _random_rows(_ZERO_LOOP_ROWS, 3, torch.float32)(generator)
    counter = TorchCallCounter()
    with counter:
        run(answer, big, on=f"x of shape ({_ZERO_LOOP_ROWS}, 3), float32")
    record["torch_calls"] = counter.count
    record["cases"] = cases = []
    if record["loops"] or counter.count >= _ZERO_LOOP_CALLS:
        return record
    for index, (on, make, view) in enumerate(_ZERO_ROWS_CASES):
        base = make(generator)
        kept = base.clone()
        x = view(base)
        case = {
            "on": on,
            "case": index,
            "rows": int(x.shape[0]),
            "columns": int(x.shape[1]),
            "contiguous": bool(x.is_contiguous()),
            "has_inf": bool(torch.isinf(kept).any()),
            "given": {"base": given(kept)},  # x is a view of it (_ZERO_ROWS_CASES[index])
        }
        storage = base.untyped_storage().data_ptr()
        try:
            returned = run(answer, x, on=on)
        except LearnerRaised as raised:
            # The judge decides: a mistake the earlier inputs already show is the one to report.
            record["raised"] = later_error(raised, answer, cases)
            break
        case["count"] = _count_facts(returned)
        case["returned"] = value_facts(returned) if isinstance(returned, torch.Tensor) else None
        case["x_after"] = value_facts(x)
        case["base_after"] = value_facts(base)
        case["same_memory"] = x.untyped_storage().data_ptr() == storage
        left = {"count": case["count"], "x_after": case["x_after"]}
        if case["same_memory"]:
            # A second call on the x the first call left (a right first call left nothing more
            # to zero). Whether the first call was right is the judge's to say, so the second
            # call is made whatever it left, and an error it raises is recorded for the judge.
            try:
                returned = run(answer, x, on=on + ", second call on the same x")
            except LearnerRaised as raised:
                case["again_raised"] = later_error(raised, answer)
                left = None
            else:
                left = {"count": _count_facts(returned), "x_after": value_facts(x)}
        case["again"] = left
        cases.append(case)
    return record


def _expect_zero_negative_rows(record):
    """What the reference solution does to a copy of each recorded input (x's rows zeroed, in x
    and in the tensor x is a view of, and the count it returns), and what the classic mistakes
    leave in x, for the judge."""
    for case in record["cases"]:
        view = _ZERO_ROWS_CASES[case["case"]][2]
        kept = tensor_of(case["given"]["base"])
        expected_base = kept.clone()
        expected_x = view(expected_base)
        negative = expected_x.sum(dim=1) < 0
        square = expected_x.dim() == 2 and expected_x.shape[0] == expected_x.shape[1]
        case["x_before"] = value_facts(view(kept))
        case["negative_rows"] = [int(i) for i in torch.nonzero(negative).flatten()]
        case["expected_count"] = int(zero_negative_rows.reference(expected_x))
        case["expected_x"] = value_facts(expected_x)
        case["expected_base"] = value_facts(expected_base)
        case["elements"] = _after(kept, view, _zero_rows_where(lambda v: v < 0))
        case["by_columns"] = _after(kept, view, _zero_columns_where(lambda v: v.sum(dim=0) < 0))
        case["row_mask_on_columns"] = _after(kept, view, _zero_columns_where(
            lambda v: v.sum(dim=1) < 0)) if square else None
        case["or_equal"] = _after(kept, view, _zero_rows_where(lambda v: v.sum(dim=1) <= 0))
        case["by_mean"] = _after(kept, view, _zero_rows_where(lambda v: v.mean(dim=1) < 0))
    return record


def _one_mask_for_the_whole_tensor(case, unchanged) -> bool:
    """x left alone when its total is >= 0, or zeroed entirely when it is < 0, and a count of
    0 or 1: what a mask made from x.sum() (one number, no dim) does."""
    before = np.asarray(case["x_before"].get("values", []), dtype=np.float64)
    got = np.asarray(case["x_after"].get("values", []), dtype=np.float64)
    if before.size == 0 or case["count"].get("value") not in (0, 1):
        return False
    with np.errstate(all="ignore"):  # rows at the dtype's edges: inf - inf, sums that overflow
        total = np.nansum(before)
    return bool((unchanged and total >= 0) or (not np.any(got) and total < 0 and case["count"]["value"] == 1))


def _zeroed_nan_sum_rows(case) -> list[int]:
    """Rows whose sum is nan that the answer zeroed (and the task keeps)."""
    before = np.asarray(case["x_before"].get("values", []), dtype=np.float64)
    got = np.asarray(case["x_after"].get("values", []), dtype=np.float64)
    if before.ndim != 2 or got.shape != before.shape:
        return []
    with np.errstate(invalid="ignore", over="ignore"):
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
    # Whether the answer changed some contiguous x in place: where it leaves another contiguous
    # x unchanged, its mask found no row there, and "not in place" would blame the wrong thing.
    wrote_in_place = any(
        c["contiguous"] and c["x_after"]["shape"] == c["x_before"]["shape"] and not same_values(
            c["x_after"].get("values"), c["x_before"]["values"], rtol=0, atol=0)
        for c in cases)
    for case in cases:
        # The first input where a second call raised after a first call that left x right:
        # that error comes first. (Where the first call left x wrong, the mistake found below
        # is the one to report, and the second call's error does not matter.)
        if case.get("again_raised") and tensor_problem(
                case["x_after"], case["expected_x"], rtol=0, atol=0) is None:
            return Raised(case["again_raised"])
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
        if unchanged and rows and not (case["contiguous"] and wrote_in_place):
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
                if record["negates"]:
                    cause = "~(x.sum(dim=1) >= 0) is True for nan; x.sum(dim=1) < 0 is not."
                elif _called(record, "nan_to_num") or _called(record, "clamp") or _called(record, "clip"):
                    name = next(n for n in ("nan_to_num", "clamp", "clip") if _called(record, n))
                    cause = (f"{name} replaces inf and -inf by finite numbers, and the row then "
                             "sums to a number: sum x itself, x.sum(dim=1) < 0, False for nan.")
                else:
                    cause = "Compare x's own row sums with 0: x.sum(dim=1) < 0 is False for nan."
                return Mistake("zeroed-nan-sum-row", (
                    f"Your function zeroed {_rows_text(nan_rows)}, whose sum is nan (it holds inf "
                    f"and -inf) ({on}): nan is not below 0, so the row stays. {cause}"
                ))
            if _called(record, "mean") and same_values(got, case["by_mean"], rtol=0, atol=0):
                return Mistake("mean-rounds-to-zero", (
                    f"Your function left a row whose sum is negative ({on}): its sum is the "
                    "smallest negative number the dtype holds (a subnormal), and the mean divides "
                    "it by the number of columns, which rounds it to -0.0, not below 0. The task "
                    "asks about the sum: x.sum(dim=1) < 0."
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
                if record.get("or_equal_in_source", True):
                    advice = "The task says strictly below 0: < 0, not <= 0."
                else:  # the answer compares strictly: its sums are not x's own
                    advice = ("The task says strictly below 0, and x's own sums, x.sum(dim=1), are "
                              "exactly 0 there: compare those with 0, not sums computed another "
                              "way, which round.")
                return Mistake("less-or-equal", (
                    f"You also zeroed rows whose sum is exactly 0 ({on}). {advice}"
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
        if again is None:  # (its error, after a wrong first call: that mistake came first)
            continue
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
    if record.get("raised"):
        return Raised(record["raised"])
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
    expect=_expect_zero_negative_rows,
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
