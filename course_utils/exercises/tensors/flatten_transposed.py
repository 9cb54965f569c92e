"""T5 — flatten_transposed: transposes are views with other strides."""

from __future__ import annotations

import ast

import torch

from course_utils.exercises.answer_source import answer_nodes as _answer_nodes
from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.facts import (
    given, same_values, shape_text, tensor_of, tensor_problem, value_facts,
)
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _calls_in,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
)


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
    """What the answer gives on each input, and the inputs themselves: never what a right answer
    gives (``_expect_flatten_transposed`` adds that, on the judge's side)."""
    generator = _generator(5)
    cases = []
    record = {"cases": cases, "calls": _calls_in(answer),
              "reshapes_to_two_sizes": _reshapes_to_two_sizes(answer)}
    for shape, dtype, layout in _FLATTEN_CASES:
        x = _flatten_input(shape, dtype, layout, generator)
        on = f"x of shape {shape_text(list(shape))}, {_dtype_name(dtype)}"
        if layout != "contiguous":
            on += f", {layout} (not contiguous)"
        before = given(x)
        given_x = x.clone() if layout == "contiguous" else x  # (the layout is the point)
        kept = x.clone()
        try:
            got = value_facts(run(answer, given_x, on=on))
        except LearnerRaised as raised:
            # The judge decides: what the earlier inputs show already (a NumPy array returned)
            # is the mistake to name, before an error that only a later one (bfloat16) raises.
            record["raised"] = later_error(raised, answer, cases)
            break
        x_after = value_facts(given_x)
        again = value_facts(run(answer, given_x, on=on + ", second call")) if _left_as_it_was(given_x, kept) else got
        cases.append(
            {
                "on": on,
                "layout": layout,
                "got": got,
                "again": again,
                "given": {"x": before},
                "x_after": x_after,
            }
        )
    return record


def _expect_flatten_transposed(record):
    """What the reference solution gives on each recorded x, and what x flattened without the
    transpose (the classic mistake) gives, for the judge."""
    for case in record["cases"]:
        x = tensor_of(case["given"]["x"])
        case["expected"] = value_facts(flatten_transposed.reference(x))
        case["untransposed"] = value_facts(x.reshape(-1))["values"]
    return record


def _judge_flatten_transposed(record):
    cases = record["cases"]
    for case in cases:
        got, on = case["got"], case["on"]
        changed = _input_changed(case["given"]["x"], case["x_after"], "x", on)
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
    if record.get("raised"):
        return Raised(record["raised"])
    return None


flatten_transposed = Exercise(
    "flatten_transposed",
    chapter=CHAPTER,
    title="Flatten a transposed matrix",
    expects=Function("flatten_transposed", ("x",),
                     returns="a 1-D tensor: x's transpose, flattened, with x's dtype"),
    probe=_probe_flatten_transposed,
    expect=_expect_flatten_transposed,
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
