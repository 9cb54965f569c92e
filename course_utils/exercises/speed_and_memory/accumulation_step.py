"""Chapter 05, P5: accumulation_step, gradient accumulation that matches one big batch.

Engine: applies states.module_states ("train", "eval", "first-frozen", "grad-none", an old .grad,
a second call with the optimizer's momentum) with states.snapshot/differences (modes and
requires_grad left, against what the reference leaves), states.session_settings/changed_settings,
the dtypes the task allows (float32, float64), a micro-batch of one example and inputs laid out
otherwise in memory (edges.not_contiguous); hand-written because the answer is a training
step on a module and an optimizer (rules: backward() once per micro-batch, step() once on the
optimizer given), whose classic mistakes are named from the judge's replays.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.edges import not_contiguous
from course_utils.exercises.facts import given, load_given, same_values, tensor_of, values_problem
from course_utils.exercises.messages import Messages
from course_utils.exercises.running import LearnerRaised, judge_side
from course_utils.exercises.speed_and_memory.common import CHAPTER, _LR, _flat
from course_utils.exercises.states import MODULE_STATES, changed_settings, differences, session_settings, snapshot

_STEP_NEVER_RAN = (
    "optimizer.step() of the optimizer you were given never ran (on {on}), so the weights did "
    "not move. Call it on the `optimizer` argument, once, after the loop over the micro-batches."
)
MESSAGES = Messages("accumulation_step", {
    "changes-the-batches": (
        "Your function changed the list of micro-batches it was given (on {on}): {what}. The "
        "caller may use them again; loop over them with `for x, y in batches:` and leave them as "
        "they are."),
    "ignores-given-optimizer": (
        "The weights moved, but not through the optimizer you were given (on {on}): call "
        "optimizer.step() on the `optimizer` argument rather than making a new one."),
    "no-optimizer-step": _STEP_NEVER_RAN,
    "step-per-micro-batch": (
        "optimizer.step() ran {steps} times for {k} micro-batches (on {on}): stepping every "
        "micro-batch is ordinary small-batch training, not accumulation. Step once, after all {k} "
        "backward() calls."),
    "accumulates-in-eval-mode": (
        "The micro-batches' forward passes ran with the model in eval mode (on {on}), although it "
        "was given in train mode: an accumulation step trains in the mode it is given (with "
        "dropout and batch norm, eval mode gives other gradients). Leave the mode alone (no "
        "model.eval())."),
    "accumulates-in-train-mode": (
        "The micro-batches' forward passes ran with the model in train mode (on {on}), although "
        "it was given in eval mode: an accumulation step trains in the mode it is given (with "
        "dropout and batch norm, train mode gives other gradients). Leave the mode alone (no "
        "model.train())."),
    "changes-precision": (
        "The model's first layer gave {dtypes} outputs (on {on}): your function ran the forward "
        "passes in another precision than the model's (autocast, or a cast), so the gradient is "
        "not the big batch's. Accumulation changes nothing in the forward pass: call model(x) as "
        "it is given."),
    "leaves-eval-mode": (
        "Your function gave the model back in eval mode (on {on}), although it was given in train "
        "mode: every later step would then train without dropout and without batch norm "
        "learning. Leave the mode as it was given."),
    "leaves-the-model-changed": (
        "Your function left the model otherwise than the task leaves it (on {on}): {difference}. "
        "An accumulation step changes the parameters and their .grad, nothing else: leave the "
        "mode and requires_grad as they were given."),
    "changes-settings": (
        "Your function changed {what} (on {on}): a training step leaves the caller's session as "
        "it was (no torch.manual_seed, torch.set_default_dtype or the like inside it)."),
    "changes-learning-rate": (
        "After your function ran (on {on}), the optimizer's learning rate was {lr:g} instead of "
        "{expected_lr:g}: your function changed it, so every later step uses that rate too. Leave "
        "the optimizer's settings alone; to scale the gradient, divide each micro-batch's loss by "
        "len(batches)."),
    "one-backward-for-all": (
        "The gradients are right, but backward() ran once for {k} micro-batches (on {on}): one "
        "backward() for all of them (on the sum of their losses, or on one big batch) keeps all "
        "{k} graphs in memory until then, which is the memory accumulation is meant to save. Call "
        "backward() on each micro-batch's loss inside the loop."),
    "wrong-backward-count": (
        "The gradients are right, but backward() ran {backwards} times for {k} micro-batches (on "
        "{on}): call it once per micro-batch, on that micro-batch's loss."),
    "wrong-backward-count-later": (
        "backward() ran {backwards} times for {k} micro-batches (on {on}): call it once per "
        "micro-batch, on that micro-batch's loss, inside the loop."),
    "rescales-the-step-not-the-loss": (
        "The step is right, but .grad holds {k} times the big batch's gradient after your "
        "function (on {on}): the losses were not divided by {k}, and the step was scaled some "
        "other way. Divide each micro-batch's loss by len(batches), so that the gradient itself "
        "is the big batch's."),
    "wrong-later-step": (
        "The first call was right, but on {on} the parameters are not what a second accumulation "
        "step gives with this optimizer (its momentum carries the first step's gradient over). "
        "Each call must start from zero gradients, add the k micro-batches' gradients (each loss "
        "divided by k), and step the optimizer it was given once."),
    "no-zero-grad": (
        "Gradients left over from before the call were added in: .grad already held an old "
        "gradient. Call optimizer.zero_grad() once, before the first micro-batch. (on {on})"),
    "no-division-by-k": (
        "Your update is {k} times too large ({k} micro-batches): each loss is a mean over its "
        "micro-batch, so summing k of them gives k times the big batch's gradient. Divide each "
        "micro-batch's loss by {k} (len(batches)) before backward(). (on {on})"),
    "no-division-no-zero-grad": (
        "Two mistakes: the update is {k} times too large (divide each loss by len(batches)) and "
        "old gradients were added in (zero_grad() first). (on {on})"),
    "zero-grad-in-loop": (
        "Only the last micro-batch's gradient reached the step: zero_grad() inside the loop wipes "
        "what the earlier micro-batches accumulated. Zero once, before the loop. (on {on})"),
    "zero-grad-in-loop-no-division": (
        "Only the last micro-batch's gradient reached the step (zero_grad() inside the loop), and "
        "it was not divided by the number of micro-batches. Zero once before the loop; divide "
        "each loss by len(batches). (on {on})"),
    "divides-twice": (
        "Your update is {k} times too small: divide each micro-batch's loss by the number of "
        "micro-batches ({k}) once, not twice. (on {on})"),
    "divides-by-micro-batch-size": (
        "Your step is {ratio:.3g} times the big batch's gradient (on {on}): you divided each loss "
        "by the micro-batch size ({micro}) instead of the number of micro-batches ({k}). loss_fn "
        "already averages over a micro-batch; divide by len(batches). It should equal the "
        "gradient of one big batch."),
    "rescaled-gradient": (
        "Your step goes the way of the big batch's gradient, but is {ratio:.3g} times its length "
        "(on {on}; the big batch's gradient has norm {big_length:.3g}): the accumulated gradient "
        "was rescaled, by a division by another number than len(batches) ({k}), by gradient "
        "clipping (clip_grad_norm_) or by an extra factor. It should equal the gradient of one "
        "big batch: divide each loss by len(batches), and nothing more."),
    "values-then": " It should equal the gradient of one big batch made of all the micro-batches.",
    "passed": (
        "Correct: one step whose gradient equals the big batch's, while only one micro-batch's "
        "activations were in memory at a time."),
    "hint-1": (
        "Three parts: clear the old gradients, run forward and backward on each micro-batch "
        "(backward adds into .grad), then step once."),
    "hint-2": (
        "loss_fn returns a mean over its micro-batch; the big batch's loss is the mean of k such "
        "means, so divide each loss by k = len(batches) before backward()."),
    "hint-3": (
        "optimizer.zero_grad(); for x, y in batches: (loss_fn(model(x), y) / len(batches))"
        ".backward(); then optimizer.step()."),
    "second-backward": (
        "backward() on a loss whose graph was already used: call it once per micro-batch, on that "
        "micro-batch's loss."),
    "batches-not-unpacked-as-pairs": "batches is a list of (x, y) pairs: `for x, y in batches:`.",
})


# ============================================================================================
# P5 — gradient accumulation that matches one big batch
# ============================================================================================
def accumulation_step(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()  # once, before the first micro-batch
    k = len(batches)
    for x, y in batches:
        loss = loss_fn(model(x), y) / k  # each micro-batch is 1/k of the big batch's mean
        loss.backward()  # adds into .grad; this micro-batch's graph is freed here
    optimizer.step()  # once, after all k micro-batches


_STALE = 0.5  # what .grad holds before the call: a previous step's gradient, left there


def _accumulation_case(seed, k, micro, sizes, loss_name, dtype=torch.float32, spread=False):
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    n_in, n_hidden, n_out = sizes
    model = nn.Sequential(nn.Linear(n_in, n_hidden), nn.Tanh(), nn.Linear(n_hidden, n_out)).to(dtype)
    xs = [torch.randn(micro, n_in, generator=generator, dtype=dtype) for _ in range(k)]
    if loss_name == "cross_entropy":
        ys = [torch.randint(0, n_out, (micro,), generator=generator) for _ in range(k)]
        loss_fn = F.cross_entropy
    else:
        # Targets on a larger scale: a gradient whose norm is well above 1 (about 2.4), so that
        # clipping it to norm 1 changes the step.
        ys = [5 * torch.randn(micro, n_out, generator=generator, dtype=dtype) for _ in range(k)]
        loss_fn = F.mse_loss
    if spread:  # inputs laid out otherwise in memory (edges.not_contiguous): view() fails on them
        xs = [not_contiguous(x) for x in xs]
    return model, list(zip(xs, ys)), loss_fn


def _grad_or_zeros(p):
    return torch.zeros_like(p) if p.grad is None else p.grad


def _grads_of(model, loss_fn, batches, divide=True):
    """The gradient accumulated over ``batches`` by a fresh copy, as one flat array."""
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    for x, y in batches:
        loss = loss_fn(model(x), y)
        (loss / len(batches) if divide else loss).backward()
    return _flat(_grad_or_zeros(p) for p in model.parameters())


# (seed, k, micro-batch size, layer sizes, loss, momentum: the optimizer's state, calls, what
# else the case starts from: the module states it is put in (states.py; none: train mode and an
# old .grad of _STALE), the dtype, the optimizer's parameter groups)
_ACCUMULATION_CASES = [
    (0, 4, 5, (6, 10, 4), "cross_entropy", 0.9, 2, {}),
    (1, 3, 4, (3, 5, 2), "mse_loss", 0.0, 1, {}),
    (2, 2, 3, (4, 6, 3), "mse_loss", 0.9, 2, {"states": ["eval", "first-frozen", "grad-none"], "groups": 2}),
    (3, 3, 1, (5, 4, 3), "cross_entropy", 0.0, 1, {"dtype": "float64", "spread": True}),
]


def _extras_text(extras):
    words = []
    if "eval" in extras.get("states", []):
        words.append("the model in eval mode")
    if "first-frozen" in extras.get("states", []):
        words.append("its first weight frozen")
    if "grad-none" in extras.get("states", []):
        words.append("every .grad None")
    if extras.get("groups"):
        words.append(f"{extras['groups']} parameter groups")
    if extras.get("dtype"):
        words.append(f"a {extras['dtype']} model and batches")
    if extras.get("spread"):
        words.append("inputs that are not contiguous in memory")
    return ", " + ", ".join(words) if words else ""


def _gradient_state(model):
    grads = [p.grad for p in model.parameters()]
    if all(g is None for g in grads):
        return "none"
    flat = _flat((torch.zeros_like(p) if g is None else g) for p, g in zip(model.parameters(), grads))
    return "zero" if not flat.any() else flat


def _batches_problem(given, kept):
    if len(given) != len(kept):
        return f"the list had {len(kept)} micro-batches before the call and {len(given)} after"
    for index, ((x, y), (x0, y0)) in enumerate(zip(given, kept)):
        for name, a, b in (("x", x, x0), ("y", y, y0)):
            if not (isinstance(a, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                    and bool(torch.equal(a, b))):
                return f"{name} of micro-batch {index} changed"
    return None


def _set_up(model, extras):
    """The module states and the optimizer of a case: an old .grad of _STALE unless a state says
    otherwise, then SGD over the parameters in as many groups as the case names."""
    for p in model.parameters():
        p.grad = torch.full_like(p, _STALE)
    for state in extras.get("states", []):
        MODULE_STATES[state].put(model)  # eval, a frozen weight, .grad None: no context to enter


def _optimizer(model, extras, momentum):
    if extras.get("groups") == 2:
        params = [{"params": list(model[0].parameters())}, {"params": list(model[2].parameters())}]
    else:
        params = list(model.parameters())
    return torch.optim.SGD(params, lr=_LR, momentum=momentum)


def _mode_and_frozen(left):
    """A states.snapshot with its numbers left out: those the judge compares within tolerance."""
    return {**left, "values": {}, "grads": {}, "buffers": {}}


def _probe_accumulation_step(answer, run):
    """What the answer's steps did to a model and optimizer the probe built, and the state they
    started from ("given": parameters, the stale .grad, the module states, the optimizer's
    settings, the micro-batches): never what the reference's step or a classic mistake gives
    (``_expect_accumulation_step`` replays them on a rebuilt model, on the judge's side)."""
    cases = []
    record = {"cases": cases}
    for seed, k, micro, sizes, loss_name, momentum, calls, extras in _ACCUMULATION_CASES:
        dtype = getattr(torch, extras.get("dtype", "float32"))
        model, batches, loss_fn = _accumulation_case(seed, k, micro, sizes, loss_name, dtype,
                                                     extras.get("spread", False))
        _set_up(model, extras)
        optimizer = _optimizer(model, extras, momentum)
        given_training = model.training
        start = {  # what the first call starts from: a fresh optimizer, a stale .grad
            "seed": seed, "sizes": list(sizes), "loss": loss_name, **extras,
            "parameters": [given(p) for p in model.parameters()],
            "grads": [None if p.grad is None else given(p.grad) for p in model.parameters()],
            "requires_grad": [bool(p.requires_grad) for p in model.parameters()],
            "training": given_training,
            "optimizer": {"kind": "SGD", "lr": _LR, "momentum": momentum, "state": "empty"},
        }
        steps, backwards, other_mode_forwards, forward_dtypes = [], [], [], []
        # Each hook is bound to this case's lists: a model or optimizer of an earlier case, kept
        # by the learner's code, must not count as the one given now.
        optimizer.register_step_post_hook(lambda *args, steps=steps: steps.append(1))
        model[0].register_forward_hook(  # a step trains in the mode the model is given in
            lambda module, inputs, output, seen=other_mode_forwards, mode=given_training:
            None if module.training == mode else seen.append(1)
        )
        model[0].register_forward_hook(  # and in the model's own precision
            lambda module, inputs, output, seen=forward_dtypes: seen.append(str(output.dtype))
        )
        model[2].weight.register_hook(lambda grad, backwards=backwards: backwards.append(1))
        for call in range(calls):
            if call:  # the next step, on new micro-batches, with the same model and optimizer
                _, batches, _ = _accumulation_case(seed + 10, k, micro, sizes, loss_name, dtype,
                                                   extras.get("spread", False))
            setting = (
                f"{k} micro-batches of {micro} examples, loss {loss_name}, "
                + (f"SGD with momentum={momentum}" if momentum else "plain SGD") + _extras_text(extras)
            )
            on = setting if calls == 1 else f"{setting}, call {call + 1} of {calls} in a row"
            # A later call starts from where the answer's first call left the model: that is no
            # input of the probe's (the judge's side replays the reference's own first step).
            case = {
                "on": on,
                "k": k,
                "micro": micro,
                "call": call,
                "given_training": given_training,
                "given": {"batches": [[given(x), given(y)] for x, y in batches],
                          **({"start": start} if call == 0 else {})},
            }
            steps.clear()
            backwards.clear()
            other_mode_forwards.clear()
            forward_dtypes.clear()
            before = _flat(model.parameters())
            learner_batches = [(x.clone(), y.clone()) for x, y in batches]
            given_batches = list(learner_batches)
            settings = session_settings()
            try:
                run(answer, model, optimizer, loss_fn, given_batches, on=on)
            except LearnerRaised as raised:
                # The judge decides: a mistake the earlier calls already show is the one to
                # report, not the error a later call led to.
                record["raised"] = later_error(raised, answer, cases)
                return record
            case["settings_changed"] = changed_settings(settings, session_settings())
            case["steps"] = len(steps)
            case["backwards"] = len(backwards)
            case["eval_forwards"] = len(other_mode_forwards)
            case["other_dtypes"] = sorted(set(forward_dtypes) - {str(dtype)})
            case["training_after"] = all(m.training for m in model.modules())
            case["left"] = _mode_and_frozen(snapshot(model))
            case["update"] = (before - _flat(model.parameters())) / _LR
            case["lr_after"] = [float(group["lr"]) for group in optimizer.param_groups]
            case["grads_after"] = _gradient_state(model)
            case["batches_changed"] = _batches_problem(given_batches, [(x, y) for x, y in batches])
            case["parameters"] = _flat(model.parameters())
            cases.append(case)
    return record


def _rebuilt(start):
    """The probe's model, rebuilt from its recorded start: the architecture its sizes give, with
    the recorded parameters, .grad, frozen parameters and mode; an optimizer with the recorded
    settings and parameter groups."""
    n_in, n_hidden, n_out = start["sizes"]
    torch.manual_seed(start["seed"])  # inside judge_side(): the session's stream is put back
    model = nn.Sequential(nn.Linear(n_in, n_hidden), nn.Tanh(), nn.Linear(n_hidden, n_out))
    model.to(getattr(torch, start.get("dtype", "float32")))
    load_given(model, start["parameters"], start["grads"])
    for p, wants in zip(model.parameters(), start.get("requires_grad", [])):
        p.requires_grad_(wants)
    model.train(start.get("training", True))
    optimizer = _optimizer(model, start, start["optimizer"]["momentum"])
    return model, optimizer


def _expect_accumulation_step(record):
    """What the reference's steps give from the recorded start, call after call (the parameters
    after each, and what it leaves of the model's modes and frozen parameters), and, on the
    same model, the big batch's gradient and what the classic mistakes (no division by k,
    zero_grad in the loop) accumulate, for the judge."""
    with judge_side():
        for case in record["cases"]:
            batches = [(tensor_of(x), tensor_of(y)) for x, y in case["given"]["batches"]]
            if case["call"] == 0:
                start = case["given"]["start"]
                model, optimizer = _rebuilt(start)
                loss_fn = F.cross_entropy if start["loss"] == "cross_entropy" else F.mse_loss
            k = len(batches)
            big = copy.deepcopy(model)
            big.zero_grad(set_to_none=True)
            loss_fn(big(torch.cat([x for x, _ in batches])), torch.cat([y for _, y in batches])).backward()
            case["big_batch"] = _flat(_grad_or_zeros(p) for p in big.parameters())
            case["summed"] = _grads_of(model, loss_fn, batches, divide=False)
            case["last_only"] = _grads_of(model, loss_fn, batches[-1:], divide=False) / k
            case["last_only_undivided"] = _grads_of(model, loss_fn, batches[-1:], divide=False)
            accumulation_step.reference(model, optimizer, loss_fn, batches)
            case["expected"] = _flat(model.parameters())
            case["expected_left"] = _mode_and_frozen(snapshot(model))
    return record


_TOL = {"rtol": 1e-4, "atol": 1e-6}


def _judge_accumulation_step(record):
    problem = _judge_accumulation_cases(record["cases"])
    if problem is None and record.get("raised"):
        return Raised(record["raised"])
    return problem


def _judge_accumulation_cases(cases):
    for index, case in enumerate(cases):
        on, k, update, big = case["on"], case["k"], case["update"], case["big_batch"]
        if case["batches_changed"]:
            return MESSAGES("changes-the-batches", on=on, what=case["batches_changed"])
        if case["steps"] == 0 and not same_values(update, np.zeros_like(update)):
            return MESSAGES("ignores-given-optimizer", on=on)
        if case["steps"] == 0:
            # After calls whose steps ran: an optimizer other than the one given now (kept from
            # an earlier call) took this one.
            stepped_before = any(c["steps"] for c in cases[:index])
            return Mistake("ignores-given-optimizer" if stepped_before else "no-optimizer-step",
                           MESSAGES.text("no-optimizer-step", on=on))
        if case["steps"] > 1:
            return MESSAGES("step-per-micro-batch", steps=case["steps"], k=k, on=on)
        given_training = case.get("given_training", True)
        if case.get("eval_forwards"):
            return MESSAGES("accumulates-in-eval-mode" if given_training else "accumulates-in-train-mode", on=on)
        if given_training and not case.get("training_after", True):
            return MESSAGES("leaves-eval-mode", on=on)
        found = differences(case["left"], case["expected_left"]) if "expected_left" in case else []
        if found:
            return MESSAGES("leaves-the-model-changed", on=on, difference=found[0])
        if case.get("settings_changed"):
            return MESSAGES("changes-settings", on=on, what=" and ".join(case["settings_changed"]))
        if any(lr != _LR for lr in case["lr_after"]):
            return MESSAGES("changes-learning-rate", on=on, lr=case["lr_after"][0], expected_lr=_LR)
        if case["call"] == 0 and same_values(update, big, **_TOL):
            if case["backwards"] == 1 and k > 1:
                return MESSAGES("one-backward-for-all", k=k, on=on)
            if case["backwards"] != k:
                return MESSAGES("wrong-backward-count", backwards=case["backwards"], k=k, on=on)
            grads = case["grads_after"]
            if not isinstance(grads, str) and same_values(grads, big * k, **_TOL):
                return MESSAGES("rescales-the-step-not-the-loss", k=k, on=on)
            continue
        if case["call"] > 0:
            if case["backwards"] != k:
                return MESSAGES("wrong-backward-count-later", backwards=case["backwards"], k=k, on=on)
            if same_values(case["parameters"], case["expected"], **_TOL):
                continue
            return MESSAGES("wrong-later-step", on=on)
        named = [  # (what the step gives, the mistake)
            (big + _STALE, "no-zero-grad"),
            (case["summed"], "no-division-by-k"),
            (case["summed"] + _STALE, "no-division-no-zero-grad"),
            (case["last_only"], "zero-grad-in-loop"),
            (case["last_only_undivided"], "zero-grad-in-loop-no-division"),
            (big / k, "divides-twice"),
        ]
        for expected, mistake in named:
            if same_values(update, expected, **_TOL):
                fields = {"k": k} if "{k}" in MESSAGES[mistake].text else {}
                return MESSAGES(mistake, on=on, **fields)
        length, big_length = float(np.linalg.norm(update)), float(np.linalg.norm(big))
        if length > 0 and big_length > 0 and same_values(update * (big_length / length), big, **_TOL):
            ratio = length / big_length
            micro = case.get("micro")
            if micro and abs(ratio - k / micro) < 1e-3 * ratio:
                return MESSAGES("divides-by-micro-batch-size", ratio=ratio, on=on, micro=micro, k=k)
            return MESSAGES("rescaled-gradient", ratio=ratio, on=on, big_length=big_length, k=k)
        if case.get("other_dtypes"):
            return MESSAGES("changes-precision", dtypes=" and ".join(case["other_dtypes"]), on=on)
        return values_problem(
            update, big, what="the step's gradient (weight change / lr)", on=on, rtol=1e-4, atol=1e-6
        ) + MESSAGES.text("values-then")
    return None


accumulation_step = Exercise(
    "accumulation_step",
    chapter=CHAPTER,
    title="Gradient accumulation",
    expects=Function(
        "accumulation_step", ("model", "optimizer", "loss_fn", "batches"),
        returns="nothing: it changes the model's parameters through optimizer.step()",
    ),
    probe=_probe_accumulation_step,
    expect=_expect_accumulation_step,
    judge=_judge_accumulation_step,
    reference=accumulation_step,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "second-backward": "Trying to backward through the graph a second time",
        "batches-not-unpacked-as-pairs": "too many values to unpack",
    }),
    messages=MESSAGES,
)
