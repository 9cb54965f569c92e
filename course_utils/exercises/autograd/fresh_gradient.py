"""Chapter 02, A2 — ``fresh_gradient``: gradients accumulate until cleared."""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.autograd.common import CHAPTER
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import same_values, tensor_problem, value_facts


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
# The other states an existing w.grad may be in (what a training loop leaves there): zeros
# (after zero_grad(set_to_none=False)), a huge gradient (float32 cannot hold old + new exactly
# then, so anything that lets backward() add into it and takes the old one back out loses the
# new one), and an overflowed one (inf and nan: 0 * inf is nan).
_ZEROS, _HUGE, _NONFINITE = (
    "a call on a w whose .grad holds zeros",
    "a call on a w whose .grad holds a huge old gradient (about 1e8, float32)",
    "a call on a w whose .grad holds an overflowed old gradient (inf, -inf and nan)",
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
        grad_before = None if weight.grad is None else weight.grad.detach().numpy().copy()
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
            # What w.grad held before the call, and what the call left there.
            "grad_before": grad_before,
            "grad_after": None if weight.grad is None else value_facts(weight.grad),
        })
        return got

    first = call(w, x1, _FIRST)
    first_copy = value_facts(first).get("values") if isinstance(first, torch.Tensor) else None
    call(w, x2, _SECOND)
    first_later = value_facts(first)
    w.grad = stale.clone()
    call(w, x3, _STALE)
    for on, old in (
        (_ZEROS, torch.zeros(_W_SHAPE)),
        (_HUGE, torch.full(_W_SHAPE, 1e8) + torch.arange(6.0).reshape(_W_SHAPE) * 64),
        (_NONFINITE, torch.tensor([[float("inf"), 1.0, float("nan")], [-2.0, float("-inf"), 3.0]])),
    ):
        w.grad = old
        call(w, torch.randn(_W_SHAPE, generator=generator), on)
    call(w64, x4, _DOUBLE)
    return {
        "calls": calls,
        "stale": stale.numpy().copy(),
        "first_changed": first_copy is not None and "values" in first_later
        and not np.array_equal(first_later["values"], first_copy),
    }


def _old_grad_problem(values, x, before, on):
    """Why a wrong gradient depends on the old w.grad, where the numbers show how; else None."""
    if before is None:
        return None
    if np.isfinite(before).all() and not same_values(values, x) and same_values(
            values, (before.astype(np.float32) + x.astype(np.float32)) - before.astype(np.float32)):
        return Mistake("subtracted-old-grad", (
            f"Your gradient was wrong when w.grad held an old gradient (on {on}): it came out "
            "as (old + new) - old, the old gradient taken back out of what backward() added "
            "into it. In floating point that is not the new gradient: with an old gradient of "
            "1e8, float32 keeps about 7 digits, so old + new rounds and the new part is "
            "lost. Don't let backward() add into the old one: clear it first, "
            "`w.grad = None`."
        ))
    if not np.isfinite(before).all():
        wrong_at = ~np.isclose(values, x, rtol=1e-5, atol=1e-6, equal_nan=False)
        if wrong_at.any() and np.isnan(values[wrong_at]).all() and (~np.isfinite(before[wrong_at])).all():
            return Mistake("old-grad-leaked", (
                f"Your gradient is nan where the old w.grad held inf or nan (on {on}): the "
                "old gradient still took part in your result, and an overflowed one does "
                "not cancel (0 * inf, inf - inf and anything with nan are nan). Clear it "
                "before backward() so that it takes no part: `w.grad = None` (or "
                "w.grad.zero_(), which writes zeros whatever was there)."
            ))
    return None


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
        before = call.get("grad_before")
        with np.errstate(invalid="ignore"):
            leaked = _old_grad_problem(values, x, before, on)
        if leaked:
            return leaked
        problem = tensor_problem(got, {**template, "values": x}, what="your gradient", on=on)
        if problem:
            return problem + " The gradient of (w * x).sum() with respect to w is x itself."
        left = call.get("grad_after")
        if left is not None and not (left.get("kind") == "tensor" and "values" in left
                                     and same_values(left["values"], x)):
            if before is not None and "values" in left and same_values(left["values"], before + x):
                what = "the old gradient plus this call's one: backward() added into it"
            elif before is not None and "values" in left and same_values(left["values"], before):
                what = "the old gradient again: it was put back after backward()"
            else:
                what = "something else than this call's gradient"
            return Mistake("old-grad-left-in-w", (
                f"Your result was right, but after the call (on {on}) w.grad held {what}. The "
                "task asks for the gradient computed by backward() on this very w, so that it "
                "lands in w.grad: that is what the caller's next optimizer step reads. Clear the "
                "old one before backward(), `w.grad = None`, and leave the new one there."
            ))
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
