"""evaluate's judge and its words: what each call's record shows against what the reference
gives and leaves behind on the same model (computed by evaluate's expect), with the classic
slips of a validation pass named; and the exercise's table of messages (``MESSAGES``), which
evaluate.py uses for its hints and notes."""

from __future__ import annotations

from course_utils.exercises.core import Raised
from course_utils.exercises.facts import same_values
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.states import differences
from course_utils.exercises.training_loop.common import RETURNED_MESSAGES, _returned_problem


MESSAGES = Messages("evaluate", {
    **RETURNED_MESSAGES,
    "caches-the-loss": (
        "evaluate returned {got:.6g} again{ran} (on {on}): the number of "
        "the previous call, although the weights changed since; the loss now is "
        "{expected:.6g}. Compute the loss on every call (no cache): validation "
        "runs after each epoch precisely because the model keeps changing."
    ),
    "clause-without-running": " without running the model",
    "ignores-given-model": (
        "Your function never ran the model it was given (on {on}). Use its arguments "
        "(model, x, y, loss_fn), not variables of the notebook."
    ),
    "changes-input-in-place": (
        "Your function changed its input {name} in place (on {on}); evaluation must "
        "leave the batch as it was given."
    ),
    "converts-model-dtype": (
        "Your function changed the model's dtype (on {on}): it was given as "
        "{dtype} and its weights are {dtypes_after} after the "
        "call (.float(), .double() and .to(dtype) convert a module in place). Evaluation "
        "must leave the model as it was: run it as it is given, on the x it is given."
    ),
    "clause-batch-norm-updated": (
        " Batch norm also updated its running statistics (num_batches_tracked went "
        "from {before} to {after}): evaluating changed the model."
    ),
    "layers-some-in-train-mode": "some of its layers were in train mode",
    "layers-flag-only": (
        "model.training was False, but its layers were in train mode: setting the "
        "flag changes only the outer module"
    ),
    "layers-model-in-train-mode": "the model was in train mode",
    # One text, four ids: which of the layers ran in train mode, and when eval() came.
    **dict.fromkeys(("forgot-eval-mode", "forward-before-eval", "eval-on-some-layers", "sets-training-flag-only"), (
        "The forward pass ran in train mode (on {on}: {layers}): call model.eval() "
        "before it. Dropout then zeroes random units, so the loss changes from call to "
        "call, and batch norm normalises with this batch's statistics.{stats}"
    )),
    "forgot-no-grad": Message(
        "The forward pass recorded a graph for backward() (on {on}): wrap it in "
        "`with torch.no_grad():`. model.eval() changes what dropout and batch norm do; "
        "it does not stop autograd, so without no_grad every activation is kept.",
    ),
    "forces-grad-on": (
        "Your function switched autograd on for its caller (on {on}): it was off when "
        "your function was called and on after it returned. Don't switch it with "
        "torch.set_grad_enabled(...); `with torch.no_grad():` puts back whatever state "
        "it found."
    ),
    "leaves-grad-disabled": (
        "Your function left autograd switched off (on {on}): after it returned, "
        "torch.is_grad_enabled() was False, so the next training step would compute no "
        "gradients. Use `with torch.no_grad():`, which switches it back on at the end "
        "of the block, rather than torch.set_grad_enabled(False)."
    ),
    "freezes-parameters": (
        "After your function ran (on {on}), {name} (and "
        "{more} more parameters) had requires_grad=False: "
        "training could no longer update them. Don't freeze the parameters to avoid a "
        "graph; use `with torch.no_grad():`, which changes nothing in the model."
    ),
    "unfreezes-parameters": (
        "After your function ran (on {on}), {name} had requires_grad=True, but "
        "the caller had frozen it (requires_grad=False): training would now update a "
        "layer meant to stay fixed. Leave requires_grad as you found it; `with "
        "torch.no_grad():` avoids the graph without changing anything in the model."
    ),
    "mean-of-unequal-chunks": (
        "evaluate returned {got:.6g} (on {on}), after running the model "
        "{forwards} times; the loss of the whole batch is "
        "{expected:.6g}. If you split the batch, weight each part's "
        "mean loss by its number of examples: parts of unequal size do not average to the "
        "batch's mean."
    ),
    "ignores-loss-fn": (
        "evaluate returned {got:.6g} (on {on}): plain cross entropy, not "
        "the loss_fn you were given ({expected:.6g} with its label "
        "smoothing). Compute the loss with loss_fn(model(x), y)."
    ),
    "updates-batch-norm-stats": (
        "Batch norm's running statistics changed (on {on}); evaluation must not change the model."
    ),
    # One text, two ids: the mode was never put back, or put back from another call.
    **dict.fromkeys(("leaves-eval-mode", "restores-a-stale-mode"), (
        "Your function left the model in eval mode (on {on}). The next training epoch "
        "would then run without dropout and would stop updating batch norm. Put it back: "
        "remember model.training first and call model.train(was_training) at the end."
    )),
    "restores-outer-flag-only": (
        "The model says training=True, but some of its layers are still in eval mode "
        "(on {on}): setting model.training = True changes only the outer module. Call "
        "model.train(), which sets the flag on every layer."
    ),
    "always-train-at-end": Message(
        "Your function was given {on} and gave it back in train mode: you call "
        "model.train() at the end whatever the mode was. Remember it first "
        "(was_training = model.training) and restore exactly that: "
        "model.train(was_training).",
        advises=("model.train(was_training)",),
    ),
    "changes-session-settings": (
        "Your function changed {setting} (on {on}), and left it changed for its caller: "
        "evaluation computes one number and changes nothing else. Seeding and the default "
        "dtype are the caller's to set, once, outside evaluate."
    ),
    "changes-loss-fn": (
        "Your function changed loss_fn.{attribute} from {before} to {after} (on {on}), and "
        "left it so: the caller's loss_fn, which training uses too, now computes something "
        "else. Leave the loss_fn you are given as it is: call it, don't change its settings."
    ),
    "clears-gradients": (
        "Your function cleared the gradients the model came with (on {on}): {difference}. "
        "Evaluation leaves .grad alone (no zero_grad() in evaluate): a caller that "
        "accumulates gradients over several batches, or reads them after validating, "
        "would lose them."
    ),
    "leaves-model-changed": (
        "After your function ran (on {on}), {difference}. Evaluation must hand the model "
        "back as it found it."
    ),
    "passed": (
        "Correct: eval mode for dropout and batch norm, no graph, and the model handed back in "
        "the mode it came in."
    ),
    "hint-1": (
        "Three things: eval mode for the forward pass, no graph recorded, and the model's mode "
        "put back afterwards. model.training tells you which mode it is in now."
    ),
    "hint-2": (
        "model.eval() switches dropout and batch norm to inference behaviour; "
        "`with torch.no_grad():` stops autograd; model.train(mode) sets the mode to mode."
    ),
    "hint-3": (
        "was_training = model.training; model.eval(); with torch.no_grad(): loss = "
        "loss_fn(model(x), y); then model.train(was_training); return loss.item()"
    ),
    "mode-not-boolean": (
        "model.train(mode) takes True or False: read was_training = model.training before "
        "model.eval(), and give it back with model.train(was_training)."
    ),
    "batch-norm-in-train-mode": "batch norm in train mode on a batch of one example; evaluate in eval mode.",
    "dtype-converted": (
        "the model and the batch you were given have the same dtype (float64 in one of "
        "this check's cases), so the mismatch comes from a conversion in your code "
        "(.float(), dtype=...) or from a tensor or model of the notebook used instead."
    ),
})

# Error notes: the clue in the error's message, by note id.
ERROR_CLUES = {
    "mode-not-boolean": "training mode is expected to be boolean",
    "batch-norm-in-train-mode": "Expected more than 1 value per channel",
    "dtype-converted": "must have the same dtype",
}


def _stale_answer(case, previous):
    """The previous call's number again, on the same model whose weights changed since."""
    returned = case["returned"]
    if (
        previous is None or "changed its weights" not in case["on"]
        or returned.get("kind") != "float" or previous["returned"].get("kind") != "float"
        or returned["value"] != previous["returned"]["value"]
        or same_values(returned["value"], case["expected_loss"], rtol=1e-4, atol=1e-6)
    ):
        return None
    ran = "" if case["forwards"] else MESSAGES.text("clause-without-running")
    return MESSAGES("caches-the-loss", got=returned["value"], ran=ran, on=case["on"], expected=case["expected_loss"])


def _train_mode_problem(case, forwards, on):
    """The forward pass ran in train mode: which layers, and when eval() came."""
    before, after = case["stats_before"], case["stats_after"]
    moved = after["num_batches_tracked"] - before["num_batches_tracked"]
    stats = (MESSAGES.text("clause-batch-norm-updated", before=before["num_batches_tracked"],
                           after=after["num_batches_tracked"]) if moved else "")
    if not all(forwards[0]["training"]):
        mistake, layers = "eval-on-some-layers", "layers-some-in-train-mode"
    elif forwards[0].get("outer") is False:
        mistake, layers = "sets-training-flag-only", "layers-flag-only"
    else:
        layers = "layers-model-in-train-mode"
        # A later pass in eval mode: model.eval() came, but after a first forward pass.
        later_eval = any(not any(f["training"]) for f in forwards[1:])
        mistake = "forward-before-eval" if later_eval else "forgot-eval-mode"
    return MESSAGES(mistake, on=on, layers=MESSAGES.text(layers), stats=stats)


def _left_problem(case, on):
    """What the call left changed that the reference leaves alone: the caller's settings, the
    loss_fn's, the model's gradients, anything else of the model (``states.differences``)."""
    changed = [name for name in case.get("settings_changed", []) if name not in case.get("expected_settings_changed", [])]
    if changed:
        return MESSAGES("changes-session-settings", setting=changed[0], on=on)
    if case.get("loss_fn_changed"):
        attribute, before, after = case["loss_fn_changed"][0]
        return MESSAGES("changes-loss-fn", attribute=attribute, before=before, after=after, on=on)
    if "left" not in case or "expected_left" not in case:
        return None
    found = differences(case["left"], case["expected_left"])
    if not found:
        return None
    cleared = [name for name, grad in case["left"]["grads"].items()
               if grad is None and case["expected_left"]["grads"].get(name) is not None]
    if cleared:
        return MESSAGES("clears-gradients", on=on, difference=next(f for f in found if ".grad" in f))
    return MESSAGES("leaves-model-changed", on=on, difference=found[0])


def _judge_evaluate(record):
    cases = record["cases"]
    for index, case in enumerate(cases):
        on, forwards = case["on"], case["forwards"]
        stale = _stale_answer(case, cases[index - 1] if index else None)
        if stale:
            return stale
        if not forwards:
            return MESSAGES("ignores-given-model", on=on)
        if case["inputs_changed"]:
            return MESSAGES("changes-input-in-place", name=case["inputs_changed"][0], on=on)
        if case.get("dtypes_after", [case.get("dtype")]) != [case.get("dtype")]:
            return MESSAGES("converts-model-dtype", on=on, dtype=case["dtype"],
                            dtypes_after=", ".join(case["dtypes_after"]))
        if any(any(f["training"]) for f in forwards):  # what the layers did, whatever the outer flag
            return _train_mode_problem(case, forwards, on)
        if any(f["graph"] for f in forwards):
            return MESSAGES("forgot-no-grad", on=on)
        if not case["grad_enabled_before"] and case["grad_enabled_after"]:
            return MESSAGES("forces-grad-on", on=on)
        if case["grad_enabled_before"] and not case["grad_enabled_after"]:
            return MESSAGES("leaves-grad-disabled", on=on)
        frozen_before = case.get("frozen_before", [])
        frozen = [n for n in case["frozen_after"] if n not in frozen_before]
        if frozen:
            return MESSAGES("freezes-parameters", on=on, name=frozen[0], more=len(frozen) - 1)
        unfrozen = [n for n in frozen_before if n not in case["frozen_after"]]
        if unfrozen:
            return MESSAGES("unfreezes-parameters", on=on, name=unfrozen[0])
        returned = case["returned"]
        if (
            len(forwards) > 1 and returned.get("kind") == "float"
            and not same_values(returned["value"], case["expected_loss"], rtol=1e-4, atol=1e-6)
        ):
            return MESSAGES("mean-of-unequal-chunks", got=returned["value"], on=on, forwards=len(forwards),
                            expected=case["expected_loss"])
        if (
            "plain_loss" in case and returned.get("kind") == "float"
            and not same_values(returned["value"], case["expected_loss"], rtol=1e-4, atol=1e-6)
            and same_values(returned["value"], case["plain_loss"], rtol=1e-4, atol=1e-6)
        ):
            return MESSAGES("ignores-loss-fn", got=returned["value"], on=on, expected=case["expected_loss"])
        problem = _returned_problem(returned, case["expected_loss"], name="evaluate", on=on,
                                    messages=MESSAGES, dtype=case.get("dtype", "float32"))
        if problem:
            return problem
        if not (
            same_values(case["stats_before"]["running_mean"], case["stats_after"]["running_mean"])
            and same_values(case["stats_before"]["running_var"], case["stats_after"]["running_var"])
        ):
            return MESSAGES("updates-batch-norm-stats", on=on)
        if case["training_before"] and not case["training_after"]:
            # After an earlier call that came in train mode and left it so: a mode remembered
            # from another call, not this one's.
            restored_before = any(c["training_before"] for c in cases[:index])
            mistake = "restores-a-stale-mode" if restored_before else "leaves-eval-mode"
            return MESSAGES(mistake, on=on)
        if case["training_before"] and not all(case["modules_training_after"]):
            return MESSAGES("restores-outer-flag-only", on=on)
        if not case["training_before"] and any(case["modules_training_after"]):
            return MESSAGES("always-train-at-end", on=on)
        problem = _left_problem(case, on)
        if problem:
            return problem
    if record.get("raised"):
        return Raised(record["raised"])
    return None
