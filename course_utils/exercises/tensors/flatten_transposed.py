"""T5 — flatten_transposed: transposes are views with other strides.

Engine: applies edges.edge_tensor (the edges of float32, float64, float16 and int64: ±0,
subnormals, the largest values, ±inf, nan, the integers float32 and float64 cannot hold), in a
contiguous and a transposed layout, and a bool x and an empty x of another dtype; hand-written
because its named mistakes read the answer's own source (a reshape to (columns, rows)) and
compare with what x flattened without the transpose gives.
"""

from __future__ import annotations

import ast

import torch

from course_utils.exercises.answer_source import answer_nodes as _answer_nodes
from course_utils.exercises.core import Exercise, Function, Raised, later_error
from course_utils.exercises.edges import edge_tensor
from course_utils.exercises.facts import (
    given, same_values, shape_text, tensor_of, tensor_problem, value_facts,
)
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _calls_in,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
)


MESSAGES = Messages("flatten_transposed", {
    "not-transposed": Message(
        "These are x's values in x's own order ({on}): transpose first (x.T), then flatten.{note}",
        advises=("x.T.reshape(-1)",)),
    "reshape-not-transpose": Message(
        "These are x's values in x's own order ({on}): transpose first (x.T), then flatten.{note}",
        advises=("x.T.reshape(-1)",)),
    "reshape-note": " (Reshaping x to (columns, rows) is not a transpose: it keeps x's order.)",
    "transposes-only-some": (
        "These are x's values in x's own order ({on}), though your function transposes somewhere: a "
        "branch that skips the transpose, or a second one that undoes it? Transpose every x once, "
        "whatever its shape or layout, then flatten."),
    "transposes-after-flattening": Message(
        "These are x's values in x's own order ({on}): your function flattens x first and "
        "transposes the flattened result, but a 1-D tensor has only one dimension, so .T (or "
        "t(), transpose, permute) leaves it as it is. Transpose first, then flatten: "
        "x.T.reshape(-1).", advises=("x.T.reshape(-1)",)),
    "not-flattened": (
        "Your result has shape {shape} ({on}); expected one dimension, {expected}. Flatten after "
        "transposing."),
    "assumes-contiguous": (
        "Your function is right for every contiguous x, wrong for this one ({on}): {problem} Work with "
        "x's dimensions (x.T, transpose, permute), not with assumed strides or memory order."),
    "wrong-on-second-call": (
        "Your function was right on its first call, not on a second call with the same x ({on}): "
        "{problem}"),
    "passed": "Correct: transposed, then flattened in the transposed order.",
    "hint-1": "x.T swaps the two dimensions without moving any data: it is a view with other strides.",
    "hint-2": "view() needs memory laid out in the order it reads; after a transpose it is not.",
    "hint-3": "x.T.reshape(-1), x.T.flatten() and x.T.contiguous().view(-1) all work.",
    "numpy-has-no-bfloat16": (
        "NumPy has no bfloat16, so a tensor of that dtype cannot go through .numpy(). Stay in torch, "
        "which works for every dtype: x.T.reshape(-1)."),
    "view-of-transpose": (
        "view() cannot reorder memory, and a transposed tensor is not contiguous. Use .reshape(-1), or "
        ".contiguous().view(-1)."),
    "cat-of-no-columns": (
        "an x with no columns (shape (n, 0)) gives an empty list of columns, and torch.cat refuses an "
        "empty list. x.T.reshape(-1) handles every shape, empty ones too."),
})


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


_TRANSPOSING = {"T", "mT", "transpose", "permute", "t", "movedim", "swapaxes", "swapdims"}


_FLATTENING = {"reshape", "view", "flatten", "ravel"}


def _one_size(args) -> bool:
    """Whether reshape/view arguments name one size (-1, x.numel(), (n,)): a 1-D result."""
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    if len(args) != 1:
        return False
    arg = args[0]
    return (isinstance(arg, (ast.UnaryOp, ast.Constant, ast.BinOp))
            or (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
                and arg.func.attr in ("numel", "nelement")))


def _flattens(node, flat_names) -> bool:
    """Whether ``node`` is a flattening call (x.reshape(-1), x.flatten(), torch.ravel(x), ...),
    possibly followed by more calls (.contiguous(), .clone()), or a name bound to one."""
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _FLATTENING and (
                    func.attr in ("flatten", "ravel") or _one_size(node.args)):
                return True
            node = func.value if isinstance(func, ast.Attribute) else func
            continue
        node = node.value
    return isinstance(node, ast.Name) and node.id in flat_names


def _transposes_after_flattening(answer) -> bool:
    """Whether the answer's own source transposes the result of a flattening (x.reshape(-1).T,
    or ``flat = x.flatten()`` then ``flat.T``): a transpose of a 1-D tensor, which does nothing."""
    nodes = list(_answer_nodes(answer))
    flat_names = set()
    for node in nodes:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Assign) and _flattens(inner.value, flat_names):
                flat_names.update(t.id for t in inner.targets if isinstance(t, ast.Name))
    for node in nodes:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute) and inner.attr in _TRANSPOSING and _flattens(
                    inner.value, flat_names):
                return True
            if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                    and isinstance(inner.func.value, ast.Name) and inner.func.value.id == "torch"
                    and inner.func.attr in _TRANSPOSING - {"T", "mT"} and inner.args
                    and _flattens(inner.args[0], flat_names)):
                return True
    return False


def _transposes_somewhere(answer) -> bool:
    """Whether the answer's own source transposes x somewhere (x.T, transpose, permute, ...):
    then values in x's own order come from a branch that skips it."""
    return any(isinstance(inner, ast.Attribute) and inner.attr in _TRANSPOSING
               for node in _answer_nodes(answer) for inner in ast.walk(node))


# ============================================================================================
# T5 — transposes are views with other strides
# ============================================================================================
def flatten_transposed(x):
    return x.T.reshape(-1)


# (shape, dtype, layout, values): "transposed" gives x as the transpose of a contiguous
# tensor, so x itself is not contiguous (and x.T is); "strided" takes every other column.
# "edges" fills x with the classic edges of its dtype (edges.edge_tensor): the task allows any
# dtype and any values, so a detour through another dtype (float32 for an int64 x, a float
# copy) or a cleaning of nan and inf shows there; then a bool x and an empty x of another dtype.
_FLATTEN_CASES = [
    ((2, 3), torch.float32, "contiguous", "random"),
    ((4, 5), torch.float64, "contiguous", "random"),
    ((1, 6), torch.int64, "contiguous", "random"),
    ((3, 1), torch.float32, "contiguous", "random"),
    ((3, 3), torch.int32, "contiguous", "random"),
    ((3, 4), torch.float32, "transposed", "random"),
    ((2, 3), torch.float32, "strided", "random"),
    ((3, 0), torch.float32, "contiguous", "random"),
    ((1, 1), torch.float64, "contiguous", "random"),
    ((2, 3), torch.bfloat16, "transposed", "random"),  # "of any dtype": NumPy has no bfloat16
    ((3, 4), torch.bool, "contiguous", "random"),
    ((0, 2), torch.int64, "contiguous", "random"),
    ((3, 6), torch.float32, "contiguous", "edges"),
    ((6, 3), torch.float64, "transposed", "edges"),
    ((3, 4), torch.int64, "contiguous", "edges"),
    ((3, 6), torch.float16, "contiguous", "edges"),
]


def _flatten_input(shape, dtype, layout, values, generator):
    n, m = shape
    if values == "edges":
        if layout == "transposed":
            return edge_tensor((m, n), dtype).T
        return edge_tensor((n, m), dtype)
    if dtype is torch.bool:
        return torch.rand(n, m, generator=generator) > 0.5
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
              "reshapes_to_two_sizes": _reshapes_to_two_sizes(answer),
              "transposes_somewhere": _transposes_somewhere(answer),
              "transposes_after_flattening": _transposes_after_flattening(answer)}
    for shape, dtype, layout, values in _FLATTEN_CASES:
        x = _flatten_input(shape, dtype, layout, values, generator)
        on = f"x of shape {shape_text(list(shape))}, {_dtype_name(dtype)}"
        if layout != "contiguous":
            on += f", {layout} (not contiguous)"
        if values == "edges":
            on += f", at the edges of {_dtype_name(dtype)}"
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
            if record.get("transposes_after_flattening"):
                return MESSAGES("transposes-after-flattening", on=on)
            if record["transposes_somewhere"]:
                return MESSAGES("transposes-only-some", on=on)
            mistake, note = "not-transposed", ""
            if record["reshapes_to_two_sizes"]:
                mistake, note = "reshape-not-transpose", MESSAGES.text("reshape-note")
            return MESSAGES(mistake, on=on, note=note)
        if got["kind"] == "tensor" and len(got["shape"]) == 2:
            return MESSAGES("not-flattened", shape=shape_text(got["shape"]), on=on,
                            expected=shape_text(case["expected"]["shape"]))
        problem = tensor_problem(got, case["expected"], on=on)
        if problem:
            contiguous_right = all(
                tensor_problem(c["got"], c["expected"]) is None
                for c in cases if c["layout"] == "contiguous"
            )
            if case["layout"] != "contiguous" and contiguous_right:
                return MESSAGES("assumes-contiguous", on=on, problem=tensor_problem(got, case["expected"]))
            return problem
        if tensor_problem(case["again"], case["expected"]):
            return MESSAGES("wrong-on-second-call", on=on,
                            problem=tensor_problem(case["again"], case["expected"], what="the second result"))
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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "numpy-has-no-bfloat16": "Got unsupported ScalarType BFloat16",
        "view-of-transpose": "view size is not compatible with input tensor's size and stride",
        "cat-of-no-columns": "expected a non-empty list of Tensors",
    }),
    messages=MESSAGES,
)
