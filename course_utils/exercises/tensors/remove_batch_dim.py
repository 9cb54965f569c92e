"""T6 — remove_batch_dim: squeeze only drops size-1 dimensions.

Engine: applies edges.edge_tensor (the edges of float32, float64, float16 and int64: ±0,
subnormals, the largest values, ±inf, nan, the integers float32 cannot hold), in a contiguous and
a permuted layout, and a 1-D x of another dtype; hand-written because its named mistakes compare
the result's shape with what squeeze() gives and read the answer's own calls.
"""

from __future__ import annotations

import ast

import torch

from course_utils.exercises.answer_source import answer_nodes as _answer_nodes

from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.edges import edge_tensor
from course_utils.exercises.facts import given, shape_text, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _calls_in,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
)


MESSAGES = Messages("remove_batch_dim", {
    "squeeze-all": Message(
        "Your result has shape {shape}; expected {expected} ({on}): every size-1 dimension is gone, not "
        "only the batch one.{note} Remove only dimension 0: x.squeeze(0) or x[0].",
        advises=("x.squeeze(0)",)),
    "squeeze-all-note": " squeeze() with no argument drops them all.",
    "drops-other-dims-too": (
        "Your result has shape {shape}; expected {expected} ({on}): every size-1 dimension is gone, not "
        "only the batch one, though your function removes dimension 0 alone elsewhere. Look for the "
        "call or the branch that gives this shape: only dimension 0 may go, for every x."),
    "batch-dim-kept": (
        "Your result still has shape {shape} ({on}): the batch dimension, dimension 0, is still "
        "there.{note}"),
    "squeezed-other-dim": (
        "Your result still has shape {shape} ({on}): the batch dimension, dimension 0, is still "
        "there.{note}"),
    "squeezed-other-dim-note": " squeeze(d) silently does nothing when dimension d is not of size 1.",
    "wrong-on-second-call": (
        "Your function was right on its first call, not on a second call with the same x: {problem}"),
    "passed": "Correct: only dimension 0 is gone, other size-1 dimensions are kept.",
    "hint-1": "The check also uses shapes like (1, 1, 5): only the first 1 is the batch.",
    "hint-2": "squeeze() drops every dimension of size 1; squeeze(0) only the first (x[0] works too).",
    "reshape-of-unpacked-empty-shape": Message(
        "for x of shape (1,) the rest is (), so reshape(*x.shape[1:]) passes no size at all. Pass the "
        "shape as one tuple, x.reshape(x.shape[1:]), or use x.squeeze(0) or x[0].",
        advises=("x.reshape(x.shape[1:])",)),
    "view-of-unpacked-empty-shape": Message(
        "for x of shape (1,) the rest is (), so view(*x.shape[1:]) passes no size at all. Pass the "
        "shape as one tuple, x.view(x.shape[1:]), or use x.squeeze(0) or x[0].",
        advises=("x.view(x.shape[1:])",)),
    "view-flattens-everything": (
        "view() cannot reorder memory, and this x is a permuted (non-contiguous) view. Do not follow "
        "torch's advice to the letter here: reshape(-1) runs, but it flattens every dimension into one, "
        "and removing the batch dimension must keep the others. x.squeeze(0) (or x[0]) removes only "
        "that one, as a view, for any layout."),
    "mean-of-integers": (
        "mean() computes an average, which needs a floating dtype; an integer x has none. Dropping a "
        "dimension needs no arithmetic: x.squeeze(0) or x[0]."),
    "iteration-over-0-d": (
        "for x of shape (1,) the rest is (): what is left without the batch dimension is 0-d, a single "
        "number, with nothing to go through. "
        "x.squeeze(0) (or x[0]) removes the batch dimension of any x in one call."),
})


def _removes_dim_0_alone(answer) -> bool:
    """Whether the answer's own source removes dimension 0 alone somewhere (squeeze(0),
    squeeze(dim=0)): then a result with every size-1 dimension gone comes from another call."""
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
                    and inner.func.attr in ("squeeze", "squeeze_"):
                given = list(inner.args) + [k.value for k in inner.keywords if k.arg == "dim"]
                if any(isinstance(arg, ast.Constant) and arg.value == 0 for arg in given):
                    return True
    return False


# ============================================================================================
# T6 — squeeze only drops size-1 dimensions
# ============================================================================================
def remove_batch_dim(x):
    return x.squeeze(0)


# (shape, dtype, permuted, values): "permuted" gives x as a non-contiguous view; "edges" fills
# x with the classic edges of its dtype (edges.edge_tensor): the task allows several dtypes and
# any values, so a detour through another dtype (float32 for an int64 x, a Python number) or a
# cleaning of nan and inf shows there.
_BATCH_CASES = [
    ((1, 5), torch.float32, False, "random"),
    ((1, 3, 4), torch.float32, True, "random"),
    ((1, 1, 5), torch.int64, False, "random"),
    ((1, 2, 1), torch.float64, False, "random"),
    ((1, 1), torch.bool, False, "random"),
    ((1,), torch.float32, False, "random"),
    ((1, 0, 3), torch.float32, False, "random"),
    ((1, 4), torch.int8, False, "random"),
    ((1,), torch.int32, False, "random"),
    ((1, 2, 9), torch.float32, False, "edges"),
    ((1, 3, 6), torch.float64, True, "edges"),
    ((1, 11, 1), torch.int64, False, "edges"),
    ((1, 9, 2), torch.float16, False, "edges"),
]
# (The edges fill a rest of two dimensions: edges.edge_tensor makes its values as one row first,
# which for a 1-D rest would be the right answer, computed where the learner's code runs.)


def _batch_input(shape, dtype, permuted, values, generator):
    if values == "edges":
        if permuted:
            return edge_tensor((shape[0], shape[2], shape[1]), dtype).transpose(1, 2)
        return edge_tensor(shape, dtype)
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
    for shape, dtype, permuted, values in _BATCH_CASES:
        x = _batch_input(shape, dtype, permuted, values, generator)
        on = f"x of shape {shape_text(list(shape))}, {_dtype_name(dtype)}"
        if permuted:
            on += ", a permuted (non-contiguous) view"
        if values == "edges":
            on += f", at the edges of {_dtype_name(dtype)}"
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
    return {"cases": cases, "calls": _calls_in(answer), "removes_dim_0_alone": _removes_dim_0_alone(answer)}


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
                if record.get("removes_dim_0_alone") and "squeeze()" not in calls:
                    return MESSAGES("drops-other-dims-too", shape=shape_text(got["shape"]), on=on,
                                    expected=shape_text(case["expected"]["shape"]))
                note = MESSAGES.text("squeeze-all-note") if "squeeze()" in calls else ""
                return MESSAGES("squeeze-all", shape=shape_text(got["shape"]), on=on, note=note,
                                expected=shape_text(case["expected"]["shape"]))
            if got["shape"] == case["given"]["x"]["shape"]:
                mistake, note = "batch-dim-kept", ""
                if "squeeze" in calls:
                    mistake, note = "squeezed-other-dim", MESSAGES.text("squeezed-other-dim-note")
                return MESSAGES(mistake, shape=shape_text(got["shape"]), on=on, note=note)
        problem = tensor_problem(got, case["expected"], on=on)
        if problem:
            return problem
        problem = tensor_problem(case["again"], case["expected"], what="the second result", on=on)
        if problem:
            return MESSAGES("wrong-on-second-call", problem=problem)
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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "reshape-of-unpacked-empty-shape": 'reshape() missing 1 required positional arguments: "shape"',
        "view-of-unpacked-empty-shape": "view() received an invalid combination of arguments - got ()",
        "view-flattens-everything": "view size is not compatible with input tensor's size and stride",
        "mean-of-integers": "could not infer output dtype",
        "iteration-over-0-d": "iteration over a 0-d tensor",
    }),
    messages=MESSAGES,
)
