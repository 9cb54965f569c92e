"""Chapter 02 — Autograd: leaves, accumulated gradients, in-place updates and the version counter.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it. Every probe runs on the CPU with small tensors: autograd's rules are the same on
every device, and a check must finish in well under a second.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.facts import same_values, shape_text, tensor_problem, value_facts

CHAPTER = "autograd"


def _grad_fn_name(tensor) -> str | None:
    grad_fn = getattr(tensor, "grad_fn", None)
    return None if grad_fn is None else type(grad_fn).__name__


# ============================================================================================
# A1 — a parameter is a leaf that requires grad
# ============================================================================================
def new_parameter(shape):
    weight = torch.randn(shape) * 0.01
    return weight.requires_grad_(True)


_PARAMETER_SHAPES = [(256,), (64, 32), (4, 5, 6), (3,)]
_STD = 0.01
_ENOUGH_FOR_STATISTICS = 100


def _probe_new_parameter(answer, run):
    torch.manual_seed(0)  # the check restores the learner's random state afterwards
    cases = []
    for shape in _PARAMETER_SHAPES:
        on = f"shape={shape_text(list(shape))}"
        got = run(answer, shape, on=on)
        case = {"on": on, "shape": list(shape), "got": value_facts(got)}
        if isinstance(got, torch.Tensor):
            case["is_leaf"] = bool(got.is_leaf)
            case["grad_fn"] = _grad_fn_name(got)
        cases.append(case)
    return cases


def _judge_new_parameter(cases):
    for case in cases:
        got, on = case["got"], case["on"]
        if got["kind"] == "NoneType":
            return f"new_parameter returned None (on {on}); end your function with `return`."
        expected = {"kind": "tensor", "shape": case["shape"], "dtype": "torch.float32"}
        problem = tensor_problem(got, expected, what="your parameter", on=on, check_device=False)
        if problem:
            return problem
        if case["grad_fn"] is not None:
            return (
                f"Your tensor was made by an operation (grad_fn={case['grad_fn']}, on {on}), so "
                "it is not a leaf: backward() leaves its .grad None and sends the gradient to "
                "the hidden tensor it was computed from. This is what "
                "torch.randn(shape, requires_grad=True) * 0.01 does. Scale first, then switch "
                "tracking on: (torch.randn(shape) * 0.01).requires_grad_()."
            )
        if not got["requires_grad"]:
            return (
                f"Your tensor does not require grad (on {on}): autograd will never compute a "
                "gradient for it, so training would not change it. Switch tracking on after "
                "scaling: .requires_grad_()."
            )
        if not case["is_leaf"]:
            return f"Your tensor is not a leaf (on {on}); create it fresh, not from another tensor."
    # Judge the spread on all the large draws together: thousands of numbers leave no room
    # for a correct answer to fail by bad luck.
    large = [case for case in cases if len(case["got"]["values"].ravel()) >= _ENOUGH_FOR_STATISTICS]
    values = np.concatenate([np.asarray(c["got"]["values"], dtype=np.float64).ravel() for c in large])
    on = "shapes " + ", ".join(shape_text(c["shape"]) for c in large)
    std, mean = float(values.std()), float(values.mean())
    if values.min() >= 0:
        return (
            f"All your values are ≥ 0 (on {on}): torch.rand draws uniformly from [0, 1). "
            "Use torch.randn, which draws from a normal distribution around 0."
        )
    if 0.7 < std < 1.3:
        return (
            f"Your values have a standard deviation of about {std:.1f} (on {on}): that is "
            "torch.randn unscaled. Multiply by 0.01."
        )
    if not 0.008 < std < 0.012 or abs(mean) > 0.002:
        return (
            f"Your values have mean {mean:.4f} and standard deviation {std:.4f} (on {on}); "
            "expected mean about 0 and standard deviation about 0.01: torch.randn(shape) * 0.01."
        )
    for case in cases:
        values = np.asarray(case["got"]["values"], dtype=np.float64)
        if values.size and np.abs(values).max() > 0.1:
            return (
                f"Some of your values are as large as {np.abs(values).max():.3g} (on {case['on']}); "
                "torch.randn(shape) * 0.01 keeps them near 0."
            )
    return None


new_parameter = Exercise(
    "new_parameter",
    chapter=CHAPTER,
    title="A parameter autograd will fill",
    expects=Function("new_parameter", ("shape",)),
    probe=_probe_new_parameter,
    judge=_judge_new_parameter,
    reference=new_parameter,
    passed_message=(
        "Correct: a leaf that requires grad, so backward() will put its gradient in .grad."
    ),
    hints=[
        "Two properties matter: requires_grad must be True, and the tensor must be a leaf "
        "(grad_fn is None). Every operation on a tensor that requires grad makes a non-leaf.",
        "So do the arithmetic first, while nothing is tracked, and switch tracking on last.",
        "weight = torch.randn(shape) * 0.01, then weight.requires_grad_() (it returns the tensor).",
    ],
    error_notes=[
        (
            "a leaf Variable that requires grad",
            "an in-place operation (mul_, *=) on a tensor created with requires_grad=True. "
            "Scale first, then call .requires_grad_().",
        ),
    ],
)


# ============================================================================================
# A2 — gradients accumulate until cleared
# ============================================================================================
def fresh_gradient(w, x):
    w.grad = None  # clear whatever an earlier backward() left there
    loss = (w * x).sum()
    loss.backward()
    return w.grad


_W_SHAPE = (2, 3)


def _probe_fresh_gradient(answer, run):
    generator = torch.Generator().manual_seed(2)
    x1, x2, x3 = (torch.randn(_W_SHAPE, generator=generator) for _ in range(3))
    stale = torch.randn(_W_SHAPE, generator=generator) * 10
    w = torch.randn(_W_SHAPE, generator=generator).requires_grad_(True)

    first = run(answer, w, x1.clone(), on="a first call, with w.grad still None")
    first_facts = value_facts(first)  # copied now: a later call could change this tensor
    second = run(answer, w, x2.clone(), on="a second call with the same w")
    second_facts = value_facts(second)
    first_later = value_facts(first)

    w.grad = stale.clone()
    third = run(answer, w, x3.clone(), on="a call on a w whose .grad holds an old gradient")
    return {
        "x1": x1.numpy().copy(),
        "x2": x2.numpy().copy(),
        "x3": x3.numpy().copy(),
        "stale": stale.numpy().copy(),
        "first": first_facts,
        "second": second_facts,
        "first_later": first_later,
        "third": value_facts(third),
        "expected": value_facts(x1),
    }


def _judge_fresh_gradient(record):
    template = {key: value for key, value in record["expected"].items() if key != "values"}
    x1, x2, x3, stale = record["x1"], record["x2"], record["x3"], record["stale"]
    calls = [
        ("first", x1, "a first call, with w.grad still None"),
        ("second", x2, "a second call with the same w"),
        ("third", x3, "a call on a w whose .grad holds an old gradient"),
    ]
    for key, x, on in calls:
        got = record[key]
        if got["kind"] == "NoneType":
            return (
                f"fresh_gradient returned None (on {on}). Return the gradient: after "
                "loss.backward() it is in w.grad."
            )
        problem = tensor_problem(got, template, what="your gradient", on=on)
        if problem:
            return problem
        values = got["values"]
        if key == "second" and same_values(values, x1 + x2):
            return (
                "On the second call with the same w you returned the sum of both calls' "
                "gradients: gradients accumulate — backward() adds to w.grad, it does not "
                "overwrite it. Clear it before backward() with `w.grad = None`."
            )
        if key == "third" and same_values(values, stale + x3):
            return (
                "When w.grad already held an old gradient, your result was the old one plus "
                "the new one: backward() adds to w.grad. Clear it before backward() with "
                "`w.grad = None`."
            )
        if same_values(values, 2 * x):
            return (
                f"Your gradient is twice the right one (on {on}): two backward() calls add up. "
                "Call backward() once."
            )
        problem = tensor_problem(got, {**template, "values": x}, what="your gradient", on=on)
        if problem:
            return problem + " The gradient of (w * x).sum() with respect to w is x itself."
        if key == "second" and not same_values(record["first_later"]["values"], x1):
            return (
                "The tensor your function returned on the first call changed when you called "
                "it again: you returned w.grad itself, and your second call overwrote it in "
                "place (w.grad.zero_() then backward()). Clear with `w.grad = None` — "
                "backward() then makes a new tensor — or return w.grad.clone()."
            )
    return None


fresh_gradient = Exercise(
    "fresh_gradient",
    chapter=CHAPTER,
    title="A fresh gradient every time",
    expects=Function("fresh_gradient", ("w", "x")),
    probe=_probe_fresh_gradient,
    judge=_judge_fresh_gradient,
    reference=fresh_gradient,
    passed_message=(
        "Correct: every call returns this loss's gradient alone, whatever w.grad held before."
    ),
    hints=[
        "backward() adds into w.grad. Whatever an earlier call left there is added to the new gradient.",
        "Clear before you compute: `w.grad = None` works whether w.grad is None or a tensor.",
        "w.grad = None; (w * x).sum().backward(); return w.grad",
    ],
    error_notes=[
        (
            "'NoneType' object has no attribute",
            "w.grad is None until the first backward(), so w.grad.zero_() fails there. "
            "`w.grad = None` clears in every case.",
        ),
        (
            "a leaf Variable that requires grad",
            "an in-place change of w itself. Only clear its gradient: `w.grad = None`.",
        ),
    ],
)


# ============================================================================================
# A5 — update a leaf in place, without recording it
# ============================================================================================
def sgd_update(w, lr):
    with torch.no_grad():
        w -= lr * w.grad


def _probe_sgd_update(answer, run):
    generator = torch.Generator().manual_seed(5)
    cases = []
    for kind, lr in (("tensor", 0.1), ("tensor", 0.5), ("nn.Parameter", 0.01)):
        start = torch.randn(4, 3, generator=generator)
        x = torch.randn(4, 3, generator=generator)
        w = start.clone().requires_grad_(True)
        if kind == "nn.Parameter":
            w = torch.nn.Parameter(start.clone())
        ((w * x) ** 2).sum().backward()  # a real gradient, made by a real backward()
        gradient = w.grad.detach().clone()
        on = f"w: a {kind} of shape (4, 3) with its .grad filled, lr={lr}"
        returned = run(answer, w, lr, on=on)
        grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        cases.append(
            {
                "on": on,
                "lr": lr,
                "start": start.numpy().copy(),
                "gradient": gradient.numpy().copy(),
                "w": value_facts(w),
                "is_leaf": bool(w.is_leaf),
                "grad_fn": _grad_fn_name(w),
                "returned": value_facts(returned),
                "grad_enabled_after": grad_enabled_after,
            }
        )
    return cases


def _judge_sgd_update(cases):
    for case in cases:
        on, lr = case["on"], case["lr"]
        start, gradient, w = case["start"], case["gradient"], case["w"]
        expected = start - lr * gradient
        if not case["grad_enabled_after"]:
            return (
                f"After your function ran, autograd was switched off for the whole session "
                f"(on {on}): torch.set_grad_enabled(False) stays off. Use "
                "`with torch.no_grad():`, which switches it back on at the end of the block."
            )
        if same_values(w["values"], start, rtol=0, atol=0):
            returned = case["returned"]
            if returned["kind"] == "tensor" and same_values(returned.get("values", []), expected):
                return (
                    f"The caller's w is unchanged (on {on}); your function returned the new "
                    "values instead. `w = w - lr * w.grad` makes a new tensor and binds the "
                    "local name w to it; the caller (and an optimizer) still hold the old one. "
                    "Change the tensor itself, in place: `w -= lr * w.grad` inside "
                    "`with torch.no_grad():`."
                )
            return (
                f"The caller's w is unchanged after your function ran (on {on}). If you wrote "
                "`w = w - lr * w.grad`, that binds the local name w to a new tensor. Update the "
                "tensor itself, in place (`w -= ...`, w.sub_(...)), inside `with torch.no_grad():`."
            )
        if same_values(w["values"], start + lr * gradient):
            return (
                f"You moved w up the gradient (on {on}): w + lr * grad makes the loss larger. "
                "Gradient descent subtracts: w -= lr * w.grad."
            )
        problem = tensor_problem(w, {**w, "values": expected}, what="w after your update", on=on)
        if problem:
            return problem + " Expected w - lr * w.grad."
        if not w["requires_grad"]:
            return (
                f"After your update w no longer requires grad (on {on}): the next backward() "
                "would not compute its gradient. Leave requires_grad alone; do the update inside "
                "`with torch.no_grad():` instead."
            )
        if case["grad_fn"] is not None or not case["is_leaf"]:
            return (
                f"After your update w has grad_fn={case['grad_fn']} (on {on}): the update was "
                "recorded in the graph. Do it inside `with torch.no_grad():`."
            )
    return None


sgd_update = Exercise(
    "sgd_update",
    chapter=CHAPTER,
    title="An in-place update autograd allows",
    expects=Function("sgd_update", ("w", "lr")),
    probe=_probe_sgd_update,
    judge=_judge_sgd_update,
    reference=sgd_update,
    passed_message=(
        "Correct: w changed in place, is still a leaf that requires grad, and nothing was "
        "recorded. (If you used w.data, it works here; the section on detach() versus .data "
        "shows why torch.no_grad() is the safer habit.)"
    ),
    hints=[
        "w must change in place (the caller and the optimizer hold that very tensor), so "
        "`w = ...` is out: it only rebinds a local name.",
        "Autograd refuses an in-place change of a leaf that requires grad while it records. "
        "Stop the recording around the update.",
        "with torch.no_grad():\n    w -= lr * w.grad",
    ],
    error_notes=[
        (
            "a leaf Variable that requires grad",
            "an in-place update of a leaf that requires grad while autograd records. Put the "
            "update inside `with torch.no_grad():`.",
        ),
        (
            "unsupported operand type(s) for *: 'float' and 'NoneType'",
            "w.grad is None: did your function clear the gradient before using it?",
        ),
    ],
)


# ============================================================================================
# A5 — fix a version-counter error
# ============================================================================================
def softplus(x):
    e = torch.exp(x)
    return torch.log(e + 1)  # e + 1 is a new tensor: exp's saved output stays intact


_SOFTPLUS_SHAPES = [(6,), (3, 4)]


def _probe_softplus(answer, run):
    generator = torch.Generator().manual_seed(7)
    cases = []
    for shape in _SOFTPLUS_SHAPES:
        start = torch.rand(shape, generator=generator) * 8 - 4
        upstream = torch.rand(shape, generator=generator) + 0.5
        x = start.clone().requires_grad_(True)
        on = f"x of shape {shape_text(list(shape))} with requires_grad=True"
        out = run(answer, x, on=on)
        case = {
            "on": on,
            "x": start.numpy().copy(),
            "upstream": upstream.numpy().copy(),
            "out": value_facts(out),
            "x_after": x.detach().numpy().copy(),
            "grad": None,
        }
        if isinstance(out, torch.Tensor) and out.requires_grad and out.shape == x.shape:
            run(out.backward, upstream, on=f"backward() through your result ({on})")
            case["grad"] = value_facts(x.grad)
        cases.append(case)
    return cases


def _judge_softplus(cases):
    for case in cases:
        on, x, upstream, out = case["on"], case["x"], case["upstream"], case["out"]
        expected = np.log1p(np.exp(x.astype(np.float64)))
        template = {
            "kind": "tensor",
            "shape": list(x.shape),
            "dtype": "torch.float32",
            "device": "cpu",
            "values": expected,
        }
        if out["kind"] == "NoneType":
            return f"softplus returned None (on {on}); end your function with `return`."
        if not same_values(case["x_after"], x):
            return (
                f"Your function changed its input x (on {on}). Compute new tensors; leave x "
                "as it was."
            )
        if out["kind"] == "tensor" and out["shape"] == template["shape"] and "values" in out:
            if same_values(out["values"], x, rtol=1e-4, atol=1e-5):
                return f"Your result is x itself (on {on}): log(exp(x)) — add 1 before the log."
        problem = tensor_problem(out, template, what="your result", on=on, rtol=1e-4, atol=1e-5)
        if problem:
            return problem + " softplus(x) = log(exp(x) + 1)."
        if not out["requires_grad"]:
            return (
                f"Your result does not require grad (on {on}): it is cut off from x, so "
                "backward() cannot reach x. A detach(), .data or torch.no_grad() in your function "
                "cut the graph; compute with plain out-of-place operations instead."
            )
        grad = case["grad"]
        if grad is None or grad["kind"] == "NoneType":
            return (
                f"After backward() through your result, x.grad is still None (on {on}): your "
                "result is not computed from x by recorded operations."
            )
        right = upstream / (1 + np.exp(-x.astype(np.float64)))
        if grad["kind"] == "tensor" and "values" in grad and same_values(grad["values"], upstream):
            return (
                f"Your values are right but the gradient is wrong (on {on}): softplus's "
                "derivative came out as 1 everywhere instead of sigmoid(x), with no error. An in-place change made "
                "through .data is invisible to autograd's version check, so exp's backward "
                "used the changed tensor. Use an out-of-place `e + 1` instead."
            )
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
    expects=Function("softplus", ("x",)),
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
        ),
        (
            "a leaf Variable that requires grad",
            "an in-place change of x itself. Compute new tensors from x instead.",
        ),
    ],
)
