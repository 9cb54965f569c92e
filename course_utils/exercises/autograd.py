"""Chapter 02 — Autograd: leaves, accumulated gradients, in-place updates and the version counter.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it. Every probe runs on the CPU with small tensors: autograd's rules are the same on
every device, and a check must finish in well under a second.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.answer_source import returns_a_value
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import same_values, shape_text, tensor_problem, value_facts
from course_utils.exercises.running import set_up_torch_once

CHAPTER = "autograd"

set_up_torch_once()  # input_gradient's probe uses the meta device: pay its one-time set-up at import


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
_TAIL_SHARE_AT_LEAST = 0.02  # a normal draw: 4.55 %; 2 424 draws put a miss 6 sigma away
_AGAIN_SHAPE_INDEX = 1  # (64, 32): called again after the same seed, then once more


def _probe_new_parameter(answer, run):
    torch.set_default_dtype(torch.float32)  # the check restores the learner's default dtype
    cases, made = [], []
    for index, shape in enumerate(_PARAMETER_SHAPES):
        torch.manual_seed(index)  # the check restores the learner's random state afterwards
        on = f"shape={shape_text(list(shape))}"
        got = run(answer, shape, on=on)
        grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)  # (the check puts the learner's own mode back at the end)
        made.append(got)
        case = {"on": on, "shape": list(shape), "got": value_facts(got),
                "grad_enabled_after": grad_enabled_after}
        if isinstance(got, torch.Tensor):
            case["is_leaf"] = bool(got.is_leaf)
            case["grad_fn"] = _grad_fn_name(got)
        cases.append(case)
    # Twice and in sequence: the same seed again must give the same numbers (torch's generator),
    # and the call after it new numbers, in a new tensor.
    shape = _PARAMETER_SHAPES[_AGAIN_SHAPE_INDEX]
    torch.manual_seed(_AGAIN_SHAPE_INDEX)
    again = run(answer, shape, on=f"shape={shape_text(list(shape))} again, after the same torch.manual_seed")
    following = run(answer, shape, on=f"shape={shape_text(list(shape))} once more, right after")
    first = made[_AGAIN_SHAPE_INDEX]
    return {
        "cases": cases,
        "again": value_facts(again),
        "following": value_facts(following),
        "same_object": bool(again is first or following is again),
    }


def _judge_new_parameter(record):
    cases = record["cases"]
    for case in cases:
        got, on = case["got"], case["on"]
        if got["kind"] == "NoneType":
            return Mistake("returned-none",
                           f"new_parameter returned None (on {on}); end your function with `return`.")
        expected = {"kind": "tensor", "shape": case["shape"], "dtype": "torch.float32"}
        problem = tensor_problem(got, expected, what="your parameter", on=on, check_device=False)
        if problem:
            return problem
        if "values" not in got:
            return Mistake("off-default-device", (
                f"Your parameter is on the {got['device']} device, where its numbers cannot be "
                f"read (on {on}); make it on the default device: torch.randn(shape) * 0.01."
            ))
        if case["grad_fn"] is not None:
            return Mistake("not-a-leaf", (
                f"Your tensor was made by an operation (grad_fn={case['grad_fn']}, on {on}), so "
                "it is not a leaf: backward() leaves its .grad None and sends the gradient to "
                "the hidden tensor it was computed from. Do every operation (scaling, reshaping, "
                "copying) first, then switch tracking on and return that very tensor: "
                "(torch.randn(shape) * 0.01).requires_grad_()."
            ))
        if not got["requires_grad"]:
            return Mistake("requires-grad-never-on", (
                f"Your tensor does not require grad (on {on}): autograd will never compute a "
                "gradient for it, so training would not change it. Switch tracking on after "
                "scaling: .requires_grad_()."
            ))
        if not case["is_leaf"]:
            return Mistake("not-a-leaf",
                           f"Your tensor is not a leaf (on {on}); create it fresh, not from another tensor.")
        if not case["grad_enabled_after"]:
            return Mistake("grad-mode-left-off", (
                f"After new_parameter ran, autograd was switched off for the whole session (on "
                f"{on}): torch.set_grad_enabled(False) stays off, so no later forward pass would "
                "be recorded and backward() would fail. No switch is needed here: scale first, "
                "then .requires_grad_() (or use `with torch.no_grad():`, which switches back on)."
            ))
    # Judge the spread on all the large draws together: thousands of numbers leave no room
    # for a correct answer to fail by bad luck.
    large = [case for case in cases if len(case["got"]["values"].ravel()) >= _ENOUGH_FOR_STATISTICS]
    values = np.concatenate([np.asarray(c["got"]["values"], dtype=np.float64).ravel() for c in large])
    on = "shapes " + ", ".join(shape_text(c["shape"]) for c in large)
    std, mean = float(values.std()), float(values.mean())
    if values.min() == values.max():
        return Mistake("constant-values", (
            f"All your values are equal to {values.min():.4g} (on {on}): a parameter needs "
            "random values, torch.randn(shape) * 0.01, or every unit of a layer learns the same."
        ))
    if values.min() >= 0:
        if values.max() < _STD * 1.01 and 0.004 < mean < 0.006:
            return Mistake("rand-not-randn", (
                f"All your values lie in [0, 0.01) (on {on}): that is torch.rand, which draws "
                "uniformly from [0, 1). Use torch.randn, which draws from a normal distribution "
                "around 0."
            ))
        return Mistake("all-non-negative", (
            f"All your values are ≥ 0 (on {on}); numbers drawn by torch.randn(shape) * 0.01 are "
            "negative about half of the time."
        ))
    if 0.7 < std < 1.3 and abs(mean) < 0.1:
        return Mistake("randn-unscaled", (
            f"Your values have a standard deviation of about {std:.1f} (on {on}): that is "
            "torch.randn unscaled. Multiply by 0.01."
        ))
    if not 0.008 < std < 0.012 or abs(mean) > 0.002:
        return Mistake("wrong-mean-or-spread", (
            f"Your values have mean {mean:.4f} and standard deviation {std:.4f} (on {on}); "
            "expected mean about 0 and standard deviation about 0.01: torch.randn(shape) * 0.01."
        ))
    # A normal distribution puts about 1 draw in 22 beyond two standard deviations; thousands
    # of draws with (almost) none there come from another distribution with the same spread.
    beyond = int(np.sum(np.abs(values - mean) > 2 * _STD))
    if beyond < _TAIL_SHARE_AT_LEAST * values.size:
        return Mistake("not-normal", (
            f"Your values have the right spread, but only {beyond} of {values.size} lie beyond "
            f"±0.02, two standard deviations (on {on}); numbers drawn by torch.randn(shape) * 0.01 "
            "land there about 1 time in 22. They do not come from a normal distribution: draw "
            "with torch.randn(shape)."
        ))
    for case in cases:
        values = np.asarray(case["got"]["values"], dtype=np.float64)
        if values.size and np.abs(values).max() > 0.1:
            return Mistake("values-too-large", (
                f"Some of your values are as large as {np.abs(values).max():.3g} (on {case['on']}); "
                "torch.randn(shape) * 0.01 keeps them near 0."
            ))
    first = cases[_AGAIN_SHAPE_INDEX]
    shape = shape_text(first["shape"])
    if record["same_object"]:
        return Mistake("same-tensor-every-call", (
            f"Calling new_parameter({shape}) again returned the very same tensor object as an "
            "earlier call: two layers built with it would share one weight. Every call must "
            "make a new tensor."
        ))
    again, following = record["again"], record["following"]
    template = {"kind": "tensor", "shape": first["shape"], "dtype": "torch.float32"}
    for got in (again, following):
        problem = tensor_problem(got, template, what="your parameter",
                                 on=f"shape={shape} called again", check_device=False)
        if problem:
            return problem
        if "values" not in got:
            return Mistake("off-default-device",
                           f"Your parameter is on the {got['device']} device when called again (shape={shape}).")
    if not same_values(again["values"], first["got"]["values"], rtol=0, atol=0):
        return Mistake("not-torch-generator", (
            f"After the same torch.manual_seed, new_parameter({shape}) gave different numbers "
            "than the first time: your function does not draw from torch's random generator, "
            "so seeding cannot make a run reproducible. Draw with torch.randn(shape)."
        ))
    if same_values(following["values"], again["values"], rtol=0, atol=0):
        return Mistake("reseeded-every-call", (
            f"Two calls of new_parameter({shape}) in a row returned the same numbers: every "
            "call must draw new ones from torch's generator, without resetting it (no "
            "torch.manual_seed inside the function) or reusing an earlier draw."
        ))
    return None


new_parameter = Exercise(
    "new_parameter",
    chapter=CHAPTER,
    title="A parameter autograd will fill",
    expects=Function("new_parameter", ("shape",), returns="a float32 tensor of that shape that requires grad"),
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
            "scaled-after-requires-grad",
        ),
        (
            "randn() received an invalid combination of arguments",
            "torch.randn takes the shape as it is, torch.randn(shape), or unpacked, "
            "torch.randn(*shape).",
            "randn-shape-argument",
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
_FIRST, _SECOND, _STALE, _DOUBLE = (
    "a first call, with w.grad still None",
    "a second call with the same w",
    "a call on a w whose .grad holds an old gradient",
    "a float64 w and a non-contiguous float64 x",
)


def _probe_fresh_gradient(answer, run):
    generator = torch.Generator().manual_seed(2)
    x1, x2, x3 = (torch.randn(_W_SHAPE, generator=generator) for _ in range(3))
    stale = torch.randn(_W_SHAPE, generator=generator) * 10
    w = torch.randn(_W_SHAPE, generator=generator).requires_grad_(True)
    # float64, and x a transposed (non-contiguous) view: the task allows any w and x alike.
    x4 = torch.randn(tuple(reversed(_W_SHAPE)), generator=generator, dtype=torch.float64).t()
    w64 = torch.randn(_W_SHAPE, generator=generator, dtype=torch.float64).requires_grad_(True)

    calls = []

    def call(weight, x, on):
        if calls and not calls[-1]["w_leaf"]:
            return None  # an earlier call broke w; the judge reports that call
        start = weight.detach().clone()
        given = x.clone() if x.is_contiguous() else x.t().clone().t()
        stored = [0]  # backward() stores into w.grad; torch.autograd.grad and formulas do not
        handle = weight.register_post_accumulate_grad_hook(lambda p: stored.__setitem__(0, stored[0] + 1))
        try:
            got = run(answer, weight, given, on=on)
        finally:
            handle.remove()
        grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)  # (the check puts the learner's own mode back at the end)
        calls.append({
            "grad_enabled_after": grad_enabled_after,
            "on": on,
            "x": x.numpy().copy(),
            "got": value_facts(got),
            "returned_x": got is given,
            "x_tracked": bool(given.requires_grad) != bool(x.requires_grad),
            "stored": stored[0],
            "x_changed": not torch.equal(given, x),
            "w_changed": not torch.equal(weight.detach(), start),
            "w_leaf": bool(weight.is_leaf and weight.requires_grad),
        })
        return got

    first = call(w, x1, _FIRST)
    first_copy = value_facts(first).get("values") if isinstance(first, torch.Tensor) else None
    call(w, x2, _SECOND)
    first_later = value_facts(first)
    w.grad = stale.clone()
    call(w, x3, _STALE)
    call(w64, x4, _DOUBLE)
    return {
        "calls": calls,
        "stale": stale.numpy().copy(),
        "first_changed": first_copy is not None and "values" in first_later
        and not np.array_equal(first_later["values"], first_copy),
    }


def _judge_fresh_gradient(record):
    calls, stale = record["calls"], record["stale"]
    x1 = calls[0]["x"]
    for call in calls:
        on, got, x = call["on"], call["got"], call["x"]
        if got["kind"] == "NoneType":
            return Mistake("returned-none", (
                f"fresh_gradient returned None (on {on}). Return the gradient: after "
                "loss.backward() it is in w.grad."
            ))
        if call["x_changed"]:
            return Mistake("changed-x", f"Your function changed its input x (on {on}); leave x as it was.")
        if call["x_tracked"]:
            return Mistake("requires-grad-on-x", (
                f"Your function switched on requires_grad of the caller's x (on {on}): x is data "
                "here, not a parameter. From then on every operation on x is recorded and each "
                "backward() adds into x.grad too. Leave x as it is; only w requires grad."
            ))
        if call["w_changed"]:
            return Mistake("changed-w",
                           f"Your function changed w itself (on {on}); only its gradient may change.")
        if not call.get("grad_enabled_after", True):
            return Mistake("grad-mode-left-off", (
                f"After fresh_gradient ran, autograd was switched off for the whole session (on "
                f"{on}): torch.set_grad_enabled(False) stays off, so the next call's loss would "
                "not be recorded and its backward() would fail. Leave the grad mode alone (or "
                "use `with torch.no_grad():`, which switches back on)."
            ))
        if not call["w_leaf"]:
            return Mistake("w-no-longer-leaf", (
                f"After your function ran, w is no longer a leaf that requires grad (on {on}); "
                "leave w as it is and only clear its gradient."
            ))
        template = {"kind": "tensor", "shape": list(x.shape), "dtype": str(torch.from_numpy(x).dtype),
                    "device": "cpu"}
        problem = tensor_problem(got, template, what="your gradient", on=on)
        if problem:
            return problem
        values = got["values"]
        if on == _SECOND and same_values(values, x1 + x):
            return Mistake("never-cleared", (
                "On the second call with the same w you returned the sum of both calls' "
                "gradients: gradients accumulate — backward() adds to w.grad, it does not "
                "overwrite it. Clear it before backward() with `w.grad = None`."
            ))
        if on == _STALE and same_values(values, stale + x):
            return Mistake("cleared-after-backward", (
                "When w.grad already held an old gradient, your result was the old one plus "
                "the new one: backward() adds to w.grad. Clear it before backward() with "
                "`w.grad = None`."
            ))
        if same_values(values, 2 * x) and call["stored"] == 2:
            return Mistake("backward-twice", (
                f"Your gradient is twice the right one (on {on}): two backward() calls add up. "
                "Call backward() once."
            ))
        problem = tensor_problem(got, {**template, "values": x}, what="your gradient", on=on)
        if problem:
            return problem + " The gradient of (w * x).sum() with respect to w is x itself."
        if call["returned_x"] and call["stored"]:
            return Mistake("returned-x", (
                f"Your function returned x itself (on {on}), after backward(): the numbers are "
                "right only because this loss's gradient happens to equal x. Return the gradient "
                "backward() computed: w.grad."
            ))
        if call["stored"] == 0:
            how = "returned x itself" if call["returned_x"] else "returned the right numbers"
            return Mistake("no-backward", (
                f"Your function {how}, but no backward() stored a gradient in w.grad (on {on}). "
                "The task asks for the gradient computed by backward() (x is only what it "
                "happens to be for this loss): loss = (w * x).sum(); loss.backward(); "
                "return w.grad."
            ))
    if record["first_changed"]:
        return Mistake("returned-live-grad", (
            "The tensor your function returned on the first call changed when you called it "
            "again: you returned w.grad itself, and the next call changed that tensor in "
            "place (as w.grad.zero_() and backward() into a kept w.grad do). Clear with "
            "`w.grad = None` — backward() then makes a new tensor — or return w.grad.clone()."
        ))
    return None


fresh_gradient = Exercise(
    "fresh_gradient",
    chapter=CHAPTER,
    title="A fresh gradient every time",
    expects=Function("fresh_gradient", ("w", "x"), returns="a tensor shaped like w: the gradient"),
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
            "zero-of-missing-grad",
        ),
        (
            "a leaf Variable that requires grad",
            "an in-place change of w itself. Only clear its gradient: `w.grad = None`.",
            "in-place-change-of-w",
        ),
        (
            "Trying to backward through the graph a second time",
            "a second backward() through the same loss: call backward() once per loss.",
            "second-backward",
        ),
        (
            "attempting to assign a gradient with dtype",
            "w.grad set to a tensor of another dtype than w (torch.zeros(shape) is float32, "
            "this w float64): clear with `w.grad = None`, or make it like w, torch.zeros_like(w).",
            "grad-of-other-dtype",
        ),
    ],
)


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
    [-30.0, -21.0, -8.0, 0.5, 6.0, 12.0, 21.0, 30.0],  # no 0: a stable form has a kink there
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
    start, upstream, x = first_x
    call("the first x again, a second call (x.grad cleared in between)", start, upstream * 2, x)
    return cases


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


# ============================================================================================
# A7 — a gradient as a value: torch.autograd.grad leaves every .grad alone
# ============================================================================================
def input_gradient(f, x):
    x = x.detach().requires_grad_(True)  # a new leaf on the same numbers; the caller's x is left alone
    (gradient,) = torch.autograd.grad(f(x).sum(), x)
    return gradient


# The functions input_gradient is given: the learner's code calls them, so a grading kernel
# must not guard them (course_utils.grading.guarded_code).
LEARNER_FACING = ("_x_sin_x", "_mean_square")


def _x_sin_x(t):
    """f(t) = t · sin(t), element by element; its derivative is sin(t) + t · cos(t)."""
    return t * torch.sin(t)


def _mean_square(t):
    """f(t) = mean(t²), a single number; its gradient is 2t / t.numel()."""
    return (t * t).mean()


_IG_LINEAR = "linear"  # f is a Linear(3, 2) layer: d sum(x Wᵀ + b) / dx = every row W.sum(0)
_IG_X_SIN_X = "x_sin_x"
_IG_MEAN_SQUARE = "mean_square"
_IG_TWICE = "the same layer and the same x again, a second call"


def _grad_facts(tensor):
    return None if tensor.grad is None else value_facts(tensor.grad)


def _probe_input_gradient(answer, run):
    generator = torch.Generator().manual_seed(5)
    layer = torch.nn.Linear(3, 2)
    with torch.no_grad():
        # Column sums far apart (and none equal to 1), so a wrong reduction shows in every entry.
        layer.weight.copy_(torch.tensor([[0.5, -2.0, 1.5], [1.25, 0.75, -3.0]]))
        layer.bias.copy_(torch.tensor([0.1, -0.2]))
    weight = layer.weight.detach().numpy().copy()
    parameters = dict(layer.named_parameters())

    calls = []

    def call(f, kind, x, on, out_numel):
        if calls and not calls[-1]["grad_enabled_after"]:
            return None  # an earlier call switched autograd off; the judge reports that call
        readable = x.device.type != "meta"
        start = x.detach().clone() if readable else None
        requires_grad_before = bool(x.requires_grad)
        x_grad_before = _grad_facts(x)
        params_before = {name: _grad_facts(p) for name, p in parameters.items()}
        flags_before = {name: p.requires_grad for name, p in parameters.items()}
        training_before = layer.training
        got = run(answer, f, x, on=on)
        grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)  # (the check puts the learner's own mode back at the end)
        calls.append({
            "on": on,
            "kind": kind,
            "shape": [int(n) for n in x.shape],
            "dtype": str(x.dtype),
            "device": str(x.device),
            "x": start.numpy().copy() if readable else None,
            "out_numel": out_numel,
            "got": value_facts(got),
            "returned_x": got is x,
            "grad_enabled_after": grad_enabled_after,
            "x_changed": readable and not torch.equal(x.detach(), start),
            "requires_grad_before": requires_grad_before,
            "requires_grad_after": bool(x.requires_grad),
            "x_grad_before": x_grad_before,
            "x_grad_after": _grad_facts(x),
            "params_before": params_before if f is layer else None,
            "params_after": {name: _grad_facts(p) for name, p in parameters.items()} if f is layer else None,
            # "Leave no trace" covers f too: its parameters' requires_grad and its train/eval mode.
            "frozen_params": sorted(name for name, p in parameters.items()
                                    if flags_before[name] != p.requires_grad),
            "mode_changed": layer.training != training_before,
        })
        for name, p in parameters.items():  # the next call starts from the flags it should find
            p.requires_grad_(flags_before[name])
        layer.train(training_before)
        return got

    x = torch.randn(4, 3, generator=generator)
    call(layer, _IG_LINEAR, x,
         "a Linear(3, 2) layer whose .grad are None, and an x of shape (4, 3) that does not "
         "require grad", 8)
    # A batch of one that requires grad, with old gradients in x.grad and in the layer's .grad
    # (as in the middle of gradient accumulation); then the very same call again.
    one = torch.randn(1, 3, generator=generator).requires_grad_(True)
    one.grad = torch.randn(1, 3, generator=generator)
    for p in parameters.values():
        p.grad = torch.randn(p.shape, generator=generator)
    call(layer, _IG_LINEAR, one,
         "the same layer and an x of shape (1, 3) that requires grad, with old gradients in "
         "x.grad and in the layer's .grad", 2)
    call(layer, _IG_LINEAR, one, _IG_TWICE, 2)
    wide = torch.rand(3, 4, generator=generator, dtype=torch.float64) * 6 - 3
    call(_x_sin_x, _IG_X_SIN_X, wide.t(),
         "f(t) = t * sin(t) on a non-contiguous float64 x of shape (4, 3)", 12)
    call(_mean_square, _IG_MEAN_SQUARE, torch.randn(5, generator=generator),
         "f(t) = (t * t).mean(), a single number, on an x of shape (5,)", 1)
    call(layer, _IG_LINEAR, torch.zeros(0, 3), "the Linear layer on an empty x of shape (0, 3)", 0)
    call(_x_sin_x, _IG_X_SIN_X, torch.empty(2, 3, device="meta"),
         "f(t) = t * sin(t) on an x on the meta device (it stands for a GPU), shape (2, 3)", 6)
    return {"calls": calls, "weight": weight, "returns_a_value": returns_a_value(answer)}


def _expected_input_gradient(call, weight):
    x = call["x"]
    if x is None:
        return None
    if call["kind"] == _IG_LINEAR:
        return np.broadcast_to(weight.sum(axis=0), x.shape)
    if call["kind"] == _IG_X_SIN_X:
        return np.sin(x) + x * np.cos(x)
    return 2 * x / x.size


def _grad_change(before, after):
    """How a .grad changed ("filled", "cleared", "changed") or None when it did not."""
    if before is None and after is None:
        return None
    if before is None:
        return "filled"
    if after is None:
        return "cleared"
    if before.get("shape") != after.get("shape") or not same_values(
        before.get("values", []), after.get("values", []), rtol=0, atol=0
    ):
        return "changed"
    return None


def _judge_input_gradient(record):
    calls, weight = record["calls"], record["weight"]
    previous = None  # the values of the call before, read only on the repeated call
    for call in calls:
        on, got = call["on"], call["got"]
        if got["kind"] == "NoneType" and record.get("returns_a_value"):
            return Mistake("returned-none-grad", (
                f"input_gradient returned None (on {on}), from a `return` that gives a value: "
                "what it returns is None here. If it is a .grad, that stays None unless "
                "backward() reached that very tensor as a leaf: a tensor computed from x (x * 1, "
                "x.clone()) is not a leaf, so its .grad is not kept. Ask for the gradient of the "
                "leaf you made, or use torch.autograd.grad(output, leaf)."
            ))
        if got["kind"] == "NoneType":
            return Mistake("returned-none",
                           f"input_gradient returned None (on {on}); end your function with `return`.")
        if not call["grad_enabled_after"]:
            return Mistake("grad-mode-left-off", (
                f"After input_gradient ran, autograd was switched off for the whole session (on "
                f"{on}): torch.set_grad_enabled(False) stays off, so no later forward pass would "
                "be recorded. Leave the grad mode as it was."
            ))
        if call["x_changed"]:
            return Mistake("changed-x",
                           f"Your function changed the numbers of its input x (on {on}); leave x as it was.")
        before, after = call["requires_grad_before"], call["requires_grad_after"]
        if not before and after:
            return Mistake("tracks-callers-x", (
                f"Your function switched on requires_grad of the caller's x (on {on}) and left it "
                "on: from then on every operation on x is recorded and each backward() adds into "
                "x.grad. Make a new leaf for yourself instead: x.detach().requires_grad_()."
            ))
        if before and not after:
            return Mistake("untracks-callers-x", (
                f"Your function switched off requires_grad of the caller's x (on {on}): the "
                "caller's training would no longer compute its gradient. Work on a new leaf, "
                "x.detach().requires_grad_(), and leave x as it is."
            ))
        change = _grad_change(call["x_grad_before"], call["x_grad_after"])
        if change:
            return Mistake("changed-x-grad", (
                f"Your function {change} x.grad (on {on}); it must hold what it held before. "
                "backward() stores into the .grad of the tensors it reaches; "
                "torch.autograd.grad returns the gradient instead and stores nothing."
            ))
        if call.get("frozen_params"):
            name = call["frozen_params"][0]
            return Mistake("changed-param-flags", (
                f"Your function changed requires_grad of f's parameters (layer.{name}; on {on}): "
                "the caller's training would no longer compute their gradients. Leave no trace "
                "on f either: torch.autograd.grad(f(x).sum(), x) asks for x's gradient alone, "
                "with f as it is."
            ))
        if call.get("mode_changed"):
            return Mistake("changed-f-mode", (
                f"Your function switched f between train and eval mode and left it so (on {on}): "
                "dropout and batch norm would then behave differently in the caller's next "
                "forward pass. Leave f's mode as you found it (or put it back before returning)."
            ))
        if call["params_before"] is not None:
            for name, before_grad in call["params_before"].items():
                change = _grad_change(before_grad, call["params_after"][name])
                if change == "filled":
                    return Mistake("filled-param-grads", (
                        f"Your function left a gradient in the .grad of f's parameters "
                        f"(layer.{name}.grad was None, now holds one; on {on}): backward() stores "
                        "into every leaf that requires grad, the layer's weights included, and the "
                        "next optimizer step would use it. torch.autograd.grad(f(x).sum(), x) "
                        "returns the gradient with respect to x alone and stores nothing."
                    ))
                if change:
                    how = ("cleared" if change == "cleared"
                           else "changed (added to, or replaced)")
                    return Mistake("changed-param-grads", (
                        f"Your function {how} the .grad of f's parameters (layer.{name}.grad; "
                        f"on {on}): the old gradient a training loop was accumulating there is "
                        "no longer what it was. Leave it alone: torch.autograd.grad stores "
                        "nothing in any .grad, where backward() adds into them."
                    ))
        template = {"kind": "tensor", "shape": call["shape"], "dtype": call["dtype"], "device": call["device"]}
        problem = tensor_problem(got, template, what="your gradient", on=on)
        if problem:
            return problem + " Expected a gradient shaped like x, with x's dtype and device."
        expected = _expected_input_gradient(call, weight)
        if expected is None or "values" not in got:
            continue
        values = got["values"]
        if call["returned_x"]:
            return Mistake("returned-x",
                           f"Your function returned x itself (on {on}); return the gradient of f(x).sum().")
        if (on == _IG_TWICE and previous is not None and same_values(previous, expected)
                and same_values(values, 2 * expected)):
            return Mistake("grad-kept-between-calls", (
                f"The second call with the same layer and the same x returned twice the right "
                f"gradient ({on}): gradients accumulate in a .grad that your function keeps "
                "from one call to the next. Work on a new leaf every call, and let "
                "torch.autograd.grad return the gradient."
            ))
        if call["out_numel"] > 1 and expected.size and same_values(values, expected / call["out_numel"]):
            return Mistake("mean-not-sum", (
                f"Your gradient is the right one divided by {call['out_numel']}, the number of "
                f"values f(x) has (on {on}): you took the gradient of the mean of f(x). The task "
                "asks for f(x).sum()."
            ))
        problem = tensor_problem(got, {**template, "values": expected}, what="your gradient", on=on)
        if problem:
            return problem + " Expected the gradient of f(x).sum() with respect to x."
        previous = values
    return None


input_gradient = Exercise(
    "input_gradient",
    chapter=CHAPTER,
    title="The gradient with respect to the input",
    expects=Function("input_gradient", ("f", "x"),
                     returns="a tensor shaped like x: the gradient of f(x).sum() with respect to x"),
    probe=_probe_input_gradient,
    judge=_judge_input_gradient,
    reference=input_gradient,
    passed_message=(
        "Correct: the gradient with respect to x, for any f and any x, and every .grad and x "
        "left as they were."
    ),
    hints=[
        "backward() would store gradients into x.grad and into every parameter of f. "
        "torch.autograd.grad(output, inputs) returns them instead, as a tuple, and stores nothing.",
        "autograd.grad needs a single number and an x that requires grad. Reduce with .sum(); "
        "make your own leaf on x's numbers, x.detach().requires_grad_(), so the caller's x is untouched.",
        "x = x.detach().requires_grad_(True)\n"
        "(gradient,) = torch.autograd.grad(f(x).sum(), x)\n"
        "return gradient",
    ],
    error_notes=[
        (
            "grad can be implicitly created only for scalar outputs",
            "a gradient asked of f(x) itself, which holds several numbers: reduce it to one "
            "first, f(x).sum() (or pass grad_outputs=torch.ones_like(output)).",
            "gradient-of-many-values",
        ),
        (
            "One of the differentiated Tensors does not require grad",
            "a gradient asked with respect to an x that does not require grad (the check also "
            "passes such an x). Make a leaf that does, without touching the caller's x: "
            "x = x.detach().requires_grad_(), then call f on it.",
            "x-not-recording",
        ),
        (
            "does not require grad and does not have a grad_fn",
            "a gradient asked of a result autograd did not record: the check also passes an x "
            "that does not require grad. Make a leaf that does, without touching the caller's "
            "x: x = x.detach().requires_grad_(), then call f on it.",
            "result-not-recorded",
        ),
        (
            "appears to not have been used in the graph",
            "the tensor you asked the gradient for is not the one f was called on: call f on "
            "the very leaf you pass to torch.autograd.grad.",
            "gradient-of-another-tensor",
        ),
        (
            "meta",
            "the check passes an x on the meta device, which stands for another device such as "
            "a GPU and holds no numbers: keep x where it is, x.detach().requires_grad_(), rather "
            "than going through .cpu(), .numpy() or torch.tensor(...).",
            "x-moved-off-device",
        ),
        (
            "Trying to backward through the graph a second time",
            "a second backward() or autograd.grad through one graph: compute f(x) anew for "
            "each gradient.",
            "second-backward",
        ),
    ],
)
