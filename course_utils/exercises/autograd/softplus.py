"""Chapter 02, A5 — ``softplus``: fix a version-counter error.

Engine: applies edges.edge_tensor (the edges of float32 and float64 the task's range allows,
Allowed(low=-30, high=30): ±0, subnormals, the smallest normals, ±1 and the step after 1), in a
contiguous and a non-contiguous layout, plus a 0-d x, an x with size-1 dimensions and one on the
meta device; below -30 too, for the task bounds x only above ("up to 30"): the edges of each
dtype there (exp(-x) overflowing, the largest magnitudes, -inf), and float64 x just above 12,
where float64's tolerance (rtol 1e-7) tells softplus(x) from x; and the states an x may be in
(not requiring grad, .grad holding an old gradient). What is right is the reference's formula, log(exp(x) + 1) and its derivative sigmoid(x), worked
out on the judge's side in float64 (NumPy) from the recorded x. Hand-written because its named
mistakes read the recorded graph and the gradient backward() gives, which a pure function of
tensors has not.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.autograd.common import CHAPTER
from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.edges import Allowed, edge_tensor, edge_values, not_contiguous
from course_utils.exercises.facts import same_values, tensor_problem, value_facts
from course_utils.exercises.messages import Messages
from course_utils.exercises.running import LearnerRaised

MESSAGES = Messages("softplus", {
    "kink-at-zero": (
        "Your values are right, and so is the gradient except at x = 0 exactly (on {on}): "
        "there softplus's derivative came out as {said} instead of sigmoid(0) = 0.5. Softplus "
        "has no kink at 0, but your expression does: built from pieces like clamp(x, min=0), "
        "relu, abs or where(x > 0, ...), autograd takes one side's derivative at 0 (clamp passes "
        "all of it, relu none, abs's is 0). Use a form without a kink there, "
        "torch.log1p(torch.exp(x)) or F.softplus, or torch.maximum(x, torch.zeros_like(x)), "
        "which splits the gradient of a tie evenly."),
    "returned-none": "softplus returned None (on {on}); end your function with `return`.",
    "changed-x": (
        "Your function changed its input x (on {on}). Compute new tensors; leave x "
        "as it was."),
    "changed-x-requires-grad": (
        "Your function switched on requires_grad of the caller's x (on {on}): x is the "
        "caller's tensor, and from then on every operation on it is recorded and each backward() "
        "adds into x.grad. Leave x as it is: when x requires grad, backward() reaches it through "
        "recorded operations by itself."),
    "changed-x-grad": (
        "Your function {how} x.grad (on {on}): it held an old gradient when softplus was called, "
        "and the caller's backward() adds into it (gradient accumulation). Leave x.grad alone; "
        "backward() takes care of it."),
    "forgot-plus-one": "Your result is x itself (on {on}): log(exp(x)) — add 1 before the log.",
    "values-problem": "{problem} softplus(x) = log(exp(x) + 1).",
    "cut-from-x": (
        "Your result does not require grad (on {on}): it is cut off from x, so "
        "backward() cannot reach x. Compute it from x with recorded torch operations "
        "(no detach(), .data, .numpy() or torch.no_grad() on the way)."),
    "grad-still-none": (
        "After backward() through your result, x.grad is still None (on {on}): your "
        "result is not computed from x by recorded operations."),
    "calls-backward": (
        "x.grad was already filled when your function returned (on {on}): your function "
        "calls backward() itself, so the caller's backward() adds a second gradient to "
        "x.grad. Return the result and leave backward() to the caller."),
    "exp-off-graph": (
        "Your values are right but the gradient is wrong (on {on}): softplus's "
        "derivative came out as 1 everywhere instead of sigmoid(x). Autograd recorded no "
        "exp() on the way from x to your result: the softplus part was computed off the "
        "graph (detach(), .data or torch.no_grad()), so backward() sees x plus a constant. "
        "Compute it with recorded operations: torch.log(torch.exp(x) + 1)."),
    "hidden-in-place": (
        "Your values are right but the gradient is wrong (on {on}): softplus's "
        "derivative came out as 1 everywhere instead of sigmoid(x), with no error: "
        "backward() worked from a changed e + 1 instead of exp's own output. An in-place "
        "change made through .data (or under torch.no_grad()) is invisible to "
        "autograd's version check. Use an out-of-place `e + 1` instead."),
    "gradient-problem": "{problem} The gradient of softplus is sigmoid(x).",
    "x-itself-too-early": (
        "Your result is x itself at x = {value:g} (on {on}): got {got:g}, expected "
        "{expected:.10g}. softplus(x) = x + log(1 + e^-x) is x only to within e^-x, and at "
        "{value:g} that gap, {gap:.3g}, is larger than {dtype}'s rounding. Switch to x only where "
        "e^-x is below the dtype's step (F.softplus switches at 20), or not at all: "
        "torch.log1p(torch.exp(x))."),
    "overflow-far-below": (
        "Your result is {got:g} at x = {value:g} (on {on}), where softplus(x) is about e^x = "
        "{expected:.3g}: something overflowed, such as exp(-x), which passes the largest "
        "{dtype} once x is below about {overflow:g}. The task bounds x only above (at 30), so "
        "x far below 0 is allowed. x + log1p(exp(-x)) is the stable form for x > 0 only; use "
        "torch.log1p(torch.exp(x)) (exp(x) merely underflows to 0 there), or F.softplus."),
    "nan-gradient-from-where": (
        "Your values are right, but the gradient is nan at x = {value:g} (on {on}), where "
        "sigmoid(x) is {right:.3g}: torch.where computes both branches, and backward() sends "
        "the branch it did not pick a gradient of 0, which times the inf of an overflowed "
        "exp(-x) (x below about {overflow:g} in {dtype}) gives nan. The task bounds x only above "
        "(at 30): make the unpicked branch finite too, with exp(-|x|) (it never overflows), or "
        "use a form with no branch, torch.log1p(torch.exp(x)) or F.softplus."),
    "passed": "Correct: right values, and backward() reaches x with the right gradient, sigmoid(x).",
    "hint-1": (
        "exp() saves its output for the backward pass (the derivative of exp is exp). "
        "`e += 1` changes that saved tensor, and backward() refuses to use it."),
    "hint-2": "Make the +1 out of place: a new tensor, so the saved one stays intact.",
    "hint-3": "return torch.log(torch.exp(x) + 1)",
    "in-place-change": (
        "an in-place change (+=, add_) of a tensor that autograd saved for backward: "
        "exp() saves its output. Write e + 1, which makes a new tensor."),
    "in-place-change-of-x": "an in-place change of x itself. Compute new tensors from x instead.",
    "view-of-non-contiguous": (
        ".view() needs contiguous memory, and x may be a transposed tensor: use "
        ".reshape(), or work on x's shape as it is."),
    "result-kept-between-calls": (
        "a result kept from an earlier call: after one backward() its graph is freed. "
        "Compute exp(x) and the result anew from the x of each call."),
    "numpy-breaks-autograd": (
        "NumPy cannot follow autograd: compute softplus with torch functions so that "
        "backward() reaches x."),
})


# ============================================================================================
# A5 — fix a version-counter error
# ============================================================================================
def softplus(x):
    e = torch.exp(x)
    return torch.log(e + 1)  # e + 1 is a new tensor: exp's saved output stays intact


_SOFTPLUS_CASES = [
    ("x of shape (6,) with requires_grad=True", (6,), torch.float32, False),
    ("x of shape (3, 4) with requires_grad=True", (3, 4), torch.float32, False),
    ("a non-contiguous float64 x of shape (4, 3) with requires_grad=True", (3, 4), torch.float64, True),
]
# Large inputs too: exp(x) is still finite in float32 up to x = 88, and softplus(x) equals x
# there to float32 precision, so clamping x, or switching to x too early, shows.
_SOFTPLUS_WIDE = (
    "x = [-30, -21, -8, 0.5, 6, 12, 21, 30] with requires_grad=True (softplus(x) is about x for large x)",
    [-30.0, -21.0, -8.0, 0.5, 6.0, 12.0, 21.0, 30.0],
)
# Exact zeros, both signs: the stable forms are built of pieces with a kink at 0 (clamp, relu,
# abs, where(x > 0, ...)), where autograd takes one side's derivative; softplus has none there,
# its gradient at 0 is sigmoid(0) = 0.5. Beside them, subnormals just off 0 on either side.
_SOFTPLUS_ZEROS = (
    "x = [-1.5, 0.0, -0.0, 1e-40, -1e-40, 0.25, 2.0] with requires_grad=True (exact zeros of both signs, float32 subnormals)",
    [-1.5, 0.0, -0.0, 1e-40, -1e-40, 0.25, 2.0],
)
# The range of the ordinary cases: "up to 30", and as far below; the edges of each dtype inside it.
_ALLOWED = Allowed(low=-30.0, high=30.0)
# The task bounds x only above ("up to 30"): below -30 lie the numbers whose exp(-x) overflows
# (past 88 in float32, 709 in float64), the largest magnitudes and -inf, where softplus is 0
# (to the dtype's precision) and so is its gradient; and in float64, x just above 12, where
# softplus(x) = x + e^-x differs from x by more than float64's step (a switch to x too early).
_BELOW = Allowed(high=-30.0)
_FAR_BELOW = [-50.0, -100.0]
_LARGE_FLOAT64 = [12.25, 12.5, 15.0]
_OLD_GRAD = "an x whose .grad holds an old gradient (the caller accumulates), shape (2, 3)"


def _graph_ops(out, limit=200):
    """The names of the recorded operations behind ``out`` (ExpBackward0, ...), a few hundred at
    most: which steps autograd saw."""
    seen, names, stack = set(), set(), [out.grad_fn]
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.add(type(node).__name__)
        stack.extend(fn for fn, _ in getattr(node, "next_functions", ()))
    return sorted(names)


def _probe_softplus(answer, run):
    cases = []
    try:
        _try_cases(answer, run, cases)
    except LearnerRaised as raised:
        # The judge decides: a mistake an earlier input already shows is the one to report, not
        # an error a later input (a 0-d x, an x that does not require grad) led to.
        return {"cases": cases, "raised": later_error(raised, answer, earlier=bool(cases))}
    return {"cases": cases, "raised": None}


def _try_cases(answer, run, cases):
    generator = torch.Generator().manual_seed(7)
    first_x = None

    def call(on, start, upstream, x, old_grad=None):
        x.grad = old_grad
        tracked = bool(x.requires_grad)
        out = run(answer, x, on=on)
        readable = x.device.type != "meta"
        case = {
            # the learner's own backward() filled x.grad, or the function changed it
            "grad_before_backward": x.grad is not None if old_grad is None else None,
            "on": on,
            "device": str(x.device),
            "tracked": tracked,
            "tracked_after": bool(x.requires_grad),
            "x": start.numpy().copy() if readable else None,
            "shape": [int(n) for n in x.shape],
            "dtype": str(x.dtype),
            "upstream": upstream.numpy().copy() if readable else None,
            "out": value_facts(out),
            "x_after": x.detach().numpy().copy() if readable else None,
            "grad": None,
        }
        if old_grad is not None:
            left = x.grad
            case["old_grad"] = old_grad.numpy().copy()
            case["old_grad_after"] = None if left is None else value_facts(left)
            x.grad = None
        if (tracked and isinstance(out, torch.Tensor) and out.requires_grad and out.shape == x.shape
                and out.device == x.device):
            case["graph_ops"] = _graph_ops(out)
            run(out.backward, upstream, on=f"backward() through your result ({on})")
            case["grad"] = value_facts(x.grad)
        cases.append(case)

    for on, shape, dtype, transposed in _SOFTPLUS_CASES:
        start = torch.rand(shape, generator=generator, dtype=dtype) * 8 - 4
        upstream = torch.rand(shape, generator=generator, dtype=dtype) + 0.5
        if transposed:
            start, upstream = start.t(), upstream.t()
        x = start.clone() if not transposed else start.t().clone().t()
        x.requires_grad_(True)
        if first_x is None:
            first_x = (start, upstream, x)
        call(on, start, upstream, x)
    for on, values in (_SOFTPLUS_WIDE, _SOFTPLUS_ZEROS):
        start = torch.tensor(values)
        upstream = torch.rand(start.shape, generator=generator) + 0.5
        call(on, start, upstream, start.clone().requires_grad_(True))
    start, upstream, x = first_x  # (the notebook's inputs first, then the edges and states)
    call("the first x again, a second call (x.grad cleared in between)", start, upstream * 2, x)
    # The classic edges of each dtype inside the range; float64 in a transposed layout.
    for dtype, shape, layout in ((torch.float32, (9,), "contiguous"), (torch.float64, (3, 3), "non-contiguous")):
        start = edge_tensor(shape, dtype, _ALLOWED, shift=2)
        if layout == "non-contiguous":
            start = not_contiguous(start)
        upstream = torch.rand(shape, generator=generator, dtype=dtype) + 0.5
        x = not_contiguous(start.clone()) if layout == "non-contiguous" else start.clone()
        call(f"a {layout} {dtype} x of shape {tuple(shape)} holding the edges of its dtype in [-30, 30] "
             "(±0, subnormals, the smallest normal numbers, ±1, the number right after 1)",
             start, upstream, x.requires_grad_(True))
    # Shapes the task allows besides the notebook's: a single number (0-d), size-1 dimensions.
    for on, start in (("a 0-d x (a single number), 0.75, with requires_grad=True", torch.tensor(0.75)),
                      ("an x of shape (1, 3) with requires_grad=True", torch.tensor([[-2.0, 0.5, 4.0]]))):
        upstream = torch.rand(start.shape, generator=generator) + 0.5
        call(on, start, upstream, start.clone().requires_grad_(True))
    # The states an x may be in: values only (no grad), an old gradient in x.grad, another device.
    start = torch.rand(2, 3, generator=generator) * 8 - 4
    call("an x of shape (2, 3) that does not require grad (values only)", start, torch.ones(2, 3), start.clone())
    upstream = torch.rand(2, 3, generator=generator) + 0.5
    old = torch.rand(2, 3, generator=generator) - 0.5
    call(_OLD_GRAD, start, upstream, start.clone().requires_grad_(True), old_grad=old)
    meta = torch.empty(2, 3, device="meta")
    call("an x on the meta device (it stands for a GPU), shape (2, 3), with requires_grad=True",
         meta, torch.ones(2, 3, device="meta"), meta.clone().requires_grad_(True))
    for dtype, extra in ((torch.float32, []), (torch.float64, _LARGE_FLOAT64)):
        values = extra + _FAR_BELOW + edge_values(dtype, _BELOW)
        start = torch.tensor(values, dtype=dtype)
        upstream = torch.rand(start.shape, generator=generator, dtype=dtype) + 0.5
        call(f"a {dtype} x = [{', '.join(f'{v:.6g}' for v in values)}] with requires_grad=True (the task bounds "
             "x only above, at 30)", start, upstream, start.clone().requires_grad_(True))


def _wrong_only_at_zero(grad, right, x, upstream, on):
    """The mistake of a gradient right everywhere but at the exact zeros of x, else None."""
    if grad["kind"] != "tensor" or "values" not in grad or grad["shape"] != list(x.shape):
        return None
    got = np.asarray(grad["values"], dtype=np.float64)
    wrong = ~np.isclose(got, right, rtol=1e-4, atol=1e-5)
    zero = x == 0
    if not wrong.any() or (wrong & ~zero).any():
        return None
    slopes = sorted({float(np.round(s, 4)) for s in (got / upstream)[wrong]})
    return MESSAGES("kink-at-zero", on=on, said=" and ".join(f"{s:g}" for s in slopes))


def _explained(problem, id):
    """A generic comparison (``facts.tensor_problem``) followed by this exercise's words; a named
    one (not a tensor at all) keeps its id."""
    text = MESSAGES.text(id, problem=problem)
    return Mistake(problem.id, text) if isinstance(problem, Mistake) else text


def _tolerance(dtype: str) -> dict:
    """float64 keeps some 16 digits: a switch to x at 12 (off by e^-12 / 12, 3e-7) shows there."""
    return {"rtol": 1e-7, "atol": 1e-9} if dtype == "torch.float64" else {"rtol": 1e-4, "atol": 1e-5}


def _x_itself_too_early(out, template, x, case, tolerance):
    """The mistake of a result that is x itself wherever it is wrong, a little above softplus's
    value: a switch to x where e^-x still counts."""
    if x is None or out["kind"] != "tensor" or out["shape"] != template["shape"] or "values" not in out:
        return None
    got, expected = np.asarray(out["values"], dtype=np.float64), template["values"]
    wrong = ~np.isclose(got, expected, equal_nan=True, **tolerance)
    if not wrong.any() or not np.all((got == x)[wrong] & (expected > x)[wrong] & (x > 0)[wrong]):
        return None
    index = tuple(np.argwhere(wrong)[0])
    return MESSAGES("x-itself-too-early", value=float(x[index]), got=float(got[index]), expected=float(expected[index]),
                    gap=float(expected[index] - x[index]), dtype=case["dtype"].replace("torch.", ""), on=case["on"])


def _overflow(dtype: str) -> float:
    return -float(np.log(np.finfo(np.float32 if dtype == "float32" else np.float64).max))


def _overflow_far_below(out, template, x, case):
    """The mistake of a result that is inf or nan at an x far below 0, where softplus is about 0."""
    if x is None or out["kind"] != "tensor" or out["shape"] != template["shape"] or "values" not in out:
        return None
    got, expected = np.asarray(out["values"], dtype=np.float64), template["values"]
    bad = ~np.isfinite(got) & np.isfinite(expected) & (x < -30)
    if not bad.any():
        return None
    index = tuple(np.argwhere(bad)[0])
    dtype = case["dtype"].replace("torch.", "")
    return MESSAGES("overflow-far-below", got=float(got[index]), value=float(x[index]), expected=float(expected[index]),
                    dtype=dtype, overflow=round(_overflow(dtype), 1), on=case["on"])


def _nan_from_where(grad, right, x, case):
    """The mistake of a gradient that is nan where sigmoid(x) is finite, through a torch.where."""
    if "WhereBackward0" not in case.get("graph_ops", ()) or "values" not in grad:
        return None
    got = np.asarray(grad["values"], dtype=np.float64)
    if got.shape != right.shape:
        return None
    bad = np.isnan(got) & np.isfinite(right)
    if not bad.any():
        return None
    index = tuple(np.argwhere(bad)[0])
    dtype = case["dtype"].replace("torch.", "")
    return MESSAGES("nan-gradient-from-where", value=float(x[index]), right=float(right[index] / case["upstream"][index]),
                    overflow=round(_overflow(dtype), 1), dtype=dtype, on=case["on"])


def _judge_softplus(record):
    with np.errstate(over="ignore"):  # exp(-x) of x far below 0 is inf: sigmoid(x) is 0 there
        return _judge_cases(record)


def _judge_cases(record):
    cases = record["cases"]
    for case in cases:
        on, x, upstream, out = case["on"], case["x"], case["upstream"], case["out"]
        tolerance = _tolerance(case["dtype"])
        template = {"kind": "tensor", "shape": case["shape"], "dtype": case["dtype"], "device": case["device"]}
        if x is not None:  # (a meta x has no numbers: its result is judged by shape, dtype and device)
            template["values"] = np.log1p(np.exp(x.astype(np.float64)))
        if out["kind"] == "NoneType":
            return MESSAGES("returned-none", on=on)
        if x is not None and not same_values(case["x_after"], x):
            return MESSAGES("changed-x", on=on)
        if case["tracked_after"] != case["tracked"]:
            return MESSAGES("changed-x-requires-grad", on=on)
        if "old_grad" in case:
            left = case["old_grad_after"]
            if left is None or "values" not in left or not same_values(left["values"], case["old_grad"], rtol=0, atol=0):
                how = ("cleared" if left is None else "zeroed" if "values" in left and not np.any(left["values"])
                       else "changed")
                return MESSAGES("changed-x-grad", on=on, how=how)
        if x is not None and out["kind"] == "tensor" and out["shape"] == template["shape"] and "values" in out:
            if same_values(out["values"], x, rtol=1e-4, atol=1e-5):
                return MESSAGES("forgot-plus-one", on=on)
        early = _x_itself_too_early(out, template, x, case, tolerance) or _overflow_far_below(out, template, x, case)
        if early:
            return early
        problem = tensor_problem(out, template, what="your result", on=on, **tolerance)
        if problem:
            return _explained(problem, "values-problem")
        if not case["tracked"]:
            continue  # values only: nothing for backward() to reach
        if not out["requires_grad"]:
            return MESSAGES("cut-from-x", on=on)
        grad = case["grad"]
        if grad is None or grad["kind"] == "NoneType":
            return Mistake("cut-from-x", MESSAGES.text("grad-still-none", on=on))
        if case.get("grad_before_backward"):
            return MESSAGES("calls-backward", on=on)
        if x is None:
            problem = tensor_problem(grad, template, what="the gradient x.grad", on=on)
            if problem:
                return _explained(problem, "gradient-problem")
            continue
        right = upstream / (1 + np.exp(-x.astype(np.float64)))
        if (grad["kind"] == "tensor" and "values" in grad and same_values(grad["values"], upstream)
                and "ExpBackward0" not in case.get("graph_ops", ["ExpBackward0"])):
            return MESSAGES("exp-off-graph", on=on)
        if grad["kind"] == "tensor" and "values" in grad and same_values(grad["values"], upstream):
            return MESSAGES("hidden-in-place", on=on)
        kink = _wrong_only_at_zero(grad, right, x, upstream, on) or _nan_from_where(grad, right, x, case)
        if kink:
            return kink
        problem = tensor_problem(grad, {**template, "values": right}, what="the gradient x.grad", on=on, **tolerance)
        if problem:
            return _explained(problem, "gradient-problem")
    if record["raised"]:
        return Raised(record["raised"])
    return None


softplus = Exercise(
    "softplus",
    chapter=CHAPTER,
    title="Fix the in-place bug",
    expects=Function("softplus", ("x",), returns="a tensor shaped like x that requires grad"),
    probe=_probe_softplus,
    judge=_judge_softplus,
    reference=softplus,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "in-place-change": "modified by an inplace operation",
        "in-place-change-of-x": "a leaf Variable that requires grad",
        "view-of-non-contiguous": "view size is not compatible with input tensor's size and stride",
        "result-kept-between-calls": "Trying to backward through the graph a second time",
        "numpy-breaks-autograd": "Can't call numpy() on Tensor that requires grad",
    }),
    messages=MESSAGES,
)
