"""Chapter 02, A2 — ``fresh_gradient``: gradients accumulate until cleared.

Engine: applies edges.edge_values (the edges of float32 and of float64 but nan, ±inf and huge
values included, as x; float64 in a non-contiguous layout), a w of zeros, a w of shape (1, 3) and a 0-d
one, the states an existing w.grad may be in (None, zeros, huge, overflowed, entries that cancel)
and states.MODULE_STATES["no-grad"] (called under torch.no_grad(): the answer may raise there, as
the reference does, but must not switch the mode); the reference runs on the judge's side on the
recorded w, x and old w.grad (``expect``). Hand-written because the task's rule, "computed by
backward() on this very w", is checked on the caller's own w (a hook counts what lands in w.grad).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from course_utils.exercises.autograd.common import CHAPTER
from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.edges import edge_values, not_contiguous
from course_utils.exercises.facts import given, same_values, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.states import MODULE_STATES

MESSAGES = Messages("fresh_gradient", {
    "returned-none": (
        "fresh_gradient returned None (on {on}). Return the gradient: after "
        "loss.backward() it is in w.grad."),
    "changed-x": "Your function changed its input x (on {on}); leave x as it was.",
    "requires-grad-on-x": (
        "Your function switched on requires_grad of the caller's x (on {on}): x is data "
        "here, not a parameter. From then on every operation on x is recorded and each "
        "backward() adds into x.grad too. Leave x as it is; only w requires grad."),
    "changed-w": "Your function changed w itself (on {on}); only its gradient may change.",
    "grad-mode-left-off": (
        "After fresh_gradient ran, autograd was switched off for the whole session (on "
        "{on}): torch.set_grad_enabled(False) stays off, so the next call's loss would "
        "not be recorded and its backward() would fail. Leave the grad mode alone (or "
        "use `with torch.no_grad():`, which switches back on)."),
    "grad-mode-switched-on": Message(
        "fresh_gradient was called with autograd switched off (on {on}), and left it switched on "
        "for the whole session: torch.set_grad_enabled(True) does not put back the mode it found, "
        "so the caller's code after it (an evaluation under torch.no_grad()) records a graph "
        "again. Switch it on for your own lines only, `with torch.enable_grad():`, which puts "
        "back the mode it found.",
        advises=("torch.enable_grad()",)),
    "w-no-longer-leaf": (
        "After your function ran, w is no longer a leaf that requires grad (on {on}); "
        "leave w as it is and only clear its gradient."),
    "values-problem": "{problem} The gradient of (w * x).sum() with respect to w is x itself.",
    "never-cleared": (
        "On the second call with the same w you returned the sum of both calls' "
        "gradients: gradients accumulate — backward() adds to w.grad, it does not "
        "overwrite it. Clear it before backward() with `w.grad = None`."),
    "cleared-after-backward": (
        "When w.grad already held an old gradient, your result was the old one plus "
        "the new one (on {on}): backward() adds to w.grad. Clear it before backward() with "
        "`w.grad = None`, whatever it holds."),
    "backward-twice": (
        "Your gradient is twice the right one (on {on}): two backward() calls add up. "
        "Call backward() once."),
    "subtracted-old-grad": (
        "Your gradient was wrong when w.grad held an old gradient (on {on}): it came out "
        "as (old + new) - old, the old gradient taken back out of what backward() added "
        "into it. In floating point that is not the new gradient: with an old gradient of "
        "1e8, float32 keeps about 7 digits, so old + new rounds and the new part is "
        "lost. Don't let backward() add into the old one: clear it first, "
        "`w.grad = None`."),
    "old-grad-leaked": (
        "Your gradient is nan where the old w.grad held inf or nan (on {on}): the "
        "old gradient still took part in your result, and an overflowed one does "
        "not cancel (0 * inf, inf - inf and anything with nan are nan). Clear it "
        "before backward() so that it takes no part: `w.grad = None` (or "
        "w.grad.zero_(), which writes zeros whatever was there)."),
    "left-added": "the old gradient plus this call's one: backward() added into it",
    "left-put-back": "the old gradient again: it was put back after backward()",
    "left-other": "something else than this call's gradient",
    "old-grad-left-in-w": (
        "Your result was right, but after the call (on {on}) w.grad held {what}. The "
        "task asks for the gradient computed by backward() on this very w, so that it "
        "lands in w.grad: that is what the caller's next optimizer step reads. Clear the "
        "old one before backward(), `w.grad = None`, and leave the new one there."),
    "returned-x": (
        "Your function returned x itself (on {on}), after backward(): the numbers are "
        "right only because this loss's gradient happens to equal x. Return the gradient "
        "backward() computed: w.grad."),
    "how-x": "returned x itself",
    "how-numbers": "returned the right numbers",
    "no-backward": (
        "Your function {how}, but no backward() stored a gradient in w.grad (on {on}). "
        "The task asks for the gradient computed by backward() (x is only what it "
        "happens to be for this loss): loss = (w * x).sum(); loss.backward(); "
        "return w.grad."),
    "returned-live-grad": (
        "The tensor your function returned on the first call changed when you called it "
        "again: you returned w.grad itself, and the next call changed that tensor in "
        "place (as w.grad.zero_() and backward() into a kept w.grad do). Clear with "
        "`w.grad = None` — backward() then makes a new tensor — or return w.grad.clone()."),
    "passed": "Correct: every call returns this loss's gradient alone, whatever w.grad held before.",
    "hint-1": "backward() adds into w.grad. Whatever an earlier call left there is added to the new gradient.",
    "hint-2": "Clear before you compute: `w.grad = None` works whether w.grad is None or a tensor.",
    "hint-3": "w.grad = None; (w * x).sum().backward(); return w.grad",
    "zero-of-missing-grad": (
        "w.grad is None until the first backward(), so w.grad.zero_() fails there. "
        "`w.grad = None` clears in every case."),
    "in-place-change-of-w": "an in-place change of w itself. Only clear its gradient: `w.grad = None`.",
    "second-backward": "a second backward() through the same loss: call backward() once per loss.",
    "grad-of-other-dtype": (
        "w.grad set to a tensor of another dtype than w (torch.zeros(shape) is float32, "
        "this w float64): clear with `w.grad = None`, or make it like w, torch.zeros_like(w)."),
})


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
# new one), an overflowed one (inf and nan: 0 * inf is nan), and one whose entries cancel (its
# sum is 0, though it is not).
_ZEROS, _HUGE, _NONFINITE, _CANCELLING = (
    "a call on a w whose .grad holds zeros",
    "a call on a w whose .grad holds a huge old gradient (about 1e8, float32)",
    "a call on a w whose .grad holds an overflowed old gradient (inf, -inf and nan)",
    "a call on a w whose .grad holds an old gradient whose entries cancel (they sum to 0)",
)
_NO_GRAD = MODULE_STATES["no-grad"]


def _edges_but_nan(shape, dtype, shift):
    """``edges.edge_tensor`` without its nan: x's gradient is x itself, so a nan there would be
    the one right answer an answer watching the check could tell from x (tests/probe_spy.py);
    nan in an old w.grad is tried (``_NONFINITE``)."""
    values = [v for v in edge_values(dtype) if v == v]
    return torch.tensor([values[(shift + i) % len(values)] for i in range(math.prod(shape))],
                        dtype=dtype).reshape(shape)


def _same_tensor(a, b) -> bool:
    """Equal shapes and numbers, nan where the other has nan (torch.equal calls nan unequal)."""
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


def _probe_fresh_gradient(answer, run):
    calls = []
    record = {"calls": calls, "raised": None, "first_changed": False}
    try:
        _try_calls(answer, run, record)
    except LearnerRaised as raised:
        # The judge decides: a mistake an earlier call already shows is the one to report, not
        # an error a later input (a 0-d w, the edges of float64) led to.
        record["raised"] = later_error(raised, answer, earlier=bool(calls))
    return record


def _try_calls(answer, run, record):
    calls = record["calls"]
    generator = torch.Generator().manual_seed(2)
    x1, x2, x3 = (torch.randn(_W_SHAPE, generator=generator) for _ in range(3))
    stale = torch.randn(_W_SHAPE, generator=generator) * 10
    w = torch.randn(_W_SHAPE, generator=generator).requires_grad_(True)
    # float64, and x a transposed (non-contiguous) view: the task allows any w and x alike.
    x4 = torch.randn(tuple(reversed(_W_SHAPE)), generator=generator, dtype=torch.float64).t()
    w64 = torch.randn(_W_SHAPE, generator=generator, dtype=torch.float64).requires_grad_(True)

    def call(weight, x, on, state=None):
        if calls and not calls[-1]["w_leaf"]:
            return None  # an earlier call broke w; the judge reports that call
        start = weight.detach().clone()
        grad_before = None if weight.grad is None else weight.grad.detach().numpy().copy()
        given_x = x.clone() if x.is_contiguous() else not_contiguous(x.clone())
        stored = [0]  # backward() stores into w.grad; torch.autograd.grad and formulas do not
        handle = weight.register_post_accumulate_grad_hook(lambda p: stored.__setitem__(0, stored[0] + 1))
        raised_here = False
        try:
            with state.put(torch.nn.Module()) if state is not None else torch.enable_grad():
                grad_enabled_before = torch.is_grad_enabled()
                try:
                    got = run(answer, weight, given_x, on=on)
                except LearnerRaised:
                    if state is None:
                        raise
                    got, raised_here = None, True  # the reference raises here too: allowed
                grad_enabled_after = torch.is_grad_enabled()
        finally:
            handle.remove()
        torch.set_grad_enabled(True)  # (the check puts the learner's own mode back at the end)
        calls.append({
            "grad_enabled_before": grad_enabled_before,
            "grad_enabled_after": grad_enabled_after,
            "raised_here": raised_here,
            "on": on,
            "x": x.numpy().copy(),
            "given": {"w": given(start), "x": given(x)},  # (the probe's inputs; w.grad may be the answer's)
            "got": value_facts(got),
            "returned_x": got is given_x,
            "x_tracked": bool(given_x.requires_grad) != bool(x.requires_grad),
            "stored": stored[0],
            "x_changed": not _same_tensor(given_x, x),
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
    record["stale"] = stale.numpy().copy()
    record["first_changed"] = (first_copy is not None and "values" in first_later
                               and not np.array_equal(first_later["values"], first_copy))
    w.grad = stale.clone()
    call(w, x3, _STALE)
    for on, old in (
        (_ZEROS, torch.zeros(_W_SHAPE)),
        (_HUGE, torch.full(_W_SHAPE, 1e8) + torch.arange(6.0).reshape(_W_SHAPE) * 64),
        (_NONFINITE, torch.tensor([[float("inf"), 1.0, float("nan")], [-2.0, float("-inf"), 3.0]])),
        (_CANCELLING, torch.tensor([[10.0, -10.0, 20.0], [-20.0, 30.0, -30.0]])),
    ):
        w.grad = old
        call(w, torch.randn(_W_SHAPE, generator=generator), on)
    call(w64, x4, _DOUBLE)
    # The edges of x's dtype (the task allows any numbers): ±0, subnormals, huge values whose
    # products overflow, ±inf and nan; float64 ones float32 cannot hold, in a transposed layout.
    edges = torch.randn(3, 6, generator=generator).requires_grad_(True)
    call(edges, _edges_but_nan((3, 6), torch.float32, shift=0),
         "a w of shape (3, 6) and an x holding the edges of float32 (±0, subnormals, huge values, ±inf)")
    edges64 = torch.randn(3, 6, generator=generator, dtype=torch.float64).requires_grad_(True)
    call(edges64, not_contiguous(_edges_but_nan((3, 6), torch.float64, shift=3)),
         "a float64 w and a non-contiguous float64 x holding the edges of float64 (values float32 "
         "cannot hold: huge ones, subnormals)")
    # Weights the task allows besides random ones: all zeros (the loss is 0, its gradient is
    # not), a batch of one, a single number.
    call(torch.zeros(_W_SHAPE, requires_grad=True), torch.randn(_W_SHAPE, generator=generator),
         "a w of zeros (the loss is 0, its gradient x is not)")
    call(torch.randn(1, 3, generator=generator).requires_grad_(True), torch.randn(1, 3, generator=generator),
         "a w and an x of shape (1, 3)")
    call(torch.tensor(0.5, requires_grad=True), torch.tensor(-1.25), "a 0-d w and a 0-d x (single numbers)")
    call(torch.randn(_W_SHAPE, generator=generator).requires_grad_(True), torch.randn(_W_SHAPE, generator=generator),
         f"a w of shape (2, 3), {_NO_GRAD.on}", state=_NO_GRAD)


def _expect_fresh_gradient(record):
    """What the reference returns and leaves in w.grad, on each call's recorded w, x and old
    w.grad, with autograd on (under torch.no_grad() it raises; an answer that returns there
    must return this)."""
    reference = fresh_gradient.reference
    for call in record["calls"]:
        w = tensor_of(call["given"]["w"]).requires_grad_(True)
        w.grad = None if call["grad_before"] is None else torch.from_numpy(np.array(call["grad_before"]))
        with torch.enable_grad():
            call["expected"] = value_facts(reference(w, tensor_of(call["given"]["x"])))["values"]
    return record


def _old_grad_problem(values, x, before, on):
    """Why a wrong gradient depends on the old w.grad, where the numbers show how; else None."""
    if before is None:
        return None
    if np.isfinite(before).all() and not same_values(values, x) and same_values(
            values, (before.astype(np.float32) + x.astype(np.float32)) - before.astype(np.float32)):
        return MESSAGES("subtracted-old-grad", on=on)
    if not np.isfinite(before).all():
        wrong_at = ~np.isclose(values, x, rtol=1e-5, atol=1e-6, equal_nan=False)
        if wrong_at.any() and np.isnan(values[wrong_at]).all() and (~np.isfinite(before[wrong_at])).all():
            return MESSAGES("old-grad-leaked", on=on)
    return None


def _explained(problem):
    text = MESSAGES.text("values-problem", problem=problem)
    return Mistake(problem.id, text) if isinstance(problem, Mistake) else text


def _judge_fresh_gradient(record):
    calls, stale = record["calls"], record["stale"]
    x1 = calls[0]["x"]
    for call in calls:
        on, got, x, expected = call["on"], call["got"], call["x"], call["expected"]
        if call["grad_enabled_after"] != call["grad_enabled_before"]:
            return MESSAGES("grad-mode-left-off" if call["grad_enabled_before"] else "grad-mode-switched-on", on=on)
        if call["raised_here"]:
            continue  # under torch.no_grad() the reference raises too
        if got["kind"] == "NoneType":
            return MESSAGES("returned-none", on=on)
        if call["x_changed"]:
            return MESSAGES("changed-x", on=on)
        if call["x_tracked"]:
            return MESSAGES("requires-grad-on-x", on=on)
        if call["w_changed"]:
            return MESSAGES("changed-w", on=on)
        if not call["w_leaf"]:
            return MESSAGES("w-no-longer-leaf", on=on)
        template = {"kind": "tensor", "shape": list(x.shape), "dtype": str(torch.from_numpy(x).dtype),
                    "device": "cpu"}
        tolerance = {"rtol": 1e-7, "atol": 1e-9} if template["dtype"] == "torch.float64" else {}
        problem = tensor_problem(got, template, what="your gradient", on=on)
        if problem:
            return problem
        values = got["values"]
        before = call.get("grad_before")
        with np.errstate(all="ignore"):
            if on == _SECOND and same_values(values, x1 + x):
                return MESSAGES("never-cleared")
            if before is not None and not same_values(values, expected) and (
                    same_values(values, stale + x) if on == _STALE else same_values(values, before + x)):
                return MESSAGES("cleared-after-backward", on=on)
            if same_values(values, 2 * x) and call["stored"] == 2 and not same_values(values, expected):
                return MESSAGES("backward-twice", on=on)
            leaked = _old_grad_problem(values, x, before, on)
        if leaked:
            return leaked
        problem = tensor_problem(got, {**template, "values": expected}, what="your gradient", on=on, **tolerance)
        if problem:
            return _explained(problem)
        left = call.get("grad_after")
        if left is not None and not (left.get("kind") == "tensor" and "values" in left
                                     and same_values(left["values"], expected, **tolerance)):
            with np.errstate(all="ignore"):
                if before is not None and "values" in left and same_values(left["values"], before + x):
                    what = MESSAGES.text("left-added")
                elif before is not None and "values" in left and same_values(left["values"], before):
                    what = MESSAGES.text("left-put-back")
                else:
                    what = MESSAGES.text("left-other")
            return MESSAGES("old-grad-left-in-w", on=on, what=what)
        if call["returned_x"] and call["stored"]:
            return MESSAGES("returned-x", on=on)
        if call["stored"] == 0:
            how = MESSAGES.text("how-x" if call["returned_x"] else "how-numbers")
            return MESSAGES("no-backward", how=how, on=on)
    if record["first_changed"]:
        return MESSAGES("returned-live-grad")
    if record["raised"]:
        return Raised(record["raised"])
    return None


fresh_gradient = Exercise(
    "fresh_gradient",
    chapter=CHAPTER,
    title="A fresh gradient every time",
    expects=Function("fresh_gradient", ("w", "x"), returns="a tensor shaped like w: the gradient"),
    probe=_probe_fresh_gradient,
    judge=_judge_fresh_gradient,
    expect=_expect_fresh_gradient,
    reference=fresh_gradient,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "zero-of-missing-grad": "'NoneType' object has no attribute",
        "in-place-change-of-w": "a leaf Variable that requires grad",
        "second-backward": "Trying to backward through the graph a second time",
        "grad-of-other-dtype": "attempting to assign a gradient with dtype",
    }),
    messages=MESSAGES,
)
