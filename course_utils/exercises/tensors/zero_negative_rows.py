"""T9 — zero_negative_rows: a write through a mask, in place.

Engine: applies edges.edge_tensor / edges.edge_values (every edge of each float dtype the task
allows, nan left out as the task allows inf only, three to a row, the rows whose sum has one
sign in every order of adding it up); hand-written because the task asks for a change in place
(x and every view of its memory, watched through the tensor x is a view of), states a rule (no
Python loop) and returns a count whose Python type the task names, none of which the quick path
records.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Raised, a_or_an, later_error
from course_utils.exercises.facts import given, same_values, shape_text, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.tensors.zero_rows_cases import _ZERO_ROWS_CASES, _count_facts, _random_rows
from course_utils.exercises.tensors.zero_rows_source import (_assigned_names, _chained_write, _negates,
                                                             _or_equal_in)
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _calls_in,
    _generator,
    _input_changed,
    _loops_in,
)
from course_utils.exercises.torch_calls import TorchCallCounter

_SUMS = "x.sum(dim=1)"
_COUNT = "int(negative.sum())"
_RETURNED = "Your function returned {got}; {expected} rows were to be zeroed ({on})."
_SECOND = ("On a second call with the same x ({on}), whose negative rows were already zeros, your function "
           "returned {got}; expected 0.")

MESSAGES = Messages("zero_negative_rows", {
    "python-loop": (
        "The task asks for no Python loop; {found} One mask marks every row at once: negative = "
        "x.sum(dim=1) < 0, then x[negative] = 0."),
    "loop-in-source": "your function has one: `{loop}`.",
    "loop-by-calls": "for x of {rows} rows your function made {calls} torch calls, one or more per row.",
    "changed-x-shape-or-dtype": (
        "{changed} Here the task does ask for a change in place, but only of the numbers: x[negative] = 0."),
    "whole-tensor-sum": (
        "Your function zeroed {what} of x ({on}) and counted {count}: its mask holds one True or False for "
        "the whole tensor, not one per row. x.sum() adds every element of x; sum each row with "
        "x.sum(dim=1), then x[negative] = 0."),
    "zeroed-nothing": "nothing",
    "zeroed-every-row": "every row",
    "one-row": "row {row}",
    "some-rows": "rows {rows}",
    "chained-index-write": (
        "The caller's x is unchanged ({on}): {rows} should be zeros afterwards. Your write `{write} = ...` "
        "indexes twice: the first indexing, with a mask, makes a copy, and the second writes into that copy, "
        "which is thrown away. Write with one indexing: x[negative] = 0."),
    "returned-copy-not-in-place": (
        "Your function returned a new tensor with the rows zeroed, but the caller's x is unchanged ({on}). "
        "The task asks for x itself to change, in place (x[negative] = 0), and for the number of rows "
        "zeroed as the result."),
    "wrote-into-copy": (
        "The caller's x is unchanged ({on}), though your function works for every contiguous x: it wrote "
        "into a copy. contiguous() (and reshape, flatten) of a non-contiguous tensor is a copy; index x "
        "itself: x[negative] = 0."),
    "wrote-into-converted-copy": (
        "The caller's x is unchanged ({on}), though your function changes a {other} x in place: for this "
        "{dtype} x it wrote into a copy. x.to(...) (and .float(), .double()) of an x of another dtype is a "
        "copy; index x itself: x[negative] = 0."),
    "rebinds-name": (
        "The caller's x is unchanged ({on}): {rows} should be zeros afterwards. Assigning a new tensor to "
        "the name x (x = ...) inside your function does not change the caller's tensor; write into it: "
        "x[negative] = 0."),
    "not-in-place": (
        "The caller's x is unchanged ({on}): {rows} should be zeros afterwards. Change x in place, with "
        "one indexing: x[negative] = 0."),
    "multiplied-by-mask": (
        "Your x holds nan afterwards ({on}): a row with -inf was multiplied by 0, and inf * 0 is nan. "
        "Assign the zeros instead of multiplying: x[negative] = 0."),
    "zeroed-nan-sum-row": (
        "Your function zeroed {rows}, whose sum is nan (it holds inf and -inf) ({on}): nan is not below 0, "
        "so the row stays. {cause}"),
    "cause-negated": "~(x.sum(dim=1) >= 0) is True for nan; x.sum(dim=1) < 0 is not.",
    "cause-made-finite": (
        "{name} replaces inf and -inf by finite numbers, and the row then sums to a number: sum x itself, "
        "x.sum(dim=1) < 0, False for nan."),
    "cause-signbit": (
        "signbit reads the sign bit, which a nan from inf + -inf has set (as -0.0 has): compare the sums "
        "with 0, x.sum(dim=1) < 0, False for both."),
    "cause-compare": "Compare x's own row sums with 0: x.sum(dim=1) < 0 is False for nan.",
    "mean-rounds-to-zero": Message(
        "Your function left a row whose sum is negative ({on}): its sum is the smallest negative number the "
        "dtype holds (a subnormal), and the mean divides it by the number of columns, which rounds it to "
        "-0.0, not below 0. The task asks about the sum: x.sum(dim=1) < 0.", advises=(_SUMS,)),
    "zeroed-elements": Message(
        "You zeroed the negative elements, not the rows whose sum is negative ({on}). The mask needs one "
        "value per row: x.sum(dim=1) < 0.", advises=(_SUMS,)),
    "summed-columns": Message(
        "You zeroed the columns whose sum is negative ({on}): sum(dim=0) adds down each column. The rows' "
        "sums are sum(dim=1).", advises=(_SUMS,)),
    "row-mask-on-columns": (
        "Your row mask zeroed columns ({on}): a mask of shape (N,) meeting x of shape (N, N) in an "
        "element-wise operation (torch.where, a product) lines up with the last dimension, the columns. "
        "Give it a column dimension, negative[:, None], or index with it: x[negative] = 0."),
    "less-or-equal": "You also zeroed rows whose sum is exactly 0 ({on}). {advice}",
    "strictly-below": "The task says strictly below 0: < 0, not <= 0.",
    "own-sums": (
        "The task says strictly below 0, and x's own sums, x.sum(dim=1), are exactly 0 there: compare "
        "those with 0, not sums computed another way, which round."),
    "replaced-data": (
        "x shows the zeros but the memory it was a view of does not ({on}): your function gave x new memory "
        "(x.data = ..., or x.set_(...)), so every other view of the caller's tensor misses the change. "
        "Write into x's own memory: x[negative] = 0."),
    "changed-x-again": (
        "A second call on the same x changed it again ({on}, second call): its negative rows were already "
        "zeros, so nothing was left to change. {problem}"),
    "remembers-earlier-call": _SECOND + (
        " It is the first call's count: your function remembers rows of an earlier call. Count the rows "
        "this call zeroed."),
    "wrong-count-on-second-call": _SECOND + " Count only the rows this call zeroed.",
    "returned-x": Message(
        "Your function returned a tensor shaped like x ({on}); it should return the number of rows it "
        "zeroed, here {expected}, as an int: int(negative.sum()).", advises=(_COUNT,)),
    "count-not-int": Message(
        "Your function returned {count} ({on}); expected the number of rows zeroed, {expected}, as an int "
        "(int(negative.sum())) or a 0-d integer tensor.", advises=(_COUNT,)),
    "count-tensor": "a {dtype} tensor of shape {shape}",
    "count-tensor-holding": "a {dtype} tensor of shape {shape} holding {number}",
    "count-object": "{what} ({repr})",
    "counted-after-zeroing": _RETURNED + (
        " Counting after the zeroing finds none: the zeroed rows now sum to 0. Keep the mask you made "
        "before the write and count it."),
    "counted-elements": Message(_RETURNED + " That is the number of elements zeroed; count the rows: "
                                "negative.sum().", advises=("negative.sum()",)),
    "counted-zero-rows": _RETURNED + (
        " That is the number of rows of zeros afterwards, with those that were zeros before (and every row "
        "of an x without columns); count the mask made before the write."),
    "counted-kept-rows": _RETURNED + " That is the number of rows kept; count the rows zeroed.",
    "wrong-count": _RETURNED,
    "passed": "Correct: the rows are zeroed in the caller's x, and counted.",
    "hint-1": "One value per row: negative = x.sum(dim=1) < 0 is a mask of shape (N,).",
    "hint-2": ("Write through the mask in one indexing operation: x[negative] = 0. x[negative][...] = 0 "
               "writes into a copy."),
    "hint-3": "Count the mask, made before the write: int(negative.sum()).",
    "mask-of-other-shape": (
        "a boolean mask must have the shape of the dimensions it indexes. x.sum(dim=1) < 0 is (N,), one "
        "value per row, and x[mask] picks rows; with keepdim=True it is (N, 1), which does not fit x's "
        "(N, M)."),
    "row-mask-against-columns": (
        "a row mask of shape (N,) meeting x of shape (N, M) in an element-wise operation lines up with the "
        "columns. Give it a column dimension, mask[:, None], or index with it: x[mask] = 0."),
    "view-of-non-contiguous": (
        "x may be a non-contiguous view, which view() cannot reshape. Index x itself: x[mask] = 0."),
})


# ============================================================================================
# T9 — a write through a mask, in place
# ============================================================================================
def zero_negative_rows(x):
    negative = x.sum(dim=1) < 0
    x[negative] = 0
    return int(negative.sum())


_ZERO_LOOP_ROWS, _ZERO_LOOP_CALLS = 60, 30


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
    return MESSAGES.text("one-row", row=rows[0]) if len(rows) == 1 else MESSAGES.text(
        "some-rows", rows=", ".join(map(str, rows)))


def _dtype_of(facts) -> str:
    return facts["dtype"].removeprefix("torch.")


def _zero_rows_after(case) -> int:
    """How many rows of x are all zeros once the right rows are zeroed (every row of an x
    without columns)."""
    values = np.asarray(case["expected_x"].get("values", []), dtype=np.float64)
    return int(np.all(values == 0, axis=1).sum()) if values.ndim == 2 else -1


def _count_text(count) -> str:
    """What the answer returned as its count, in words (``_count_facts`` recorded it as data)."""
    if count["kind"] in ("tensor", "other tensor"):
        shape = shape_text(count["shape"])
        if "number" in count:
            return MESSAGES.text("count-tensor-holding", dtype=count["dtype"], shape=shape, number=count["number"])
        return MESSAGES.text("count-tensor", dtype=count["dtype"], shape=shape)
    if count["kind"] in ("int", "bool"):
        return count["repr"]
    return MESSAGES.text("count-object", what=a_or_an(count["kind"]), repr=count["repr"])


def _judge_zero_negative_rows(record):
    if record["loops"]:
        return MESSAGES("python-loop", found=MESSAGES.text("loop-in-source", loop=record["loops"][0]))
    if record["torch_calls"] >= _ZERO_LOOP_CALLS:
        return MESSAGES("python-loop", found=MESSAGES.text("loop-by-calls", rows=_ZERO_LOOP_ROWS,
                                                           calls=record["torch_calls"]))
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
            return MESSAGES("changed-x-shape-or-dtype", changed=_input_changed(case["x_before"], after, "x", on))
        got = after.get("values")
        unchanged = same_values(got, case["x_before"]["values"], rtol=0, atol=0)
        if rows and case["count"].get("value") != len(rows) and _one_mask_for_the_whole_tensor(case, unchanged):
            what = MESSAGES.text("zeroed-nothing" if unchanged else "zeroed-every-row")
            return MESSAGES("whole-tensor-sum", what=what,
                            on=on, count=_count_text(case["count"]))
        if unchanged and rows and not (case["contiguous"] and wrote_in_place):
            returned = case["returned"]
            if record["chained"]:
                return MESSAGES("chained-index-write", on=on, rows=_rows_text(rows), write=record["chained"])
            if returned is not None and same_values(returned.get("values", []), expected["values"]):
                return MESSAGES("returned-copy-not-in-place", on=on)
            contiguous_right = all(
                same_values(c["x_after"].get("values"), c["expected_x"]["values"], rtol=0, atol=0)
                for c in cases if c["contiguous"])
            if not case["contiguous"] and contiguous_right:
                return MESSAGES("wrote-into-copy", on=on)
            if "x" in record["assigned"]:
                return MESSAGES("rebinds-name", on=on, rows=_rows_text(rows))
            return MESSAGES("not-in-place", on=on, rows=_rows_text(rows))
        same_dtype_changed = any(
            c["x_before"]["dtype"] == after["dtype"] and not same_values(
                c["x_after"].get("values"), c["x_before"]["values"], rtol=0, atol=0) for c in cases)
        if unchanged and rows and not same_dtype_changed:
            # no x of this dtype changed, where other dtypes were changed right: a copy in another dtype
            other = next((c for c in cases if c["x_before"]["dtype"] != after["dtype"] and c["negative_rows"]
                          and same_values(c["x_after"].get("values"), c["expected_x"]["values"], rtol=0, atol=0)),
                         None)
            if other is not None:
                return MESSAGES("wrote-into-converted-copy", on=on, dtype=_dtype_of(after),
                                other=_dtype_of(other["x_before"]))
        if not same_values(got, expected["values"], rtol=0, atol=0):
            if case["has_inf"] and np.isnan(np.asarray(got, dtype=np.float64)).any() and not np.isnan(
                    np.asarray(expected["values"], dtype=np.float64)).any():
                return MESSAGES("multiplied-by-mask", on=on)
            nan_rows = _zeroed_nan_sum_rows(case)
            if nan_rows:
                if record["negates"]:
                    cause = MESSAGES.text("cause-negated")
                elif _called(record, "nan_to_num") or _called(record, "clamp") or _called(record, "clip"):
                    name = next(n for n in ("nan_to_num", "clamp", "clip") if _called(record, n))
                    cause = MESSAGES.text("cause-made-finite", name=name)
                elif _called(record, "signbit"):
                    cause = MESSAGES.text("cause-signbit")
                else:
                    cause = MESSAGES.text("cause-compare")
                return MESSAGES("zeroed-nan-sum-row", rows=_rows_text(nan_rows), on=on, cause=cause)
            if _called(record, "mean") and same_values(got, case["by_mean"], rtol=0, atol=0):
                return MESSAGES("mean-rounds-to-zero", on=on)
            if same_values(got, case["elements"], rtol=0, atol=0):
                return MESSAGES("zeroed-elements", on=on)
            if same_values(got, case["by_columns"], rtol=0, atol=0):
                return MESSAGES("summed-columns", on=on)
            if case["row_mask_on_columns"] is not None and same_values(
                    got, case["row_mask_on_columns"], rtol=0, atol=0):
                return MESSAGES("row-mask-on-columns", on=on)
            if same_values(got, case["or_equal"], rtol=0, atol=0):
                # where the answer compares strictly, its sums are not x's own
                advice = "strictly-below" if record.get("or_equal_in_source", True) else "own-sums"
                return MESSAGES("less-or-equal", on=on, advice=MESSAGES.text(advice))
            return tensor_problem(after, expected, what="the caller's x after your call", on=on,
                                  rtol=0, atol=0)
        if not same_values(case["base_after"]["values"], case["expected_base"]["values"], rtol=0, atol=0):
            return MESSAGES("replaced-data", on=on)
        problem = _count_problem(case["count"], case, on, cases)
        if problem:
            return problem
    for case in cases:
        on, again = case["on"], case["again"]
        if again is None:  # (its error, after a wrong first call: that mistake came first)
            continue
        if not same_values(again["x_after"].get("values"), case["expected_x"]["values"], rtol=0, atol=0):
            return MESSAGES("changed-x-again", on=on, problem=tensor_problem(
                again["x_after"], case["expected_x"], what="x", rtol=0, atol=0) or "")
        count = again["count"]
        if count["kind"] in ("int", "tensor") and count["value"] != 0:
            first = case["expected_count"]
            mistake = "remembers-earlier-call" if count["value"] == first else "wrong-count-on-second-call"
            return MESSAGES(mistake, on=on, got=count["value"])
    if record.get("raised"):
        return Raised(record["raised"])
    return None


def _count_problem(count, case, on, cases) -> str | None:
    expected = case["expected_count"]
    if count["kind"] not in ("int", "tensor"):
        if count["kind"] == "other tensor" and case["returned"] is not None and (
                case["returned"]["shape"] == case["x_before"]["shape"]):
            return MESSAGES("returned-x", on=on, expected=expected)
        return MESSAGES("count-not-int", count=_count_text(count), on=on, expected=expected)
    got = count["value"]
    if got == expected:
        return None
    rows, columns = case["rows"], case["columns"]
    if expected and got == 0:
        mistake = "counted-after-zeroing"
    elif expected and got == expected * columns and columns > 1:
        mistake = "counted-elements"
    elif got == _zero_rows_after(case) and all(
            c["count"].get("value") == _zero_rows_after(c) for c in cases if c["count"]["kind"] in ("int", "tensor")):
        mistake = "counted-zero-rows"
    elif got == rows - expected:
        mistake = "counted-kept-rows"
    else:
        mistake = "wrong-count"
    return MESSAGES(mistake, got=got, expected=expected, on=on)


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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "mask-of-other-shape": "The shape of the mask",
        "row-mask-against-columns": "must match the size of tensor",
        "view-of-non-contiguous": "view size is not compatible",
    }),
    messages=MESSAGES,
)
