"""Chapter 02, A7 — what ``input_gradient``'s judge reads of the trace an answer left: the grad
mode, the caller's x (numbers, requires_grad, .grad), and f (its parameters' requires_grad and
.grad, its train/eval mode). The words come from ``input_gradient.MESSAGES``."""

from __future__ import annotations

from course_utils.exercises.facts import same_values


def grad_change(before, after):
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


def trace_problem(call, messages):
    """The first trace ``call``'s answer left on the session, x or f, as a ``Mistake``; else None."""
    on = call["on"]
    if call["grad_enabled_after"] != call["grad_enabled_before"]:
        return messages("grad-mode-left-off" if call["grad_enabled_before"] else "grad-mode-switched-on", on=on)
    if call["x_changed"]:
        return messages("changed-x", on=on)
    before, after = call["requires_grad_before"], call["requires_grad_after"]
    if not before and after:
        return messages("tracks-callers-x", on=on)
    if before and not after:
        return messages("untracks-callers-x", on=on)
    change = grad_change(call["x_grad_before"], call["x_grad_after"])
    if change:
        return messages("changed-x-grad", change=change, on=on)
    if call.get("frozen_params"):
        return messages("changed-param-flags", name=call["frozen_params"][0], on=on)
    if call.get("unfrozen_params"):
        return messages("unfroze-params", name=call["unfrozen_params"][0], on=on)
    if call.get("mode_changed") and call.get("training_before") is False:
        return messages("eval-mode-not-kept", on=on)
    if call.get("mode_changed"):
        return messages("changed-f-mode", on=on)
    for sub in call.get("submodules_changed") or ():
        mode = {True: "train", False: "eval"}
        return messages("changed-submodule-mode", name=sub["name"], now=mode[sub["now"]], was=mode[sub["was"]],
                        parent=mode[call["training_before"]], on=on)
    if call["params_before"] is not None:
        for name, before_grad in call["params_before"].items():
            change = grad_change(before_grad, call["params_after"][name])
            if change == "filled":
                return messages("filled-param-grads", name=name, on=on)
            if change:
                how = messages.text("how-cleared" if change == "cleared" else "how-changed")
                return messages("changed-param-grads", how=how, name=name, on=on)
    return None
