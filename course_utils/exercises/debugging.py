"""Chapter 06 — Debugging: find a flatten size, fix a forward that ignores the device, drop bad
examples, clip gradients, and shuffle reproducibly.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it. Every probe builds its own small, seeded models and data on the CPU (or on the
``meta`` device, which has shapes and devices but no values, so a device mistake raises for real
on any machine), runs the learner's code on them, and records only plain data.
"""

from __future__ import annotations

import copy
import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import not_a_module, same_values, shape_text, value_facts
from course_utils.exercises.running import LearnerRaised, set_up_torch_once

CHAPTER = "debugging"

# The checks use meta and optimizers: torch's one-time set-up for them is paid here, in the notebook's
# import cell, not by the first check.
set_up_torch_once()


def _kind(value) -> str:
    if value is None:
        return "None (a function without `return` gives None)"
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


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


def _flat_cases():
    torch.manual_seed(0)
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
    cases = []
    for on, features, sample_shape, training in _flat_cases():
        features.train(training)
        before = _module_state(features)
        reference = copy.deepcopy(features).eval()
        with torch.no_grad():
            out = reference(torch.zeros(1, *sample_shape))
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
            "expected": int(out[0].numel()),
            "output_shape": [int(n) for n in out.shape[1:]],
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


# ============================================================================================
# D3 — a tensor created inside forward must follow the input
# ============================================================================================
class PositionWeights(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length

    def forward(self, x):  # x: (batch, length, features)
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
        return x * (steps / length)[:, None]


def _position_weights(length: int) -> torch.Tensor:
    return torch.arange(1, length + 1, dtype=torch.float64) / length


def _plain_tensor_attributes(module: nn.Module) -> list[str]:
    """Tensors kept as plain attributes: ``.to()`` moves parameters and buffers, not these."""
    found = []
    for name, sub in module.named_modules():
        for attribute, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                found.append(f"self.{name + '.' if name else ''}{attribute}")
    return found


def _raised_text(raised: LearnerRaised) -> str:
    lines = str(raised.error).strip().splitlines()
    return f"{type(raised.error).__name__}: {lines[0] if lines else ''}"


def _probe_position_weights(answer, run):
    cases = []
    max_length = 16
    made = f"PositionWeights({max_length})"
    # 1. The CPU, float32, a non-contiguous input (a transposed batch): the values, and x unchanged.
    on = "a float32 batch of shape (2, 5, 3) on the CPU (a transposed, non-contiguous tensor)"
    module = run(answer, max_length, on=made)
    if not isinstance(module, nn.Module):
        return [{"on": on, "not_a_module": _kind(module)}]
    x = torch.randn(2, 3, 5, generator=_generator(0)).transpose(1, 2)
    x_in = x.clone()  # clone keeps x's strides: non-contiguous too
    got = run(module, x_in, on=on)
    expected = (x.double() * _position_weights(5)[:, None]).float()
    cases.append({
        "on": on, "got": value_facts(got), "expected": value_facts(expected),
        "changed_input": not torch.equal(x_in, x),
        # Parameters an optimizer given model.parameters() would train: weights that drift.
        "trainable": [name for name, p in module.named_parameters() if p.requires_grad],
    })
    # 2. The same module again, on another length, with an input that requires grad.
    on = ("a second call of the same module, on a float32 batch of shape (3, 4, 2) that "
          "requires grad")
    x = torch.randn(3, 4, 2, generator=_generator(2))
    x_in = x.clone().requires_grad_(True)
    case = {"on": on, "expected": value_facts(x.double() * _position_weights(4)[:, None]),
            "expected_grad": (torch.ones_like(x, dtype=torch.float64) * _position_weights(4)[:, None]).numpy()}
    try:
        got = run(module, x_in, on=on)
        case["got"] = value_facts(got)
        if isinstance(got, torch.Tensor) and got.requires_grad and got.is_floating_point():
            run(lambda: torch.Tensor.sum(got).backward(), on=f"out.sum().backward() after {on}")
            case["grad"] = None if x_in.grad is None else x_in.grad.detach().numpy().copy()
    except LearnerRaised as raised:
        if isinstance(raised.error, NotImplementedError) and not str(raised.error):
            raise
        case["raised"] = _raised_text(raised)
    cases.append(case)
    # 3. That module (called twice already) and its input moved to the meta device, as to a GPU,
    # with the first call's length: weights kept from the CPU calls (a cache) show here.
    on = ("PositionWeights(16), called twice on the CPU, then .to('meta'), on a batch of shape "
          "(2, 5, 4) on the meta device")
    module = run(lambda: module.to("meta"), on=f"{made}.to('meta')")
    case = {"on": on, "plain_tensors": _plain_tensor_attributes(module)}
    try:
        got = run(module, torch.empty(2, 5, 4, device="meta"), on=on)
        case["got"] = value_facts(got)
    except LearnerRaised as raised:
        if isinstance(raised.error, NotImplementedError) and not str(raised.error):
            raise
        case["raised"] = _raised_text(raised)
        # Does a new module, never called on the CPU, work on meta? Then the moved one kept
        # something from its earlier calls.
        try:
            fresh = run(answer, max_length, on=made)
            fresh = run(lambda: fresh.to("meta"), on=f"{made}.to('meta')")
            fresh_got = run(fresh, torch.empty(2, 5, 4, device="meta"), on=f"a new {made}.to('meta')")
            case["fresh_works"] = isinstance(fresh_got, torch.Tensor) and fresh_got.device.type == "meta"
        except LearnerRaised:
            case["fresh_works"] = False
    cases.append(case)
    # 4. A new module, called once in float32, then it and its input in bfloat16, as in mixed
    # precision: weights kept from the float32 call (a cache) show here.
    on = ("PositionWeights(16), called once on a float32 batch, then .to(torch.bfloat16), on a "
          "bfloat16 batch of shape (3, 6, 2)")
    module = run(answer, max_length, on=made)
    x = torch.randn(3, 6, 2, generator=_generator(1))
    run(module, x.clone(), on="PositionWeights(16) on a float32 batch of shape (3, 6, 2) on the CPU")
    module = run(lambda: module.to(torch.bfloat16), on=f"{made}.to(torch.bfloat16)")
    x = x.to(torch.bfloat16)
    got = run(module, x.clone(), on=on)
    expected = x.double() * _position_weights(6)[:, None]
    case = {"on": on, "got": value_facts(got), "expected_values": expected.numpy(),
            "expected_dtype": "torch.bfloat16"}
    if isinstance(got, torch.Tensor) and got.dtype != torch.bfloat16:
        # Does a new module, never called in float32, give bfloat16? Then this one kept weights.
        try:
            fresh = run(answer, max_length, on=made)
            fresh = run(lambda: fresh.to(torch.bfloat16), on=f"{made}.to(torch.bfloat16)")
            fresh_got = run(fresh, x.clone(), on=f"a new {made}.to(torch.bfloat16)")
            case["fresh_works"] = isinstance(fresh_got, torch.Tensor) and fresh_got.dtype == torch.bfloat16
        except LearnerRaised:
            case["fresh_works"] = False
    cases.append(case)
    # 5. A new module in float64, on a batch of one.
    on = "PositionWeights(16).to(torch.float64) on a float64 batch of one, shape (1, 9, 1)"
    module = run(answer, max_length, on=made)
    module = run(lambda: module.to(torch.float64), on=f"{made}.to(torch.float64)")
    x = torch.randn(1, 9, 1, generator=_generator(3), dtype=torch.float64)
    got = run(module, x.clone(), on=on)
    expected = x * _position_weights(9)[:, None]
    cases.append({"on": on, "got": value_facts(got), "expected_values": expected.numpy(),
                  "expected_dtype": "torch.float64"})
    return cases


_DEVICE_FIX = (
    "A tensor made inside forward without device= is created on the default device (the CPU "
    "unless the program set another), with a dtype of its own, wherever the input is; "
    "on a GPU this is the classic \"Expected all tensors to be on the same device\". Create it "
    "where the input lives: torch.arange(..., device=x.device, dtype=x.dtype)."
)


_VIEW_NOTE = (
    "the check's input is non-contiguous (a transposed tensor, as x.transpose(1, 2) or "
    "permute() give): .view() needs a contiguous memory layout; use .reshape(), which copies "
    "only when it must."
)


def _not_a_tensor(got, on) -> str:
    return Mistake("not-a-tensor", (
        f"forward returned {got['kind']} (on {on}); return the weighted tensor, shaped like x."
    ))


def _judge_position_weights(cases):
    first = cases[0]
    if "not_a_module" in first:
        return Mistake("not-a-module", not_a_module("PositionWeights(16)", first["not_a_module"], "PositionWeights"))
    on, got, expected = first["on"], first["got"], first["expected"]
    if first["changed_input"]:
        return Mistake("in-place-on-input", (
            f"forward changed its input x in place (on {on}): the caller's tensor now holds "
            "the weighted values. Return a new tensor, x * weights, instead of x.mul_(...) or "
            "x *= ...."
        ))
    if got["kind"] != "tensor":
        return _not_a_tensor(got, on)
    if got["device"] != "cpu":
        return Mistake("hard-coded-device", (
            f"forward's output is on {got['device']} for an input on the CPU (on {on}): keep "
            "the output where the input is; make your tensors on x.device."
        ))
    if got["shape"] != expected["shape"]:
        return Mistake("wrong-output-shape", (
            f"forward's output has shape {shape_text(got['shape'])} (on {on}); expected "
            f"{shape_text(expected['shape'])}, the input's shape: step t of each sequence is "
            "multiplied by (t + 1) / length."
        ))
    if not same_values(got["values"], expected["values"], rtol=1e-5, atol=1e-6):
        return Mistake("wrong-weights", (
            f"forward's output has the right shape but wrong values (on {on}): step t (counting "
            "from 0) of each sequence is multiplied by (t + 1) / length, with length = "
            "x.shape[1], the same weight for every feature."
        ))
    again = cases[1]
    on = again["on"]
    if "raised" in again:
        return Mistake("cached-weights", (
            f"{again['raised']} (on {on}). The first call worked: each call must make the "
            "weights for its own input's length x.shape[1] (and device and dtype), not reuse "
            "what an earlier call made."
        ))
    got = again["got"]
    if got["kind"] != "tensor":
        return _not_a_tensor(got, on)
    if got["shape"] != again["expected"]["shape"] or "values" not in got or not same_values(
        got["values"], again["expected"]["values"], rtol=1e-5, atol=1e-6
    ):
        return Mistake("cached-weights", (
            f"On a second call with another length the output is wrong (on {on}): shape "
            f"{shape_text(got['shape'])}, expected {shape_text(again['expected']['shape'])} with "
            "weights (t + 1) / 4. The first call was right: make the weights from each call's "
            "own x.shape[1], not from what an earlier call kept."
        ))
    if not got["requires_grad"]:
        return Mistake("cut-from-autograd", (
            f"forward's output does not require grad although x does (on {on}): it is cut off "
            "from autograd, so no gradient reaches the layers before it. Compute it with torch "
            "operations on x itself (no .detach(), torch.no_grad() or NumPy inside forward)."
        ))
    if again.get("grad") is None or not same_values(again["grad"], again["expected_grad"], rtol=1e-5, atol=1e-6):
        return Mistake("grad-not-through-x", (
            f"After out.sum().backward(), x.grad is not the weights (t + 1) / length (on {on}): "
            "the output must be x times the weights, computed from x by autograd."
        ))
    meta = cases[2]
    on = meta["on"]
    if "raised" in meta:
        if meta["plain_tensors"]:
            return Mistake("plain-tensor-attribute", (
                f"{meta['raised']} (on {on}). {meta['plain_tensors'][0]} is a plain tensor "
                "attribute: module.to() moves parameters and buffers, and nothing else. Register "
                "it with self.register_buffer(name, tensor), or create the tensor in forward "
                "with device=x.device."
            ))
        if meta.get("fresh_works"):
            return Mistake("cached-weights", (
                f"{meta['raised']} (on {on}). A new module moved to meta works on the same input: "
                "this one kept tensors from its earlier calls on the CPU (a cache of weights), "
                "and .to() moves parameters and buffers only. Make the weights in every call from "
                "x (device=x.device, dtype=x.dtype), or keep them in a registered buffer."
            ))
        return Mistake("no-device-in-forward", f"{meta['raised']} (on {on}). {_DEVICE_FIX}")
    got = meta["got"]
    if got["kind"] != "tensor":
        return _not_a_tensor(got, on)
    if got["device"] != "meta":
        return Mistake("moved-input-to-weights", (
            f"forward's output is on {got['device']} although the module and its input are on "
            f"meta (on {on}): never move the input to fit a tensor you made; make the tensor "
            "on x.device."
        ))
    if got["shape"] != [2, 5, 4] or got["dtype"] != "torch.float32":
        return Mistake("wrong-meta-output", (
            f"forward's output has shape {shape_text(got['shape'])} and dtype "
            f"{got['dtype'].removeprefix('torch.')} (on {on}); expected (2, 5, 4) and float32, "
            "the input's."
        ))
    for case in cases[3:]:
        on, got = case["on"], case["got"]
        if got["kind"] != "tensor":
            return _not_a_tensor(got, on)
        want = case["expected_dtype"].removeprefix("torch.")
        if got["dtype"] != case["expected_dtype"] and case.get("fresh_works"):
            return Mistake("cached-weights", (
                f"forward's output is {got['dtype'].removeprefix('torch.')} for a {want} input (on "
                f"{on}), although a new module moved to {want} gives {want}: this one kept "
                "tensors from its earlier call in float32 (a cache of weights), and .to() converts "
                "parameters and buffers only. Make the weights in every call from x "
                "(device=x.device, dtype=x.dtype), or keep them in a registered buffer."
            ))
        if got["dtype"] != case["expected_dtype"]:
            return Mistake("no-dtype-in-forward", (
                f"forward's output is {got['dtype'].removeprefix('torch.')} for a {want} input "
                f"(on {on}): the weights you create have a dtype of their own, and type "
                f"promotion gives the product theirs or the input's, whichever is wider; in "
                "mixed precision every layer after this one would run in float32 and the "
                "memory doubles, without an error. Create them with dtype=x.dtype (or "
                ".to(x.dtype))."
            ))
        tolerance = 2e-2 if want == "bfloat16" else 1e-6
        if got["shape"] != list(case["expected_values"].shape) or "values" not in got or not same_values(
            got["values"], case["expected_values"], rtol=tolerance, atol=tolerance
        ):
            return Mistake("wrong-values-for-dtype", f"forward's output has wrong values for a {want} input (on {on}).")
    if first.get("trainable"):
        return Mistake("trainable-weights", (
            f"Right outputs, but your module keeps its weights as trainable parameters "
            f"({', '.join(first['trainable'][:3])}, requires_grad=True): an optimizer built with "
            "model.parameters() would change them in training, and the module would stop "
            "weighting step t by (t + 1) / length. Keep fixed weights out of training: "
            "register_buffer, an nn.Parameter with requires_grad=False, or make them in forward."
        ))
    return None


PositionWeights = Exercise(
    "PositionWeights",
    chapter=CHAPTER,
    title="A forward that follows its input's device and dtype",
    expects=Function("PositionWeights", ("max_length",), returns="an nn.Module whose forward returns a tensor shaped like x"),
    probe=_probe_position_weights,
    judge=_judge_position_weights,
    reference=PositionWeights,
    passed_message=(
        "Correct: the weights are made where the input lives, in its dtype, so the module works "
        "on the CPU, on a GPU, on meta and in half precision alike."
    ),
    hints=[
        "torch.arange(...) without device= makes a CPU tensor, even when x is on a GPU (or on "
        "meta). Every factory function (arange, zeros, ones, tensor, linspace) takes device= "
        "and dtype=.",
        "Take both from the input: device=x.device, dtype=x.dtype. (A fixed tensor made in "
        "__init__ works too, if you register it with self.register_buffer so .to() moves it.)",
        "steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype); "
        "return x * (steps / length)[:, None]",
    ],
    error_notes=[
        ("is not on the expected device", _DEVICE_FIX, "tensor-made-off-device"),
        ("Expected all tensors to be on the same device", _DEVICE_FIX, "operands-on-two-devices"),
        ("view size is not compatible", _VIEW_NOTE, "view-of-non-contiguous"),
        ("Cannot copy out of meta tensor", "the check moves your module to the meta device, "
         "which has no values: do not move tensors to the CPU (.cpu(), .item(), .tolist()) "
         "inside forward; keep everything on x.device.",
         "moved-to-cpu-in-forward"),
    ],
    # The first factory call on the meta device in a process loads torch's reference
    # implementations, which takes seconds; the chapter's demonstrations usually did it already.
    time_limit_s=30.0,
)


# ============================================================================================
# D5 — drop the examples that hold a nan or an inf
# ============================================================================================
def drop_non_finite(x, y):
    keep = torch.isfinite(x).flatten(start_dim=1).all(dim=1)
    return x[keep], y[keep]


def _non_finite_cases():
    g = _generator(5)
    table = torch.randn(7, 4, generator=g)
    table[1, 2] = float("nan")
    table[3, 0] = float("inf")
    table[5, 3] = float("-inf")
    # Images stored channels-last and viewed as (N, C, H, W): a non-contiguous tensor.
    images = torch.rand(6, 3, 3, generator=g).transpose(1, 2).unsqueeze(1)
    images[0, 0, 2, 1] = float("nan")
    images[4, 0, 0, 0] = float("inf")
    clean = torch.randn(4, 2, generator=g, dtype=torch.float64)
    # float16 features: row 0's values are finite, but their sum overflows to inf.
    half = torch.tensor([[40000.0, 40000.0], [float("nan"), 1.0], [1.0, 2.0], [-60000.0, -9000.0]],
                        dtype=torch.float16)
    # float64 features: row 1's values are finite, but their sum overflows float64 as well.
    huge = torch.tensor([[1.0, -2.0], [1.5e308, 1.5e308], [float("-inf"), 3.0]], dtype=torch.float64)
    # Exactly one example kept: an index that is a single number would drop the batch dimension.
    single = torch.rand(3, 2, 2, generator=g)
    single[0, 1, 1] = float("-inf")
    single[2, 0, 0] = float("nan")
    all_bad = torch.tensor([[1.0, float("nan"), 2.0], [float("inf"), 0.0, 1.0]])
    counts = torch.tensor([[3, 0, 7], [1, 2, 2], [5, 5, 0]])
    return [
        ("a table of 7 examples × 4 features, with a nan, an inf and a -inf", table,
         torch.arange(7) * 10),
        ("6 images of shape (1, 3, 3), a non-contiguous tensor, with a nan in one and an inf "
         "in another", images, torch.arange(6) * 10),
        ("4 float64 examples, all finite", clean, torch.arange(4) * 10),
        ("4 float16 examples, one with a nan; the others are finite (40000 + 40000 overflows "
         "float16, but no value does)", half, torch.tensor([1.5, 2.5, 3.5, 4.5])),
        ("3 float64 examples, one with a -inf; the others are finite (1.5e308 + 1.5e308 "
         "overflows float64, but no value does)", huge, torch.tensor([7, 8, 9])),
        ("3 images of shape (2, 2), one with a -inf and one with a nan: exactly one is kept",
         single, torch.tensor([0, 1, 2])),
        ("2 examples that both hold a nan or an inf: nothing is kept", all_bad, torch.tensor([4, 2])),
        ("3 examples of int64 counts (integers are always finite)", counts, torch.tensor([0, 1, 0])),
    ]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, nan included (torch.equal says nan != nan)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    return torch.equal(nan_a, nan_b) and torch.equal(a.masked_fill(nan_a, 0), b.masked_fill(nan_b, 0))


def _probe_drop_non_finite(answer, run):
    cases = []
    for on, x, y in _non_finite_cases():
        x_in, y_in = x.clone(), y.clone()
        got = run(answer, x_in, y_in, on=on)
        rows = x.reshape(len(x), -1)
        keep = torch.isfinite(rows).all(1)
        by_sum = torch.isfinite(rows.sum(1)) if x.is_floating_point() else keep
        case = {
            "on": on,
            "n": len(x),
            "dtype": str(x.dtype).removeprefix("torch."),
            "kind": _kind(got),
            "changed_input": not (_same(x_in, x) and _same(y_in, y)),
            "expected_x": value_facts(x[keep]),
            "expected_y": value_facts(y[keep]),
            "nan_only_rows": int((~torch.isnan(rows).any(1)).sum()) if x.is_floating_point() else len(x),
            "by_sum": value_facts(x[by_sum]) if not torch.equal(by_sum, keep) else None,
        }
        if isinstance(got, (tuple, list)) and len(got) == 2:
            case["x"] = value_facts(got[0])
            case["y"] = value_facts(got[1])
            # Every example back, untouched: nothing was dropped (rather than values replaced).
            case["x_is_input"] = isinstance(got[0], torch.Tensor) and got[0].device.type == "cpu" and _same(
                torch.Tensor.detach(got[0]), x)
        cases.append(case)
        # What is already wrong on the simple table is the mistake to name, before an error
        # that a later, harder input (images, 4-D) would raise.
        if _judge_drop_non_finite(cases) is not None:
            return cases
    return cases


def _judge_drop_non_finite(cases):
    for case in cases:
        on = case["on"]
        if case["changed_input"]:
            return Mistake("in-place-on-input", (
                f"Your function changed the tensors it was given (on {on}); build new ones with "
                "boolean indexing, x[keep], and leave the data set's tensors as they were."
            ))
        if "x" not in case:
            return Mistake("not-two-tensors", (
                f"Your function returned {case['kind']} (on {on}); return the two tensors: "
                "return x[keep], y[keep]."
            ))
        x, y, expected_x = case["x"], case["y"], case["expected_x"]
        if x["kind"] != "tensor" or y["kind"] != "tensor":
            return Mistake("not-two-tensors", f"Return two tensors, x[keep] and y[keep] (on {on}); got {x['kind']} and {y['kind']}.")
        if x["device"] != "cpu" or y["device"] != "cpu":
            return Mistake("moved-device", (
                f"Your tensors are on {x['device']} and {y['device']}; the x and y you were given "
                f"are on the CPU (on {on}). Return them where they were: x[keep], y[keep]."
            ))
        if (expected_x["shape"][0] == 1 and x["shape"] == expected_x["shape"][1:]
                and y["shape"] == case["expected_y"]["shape"][1:]):
            return Mistake("squeezed-index", (
                f"Exactly one example is finite here, and your x has shape "
                f"{shape_text(x['shape'])}, without the batch dimension; expected "
                f"{shape_text(expected_x['shape'])} (on {on}). Indexing with a single number "
                "(what .nonzero().squeeze() gives for one match) drops dimension 0; index with "
                "the boolean mask itself, x[keep], which keeps it however many examples remain."
            ))
        if x["shape"][1:] != expected_x["shape"][1:]:
            return Mistake("dropped-features", (
                f"Your x has shape {shape_text(x['shape'])}; expected "
                f"{shape_text(expected_x['shape'])} (on {on}). Drop whole examples (along "
                "dimension 0), not features or single values: a boolean mask with one entry per "
                "example, x[keep]."
            ))
        kept, want = x["shape"][0], expected_x["shape"][0]
        if kept == case["n"] and want != case["n"] and case.get("x_is_input"):
            return Mistake("any-not-all", (
                f"Your x still has all {case['n']} examples, unchanged (on {on}), though "
                f"{case['n'] - want} of them hold a nan or an inf: nothing was dropped. Keep an "
                "example only when every one of its values is finite: torch.isfinite, reduced "
                "with .all() over each example's values."
            ))
        if kept == case["n"] and want != case["n"]:
            return Mistake("replaced-bad-values", (
                f"Your x still has all {case['n']} examples (on {on}): replacing the bad values "
                "(nan_to_num, zeros) keeps examples whose features are invented. Drop those "
                "examples, and their labels with them."
            ))
        by_sum = case["by_sum"]
        if by_sum is not None and x["shape"] == by_sum["shape"] and same_values(x["values"], by_sum["values"]):
            return Mistake("tested-derived-values", (
                f"Your function kept {kept} example{'s' if kept != 1 else ''}; {want} are finite (on {on}): it dropped an "
                "example whose values are all finite, only large (their sum overflows "
                f"{case['dtype']} to inf). Whatever your test computes from the values made them "
                "count as bad: a sum or mean of large values overflows, so does a conversion to a "
                "narrower dtype (float64 to float32, for instance), and a limit on their size "
                "drops finite values. Test every value itself with torch.isfinite, in its own "
                "dtype, then reduce the True/False per example with .all()."
            ))
        if kept != want:
            if kept == case["nan_only_rows"]:
                return Mistake("nan-only", (
                    f"Your function kept {kept} example{'s' if kept != 1 else ''}; {want} are finite "
                    f"(on {on}): it finds nan but not inf. torch.isnan (and x != x) sees nan "
                    "only; torch.isfinite is False for nan, inf and -inf alike."
                ))
            return Mistake("wrong-keep-mask", (
                f"Your function kept {kept} example{'s' if kept != 1 else ''}; {want} are finite (on "
                f"{on}): keep exactly the examples whose every value is finite."
            ))
        if x["dtype"] != expected_x["dtype"]:
            return Mistake("converted-x", (
                f"Your x has dtype {x['dtype'].removeprefix('torch.')}; the x you were given is "
                f"{expected_x['dtype'].removeprefix('torch.')} (on {on}). Keep the examples as "
                "they are: index x with the mask, without converting it."
            ))
        if not same_values(x["values"], expected_x["values"]):
            return Mistake("wrong-examples", f"Your x holds the wrong examples (on {on}); keep the finite ones, in their order.")
        expected_y = case["expected_y"]
        # The dtype first: labels converted (float labels cast to int64) also change values.
        if y["shape"] == expected_y["shape"] and y["dtype"] != expected_y["dtype"]:
            return Mistake("converted-y", (
                f"Your y has dtype {y['dtype'].removeprefix('torch.')}; the labels you were given "
                f"are {expected_y['dtype'].removeprefix('torch.')} (on {on}). Keep them as they "
                "are: y[keep]."
            ))
        if y["shape"] != expected_y["shape"] or not same_values(y["values"], expected_y["values"]):
            return Mistake("labels-not-filtered", (
                f"Your x is right but your y is not (on {on}): the labels must lose the same "
                "examples as x, so that x[i] still goes with y[i]. Index both with the same mask."
            ))
    return None


drop_non_finite = Exercise(
    "drop_non_finite",
    chapter=CHAPTER,
    title="Drop the examples that hold a nan or an inf",
    expects=Function("drop_non_finite", ("x", "y"), returns="a tuple of two tensors, x[keep] and y[keep]"),
    probe=_probe_drop_non_finite,
    judge=_judge_drop_non_finite,
    reference=drop_non_finite,
    passed_message=(
        "Correct: every example with a nan, inf or -inf anywhere in its features is gone, with "
        "its label, whatever the shape of one example."
    ),
    hints=[
        "torch.isfinite(x) is True where a value is neither nan nor ±inf; torch.isnan misses inf.",
        "You need one True/False per example: flatten each example's values, "
        "x.flatten(start_dim=1), then .all(dim=1). dim=1 alone only works for tables.",
        "keep = torch.isfinite(x).flatten(start_dim=1).all(dim=1); return x[keep], y[keep]",
    ],
    error_notes=[
        (
            "The shape of the mask",
            "your mask has one entry per value, not per example: reduce over every dimension "
            "but the first, e.g. torch.isfinite(x).flatten(start_dim=1).all(dim=1).",
            "mask-per-value",
        ),
        ("view size is not compatible", _VIEW_NOTE, "view-of-non-contiguous"),
        (
            "tensors used as indices must be long",
            "when no example is kept, torch.tensor([]) of an empty list of indices is a float "
            "tensor, which cannot index; give it dtype=torch.long, or index with the boolean "
            "mask itself, x[keep].",
            "float-indices",
        ),
        (
            "could not infer output dtype",
            "the check passes integer features too (int64 counts), and mean() works on floats "
            "only. Test the values themselves: torch.isfinite works on every dtype (integers are "
            "always finite).",
            "mean-of-integers",
        ),
        (
            "stack expects a non-empty TensorList",
            "when no example is kept, the list you stack is empty; a boolean mask, x[keep], "
            "gives an empty tensor with the right shape instead.",
            "stack-of-nothing-kept",
        ),
    ],
)


# ============================================================================================
# D6 — one step with the gradient clipped
# ============================================================================================
def clipped_step(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total_norm


_clipped_step = clipped_step


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
    torch.manual_seed(6)
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


def _probe_clipped_step(answer, run):
    cases = []
    for on, scale, max_norm, frozen in [
        ("targets far off (a large gradient), max_norm=1.0", 30.0, 1.0, False),
        ("targets far off, max_norm=0.5", 30.0, 0.5, False),
        ("targets close (a gradient smaller than max_norm=5.0)", 0.1, 5.0, False),
        ("a model whose first layer is frozen (requires_grad=False, so its .grad stays None), "
         "targets far off, max_norm=1.0", 30.0, 1.0, True),
    ]:
        model = _clip_model(frozen)
        g = _generator(int(scale * 10) + int(max_norm * 10))
        x = torch.randn(16, 4, generator=g)
        y = torch.randn(16, 2, generator=g) * scale
        pristine = copy.deepcopy(model)
        probe_copy = copy.deepcopy(model)
        nn.functional.mse_loss(probe_copy(x), y).backward()
        grads = [p.grad for p in probe_copy.parameters() if p.grad is not None]
        total = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
        before = _flat(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = nn.functional.mse_loss(model(x), y)
        got = run(answer, model, optimizer, loss, max_norm, on=on)
        case = {
            "on": on,
            "max_norm": max_norm,
            "total": total,
            "delta": (_flat(model) - before).numpy(),
            "expected": _delta_with(pristine, x, y, lambda m: nn.utils.clip_grad_norm_(m.parameters(), max_norm)),
            "unclipped": _delta_with(pristine, x, y, lambda m: None),
            "by_value": _delta_with(pristine, x, y, lambda m: nn.utils.clip_grad_value_(m.parameters(), max_norm)),
            # Scaled to norm max_norm even when it was smaller: clipping that also scales up.
            "scaled_up": _delta_with(pristine, x, y, lambda m: [
                p.grad.mul_(max_norm / total) for p in m.parameters() if p.grad is not None
            ]),
            # Other norms, and each parameter clipped on its own: steps that point elsewhere.
            "other_norms": {
                name: _delta_with(
                    pristine, x, y, lambda m, t=norm_type: nn.utils.clip_grad_norm_(m.parameters(), max_norm, norm_type=t))
                for name, norm_type in (("L1 norm (norm_type=1)", 1.0),
                                        ("largest-value norm (norm_type=inf)", float("inf")))
            },
            "per_parameter": _delta_with(pristine, x, y, lambda m: [
                nn.utils.clip_grad_norm_(p, max_norm) for p in m.parameters() if p.grad is not None
            ]),
            "kind": _kind(got),
        }
        returned = _number(got)
        if returned is not None:
            case["returned"] = returned
        cases.append(case)
    # Two calls in a row on the same model and optimizer (SGD with momentum), as in a loop.
    on = "two calls in a row on one model and one SGD(lr=0.1, momentum=0.9), max_norm=1.0"
    g = _generator(66)
    batches = [(torch.randn(16, 4, generator=g), torch.randn(16, 2, generator=g) * 30.0) for _ in range(2)]
    pristine = _clip_model()
    model = copy.deepcopy(pristine)
    after, returned = _two_steps(answer, model, batches, 1.0, call=lambda f, *a, on: run(f, *a, on=f"{_TWICE}, {on}"))
    expected, expected_norms = _two_steps(_clipped_step, copy.deepcopy(pristine), batches, 1.0)
    stale, _ = _two_steps(_clipped_step_without_zero_grad, copy.deepcopy(pristine), batches, 1.0)
    fresh, _ = _two_steps(_clipped_step, copy.deepcopy(pristine), batches, 1.0, fresh_optimizer=True)
    case = {
        "on": on,
        "twice": True,
        "after": after,
        "expected": expected,
        "stale": stale,
        "fresh": fresh,
        "expected_norms": [float(n) for n in expected_norms],
        "returned": [_number(r) if _number(r) is not None else _kind(r) for r in returned],
    }
    cases.append(case)
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


def _judge_clipped_twice(case):
    on = case["on"]
    for i in range(2):
        if same_values(case["after"][i], case["expected"][i], rtol=1e-4, atol=1e-7):
            continue
        if i == 1 and same_values(case["after"][i], case["stale"][i], rtol=1e-4, atol=1e-7):
            return Mistake("no-zero-grad", (
                f"On the second call the parameters moved by this loss's gradient plus the first "
                f"call's (on {on}): loss.backward() adds to .grad, and nothing cleared the old "
                "gradients. Call optimizer.zero_grad() before loss.backward(), every call."
            ))
        if i == 1 and same_values(case["after"][i], case["fresh"][i], rtol=1e-4, atol=1e-7):
            return Mistake("new-optimizer", (
                f"On the second call the parameters moved as if the optimizer remembered nothing "
                f"of the first call (on {on}): its momentum buffer started empty again. Step "
                "with the optimizer you are given; a new optimizer made inside your function "
                "loses its state (momentum, Adam's moments) on every call."
            ))
        return Mistake("wrong-repeated-step", (
            f"After call {i + 1} the parameters are not where two clipped SGD-with-momentum "
            f"steps put them (on {on}). Each call: zero_grad, backward, "
            "clip_grad_norm_(model.parameters(), max_norm), step, with the optimizer you are given."
        ))
    for i, (got, want) in enumerate(zip(case["returned"], case["expected_norms"])):
        if not isinstance(got, float) or not same_values(got, want, rtol=1e-4, atol=1e-6):
            return Mistake("wrong-norm-returned", (
                f"Call {i + 1} returned {got if isinstance(got, str) else f'{got:.4g}'}; that "
                f"call's gradient norm before clipping is {want:.4g} (on {on}). Return what "
                "clip_grad_norm_ returns."
            ))
    return None


def _judge_clipped_step(cases):
    for case in cases:
        if case.get("twice"):
            problem = _judge_clipped_twice(case)
            if problem:
                return problem
            continue
        on, max_norm, total = case["on"], case["max_norm"], case["total"]
        delta = case["delta"]
        if not np.any(delta):
            return Mistake("no-effective-step", (
                f"The parameters did not move (on {on}): call optimizer.step() after clipping, "
                "and zero the gradients before backward(), not between backward() and step()."
            ))
        if not same_values(delta, case["expected"], rtol=1e-4, atol=1e-7):
            if total > max_norm and same_values(delta, case["unclipped"], rtol=1e-4, atol=1e-7):
                returned = case.get("returned")
                if returned is not None and same_values(returned, total, rtol=1e-4, atol=1e-6):
                    when = ("The norm your function returned is that very gradient's, so "
                            "clip_grad_norm_ ran after optimizer.step(), which had already used "
                            "it: clip before the step.")
                elif returned is not None:
                    when = (f"The norm your function returned, {returned:.3g}, is not this "
                            "gradient's: clip_grad_norm_ ran before loss.backward(), on the .grad "
                            "of before (none, or the last step's). Clip after backward().")
                else:
                    when = ""
                return Mistake("clip-out-of-order", (
                    f"The parameters moved by the unclipped gradient (on {on}: its norm is "
                    f"{total:.3g}, above max_norm={max_norm:g}). clip_grad_norm_ rescales the "
                    "gradients in .grad, so it must run after loss.backward() (when they exist) "
                    "and before optimizer.step() (which reads them). " + when
                ).rstrip())
            if total < max_norm and same_values(delta, case["scaled_up"], rtol=1e-4, atol=1e-7):
                return Mistake("scales-up-small-gradients", (
                    f"Your step scaled the gradient up to norm {max_norm:g} although its norm, "
                    f"{total:.3g}, was already below it (on {on}). Clipping only scales down: "
                    "the factor is min(1, max_norm / total_norm), which clip_grad_norm_ applies."
                ))
            if same_values(delta, case["by_value"], rtol=1e-4, atol=1e-7):
                return Mistake("clip-by-value", (
                    f"You clipped each gradient value to ±{max_norm:g} (clip_grad_value_), on "
                    f"{on}: that cuts the large components only, and changes the gradient's "
                    "direction. clip_grad_norm_ scales the whole gradient down together, keeping "
                    "its direction."
                ))
            for norm_type, other in case["other_norms"].items():
                if same_values(delta, other, rtol=1e-4, atol=1e-7):
                    return Mistake("wrong-norm-type", (
                        f"Your step clipped the gradient's {norm_type} (on {on}); the task's "
                        "clipping uses the usual Euclidean norm, clip_grad_norm_'s default "
                        "(norm_type=2): clip_grad_norm_(model.parameters(), max_norm)."
                    ))
            if same_values(delta, case["per_parameter"], rtol=1e-4, atol=1e-7):
                return Mistake("per-parameter-clip", (
                    f"Your step clipped each parameter's gradient to norm {max_norm:g} on its own "
                    f"(on {on}): the total can then be far above max_norm, and the gradient's "
                    "direction changes. Clip all of them together, with one call: "
                    "clip_grad_norm_(model.parameters(), max_norm)."
                ))
            return Mistake("wrong-clipped-step", (
                f"The parameters did not move as one SGD step with the gradient clipped to norm "
                f"{max_norm:g} would move them (on {on}). One clipped step is: zero_grad, "
                "backward, clip_grad_norm_(model.parameters(), max_norm) over all the "
                "parameters together, then one optimizer.step()."
            ))
        if "returned" not in case:
            return Mistake("no-norm-returned", (
                f"Your function returned {case['kind']} (on {on}); return what clip_grad_norm_ "
                "returns: the gradient's total norm before clipping, the number to log."
            ))
        returned = case["returned"]
        if not same_values(returned, total, rtol=1e-4, atol=1e-6):
            if total > max_norm and same_values(returned, max_norm, rtol=1e-3, atol=1e-6):
                return Mistake("returned-clipped-norm", (
                    f"You returned {returned:.4g}, the norm after clipping (on {on}); return the "
                    f"norm before it, {total:.4g}, which is what clip_grad_norm_ returns. The "
                    "clipped norm is always max_norm, so it tells you nothing; the one before "
                    "clipping shows how often and how hard clipping works."
                ))
            return Mistake("wrong-norm-returned", (
                f"You returned {returned:.4g}; the gradient's total norm before clipping is "
                f"{total:.4g} (on {on}). Return what clip_grad_norm_ returns."
            ))
    return None


clipped_step = Exercise(
    "clipped_step",
    chapter=CHAPTER,
    title="One step with the gradient norm clipped",
    expects=Function("clipped_step", ("model", "optimizer", "loss", "max_norm"), returns="the total norm that clip_grad_norm_ returns (a tensor or a float)"),
    probe=_probe_clipped_step,
    judge=_judge_clipped_step,
    reference=clipped_step,
    passed_message=(
        "Correct: the gradient is scaled down to max_norm when it is larger, left alone when it "
        "is smaller, and you return the norm before clipping, the number worth logging."
    ),
    hints=[
        "Clipping changes the gradients in .grad: they exist only after loss.backward(), and "
        "optimizer.step() reads them. So the clip goes between the two.",
        "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) scales all gradients "
        "together and returns their total norm from before the scaling.",
        "optimizer.zero_grad(); loss.backward(); total = "
        "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm); optimizer.step(); "
        "return total",
    ],
    error_notes=[
        (
            "Trying to backward through the graph a second time",
            "call loss.backward() once per loss.",
            "second-backward",
        ),
        (
            "'NoneType'",
            "something was None where your code used a tensor. On this input that can be a "
            ".grad: a parameter that gets no gradient (frozen with requires_grad=False, or "
            "unused) keeps .grad None; skip it, as clip_grad_norm_ does "
            "([p.grad for p in model.parameters() if p.grad is not None]).",
            "grad-of-frozen-parameter",
        ),
    ],
)


# ============================================================================================
# D8 — a shuffle that repeats
# ============================================================================================
def seeded_loader(dataset, batch_size, seed):
    generator = torch.Generator()
    generator.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator)


def _epoch(loader) -> list[list[int]]:
    batches = []
    for batch in loader:
        values = batch[0] if isinstance(batch, (tuple, list)) else batch
        batches.append([int(v) for v in torch.as_tensor(values).reshape(-1).tolist()])
    return batches


def _generators_of(loader) -> list:
    found = [getattr(loader, "generator", None), getattr(getattr(loader, "sampler", None), "generator", None)]
    batch_sampler = getattr(loader, "batch_sampler", None)
    found.append(getattr(getattr(batch_sampler, "sampler", None), "generator", None))
    return [g for g in found if isinstance(g, torch.Generator)]


_LOADERS = [  # key, seed, batch_size, the global draws made before its first epoch
    ("a", 7, 4, 123),
    ("b", 7, 4, 999),
    ("c", 8, 4, 123),
    ("d", 7, 3, 555),
    ("e", 7, 4, 123),  # made while the global stream was seeded otherwise (_MADE_UNDER)
]
_MADE_UNDER = {"e": 31}  # the global seed when a loader is made; 2024 for the others


def _probe_seeded_loader(answer, run):
    dataset = TensorDataset(torch.arange(20))
    record = {"global_changed": []}
    loaders = {}
    # Every loader is made first, then iterated: loaders that share one generator show.
    streams = set()  # Python's or NumPy's global stream, used by the loader or its making
    for key, seed, batch_size, _ in _LOADERS:
        on = f"seeded_loader(a data set of 20 items, batch_size={batch_size}, seed={seed})"
        torch.manual_seed(_MADE_UNDER.get(key, 2024))
        before = torch.get_rng_state()
        others = _other_streams()
        loader = run(answer, dataset, batch_size, seed, on=on)
        streams |= _other_streams_moved(others)
        if not torch.equal(torch.get_rng_state(), before):
            record["global_changed"].append(on)
        record[f"kind_{key}"] = _kind(loader)
        if not isinstance(loader, DataLoader):
            return record
        loaders[key] = (loader, on)
    default = torch.default_generator
    first = loaders["a"][0]
    samplers = [getattr(first, "sampler", None), getattr(getattr(first, "batch_sampler", None), "sampler", None)]
    # generator= on the loader reaches only a sampler the loader makes itself (shuffle=True).
    record["sampler_without_generator"] = isinstance(first.generator, torch.Generator) and any(
        isinstance(sampler, torch.utils.data.RandomSampler) and sampler.generator is None for sampler in samplers
    )
    generators = {key: _generators_of(loader) for key, (loader, _) in loaders.items()}
    record["uses_global_generator"] = any(g is default for gs in generators.values() for g in gs)
    record["own_generator"] = bool(generators["a"]) and not record["uses_global_generator"]
    record["shared_generator"] = any(
        g is h for gs in generators.values() for hs in generators.values() if gs is not hs
        for g in gs for h in hs
    ) and not record["uses_global_generator"]
    record["global_changed_iterating"] = []
    for key, _, _, disturbance in _LOADERS:
        loader, on = loaders[key]
        torch.manual_seed(disturbance)  # the rest of a program uses the global random stream
        torch.rand(3)
        epochs = [(key, f"iterating over {on}")] + ([("a2", f"a second epoch of {on}")] if key == "a" else [])
        for name, where in epochs:
            before = torch.get_rng_state()
            others = _other_streams()
            record[name] = run(_epoch, loader, on=where)
            streams |= _other_streams_moved(others)
            if _global_moved(before):
                record["global_changed_iterating"].append(where)
    record["other_streams"] = sorted(streams)
    return record


def _other_streams() -> dict:
    return {"Python's random module": random.getstate(),
            "NumPy's global np.random": np.random.get_state()[1].copy()}


def _other_streams_moved(before: dict) -> set:
    after = _other_streams()
    moved = set()
    for name, state in before.items():
        same = np.array_equal(state, after[name]) if isinstance(state, np.ndarray) else state == after[name]
        if not same:
            moved.add(name)
    return moved


def _global_moved(before: torch.Tensor) -> bool:
    """Whether the global generator moved since ``before`` by more than the one number a
    DataLoader without generator= draws itself when an epoch starts (its workers' base seed:
    a loader whose sampler holds the generator does that, and it is not the learner's doing)."""
    after = torch.get_rng_state()
    if torch.equal(after, before):
        return False
    one_draw = torch.Generator()
    one_draw.set_state(before)
    torch.empty((), dtype=torch.int64).random_(generator=one_draw)
    return not torch.equal(after, one_draw.get_state())


def _judge_seeded_loader(record):
    for key, _, _, _ in _LOADERS:
        if key not in record:
            return Mistake("not-a-loader", (
                f"seeded_loader returned {record[f'kind_{key}']}; return a "
                "torch.utils.data.DataLoader (shuffle=True, batch_size=batch_size, and its "
                "own generator)."
            ))
    a, b, c, d, a2 = record["a"], record["b"], record["c"], record["d"], record["a2"]
    for order, size in ((a, 4), (d, 3)):
        items = sorted(v for batch in order for v in batch)
        sizes = [len(batch) for batch in order]
        if 20 % size and sizes == [size] * (20 // size):
            return Mistake("drop-last", (
                f"With batch_size={size} your loader gives {sizes}: the last, smaller batch of "
                f"{20 % size} is missing, so {20 % size} items never appear in an epoch. Keep it "
                "(drop_last=False, the default)."
            ))
        if items != list(range(20)):
            return Mistake("not-each-item-once", (
                f"One epoch of your loader with batch_size={size} does not hold each of the 20 "
                f"items exactly once (it holds {len(items)} items)."
            ))
        expected = [size] * (20 // size) + ([20 % size] if 20 % size else [])
        if sizes != expected:
            return Mistake("wrong-batch-sizes", f"With batch_size={size} your batches have sizes {sizes}; expected {expected}.")
    if a == c and [v for batch in a for v in batch] == list(range(20)):
        return Mistake("no-shuffle", (
            "Your loader gives the items in their stored order, 0, 1, 2…: it does not shuffle. "
            "Pass shuffle=True (training needs a new order every epoch), and make the order "
            "repeatable with generator=, not by switching shuffling off."
        ))
    if record["uses_global_generator"]:
        return Mistake("global-generator", (
            "Your loader's generator is torch.default_generator, the global random stream "
            "itself (which is also what torch.manual_seed(seed) returns): other code drawing from it changes "
            "the order. Make a new one: generator=torch.Generator().manual_seed(seed)."
        ))
    if record["shared_generator"]:
        return Mistake("shared-generator", (
            "Two loaders made by your function share one torch.Generator object: iterating one "
            "moves the other's stream, and each new call reseeds the loaders made before it. "
            "Make a new generator in every call: torch.Generator().manual_seed(seed)."
        ))
    if a != b and record.get("other_streams"):
        return Mistake("global-stream-sampler", (
            f"Two loaders with seed=7 gave different orders: your loader draws its order from "
            f"{' and '.join(record['other_streams'])}, a global stream that every other loader "
            "and the rest of the program share, so the order depends on what was drawn before. "
            "Give each loader a stream of its own: generator=torch.Generator().manual_seed(seed) "
            "(or a random.Random(seed) / np.random.default_rng(seed) of its own in a sampler)."
        ))
    if a != b and record.get("sampler_without_generator"):
        return Mistake("sampler-without-generator", (
            "Two loaders with seed=7 gave different orders. Your loader has a generator of its "
            "own, but the RandomSampler you gave it has none (its generator is None): the sampler "
            "does the shuffling, and draws from the global stream when each epoch starts, while "
            "the loader's generator= only reaches a sampler the loader makes itself. Pass "
            "shuffle=True with generator=torch.Generator().manual_seed(seed), or give the sampler "
            "the generator: RandomSampler(dataset, generator=...)."
        ))
    if a != b and record.get("own_generator") and record.get("global_changed_iterating"):
        return Mistake("touches-global-each-epoch", (
            "Two loaders with seed=7 gave different orders. Your loader has a generator of its "
            "own, yet iterating over it changed the global random generator's state (on "
            f"{record['global_changed_iterating'][0]}): something in it draws from the global "
            "stream each epoch, so its order depends on what the rest of the program drew "
            "before. Draw the whole shuffle from the loader's own generator."
        ))
    if a != b:
        return Mistake("seeds-global-stream", (
            "Two loaders with seed=7 gave different orders, because other code used the global "
            "random stream (torch.manual_seed / torch.rand) between creating each loader and "
            "iterating over it. Without its own generator, a DataLoader draws its shuffle from "
            "the global stream when an epoch starts, so torch.manual_seed(seed) before creating "
            "it is not enough. Give it its own: generator=torch.Generator().manual_seed(seed)."
        ))
    if a != record["e"]:
        return Mistake("seed-from-global-state", (
            "Two loaders with seed=7, made while the global random stream was seeded "
            "differently (torch.manual_seed(2024), then torch.manual_seed(31)), gave different "
            "orders although everything else was the same: your loader's order depends on the "
            "global state when it is made (torch.initial_seed(), a number drawn from the global "
            "stream), not on seed alone. Seed its generator with seed itself: "
            "torch.Generator().manual_seed(seed)."
        ))
    if record["global_changed"]:
        return Mistake("touches-global-stream", (
            f"Your function changed the global random generator's state (on "
            f"{record['global_changed'][0]}): it reseeded or drew from the stream the rest of "
            "the program uses, so every call resets the randomness of the code around it "
            "(model initialisation, dropout). The loader needs a generator of its own; leave "
            "the global one alone."
        ))
    if record.get("global_changed_iterating"):
        return Mistake("touches-global-each-epoch", (
            f"Iterating over your loader changed the global random generator's state (on "
            f"{record['global_changed_iterating'][0]}): each epoch, something in it reseeded the "
            "stream the rest of the program uses, or drew from it, so the dropout masks and "
            "initialisations that follow depend on your loader. Draw the shuffle from the "
            "loader's own generator only (generator=torch.Generator().manual_seed(seed)) and "
            "leave the global one as it was."
        ))
    if a == c:
        return Mistake("ignores-seed", "seed=7 and seed=8 gave the same order: the seed must choose the shuffle.")
    if a2 == a:
        return Mistake("same-order-every-epoch", (
            "Your loader repeats the same order in every epoch (two epochs of the loader with "
            "seed=7): training needs a new order each epoch. Let the loader shuffle with "
            "shuffle=True and its own generator, made once when the loader is created, so each "
            "epoch continues its stream (a new order, yet the same sequence of orders in every "
            "run)."
        ))
    return None


seeded_loader = Exercise(
    "seeded_loader",
    chapter=CHAPTER,
    title="A shuffle that repeats",
    expects=Function("seeded_loader", ("dataset", "batch_size", "seed"), returns="a torch.utils.data.DataLoader"),
    probe=_probe_seeded_loader,
    judge=_judge_seeded_loader,
    reference=seeded_loader,
    passed_message=(
        "Correct: the order depends on the seed alone, not on what the rest of the program drew "
        "from the global random stream, and it still changes from epoch to epoch."
    ),
    hints=[
        "A DataLoader with shuffle=True and no generator draws its shuffle from the global "
        "random stream when each epoch starts, not when it is created.",
        "Give the loader a random stream of its own: a torch.Generator seeded with seed, passed "
        "as generator=.",
        "return DataLoader(dataset, batch_size=batch_size, shuffle=True, "
        "generator=torch.Generator().manual_seed(seed))",
    ],
    error_notes=[
        (
            "accelerator",
            "torch.Generator's argument is a device, not a seed: torch.Generator(7) asks for "
            "device 7. Make it, then seed it: torch.Generator().manual_seed(seed).",
            "seed-passed-as-device",
        ),
    ],
)


# ============================================================================================
# D12 — a forward hook of your own
# ============================================================================================
def layer_output_shapes(model, x):
    shapes, handles = [], []

    def record(name):
        def hook(module, inputs, output):
            shapes.append((name, tuple(output.shape)))
        return hook

    for name, module in model.named_modules():
        if not list(module.children()):  # a leaf: a layer that does the work itself
            handles.append(module.register_forward_hook(record(name)))
    try:
        model(x)
    finally:
        for handle in handles:  # also when the forward raised: no hook stays behind
            handle.remove()
    return shapes


_layer_output_shapes = layer_output_shapes  # the name becomes the Exercise below


class _Block(nn.Module):
    """A block inside the model: its layers are named block.0, block.1, ..., not 0, 1."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 6), nn.Tanh())

    def forward(self, x):
        return self.body(x)


class _Nested(nn.Module):
    """A nested block, a layer called twice, and a layer that is never called."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 6)
        self.block = _Block()
        self.act = nn.ReLU()
        self.unused = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        h = self.act(self.embed(x))
        h = self.act(self.block(h))  # act runs twice: it appears twice
        return self.head(h)


class _Breaks(nn.Module):
    """A forward that raises after its first layer ran: the hooks must go all the same."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 5)
        self.second = nn.Linear(6, 2)  # expects 6 features, gets 5

    def forward(self, x):
        return self.second(self.first(x))


def _hooks_left(model) -> list[str]:
    return [name or "(the model)" for name, module in model.named_modules()
            if module._forward_hooks or module._forward_pre_hooks]


def _shapes_facts(value):
    """A list of (name, shape) pairs as plain data, or the kind of what came back."""
    if not isinstance(value, (list, tuple)):
        return {"kind": _kind(value)}
    pairs = []
    for item in value:
        if not (isinstance(item, (list, tuple)) and len(item) == 2):
            return {"kind": f"a list holding {_kind(item)}"}
        name, shape = item
        try:
            shape = [int(n) for n in shape]
        except (TypeError, ValueError):
            return {"kind": f"a pair holding {_kind(shape)} as its shape"}
        pairs.append([str(name), shape])
    return {"kind": "pairs", "pairs": pairs}


def _layer_cases():
    torch.manual_seed(12)
    straight = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    return [
        ("an nn.Sequential of Linear(8, 16), ReLU, Linear(16, 4) and x of shape (5, 8)",
         straight, torch.randn(5, 8, generator=_generator(13))),
        ("a model with a nested block, a layer called twice and one never called, x of shape (3, 4)",
         _Nested(), torch.randn(3, 4, generator=_generator(14))),
        ("the same Sequential again, a second call on the same model",
         straight, torch.randn(2, 8, generator=_generator(15))),
        ("the nested model in eval mode, inside torch.no_grad(), x of shape (1, 4)",
         _Nested().eval(), torch.randn(1, 4, generator=_generator(16))),
    ]


def _probe_layer_output_shapes(answer, run):
    cases = []
    for on, model, x in _layer_cases():
        expected = _layer_output_shapes(model, x)
        no_grad = "no_grad" in on
        modes = [m.training for m in model.modules()]
        calls = []
        counter = model.register_forward_pre_hook(lambda module, inputs: calls.append(1))
        # The caller's own hook on a layer: the answer must remove its hooks, not every hook.
        first_leaf = next(m for m in model.modules() if not list(m.children()))
        callers = first_leaf.register_forward_hook(lambda module, inputs, output: None)
        try:
            with torch.no_grad() if no_grad else torch.enable_grad():
                got = run(answer, model, x, on=on)
                grad_after = torch.is_grad_enabled()
        finally:
            counter.remove()
            callers_kept = callers.id in first_leaf._forward_hooks
            callers.remove()
        cases.append({
            "on": on,
            "got": _shapes_facts(got),
            "expected": [[name, list(shape)] for name, shape in expected],
            "inputs": [[name, list(shape)] for name, shape in _input_shapes(model, x)],
            "containers": [name or "(the model)" for name, m in model.named_modules() if list(m.children())],
            "forwards": len(calls),
            "hooks_left": _hooks_left(model),
            "callers_hook_removed": not callers_kept,
            "mode_changed": modes != [m.training for m in model.modules()],
            "grad_changed": grad_after != (not no_grad),
        })
        for module in model.modules():  # the next case starts clean, whatever this answer left
            module._forward_hooks.clear()
            module._forward_pre_hooks.clear()
        if _judge_layer_output_shapes({"cases": cases}) is not None:
            return {"cases": cases}
    broken = _Breaks()
    on = "a model whose forward raises after its first layer (its second Linear expects 6 features, gets 5)"
    try:
        run(answer, broken, torch.randn(2, 4, generator=_generator(17)), on=on)
        raised = None
    except LearnerRaised as error:
        raised = type(error.error).__name__
    return {"cases": cases, "broken": {"on": on, "raised": raised, "hooks_left": _hooks_left(broken)}}


def _input_shapes(model, x):
    """(name, shape of the first input) per leaf call: what an answer reading inputs records."""
    shapes, handles = [], []
    for name, module in model.named_modules():
        if not list(module.children()):
            handles.append(module.register_forward_pre_hook(
                lambda m, inputs, name=name: shapes.append((name, tuple(inputs[0].shape)))))
    try:
        with torch.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def _judge_layer_output_shapes(record):
    for case in record["cases"]:
        on, got, expected = case["on"], case["got"], case["expected"]
        if case["hooks_left"]:
            second = "second call" in on
            return Mistake("hooks-left", (
                f"After your function returned, hooks were still on {', '.join(case['hooks_left'][:3])} "
                f"(on {on}){': this second call recorded every layer twice, once for each hook' if second else ''}. "
                "A hook stays until you remove it: keep the handle register_forward_hook returns, "
                "and call handle.remove() on each before returning."
            ))
        if case.get("callers_hook_removed"):
            return Mistake("removed-others-hooks", (
                f"Your function removed a hook it had not registered: the caller's own hook on a "
                f"layer was gone afterwards (on {on}). Clearing module._forward_hooks takes every "
                "hook off, other code's too; remove only your own, with the handles "
                "register_forward_hook returned."
            ))
        if case["forwards"] != 1:
            return Mistake("ran-model-twice" if case["forwards"] > 1 else "never-ran-model", (
                f"Your function ran the model {case['forwards']} times (on {on}); run it once, with "
                "the hooks on, and read what they recorded."
            ))
        if case["mode_changed"] or case["grad_changed"]:
            what = "train/eval mode" if case["mode_changed"] else "grad mode"
            return Mistake("changed-mode", (
                f"Your function changed the model's {what} (on {on}). Hooks only watch: run the "
                "model as it was given, in the mode and grad mode the caller chose."
            ))
        if got["kind"] != "pairs":
            return Mistake("not-pairs", (
                f"Your function returned {got['kind']} (on {on}); return a list of (name, shape) "
                "pairs, one per layer call, e.g. [('0', (5, 16)), ('1', (5, 16)), ...]."
            ))
        pairs = got["pairs"]
        if pairs == expected:
            continue
        if pairs == case["inputs"]:
            return Mistake("input-shapes", (
                f"Your shapes are the layers' *inputs* (on {on}): a forward hook is called as "
                "hook(module, inputs, output), and the output is its third argument."
            ))
        names = [name for name, _ in pairs]
        containers = [name for name in names if name in case["containers"] or name == ""]
        if containers:
            return Mistake("containers-included", (
                f"Your list has entries for {', '.join(repr(n) for n in containers[:3])}, which are "
                f"containers, not layers (on {on}): their output is a layer's output again. Hook "
                "only modules without children: not list(module.children())."
            ))
        expected_names = [name for name, _ in expected]
        if sorted(names) == sorted(expected_names) and names != expected_names:
            return Mistake("wrong-order", (
                f"Your pairs are all there but in another order (on {on}): {names}; expected the "
                f"order the layers ran in, {expected_names}. Append in the hook, as each call happens."
            ))
        if set(names) == set(expected_names) and len(names) < len(expected_names):
            return Mistake("one-entry-per-layer", (
                f"A layer called twice appears once in your result (on {on}): {names}; expected "
                f"{expected_names}. Record every call (a list, appended in the hook), not one "
                "entry per layer (a dict keyed by name)."
            ))
        if any("." in name for name in expected_names) and not any("." in name for name in names):
            return Mistake("children-only", (
                f"Your names are {names}; expected {expected_names} (on {on}): the layers inside "
                "the nested block are missing, or named by their own short names. "
                "model.named_children() goes one level down; model.named_modules() reaches every "
                "module and names it by its full path (block.body.0)."
            ))
        return Mistake("wrong-pairs", (
            f"Your function returned {pairs}; expected {expected} (on {on}): one (name, shape) pair "
            "per layer call, with the name from model.named_modules() and the output's shape."
        ))
    broken = record.get("broken")
    if broken is not None:
        on = broken["on"]
        if broken["raised"] is None:
            return Mistake("swallowed-error", (
                f"Your function returned normally although the model's forward raised (on {on}): "
                "the caller must see that error. Remove the hooks in a `finally:` and let the "
                "error go on."
            ))
        if broken["hooks_left"]:
            return Mistake("hooks-left-after-error", (
                f"When the model's forward raised, your hooks stayed on "
                f"{', '.join(broken['hooks_left'][:3])} (on {on}): the removal never ran. Put it in "
                "a `finally:` block (try: model(x) / finally: remove every handle), which runs "
                "whether the forward returns or raises."
            ))
    return None


layer_output_shapes = Exercise(
    "layer_output_shapes",
    chapter=CHAPTER,
    title="A forward hook of your own",
    expects=Function("layer_output_shapes", ("model", "x"),
                     returns="a list of (name, shape) pairs, one per layer call"),
    probe=_probe_layer_output_shapes,
    judge=_judge_layer_output_shapes,
    reference=layer_output_shapes,
    passed_message=(
        "Correct: one (name, shape) pair per layer call, in order, from hooks on the leaf modules, "
        "every hook removed afterwards, also when the forward raised."
    ),
    hints=[
        "module.register_forward_hook(hook) makes torch call hook(module, inputs, output) after "
        "each forward of that module; it returns a handle whose .remove() takes the hook off.",
        "model.named_modules() gives every module with its full name; the layers are those "
        "without children (not list(module.children())). Make one hook per layer that knows its "
        "name (a function that returns the hook), appending to one list.",
        "Keep every handle; run the model in try:, and remove the handles in finally:, so they go "
        "even when the forward raises.",
    ],
)
