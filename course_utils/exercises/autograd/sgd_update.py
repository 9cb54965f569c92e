"""Chapter 02, A5 — ``sgd_update``: update a leaf in place, without recording it.

Engine: applies edges.edge_tensor (the edges of float32, ±inf and nan included, as the values of
w and of its .grad), a 0-d w, and states.MODULE_STATES["no-grad"] (called under torch.no_grad(), as inside
an optimizer's step), with a learning rate above 1; the reference runs on the judge's side on
the recorded w, .grad and lr (``expect``). Hand-written because its named mistakes read what
happened to the caller's very tensor (its memory, its .grad, a w of an earlier call).
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.autograd.common import CHAPTER, _grad_fn_name
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.edges import edge_tensor
from course_utils.exercises.facts import given, same_values, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.states import MODULE_STATES

MESSAGES = Messages("sgd_update", {
    "grad-mode-left-off": (
        "After your function ran, autograd was switched off for the whole session "
        "(on {on}): torch.set_grad_enabled(False) stays off. Use "
        "`with torch.no_grad():`, which switches it back on at the end of the block."),
    "grad-mode-switched-on": Message(
        "Your function was called with autograd switched off (on {on}), and left it switched on "
        "for the whole session: torch.set_grad_enabled(True) does not put back the mode it found. "
        "Use `with torch.no_grad():`, which puts back whatever mode was on before the block.",
        advises=("torch.no_grad()",)),
    "changed-w-dtype": (
        "After your update, w has dtype {dtype_after} on {device}; it was {dtype} on "
        "cpu (on {on}). Change its numbers in place and nothing else."),
    "kept-first-w": (
        "Your function updated the w of an earlier call, but left this call's w "
        "unchanged (on {on}): it keeps something from the first call (an optimizer "
        "built once holds the first w only). Update the w you are given, every call."),
    "left-this-w-unchanged": (
        "Your function changed w on earlier calls, but left this call's w unchanged (on {on}): "
        "something this input has that the earlier ones had not made your function leave the "
        "caller's tensor as it was (working on a copy, as .contiguous(), .reshape() and .clone() "
        "make of a non-contiguous w, or skipping the step). Update the w you are given, whatever "
        "its layout and values: `w -= lr * w.grad` inside `with torch.no_grad():`."),
    "rebinds-name": (
        "The caller's w is unchanged (on {on}); your function returned the new "
        "values instead. `w = w - lr * w.grad` makes a new tensor and binds the "
        "local name w to it; the caller (and an optimizer) still hold the old one. "
        "Change the tensor itself, in place: `w -= lr * w.grad` inside "
        "`with torch.no_grad():`."),
    "zeroed-grad-first": (
        "The caller's w is unchanged and its .grad is all zeros after your function "
        "ran (on {on}): the gradient was cleared before the update read it, so w "
        "moved by lr × 0. Clearing .grad belongs after the update (or before the next "
        "backward()), never between backward() and the update."),
    "w-unchanged": (
        "The caller's w is unchanged after your function ran (on {on}). If you wrote "
        "`w = w - lr * w.grad`, that binds the local name w to a new tensor. Update the "
        "tensor itself, in place (`w -= ...`, w.sub_(...)), inside `with torch.no_grad():`."),
    "uphill": (
        "You moved w up the gradient (on {on}): w + lr * grad makes the loss larger. "
        "Gradient descent subtracts: w -= lr * w.grad."),
    "momentum-kept": (
        "On the second call with the same w, your step was lr * (w.grad + 0.9 * the "
        "previous gradient) (on {on}): momentum kept from the first call. One step of "
        "plain gradient descent uses only the gradient in w.grad now: w -= lr * w.grad."),
    "values-problem": "{problem} Expected w - lr * w.grad.",
    "float32-step": (
        "w after your update is right only to float32 precision (on {on}): part of the "
        "update was computed in float32, and a float64 w loses the digits float64 keeps. "
        "Compute in w's own dtype: w -= lr * w.grad."),
    "requires-grad-switched-off": (
        "After your update w no longer requires grad (on {on}): the next backward() "
        "would not compute its gradient. Leave requires_grad alone; do the update inside "
        "`with torch.no_grad():` instead."),
    "update-recorded": Message(
        "After your update w has grad_fn={grad_fn} (on {on}): the update was "
        "recorded in the graph. Do it inside `with torch.no_grad():`.",
        advises=("torch.no_grad()",)),
    "data-assignment": (
        "w has the right values but lives in new memory (on {on}): assigning "
        "`w.data = ...` swaps in a new tensor's storage instead of changing w's numbers "
        "in place, so any view of w still sees the old values. Change the numbers "
        "themselves: `w -= lr * w.grad` inside `with torch.no_grad():`."),
    "changed-grad": (
        "Your function changed w.grad (on {on}): it no longer holds the gradient "
        "backward() left there. Use it without changing it: w -= lr * w.grad "
        "(`w.grad *= lr` changes the caller's gradient)."),
    "passed": (
        "Correct: w changed in place, is still a leaf that requires grad, and nothing was "
        "recorded. (If you used w.data, it works here; the section on detach() versus .data "
        "shows why torch.no_grad() is the safer habit.)"),
    "hint-1": (
        "w must change in place (the caller and the optimizer hold that very tensor), so "
        "`w = ...` is out: it only rebinds a local name."),
    "hint-2": (
        "Autograd refuses an in-place change of a leaf that requires grad while it records. "
        "Stop the recording around the update."),
    "hint-3": "with torch.no_grad():\n    w -= lr * w.grad",
    "update-while-recording": (
        "an in-place update of a leaf that requires grad while autograd records. Put the "
        "update inside `with torch.no_grad():`."),
    "grad-cleared-before-use": "w.grad is None: did your function clear the gradient before using it?",
    "view-of-non-contiguous": (
        ".view() needs contiguous memory, and w may be a transposed tensor: update w as it "
        "is (w -= lr * w.grad), or use .reshape()."),
    "update-of-other-shape": "an in-place update whose right-hand side has another shape than w.",
    "slice-of-0-d-w": (
        "w may be a 0-d tensor (a single number, such as a learned scale): it has no dimension "
        "to slice, so w[:] fails. Update the tensor itself in place, `w -= lr * w.grad` inside "
        "`with torch.no_grad():` (w[...] = ... also works for every shape)."),
    "loop-over-0-d-w": (
        "w may be a 0-d tensor (a single number, such as a learned scale): it has no rows to "
        "loop over. Update the whole tensor in place at once, `w -= lr * w.grad` inside "
        "`with torch.no_grad():`."),
})


# ============================================================================================
# A5 — update a leaf in place, without recording it
# ============================================================================================
def sgd_update(w, lr):
    with torch.no_grad():
        w -= lr * w.grad


_MOMENTUM = 0.9
_NO_GRAD = MODULE_STATES["no-grad"]


def _sgd_weights(generator):
    """(description, w, lr, grad, state): the same w twice in a row, an nn.Parameter, a float64
    non-contiguous leaf (a GPU copy or a transposed weight is just as much a leaf), then a w
    updated under torch.no_grad() (inside an optimizer's step), a rate above 1, and a w and a
    .grad holding the edges of float32 (±0, subnormals, huge values, ±inf, nan): the .grad
    an overflowed backward() leaves. ``grad`` None: a real backward() makes it."""
    first = torch.randn(4, 3, generator=generator).requires_grad_(True)
    parameter = torch.nn.Parameter(torch.randn(4, 3, generator=generator))
    transposed = torch.randn(3, 4, generator=generator, dtype=torch.float64).t().requires_grad_(True)
    more = torch.Generator().manual_seed(6)  # (the cases above keep the inputs they always had)
    quiet = torch.randn(4, 3, generator=more).requires_grad_(True)
    fast = torch.randn(4, 3, generator=more).requires_grad_(True)
    edges = edge_tensor((3, 6), torch.float32, shift=0).requires_grad_(True)
    scalar = torch.tensor(1.5).requires_grad_(True)  # the task allows any leaf: a 0-d one too
    return [
        ("a tensor of shape (4, 3) with its .grad filled, lr=0.1", first, 0.1, None, None),
        ("the same w again, with a new gradient, lr=0.5", first, 0.5, None, None),
        ("an nn.Parameter of shape (4, 3), lr=0.01", parameter, 0.01, None, None),
        ("a non-contiguous float64 leaf of shape (4, 3), lr=0.1", transposed, 0.1, None, None),
        (f"a tensor of shape (4, 3), lr=0.1, {_NO_GRAD.on}", quiet, 0.1, None, _NO_GRAD),
        ("a tensor of shape (4, 3), lr=2.0 (a large rate)", fast, 2.0, None, None),
        ("a w of shape (3, 6) and a .grad holding the edges of float32 (0, -0, subnormals, huge "
         "values, ±inf, nan), lr=0.1", edges, 0.1, edge_tensor((3, 6), torch.float32, shift=7), None),
        ("a 0-d leaf (a single number, as a learned scale or temperature), lr=0.1", scalar, 0.1,
         torch.tensor(-0.75), None),
    ]


def _probe_sgd_update(answer, run):
    generator = torch.Generator().manual_seed(5)
    cases, previous, seen = [], {}, {}
    for description, w, lr, grad, state in _sgd_weights(generator):
        x = torch.randn(4, 3, generator=generator, dtype=w.dtype) if grad is None else None
        if not (w.is_leaf and w.requires_grad):
            break  # an earlier call broke this w; the judge reports that call
        w.grad = None
        if grad is None:
            ((w * x) ** 2).sum().backward()  # a real gradient, made by a real backward()
        else:
            w.grad = grad.clone()
        start = w.detach().clone()
        gradient = w.grad.detach().clone()
        address = w.data_ptr()
        earlier = {key: (t, t.detach().clone()) for key, t in seen.items() if t is not w}
        on = f"w: {description}"
        context = state.put(torch.nn.Module()) if state is not None else torch.enable_grad()
        with context:
            grad_enabled_before = torch.is_grad_enabled()
            returned = run(answer, w, lr, on=on)
            grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        cases.append(
            {
                "on": on,
                "lr": lr,
                "start": start.numpy().copy(),
                "gradient": gradient.numpy().copy(),
                "given": {"w": given(start), "grad": given(gradient)},
                "grad_enabled_before": grad_enabled_before,
                "previous_gradient": previous.get(id(w)),
                "w": value_facts(w),
                "is_leaf": bool(w.is_leaf),
                "grad_fn": _grad_fn_name(w),
                "same_memory": w.data_ptr() == address,
                "grad_after": value_facts(w.grad),
                "returned": value_facts(returned),
                "grad_enabled_after": grad_enabled_after,
                # whether this call moved a w of an earlier call (an optimizer built once)
                "earlier_w_changed": any(not torch.equal(t.detach(), old) for t, old in earlier.values()),
            }
        )
        previous[id(w)] = gradient.numpy().copy()
        seen[id(w)] = w
    return cases


def _expect_sgd_update(cases):
    """What the reference leaves in w on the recorded w, .grad and lr, in w's own dtype."""
    reference = sgd_update.reference
    for case in cases:
        w = tensor_of(case["given"]["w"]).requires_grad_(True)
        w.grad = tensor_of(case["given"]["grad"])
        with torch.set_grad_enabled(case["grad_enabled_before"]):
            reference(w, case["lr"])
        case["expected"] = w.detach().numpy().copy()
    return cases


def _tolerance(dtype: str) -> dict:
    return {"rtol": 1e-7, "atol": 1e-9} if dtype == "torch.float64" else {"rtol": 1e-5, "atol": 1e-6}


def _judge_sgd_update(cases):
    updated_before = False
    for case in cases:
        on, lr = case["on"], case["lr"]
        start, gradient, w = case["start"], case["gradient"], case["w"]
        expected = case["expected"]
        if case["grad_enabled_after"] != case["grad_enabled_before"]:
            return MESSAGES("grad-mode-left-off" if case["grad_enabled_before"] else "grad-mode-switched-on", on=on)
        dtype = str(torch.from_numpy(start).dtype)
        if w["dtype"] != dtype or w["device"] != "cpu":
            return MESSAGES("changed-w-dtype", dtype_after=w["dtype"], device=w["device"], dtype=dtype, on=on)
        if same_values(w["values"], start, rtol=0, atol=0) and not same_values(expected, start, rtol=0, atol=0):
            returned = case["returned"]
            if updated_before:
                return MESSAGES("kept-first-w" if case["earlier_w_changed"] else "left-this-w-unchanged", on=on)
            if returned["kind"] == "tensor" and same_values(returned.get("values", []), expected):
                return MESSAGES("rebinds-name", on=on)
            grad_after = case.get("grad_after") or {}
            if (grad_after.get("kind") == "tensor" and grad_after.get("values") is not None
                    and np.size(grad_after["values"]) and not np.any(grad_after["values"])
                    and np.any(gradient)):
                return MESSAGES("zeroed-grad-first", on=on)
            return Mistake("rebinds-name", MESSAGES.text("w-unchanged", on=on))
        updated_before = True
        with np.errstate(all="ignore"):
            if not same_values(w["values"], expected) and same_values(w["values"], start + lr * gradient):
                return MESSAGES("uphill", on=on)
            previous = case["previous_gradient"]
            if previous is not None and not same_values(w["values"], expected) and same_values(
                w["values"], start - lr * (gradient + _MOMENTUM * previous)
            ):
                return MESSAGES("momentum-kept", on=on)
        problem = tensor_problem(w, {**w, "values": expected}, what="w after your update", on=on,
                                 rtol=1e-5, atol=1e-6)
        if problem:
            text = MESSAGES.text("values-problem", problem=problem)
            return Mistake(problem.id, text) if isinstance(problem, Mistake) else text
        if dtype == "torch.float64" and not same_values(w["values"], expected, rtol=1e-12, atol=1e-14):
            return MESSAGES("float32-step", on=on)
        if not w["requires_grad"]:
            return MESSAGES("requires-grad-switched-off", on=on)
        if case["grad_fn"] is not None or not case["is_leaf"]:
            return MESSAGES("update-recorded", grad_fn=case["grad_fn"], on=on)
        if not case["same_memory"]:
            return MESSAGES("data-assignment", on=on)
        after = case["grad_after"]
        if after["kind"] == "tensor" and "values" in after:
            kept = same_values(after["values"], gradient, rtol=0, atol=0)
            cleared = not np.any(after["values"])
            if not kept and not cleared:
                return MESSAGES("changed-grad", on=on)
    return None


sgd_update = Exercise(
    "sgd_update",
    chapter=CHAPTER,
    title="An in-place update autograd allows",
    expects=Function("sgd_update", ("w", "lr"), returns="nothing: it changes w in place"),
    probe=_probe_sgd_update,
    judge=_judge_sgd_update,
    expect=_expect_sgd_update,
    reference=sgd_update,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "update-while-recording": "a leaf Variable that requires grad",
        "grad-cleared-before-use": "unsupported operand type(s) for *: 'float' and 'NoneType'",
        "view-of-non-contiguous": "view size is not compatible with input tensor's size and stride",
        "update-of-other-shape": "doesn't match the broadcast shape",
        "slice-of-0-d-w": "slice() cannot be applied to a 0-dim tensor",
        "loop-over-0-d-w": "of a 0-d tensor",
    }),
    messages=MESSAGES,
)
