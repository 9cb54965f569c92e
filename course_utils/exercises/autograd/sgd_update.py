"""Chapter 02, A5 — ``sgd_update``: update a leaf in place, without recording it."""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.autograd.common import CHAPTER, _grad_fn_name
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import same_values, tensor_problem, value_facts


# ============================================================================================
# A5 — update a leaf in place, without recording it
# ============================================================================================
def sgd_update(w, lr):
    with torch.no_grad():
        w -= lr * w.grad


_MOMENTUM = 0.9


def _sgd_weights(generator):
    """(description, w, lr, reuse): the same w twice in a row, an nn.Parameter, a float64
    non-contiguous leaf (a GPU copy or a transposed weight is just as much a leaf)."""
    first = torch.randn(4, 3, generator=generator).requires_grad_(True)
    parameter = torch.nn.Parameter(torch.randn(4, 3, generator=generator))
    transposed = torch.randn(3, 4, generator=generator, dtype=torch.float64).t().requires_grad_(True)
    return [
        ("a tensor of shape (4, 3) with its .grad filled, lr=0.1", first, 0.1),
        ("the same w again, with a new gradient, lr=0.5", first, 0.5),
        ("an nn.Parameter of shape (4, 3), lr=0.01", parameter, 0.01),
        ("a non-contiguous float64 leaf of shape (4, 3), lr=0.1", transposed, 0.1),
    ]


def _probe_sgd_update(answer, run):
    generator = torch.Generator().manual_seed(5)
    cases, previous = [], {}
    for description, w, lr in _sgd_weights(generator):
        x = torch.randn(4, 3, generator=generator, dtype=w.dtype)
        if not (w.is_leaf and w.requires_grad):
            break  # an earlier call broke this w; the judge reports that call
        w.grad = None
        ((w * x) ** 2).sum().backward()  # a real gradient, made by a real backward()
        start = w.detach().clone()
        gradient = w.grad.detach().clone()
        address = w.data_ptr()
        on = f"w: {description}"
        returned = run(answer, w, lr, on=on)
        grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        cases.append(
            {
                "on": on,
                "lr": lr,
                "start": start.numpy().copy(),
                "gradient": gradient.numpy().copy(),
                "previous_gradient": previous.get(id(w)),
                "w": value_facts(w),
                "is_leaf": bool(w.is_leaf),
                "grad_fn": _grad_fn_name(w),
                "same_memory": w.data_ptr() == address,
                "grad_after": value_facts(w.grad),
                "returned": value_facts(returned),
                "grad_enabled_after": grad_enabled_after,
            }
        )
        previous[id(w)] = gradient.numpy().copy()
    return cases


def _judge_sgd_update(cases):
    updated_before = False
    for case in cases:
        on, lr = case["on"], case["lr"]
        start, gradient, w = case["start"], case["gradient"], case["w"]
        expected = start - lr * gradient
        if not case["grad_enabled_after"]:
            return Mistake("grad-mode-left-off", (
                f"After your function ran, autograd was switched off for the whole session "
                f"(on {on}): torch.set_grad_enabled(False) stays off. Use "
                "`with torch.no_grad():`, which switches it back on at the end of the block."
            ))
        dtype = str(torch.from_numpy(start).dtype)
        if w["dtype"] != dtype or w["device"] != "cpu":
            return Mistake("changed-w-dtype", (
                f"After your update, w has dtype {w['dtype']} on {w['device']}; it was {dtype} on "
                f"cpu (on {on}). Change its numbers in place and nothing else."
            ))
        if same_values(w["values"], start, rtol=0, atol=0):
            returned = case["returned"]
            if updated_before:
                return Mistake("kept-first-w", (
                    f"Your function updated the w of an earlier call, but left this call's w "
                    f"unchanged (on {on}): it keeps something from the first call (an optimizer "
                    "built once holds the first w only). Update the w you are given, every call."
                ))
            if returned["kind"] == "tensor" and same_values(returned.get("values", []), expected):
                return Mistake("rebinds-name", (
                    f"The caller's w is unchanged (on {on}); your function returned the new "
                    "values instead. `w = w - lr * w.grad` makes a new tensor and binds the "
                    "local name w to it; the caller (and an optimizer) still hold the old one. "
                    "Change the tensor itself, in place: `w -= lr * w.grad` inside "
                    "`with torch.no_grad():`."
                ))
            grad_after = case.get("grad_after") or {}
            if (grad_after.get("kind") == "tensor" and grad_after.get("values") is not None
                    and np.size(grad_after["values"]) and not np.any(grad_after["values"])
                    and np.any(gradient)):
                return Mistake("zeroed-grad-first", (
                    f"The caller's w is unchanged and its .grad is all zeros after your function "
                    f"ran (on {on}): the gradient was cleared before the update read it, so w "
                    "moved by lr × 0. Clearing .grad belongs after the update (or before the next "
                    "backward()), never between backward() and the update."
                ))
            return Mistake("rebinds-name", (
                f"The caller's w is unchanged after your function ran (on {on}). If you wrote "
                "`w = w - lr * w.grad`, that binds the local name w to a new tensor. Update the "
                "tensor itself, in place (`w -= ...`, w.sub_(...)), inside `with torch.no_grad():`."
            ))
        updated_before = True
        if same_values(w["values"], start + lr * gradient):
            return Mistake("uphill", (
                f"You moved w up the gradient (on {on}): w + lr * grad makes the loss larger. "
                "Gradient descent subtracts: w -= lr * w.grad."
            ))
        previous = case["previous_gradient"]
        if previous is not None and not same_values(w["values"], expected) and same_values(
            w["values"], start - lr * (gradient + _MOMENTUM * previous)
        ):
            return Mistake("momentum-kept", (
                f"On the second call with the same w, your step was lr * (w.grad + 0.9 * the "
                f"previous gradient) (on {on}): momentum kept from the first call. One step of "
                "plain gradient descent uses only the gradient in w.grad now: w -= lr * w.grad."
            ))
        problem = tensor_problem(w, {**w, "values": expected}, what="w after your update", on=on)
        if problem:
            return problem + " Expected w - lr * w.grad."
        if dtype == "torch.float64" and not same_values(w["values"], expected, rtol=1e-12, atol=1e-14):
            return Mistake("float32-step", (
                f"w after your update is right only to float32 precision (on {on}): part of the "
                "update was computed in float32, and a float64 w loses the digits float64 keeps. "
                "Compute in w's own dtype: w -= lr * w.grad."
            ))
        if not w["requires_grad"]:
            return Mistake("requires-grad-switched-off", (
                f"After your update w no longer requires grad (on {on}): the next backward() "
                "would not compute its gradient. Leave requires_grad alone; do the update inside "
                "`with torch.no_grad():` instead."
            ))
        if case["grad_fn"] is not None or not case["is_leaf"]:
            return Mistake("update-recorded", (
                f"After your update w has grad_fn={case['grad_fn']} (on {on}): the update was "
                "recorded in the graph. Do it inside `with torch.no_grad():`."
            ))
        if not case["same_memory"]:
            return Mistake("data-assignment", (
                f"w has the right values but lives in new memory (on {on}): assigning "
                "`w.data = ...` swaps in a new tensor's storage instead of changing w's numbers "
                "in place, so any view of w still sees the old values. Change the numbers "
                "themselves: `w -= lr * w.grad` inside `with torch.no_grad():`."
            ))
        after = case["grad_after"]
        if after["kind"] == "tensor" and "values" in after:
            kept = same_values(after["values"], gradient, rtol=0, atol=0)
            cleared = not np.any(after["values"])
            if not kept and not cleared:
                return Mistake("changed-grad", (
                    f"Your function changed w.grad (on {on}): it no longer holds the gradient "
                    "backward() left there. Use it without changing it: w -= lr * w.grad "
                    "(`w.grad *= lr` changes the caller's gradient)."
                ))
    return None


sgd_update = Exercise(
    "sgd_update",
    chapter=CHAPTER,
    title="An in-place update autograd allows",
    expects=Function("sgd_update", ("w", "lr"), returns="nothing: it changes w in place"),
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
            "update-while-recording",
        ),
        (
            "unsupported operand type(s) for *: 'float' and 'NoneType'",
            "w.grad is None: did your function clear the gradient before using it?",
            "grad-cleared-before-use",
        ),
        (
            "view size is not compatible with input tensor's size and stride",
            ".view() needs contiguous memory, and w may be a transposed tensor: update w as it "
            "is (w -= lr * w.grad), or use .reshape().",
            "view-of-non-contiguous",
        ),
        (
            "doesn't match the broadcast shape",
            "an in-place update whose right-hand side has another shape than w.",
            "update-of-other-shape",
        ),
    ],
)
