"""Chapter 06, D6: one step with the gradient clipped (the exercise ``clipped_step``).

Engine: applies states.MODULE_STATES "first-frozen" (a frozen layer whose .grad stays None) and
"grad-large" (an old .grad on entry), an optimizer with two parameter groups, and a second call
with the optimizer's momentum (the returned norm must be a tensor, as clip_grad_norm_'s); hand-written
because the answer is a training step (zero_grad, backward, clip, step, in that order) whose
classic mistakes (the order, the loss clipped, by value, other norms, per parameter, the norm
returned) are named from the judge's replays of each on a rebuilt model.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.debugging.common import CHAPTER, _kind, _generator
from course_utils.exercises.running import judge_side
from course_utils.exercises.facts import load_given
from course_utils.exercises.facts import given, same_values, tensor_of
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.states import MODULE_STATES


MESSAGES = Messages("clipped_step", {
    "passed": (
        "Correct: the gradient is scaled down to max_norm when it is larger, left alone when it is "
        "smaller, and you return the norm before clipping, the number worth logging."),
    "hint-1": (
        "Clipping changes the gradients in .grad: they exist only after loss.backward(), and "
        "optimizer.step() reads them. So the clip goes between the two."),
    "hint-2": (
        "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) scales all gradients together "
        "and returns their total norm from before the scaling."),
    "hint-3": (
        "optimizer.zero_grad(); loss.backward(); total = "
        "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm); optimizer.step(); return total"),
    "second-backward": "call loss.backward() once per loss.",
    "grad-of-frozen-parameter": (
        "something was None where your code used a tensor. On this input that can be a .grad: a "
        "parameter that gets no gradient (frozen with requires_grad=False, or unused) keeps .grad "
        "None; skip it, as clip_grad_norm_ does ([p.grad for p in model.parameters() if p.grad is not"
        " None])."),
    "wrong-repeated-step": (
        "After call {call} the parameters are not where two clipped SGD-with-momentum steps put them (on"
        " {on}). Each call: zero_grad, backward, clip_grad_norm_(model.parameters(), max_norm), step,"
        " with the optimizer you are given."),
    "no-zero-grad": Message(
        "On the second call the parameters moved by this loss's gradient plus the first call's (on "
        "{on}): loss.backward() adds to .grad, and nothing cleared the old gradients. Call "
        "optimizer.zero_grad() before loss.backward(), every call.",
        advises=('optimizer.zero_grad()',)),
    "new-optimizer": (
        "On the second call the parameters moved as if the optimizer remembered nothing of the first "
        "call (on {on}): its momentum buffer started empty again. Step with the optimizer you are "
        "given; a new optimizer made inside your function loses its state (momentum, Adam's moments) "
        "on every call."),
    "wrong-norm-returned": (
        "Call {call} returned {got}; that call's gradient norm before clipping is {want:.4g} (on {on}). "
        "Return what clip_grad_norm_ returns."),
    "clip-out-of-order": (
        "The parameters moved by the unclipped gradient (on {on}: its norm is {total:.3g}, above "
        "max_norm={max_norm:g}). clip_grad_norm_ rescales the gradients in .grad, so it must run "
        "after loss.backward() (when they exist) and before optimizer.step() (which reads them). "
        "{when}"),
    "clipped-nothing": (
        "The parameters moved by the unclipped gradient (on {on}: its norm is {total:.3g}, above "
        "max_norm={max_norm:g}), and after your function .grad still holds it, unclipped: your "
        "clipping reached no parameter. Give clip_grad_norm_ the model's parameters, all of them, "
        "after backward() (a generator, such as model.parameters() kept in a variable, is spent "
        "after one pass: make a list if you use it twice)."),
    "clip-out-of-order-after-step": (
        "The norm your function returned is that very gradient's, so clip_grad_norm_ ran after "
        "optimizer.step(), which had already used it: clip before the step."),
    "clip-out-of-order-before-backward": (
        "The norm your function returned, {returned:.3g}, is not this gradient's: clip_grad_norm_ "
        "ran before loss.backward(), on the .grad of before (none, or the last step's). Clip after "
        "backward()."),
    "wrong-norm-returned-once": (
        "You returned {returned:.4g}; the gradient's total norm before clipping is {total:.4g} (on "
        "{on}). Return what clip_grad_norm_ returns."),
    "zero-gradient-step": (
        "The parameters did not move (on {on}): the gradient in .grad after your function is zero "
        "everywhere, though this loss's gradient has norm {total:.3g}. What backward() ran on does "
        "not depend on the parameters: a loss clipped by value (loss.clamp(max=...), min(loss, ...)) "
        "has a zero gradient wherever the clip holds. Clip the gradients, not the loss: "
        "loss.backward(), then clip_grad_norm_(model.parameters(), max_norm)."),
    "no-effective-step": (
        "The parameters did not move (on {on}): call optimizer.step() after clipping, and zero the "
        "gradients before backward(), not between backward() and step()."),
    "zeroed-before-step": (
        "The parameters did not move (on {on}): the gradients were zeroed between backward() and "
        "step() (after your function .grad holds nothing), so optimizer.step() found nothing to "
        "apply. Zero them before backward(): zero_grad, backward, clip_grad_norm_, then step."),
    "wrong-clipped-step": (
        "The parameters did not move as one SGD step with the gradient clipped to norm {max_norm:g} "
        "would move them (on {on}). One clipped step is: zero_grad, backward, "
        "clip_grad_norm_(model.parameters(), max_norm) over all the parameters together, then one "
        "optimizer.step()."),
    "no-norm-returned": (
        "Your function returned {kind} (on {on}); return what clip_grad_norm_ returns: the gradient's"
        " total norm before clipping, the number to log."),
    "scales-up-small-gradients": (
        "Your step scaled the gradient up to norm {max_norm:g} although its norm, {total:.3g}, was "
        "already below it (on {on}). Clipping only scales down: the factor is min(1, max_norm / "
        "total_norm), which clip_grad_norm_ applies."),
    "clip-by-value": (
        "You clipped each gradient value to ±{max_norm:g} (clip_grad_value_), on {on}: that cuts the "
        "large components only, and changes the gradient's direction. clip_grad_norm_ scales the "
        "whole gradient down together, keeping its direction."),
    "per-parameter-clip": (
        "Your step clipped each parameter's gradient to norm {max_norm:g} on its own (on {on}): the "
        "total can then be far above max_norm, and the gradient's direction changes. Clip all of them"
        " together, with one call: clip_grad_norm_(model.parameters(), max_norm)."),
    "returned-clipped-norm": (
        "You returned {returned:.4g}, the norm after clipping (on {on}); return the norm before it, "
        "{total:.4g}, which is what clip_grad_norm_ returns. The clipped norm is always max_norm, so "
        "it tells you nothing; the one before clipping shows how often and how hard clipping works."),
    "clipped-the-loss": (
        "The parameters moved by the unclipped gradient (on {on}: its norm is {total:.3g}, above "
        "max_norm={max_norm:g}), and your function returned 0: clip_grad_norm_ was given a tensor "
        "that is no parameter, such as the loss, whose .grad stays None (torch warned that a non-leaf"
        " tensor's .grad was read), so it found no gradient and clipped nothing. Clip the parameters'"
        " gradients: clip_grad_norm_(model.parameters(), max_norm), after loss.backward() and before "
        "optimizer.step()."),
    "scaled-the-step-not-the-gradient": (
        "After call 2 the parameters are not where two clipped SGD-with-momentum steps put them (on "
        "{on}), though one step was right: your function never clipped the gradients. After it, "
        ".grad still holds the unclipped gradient (norm {total:.3g}, above max_norm={max_norm:g}, on "
        "{first}): you scaled the step instead (the learning rate, say). Momentum stores the gradient"
        " in .grad, unclipped, and every later step goes on with it (Adam's moments and weight decay "
        "alike). Clip the gradients themselves: clip_grad_norm_(model.parameters(), max_norm) "
        "between backward() and step()."),
    "old-grad-on-entry": (
        "The parameters moved by this loss's gradient plus the .grad the model already held when "
        "your function was called (on {on}): loss.backward() adds to .grad, so gradients zeroed "
        "only after the step (or not at all) are still there on the first call. Zero them first: "
        "zero_grad, then backward, clip_grad_norm_, step."),
    "norm-not-a-tensor": (
        "Your step is right, but your function returned {kind} (on {on}), not what clip_grad_norm_"
        " returns: a 0-d tensor. Return that tensor itself, without .item(), float() or .numpy(): "
        "the caller decides when to read it (.item() makes a GPU wait for every step)."),
    "wrong-norm-type": (
        "Your step clipped the gradient's {norm_type} (on {on}); the task's clipping uses the usual "
        "Euclidean norm, clip_grad_norm_'s default (norm_type=2): clip_grad_norm_(model.parameters(),"
        " max_norm)."),
})


# ============================================================================================
# D6 — one step with the gradient clipped
# ============================================================================================
def clipped_step(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total_norm


def _clipped_step_without_zero_grad(model, optimizer, loss, max_norm):
    loss.backward()
    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total_norm


def _two_steps(step, model, batches, max_norm, call=None, fresh_optimizer=False):
    """Parameters after each of two calls of ``step`` on one model and one SGD-with-momentum
    (or, with ``fresh_optimizer``, a new one for each call: what recreating it inside does)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    after, returned = [], []
    for i, (x, y) in enumerate(batches):
        if fresh_optimizer:
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss = nn.functional.mse_loss(model(x), y)
        if call is None:
            got = step(model, optimizer, loss, max_norm)
        else:
            got = call(step, model, optimizer, loss, max_norm, on=f"call {i + 1} of 2")
        after.append(_flat(model).numpy())
        returned.append(got)
    return after, returned


def _clip_model(frozen=False):
    torch.manual_seed(_CLIP_SEED)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    if frozen:  # a frozen first layer: its parameters get no .grad at all
        model[0].requires_grad_(False)
    return model


def _flat(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()


def _delta_with(model, x, y, clip):
    """The parameter change of one SGD step (lr 0.1) whose gradient ``clip`` treats first."""
    model = copy.deepcopy(model)
    before = _flat(model)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    clip(model)
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= 0.1 * p.grad
    return (_flat(model) - before).numpy()


_CLIP_CASES = [  # (what the input is, the targets' scale, max_norm, a frozen first layer, groups,
    # the state of the model's .grad on entry: states.MODULE_STATES' name, or None for the fresh one)
    ("targets far off (a large gradient), max_norm=1.0", 30.0, 1.0, False, 1, None),
    ("targets far off, max_norm=0.5", 30.0, 0.5, False, 1, None),
    ("targets close (a gradient smaller than max_norm=5.0)", 0.1, 5.0, False, 1, None),
    ("a model whose first layer is frozen (requires_grad=False, so its .grad stays None), "
     "targets far off, max_norm=1.0", 30.0, 1.0, True, 1, None),
    # The gradient is the model's, whichever parameter groups its optimizer holds them in.
    ("an SGD optimizer with two parameter groups (one per Linear layer), targets far off, "
     "max_norm=1.0", 30.0, 1.0, False, 2, None),
    # A model that still holds the .grad of an earlier backward (an evaluation, the last step of
    # a loop that zeroes after stepping): this step must use this loss's gradient alone.
    (f"a model whose parameters already hold a .grad ({MODULE_STATES['grad-large'].on}, left by an "
     "earlier backward), targets far off, max_norm=1.0", 30.0, 1.0, False, 1, "grad-large"),
]


def _sgd(model, lr, momentum, groups=1):
    """SGD over the model's parameters, in one group or one group per Linear layer."""
    if groups == 2:
        return torch.optim.SGD([{"params": model[0].parameters()}, {"params": model[2].parameters()}],
                               lr=lr, momentum=momentum)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
_CLIP_SEED = 6  # the seed _clip_model builds every model with
_TWICE_OPTIMIZER = {"kind": "SGD", "lr": 0.1, "momentum": 0.9, "state": "empty"}


def _probe_clipped_step(answer, run):
    """How far the answer's step moved each model and what it returned, and what each step
    started from ("given": the model's parameters, the batch, the optimizer's settings): never
    what the reference's step, its norm or a classic mistake gives (``_expect_clipped_step``
    computes those on a rebuilt model, on the judge's side)."""
    cases = []
    for on, scale, max_norm, frozen, groups, state in _CLIP_CASES:
        model = _clip_model(frozen)
        if state is not None:
            MODULE_STATES[state].put(model)
        g = _generator(int(scale * 10) + int(max_norm * 10) + 100 * (groups - 1))
        x = torch.randn(16, 4, generator=g)
        y = torch.randn(16, 2, generator=g) * scale
        start = {"seed": _CLIP_SEED, "frozen": frozen, "parameters": [given(p) for p in model.parameters()],
                 "x": given(x), "y": given(y), "loss": "mse_loss", "max_norm": max_norm,
                 "optimizer": {"kind": "SGD", "lr": 0.1, "momentum": 0.0, "state": "empty", "groups": groups},
                 "grads": [None if p.grad is None else given(p.grad) for p in model.parameters()]}
        before = _flat(model)
        optimizer = _sgd(model, 0.1, 0.0, groups)
        loss = nn.functional.mse_loss(model(x), y)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = run(answer, model, optimizer, loss, max_norm, on=on)
        for warning in caught:  # said again, for the course's own once-only display
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        case = {
            # The .grad of a tensor that is no parameter (the loss) was read: it stays None.
            "read_non_leaf_grad": any("not a leaf Tensor is being accessed" in str(w.message) for w in caught),
            "grads_all_zero": bool(grads) and all(not torch.Tensor.any(g) for g in grads),
            # Every trainable parameter without a .grad after the call: zeroed (set to None).
            "grads_none": all(p.grad is None for p in model.parameters() if p.requires_grad),
            # The norm of what .grad holds after the call: the clipped gradient, or not.
            "grad_norm_after": float(torch.linalg.vector_norm(torch.stack(
                [torch.linalg.vector_norm(g.detach().double()) for g in grads]))) if grads else None,
            "on": on,
            "max_norm": max_norm,
            "given": start,
            "delta": (_flat(model) - before).numpy(),
            "kind": _kind(got),
            "is_tensor": isinstance(got, torch.Tensor),
            "state": state,
        }
        returned = _number(got)
        if returned is not None:
            case["returned"] = returned
        cases.append(case)
    # Two calls in a row on the same model and optimizer (SGD with momentum), as in a loop.
    on = "two calls in a row on one model and one SGD(lr=0.1, momentum=0.9), max_norm=1.0"
    g = _generator(66)
    batches = [(torch.randn(16, 4, generator=g), torch.randn(16, 2, generator=g) * 30.0) for _ in range(2)]
    model = _clip_model()
    start = {"seed": _CLIP_SEED, "frozen": False, "parameters": [given(p) for p in model.parameters()],
             "batches": [[given(x), given(y)] for x, y in batches], "loss": "mse_loss", "max_norm": 1.0,
             "optimizer": dict(_TWICE_OPTIMIZER)}
    after, returned = _two_steps(answer, model, batches, 1.0, call=lambda f, *a, on: run(f, *a, on=f"{_TWICE}, {on}"))
    cases.append({
        "on": on,
        "twice": True,
        "given": start,
        "after": after,
        "returned": [_number(r) if _number(r) is not None else _kind(r) for r in returned],
    })
    return cases


def _rebuilt(start, grads=False):
    """The probe's model, rebuilt from its recorded start: the architecture (its first layer
    frozen where it was), with the recorded parameters loaded (and, with ``grads``, the .grad
    they held on entry)."""
    return load_given(_clip_model(start["frozen"]), start["parameters"], start.get("grads") if grads else None)


def _expect_clipped_step(cases):
    """What the reference's step gives on each rebuilt model (the weight change and the norm it
    returns), what the classic mistakes' steps give (no clipping, clipping by value, scaling
    small gradients up, other norms, each parameter on its own), and the reference's two steps
    in a row with those of a step without zero_grad and of a new optimizer each call."""
    reference = clipped_step.reference
    with judge_side():
        for case in cases:
            start = case["given"]
            if case.get("twice"):
                batches = [(tensor_of(x), tensor_of(y)) for x, y in start["batches"]]
                max_norm = start["max_norm"]
                expected, expected_norms = _two_steps(reference, _rebuilt(start), batches, max_norm)
                case["expected"] = expected
                case["expected_norms"] = [float(n) for n in expected_norms]
                case["stale"], _ = _two_steps(_clipped_step_without_zero_grad, _rebuilt(start), batches, max_norm)
                case["fresh"], _ = _two_steps(reference, _rebuilt(start), batches, max_norm, fresh_optimizer=True)
                continue
            x, y, max_norm = tensor_of(start["x"]), tensor_of(start["y"]), start["max_norm"]
            pristine = _rebuilt(start)
            model = _rebuilt(start, grads=True)
            before = _flat(model)
            settings = start["optimizer"]
            optimizer = _sgd(model, settings["lr"], settings["momentum"], settings.get("groups", 1))
            total = reference(model, optimizer, nn.functional.mse_loss(model(x), y), max_norm)
            case["total"] = float(total)
            case["expected"] = (_flat(model) - before).numpy()
            case["unclipped"] = _delta_with(pristine, x, y, lambda m: None)
            if any(g is not None for g in start.get("grads") or ()):
                # The classic mistake: zero_grad after the step, so the old .grad is added to this one.
                stale = _rebuilt(start, grads=True)
                optimizer = _sgd(stale, settings["lr"], settings["momentum"], settings.get("groups", 1))
                _clipped_step_without_zero_grad(stale, optimizer, nn.functional.mse_loss(stale(x), y), max_norm)
                case["stale_on_entry"] = (_flat(stale) - before).numpy()
            case["by_value"] = _delta_with(pristine, x, y, lambda m: nn.utils.clip_grad_value_(m.parameters(), max_norm))
            # Scaled to norm max_norm even when it was smaller: clipping that also scales up.
            case["scaled_up"] = _delta_with(pristine, x, y, lambda m, total=case["total"]: [
                p.grad.mul_(max_norm / total) for p in m.parameters() if p.grad is not None
            ])
            # Other norms, and each parameter clipped on its own: steps that point elsewhere.
            case["other_norms"] = {
                name: _delta_with(
                    pristine, x, y, lambda m, t=norm_type: nn.utils.clip_grad_norm_(m.parameters(), max_norm, norm_type=t))
                for name, norm_type in (("L1 norm (norm_type=1)", 1.0),
                                        ("largest-value norm (norm_type=inf)", float("inf")))
            }
            case["per_parameter"] = _delta_with(pristine, x, y, lambda m: [
                nn.utils.clip_grad_norm_(p, max_norm) for p in m.parameters() if p.grad is not None
            ])
    return cases


def _number(value):
    """One number as a float (a one-value tensor, a NumPy array of one value, a Python or NumPy
    number), else None."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.device.type != "meta":
        return float(torch.Tensor.detach(value).reshape(-1)[0].item())
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "fiu":
        return float(value.reshape(-1)[0])
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    return None


_TWICE = "two calls in a row on one model and one SGD(lr=0.1, momentum=0.9)"


def _unclipped_grad_left(cases):
    """A case whose step moved the parameters right although .grad still holds the unclipped
    gradient afterwards (its norm above max_norm): the step was scaled, not the gradient."""
    for case in cases:
        after, total = case.get("grad_norm_after"), case.get("total")
        if case.get("twice") or after is None or total is None or total <= case["max_norm"]:
            continue
        if same_values(case["delta"], case["expected"], rtol=1e-4, atol=1e-7) and \
                same_values(after, total, rtol=1e-4, atol=1e-6):
            return case
    return None


def _judge_clipped_twice(case, unclipped=None):
    on = case["on"]
    for i in range(2):
        if same_values(case["after"][i], case["expected"][i], rtol=1e-4, atol=1e-7):
            continue
        if i == 1 and same_values(case["after"][i], case["stale"][i], rtol=1e-4, atol=1e-7):
            return MESSAGES("no-zero-grad", on=on)
        if i == 1 and same_values(case["after"][i], case["fresh"][i], rtol=1e-4, atol=1e-7):
            return MESSAGES("new-optimizer", on=on)
        if i == 1 and unclipped is not None:
            return MESSAGES("scaled-the-step-not-the-gradient", on=on, first=unclipped["on"],
                            total=unclipped["total"], max_norm=unclipped["max_norm"])
        return MESSAGES("wrong-repeated-step", call=i + 1, on=on)
    for i, (got, want) in enumerate(zip(case["returned"], case["expected_norms"])):
        if not isinstance(got, float) or not same_values(got, want, rtol=1e-4, atol=1e-6):
            return MESSAGES("wrong-norm-returned",
                            call=i + 1,
                            got=got if isinstance(got, str) else f'{got:.4g}',
                            want=want,
                            on=on)
    return None


def _judge_clipped_step(cases):
    # The model that held an old .grad is judged last: an answer that never zeroes is named by
    # the two calls in a row ("no-zero-grad"), one that zeroes after the step by this state.
    cases = sorted(cases, key=lambda case: case.get("state") is not None)
    for case in cases:
        if case.get("twice"):
            problem = _judge_clipped_twice(case, _unclipped_grad_left(cases))
            if problem:
                return problem
            continue
        on, max_norm, total = case["on"], case["max_norm"], case["total"]
        delta = case["delta"]
        if not np.any(delta) and case.get("grads_all_zero") and total > 0:
            return MESSAGES("zero-gradient-step", on=on, total=total)
        if not np.any(delta) and (case.get("grads_all_zero") or case.get("grads_none")):
            return MESSAGES("zeroed-before-step", on=on)
        if not np.any(delta):
            return MESSAGES("no-effective-step", on=on)
        if not same_values(delta, case["expected"], rtol=1e-4, atol=1e-7):
            if "stale_on_entry" in case and same_values(delta, case["stale_on_entry"], rtol=1e-4, atol=1e-7):
                return MESSAGES("old-grad-on-entry", on=on)
            if total > max_norm and same_values(delta, case["unclipped"], rtol=1e-4, atol=1e-7):
                returned = case.get("returned")
                if case.get("read_non_leaf_grad") and returned is not None and returned == 0:
                    return MESSAGES("clipped-the-loss", on=on, total=total, max_norm=max_norm)
                after = case.get("grad_norm_after")
                if returned is not None and after is not None and same_values(after, total, rtol=1e-4, atol=1e-6) \
                        and same_values(returned, total, rtol=1e-4, atol=1e-6):
                    # .grad still holds this gradient, unclipped: the clip ran on no parameter.
                    return MESSAGES("clipped-nothing", on=on, total=total, max_norm=max_norm)
                if returned is not None and same_values(returned, total, rtol=1e-4, atol=1e-6):
                    when = MESSAGES.text("clip-out-of-order-after-step")
                elif returned is not None:
                    when = MESSAGES.text("clip-out-of-order-before-backward", returned=returned)
                else:
                    when = ""
                return Mistake("clip-out-of-order", MESSAGES.text(
                    "clip-out-of-order", on=on, total=total, max_norm=max_norm, when=when).rstrip())
            if total < max_norm and same_values(delta, case["scaled_up"], rtol=1e-4, atol=1e-7):
                return MESSAGES("scales-up-small-gradients", max_norm=max_norm, total=total, on=on)
            if same_values(delta, case["by_value"], rtol=1e-4, atol=1e-7):
                return MESSAGES("clip-by-value", max_norm=max_norm, on=on)
            for norm_type, other in case["other_norms"].items():
                if same_values(delta, other, rtol=1e-4, atol=1e-7):
                    return MESSAGES("wrong-norm-type", norm_type=norm_type, on=on)
            if same_values(delta, case["per_parameter"], rtol=1e-4, atol=1e-7):
                return MESSAGES("per-parameter-clip", max_norm=max_norm, on=on)
            return MESSAGES("wrong-clipped-step", max_norm=max_norm, on=on)
        if "returned" not in case:
            return MESSAGES("no-norm-returned", kind=case['kind'], on=on)
        returned = case["returned"]
        if not same_values(returned, total, rtol=1e-4, atol=1e-6):
            if total > max_norm and same_values(returned, max_norm, rtol=1e-3, atol=1e-6):
                return MESSAGES("returned-clipped-norm", returned=returned, on=on, total=total)
            return Mistake("wrong-norm-returned", MESSAGES.text(
                "wrong-norm-returned-once", returned=returned, total=total, on=on))
    for case in cases:  # the right step and the right number: is it what clip_grad_norm_ returns?
        if not case.get("twice") and not case["is_tensor"]:
            return MESSAGES("norm-not-a-tensor", kind=case["kind"], on=case["on"])
    return None


clipped_step = Exercise(
    "clipped_step",
    chapter=CHAPTER,
    title="One step with the gradient norm clipped",
    expects=Function("clipped_step", ("model", "optimizer", "loss", "max_norm"), returns="the total norm that clip_grad_norm_ returns (a 0-d tensor)"),
    probe=_probe_clipped_step,
    expect=_expect_clipped_step,
    judge=_judge_clipped_step,
    reference=clipped_step,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "second-backward": "Trying to backward through the graph a second time",
        "grad-of-frozen-parameter": "'NoneType'",
    }),
    messages=MESSAGES,
)
