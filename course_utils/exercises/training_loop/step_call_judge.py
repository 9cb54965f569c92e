"""train_step's judge of one call, and train_step's words: what the parameters, the gradients and
the returned loss after one call show, against what one correct step gives from the same start
(computed by train_step's expect), with the classic mistakes of a training step named; and the
exercise's table of messages (``MESSAGES``), which train_step.py uses for its hints and notes."""

from __future__ import annotations

import numpy as np

from course_utils.exercises.core import Mistake
from course_utils.exercises.facts import same_values
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.training_loop.common import RETURNED_MESSAGES, TOLERANCE, _returned_problem

MESSAGES = Messages("train_step", {
    **RETURNED_MESSAGES,
    "ignores-given-model": (
        "Your function never ran the model it was given (on {on}). Use its arguments "
        "(model, optimizer, loss_fn, x, y), not variables of the notebook with the same "
        "purpose."
    ),
    "changes-input-in-place": (
        "Your function changed its input {name} in place (on {on}). The caller still uses "
        "the batch (to log, to plot, for another model): leave {name} as it was given."
    ),
    "leaves-grad-disabled": (
        "Your function left autograd switched off (on {on}): after it returned, "
        "torch.is_grad_enabled() was False, so the next training step cannot compute "
        "gradients. Use `with torch.no_grad():` blocks, which switch it back on, rather "
        "than torch.set_grad_enabled(False)."
    ),
    "changes-session-settings": (
        "Your function changed {setting} (on {on}), and left it changed for its caller: one "
        "correct training step changes nothing but the model's parameters, their .grad and the "
        "optimizer's state. Seeding, the default dtype and the grad mode are the caller's to "
        "set, once, outside train_step (torch.manual_seed inside it restarts every random "
        "stream of the notebook at each step)."
    ),
    "trains-in-eval-mode": (
        "The forward pass ran with the model in eval mode (on {on}), although it was given "
        "in train mode: a training step trains in the mode it is given. In eval mode dropout "
        "is off and batch norm stops learning its statistics; leave the mode alone in "
        "train_step (no model.eval())."
    ),
    "converts-model-dtype": (
        "Your function changed the model's dtype (on {on}): it was given as {dtype} "
        "and its parameters are {dtypes_after} after the call (.float(), "
        ".double() and .to(dtype) convert a module in place, for the caller too). Train the "
        "model as it is given, on the x it is given: they have the same dtype."
    ),
    "changes-learning-rate": (
        "After your function ran (on {on}), the optimizer's learning rate was "
        "{after:g} instead of {before:g}: your function changed it, so "
        "every later step uses that rate too. Leave the optimizer's settings alone in "
        "train_step (a learning-rate schedule is the caller's business)."
    ),
    "forces-train-mode": (
        "The forward pass ran with the model in train mode (on {on}), although it was given "
        "in eval mode: you switched it with model.train(). A training step trains in the "
        "mode it is given (a caller may have switched dropout off on purpose); leave the "
        "mode alone in train_step."
    ),
    "gives-back-train-mode": (
        "Your function gave the model back in train mode (on {on}), although it was given "
        "in eval mode. Leave the mode as it was given: no model.train() in train_step."
    ),
    "leaves-eval-mode": (
        "Your function gave the model back in eval mode (on {on}), although it was given in "
        "train mode: every later training step would then run without dropout and without "
        "batch norm learning. Leave the mode as it was given."
    ),
    "unfreezes-parameters": (
        "Your function switched requires_grad back on for {names}, "
        "which were given frozen (on {on}). model.requires_grad_(True) or "
        "p.requires_grad = True undoes a freeze the caller chose (a pretrained layer kept "
        "as it is): those parameters then get gradients and the optimizer moves them. "
        "Leave requires_grad as it was given; backward() fills .grad of the parameters "
        "that require it, which is all a step needs."
    ),
    "moves-frozen-parameters": (
        "Your step moved {names}, which were given frozen "
        "(requires_grad=False) (on {on}). A frozen parameter has no gradient (.grad None), "
        "and optimizer.step() skips it; it moves only if your code gives it a gradient (a "
        "zero .grad made by hand is enough for momentum or weight decay to move it) or "
        "unfreezes it for the step. Do forward, loss, optimizer.zero_grad(), backward(), "
        "step() and leave requires_grad and .grad of the frozen ones alone."
    ),
    "no-backward": Message(
        "backward() never ran (on {on}), so no gradient reached .grad{unchanged}. Call "
        "loss.backward() once, after the loss and before optimizer.step().",
        advises=("loss.backward()",),
    ),
    "clause-parameters-unchanged": " and the parameters did not change",
    "no-optimizer-step": Message(
        "The parameters did not change (on {on}): optimizer.step() of the optimizer you "
        "were given never ran. Call optimizer.step() after backward(): it is the step "
        "that actually moves the parameters.",
        advises=("optimizer.step()",),
    ),
    "ignores-given-optimizer": (
        "The parameters moved (on {on}), but the optimizer you were given never took a "
        "step: you updated them another way (by hand, or with an optimizer of your own). "
        "Call optimizer.step() on the `optimizer` argument: it may be Adam or have "
        "momentum, and only it keeps that state from step to step."
    ),
    "zero-grad-between-backward-and-step": (
        "The parameters did not change (on {on}), and afterwards no gradient was "
        "left in .grad. You cleared the gradients between backward() and step(): "
        "step() then finds nothing to apply. Clear them before backward() (or after "
        "step()), never between the two."
    ),
    "step-before-backward": (
        "The parameters did not change (on {on}), although optimizer.step() ran and "
        "backward() filled .grad: step() ran before backward(), when there was no new "
        "gradient to apply yet. The order is zero_grad(), backward(), step()."
    ),
    "several-steps": (
        "optimizer.step() ran {steps} times in one call (on {on}); one training "
        "step is one optimizer.step()."
    ),
    "no-zero-grad": Message(
        "On {on}, your update used the sum of both batches' gradients: gradients "
        "accumulate. backward() adds to .grad, so without optimizer.zero_grad() every "
        "step also applies all the earlier gradients again. Clear them once per batch, "
        "before backward().",
        advises=("optimizer.zero_grad()",),
    ),
    "several-backwards-sgd": (
        "backward() ran {backwards} times in one call (on {on}), and the "
        "update was {backwards} SGD steps' worth: each backward() adds its "
        "gradient to .grad. Call backward() once per step, on one forward pass's loss."
    ),
    "ascends-gradient": "Your update went up the gradient (on {on}); optimizer.step() goes down it.",
    "rescales-gradient": (
        "Your step goes the way of this batch's gradient, but is {ratio:.3g} "
        "times its length (on {on}; the gradient has norm {norm:.3g}): something "
        "rescaled it, such as gradient clipping (clip_grad_norm_) or a factor on the "
        "loss. One training step applies the gradient as it is: forward, loss, "
        "zero_grad(), backward(), step()."
    ),
    "converts-targets": (
        "Your step computed the loss on the targets made whole numbers (on {on}): its update "
        "is what y.long() (or y.int()) as the target gives, not y as it was given. loss_fn may "
        "be any loss: nn.MSELoss takes float targets, and nn.CrossEntropyLoss takes class "
        "probabilities as well as class indices. Use y as it is given: loss_fn(model(x), y)."
    ),
    "ignores-loss-fn": (
        "Your step followed plain cross entropy, not the loss_fn you were given (on "
        "{on}): this loss_fn uses label smoothing. Compute the loss with "
        "loss_fn(prediction, y)."
    ),
    "new-optimizer-each-call": (
        "On {on}, your step is what a brand-new Adam takes: its running averages of "
        "the earlier gradients were lost. Use the optimizer you were given, every "
        "call; don't create one inside train_step."
    ),
    "several-backwards": (
        "backward() ran {backwards} times in one call (on {on}); call it once per "
        "step, on the loss of this call's forward pass."
    ),
    "clears-some-gradients": Message(
        "After your function ran (on {on}), the .grad of {names} still held the gradients of "
        "earlier batches besides this one's: they were never cleared, so the step applied them "
        "again. Clear the gradients of every parameter the optimizer holds, in every param "
        "group: optimizer.zero_grad().",
        advises=("optimizer.zero_grad()",),
    ),
    "computes-in-float32": (
        "Your step computed in float32 (on {on}): the loss you returned, {got!r}, agrees with "
        "this float64 batch's loss, {expected!r}, only to float32's precision, and so do the "
        "gradients the step applied. Keep the dtype you are given: loss_fn(model(x), y), with "
        "no .float() on the prediction, the batch or the model."
    ),
    "wrong-update": (
        "After your function ran (on {on}), the parameters are not what one optimizer step "
        "on this batch gives. Do forward, loss (with loss_fn), zero_grad(), backward(), "
        "step(), once each."
    ),
    "several-forwards": (
        "The model ran {forwards} forward passes in one call (on {on}); one training "
        "step is one forward pass. Compute the loss once, call backward() on it and return "
        "its .item(): another pass costs time, and with dropout its loss is not the one you "
        "trained on."
    ),
    "float-of-loss-warns": (
        "torch warned \"Converting a tensor with requires_grad=True to a scalar may lead to "
        "unexpected behavior\": float(loss) on a loss that is part of the graph. loss.item() "
        "gives the same number without the warning."
    ),
    "passed": (
        "Correct: one forward, one loss, cleared gradients, one backward, one step, and the "
        "loss returned as a float. Two calls in a row give exactly two optimizer steps, with "
        "plain SGD as with Adam."
    ),
    "hint-1": (
        "The steps are: forward (model(x)), loss (loss_fn(prediction, y)), clear the old "
        "gradients, backward, step. The batch (x, y) is given to you."
    ),
    "hint-2": (
        "The optimizer clears the gradients of the parameters it was given: "
        "optimizer.zero_grad(). Do it before loss.backward(), or after optimizer.step(), but "
        "never between backward() and step()."
    ),
    "hint-3": (
        "Return the loss as a Python float, read after the step: the tensor's .item() "
        "(float(loss) works too, but warns on a tensor that requires grad). Check the order "
        "against chapter 04's six steps before you look at the solution."
    ),
    "second-backward": "loss.backward() called twice on one forward pass. Call it once per step.",
    "loss-arguments-swapped": (
        "the loss received the integer class labels where it expects the model's output. "
        "A loss function takes (prediction, target), in that order: "
        "loss_fn(model(x), y)."
    ),
    "loss-not-recorded": (
        "the forward pass ran inside torch.no_grad(), or the loss was detached (.item(), "
        ".detach()) before backward(). Keep the loss tensor for backward(); call .item() "
        "only on the value you return."
    ),
    "dtype-converted": (
        "the model and the batch you were given have the same dtype (float64 in this "
        "check), so the mismatch comes from a conversion in your code (.float(), dtype=...) "
        "or from a tensor or model of the notebook used instead of the arguments."
    ),
    "prediction-reshaped": (
        "the prediction and the target no longer line up, on a batch of one example: "
        "model(x) has shape (1, classes), and .squeeze() (or a reshape) drops its batch "
        "dimension. Give loss_fn the prediction as the model returns it."
    ),
})

# Error notes: the clue in the error's message, by note id.
ERROR_CLUES = {
    "second-backward": "backward through the graph a second time",
    "loss-arguments-swapped": "not implemented for 'Long'",
    "loss-not-recorded": "does not require grad and does not have a grad_fn",
    "dtype-converted": "must have the same dtype",
    "prediction-reshaped": "doesn't match the broadcast shape",
}


def _stale_gradients(call, sizes, tolerance) -> list[str]:
    """The parameters whose .grad after the call differs from the reference's, when others'
    agree: gradients left from an earlier batch on part of the model."""
    got, expected = call.get("gradients"), call.get("expected_gradients")
    if isinstance(got, str) or isinstance(expected, str) or got is None or expected is None or not sizes:
        return []
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        return []
    differ, agree, start = [], [], 0
    for name, size in sizes.items():
        part = slice(start, start + size)
        start += size
        if not expected[part].any():
            continue  # a frozen parameter: no gradient in either
        (agree if same_values(got[part], expected[part], **tolerance) else differ).append(name)
    return differ if agree else []


def _judge_step_call(call, *, kind, lr, index, first_gradient, sizes=None):
    on, before = call["on"], call["before"]
    params, gradients = call["parameters"], call["gradients"]
    tolerance = TOLERANCE.get(call.get("dtype"), TOLERANCE["float32"])
    if call["forwards"] == 0:
        return MESSAGES("ignores-given-model", on=on)
    if call["inputs_changed"]:
        return MESSAGES("changes-input-in-place", name=call["inputs_changed"][0], on=on)
    if not call["grad_enabled_after"]:
        return MESSAGES("leaves-grad-disabled", on=on)
    changed = [name for name in call.get("settings_changed", [])
               if name not in call.get("expected_settings_changed", [])]
    if changed:
        return MESSAGES("changes-session-settings", setting=changed[0], on=on)
    if call.get("eval_forwards"):
        return MESSAGES("trains-in-eval-mode", on=on)
    if call.get("dtypes_after", [call.get("dtype")]) != [call.get("dtype")]:
        return MESSAGES("converts-model-dtype", on=on, dtype=call["dtype"],
                        dtypes_after=", ".join(call["dtypes_after"]))
    lr_before = call.get("lr_before") or [call.get("lr")] * len(call.get("lr_after", []))
    moved_lr = [(after, was) for after, was in zip(call.get("lr_after", []), lr_before) if after != was]
    if moved_lr:
        return MESSAGES("changes-learning-rate", on=on, after=moved_lr[0][0], before=moved_lr[0][1])
    if call.get("train_forwards"):
        return MESSAGES("forces-train-mode", on=on)
    if call.get("given_training") is False and call.get("any_training_after"):
        return MESSAGES("gives-back-train-mode", on=on)
    if call.get("given_training", True) and not call.get("training_after", True):
        return MESSAGES("leaves-eval-mode", on=on)
    if call.get("unfrozen"):
        return MESSAGES("unfreezes-parameters", names=", ".join(call["unfrozen"]), on=on)
    if call.get("frozen_moved"):
        return MESSAGES("moves-frozen-parameters", names=", ".join(call["frozen_moved"]), on=on)
    unchanged = same_values(params, before, rtol=0, atol=0)
    if call["backwards"] == 0:
        clause = MESSAGES.text("clause-parameters-unchanged") if unchanged else ""
        return MESSAGES("no-backward", on=on, unchanged=clause)
    if call["steps"] == 0:
        if unchanged:
            # With Adam (the second phase), the SGD phase's steps ran: an optimizer other than
            # the one given now (kept from an earlier call) took them.
            mistake = "no-optimizer-step" if kind == "sgd" else "ignores-given-optimizer"
            return Mistake(mistake, MESSAGES.text("no-optimizer-step", on=on))
        return MESSAGES("ignores-given-optimizer", on=on)
    if unchanged:
        if isinstance(gradients, str):
            return MESSAGES("zero-grad-between-backward-and-step", on=on)
        return MESSAGES("step-before-backward", on=on)
    if call["steps"] > 1:
        return MESSAGES("several-steps", steps=call["steps"], on=on)
    if kind in ("sgd", "mse"):
        gradient = call["gradient"]
        if index == 1 and same_values(params, before - lr * (gradient + first_gradient)):
            return MESSAGES("no-zero-grad", on=on)
        if call["backwards"] > 1 and same_values(params, before - call["backwards"] * lr * gradient):
            return Mistake("several-backwards", MESSAGES.text("several-backwards-sgd",
                                                              backwards=call["backwards"], on=on))
        if same_values(params, before + lr * gradient):
            return MESSAGES("ascends-gradient", on=on)
        integer_targets = call.get("integer_targets_gradient")
        if (integer_targets is not None and not same_values(params, call["expected"], **tolerance)
                and same_values(params, before - lr * integer_targets, **tolerance)):
            return MESSAGES("converts-targets", on=on)
        update = (before - params) / lr
        length, norm = float(np.linalg.norm(update)), float(np.linalg.norm(gradient))
        if (
            index == 0 and length > 0 and norm > 0 and abs(length - norm) > 1e-3 * norm
            and float(update @ gradient) / (length * norm) > 0.9999  # the same direction
        ):
            return MESSAGES("rescales-gradient", ratio=length / norm, on=on, norm=norm)
    elif not same_values(params, call["expected"], **tolerance):
        if "own_loss" in call and same_values(params, call["own_loss"]):
            return MESSAGES("ignores-loss-fn", on=on)
        if "fresh_optimizer" in call and same_values(params, call["fresh_optimizer"]):
            return MESSAGES("new-optimizer-each-call", on=on)
    if call["backwards"] > 1:
        return MESSAGES("several-backwards", backwards=call["backwards"], on=on)
    stale = _stale_gradients(call, sizes or {}, tolerance)
    if stale and not same_values(params, call["expected"], **tolerance):
        return MESSAGES("clears-some-gradients", on=on, names=", ".join(stale))
    returned = call["returned"]
    if (
        call.get("dtype") == "float64" and returned.get("kind") == "float"
        and same_values(returned["value"], call["expected_loss"], rtol=1e-6, atol=0)
        and not same_values(returned["value"], call["expected_loss"], **tolerance)
    ):
        return MESSAGES("computes-in-float32", on=on, got=returned["value"], expected=call["expected_loss"])
    if not same_values(params, call["expected"], **tolerance):
        return MESSAGES("wrong-update", on=on)
    problem = _returned_problem(call["returned"], call["expected_loss"], name="train_step", on=on,
                                messages=MESSAGES, dtype=call.get("dtype", "float32"))
    if problem is None and call["forwards"] > 1:
        return MESSAGES("several-forwards", forwards=call["forwards"], on=on)
    return problem
