"""Chapter 06, D2: the flatten size, found by a dry run (the exercise ``flat_features``).

Engine: applies states.MODULE_STATES ("train", "eval", "first-frozen", "no-grad", "grad-large": an
old .grad the dry run must leave as it was) and a second call on the same stack with another
sample_shape, on stacks of several kinds (BatchNorm, Dropout, an asymmetric kernel on a
non-square sample, a stack with a forward of its own that ends in a flatten); hand-written because
the answer is a dry run on a module whose classic mistakes (a batch counted, the mode, the
buffers, grad mode, a cache) are named from what it left on the stack.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Raised, later_error
from course_utils.exercises.debugging.common import CHAPTER, _kind
from course_utils.exercises.running import LearnerRaised, judge_side
from course_utils.exercises.facts import shape_text
from course_utils.exercises.states import MODULE_STATES
from course_utils.exercises.messages import Message, Messages


MESSAGES = Messages("flat_features", {
    "passed": (
        "Correct: one example's features, found without touching the stack's statistics or its mode. "
        "Use it as nn.Linear(flat_features(features, (C, H, W)), n_classes)."),
    "hint-1": (
        "Make one fake example with the right shape, a batch of 1: torch.zeros(1, *sample_shape). Run"
        " the stack on it and look at the output's shape."),
    "hint-2": (
        "The answer is the number of values per example: out[0].numel(). A forward in train mode "
        "updates BatchNorm's running statistics, so switch to eval() for the dry run, and put the "
        "mode back afterwards (or run a copy.deepcopy of the stack)."),
    "hint-3": (
        "was_training = features.training; features.eval(); with torch.no_grad(): out = "
        "features(torch.zeros(1, *sample_shape)); features.train(was_training); return out[0].numel()"),
    "batch-norm-in-train-mode": (
        "BatchNorm in train mode cannot normalise a batch of one value per channel: switch to eval() "
        "for the dry run."),
    "fake-input-of-other-layout": (
        "the fake input needs a batch dimension and the sample's channels first: torch.zeros(1, "
        "*sample_shape)."),
    "fake-input-without-batch": (
        "the fake input needs a batch dimension in front of sample_shape: torch.zeros(1, "
        "*sample_shape) is (1, C, H, W); torch.zeros(*sample_shape) has none."),
    "fake-input-of-other-dtype-or-device": (
        "the fake input must match the stack, float32 on the CPU: what torch.zeros(1, *sample_shape) "
        "gives without dtype= or device=."),
    "changed-parameters": (
        "Your function changed the stack's parameters ({parameters_changed}, on {on}): a dry run only"
        " looks; it never steps an optimizer or moves the stack."),
    "unfroze-parameters": (
        "Your function switched requires_grad on for parameters the caller had frozen ({unfrozen}, on"
        " {on}): they would start learning. A dry run needs no change to requires_grad at all: run it"
        " under `with torch.no_grad():`, which changes nothing on the stack."),
    "froze-parameters": (
        "Your function changed requires_grad of the stack's parameters ({requires_grad_changed}, on "
        "{on}) and did not put it back: they would stop learning. Use `with torch.no_grad():` for the"
        " dry run instead; it changes nothing on the stack."),
    "grad-forced-on": Message(
        "After your function returned, autograd was switched on (torch.is_grad_enabled() is True), "
        "although the caller had it off (on {on}): code that ran your function inside torch.no_grad()"
        " now builds graphs it never asked for. Use `with torch.no_grad():`, which puts back the "
        "state it found, not torch.set_grad_enabled(True) at the end.",
        advises=('torch.no_grad()',)),
    "grad-left-off": Message(
        "After your function returned, autograd was switched off for the whole session "
        "(torch.is_grad_enabled() is False, on {on}): training after it would compute no gradients. "
        "Use `with torch.no_grad():`, which switches it back on when the block ends.",
        advises=('torch.no_grad()',)),
    "backward-in-dry-run": Message(
        "Your dry run left gradients in .grad ({grads_made}, on {on}): the next training step would "
        "add them to its own. A dry run needs no backward(); run it under torch.no_grad().",
        advises=('torch.no_grad()',)),
    "changed-grads": (
        "Your function changed the .grad the stack's parameters held ({grads_changed}, on {on}): "
        "the caller's training loop decides when gradients are zeroed, not a dry run. Leave .grad "
        "alone: a forward pass under torch.no_grad() never touches it."),
    "returned-shape": (
        "Your function returned a shape, {shape} (on {on}); return one int, the number of features "
        "per example: the product of the output's sizes after the batch dimension, here {per_example}"
        " → out[0].numel()."),
    "returned-tensor": (
        "Your function returned a tensor of shape {tensor} (on {on}); return a Python int, here "
        "{expected}: nn.Linear's in_features is an int (out[0].numel() is one; .item() turns a one-"
        "value tensor into one)."),
    "not-an-int": (
        "Your function returned {kind} (on {on}); return one Python int, the number of features one "
        "example becomes (what nn.Linear's in_features needs)."),
    "wrong-feature-count": (
        "Your function returned {value} (on {on}); one example comes out of the stack with shape "
        "{per_example}, so nn.Linear needs in_features={expected}. Run the stack on torch.zeros(1, "
        "*sample_shape) and count the output's features."),
    "one-layer": "layer {names}",
    "layers": "layers {names}",
    "added-layers": "added {named} to the stack",
    "removed-layers": "took {named} out of the stack",
    "changed-layers": (
        "The right number, but your function {what} and left it so (on {on}): the model built on it "
        "now runs other layers than the caller made. Work on a copy (copy.deepcopy(features)), or put"
        " the stack back as it was before returning."),
    "added-state": (
        "The right number, but your function added to the stack ({added}, on {on}): a registered "
        "buffer or parameter becomes part of its state_dict, so a checkpoint of the model no longer "
        "loads into a fresh one with strict=True. Leave the stack as you found it; keep the number in"
        " a local variable and return it."),
    "hook-left-behind": (
        "The right number, but your function left a hook on {hooks_left} (on {on}): it runs on every "
        "later forward pass of the model, in training too, and keeps alive whatever it captures. "
        "Remove it when the dry run is done: handle = module.register_forward_hook(...), then "
        "handle.remove() (in a finally: block), or read the shape of the output directly."),
    "train-mode-dry-run": (
        "The right number, but your dry run changed the stack's buffers ({buffers_changed}, on {on}):"
        " a forward pass in train mode updates BatchNorm's running statistics with your fake input. "
        "Run it in eval mode (and put the mode back), or on a copy.deepcopy of the stack."),
    "left-in-train-mode": (
        "The right number, but your function left the stack in train mode (on {on}); it was in eval "
        "mode before, so an evaluation after it would use dropout and batch statistics. Put back the "
        "mode it had: was_training = features.training before, features.train(was_training) after, or"
        " work on a copy."),
    "cached-by-sample-shape": (
        "Your function returned {value} on {on}, the number of the earlier stack with the same "
        "sample_shape ({earlier}); this stack makes {per_example} of one example, {expected} "
        "features. The answer depends on the stack: run the dry run on the stack you are given, on "
        "every call, and keep nothing from an earlier call."),
    "cached-per-stack": (
        "Your function returned {value} on {on}, what it returned for this same stack before ({earlier}); "
        "with this sample_shape one example makes {per_example}, {expected} features. Run the dry run "
        "on every call, with the sample_shape given, and keep nothing from an earlier call (no "
        "attribute of the stack, no cache)."),
    "counted-batch-dim": (
        "Your function returned {value} (on {on}), {times} times the {expected} features of "
        "one example: you counted the batch dimension too. numel() of the whole output counts every "
        "example; take out[0].numel() or multiply the sizes after dimension 0."),
    "left-in-eval-mode": (
        "The right number, but your function left the stack in eval mode (on {on}); it was in train "
        "mode before, so its Dropout and BatchNorm would now behave wrongly in training. Remember "
        "features.training and put it back with features.train(was_training), or work on a copy."),
})


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
_WEIGHED_FROM = 5  # the place of the first stack whose error is weighed after the earlier ones


class _TwoPaths(nn.Sequential):
    """A stack with a forward of its own (a skip connection: its layers, run one after the
    other, do not make it), with a kernel of another height than width (a non-square sample's
    sizes swapped give another count), ending in a flatten (its output has two dimensions)."""

    def __init__(self):
        super().__init__(nn.Conv2d(2, 3, (3, 5), stride=(1, 2)), nn.Conv2d(2, 3, 1), nn.MaxPool2d((1, 2)))

    def forward(self, x):
        conv, skip, pool = self[0], self[1], self[2]
        out = torch.relu(conv(x)) + skip(x)[..., 1:-1, 2:-2:2]
        return torch.flatten(pool(out), 1)


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
    two_paths = _TwoPaths()
    MODULE_STATES["grad-large"].put(two_paths)  # an old .grad, as a training loop leaves it
    return [
        ("a conv stack for 8 × 8 digits, sample_shape (1, 8, 8)", digits, (1, 8, 8), True),
        ("a stack with BatchNorm2d, sample_shape torch.Size([3, 17, 13])", normed,
         torch.Size([3, 17, 13]), True),
        ("a stack with Dropout, sample_shape (2, 24, 30)", wide, (2, 24, 30), True),
        ("another stack for the same sample_shape (1, 8, 8), called after the first",
         narrow, (1, 8, 8), True),
        ("the BatchNorm2d stack in eval mode, its first conv frozen, called inside "
         "torch.no_grad(), sample_shape (3, 17, 13)", frozen, (3, 17, 13), False),
        ("a stack with a skip connection in its own forward, ending in a flatten, kernel "
         "(3, 5), sample_shape (2, 9, 14), its .grad holding an old gradient", two_paths, (2, 9, 14), True),
        ("the same stack called again, sample_shape (2, 12, 20)", two_paths, (2, 12, 20), True),
    ]


def _module_state(module):
    return {
        "training": [m.training for m in module.modules()],
        "modules": [name for name, _ in module.named_modules()],
        "buffers": {n: b.detach().clone() for n, b in module.named_buffers()},
        "parameters": {n: p.detach().clone() for n, p in module.named_parameters()},
        "requires_grad": {n: p.requires_grad for n, p in module.named_parameters()},
        "grads": {n: p.grad.detach().clone() for n, p in module.named_parameters() if p.grad is not None},
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
    cases, places = [], {}  # places: where each stack object was first given
    for index, (on, features, sample_shape, training) in enumerate(_flat_cases()):
        features.train(training)
        before = _module_state(features)
        # The stack, by its place among _flat_cases() (built from the seed), its layers as the
        # caller made them, and the sample_shape given with it.
        stack = {"stack": index, "seed": _FLAT_SEED, "layers": repr(features),
                 "sample_shape": [int(n) for n in sample_shape]}
        again = places.setdefault(id(features), len(cases))  # the case that first gave this stack
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
        except LearnerRaised as raised:  # weighed by the judge after the earlier stacks
            # An error on one of the first stacks is the verdict, as it always was; one on the
            # stacks added for the engine's states is weighed after them (a wrong count first).
            cases.append({"raised": later_error(raised, answer, earlier=index >= _WEIGHED_FROM)})
            break
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
            # An old .grad the caller's training loop left: the dry run must leave it as it was.
            "grads_changed": sorted(
                n for n in before["grads"]
                if n not in after["grads"] or not _same_tensor(before["grads"][n], after["grads"][n])
            ),
            "was_training": training,
            "same_stack_as": again if again != len(cases) else None,
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
            if "raised" in case:
                continue
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
        if "raised" in case:
            return Raised(case["raised"])
        on, expected = case["on"], case["expected"]
        per_example = shape_text(case["output_shape"])
        if case["parameters_changed"]:
            return MESSAGES("changed-parameters",
                            parameters_changed=', '.join(case['parameters_changed']),
                            on=on)
        if case["unfrozen"]:
            return MESSAGES("unfroze-parameters", unfrozen=', '.join(case['unfrozen'][:3]), on=on)
        if case["requires_grad_changed"]:
            return MESSAGES("froze-parameters",
                            requires_grad_changed=', '.join(case['requires_grad_changed'][:3]),
                            on=on)
        if case["grad_enabled_after"] and not case["grad_enabled_before"]:
            return MESSAGES("grad-forced-on", on=on)
        if case["grad_enabled_before"] and not case["grad_enabled_after"]:
            return MESSAGES("grad-left-off", on=on)
        if case["grads_made"]:
            return MESSAGES("backward-in-dry-run", grads_made=', '.join(case['grads_made'][:3]), on=on)
        if case.get("grads_changed"):
            return MESSAGES("changed-grads", grads_changed=', '.join(case['grads_changed'][:3]), on=on)
        if "shape" in case:
            return MESSAGES("returned-shape", shape=shape_text(case['shape']), on=on, per_example=per_example)
        if "tensor" in case:
            return MESSAGES("returned-tensor", tensor=case['tensor'], on=on, expected=expected)
        if "value" not in case:
            return MESSAGES("not-an-int", kind=case['kind'], on=on)
        value = case["value"]
        if value != expected:
            earlier = [
                (other_on, other) for shape, other, other_on in seen
                if shape == case["sample_shape"] and other == value
            ]
            first = case.get("same_stack_as")
            if first is not None and not earlier and cases[first].get("value") == value:
                return MESSAGES("cached-per-stack", value=value, on=on, earlier=cases[first]["on"],
                                per_example=per_example, expected=expected)
            if earlier:
                return MESSAGES("cached-by-sample-shape",
                                value=value,
                                on=on,
                                earlier=earlier[0][0],
                                per_example=per_example,
                                expected=expected)
            if value > expected and value % expected == 0 and value // expected in case["batch_sizes"]:
                return MESSAGES("counted-batch-dim",
                                value=value,
                                on=on,
                                times=value // expected,
                                expected=expected)
            return MESSAGES("wrong-feature-count",
                            value=value,
                            on=on,
                            per_example=per_example,
                            expected=expected)
        if case["layers_added"] or case["layers_removed"]:
            names = case["layers_added"] or case["layers_removed"]
            named = MESSAGES.text("one-layer" if len(names) == 1 else "layers", names=', '.join(names[:3]))
            what = MESSAGES.text("added-layers" if case["layers_added"] else "removed-layers", named=named)
            return MESSAGES("changed-layers", what=what, on=on)
        if case["added"]:
            return MESSAGES("added-state", added=', '.join(case['added'][:3]), on=on)
        if case["hooks_left"]:
            return MESSAGES("hook-left-behind", hooks_left=', '.join(case['hooks_left'][:3]), on=on)
        if case["buffers_changed"]:
            return MESSAGES("train-mode-dry-run", buffers_changed=', '.join(case['buffers_changed']), on=on)
        if case["mode_changed"]:
            if case["was_training"]:
                return MESSAGES("left-in-eval-mode", on=on)
            return MESSAGES("left-in-train-mode", on=on)
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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "batch-norm-in-train-mode": "Expected more than 1 value per channel",
        "fake-input-of-other-layout": "expected input",
        "fake-input-without-batch": "D input (got",
        "fake-input-of-other-dtype-or-device": "should be the same",
    }),
    messages=MESSAGES,
)
