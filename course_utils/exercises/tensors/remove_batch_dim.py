"""T6 — remove_batch_dim: squeeze only drops size-1 dimensions."""

from __future__ import annotations

import torch

from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import given, shape_text, tensor_of, tensor_problem, value_facts
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _calls_in,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
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
    """What the answer gives on each input, and the inputs themselves: never what a right answer
    gives (``_expect_remove_batch_dim`` adds that, on the judge's side)."""
    generator = _generator(6)
    cases = []
    for shape, dtype, permuted in _BATCH_CASES:
        x = _batch_input(shape, dtype, permuted, generator)
        on = f"x of shape {shape_text(list(shape))}, {_dtype_name(dtype)}"
        if permuted:
            on += ", a permuted (non-contiguous) view"
        before = given(x)
        given_x = x if permuted else x.clone()
        kept = x.clone()
        got = value_facts(run(answer, given_x, on=on))
        after = value_facts(given_x)
        again = value_facts(run(answer, given_x, on=on + ", second call")) if _left_as_it_was(given_x, kept) else got
        cases.append(
            {
                "on": on,
                "got": got,
                "again": again,
                "given": {"x": before},
                "x_after": after,
            }
        )
    return {"cases": cases, "calls": _calls_in(answer)}


def _expect_remove_batch_dim(record):
    """What the reference solution gives on each recorded x, and the shape squeeze() (every
    size-1 dimension dropped, the classic mistake) gives, for the judge."""
    for case in record["cases"]:
        x = tensor_of(case["given"]["x"])
        case["expected"] = value_facts(remove_batch_dim.reference(x))
        case["squeezed_all"] = list(x.squeeze().shape)
    return record


def _judge_remove_batch_dim(record):
    cases, calls = record["cases"], record["calls"]
    for case in cases:
        got, on = case["got"], case["on"]
        changed = _input_changed(case["given"]["x"], case["x_after"], "x", on)
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
            if got["shape"] == case["given"]["x"]["shape"]:
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
    expect=_expect_remove_batch_dim,
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
