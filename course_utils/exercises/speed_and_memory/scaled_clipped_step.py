"""Chapter 05, P11: scaled_clipped_step, a float16 GradScaler step with gradient clipping.

Engine: applies states.module_states ("eval", "first-frozen", an old .grad of inf, calls in a row
with the optimizer's and the scaler's state) with states.snapshot/differences (modes and
requires_grad left, against what the reference leaves), states.session_settings/changed_settings,
and the non-finite edges of edges.float_edges for the gradients (inf from an overflow, nan);
loss_fn is given wrapped, noting whether each call runs under autocast (the task computes
loss_fn(model(x), y) under it);
hand-written because the answer is a training step on a module, an optimizer and a GradScaler
(rules: float16 autocast, the scaler given), whose classic orders are replayed on the judge's side.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function, Raised, later_error
from course_utils.exercises.facts import given, same_values, tensor_of, values_problem
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.speed_and_memory.common import CHAPTER, _LR, _flat
from course_utils.exercises.running import judge_side
from course_utils.exercises.edges import edge_values
from course_utils.exercises.facts import load_given
from course_utils.exercises.speed_and_memory.scaled_step_mistakes import _WRONG_ORDERS, MESSAGES, NOTE_CLUES
from course_utils.exercises.states import MODULE_STATES, changed_settings, differences, session_settings, snapshot


# ============================================================================================
# P11 — a float16 GradScaler step with gradient clipping: unscale_ before clip_grad_norm_
# ============================================================================================
def scaled_clipped_step(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()  # .grad may hold inf from a skipped step: start from nothing
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()  # the gradients are multiplied by the scale
    scaler.unscale_(optimizer)  # divide them back, in place, before looking at their norm
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)  # skipped when unscale_ found inf or nan
    scaler.update()  # halve the scale after a skipped step, grow it after many good ones


_SCALE = 1024.0  # the probes' initial scale: large enough to matter, small enough not to overflow
_OVERFLOW_TARGET = 1e4  # targets this far make the float16 gradients overflow


def _parameters(model, groups):
    """The optimizer's parameters: all in one group, or one group per linear layer."""
    if groups == 2:
        return [{"params": list(model[0].parameters())}, {"params": list(model[2].parameters())}]
    return list(model.parameters())


def _scaled_setting(kind, seed, extras=None):
    """A fresh model, optimizer and scaler of one case (the model from the seed), the model put
    in the module states the case names (states.py)."""
    extras = extras or {}
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    for state in extras.get("states", []):
        MODULE_STATES[state].put(model)  # eval, a frozen weight: no context to enter
    params = _parameters(model, extras.get("groups"))
    if kind == "adam":
        optimizer = torch.optim.Adam(params, lr=0.01)
    else:
        optimizer = torch.optim.SGD(params, lr=_LR, momentum=0.9 if kind == "momentum" else 0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=_SCALE)
    return model, optimizer, scaler


def _scaled_batch(seed, overflow=False, classes=False, nan=False):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 6, generator=generator)
    if classes:  # class labels for cross_entropy, whose two arguments cannot be swapped
        return x, torch.randint(0, 2, (8,), generator=generator)
    y = 3 * torch.randn(8, 2, generator=generator)  # far from the outputs: a gradient norm above 1
    if nan:  # the other non-finite edge (edges.float_edges): one nan target, nan gradients
        y[0, 0] = edge_values(torch.float32)[-1]
    return x, (y * _OVERFLOW_TARGET if overflow else y)


# (what the case is, optimizer kind, seed, max_norm, batches: each "normal" or "overflow",
# and whether .grad holds inf before the first call, as a skipped step leaves it)
_SCALED_CASES = [
    ("SGD with momentum=0.9, max_norm=0.5 (the gradients' norm is above it), .grad holding inf "
     "before the call (what a skipped step leaves)", "momentum", 0, 0.5, ["normal"] * 2, True),
    ("Adam, loss_fn=F.cross_entropy, max_norm=50.0 (the gradients' norm is below it: clipping "
     "changes nothing)", "adam", 1, 50.0, ["normal"] * 2, False),
    (f"plain SGD, max_norm=1.0, a batch whose targets are {_OVERFLOW_TARGET:g} times larger (its "
     "float16 gradients overflow to inf), then a normal batch", "sgd", 2, 1.0,
     ["overflow", "normal"], False),
    ("SGD with momentum=0.9 in two parameter groups, max_norm=0.5, the model in eval mode with its "
     "first weight frozen (requires_grad=False), and a batch with a nan target (its gradients "
     "are nan) between normal ones", "momentum", 3, 0.5, ["normal", "nan", "normal"], False,
     {"states": ["eval", "first-frozen"], "groups": 2}),
]


def _recording(loss_fn, targets, autocast):
    """loss_fn as it is, noting the dtype of the targets each call is given and whether it runs
    under autocast."""
    def loss(input, target, *args, **kwargs):
        targets.append(str(getattr(target, "dtype", type(target).__name__)))
        device = getattr(input, "device", torch.device("cpu")).type
        autocast.append(bool(torch.is_autocast_enabled(device)))
        return loss_fn(input, target, *args, **kwargs)

    return loss


def _same_tensor(a, b):
    """torch.equal, with nan equal to nan (a batch may hold a nan target)."""
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


def _scaled_state(model):
    flat = _flat(model.parameters())
    return flat, bool(np.isfinite(flat).all())


def _probe_scaled_clipped_step(answer, run):
    """What the answer's steps did to a model, optimizer and scaler the probe built, and the
    state they started from ("given": parameters, .grad, the optimizer's and the scaler's
    settings, each batch): never what the reference's step or a wrong order gives
    (``_expect_scaled_clipped_step`` replays them on a rebuilt model, on the judge's side)."""
    calls = []
    record = {"calls": calls}
    for on_case, kind, seed, max_norm, kinds, inf_grads, *more in _SCALED_CASES:
        extras = more[0] if more else {}
        loss_fn = F.cross_entropy if kind == "adam" else F.mse_loss
        model, optimizer, scaler = _scaled_setting(kind, seed, extras)
        steps, dtypes, targets, autocast = [], [], [], []
        optimizer.register_step_post_hook(lambda *args, steps=steps: steps.append(1))
        model[0].register_forward_hook(
            lambda module, inputs, output, seen=dtypes: seen.append(str(output.dtype))
        )
        if inf_grads:
            for p in model.parameters():
                p.grad = torch.full_like(p, float("inf"))
        start = {  # what the first call starts from: a fresh optimizer and scaler
            "kind": kind, "seed": seed, "loss": "cross_entropy" if loss_fn is F.cross_entropy else "mse_loss",
            "parameters": [given(p) for p in model.parameters()],
            "grads": [None if p.grad is None else given(p.grad) for p in model.parameters()],
            "requires_grad": [bool(p.requires_grad) for p in model.parameters()],
            "training": bool(model.training), "groups": extras.get("groups"),
            "optimizer": {"kind": type(optimizer).__name__, "state": "empty",
                          **{key: float(optimizer.defaults[key]) for key in ("lr", "momentum")
                             if key in optimizer.defaults}},
            "scaler": {"init_scale": float(scaler.get_scale()), "growth_factor": float(scaler.get_growth_factor()),
                       "backoff_factor": float(scaler.get_backoff_factor()),
                       "growth_interval": int(scaler.get_growth_interval())},
        }
        for index, batch_kind in enumerate(kinds):
            batch = _scaled_batch(seed * 10 + index, overflow=batch_kind == "overflow",
                                  classes=loss_fn is F.cross_entropy, nan=batch_kind == "nan")
            on = f"{on_case}; call {index + 1} of {len(kinds)} in a row ({batch_kind} batch)"
            # A later call starts from where the answer's earlier calls left the model: that is
            # no input of the probe's (the judge's side replays the reference's own steps).
            call = {"on": on, "index": index, "overflow": batch_kind in ("overflow", "nan"),
                    "inf_before": inf_grads and index == 0, "max_norm": max_norm,
                    "given": {"batch": [given(t) for t in batch], "max_norm": max_norm,
                              **({"start": start} if index == 0 else {})}}
            before = _flat(model.parameters())
            kept = [t.clone() for t in batch]
            steps.clear()
            dtypes.clear()
            targets.clear()
            autocast.clear()
            call["scale_before"] = float(scaler.get_scale())
            used_before = getattr(scaler, "_scale", None) is not None  # made by its first scale()
            settings = session_settings()
            try:
                run(answer, model, optimizer, scaler, _recording(loss_fn, targets, autocast), batch, max_norm, on=on)
            except LearnerRaised as raised:
                # The judge decides: a mistake the earlier calls already show is the one to
                # report, not the error a later call led to.
                record["raised"] = later_error(raised, answer, calls)
                return record
            call["settings_changed"] = changed_settings(settings, session_settings())
            call["left"] = _mode_and_frozen(snapshot(model))
            call["scaler_used"] = used_before or getattr(scaler, "_scale", None) is not None
            after, finite = _scaled_state(model)
            call["scale_after"] = float(scaler.get_scale())
            # update() empties the scaler's per-optimizer record; a step() after it leaves one.
            call["stepped_after_update"] = bool(getattr(scaler, "_per_optimizer_states", {}))
            call["steps"] = len(steps)
            call["dtypes"] = sorted(set(dtypes))
            call["target_dtypes"] = sorted(set(targets) - {str(batch[1].dtype)})
            call["loss_outside_autocast"] = not all(autocast)
            call["batch_changed"] = not all(_same_tensor(a, b) for a, b in zip(batch, kept))
            call["finite"] = finite
            call["update"] = before - after if finite else None
            calls.append(call)
    return record


def _mode_and_frozen(left):
    """A states.snapshot with its numbers left out: those the judge compares within tolerance."""
    return {**left, "values": {}, "grads": {}, "buffers": {}}


def _rebuilt(start, grads=True):
    """The probe's model, optimizer and scaler, rebuilt from a case's recorded start: the
    architecture, the recorded parameters (and .grad, unless ``grads`` is False: then none),
    the optimizer's and the scaler's recorded settings."""
    torch.manual_seed(start["seed"])  # inside judge_side(): the session's stream is put back
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    load_given(model, start["parameters"], start["grads"] if grads else [None] * len(start["grads"]))
    for p, wants in zip(model.parameters(), start.get("requires_grad", [])):
        p.requires_grad_(wants)
    model.train(start.get("training", True))
    settings = start["optimizer"]
    params = _parameters(model, start.get("groups"))
    if settings["kind"] == "Adam":
        optimizer = torch.optim.Adam(params, lr=settings["lr"])
    else:
        optimizer = torch.optim.SGD(params, lr=settings["lr"], momentum=settings["momentum"])
    scaler = torch.amp.GradScaler("cpu", **start["scaler"])
    return model, optimizer, scaler


def _expect_scaled_clipped_step(record):
    """What the reference's steps give from each case's recorded start, call after call (the
    weight change and the scale after each), and, from the first call's start, what each wrong
    order of the calls gives, for the judge."""
    with judge_side():
        for call in record["calls"]:
            batch = [tensor_of(t) for t in call["given"]["batch"]]
            if call["index"] == 0:
                start = call["given"]["start"]
                model, optimizer, scaler = _rebuilt(start)
                loss_fn = F.cross_entropy if start["loss"] == "cross_entropy" else F.mse_loss
            if call["inf_before"]:  # what each wrong order gives from the same start
                alternatives = {}
                for name, wrong in _WRONG_ORDERS.items():
                    # The wrong orders all clear .grad: only the order differs.
                    alt_model, alt_optimizer, alt_scaler = _rebuilt(start, grads=False)
                    alt_before = _flat(alt_model.parameters())
                    wrong(alt_model, alt_optimizer, alt_scaler, loss_fn, [t.clone() for t in batch],
                          call["given"]["max_norm"])
                    alternatives[name] = alt_before - _flat(alt_model.parameters())
                call["alternatives"] = alternatives
            before = _flat(model.parameters())
            scaled_clipped_step.reference(model, optimizer, scaler, loss_fn, [t.clone() for t in batch],
                                          call["given"]["max_norm"])
            call["expected"] = before - _flat(model.parameters())
            call["expected_scale"] = float(scaler.get_scale())
            call["expected_left"] = _mode_and_frozen(snapshot(model))
    return record


_SCALED_TOL = {"rtol": 1e-4, "atol": 1e-7}


_TWO_SLIPS = "clips-before-unscale-or-updates-first"


def _one_of_two_slips(calls) -> str | None:
    """"update_first" or "clips_scaled" when some call's step matches exactly one of them."""
    if any(call.get("stepped_after_update") for call in calls):
        return "update_first"
    if calls and all("stepped_after_update" in call for call in calls):
        return "clips_scaled"  # every update() came last: the steps are short for the other reason
    for call in calls:
        alternatives = call.get("alternatives", {})
        found = [
            name for name in ("update_first", "clips_scaled")
            if alternatives.get(name) is not None
            and not same_values(alternatives[name], call["expected"], **_SCALED_TOL)
            and same_values(call["update"], alternatives[name], **_SCALED_TOL)
        ]
        if len(found) == 1:
            return found[0]
    return None


def _judge_scaled_clipped_step(record):
    """The first mistake of the calls, read as far as the first call that names one for sure:
    two slips alike go on to a call that tells them apart, a mistake named for sure ends the
    reading (the calls after it do not change the verdict), and an error of a later call is the
    verdict only when the calls before it show no such mistake."""
    calls = record["calls"]
    for seen in range(1, len(calls) + 1):
        problem = _judge_scaled_calls(calls[:seen])
        if problem is not None and getattr(problem, "id", "") != _TWO_SLIPS:
            return problem
    if record.get("raised"):
        return Raised(record["raised"])
    return _judge_scaled_calls(calls)


def _judge_scaled_calls(calls):
    for call in calls:
        on, update, expected = call["on"], call["update"], call["expected"]
        if call["batch_changed"]:
            return MESSAGES("changes-the-batch", on=on)
        if not call["dtypes"]:
            return MESSAGES("no-forward", on=on)
        if call["dtypes"] != ["torch.float16"]:
            mistake = "bfloat16-autocast" if "torch.bfloat16" in call["dtypes"] else "no-autocast"
            return MESSAGES(mistake, dtypes=" and ".join(call["dtypes"]), on=on)
        if call.get("target_dtypes"):
            return MESSAGES("converts-the-targets", dtypes=" and ".join(call["target_dtypes"]), on=on)
        if call.get("loss_outside_autocast"):
            return MESSAGES("loss-outside-autocast", on=on)
        found = differences(call["left"], call["expected_left"]) if "expected_left" in call else []
        if found:
            return MESSAGES("leaves-the-model-changed", on=on, difference=found[0])
        if call.get("settings_changed"):
            return MESSAGES("changes-settings", on=on, what=" and ".join(call["settings_changed"]))
        if call["overflow"]:
            if not call["finite"] or call["steps"] or not same_values(update, np.zeros_like(update), rtol=0, atol=0):
                return MESSAGES("steps-on-overflow", on=on,
                                how="became inf or nan" if not call["finite"] else "moved")
            if call["scale_after"] != call["expected_scale"]:
                return _scale_message(call)
            continue
        if not call["finite"]:
            return MESSAGES("steps-on-non-finite-grads", on=on)
        if call.get("scaler_used") is False:
            return MESSAGES("own-scaler", on=on)
        if call["steps"] == 0 and same_values(update, np.zeros_like(update), rtol=0, atol=0):
            return MESSAGES("no-zero-grad" if call["inf_before"] else "no-optimizer-step", on=on)
        if call["steps"] > 1:
            return MESSAGES("several-steps", steps=call["steps"], on=on)
        if call["scale_after"] != call["expected_scale"]:
            return _scale_message(call)
        if same_values(update, expected, **_SCALED_TOL):
            continue
        if call["steps"] == 1 and same_values(update, np.zeros_like(update), rtol=0, atol=1e-12):
            return MESSAGES("zero-grad-between-backward-and-step", on=on)
        named = {  # the wrong order replayed on the judge's side: its mistake and the fields it fills
            "update_first": ("update-before-step", {}),
            "clips_scaled": ("clips-before-unscale", {"scale": call["scale_before"]}),
            "no_clip": ("no-clipping", {"max_norm": call["max_norm"]}),
            "unscaled_backward": ("backward-on-the-plain-loss", {}),
        }
        matches = [
            name for name in named
            if (alternative := call.get("alternatives", {}).get(name)) is not None
            and not same_values(alternative, expected, **_SCALED_TOL)
            and same_values(update, alternative, **_SCALED_TOL)
        ]
        if "update_first" in matches and "clips_scaled" in matches:
            # Above max_norm both slips shrink the step by the scale alike; a call below it
            # (where clipping does nothing) tells them apart, if the answer got that far.
            told = _one_of_two_slips(calls)
            if told:
                mistake, fields = named[told]
                return MESSAGES(mistake, on=on, **fields)
            return MESSAGES(_TWO_SLIPS, on=on)
        if matches:
            mistake, fields = named[matches[0]]
            return MESSAGES(mistake, on=on, **fields)
        if call["index"] > 0:
            return MESSAGES("replaces-optimizer-or-scaler", on=on)
        length, expected_length = float(np.linalg.norm(update)), float(np.linalg.norm(expected))
        if length > 0 and expected_length > 0 and same_values(
            update * (expected_length / length), expected, **_SCALED_TOL
        ):
            return MESSAGES("wrong-clip-norm", ratio=length / expected_length, on=on, max_norm=call["max_norm"])
        return values_problem(
            update, expected, what="the weight change of the step", on=on, rtol=1e-4, atol=1e-7
        ) + MESSAGES.text("values-then")
    return None


def _scale_message(call):
    before, after, expected = call["scale_before"], call["scale_after"], call["expected_scale"]
    if after == before:
        return MESSAGES("given-scaler-not-updated", before=before, on=call["on"], expected=expected)
    return MESSAGES("update-not-once", after=after, expected=expected, on=call["on"])


scaled_clipped_step = Exercise(
    "scaled_clipped_step",
    chapter=CHAPTER,
    title="float16 with a GradScaler and clipping",
    expects=Function(
        "scaled_clipped_step", ("model", "optimizer", "scaler", "loss_fn", "batch", "max_norm"),
        returns="nothing: it changes the model through scaler.step(optimizer)",
    ),
    probe=_probe_scaled_clipped_step,
    expect=_expect_scaled_clipped_step,
    judge=_judge_scaled_clipped_step,
    reference=scaled_clipped_step,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes(NOTE_CLUES),
    messages=MESSAGES,
)
