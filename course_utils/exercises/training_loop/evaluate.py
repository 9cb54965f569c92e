"""Chapter 04, L4: evaluate, validation that leaves no trace (eval() and no_grad, then the
model's mode put back).

Engine: applies states.MODULE_STATES (train and eval mode on entry, a frozen layer, "grad-large":
the .grad a training step leaves, called under no_grad, a second call on the changed model),
states.snapshot / differences (what the answer leaves against what the reference leaves on the
same model, rebuilt in expect) and states.session_settings; hand-written because the answer
takes a module and its judge names the slips of a validation pass from the modes, graph and
batch-norm statistics each forward pass saw. Its words are in evaluate_judge.MESSAGES."""

from __future__ import annotations

import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, later_error
from course_utils.exercises.facts import given, tensor_of
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.states import MODULE_STATES, changed_settings, session_settings, snapshot
from course_utils.exercises.training_loop.common import CHAPTER, _returned
from course_utils.exercises.training_loop.evaluate_judge import ERROR_CLUES, MESSAGES, _judge_evaluate


# ============================================================================================
# L4 — validation: eval() and no_grad, then back to the mode the model was in
# ============================================================================================
def evaluate(model, x, y, loss_fn):
    was_training = model.training    # remember the mode the caller left the model in
    model.eval()                     # dropout off, batch norm uses its running statistics
    with torch.no_grad():            # no graph: nothing to backpropagate, less memory
        loss = loss_fn(model(x), y)
    model.train(was_training)        # give the model back as you found it
    return loss.item()


_evaluate = evaluate


def _eval_model(dtype=torch.float32):
    torch.manual_seed(7)
    model = nn.Sequential(
        nn.Linear(5, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3)
    ).to(dtype)
    generator = torch.Generator().manual_seed(70)
    bn = model[1]
    with torch.no_grad():  # running statistics that differ from any one batch's, as after 3 batches
        bn.running_mean.copy_(torch.randn(16, generator=generator) * 0.5)
        bn.running_var.copy_(torch.rand(16, generator=generator) + 0.5)
        bn.num_batches_tracked.fill_(3)
    return model


def _batch_norm_state(model) -> dict:
    bn = model[1]
    return {
        "running_mean": bn.running_mean.detach().double().numpy().copy(),
        "running_var": bn.running_var.detach().double().numpy().copy(),
        "num_batches_tracked": int(bn.num_batches_tracked),
    }


# (input, mode the model arrives in, dtype, label smoothing of loss_fn, a new model or the last)
_EVAL_CASES = (
    ("a float32 model in train mode, as it is during training", True, torch.float32, 0.0, True),
    ("the same model in train mode again, after a training step changed its weights, called "
     "inside the caller's own torch.no_grad()", True, torch.float32, 0.0, False),
    (
        "a float64 model in eval mode whose first layer is frozen (requires_grad=False), with "
        "loss_fn = nn.CrossEntropyLoss(label_smoothing=0.2)",
        False,
        torch.float64,
        0.2,
        True,
    ),
    ("the same float64 model, now back in train mode, on an x that requires grad (the output "
     "of a trainable part before the model)", True, torch.float64, 0.2, False),
)
_EVAL_BATCH = 61  # a prime: a mean of equal chunks' means would not be the batch's mean


def _settings_of(loss_fn) -> dict:
    """A loss module's settings (reduction, label_smoothing, ...): what an answer may change."""
    return {name: value for name, value in vars(loss_fn).items()
            if not name.startswith("_") and isinstance(value, (bool, int, float, str, type(None)))}


def _model_state(model) -> dict:
    """A model's parameters and buffers as plain data, by name."""
    return {name: given(tensor) for name, tensor in model.state_dict().items()}


def _probe_evaluate(answer, run):
    """What the learner's evaluate returned and did to the model, grad mode and batch, and what
    each call was given: the batch, the loss's label smoothing and the model's state (under
    "given" for a model just built from the seeds, "model_before" for the model of the call
    before, which that call may have changed). Never the loss a right answer returns:
    ``_expect_evaluate`` computes it on the judge's side. A later call that raises is recorded;
    the judge decides whether an earlier one shows a slip."""
    generator = torch.Generator().manual_seed(71)
    x = torch.randn(_EVAL_BATCH, 5, generator=generator)
    y = torch.randint(0, 3, (_EVAL_BATCH,), generator=generator)
    cases = []
    record = {"cases": cases}
    model = None
    for on, training, dtype, smoothing, new in _EVAL_CASES:
        if new:  # otherwise the call reuses the previous call's model
            model = _eval_model(dtype)
            if "frozen" in on:
                model[0].requires_grad_(False)
            seen, outer = [], []

            def record_forward(module, inputs, output, seen=seen, outer=outer, index=0):
                # Each module reads its own flag, so a copy of the model (copy.deepcopy copies
                # these hooks too) reports the mode of the copy that ran.
                if index == 0:
                    seen.append(
                        {
                            "grad_enabled": torch.is_grad_enabled(),
                            "graph": False,  # any layer's output recorded for backward()
                            "outer": outer[-1] if outer else None,  # model(x): its own flag
                            "training": [],  # each layer's flag, as the layer ran
                        }
                    )
                    outer.clear()
                if seen:
                    seen[-1]["training"].append(bool(module.training))
                    # A frozen first layer records nothing on a plain x: the graph starts later.
                    seen[-1]["graph"] |= isinstance(output, torch.Tensor) and bool(output.requires_grad)

            # The outer module's flag, when it is called as model(x) (model.forward(x) skips it).
            model.register_forward_pre_hook(
                lambda module, inputs, outer=outer: outer.append(bool(module.training))
            )
            for index, layer in enumerate(model):
                layer.register_forward_hook(  # bound to this model's record, not a later one's
                    lambda m, i, o, index=index, record=record_forward: record(m, i, o, index=index)
                )
        module_states = []
        if "changed its weights" in on:  # as a training step between two validations does,
            with torch.no_grad():  # which also leaves its gradients in .grad
                for p in model.parameters():
                    p.mul_(0.8)
            module_states = ["grad-large"]
        for name in module_states:
            MODULE_STATES[name].put(model)
        model.train(training)
        frozen_before = [n for n, p in model.named_parameters() if not p.requires_grad]
        if new:  # a later call on the same model gets the same batch and loss_fn objects, as
            # validation does epoch after epoch: a cache keyed on them would answer from memory
            loss_fn = nn.CrossEntropyLoss(label_smoothing=smoothing)
            given_x, given_y = x.to(dtype).clone(), y.clone()
        if "requires grad" in on:
            given_x.requires_grad_(True)
        state = {"given": {"x": given(x.to(dtype)), "y": given(y), "label_smoothing": smoothing},
                 "module_states": module_states}
        if new:
            state["given"]["model"] = _model_state(model)
        else:
            state["model_before"] = {"model": _model_state(model)}
        seen.clear()
        stats_before = _batch_norm_state(model)
        torch.manual_seed(72)  # dropout in train mode draws from here
        grad_before = "no_grad" not in on
        torch.set_grad_enabled(grad_before)
        settings, loss_fn_before = session_settings(), _settings_of(loss_fn)
        try:
            returned = run(answer, model, given_x, given_y, loss_fn, on=on)
        except LearnerRaised as raised:
            torch.set_grad_enabled(True)
            if not cases:
                raise  # the first call: nothing before it to judge
            # The judge decides: a slip an earlier call already shows is the one to report, not
            # an error a later input led to.
            record["raised"] = later_error(raised, answer)
            if record["raised"] is None:
                raise
            break
        forwards = list(seen)
        grad_enabled_after = torch.is_grad_enabled()
        settings_changed = changed_settings(settings, session_settings())
        torch.set_grad_enabled(True)
        loss_fn_after = _settings_of(loss_fn)
        case = {
            "on": on,
            "training_before": training,
            "returned": _returned(returned),
            **state,
            "forwards": forwards,
            "grad_enabled_before": grad_before,
            "grad_enabled_after": grad_enabled_after,
            "settings_changed": [name for name in settings_changed if "grad" not in name],
            "loss_fn_changed": [[name, repr(value), repr(loss_fn_after.get(name))]
                                for name, value in loss_fn_before.items() if loss_fn_after.get(name) != value],
            "left": snapshot(model),
            "frozen_before": frozen_before,
            "frozen_after": [n for n, p in model.named_parameters() if not p.requires_grad],
            "inputs_changed": [
                name for name, given_value, kept in (("x", given_x, x.to(dtype)), ("y", given_y, y))
                if not (given_value.shape == kept.shape and given_value.dtype == kept.dtype
                        and bool(torch.equal(given_value, kept)))
            ],
            "training_after": bool(model.training),
            "modules_training_after": [bool(m.training) for m in model.modules()],
            "dtype": str(dtype).replace("torch.", ""),
            "dtypes_after": sorted({str(t.dtype).replace("torch.", "")
                                    for t in list(model.parameters()) + list(model.buffers())
                                    if t.is_floating_point()}),
            "stats_before": stats_before,
            "stats_after": _batch_norm_state(model),
        }
        cases.append(case)
    return record


def _expect_evaluate(record):
    """The loss the reference returns on each call's batch, with the model rebuilt from the
    state the call was given (its parameters, buffers and mode) and the loss_fn's label
    smoothing; with label smoothing, also what plain cross entropy gives (a classic mistake)."""
    reference = evaluate.reference
    for case in record["cases"]:
        start = case["given"] if "model" in case["given"] else case["model_before"]
        dtype = getattr(torch, case["dtype"])
        with torch.random.fork_rng(devices=[]):  # _eval_model seeds torch's generator
            model = _eval_model(dtype)
        with torch.no_grad():
            for name, tensor in model.state_dict().items():
                kept = start["model"].get(name)
                if kept is not None and kept["shape"] == list(tensor.shape) and "values" in kept:
                    tensor.copy_(tensor_of(kept))
        model.train(case["training_before"])
        for name, parameter in model.named_parameters():  # frozen as the call's model was
            parameter.requires_grad_(name not in case.get("frozen_before", []))
        for name in case.get("module_states", []):
            MODULE_STATES[name].put(model)
        x, y = tensor_of(case["given"]["x"]).to(dtype), tensor_of(case["given"]["y"])
        smoothing = case["given"]["label_smoothing"]
        settings = session_settings()
        case["expected_loss"] = reference(model, x, y, nn.CrossEntropyLoss(label_smoothing=smoothing))
        case["expected_settings_changed"] = changed_settings(settings, session_settings())
        case["expected_left"] = snapshot(model)
        if smoothing:
            case["plain_loss"] = reference(model, x, y, nn.CrossEntropyLoss())
    return record


evaluate = Exercise(
    "evaluate",
    chapter=CHAPTER,
    title="Evaluate without side effects",
    expects=Function("evaluate", ("model", "x", "y", "loss_fn"), returns="the loss as a Python float"),
    probe=_probe_evaluate,
    expect=_expect_evaluate,
    judge=_judge_evaluate,
    reference=evaluate,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes(ERROR_CLUES),
    messages=MESSAGES,
)
