"""Chapter 06's public cases (see ``course_utils.exercises.public``).

Inputs only: small stacks, models, batches and a data set built from seeds and literal values
other than the practice probes' ones (no global random stream is used to build them); the
facts a right answer gives on them come from the reference, at release time. Where the task
asks for more than what comes out (a dry run that leaves the stack as it was, a module's output
in another dtype, a shuffle that follows its seed alone), the ``use`` records how the learner's
code behaved. The device half of PositionWeights needs another device than the CPU, and the
hidden cases provide one (meta).
"""

from __future__ import annotations

import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from course_utils.exercises.public import PublicCase, PublicCases, describe, seeded_module


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _flat(tensors) -> torch.Tensor:
    return torch.cat([torch.Tensor.detach(t).reshape(-1) for t in tensors])


def _a_number(value):
    """One real number as a Python float, as the practice check accepts it (a tensor or a NumPy
    array of one value, a Python or NumPy number); anything else as it is."""
    if isinstance(value, (bool, np.bool_)):
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.device.type != "meta":
        return float(torch.Tensor.detach(value).reshape(-1)[0].cpu().item())
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "fiu":
        return float(value.reshape(-1)[0])
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    return value


# ============================================================================================
# flat_features
# ============================================================================================
def _stack_inputs(make, seed, sample_shape, training):
    def arguments():
        features = seeded_module(make, seed).train(training)
        for module in features.modules():
            if isinstance(module, nn.BatchNorm2d):  # statistics off their defaults, as after training
                with torch.no_grad():
                    module.running_mean.copy_(torch.linspace(-0.5, 0.5, module.num_features))
                    module.running_var.copy_(torch.linspace(0.5, 1.5, module.num_features))
                    module.num_batches_tracked.fill_(12)
        return features, sample_shape
    return arguments


def _dry_run(answer, arguments, run, on):
    """The number it returned (a NumPy integer counts as its int, as the practice check
    accepts), and the stack afterwards: its parameters and buffers, and each layer's mode."""
    features, sample_shape = arguments
    returned = run(answer, features, sample_shape, on=on)
    if isinstance(returned, np.integer):
        returned = int(returned)
    return {
        "returned": describe(returned),
        "the_stack_after_the_call": describe(features),
        "the_train_mode_of_each_layer_after_the_call": describe([m.training for m in features.modules()]),
    }


flat_features = PublicCases(
    use=_dry_run,
    rtol=0, atol=0,
    cases=[
        PublicCase("Sequential(Conv2d(3, 4, 3, stride=2), BatchNorm2d(4), ReLU, MaxPool2d(2), "
                   "Dropout(0.2)) in train mode, sample_shape (3, 13, 10)",
                   _stack_inputs(lambda: nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.BatchNorm2d(4),
                                                       nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.2)),
                                 401, (3, 13, 10), True)),
        PublicCase("Sequential(Conv2d(2, 3, (3, 5), padding=1), ReLU, AvgPool2d(2)) in eval mode, "
                   "sample_shape torch.Size([2, 9, 12])",
                   _stack_inputs(lambda: nn.Sequential(nn.Conv2d(2, 3, (3, 5), padding=1), nn.ReLU(),
                                                       nn.AvgPool2d(2)),
                                 402, torch.Size([2, 9, 12]), False)),
    ],
)


# ============================================================================================
# PositionWeights
# ============================================================================================
_MAX_LENGTH = 12
_FLOAT32 = "forward(x)_for_a_float32_x_of_shape_(2, 5, 3),_transposed_(not_contiguous)"
_X_AFTER = "whether_forward_left_that_x_as_it_was"
_BFLOAT16 = "forward(x)_of_the_module_moved_to_bfloat16,_for_a_bfloat16_x_of_shape_(3, 7, 2)"
_GRAD = "x.grad_after_forward(x).sum().backward(),_for_a_float64_x_of_shape_(1, 4, 2)_that_requires_grad"


def _trainable(module) -> list:
    return [name for name, parameter in module.named_parameters() if parameter.requires_grad]


def _weighted(answer, arguments, run, on):
    """The module made with ``max_length``, on a float32 batch (and that batch afterwards), a
    new one moved to bfloat16 on a bfloat16 batch, and the gradient a float64 batch gets through
    a third one; and which parameters an optimizer would train."""
    (max_length,) = arguments
    made = f"PositionWeights({max_length})"
    module = run(answer, max_length, on=made)
    if not isinstance(module, nn.Module):
        return {"what_the_class_makes": describe(type(module).__name__)}
    facts = {"what_the_class_makes": describe("an nn.Module")}
    x = (torch.rand(2, 3, 5, generator=_generator(411)) * 4 - 2).transpose(1, 2)
    kept = x.clone()
    facts[_FLOAT32] = describe(run(module, x, on=f"{made} on a float32 x of shape (2, 5, 3)"))
    facts[_X_AFTER] = describe(torch.equal(x, kept))
    facts["its_parameters_that_require_grad_(an_optimizer_would_train_them)"] = describe(_trainable(module))

    half = run(answer, max_length, on=made)
    half = run(lambda: half.to(torch.bfloat16), on=f"{made}.to(torch.bfloat16)")
    xb = (torch.rand(3, 7, 2, generator=_generator(412)) * 4 - 2).to(torch.bfloat16)
    facts[_BFLOAT16] = describe(run(half, xb, on=f"{made}.to(torch.bfloat16) on a bfloat16 x"))

    wide = run(answer, max_length, on=made)
    wide = run(lambda: wide.to(torch.float64), on=f"{made}.to(torch.float64)")
    xg = torch.rand(1, 4, 2, generator=_generator(413), dtype=torch.float64).requires_grad_(True)
    out = run(wide, xg, on=f"{made}.to(torch.float64) on a float64 x that requires grad")
    if isinstance(out, torch.Tensor) and out.requires_grad:
        run(lambda: torch.Tensor.sum(out).backward(), on="forward(x).sum().backward()")
    facts[_GRAD] = describe(xg.grad)
    return facts


# bfloat16 keeps 8 bits of mantissa: weights rounded to bfloat16 before the product, or the
# product of exact weights rounded once, differ by a unit in the last place (0.4 %).
PositionWeights = PublicCases(
    use=_weighted,
    loose={_BFLOAT16: (2e-2, 2e-2)},
    cases=[PublicCase(f"PositionWeights({_MAX_LENGTH})", lambda: (_MAX_LENGTH,))],
)


# ============================================================================================
# drop_non_finite
# ============================================================================================
def _table():
    x = torch.rand(6, 3, generator=_generator(421)) * 10 - 5
    x[1, 0] = float("inf")
    x[2, 2] = float("nan")
    x[4, 1] = float("-inf")
    return x, torch.tensor([3, 1, 4, 1, 5, 9])


def _batches_of_matrices():
    x = torch.rand(5, 2, 3, generator=_generator(422), dtype=torch.float64) * 2 - 1
    x[0, 1, 2] = float("nan")
    x[3, 0, 0] = float("-inf")
    return x, torch.tensor([0.5, 1.5, 2.5, 3.5, 4.5])


def _dropped(answer, arguments, run, on):
    """What it returned (a list of two tensors counts as a tuple, as the practice check
    accepts), and x and y as the caller has them afterwards."""
    returned = run(answer, *arguments, on=on)
    if type(returned) is list and len(returned) == 2:
        returned = tuple(returned)
    return {"returned": describe(returned), "arguments": [describe(value) for value in arguments]}


drop_non_finite = PublicCases(
    use=_dropped,
    rtol=0, atol=0,
    cases=[
        PublicCase("x: a table of 6 examples × 3 features (float32) with an inf, a nan and a -inf "
                   "in three of them, y: int64 labels", _table),
        PublicCase("x: 5 examples of shape (2, 3) (float64), one with a nan and one with a -inf, "
                   "y: float labels", _batches_of_matrices),
    ],
)


# ============================================================================================
# clipped_step
# ============================================================================================
def _clip_inputs(seed, target_scale, max_norm):
    def arguments():
        model = seeded_module(lambda: nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2)), seed)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        generator = _generator(seed + 1)
        x = torch.randn(10, 3, generator=generator)
        y = torch.randn(10, 2, generator=generator) * target_scale
        loss = F.mse_loss(model(x), y)
        return model, optimizer, loss, max_norm
    return arguments


def _clipped(answer, arguments, run, on):
    """The number it returned (a tensor, a NumPy number or array of one value, a float alike),
    whether that is a tensor (what clip_grad_norm_ returns), and how far each parameter moved."""
    model, optimizer, loss, max_norm = arguments
    parameters = list(model.parameters())
    before = _flat(parameters)
    returned = run(answer, model, optimizer, loss, max_norm, on=on)
    return {
        "returned": describe(_a_number(returned)),
        "returned_a_tensor_(as_clip_grad_norm_)": describe(isinstance(returned, torch.Tensor)),
        "how_far_the_parameters_moved_(before_minus_after)": describe(before - _flat(parameters)),
    }


clipped_step = PublicCases(
    use=_clipped,
    rtol=1e-4, atol=1e-6,
    cases=[
        PublicCase("a Sequential(Linear(3, 6), Tanh, Linear(6, 2)), SGD(lr=0.05), an MSE loss "
                   "whose gradient norm is far above max_norm=0.7", _clip_inputs(431, 20.0, 0.7)),
        PublicCase("the same model, SGD(lr=0.05), an MSE loss whose gradient norm is below "
                   "max_norm=10.0", _clip_inputs(432, 0.1, 10.0)),
    ],
)


# ============================================================================================
# seeded_loader
# ============================================================================================
class _Items(Dataset):
    """The items 0 to n - 1, each its own index."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return torch.tensor(index)

    def __repr__(self):
        return f"a data set of the {self.n} items 0, 1, …, {self.n - 1}"


# The two public seeds: each case also makes a loader with the other one.
_SEEDS = (3, 8)


def _epoch(loader) -> list:
    batches = []
    for batch in loader:
        values = batch[0] if isinstance(batch, (tuple, list)) else batch
        batches.append([int(v) for v in torch.as_tensor(values).reshape(-1).tolist()])
    return batches


def _other_streams():
    return random.getstate(), np.random.get_state()[1].copy()


def _same_streams(a, b) -> bool:
    return a[0] == b[0] and np.array_equal(a[1], b[1])


def _shuffles(answer, arguments, run, on):
    """What it returns, and how its orders behave: one epoch holds every item once, in batches
    of batch_size; two loaders with the same seed give the same order although other code drew
    from the global stream in between; another seed gives another order; the next epoch another
    order; and making the loaders leaves the global random streams alone."""
    dataset, batch_size, seed = arguments
    other = _SEEDS[1 - _SEEDS.index(seed)]
    made = f"seeded_loader({dataset!r}, batch_size={batch_size}, seed={seed})"
    streams = _other_streams()
    torch.manual_seed(2025)
    before = torch.get_rng_state()
    first = run(answer, dataset, batch_size, seed, on=made)
    untouched = torch.equal(torch.get_rng_state(), before)
    if not isinstance(first, DataLoader):
        return {"what_it_returns": describe(type(first).__name__)}
    facts = {"what_it_returns": describe("a DataLoader")}
    torch.manual_seed(31)
    before = torch.get_rng_state()
    again = run(answer, dataset, batch_size, seed, on=f"{made} again, the global stream seeded otherwise")
    untouched = untouched and torch.equal(torch.get_rng_state(), before)
    before = torch.get_rng_state()
    elsewhere = run(answer, dataset, batch_size, other, on=f"seeded_loader(..., seed={other})")
    untouched = untouched and torch.equal(torch.get_rng_state(), before)

    torch.manual_seed(123)
    torch.rand(3)  # the rest of the program draws from the global stream
    epoch = run(_epoch, first, on=f"iterating over {made}")
    next_epoch = run(_epoch, first, on=f"a second epoch of {made}")
    torch.manual_seed(999)
    torch.rand(3)
    epoch_again = run(_epoch, again, on=f"iterating over the second loader with seed={seed}")
    torch.manual_seed(123)
    torch.rand(3)
    epoch_elsewhere = run(_epoch, elsewhere, on=f"iterating over the loader with seed={other}")
    order = [item for batch in epoch for item in batch]
    facts.update({
        "the_items_of_one_epoch,_sorted": describe(sorted(order)),
        "the_batch_sizes_of_one_epoch": describe([len(batch) for batch in epoch]),
        "whether_one_epoch_is_shuffled_(not_0,_1,_2,_…)": describe(order != sorted(order)),
        "whether_the_same_seed_gives_the_same_order,_whatever_was_drawn_from_the_global_stream":
            describe(epoch_again == epoch),
        f"whether_seed={other}_gives_another_order_than_seed={seed}": describe(epoch_elsewhere != epoch),
        "whether_the_second_epoch_has_another_order": describe(next_epoch != epoch),
        "whether_making_a_loader_leaves_torch's_global_generator_alone": describe(untouched),
        "whether_Python's_and_NumPy's_global_streams_are_left_alone": describe(
            _same_streams(streams, _other_streams())),
    })
    return facts


def _loader_inputs(seed):
    return lambda: (_Items(14), 4, seed)


seeded_loader = PublicCases(
    use=_shuffles,
    cases=[
        PublicCase(f"a data set of 14 items, batch_size=4, seed={_SEEDS[0]}", _loader_inputs(_SEEDS[0])),
        PublicCase(f"a data set of 14 items, batch_size=4, seed={_SEEDS[1]}", _loader_inputs(_SEEDS[1])),
    ],
)


# ============================================================================================
# layer_output_shapes
# ============================================================================================
def _conv_then_linear():
    model = seeded_module(lambda: nn.Sequential(nn.Conv1d(2, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(12, 2)), 501)
    return model, torch.randn(4, 2, 6, generator=_generator(502))


def _nested_with_a_shared_layer():
    def make():
        act = nn.Tanh()
        return nn.Sequential(nn.Linear(3, 5), act, nn.Sequential(nn.Linear(5, 5), act), nn.Linear(5, 1))
    return seeded_module(make, 503), torch.randn(2, 3, generator=_generator(504))


def _pairs(returned):
    """(name, shape) pairs as plain lists, a torch.Size as a tuple of ints; else the value."""
    try:
        pairs = [(str(name), tuple(int(n) for n in shape)) for name, shape in returned]
    except (TypeError, ValueError):
        return describe(returned)
    return describe(pairs)


def _shapes_and_hooks(answer, arguments, run, on):
    """What came back, the hooks left on any module of the model afterwards, and its mode."""
    model, x = arguments
    returned = run(answer, model, x, on=on)
    left = [name or "(the model)" for name, module in model.named_modules()
            if module._forward_hooks or module._forward_pre_hooks]
    return {"returned": _pairs(returned), "hooks left": describe(left),
            "the model's train mode afterwards": describe(model.training)}


layer_output_shapes = PublicCases(
    use=_shapes_and_hooks,
    rtol=0, atol=0,
    cases=[
        PublicCase("a Sequential of Conv1d(2, 3, 3), ReLU, Flatten, Linear(12, 2) and x of shape (4, 2, 6)",
                   _conv_then_linear),
        PublicCase("a Sequential holding a Sequential, with one Tanh used in both, and x of shape (2, 3)",
                   _nested_with_a_shared_layer),
    ],
    lets_through={"model.forward(x) instead of model(x)": (
        "the public cases record the pairs and the hooks left, not how the model was called: "
        "model.forward(x) runs the same layers here (the hidden cases count the model's calls)")},
)
