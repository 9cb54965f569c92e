"""The classic mistakes of a scaled, clipped step (clipping the scaled gradients, no clipping,
a backward pass of the unscaled loss, update() before step()), written as
the steps they are: scaled_clipped_step's expect replays each from a case's starting state, on
the judge's side, to name a mistake only where the learner's update is exactly what it gives;
and the exercise's words (``MESSAGES``), kept here to leave its module under 500 lines."""

from __future__ import annotations

import torch

from course_utils.exercises.messages import Message, Messages


# Wrong orders, run (on the judge's side) from a case's first start, to name a mistake only when
# the learner's update is exactly what that order gives.
def _clips_scaled(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # on scaled gradients
    scaler.step(optimizer)
    scaler.update()


def _no_clip(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def _unscaled_backward(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss)  # made, but not back-propagated
    loss.backward()  # not scaled: unscale_ then divides the true gradients by the scale
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def _update_before_step(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.update()  # forgets that unscale_ ran: step() divides by the scale a second time
    scaler.step(optimizer)


_WRONG_ORDERS = {
    "update_first": _update_before_step,
    "clips_scaled": _clips_scaled,
    "no_clip": _no_clip,
    "unscaled_backward": _unscaled_backward,
}


# --------------------------------------------------------------------------------------------
# scaled_clipped_step's words: one table, by mistake id (its judge fills the named fields)
# --------------------------------------------------------------------------------------------
_NOT_FLOAT16 = (
    "The model's first layer gave {dtypes} outputs (on {on}), so the forward pass did not run "
    "under float16 autocast: compute the loss inside `with torch.autocast(x.device.type, "
    "dtype=torch.float16):`."
)
MESSAGES = Messages("scaled_clipped_step", {
    "changes-the-batch": (
        "Your function changed the batch it was given (on {on}): unpack it with `x, y = batch` "
        "and leave x and y as they are."),
    "no-forward": "The model never ran a forward pass (on {on}): compute loss_fn(model(x), y).",
    "no-autocast": _NOT_FLOAT16,
    "bfloat16-autocast": Message(_NOT_FLOAT16, advises=("torch.autocast(x.device.type, dtype=torch.float16)",)),
    "converts-the-targets": (
        "loss_fn was given targets of {dtypes} (on {on}), not y as the batch holds it: pass y as it "
        "is. Under autocast the loss runs in the precision autocast chooses for it (float32 for "
        "mse_loss and cross_entropy); targets rounded to float16 change the loss and its "
        "gradients."),
    "loss-outside-autocast": (
        "loss_fn ran outside autocast (on {on}): only the model's forward pass was inside the "
        "`with torch.autocast(...)` block. Compute loss_fn(model(x), y) inside it, as the task "
        "says: autocast then chooses each of the loss's ops its precision (float32 for mse_loss "
        "and cross_entropy; plain ops such as out * out stay in float16), while outside it the "
        "loss runs in whatever dtype the model gave (float16, or float32 after .float())."),
    "leaves-the-model-changed": (
        "Your function left the model otherwise than the task leaves it (on {on}): {difference}. "
        "A training step changes the parameters and their .grad, nothing else: leave the mode "
        "and requires_grad as they were given."),
    "changes-settings": (
        "Your function changed {what} (on {on}): a training step leaves the caller's session as "
        "it was (no torch.manual_seed, torch.set_default_dtype or the like inside it)."),
    "steps-on-overflow": (
        "The step on gradients that overflowed was applied (on {on}): the weights {how}. "
        "scaler.step(optimizer) skips optimizer.step() when the gradients hold inf or nan; "
        "calling optimizer.step() yourself (or making the gradients finite first) applies a step "
        "that must not happen."),
    "steps-on-non-finite-grads": (
        "The weights became inf or nan (on {on}), on a batch whose gradients are finite: the step "
        "used gradients that were still scaled or left over. Zero the gradients first, and step "
        "with scaler.step(optimizer)."),
    "own-scaler": (
        "The GradScaler you were given was never used (on {on}): your function scaled the loss "
        "with a scaler of its own. A new GradScaler starts from its init_scale (65536 by default, "
        "enough to make these float16 gradients overflow), and what it learns is lost after the "
        "call. Use the scaler passed in: its scale carries over from step to step."),
    "no-zero-grad": (
        "The step was skipped (on {on}): .grad held inf from an earlier skipped step, backward() "
        "added the new gradients to it, and the scaler saw inf. Clear the gradients first: "
        "optimizer.zero_grad()."),
    "no-optimizer-step": (
        "optimizer.step() of the optimizer you were given never ran (on {on}), so the weights did "
        "not move: finish with scaler.step(optimizer), then scaler.update()."),
    "several-steps": (
        "The optimizer stepped {steps} times in one call (on {on}): step once, with "
        "scaler.step(optimizer)."),
    "zero-grad-between-backward-and-step": (
        "The optimizer stepped, but the weights did not move (on {on}): the gradients were zero "
        "at the step. Call optimizer.zero_grad() before backward(), not between backward() and "
        "the step."),
    "update-before-step": (
        "Your step is as short as gradients divided by the scale twice: scaler.update() ran "
        "before scaler.step(optimizer). update() starts the next iteration and forgets that "
        "unscale_ ran, so step() unscales the gradients a second time. Finish with "
        "scaler.step(optimizer), then scaler.update(). (on {on})"),
    "clips-before-unscale": (
        "Your step is what clipping the *scaled* gradients gives: clip_grad_norm_ ran before "
        "scaler.unscale_(optimizer), so it compared max_norm with gradients {scale:g} times too "
        "large, and the step then divided them by the scale: far too short a step. Call "
        "scaler.unscale_(optimizer) right after backward(), then clip_grad_norm_. (on {on})"),
    "no-clipping": (
        "Your step is the unclipped one: the gradients reached the optimizer without being "
        "clipped to max_norm={max_norm:g}. Clip with torch.nn.utils.clip_grad_norm_("
        "model.parameters(), max_norm) after scaler.unscale_(optimizer) and before "
        "scaler.step(optimizer). (on {on})"),
    "backward-on-the-plain-loss": (
        "Your step is as short as gradients divided by the scale: backward() ran on the plain "
        "loss, and unscale_ then divided the true gradients by the scale. Back-propagate the "
        "scaled loss: scaler.scale(loss).backward(). (on {on})"),
    "clips-before-unscale-or-updates-first": (
        "Your step is as short as two slips make it, and this input cannot tell them apart: "
        "clip_grad_norm_ before scaler.unscale_(optimizer), or scaler.update() before "
        "scaler.step(optimizer) (update() forgets that unscale_ ran, so step() divides the "
        "gradients by the scale again). The order is: scale(loss).backward(), unscale_, "
        "clip_grad_norm_, step, update. (on {on})"),
    "replaces-optimizer-or-scaler": (
        "The first call was right, but on {on} the weights are not what the next step gives with "
        "the optimizer and scaler you were given (their state carries over from step to step). "
        "Use the optimizer and scaler passed in, every call."),
    "wrong-clip-norm": (
        "Your step goes the right way but is {ratio:.3g} times the right length (on {on}): clip "
        "to the max_norm you are given ({max_norm:g}), over all the gradients together "
        "(model.parameters()), after unscale_, and change nothing else."),
    "values-then": (
        " It should be one step of: zero_grad(), the loss under float16 autocast, "
        "scaler.scale(loss).backward(), scaler.unscale_(optimizer), clip_grad_norm_, "
        "scaler.step(optimizer), scaler.update()."),
    "given-scaler-not-updated": (
        "The scaler you were given still has the scale {before:g} after the step (on {on}), where "
        "it should be {expected:g}: scaler.update() never ran on it. Call scaler.update() after "
        "scaler.step(optimizer), on the scaler passed in."),
    "update-not-once": (
        "After the step the scale is {after:g}, not {expected:g} (on {on}): call scaler.update() "
        "once per step, after scaler.step(optimizer)."),
    "passed": (
        "Correct: the gradients were unscaled before clipping, so max_norm applied to the true "
        "gradients; a step on gradients that overflowed was skipped and the scale halved."),
    "hint-1": (
        "Clip the true gradients, not the scaled ones: between backward() and the step, "
        "scaler.unscale_(optimizer) divides .grad by the scale."),
    "hint-2": (
        "The order: optimizer.zero_grad(); the loss under torch.autocast(x.device.type, "
        "dtype=torch.float16); scaler.scale(loss).backward(); scaler.unscale_(optimizer); "
        "clip_grad_norm_; scaler.step(optimizer); scaler.update()."),
    "hint-3": (
        "x, y = batch; optimizer.zero_grad(); with torch.autocast(x.device.type, "
        "dtype=torch.float16): loss = loss_fn(model(x), y); scaler.scale(loss).backward(); "
        "scaler.unscale_(optimizer); torch.nn.utils.clip_grad_norm_(model.parameters(), "
        "max_norm); scaler.step(optimizer); scaler.update()"),
    "unscale-before-scaled-backward": (
        "the scaler has no scale yet: scaler.scale(loss) makes it. Back-propagate the scaled "
        "loss, scaler.scale(loss).backward(), before scaler.unscale_(optimizer)."),
    "unscale-twice": (
        "scaler.unscale_(optimizer) may run once per step: scaler.step() knows it ran and does "
        "not unscale again. Call it once, before clipping."),
    "no-gradients-at-step": (
        "the scaler found no gradients to check: either they were cleared between backward() and "
        "the step (zero_grad() belongs before backward()), or step/update ran twice. The order: "
        "zero_grad(), scaled backward(), unscale_, clip, scaler.step(optimizer) once, "
        "scaler.update() once."),
    "update-missing": (
        "the previous call's scaler.step(optimizer) was not followed by scaler.update() (it came "
        "after it, or not at all): end every step with scaler.step(optimizer), then "
        "scaler.update(), which also resets the scaler for the next one."),
    "error-if-nonfinite": (
        "clip_grad_norm_(..., error_if_nonfinite=True) raises on a step whose gradients "
        "overflowed; leave error_if_nonfinite at its default: the scaler skips that step."),
})
NOTE_CLUES = {
    "unscale-before-scaled-backward": "_scale is None",
    "unscale-twice": "unscale_() has already been called",
    "no-gradients-at-step": "No inf checks were recorded",
    "update-missing": "unscale_() is being called after step()",
    "error-if-nonfinite": "is non-finite, so it cannot be clipped",
}
