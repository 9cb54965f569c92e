"""train_step's judge of one call: what the parameters, the gradients and the returned loss after
one call show, against what one correct step gives from the same start (computed by
train_step's expect), with the classic mistakes of a training step named."""

from __future__ import annotations

import numpy as np

from course_utils.exercises.core import Mistake
from course_utils.exercises.facts import same_values
from course_utils.exercises.training_loop.common import _returned_problem


def _judge_step_call(call, *, kind, lr, index, first_gradient):
    on, before = call["on"], call["before"]
    params, gradients = call["parameters"], call["gradients"]
    if call["forwards"] == 0:
        return Mistake("ignores-given-model", (
            f"Your function never ran the model it was given (on {on}). Use its arguments "
            "(model, optimizer, loss_fn, x, y), not variables of the notebook with the same "
            "purpose."
        ))
    if call["inputs_changed"]:
        name = call["inputs_changed"][0]
        return Mistake("changes-input-in-place", (
            f"Your function changed its input {name} in place (on {on}). The caller still uses "
            f"the batch (to log, to plot, for another model): leave {name} as it was given."
        ))
    if not call["grad_enabled_after"]:
        return Mistake("leaves-grad-disabled", (
            f"Your function left autograd switched off (on {on}): after it returned, "
            "torch.is_grad_enabled() was False, so the next training step cannot compute "
            "gradients. Use `with torch.no_grad():` blocks, which switch it back on, rather "
            "than torch.set_grad_enabled(False)."
        ))
    if call.get("eval_forwards"):
        return Mistake("trains-in-eval-mode", (
            f"The forward pass ran with the model in eval mode (on {on}), although it was given "
            "in train mode: a training step trains in the mode it is given. In eval mode dropout "
            "is off and batch norm stops learning its statistics; leave the mode alone in "
            "train_step (no model.eval())."
        ))
    if call.get("dtypes_after", [call.get("dtype")]) != [call.get("dtype")]:
        return Mistake("converts-model-dtype", (
            f"Your function changed the model's dtype (on {on}): it was given as {call['dtype']} "
            f"and its parameters are {', '.join(call['dtypes_after'])} after the call (.float(), "
            ".double() and .to(dtype) convert a module in place, for the caller too). Train the "
            "model as it is given, on the x it is given: they have the same dtype."
        ))
    if any(value != call.get("lr") for value in call.get("lr_after", [])):
        return Mistake("changes-learning-rate", (
            f"After your function ran (on {on}), the optimizer's learning rate was "
            f"{call['lr_after'][0]:g} instead of {call['lr']:g}: your function changed it, so "
            "every later step uses that rate too. Leave the optimizer's settings alone in "
            "train_step (a learning-rate schedule is the caller's business)."
        ))
    if call.get("train_forwards"):
        return Mistake("forces-train-mode", (
            f"The forward pass ran with the model in train mode (on {on}), although it was given "
            "in eval mode: you switched it with model.train(). A training step trains in the "
            "mode it is given (a caller may have switched dropout off on purpose); leave the "
            "mode alone in train_step."
        ))
    if call.get("given_training") is False and call.get("any_training_after"):
        return Mistake("forces-train-mode", (
            f"Your function gave the model back in train mode (on {on}), although it was given "
            "in eval mode. Leave the mode as it was given: no model.train() in train_step."
        ))
    if call.get("given_training", True) and not call.get("training_after", True):
        return Mistake("leaves-eval-mode", (
            f"Your function gave the model back in eval mode (on {on}), although it was given in "
            "train mode: every later training step would then run without dropout and without "
            "batch norm learning. Leave the mode as it was given."
        ))
    if call.get("unfrozen"):
        return Mistake("unfreezes-parameters", (
            f"Your function switched requires_grad back on for {', '.join(call['unfrozen'])}, "
            f"which were given frozen (on {on}). model.requires_grad_(True) or "
            "p.requires_grad = True undoes a freeze the caller chose (a pretrained layer kept "
            "as it is): those parameters then get gradients and the optimizer moves them. "
            "Leave requires_grad as it was given; backward() fills .grad of the parameters "
            "that require it, which is all a step needs."
        ))
    if call.get("frozen_moved"):
        return Mistake("moves-frozen-parameters", (
            f"Your step moved {', '.join(call['frozen_moved'])}, which were given frozen "
            f"(requires_grad=False) (on {on}). A frozen parameter has no gradient (.grad None), "
            "and optimizer.step() skips it; it moves only if your code gives it a gradient (a "
            "zero .grad made by hand is enough for momentum or weight decay to move it) or "
            "unfreezes it for the step. Do forward, loss, optimizer.zero_grad(), backward(), "
            "step() and leave requires_grad and .grad of the frozen ones alone."
        ))
    unchanged = same_values(params, before, rtol=0, atol=0)
    if call["backwards"] == 0:
        return Mistake("no-backward", (
            f"backward() never ran (on {on}), so no gradient reached .grad"
            + (" and the parameters did not change" if unchanged else "")
            + ". Call loss.backward() once, after the loss and before optimizer.step()."
        ))
    if call["steps"] == 0:
        if unchanged:
            # With Adam (the second phase), the SGD phase's steps ran: an optimizer other than
            # the one given now (kept from an earlier call) took them.
            mistake = "no-optimizer-step" if kind == "sgd" else "ignores-given-optimizer"
            return Mistake(mistake, (
                f"The parameters did not change (on {on}): optimizer.step() of the optimizer you "
                "were given never ran. Call optimizer.step() after backward(): it is the step "
                "that actually moves the parameters."
            ))
        return Mistake("ignores-given-optimizer", (
            f"The parameters moved (on {on}), but the optimizer you were given never took a "
            "step: you updated them another way (by hand, or with an optimizer of your own). "
            "Call optimizer.step() on the `optimizer` argument: it may be Adam or have "
            "momentum, and only it keeps that state from step to step."
        ))
    if unchanged:
        if isinstance(gradients, str):
            return Mistake("zero-grad-between-backward-and-step", (
                f"The parameters did not change (on {on}), and afterwards no gradient was "
                "left in .grad. You cleared the gradients between backward() and step(): "
                "step() then finds nothing to apply. Clear them before backward() (or after "
                "step()), never between the two."
            ))
        return Mistake("step-before-backward", (
            f"The parameters did not change (on {on}), although optimizer.step() ran and "
            "backward() filled .grad: step() ran before backward(), when there was no new "
            "gradient to apply yet. The order is zero_grad(), backward(), step()."
        ))
    if call["steps"] > 1:
        return Mistake("several-steps", (
            f"optimizer.step() ran {call['steps']} times in one call (on {on}); one training "
            "step is one optimizer.step()."
        ))
    if kind == "sgd":
        gradient = call["gradient"]
        if index == 1 and same_values(params, before - lr * (gradient + first_gradient)):
            return Mistake("no-zero-grad", (
                f"On {on}, your update used the sum of both batches' gradients: gradients "
                "accumulate. backward() adds to .grad, so without optimizer.zero_grad() every "
                "step also applies all the earlier gradients again. Clear them once per batch, "
                "before backward()."
            ))
        if call["backwards"] > 1 and same_values(params, before - call["backwards"] * lr * gradient):
            return Mistake("several-backwards", (
                f"backward() ran {call['backwards']} times in one call (on {on}), and the "
                f"update was {call['backwards']} SGD steps' worth: each backward() adds its "
                "gradient to .grad. Call backward() once per step, on one forward pass's loss."
            ))
        if same_values(params, before + lr * gradient):
            return Mistake("ascends-gradient", (
                f"Your update went up the gradient (on {on}); optimizer.step() goes down it."
            ))
        update = (before - params) / lr
        length, norm = float(np.linalg.norm(update)), float(np.linalg.norm(gradient))
        if (
            index == 0 and length > 0 and norm > 0 and abs(length - norm) > 1e-3 * norm
            and float(update @ gradient) / (length * norm) > 0.9999  # the same direction
        ):
            return Mistake("rescales-gradient", (
                f"Your step goes the way of this batch's gradient, but is {length / norm:.3g} "
                f"times its length (on {on}; the gradient has norm {norm:.3g}): something "
                "rescaled it, such as gradient clipping (clip_grad_norm_) or a factor on the "
                "loss. One training step applies the gradient as it is: forward, loss, "
                "zero_grad(), backward(), step()."
            ))
    elif not same_values(params, call["expected"]):
        if "own_loss" in call and same_values(params, call["own_loss"]):
            return Mistake("ignores-loss-fn", (
                f"Your step followed plain cross entropy, not the loss_fn you were given (on "
                f"{on}): this loss_fn uses label smoothing. Compute the loss with "
                "loss_fn(prediction, y)."
            ))
        if "fresh_optimizer" in call and same_values(params, call["fresh_optimizer"]):
            return Mistake("new-optimizer-each-call", (
                f"On {on}, your step is what a brand-new Adam takes: its running averages of "
                "the earlier gradients were lost. Use the optimizer you were given, every "
                "call; don't create one inside train_step."
            ))
    if call["backwards"] > 1:
        return Mistake("several-backwards", (
            f"backward() ran {call['backwards']} times in one call (on {on}); call it once per "
            "step, on the loss of this call's forward pass."
        ))
    if not same_values(params, call["expected"]):
        return Mistake("wrong-update", (
            f"After your function ran (on {on}), the parameters are not what one optimizer step "
            "on this batch gives. Do forward, loss (with loss_fn), zero_grad(), backward(), "
            "step(), once each."
        ))
    problem = _returned_problem(call["returned"], call["expected_loss"], name="train_step", on=on)
    if problem is None and call["forwards"] > 1:
        return Mistake("several-forwards", (
            f"The model ran {call['forwards']} forward passes in one call (on {on}); one training "
            "step is one forward pass. Compute the loss once, call backward() on it and return "
            "its .item(): another pass costs time, and with dropout its loss is not the one you "
            "trained on."
        ))
    return problem
