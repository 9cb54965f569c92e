"""Chapter 02, A5 — ``softplus``: fix a version-counter error."""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.autograd.common import CHAPTER
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import same_values, tensor_problem, value_facts


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
    generator = torch.Generator().manual_seed(7)
    cases = []
    first_x = None

    def call(on, start, upstream, x):
        x.grad = None
        out = run(answer, x, on=on)
        case = {
            "grad_before_backward": x.grad is not None,  # the learner's own backward() filled it
            "on": on,
            "x": start.numpy().copy(),
            "upstream": upstream.numpy().copy(),
            "out": value_facts(out),
            "x_after": x.detach().numpy().copy(),
            "grad": None,
        }
        if isinstance(out, torch.Tensor) and out.requires_grad and out.shape == x.shape:
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
    on, values = _SOFTPLUS_WIDE
    start = torch.tensor(values)
    upstream = torch.rand(start.shape, generator=generator) + 0.5
    call(on, start, upstream, start.clone().requires_grad_(True))
    on, values = _SOFTPLUS_ZEROS
    start = torch.tensor(values)
    upstream = torch.rand(start.shape, generator=generator) + 0.5
    call(on, start, upstream, start.clone().requires_grad_(True))
    start, upstream, x = first_x
    call("the first x again, a second call (x.grad cleared in between)", start, upstream * 2, x)
    return cases


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
    said = " and ".join(f"{s:g}" for s in slopes)
    return Mistake("kink-at-zero", (
        f"Your values are right, and so is the gradient except at x = 0 exactly (on {on}): "
        f"there softplus's derivative came out as {said} instead of sigmoid(0) = 0.5. Softplus "
        "has no kink at 0, but your expression does: built from pieces like clamp(x, min=0), "
        "relu, abs or where(x > 0, ...), autograd takes one side's derivative at 0 (clamp passes "
        "all of it, relu none, abs's is 0). Use a form without a kink there, "
        "torch.log1p(torch.exp(x)) or F.softplus, or torch.maximum(x, torch.zeros_like(x)), "
        "which splits the gradient of a tie evenly."
    ))


def _judge_softplus(cases):
    for case in cases:
        on, x, upstream, out = case["on"], case["x"], case["upstream"], case["out"]
        expected = np.log1p(np.exp(x.astype(np.float64)))
        template = {
            "kind": "tensor",
            "shape": list(x.shape),
            "dtype": str(torch.from_numpy(x).dtype),
            "device": "cpu",
            "values": expected,
        }
        if out["kind"] == "NoneType":
            return Mistake("returned-none",
                           f"softplus returned None (on {on}); end your function with `return`.")
        if not same_values(case["x_after"], x):
            return Mistake("changed-x", (
                f"Your function changed its input x (on {on}). Compute new tensors; leave x "
                "as it was."
            ))
        if out["kind"] == "tensor" and out["shape"] == template["shape"] and "values" in out:
            if same_values(out["values"], x, rtol=1e-4, atol=1e-5):
                return Mistake("forgot-plus-one",
                               f"Your result is x itself (on {on}): log(exp(x)) — add 1 before the log.")
        problem = tensor_problem(out, template, what="your result", on=on, rtol=1e-4, atol=1e-5)
        if problem:
            return problem + " softplus(x) = log(exp(x) + 1)."
        if not out["requires_grad"]:
            return Mistake("cut-from-x", (
                f"Your result does not require grad (on {on}): it is cut off from x, so "
                "backward() cannot reach x. Compute it from x with recorded torch operations "
                "(no detach(), .data, .numpy() or torch.no_grad() on the way)."
            ))
        grad = case["grad"]
        if grad is None or grad["kind"] == "NoneType":
            return Mistake("cut-from-x", (
                f"After backward() through your result, x.grad is still None (on {on}): your "
                "result is not computed from x by recorded operations."
            ))
        right = upstream / (1 + np.exp(-x.astype(np.float64)))
        if case.get("grad_before_backward"):
            return Mistake("calls-backward", (
                f"x.grad was already filled when your function returned (on {on}): your function "
                "calls backward() itself, so the caller's backward() adds a second gradient to "
                "x.grad. Return the result and leave backward() to the caller."
            ))
        if (grad["kind"] == "tensor" and "values" in grad and same_values(grad["values"], upstream)
                and "ExpBackward0" not in case.get("graph_ops", ["ExpBackward0"])):
            return Mistake("exp-off-graph", (
                f"Your values are right but the gradient is wrong (on {on}): softplus's "
                "derivative came out as 1 everywhere instead of sigmoid(x). Autograd recorded no "
                "exp() on the way from x to your result: the softplus part was computed off the "
                "graph (detach(), .data or torch.no_grad()), so backward() sees x plus a constant. "
                "Compute it with recorded operations: torch.log(torch.exp(x) + 1)."
            ))
        if grad["kind"] == "tensor" and "values" in grad and same_values(grad["values"], upstream):
            return Mistake("hidden-in-place", (
                f"Your values are right but the gradient is wrong (on {on}): softplus's "
                "derivative came out as 1 everywhere instead of sigmoid(x), with no error: "
                "backward() worked from a changed e + 1 instead of exp's own output. An in-place "
                "change made through .data (or under torch.no_grad()) is invisible to "
                "autograd's version check. Use an out-of-place `e + 1` instead."
            ))
        kink = _wrong_only_at_zero(grad, right, x, upstream, on)
        if kink:
            return kink
        problem = tensor_problem(
            grad, {**template, "values": right}, what="the gradient x.grad", on=on, rtol=1e-4, atol=1e-5
        )
        if problem:
            return problem + " The gradient of softplus is sigmoid(x)."
    return None


softplus = Exercise(
    "softplus",
    chapter=CHAPTER,
    title="Fix the in-place bug",
    expects=Function("softplus", ("x",), returns="a tensor shaped like x that requires grad"),
    probe=_probe_softplus,
    judge=_judge_softplus,
    reference=softplus,
    passed_message=(
        "Correct: right values, and backward() reaches x with the right gradient, sigmoid(x)."
    ),
    hints=[
        "exp() saves its output for the backward pass (the derivative of exp is exp). "
        "`e += 1` changes that saved tensor, and backward() refuses to use it.",
        "Make the +1 out of place: a new tensor, so the saved one stays intact.",
        "return torch.log(torch.exp(x) + 1)",
    ],
    error_notes=[
        (
            "modified by an inplace operation",
            "an in-place change (+=, add_) of a tensor that autograd saved for backward: "
            "exp() saves its output. Write e + 1, which makes a new tensor.",
            "in-place-change",
        ),
        (
            "a leaf Variable that requires grad",
            "an in-place change of x itself. Compute new tensors from x instead.",
            "in-place-change-of-x",
        ),
        (
            "view size is not compatible with input tensor's size and stride",
            ".view() needs contiguous memory, and x may be a transposed tensor: use "
            ".reshape(), or work on x's shape as it is.",
            "view-of-non-contiguous",
        ),
        (
            "Trying to backward through the graph a second time",
            "a result kept from an earlier call: after one backward() its graph is freed. "
            "Compute exp(x) and the result anew from the x of each call.",
            "result-kept-between-calls",
        ),
        (
            "Can't call numpy() on Tensor that requires grad",
            "NumPy cannot follow autograd: compute softplus with torch functions so that "
            "backward() reaches x.",
            "numpy-breaks-autograd",
        ),
    ],
)
