"""Chapter 06, D2: the flatten size, found by a dry run (the exercise ``flat_features``)."""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.debugging.common import CHAPTER, _kind
from course_utils.exercises.running import judge_side
from course_utils.exercises.facts import shape_text


# ============================================================================================
# D2 — the flatten size, found by a dry run
# ============================================================================================
def flat_features(features, sample_shape):
    was_training = features.training
    features.eval()  # no BatchNorm statistics updated, no dropout
    with torch.no_grad():
        out = features(torch.zeros(1, *sample_shape))
    features.train(was_training)
    return out[0].numel()


_FLAT_SEED = 0  # the seed the stacks are built with


def _flat_cases():
    torch.manual_seed(_FLAT_SEED)
    digits = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3), nn.ReLU(),
    )
    normed = nn.Sequential(
        nn.Conv2d(3, 6, 3, stride=2), nn.BatchNorm2d(6), nn.ReLU(), nn.Conv2d(6, 4, (3, 1)),
        nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d((2, 3)),
    )
    with torch.no_grad():  # running statistics that are not the defaults, as after training
        normed[1].running_mean.uniform_(-1, 1)
        normed[1].running_var.uniform_(0.5, 2)
        normed[1].num_batches_tracked.fill_(40)
    wide = nn.Sequential(nn.Conv2d(2, 5, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.5))
    # The same sample_shape as `digits`, another stack: an answer kept from an earlier call shows.
    narrow = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU())
    frozen = copy.deepcopy(normed)  # a stack the caller put in eval mode: it must stay there
    frozen[0].requires_grad_(False)  # ... with a frozen first layer, which must stay frozen
    return [
        ("a conv stack for 8 × 8 digits, sample_shape (1, 8, 8)", digits, (1, 8, 8), True),
        ("a stack with BatchNorm2d, sample_shape torch.Size([3, 17, 13])", normed,
         torch.Size([3, 17, 13]), True),
        ("a stack with Dropout, sample_shape (2, 24, 30)", wide, (2, 24, 30), True),
        ("another stack for the same sample_shape (1, 8, 8), called after the first",
         narrow, (1, 8, 8), True),
        ("the BatchNorm2d stack in eval mode, its first conv frozen, called inside "
         "torch.no_grad(), sample_shape (3, 17, 13)", frozen, (3, 17, 13), False),
    ]


def _module_state(module):
    return {
        "training": [m.training for m in module.modules()],
        "modules": [name for name, _ in module.named_modules()],
        "buffers": {n: b.detach().clone() for n, b in module.named_buffers()},
        "parameters": {n: p.detach().clone() for n, p in module.named_parameters()},
        "requires_grad": {n: p.requires_grad for n, p in module.named_parameters()},
        "grads": sorted(n for n, p in module.named_parameters() if p.grad is not None),
        # Hooks left behind run on every later forward (and keep what they capture alive).
        "hooks": {
            (f"its layer {name}" if name else "the stack itself"): sum(len(getattr(m, attr, None) or {}) for attr in _HOOK_DICTS)
            for name, m in module.named_modules()
        },
    }


_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _same_tensor(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and (
        a.device.type == "meta" or torch.equal(a, b)
    )


def _probe_flat_features(answer, run):
    """What the answer returned for each stack and what it did to the stack and the session,
    and which stack and sample_shape it was given ("given"): never what a dry run gives
    (``_expect_flat_features`` rebuilds the stack and runs the reference, on the judge's side)."""
    cases = []
    for index, (on, features, sample_shape, training) in enumerate(_flat_cases()):
        features.train(training)
        before = _module_state(features)
        # The stack, by its place among _flat_cases() (built from the seed), its layers as the
        # caller made them, and the sample_shape given with it.
        stack = {"stack": index, "seed": _FLAT_SEED, "layers": repr(features),
                 "sample_shape": [int(n) for n in sample_shape]}
        # The eval-mode stack is measured by a caller that has autograd off (inside no_grad).
        grad_before = training
        batch_sizes = []  # the batch sizes of the dry runs (copies of the stack share the hook)

        def record_batch(module, args, sizes=batch_sizes):
            if args and isinstance(args[0], torch.Tensor) and args[0].dim() > 0:
                sizes.append(int(args[0].shape[0]))

        handle = features.register_forward_pre_hook(record_batch)
        torch.set_grad_enabled(grad_before)
        try:
            got = run(answer, features, sample_shape, on=on)
        finally:
            grad_enabled = torch.is_grad_enabled()
            torch.set_grad_enabled(True)
            handle.remove()
        after = _module_state(features)
        case = {
            "on": on,
            "given": stack,
            "sample_shape": [int(n) for n in sample_shape],
            "kind": _kind(got),
            "buffers_changed": sorted(
                n for n in before["buffers"]
                if n not in after["buffers"] or not _same_tensor(before["buffers"][n], after["buffers"][n])
            ),
            "parameters_changed": sorted(
                n for n in before["parameters"]
                if n not in after["parameters"] or not _same_tensor(before["parameters"][n], after["parameters"][n])
            ),
            "layers_added": [n for n in after["modules"] if n not in before["modules"]],
            "layers_removed": [n for n in before["modules"] if n not in after["modules"]],
            # Buffers or parameters the stack did not have before the call.
            "added": sorted((set(after["buffers"]) | set(after["parameters"]))
                            - (set(before["buffers"]) | set(before["parameters"]))),
            "hooks_left": sorted(
                name for name, count in after["hooks"].items() if count > before["hooks"].get(name, 0)
            ),
            "requires_grad_changed": sorted(
                n for n, flag in before["requires_grad"].items() if after["requires_grad"].get(n) != flag
            ),
            "unfrozen": sorted(
                n for n, flag in before["requires_grad"].items() if not flag and after["requires_grad"].get(n)
            ),
            "batch_sizes": sorted(set(batch_sizes)),
            "grads_made": sorted(set(after["grads"]) - set(before["grads"])),
            "was_training": training,
            "mode_changed": before["training"] != after["training"],
            "grad_enabled_before": grad_before,
            "grad_enabled_after": grad_enabled,
        }
        if isinstance(got, bool):
            pass
        elif isinstance(got, (int, np.integer)):
            case["value"] = int(got)
        elif isinstance(got, torch.Tensor):
            case["tensor"] = shape_text(list(got.shape))
        elif isinstance(got, (tuple, list, torch.Size)) and all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in got
        ):
            case["shape"] = [int(n) for n in got]
        cases.append(case)
    return cases


def _expect_flat_features(cases):
    """What the reference returns for each stack, rebuilt from its recorded place and seed, and
    the shape one example comes out with (a dry run in eval mode), for the judge."""
    with judge_side():
        stacks = _flat_cases()
        for case in cases:
            _, features, _, training = stacks[case["given"]["stack"]]
            features.train(training)
            sample_shape = tuple(case["given"]["sample_shape"])
            case["expected"] = int(flat_features.reference(copy.deepcopy(features), sample_shape))
            with torch.no_grad():
                out = copy.deepcopy(features).eval()(torch.zeros(1, *sample_shape))
            case["output_shape"] = [int(n) for n in out.shape[1:]]
    return cases


def _judge_flat_features(cases):
    seen = []  # (sample_shape, expected, on) of the earlier calls
    for case in cases:
        on, expected = case["on"], case["expected"]
        per_example = shape_text(case["output_shape"])
        if case["parameters_changed"]:
            return Mistake("changed-parameters", (
                f"Your function changed the stack's parameters ({', '.join(case['parameters_changed'])}, "
                f"on {on}): a dry run only looks; it never steps an optimizer or moves the stack."
            ))
        if case["unfrozen"]:
            return Mistake("unfroze-parameters", (
                f"Your function switched requires_grad on for parameters the caller had frozen "
                f"({', '.join(case['unfrozen'][:3])}, on {on}): they would start learning. A "
                "dry run needs no change to requires_grad at all: run it under "
                "`with torch.no_grad():`, which changes nothing on the stack."
            ))
        if case["requires_grad_changed"]:
            return Mistake("froze-parameters", (
                f"Your function changed requires_grad of the stack's parameters "
                f"({', '.join(case['requires_grad_changed'][:3])}, on {on}) and did not put it "
                "back: they would stop learning. Use `with torch.no_grad():` for the dry run "
                "instead; it changes nothing on the stack."
            ))
        if case["grad_enabled_after"] and not case["grad_enabled_before"]:
            return Mistake("grad-forced-on", (
                f"After your function returned, autograd was switched on (torch.is_grad_enabled() "
                f"is True), although the caller had it off (on {on}): code that ran your "
                "function inside torch.no_grad() now builds graphs it never asked for. Use "
                "`with torch.no_grad():`, which puts back the state it found, not "
                "torch.set_grad_enabled(True) at the end."
            ))
        if case["grad_enabled_before"] and not case["grad_enabled_after"]:
            return Mistake("grad-left-off", (
                f"After your function returned, autograd was switched off for the whole session "
                f"(torch.is_grad_enabled() is False, on {on}): training after it would compute "
                "no gradients. Use `with torch.no_grad():`, which switches it back on when the "
                "block ends."
            ))
        if case["grads_made"]:
            return Mistake("backward-in-dry-run", (
                f"Your dry run left gradients in .grad ({', '.join(case['grads_made'][:3])}, on "
                f"{on}): the next training step would add them to its own. A dry run needs no "
                "backward(); run it under torch.no_grad()."
            ))
        if "shape" in case:
            return Mistake("returned-shape", (
                f"Your function returned a shape, {shape_text(case['shape'])} (on {on}); return one "
                f"int, the number of features per example: the product of the output's sizes "
                f"after the batch dimension, here {per_example} → out[0].numel()."
            ))
        if "tensor" in case:
            return Mistake("returned-tensor", (
                f"Your function returned a tensor of shape {case['tensor']} (on {on}); return a "
                f"Python int, here {expected}: nn.Linear's in_features is an int "
                "(out[0].numel() is one; .item() turns a one-value tensor into one)."
            ))
        if "value" not in case:
            return Mistake("not-an-int", (
                f"Your function returned {case['kind']} (on {on}); return one Python int, "
                "the number of features one example becomes (what nn.Linear's in_features needs)."
            ))
        value = case["value"]
        if value != expected:
            earlier = [
                (other_on, other) for shape, other, other_on in seen
                if shape == case["sample_shape"] and other == value
            ]
            if earlier:
                return Mistake("cached-by-sample-shape", (
                    f"Your function returned {value} on {on}, the number of the earlier stack "
                    f"with the same sample_shape ({earlier[0][0]}); this stack makes {per_example} "
                    f"of one example, {expected} features. The answer depends on the stack: run "
                    "the dry run on the stack you are given, on every call, and keep nothing "
                    "from an earlier call."
                ))
            if value > expected and value % expected == 0 and value // expected in case["batch_sizes"]:
                return Mistake("counted-batch-dim", (
                    f"Your function returned {value} (on {on}), {value // expected} times the "
                    f"{expected} features of one example: you counted the batch dimension too. "
                    "numel() of the whole output counts every example; take out[0].numel() or "
                    "multiply the sizes after dimension 0."
                ))
            return Mistake("wrong-feature-count", (
                f"Your function returned {value} (on {on}); one example comes out of the stack "
                f"with shape {per_example}, so nn.Linear needs in_features={expected}. Run the "
                "stack on torch.zeros(1, *sample_shape) and count the output's features."
            ))
        if case["layers_added"] or case["layers_removed"]:
            names = case["layers_added"] or case["layers_removed"]
            named = f"{'layer' if len(names) == 1 else 'layers'} {', '.join(names[:3])}"
            what = (f"added {named} to the stack" if case["layers_added"]
                    else f"took {named} out of the stack")
            return Mistake("changed-layers", (
                f"The right number, but your function {what} and left it so (on {on}): the "
                "model built on it now runs other layers than the caller made. Work on a copy "
                "(copy.deepcopy(features)), or put the stack back as it was before returning."
            ))
        if case["added"]:
            return Mistake("added-state", (
                f"The right number, but your function added to the stack "
                f"({', '.join(case['added'][:3])}, on {on}): a registered buffer or parameter "
                "becomes part of its state_dict, so a checkpoint of the model no longer loads "
                "into a fresh one with strict=True. Leave the stack as you found it; keep the "
                "number in a local variable and return it."
            ))
        if case["hooks_left"]:
            return Mistake("hook-left-behind", (
                f"The right number, but your function left a hook on "
                f"{', '.join(case['hooks_left'][:3])} (on {on}): it runs on every later forward "
                "pass of the model, in training too, and keeps alive whatever it captures. "
                "Remove it when the dry run is done: handle = module.register_forward_hook(...), "
                "then handle.remove() (in a finally: block), or read the shape of the output "
                "directly."
            ))
        if case["buffers_changed"]:
            return Mistake("train-mode-dry-run", (
                f"The right number, but your dry run changed the stack's buffers "
                f"({', '.join(case['buffers_changed'])}, on {on}): a forward pass in train mode "
                "updates BatchNorm's running statistics with your fake input. Run it in eval "
                "mode (and put the mode back), or on a copy.deepcopy of the stack."
            ))
        if case["mode_changed"]:
            if case["was_training"]:
                return Mistake("left-in-eval-mode", (
                    f"The right number, but your function left the stack in eval mode (on {on}); it "
                    "was in train mode before, so its Dropout and BatchNorm would now behave wrongly "
                    "in training. Remember features.training and put it back with "
                    "features.train(was_training), or work on a copy."
                ))
            return Mistake("left-in-train-mode", (
                f"The right number, but your function left the stack in train mode (on {on}); "
                "it was in eval mode before, so an evaluation after it would use dropout and "
                "batch statistics. Put back the mode it had: was_training = features.training "
                "before, features.train(was_training) after, or work on a copy."
            ))
        seen.append((case["sample_shape"], expected, on))
    return None


flat_features = Exercise(
    "flat_features",
    chapter=CHAPTER,
    title="The flatten size, by a dry run",
    expects=Function("flat_features", ("features", "sample_shape"), returns="an int, the number of features of one example"),
    probe=_probe_flat_features,
    expect=_expect_flat_features,
    judge=_judge_flat_features,
    reference=flat_features,
    passed_message=(
        "Correct: one example's features, found without touching the stack's statistics or "
        "its mode. Use it as nn.Linear(flat_features(features, (C, H, W)), n_classes)."
    ),
    hints=[
        "Make one fake example with the right shape, a batch of 1: torch.zeros(1, *sample_shape). "
        "Run the stack on it and look at the output's shape.",
        "The answer is the number of values per example: out[0].numel(). A forward in train mode "
        "updates BatchNorm's running statistics, so switch to eval() for the dry run, and put "
        "the mode back afterwards (or run a copy.deepcopy of the stack).",
        "was_training = features.training; features.eval(); with torch.no_grad(): out = "
        "features(torch.zeros(1, *sample_shape)); features.train(was_training); return out[0].numel()",
    ],
    error_notes=[
        (
            "Expected more than 1 value per channel",
            "BatchNorm in train mode cannot normalise a batch of one value per channel: switch to "
            "eval() for the dry run.",
            "batch-norm-in-train-mode",
        ),
        (
            "expected input",
            "the fake input needs a batch dimension and the sample's channels first: "
            "torch.zeros(1, *sample_shape).",
            "fake-input-of-other-layout",
        ),
        (
            "D input (got",
            "the fake input needs a batch dimension in front of sample_shape: "
            "torch.zeros(1, *sample_shape) is (1, C, H, W); torch.zeros(*sample_shape) has none.",
            "fake-input-without-batch",
        ),
        (
            "should be the same",
            "the fake input must match the stack, float32 on the CPU: what "
            "torch.zeros(1, *sample_shape) gives without dtype= or device=.",
            "fake-input-of-other-dtype-or-device",
        ),
    ],
)
