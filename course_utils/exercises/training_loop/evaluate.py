"""Chapter 04, L4: evaluate, validation that leaves no trace (eval() and no_grad, then the
model's mode put back)."""

from __future__ import annotations

import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.facts import given, same_values, tensor_of
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.training_loop.common import CHAPTER, _returned, _returned_problem


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
    ("the same float64 model, now back in train mode", True, torch.float64, 0.2, False),
)
_EVAL_BATCH = 61  # a prime: a mean of equal chunks' means would not be the batch's mean


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
                            "graph": isinstance(output, torch.Tensor) and bool(output.requires_grad),
                            "outer": outer[-1] if outer else None,  # model(x): its own flag
                            "training": [],  # each layer's flag, as the layer ran
                        }
                    )
                    outer.clear()
                if seen:
                    seen[-1]["training"].append(bool(module.training))

            # The outer module's flag, when it is called as model(x) (model.forward(x) skips it).
            model.register_forward_pre_hook(
                lambda module, inputs, outer=outer: outer.append(bool(module.training))
            )
            for index, layer in enumerate(model):
                layer.register_forward_hook(  # bound to this model's record, not a later one's
                    lambda m, i, o, index=index, record=record_forward: record(m, i, o, index=index)
                )
        if "changed its weights" in on:  # as a training step between two validations does
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(0.8)
        model.train(training)
        frozen_before = [n for n, p in model.named_parameters() if not p.requires_grad]
        if new:  # a later call on the same model gets the same batch and loss_fn objects, as
            # validation does epoch after epoch: a cache keyed on them would answer from memory
            loss_fn = nn.CrossEntropyLoss(label_smoothing=smoothing)
            given_x, given_y = x.to(dtype).clone(), y.clone()
        state = {"given": {"x": given(x.to(dtype)), "y": given(y), "label_smoothing": smoothing}}
        if new:
            state["given"]["model"] = _model_state(model)
        else:
            state["model_before"] = {"model": _model_state(model)}
        seen.clear()
        stats_before = _batch_norm_state(model)
        torch.manual_seed(72)  # dropout in train mode draws from here
        grad_before = "no_grad" not in on
        torch.set_grad_enabled(grad_before)
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
        torch.set_grad_enabled(True)
        case = {
            "on": on,
            "training_before": training,
            "returned": _returned(returned),
            **state,
            "forwards": forwards,
            "grad_enabled_before": grad_before,
            "grad_enabled_after": grad_enabled_after,
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
        x, y = tensor_of(case["given"]["x"]).to(dtype), tensor_of(case["given"]["y"])
        smoothing = case["given"]["label_smoothing"]
        case["expected_loss"] = reference(model, x, y, nn.CrossEntropyLoss(label_smoothing=smoothing))
        if smoothing:
            case["plain_loss"] = reference(model, x, y, nn.CrossEntropyLoss())
    return record


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
    ran = "" if case["forwards"] else " without running the model"
    return Mistake("caches-the-loss", (
        f"evaluate returned {returned['value']:.6g} again{ran} (on {case['on']}): the number of "
        f"the previous call, although the weights changed since; the loss now is "
        f"{case['expected_loss']:.6g}. Compute the loss on every call (no cache): validation "
        "runs after each epoch precisely because the model keeps changing."
    ))


def _judge_evaluate(record):
    cases = record["cases"]
    for index, case in enumerate(cases):
        on, forwards = case["on"], case["forwards"]
        stale = _stale_answer(case, cases[index - 1] if index else None)
        if stale:
            return stale
        if not forwards:
            return Mistake("ignores-given-model", (
                f"Your function never ran the model it was given (on {on}). Use its arguments "
                "(model, x, y, loss_fn), not variables of the notebook."
            ))
        if case["inputs_changed"]:
            name = case["inputs_changed"][0]
            return Mistake("changes-input-in-place", (
                f"Your function changed its input {name} in place (on {on}); evaluation must "
                f"leave the batch as it was given."
            ))
        if case.get("dtypes_after", [case.get("dtype")]) != [case.get("dtype")]:
            return Mistake("converts-model-dtype", (
                f"Your function changed the model's dtype (on {on}): it was given as "
                f"{case['dtype']} and its weights are {', '.join(case['dtypes_after'])} after the "
                "call (.float(), .double() and .to(dtype) convert a module in place). Evaluation "
                "must leave the model as it was: run it as it is given, on the x it is given."
            ))
        if any(any(f["training"]) for f in forwards):  # what the layers did, whatever the outer flag
            before, after = case["stats_before"], case["stats_after"]
            moved = after["num_batches_tracked"] - before["num_batches_tracked"]
            stats = (
                f" Batch norm also updated its running statistics (num_batches_tracked went "
                f"from {before['num_batches_tracked']} to {after['num_batches_tracked']}): "
                "evaluating changed the model."
                if moved
                else ""
            )
            if not all(forwards[0]["training"]):
                mistake, layers = "eval-on-some-layers", "some of its layers were in train mode"
            elif forwards[0].get("outer") is False:
                mistake, layers = "sets-training-flag-only", (
                    "model.training was False, but its layers were in train mode: setting the "
                    "flag changes only the outer module"
                )
            else:
                layers = "the model was in train mode"
                # A later pass in eval mode: model.eval() came, but after a first forward pass.
                later_eval = any(not any(f["training"]) for f in forwards[1:])
                mistake = "forward-before-eval" if later_eval else "forgot-eval-mode"
            return Mistake(mistake, (
                f"The forward pass ran in train mode (on {on}: {layers}): call model.eval() "
                "before it. Dropout then zeroes random units, so the loss changes from call to "
                f"call, and batch norm normalises with this batch's statistics.{stats}"
            ))
        if any(f["graph"] for f in forwards):
            return Mistake("forgot-no-grad", (
                f"The forward pass recorded a graph for backward() (on {on}): wrap it in "
                "`with torch.no_grad():`. model.eval() changes what dropout and batch norm do; "
                "it does not stop autograd, so without no_grad every activation is kept."
            ))
        if not case["grad_enabled_before"] and case["grad_enabled_after"]:
            return Mistake("forces-grad-on", (
                f"Your function switched autograd on for its caller (on {on}): it was off when "
                "your function was called and on after it returned. Don't switch it with "
                "torch.set_grad_enabled(...); `with torch.no_grad():` puts back whatever state "
                "it found."
            ))
        if case["grad_enabled_before"] and not case["grad_enabled_after"]:
            return Mistake("leaves-grad-disabled", (
                f"Your function left autograd switched off (on {on}): after it returned, "
                "torch.is_grad_enabled() was False, so the next training step would compute no "
                "gradients. Use `with torch.no_grad():`, which switches it back on at the end "
                "of the block, rather than torch.set_grad_enabled(False)."
            ))
        frozen_before = case.get("frozen_before", [])
        frozen = [n for n in case["frozen_after"] if n not in frozen_before]
        if frozen:
            return Mistake("freezes-parameters", (
                f"After your function ran (on {on}), {frozen[0]} (and "
                f"{len(frozen) - 1} more parameters) had requires_grad=False: "
                "training could no longer update them. Don't freeze the parameters to avoid a "
                "graph; use `with torch.no_grad():`, which changes nothing in the model."
            ))
        unfrozen = [n for n in frozen_before if n not in case["frozen_after"]]
        if unfrozen:
            return Mistake("unfreezes-parameters", (
                f"After your function ran (on {on}), {unfrozen[0]} had requires_grad=True, but "
                "the caller had frozen it (requires_grad=False): training would now update a "
                "layer meant to stay fixed. Leave requires_grad as you found it; `with "
                "torch.no_grad():` avoids the graph without changing anything in the model."
            ))
        returned = case["returned"]
        if (
            len(forwards) > 1 and returned.get("kind") == "float"
            and not same_values(returned["value"], case["expected_loss"], rtol=1e-4, atol=1e-6)
        ):
            return Mistake("mean-of-unequal-chunks", (
                f"evaluate returned {returned['value']:.6g} (on {on}), after running the model "
                f"{len(forwards)} times; the loss of the whole batch is "
                f"{case['expected_loss']:.6g}. If you split the batch, weight each part's "
                "mean loss by its number of examples: parts of unequal size do not average to the "
                "batch's mean."
            ))
        if (
            "plain_loss" in case and returned.get("kind") == "float"
            and not same_values(returned["value"], case["expected_loss"], rtol=1e-4, atol=1e-6)
            and same_values(returned["value"], case["plain_loss"], rtol=1e-4, atol=1e-6)
        ):
            return Mistake("ignores-loss-fn", (
                f"evaluate returned {returned['value']:.6g} (on {on}): plain cross entropy, not "
                f"the loss_fn you were given ({case['expected_loss']:.6g} with its label "
                "smoothing). Compute the loss with loss_fn(model(x), y)."
            ))
        problem = _returned_problem(returned, case["expected_loss"], name="evaluate", on=on)
        if problem:
            return problem
        if not (
            same_values(case["stats_before"]["running_mean"], case["stats_after"]["running_mean"])
            and same_values(case["stats_before"]["running_var"], case["stats_after"]["running_var"])
        ):
            return Mistake("updates-batch-norm-stats", (
                f"Batch norm's running statistics changed (on {on}); evaluation must not change the model."
            ))
        if case["training_before"] and not case["training_after"]:
            # After an earlier call that came in train mode and left it so: a mode remembered
            # from another call, not this one's.
            restored_before = any(c["training_before"] for c in cases[:index])
            return Mistake("restores-a-stale-mode" if restored_before else "leaves-eval-mode", (
                f"Your function left the model in eval mode (on {on}). The next training epoch "
                "would then run without dropout and would stop updating batch norm. Put it back: "
                "remember model.training first and call model.train(was_training) at the end."
            ))
        if case["training_before"] and not all(case["modules_training_after"]):
            return Mistake("restores-outer-flag-only", (
                f"The model says training=True, but some of its layers are still in eval mode "
                f"(on {on}): setting model.training = True changes only the outer module. Call "
                "model.train(), which sets the flag on every layer."
            ))
        if not case["training_before"] and any(case["modules_training_after"]):
            return Mistake("always-train-at-end", (
                f"Your function was given {on} and gave it back in train mode: you call "
                "model.train() at the end whatever the mode was. Remember it first "
                "(was_training = model.training) and restore exactly that: "
                "model.train(was_training)."
            ))
    if record.get("raised"):
        return Raised(record["raised"])
    return None


evaluate = Exercise(
    "evaluate",
    chapter=CHAPTER,
    title="Evaluate without side effects",
    expects=Function("evaluate", ("model", "x", "y", "loss_fn"), returns="the loss as a Python float"),
    probe=_probe_evaluate,
    expect=_expect_evaluate,
    judge=_judge_evaluate,
    reference=evaluate,
    passed_message=(
        "Correct: eval mode for dropout and batch norm, no graph, and the model handed back in "
        "the mode it came in."
    ),
    hints=[
        "Three things: eval mode for the forward pass, no graph recorded, and the model's mode "
        "put back afterwards. model.training tells you which mode it is in now.",
        "model.eval() switches dropout and batch norm to inference behaviour; "
        "`with torch.no_grad():` stops autograd; model.train(mode) sets the mode to mode.",
        "was_training = model.training; model.eval(); with torch.no_grad(): loss = "
        "loss_fn(model(x), y); then model.train(was_training); return loss.item()",
    ],
    error_notes=[
        (
            "training mode is expected to be boolean",
            "model.train(mode) takes True or False: read was_training = model.training before "
            "model.eval(), and give it back with model.train(was_training).",
            "mode-not-boolean",
        ),
        (
            "Expected more than 1 value per channel",
            "batch norm in train mode on a batch of one example; evaluate in eval mode.",
            "batch-norm-in-train-mode",
        ),
        (
            "must have the same dtype",
            "the model and the batch you were given have the same dtype (float64 in one of "
            "this check's cases), so the mismatch comes from a conversion in your code "
            "(.float(), dtype=...) or from a tensor or model of the notebook used instead.",
            "dtype-converted",
        ),
    ],
)
