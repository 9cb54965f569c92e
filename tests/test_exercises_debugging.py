"""Chapter 06's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them (the catalogue at the end)."""

import copy
import math
import random

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, Sampler, SubsetRandomSampler

from course_utils.data import JitteredDigits, reseed_worker
from course_utils.exercises import debugging as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_references_pass_and_leave_the_session_alone
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

EXERCISES = (ex.flat_features, ex.PositionWeights, ex.drop_non_finite, ex.clipped_step, ex.seeded_loader)


def test_every_reference_passes_quickly_and_leaves_the_session_alone():
    # The first factory calls on the meta device load torch's reference implementations
    # (seconds, once per process); the notebook's demonstrations pay that before the check.
    ex.PositionWeights.reference(4)(torch.empty(1, 2, 3, device="meta"))
    assert_references_pass_and_leave_the_session_alone(EXERCISES)


def test_a_blank_answer_is_not_attempted():
    def blank(*args):
        raise NotImplementedError()

    class Blank(nn.Module):
        def __init__(self, max_length):
            super().__init__()
            raise NotImplementedError()

    class BlankForward(nn.Module):
        def __init__(self, max_length):
            super().__init__()

        def forward(self, x):
            raise NotImplementedError()

    for exercise in EXERCISES:
        answers = (Blank, BlankForward) if exercise.name == "PositionWeights" else (blank,)
        for answer in answers:
            assert exercise.verdict(answer).outcome is Outcome.NOT_ATTEMPTED, exercise.name


# -- flat_features (D2) ----------------------------------------------------------------------
def flat_on_a_copy(features, sample_shape):
    dry = copy.deepcopy(features)
    out = dry(torch.zeros(2, *sample_shape))  # train mode is fine on a copy
    return out.flatten(1).shape[1]


def flat_on_meta(features, sample_shape):
    dry = copy.deepcopy(features).to("meta").eval()
    return int(np.prod(dry(torch.empty(1, *sample_shape, device="meta")).shape[1:]))


def flat_every_module_mode_restored(features, sample_shape):
    modes = {m: m.training for m in features.modules()}
    features.eval()
    with torch.inference_mode():
        out = features(torch.randn(1, *sample_shape))
    for module, mode in modes.items():
        module.training = mode
    return math.prod(out.shape[1:])


def flat_counted_with_the_batch(features, sample_shape):
    copy_ = copy.deepcopy(features).eval()
    return copy_(torch.zeros(2, *sample_shape)).numel()


def flat_returns_the_shape(features, sample_shape):
    return copy.deepcopy(features).eval()(torch.zeros(1, *sample_shape)).shape[1:]


def flat_in_train_mode(features, sample_shape):
    with torch.no_grad():
        return features(torch.zeros(2, *sample_shape))[0].numel()


def flat_left_in_eval(features, sample_shape):
    features.eval()
    with torch.no_grad():
        return features(torch.zeros(1, *sample_shape))[0].numel()


def flat_as_a_tensor(features, sample_shape):
    with torch.no_grad():
        out = copy.deepcopy(features).eval()(torch.zeros(1, *sample_shape))
    return torch.tensor(out.shape[1:]).prod()


def flat_always_back_to_train(features, sample_shape):
    features.eval()
    with torch.no_grad():
        out = features(torch.zeros(1, *sample_shape))
    features.train()
    return out[0].numel()


def clips_before_backward(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    loss.backward()
    optimizer.step()
    return total


def clips_after_the_step(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


def drop_nan_rows_per_feature(x, y):
    keep = ~torch.isnan(x).any(dim=1)  # nan only, and only right for a table
    return x[keep], y[keep]


_FLAT_CACHE = {}


def flat_cached_by_shape(features, sample_shape):
    key = tuple(sample_shape)
    if key not in _FLAT_CACHE:
        _FLAT_CACHE[key] = ex.flat_features.reference(features, sample_shape)
    return _FLAT_CACHE[key]


def flat_grad_switched_off(features, sample_shape):
    torch.set_grad_enabled(False)
    return copy.deepcopy(features).eval()(torch.zeros(1, *sample_shape))[0].numel()


def flat_frozen_parameters(features, sample_shape):
    for p in features.parameters():
        p.requires_grad_(False)  # "no gradients needed for a dry run"
    return ex.flat_features.reference(features, sample_shape)


def flat_moves_the_stack_to_meta(features, sample_shape):
    dry = features.to("meta").eval()  # .to() moves the module itself, not a copy
    return dry(torch.empty(1, *sample_shape, device="meta"))[0].numel()


def flat_channels_only(features, sample_shape):
    with torch.no_grad():
        return copy.deepcopy(features).eval()(torch.zeros(1, *sample_shape)).shape[1]


def flat_with_set_grad_enabled(features, sample_shape):
    was_training = features.training
    features.eval()
    with torch.set_grad_enabled(False):
        out = features(torch.zeros((1,) + tuple(sample_shape), dtype=torch.float32, device="cpu"))
    features.train(was_training)
    return int(out[0].numel())


def flat_as_a_numpy_int(features, sample_shape):
    return np.int64(ex.flat_features.reference(features, sample_shape))


def flat_train_mode_then_buffers_put_back(features, sample_shape):
    saved = copy.deepcopy(features.state_dict())
    with torch.no_grad():
        out = features(torch.randn(1, *sample_shape))  # train mode: buffers move, then go back
    features.load_state_dict(saved)
    return out[0].numel()


def flat_grad_switched_on_at_the_end(features, sample_shape):
    was_training = features.training
    features.eval()
    torch.set_grad_enabled(False)
    out = features(torch.zeros(1, *sample_shape))
    torch.set_grad_enabled(True)  # "switch it back on"
    features.train(was_training)
    return out[0].numel()


def flat_unfreezes_after(features, sample_shape):
    features.requires_grad_(False)
    n = ex.flat_features.reference(features, sample_shape)
    features.requires_grad_(True)  # "put it back"
    return n


def flat_by_formula(features, sample_shape):
    channels, height, width = sample_shape
    for layer in features:  # convolutions only: the pooling is forgotten
        if isinstance(layer, nn.Conv2d):
            height = (height + 2 * layer.padding[0] - layer.kernel_size[0]) // layer.stride[0] + 1
            width = (width + 2 * layer.padding[1] - layer.kernel_size[1]) // layer.stride[1] + 1
            channels = layer.out_channels
    return channels * height * width


def flat_top_flag_only(features, sample_shape):
    was_training = features.training
    features.eval()
    with torch.no_grad():
        out = features(torch.zeros(1, *sample_shape))
    features.training = was_training  # the children stay in eval mode
    return out[0].numel()


# -- PositionWeights (D3) --------------------------------------------------------------------
class PositionsWithBuffer(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.register_buffer("steps", torch.arange(1, max_length + 1), persistent=False)

    def forward(self, x):
        length = x.shape[1]
        weights = (self.steps[:length] / length).to(x.dtype)
        return x * weights[:, None]


class PositionsFromInput(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device).to(x.dtype) / length
        return x * steps.view(1, length, 1)


class PositionsWithAFrozenParameter(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.steps = nn.Parameter(torch.arange(1.0, max_length + 1), requires_grad=False)

    def forward(self, x):
        length = x.shape[1]
        return x * (self.steps[:length] / length).to(x.dtype).unsqueeze(-1)


class PositionsWithLinspace(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length

    def forward(self, x):
        length = x.size(1)
        weights = torch.linspace(1 / length, 1.0, length, device=x.device, dtype=x.dtype)
        return torch.einsum("blf,l->blf", x, weights)


class PositionsBuggy(nn.Module):  # the notebook's module
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        return x * (torch.arange(1, length + 1) / length)[:, None]


class PositionsDeviceOnly(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        return x * (torch.arange(1, length + 1, device=x.device) / length)[:, None]


class PositionsPlainAttribute(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.steps = torch.arange(1, max_length + 1)

    def forward(self, x):
        length = x.shape[1]
        return x * (self.steps[:length] / length).to(x.dtype)[:, None]


class PositionsFromZero(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        return x * (torch.arange(length, device=x.device, dtype=x.dtype) / length)[:, None]


class PositionsOverMaxLength(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length

    def forward(self, x):
        steps = torch.arange(1, x.shape[1] + 1, device=x.device, dtype=x.dtype)
        return x * (steps / self.max_length)[:, None]


class PositionsCachedOnFirstCall(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.weights = None

    def forward(self, x):
        if self.weights is None:  # computed once, "to save time"
            length = x.shape[1]
            self.weights = torch.arange(1, length + 1, device=x.device, dtype=x.dtype) / length
        return x * self.weights[:, None]


class PositionsInPlace(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
        return x.mul_((steps / length)[:, None])


class PositionsWithView(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        batch, length, features = x.shape
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype) / length
        flat = x.view(batch * length, features) * steps.repeat(batch)[:, None]
        return flat.view(batch, length, features)


class PositionsDetached(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        with torch.no_grad():  # "the weights are constants"
            steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
            return x * (steps / length)[:, None]


class PositionsInFloat32(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=torch.float32)
        return x * (steps / length)[:, None]


class PositionsFromAList(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.size(-2)
        return x * x.new_tensor([(t + 1) / length for t in range(length)]).unsqueeze(-1)


class PositionsMovedWithTo(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        return x * (torch.arange(1, length + 1) / length).to(x)[:, None]


class PositionsInFloat64ThenCast(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        weights = (torch.arange(1, length + 1, dtype=torch.float64) / length).to(x.device)
        return (x.double() * weights[:, None]).to(x.dtype)


class PositionsCachedPerLength(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        length = x.shape[1]
        if length not in self.cache:  # "computed once per length"
            steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
            self.cache[length] = (steps / length)[:, None]
        return x * self.cache[length]


class PositionsCachedPerLengthAndDevice(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = (x.shape[1], x.device)  # "a new device gets new weights"
        if key not in self.cache:
            steps = torch.arange(1, key[0] + 1, device=x.device, dtype=x.dtype)
            self.cache[key] = (steps / key[0])[:, None]
        return x * self.cache[key]


class PositionsDetachedThenMarked(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        out = x * (torch.arange(1, length + 1, device=x.device, dtype=x.dtype) / length)[:, None]
        return out.detach().requires_grad_(x.requires_grad)


class PositionsFixedForFloat64Only(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        weights = torch.arange(1, length + 1, device=x.device) / length
        if x.dtype == torch.float64:
            weights = weights.double()
        return x * weights[:, None]


# -- drop_non_finite (D5) --------------------------------------------------------------------
def drop_with_reshape(x, y):
    keep = torch.isfinite(x.reshape(len(x), -1)).all(dim=-1)
    return x[keep], y[keep]


def drop_with_nan_and_inf(x, y):
    bad = (torch.isnan(x) | torch.isinf(x)).flatten(1).any(1)
    return x[~bad], y[~bad]


def drop_with_amin_over_dims(x, y):
    finite = torch.isfinite(x)
    keep = finite.all(dim=tuple(range(1, x.dim()))) if x.dim() > 1 else finite
    return x[keep], y[keep]


def drop_with_a_loop(x, y):
    indices = [i for i in range(len(x)) if torch.isfinite(x[i]).all()]
    index = torch.tensor(indices, dtype=torch.long)
    return x[index], y[index]


def drop_nan_only(x, y):
    keep = ~torch.isnan(x).flatten(1).any(1)
    return x[keep], y[keep]


def drop_self_equal(x, y):
    keep = (x == x).flatten(1).all(1)
    return x[keep], y[keep]


def drop_table_only(x, y):
    keep = torch.isfinite(x).all(dim=1)
    return x[keep], y[keep]


def drop_columns(x, y):
    keep = torch.isfinite(x).all(dim=0)
    return x[:, keep], y


def drop_forgot_labels(x, y):
    keep = torch.isfinite(x).flatten(1).all(1)
    return x[keep], y[: int(keep.sum())]


def drop_replaced(x, y):
    return torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), y


def drop_in_place(x, y):
    x.nan_to_num_(0.0, 0.0, 0.0)
    return ex.drop_non_finite.reference(x, y)


def drop_by_the_sum(x, y):
    keep = torch.isfinite(x.flatten(1).sum(dim=1))  # nan and inf spread into the sum
    return x[keep], y[keep]


def drop_with_view(x, y):
    keep = torch.isfinite(x).view(len(x), -1).all(dim=1)
    return x[keep], y[keep]


def drop_by_stacking(x, y):
    pairs = [(xi, yi) for xi, yi in zip(x, y) if torch.isfinite(xi).all()]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def drop_as_float(x, y):
    x = x.float()
    keep = torch.isfinite(x).flatten(1).all(1)
    return x[keep], y[keep]


def drop_by_nan_to_num(x, y):
    keep = (torch.nan_to_num(x) == x).flatten(1).all(1)
    return x[keep], y[keep]


def drop_by_subtraction(x, y):
    keep = ((x - x) == 0).flatten(1).all(1)  # inf - inf and nan - nan are nan
    return x[keep], y[keep]


def drop_with_index_select(x, y):
    index = torch.isfinite(x).flatten(1).all(1).nonzero().flatten()
    return x.index_select(0, index), y.index_select(0, index)


def drop_with_squeezed_indices(x, y):
    index = torch.isfinite(x).flatten(1).all(1).nonzero().squeeze()
    return x[index], y[index]


def drop_with_any(x, y):
    keep = torch.isfinite(x).flatten(1).any(1)
    return x[keep], y[keep]


def drop_by_the_sum_in_float64(x, y):
    keep = torch.isfinite(x.flatten(1).double().sum(1))  # "float64 does not overflow"
    return x[keep], y[keep]


def drop_with_a_float_index(x, y):
    index = torch.tensor([i for i in range(len(x)) if torch.isfinite(x[i]).all()])
    return x[index], y[index]


# -- clipped_step (D6) -----------------------------------------------------------------------
def clip_returns_a_numpy_float(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total.numpy()[()]  # a NumPy float32, to log


def clip_returns_float(model, optimizer, loss, max_norm):
    loss.backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
    optimizer.step()
    optimizer.zero_grad()
    return norm.item()


def clip_by_hand(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale)
    optimizer.step()
    return total


def clip_model_zero_grad(model, optimizer, loss, max_norm):
    model.zero_grad(set_to_none=False)
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total


def clip_trainable_list(model, optimizer, loss, max_norm):
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    trainable = [p for p in model.parameters() if p.requires_grad]
    total = torch.nn.utils.clip_grad_norm_(trainable, max_norm, norm_type=2.0)
    optimizer.step()
    return float(total)


def clip_after_step(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return nn.utils.clip_grad_norm_(model.parameters(), max_norm)


def clip_before_backward(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    loss.backward()
    optimizer.step()
    return total


def clip_by_value(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_value_(model.parameters(), max_norm)
    optimizer.step()
    return max_norm


def clip_returns_the_clipped_norm(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])


def clip_zeroes_before_step(model, optimizer, loss, max_norm):
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.zero_grad()
    optimizer.step()
    return total


def clip_returns_nothing(model, optimizer, loss, max_norm):
    ex.clipped_step.reference(model, optimizer, loss, max_norm)


def clip_no_zero_grad(model, optimizer, loss, max_norm):
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total


def clip_new_optimizer(model, optimizer, loss, max_norm):
    lr = optimizer.param_groups[0]["lr"]
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)  # "to be sure of the lr"
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total


def clip_by_hand_every_parameter(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))
    if total > max_norm:
        for p in model.parameters():
            p.grad *= max_norm / total
    optimizer.step()
    return total


def clip_always_rescales(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    for g in grads:
        g *= max_norm / total  # "normalise the gradient to max_norm"
    optimizer.step()
    return total


def clip_with_the_two_part_api(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
    nn.utils.clip_grads_with_norm_(model.parameters(), max_norm, total)
    optimizer.step()
    return total


def clip_the_optimizers_parameters(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    total = nn.utils.clip_grad_norm_(params, max_norm, foreach=False)
    optimizer.step()
    return total


def clip_the_l1_norm(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type=1)
    optimizer.step()
    return total


def clip_each_parameter(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    norms = [nn.utils.clip_grad_norm_(p, max_norm) for p in model.parameters() if p.grad is not None]
    optimizer.step()
    return torch.linalg.vector_norm(torch.stack(norms))


def clip_by_scaling_the_lr(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
    for group in optimizer.param_groups:  # "the same step, scaled"
        group["lr"] *= min(1.0, max_norm / (float(total) + 1e-6))
    optimizer.step()
    return total


# -- seeded_loader (D8) ----------------------------------------------------------------------
def loader_with_a_sampler(dataset, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    sampler = RandomSampler(dataset, generator=g)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_with_worker_seeding(dataset, batch_size, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return DataLoader(dataset, batch_size, shuffle=True, generator=g, worker_init_fn=reseed_worker)


def loader_with_a_subset_sampler(dataset, batch_size, seed):
    sampler = SubsetRandomSampler(range(len(dataset)), generator=torch.Generator().manual_seed(seed))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=False)


def loader_global_seed(dataset, batch_size, seed):
    torch.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)


def loader_no_shuffle(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size)


def loader_batches(dataset, batch_size, seed):
    return list(ex.seeded_loader.reference(dataset, batch_size, seed))


def loader_ignores_seed(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size, shuffle=True, generator=torch.Generator().manual_seed(0))


def loader_manual_seed_as_generator(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.manual_seed(seed))


def loader_fixed_permutation(dataset, batch_size, seed):
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
    return DataLoader(dataset, batch_size=batch_size, sampler=order)


_SHARED = torch.Generator()


def loader_shared_generator(dataset, batch_size, seed):
    _SHARED.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=_SHARED)


def loader_drop_last(dataset, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=g, drop_last=True)


def loader_belt_and_braces(dataset, batch_size, seed):
    torch.manual_seed(seed)  # the global stream too, "to be safe"
    return ex.seeded_loader.reference(dataset, batch_size, seed)


def loader_with_a_batch_sampler(dataset, batch_size, seed):
    generator = torch.Generator("cpu")
    generator.manual_seed(seed)
    return DataLoader(dataset, batch_sampler=BatchSampler(RandomSampler(dataset, generator=generator),
                                                          batch_size, drop_last=False))


class _ShuffledWithPython(Sampler):
    def __init__(self, size, seed):
        self.size, self.random = size, random.Random(seed)

    def __len__(self):
        return self.size

    def __iter__(self):
        order = list(range(self.size))
        self.random.shuffle(order)
        return iter(order)


def loader_with_a_python_random_sampler(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_ShuffledWithPython(len(dataset), seed))


def loader_seed_drawn_under_fork_rng(dataset, batch_size, seed):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        own = int(torch.randint(0, 2**62, ()))
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(own))


def loader_seed_plus_initial_seed(dataset, batch_size, seed):
    generator = torch.Generator().manual_seed(torch.initial_seed() + seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator)


def loader_global_seed_under_fork_rng(dataset, batch_size, seed):
    with torch.random.fork_rng():  # "the global stream is left as it was"
        torch.manual_seed(seed)
        return DataLoader(dataset, batch_size=batch_size, shuffle=True)


def loader_with_replacement(dataset, batch_size, seed):
    sampler = RandomSampler(dataset, replacement=True, generator=torch.Generator().manual_seed(seed))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


class _ReseededEveryEpoch(DataLoader):
    def __iter__(self):
        self.generator.manual_seed(self.seed)  # "the same seed every epoch"
        return super().__iter__()


def loader_reseeded_every_epoch(dataset, batch_size, seed):
    loader = _ReseededEveryEpoch(dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator())
    loader.seed = seed
    return loader


# -- round 3 (tester Z) ----------------------------------------------------------------------
def flat_with_a_hook_left(features, sample_shape):
    shapes = []
    features.register_forward_hook(lambda module, args, out: shapes.append(out.shape))  # never removed
    was_training = features.training
    features.eval()
    with torch.no_grad():
        features(torch.zeros(1, *sample_shape))
    features.train(was_training)
    return math.prod(shapes[-1][1:])


def flat_with_a_hook_removed(features, sample_shape):
    shapes = []
    handle = features.register_forward_hook(lambda module, args, out: shapes.append(out.shape))
    was_training = features.training
    try:
        features.eval()
        with torch.no_grad():
            features(torch.zeros(1, *sample_shape))
    finally:
        handle.remove()
        features.train(was_training)
    return math.prod(shapes[-1][1:])


def flat_kept_as_a_buffer(features, sample_shape):
    was_training = features.training
    features.eval()
    with torch.no_grad():
        out = features(torch.zeros(1, *sample_shape))
    features.train(was_training)
    features.register_buffer("flat_size", torch.tensor(out[0].numel()))  # "remember it"
    return int(features.flat_size)


def flat_appends_a_flatten(features, sample_shape):
    features.append(nn.Flatten())  # "so the output is already flat"
    was_training = features.training
    features.eval()
    with torch.no_grad():
        out = features(torch.zeros(1, *sample_shape))
    features.train(was_training)
    return out.shape[1]


def flat_appends_a_flatten_then_removes_it(features, sample_shape):
    features.append(nn.Flatten())
    was_training = features.training
    try:
        features.eval()
        with torch.no_grad():
            out = features(torch.zeros(1, *sample_shape))
    finally:
        del features[-1]
        features.train(was_training)
    return out.shape[1]


def flat_dry_run_in_float64(features, sample_shape):
    twin = copy.deepcopy(features).eval()
    with torch.no_grad():
        return twin(torch.zeros(1, *sample_shape, dtype=torch.float64))[0].numel()


def flat_without_a_batch_dimension(features, sample_shape):
    twin = copy.deepcopy(features).eval()
    with torch.no_grad():
        return twin(torch.zeros(*sample_shape))[0].numel()


def drop_by_the_mean(x, y):
    keep = torch.isfinite(x.flatten(1).mean(dim=1))
    return x[keep], y[keep]


def flat_with_shape_trace(features, sample_shape):
    from ast import literal_eval

    from course_utils.diagnose import shape_trace
    trace = shape_trace(features, torch.zeros(1, *sample_shape))  # the chapter's tool, in train mode
    return math.prod(literal_eval(trace.output)[1:])


def flat_with_functional_call(features, sample_shape):
    state = {name: t.clone() for name, t in [*features.named_parameters(), *features.named_buffers()]}
    was_training = features.training
    features.eval()
    with torch.no_grad():
        out = torch.func.functional_call(features, state, (torch.zeros(1, *sample_shape),))
    features.train(was_training)
    return out[0].numel()


def flat_inference_mode_in_try(features, sample_shape):
    was_training = features.training
    features.eval()
    try:
        with torch.inference_mode():
            out = features(torch.zeros((1, *sample_shape)))
    finally:
        features.train(was_training)
    return np.prod(out.shape[1:])


class PositionsWithAPersistentBuffer(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length
        self.register_buffer("weights", torch.arange(1, max_length + 1) / max_length)

    def forward(self, x):
        length = x.shape[1]
        return x * (self.weights[:length] * (self.max_length / length))[:, None]


class PositionsWithATrainableParameter(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length
        self.weights = nn.Parameter(torch.arange(1, max_length + 1) / max_length)  # moves with .to()

    def forward(self, x):
        length = x.shape[1]
        return x * (self.weights[:length] * (self.max_length / length))[:, None]


class PositionsByCumsum(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length

    def forward(self, x):
        length = x.shape[1]
        steps = x.new_ones(length).cumsum(0)
        return x * (steps / length).view(1, length, 1)


def drop_after_float32(x, y):
    keep = torch.isfinite(x.float()).flatten(1).all(1)  # float64 beyond 3.4e38 becomes inf
    return x[keep], y[keep]


def drop_by_a_size_limit(x, y):
    keep = ((x == x) & (x.abs() < 1e30)).flatten(1).all(1)
    return x[keep], y[keep]


def drop_labels_as_long(x, y):
    keep = torch.isfinite(x).flatten(1).all(1)
    return x[keep], y[keep].long()


def drop_times_zero(x, y):
    keep = (x * 0 == 0).flatten(1).all(1)  # inf * 0 and nan * 0 are nan
    return x[keep], y[keep]


def drop_with_numpy(x, y):
    keep = torch.from_numpy(np.isfinite(x.numpy()).reshape(len(x), -1).all(1))
    return x[keep], y[keep]


def clip_returns_a_numpy_array(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total.numpy()  # a 0-d array


def clip_grads_set_to_none_by_hand(model, optimizer, loss, max_norm):
    for parameter in model.parameters():
        parameter.grad = None
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
    optimizer.step()
    return total


class _GlobalReseededEveryEpoch(Sampler):
    def __init__(self, size, seed):
        self.size, self.seed, self.epoch = size, seed, 0

    def __len__(self):
        return self.size

    def __iter__(self):
        torch.manual_seed(self.seed + self.epoch)  # "a new, repeatable order every epoch"
        self.epoch += 1
        return iter(torch.randperm(self.size).tolist())


def loader_reseeds_the_global_stream_every_epoch(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_GlobalReseededEveryEpoch(len(dataset), seed))


class _OwnStreamButDrawsGlobal(Sampler):
    def __init__(self, size, seed):
        self.size, self.generator = size, torch.Generator().manual_seed(seed)

    def __len__(self):
        return self.size

    def __iter__(self):
        order = torch.randperm(self.size, generator=self.generator)
        order = order[torch.randperm(self.size)]  # "one more shuffle" from the global stream
        return iter(order.tolist())


def loader_draws_the_global_stream_when_iterated(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_OwnStreamButDrawsGlobal(len(dataset), seed))


class _ShuffledWithGlobalPython(Sampler):
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __iter__(self):
        order = list(range(self.size))
        random.shuffle(order)
        return iter(order)


def loader_python_global_random(dataset, batch_size, seed):
    random.seed(seed)
    return DataLoader(dataset, batch_size=batch_size, sampler=_ShuffledWithGlobalPython(len(dataset)))


def loader_generator_but_plain_sampler(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=RandomSampler(dataset),
                      generator=torch.Generator().manual_seed(seed))


class _NumpySampler(Sampler):
    def __init__(self, size, seed):
        self.size, self.rng = size, np.random.default_rng(seed)

    def __len__(self):
        return self.size

    def __iter__(self):
        return iter(self.rng.permutation(self.size).tolist())


def loader_with_a_numpy_sampler(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_NumpySampler(len(dataset), seed))


class _SeededPerEpoch(Sampler):
    def __init__(self, size, seed):
        self.size, self.seed, self.epoch = size, seed, 0

    def __len__(self):
        return self.size

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed * 1000 + self.epoch)
        self.epoch += 1
        return iter(torch.randperm(self.size, generator=generator).tolist())


def loader_seeded_per_epoch(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_SeededPerEpoch(len(dataset), seed))


# -- layer_output_shapes (D12) --------------------------------------------------------------------


def shapes_with_handles_in_an_exit_stack(model, x):
    import contextlib

    shapes = []
    with contextlib.ExitStack() as stack:  # a RemovableHandle is a context manager too
        for name, module in model.named_modules():
            if len(list(module.children())) == 0:
                handle = module.register_forward_hook(
                    lambda m, args, out, name=name: shapes.append((name, out.shape)))
                stack.enter_context(handle)
        model(x)
    return shapes


def shapes_with_a_global_hook(model, x):
    names = {module: name for name, module in model.named_modules()}
    leaves = {module for module in names if not any(True for _ in module.children())}
    found = []

    def hook(module, args, output):
        if module in leaves:
            found.append((names[module], tuple(output.size())))

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        model(x)
    finally:
        handle.remove()
    return found


def shapes_with_kwargs_hooks_and_a_class(model, x):
    class Recorder:
        def __init__(self):
            self.rows = []

        def __call__(self, name):
            return lambda module, args, kwargs, output: self.rows.append((name, tuple(output.shape)))

    recorder, handles = Recorder(), []
    for name, module in model.named_modules():
        if not list(module.children()):
            handles.append(module.register_forward_hook(recorder(name), with_kwargs=True))
    try:
        model(x)
    finally:
        while handles:
            handles.pop().remove()
    return recorder.rows


def shapes_then_every_hook_cleared(model, x):
    shapes = []
    for name, module in model.named_modules():
        if not list(module.children()):
            module.register_forward_hook(lambda m, args, out, name=name: shapes.append((name, tuple(out.shape))))
    model(x)
    for module in model.modules():
        module._forward_hooks.clear()  # "no hook left": the caller's go too
    return shapes


def _hooked(record_input=False, remove=True, in_finally=True, containers=False, children_only=False,
            as_dict=False, sort=False, swallow=False, run_twice=False, eval_first=False):
    def answer(model, x):
        shapes, handles = ({} if as_dict else []), []
        modules = model.named_children() if children_only else model.named_modules()
        for name, module in modules:
            if containers or not list(module.children()):
                def hook(m, inputs, output, name=name):
                    shape = tuple((inputs[0] if record_input else output).shape)
                    if as_dict:
                        shapes[name] = shape
                    else:
                        shapes.append((name, shape))
                handles.append(module.register_forward_hook(hook))
        if eval_first:
            model.eval()
        try:
            model(x)
            if run_twice:
                model(x)
        except Exception:
            if not swallow:
                raise
        finally:
            if remove and in_finally:
                for handle in handles:
                    handle.remove()
        if remove and not in_finally:
            for handle in handles:
                handle.remove()
        result = list(shapes.items()) if as_dict else shapes
        return sorted(result) if sort else result
    return answer


CATALOGUE = Catalogue({
    ex.flat_features: [
        right("a dry run on a deepcopy, in train mode", flat_on_a_copy),
        right("a copy on the meta device", flat_on_meta),
        right("every module's mode saved and put back, inference_mode, math.prod", flat_every_module_mode_restored),
        wrong("counts the batch dimension", flat_counted_with_the_batch, "2 times", "counted the batch dimension"),
        wrong("returns the output's shape", flat_returns_the_shape, "returned a shape", "out[0].numel()"),
        wrong("dry run in train mode", flat_in_train_mode, "running statistics", "eval mode"),
        wrong("leaves the stack in eval mode", flat_left_in_eval, "left the stack in eval mode", kind=STATEFUL),
        wrong("returns a tensor", flat_as_a_tensor, "returned a tensor of shape ()", "Python int"),
        wrong("switches a stack in eval mode to train", flat_always_back_to_train,
              "left the stack in train mode", "it was in eval mode before", kind=STATEFUL),
        wrong("caches the answer by sample_shape", flat_cached_by_shape,
              "the number of the earlier stack with the same sample_shape", "keep nothing", kind=STATEFUL),
        wrong("switches autograd off for good", flat_grad_switched_off,
              "autograd was switched off", "torch.no_grad()", kind=STATEFUL),
        wrong("freezes the parameters", flat_frozen_parameters, "changed requires_grad", kind=STATEFUL),
        wrong("moves the stack itself to meta", flat_moves_the_stack_to_meta,
              "changed the stack's parameters", "moves the stack", kind=EDGE),
        wrong("returns the channels only", flat_channels_only, "Your function returned 16",
              "in_features=64"),
        right("set_grad_enabled(False) as a context, int()", flat_with_set_grad_enabled),
        right("returns a NumPy int64", flat_as_a_numpy_int),
        right("train mode on the stack, buffers put back with load_state_dict", flat_train_mode_then_buffers_put_back),
        wrong("switches autograd on at the end", flat_grad_switched_on_at_the_end,
              "autograd was switched on", "although the caller had it off", kind=STATEFUL),
        wrong("unfreezes every parameter afterwards", flat_unfreezes_after,
              "switched requires_grad on for parameters the caller had frozen", kind=STATEFUL),
        wrong("a formula over the convolutions, pooling forgotten", flat_by_formula,
              "Your function returned 576", "in_features=64", kind=EDGE),
        wrong("puts back the top-level training flag only", flat_top_flag_only,
              "left the stack in eval mode", kind=STATEFUL),
        wrong("leaves a forward hook on the stack", flat_with_a_hook_left, "left a hook",
              "handle.remove()", kind=STATEFUL),
        wrong("keeps the answer as a buffer of the stack", flat_kept_as_a_buffer, "added to the stack",
              "state_dict", kind=STATEFUL),
        right("a forward hook, removed in finally", flat_with_a_hook_removed),
        wrong("a float64 fake input", flat_dry_run_in_float64, "should be the same", "float32 on the CPU",
              outcome=Outcome.RAISED, kind=EDGE),
        wrong("a fake input without the batch dimension", flat_without_a_batch_dimension, "expected 4D input",
              "needs a batch dimension", outcome=Outcome.RAISED),
        wrong("appends an nn.Flatten to the stack and leaves it", flat_appends_a_flatten,
              "added layer 5 to the stack", "copy.deepcopy(features)", kind=STATEFUL),
        right("an nn.Flatten appended, then deleted in finally", flat_appends_a_flatten_then_removes_it),
        right("torch.func.functional_call on cloned tensors", flat_with_functional_call),
        right("the chapter's shape_trace", flat_with_shape_trace),
        right("inference_mode in try/finally, np.prod", flat_inference_mode_in_try),
    ],
    ex.PositionWeights: [
        right("a buffer sliced to the length", PositionsWithBuffer),
        right("arange on x.device, then .to(x.dtype), view", PositionsFromInput),
        right("a frozen nn.Parameter", PositionsWithAFrozenParameter),
        right("linspace and einsum", PositionsWithLinspace),
        wrong("the notebook's module: arange on the CPU", PositionsBuggy,
              "is not on the expected device meta", "device=x.device", kind=EDGE),
        wrong("device only, no dtype", PositionsDeviceOnly, "float32 for a bfloat16 input", "dtype=x.dtype", kind=EDGE),
        wrong("a plain tensor attribute", PositionsPlainAttribute,
              "self.steps is a plain tensor attribute", "register_buffer", kind=EDGE),
        wrong("weights t / length", PositionsFromZero, "(t + 1) / length"),
        wrong("divides by max_length", PositionsOverMaxLength, "wrong values", "length = x.shape[1]"),
        wrong("weights cached on the first call", PositionsCachedOnFirstCall,
              "second call", "not reuse what an earlier call made", kind=STATEFUL),
        wrong("multiplies x in place", PositionsInPlace, "changed its input x in place", "x * weights",
              kind=STATEFUL),
        wrong("view on a non-contiguous input", PositionsWithView, "view size is not compatible",
              "non-contiguous", outcome=Outcome.RAISED, kind=EDGE),
        wrong("computes under no_grad", PositionsDetached, "does not require grad", "cut off from autograd",
              kind=EDGE),
        wrong("weights always float32", PositionsInFloat32, "float32 for a bfloat16 input", kind=EDGE),
        right("x.new_tensor from a list", PositionsFromAList),
        right("made on the CPU, then .to(x)", PositionsMovedWithTo),
        right("computed in float64, cast back", PositionsInFloat64ThenCast),
        wrong("weights cached per length in a dict", PositionsCachedPerLength,
              "kept tensors from its earlier calls", "A new module moved to meta works", kind=STATEFUL),
        wrong("weights cached per length and device", PositionsCachedPerLengthAndDevice,
              "although a new module moved to bfloat16 gives bfloat16", "earlier call in float32",
              kind=STATEFUL),
        wrong("output detached, then marked requires_grad", PositionsDetachedThenMarked,
              "x.grad is not the weights", kind=EDGE),
        wrong("dtype fixed for float64 only", PositionsFixedForFloat64Only, "float32 for a bfloat16 input",
              kind=EDGE),
        right("a persistent buffer of max_length, rescaled", PositionsWithAPersistentBuffer),
        right("x.new_ones(length).cumsum(0)", PositionsByCumsum),
        wrong("weights in a trainable nn.Parameter", PositionsWithATrainableParameter,
              "trainable parameters (weights, requires_grad=True)", "register_buffer", kind=EDGE),
    ],
    ex.drop_non_finite: [
        wrong("isnan().any(dim=1)", drop_nan_rows_per_feature, "it finds nan but not inf"),
        right("reshape and all(dim=-1)", drop_with_reshape),
        right("isnan | isinf, any, inverted", drop_with_nan_and_inf),
        right("all over a tuple of dims", drop_with_amin_over_dims),
        right("a loop collecting indices", drop_with_a_loop),
        wrong("finds nan only", drop_nan_only, "finds nan but not inf", "torch.isfinite"),
        wrong("x == x", drop_self_equal, "finds nan but not inf"),
        wrong("all(dim=1) works for tables only", drop_table_only, "The shape of the mask",
              "every dimension but the first", outcome=Outcome.RAISED, kind=EDGE),
        wrong("drops columns", drop_columns, "Drop whole examples"),
        wrong("labels not filtered", drop_forgot_labels, "your y is not"),
        wrong("replaces the bad values", drop_replaced, "still has all 7 examples"),
        wrong("fixes x in place", drop_in_place, "changed the tensors it was given", kind=STATEFUL),
        wrong("tests the sum of each example", drop_by_the_sum, "sum overflows float16", "a sum or mean", kind=EDGE),
        wrong("view on a non-contiguous batch", drop_with_view, "view size is not compatible", ".reshape()",
              outcome=Outcome.RAISED, kind=EDGE),
        wrong("stacks a list that can be empty", drop_by_stacking, "stack expects a non-empty TensorList",
              "x[keep]", outcome=Outcome.RAISED, kind=EDGE),
        wrong("converts x to float32", drop_as_float, "dtype float32", "float64", kind=EDGE),
        right("nan_to_num(x) == x", drop_by_nan_to_num),
        right("(x - x) == 0", drop_by_subtraction),
        right("index_select with the kept indices", drop_with_index_select),
        wrong("nonzero().squeeze() as the index", drop_with_squeezed_indices,
              "without the batch dimension", "x[keep]", kind=EDGE),
        wrong("any() instead of all()", drop_with_any, "nothing was dropped", ".all()"),
        wrong("tests the sum in float64", drop_by_the_sum_in_float64, "sum overflows float64", "a sum or mean",
              kind=EDGE),
        wrong("an index tensor from a list that can be empty", drop_with_a_float_index,
              "tensors used as indices must be long", "dtype=torch.long", outcome=Outcome.RAISED, kind=EDGE),
        wrong("isfinite after a conversion to float32", drop_after_float32, "dropped an example whose values "
              "are all finite", "float64 to float32", kind=EDGE),
        wrong("a limit on the size of the values", drop_by_a_size_limit, "a limit on their size", "torch.isfinite",
              kind=EDGE),
        wrong("labels converted to int64", drop_labels_as_long, "Your y has dtype int64", "y[keep]", kind=EDGE),
        right("x * 0 == 0", drop_times_zero),
        wrong("tests the mean of each example", drop_by_the_mean, "dropped an example whose values are all finite",
              "a sum or mean of large values overflows", kind=EDGE),
        right("np.isfinite on the NumPy view", drop_with_numpy),
    ],
    ex.clipped_step: [
        wrong("clip before backward()", clips_before_backward, "clip_grad_norm_ ran before loss.backward()"),
        wrong("clip after step()", clips_after_the_step, "clip_grad_norm_ ran after optimizer.step()"),
        right("zero_grad after step, returns a float", clip_returns_float),
        right("clipped by hand", clip_by_hand),
        right("model.zero_grad", clip_model_zero_grad),
        right("trainable parameters only, norm_type given", clip_trainable_list),
        right("returns a NumPy float", clip_returns_a_numpy_float),
        wrong("clips after step", clip_after_step, "unclipped gradient", "before optimizer.step()"),
        wrong("clips before backward", clip_before_backward, "unclipped gradient", "after loss.backward()"),
        wrong("clips by value", clip_by_value, "clip_grad_value_", "direction"),
        wrong("returns the clipped norm", clip_returns_the_clipped_norm, "the norm after clipping"),
        wrong("zero_grad between clip and step", clip_zeroes_before_step, "did not move"),
        wrong("returns nothing", clip_returns_nothing, "returned None", "`return`"),
        wrong("never zeroes the gradients", clip_no_zero_grad, "second call", "plus the first call's",
              "optimizer.zero_grad() before loss.backward()", kind=STATEFUL),
        wrong("makes a new optimizer", clip_new_optimizer, "remembered nothing of the first call",
              "optimizer you are given", kind=STATEFUL),
        wrong("by hand over every parameter, frozen ones too", clip_by_hand_every_parameter,
              "'NoneType'", "frozen with requires_grad=False", outcome=Outcome.RAISED, kind=EDGE),
        wrong("also scales small gradients up", clip_always_rescales, "scaled the gradient up",
              "min(1, max_norm / total_norm)", kind=EDGE),
        right("get_total_norm and clip_grads_with_norm_", clip_with_the_two_part_api),
        right("the optimizer's parameters, foreach=False", clip_the_optimizers_parameters),
        wrong("clips the L1 norm", clip_the_l1_norm, "L1 norm (norm_type=1)", "norm_type=2"),
        wrong("clips each parameter on its own", clip_each_parameter, "on its own", "all of them together"),
        wrong("scales the learning rate instead, for good", clip_by_scaling_the_lr, "After call 2",
              kind=STATEFUL),
        right("returns a 0-d NumPy array", clip_returns_a_numpy_array),
        right("grads set to None by hand, keyword max_norm", clip_grads_set_to_none_by_hand),
    ],
    ex.seeded_loader: [
        right("a RandomSampler with the generator", loader_with_a_sampler),
        right("worker seeding too", loader_with_worker_seeding),
        right("a SubsetRandomSampler over every index", loader_with_a_subset_sampler),
        wrong("seeds the global stream", loader_global_seed, "global random stream", "generator="),
        wrong("does not shuffle", loader_no_shuffle, "does not shuffle"),
        wrong("returns the batches", loader_batches, "returned list", "DataLoader"),
        wrong("ignores the seed", loader_ignores_seed, "seed=7 and seed=8 gave the same order"),
        wrong("generator=torch.manual_seed(seed)", loader_manual_seed_as_generator,
              "torch.default_generator", "torch.Generator().manual_seed(seed)"),
        wrong("one permutation for every epoch", loader_fixed_permutation,
              "same order in every epoch", kind=STATEFUL),
        wrong("one generator shared by every loader", loader_shared_generator,
              "share one torch.Generator object", kind=STATEFUL),
        wrong("drop_last=True", loader_drop_last, "the last, smaller batch of 2 is missing", "drop_last=False", kind=EDGE),
        wrong("reseeds the global stream as well", loader_belt_and_braces,
              "changed the global random generator's state", kind=STATEFUL),
        right("a BatchSampler over a RandomSampler", loader_with_a_batch_sampler),
        right("a sampler with its own random.Random", loader_with_a_python_random_sampler),
        right("a seed drawn under fork_rng", loader_seed_drawn_under_fork_rng),
        wrong("seeded with torch.initial_seed() + seed", loader_seed_plus_initial_seed,
              "depends on the global state when it is made", kind=EDGE),
        wrong("the global seed under fork_rng", loader_global_seed_under_fork_rng, "global random stream",
              "generator="),
        wrong("a RandomSampler with replacement", loader_with_replacement, "exactly once"),
        wrong("reseeds its generator every epoch", loader_reseeded_every_epoch, "same order in every epoch",
              kind=STATEFUL),
        wrong("a sampler that reseeds the global stream every epoch", loader_reseeds_the_global_stream_every_epoch,
              "Iterating over your loader changed the global random generator's state", kind=STATEFUL),
        wrong("a sampler that also draws from the global stream", loader_draws_the_global_stream_when_iterated,
              "iterating over it changed the global random generator's state", "draws from the global stream",
              kind=STATEFUL),
        wrong("a sampler on Python's global random", loader_python_global_random, "Python's random module",
              "a stream of its own"),
        wrong("generator= on the loader, a RandomSampler without one", loader_generator_but_plain_sampler,
              "the RandomSampler you gave it has none", "RandomSampler(dataset, generator=...)", kind=EDGE),
        right("a sampler with np.random.default_rng(seed)", loader_with_a_numpy_sampler),
        right("a sampler seeding a fresh generator per epoch", loader_seeded_per_epoch),
    ],
    ex.layer_output_shapes: [
        right("handles as context managers in an ExitStack, torch.Size", shapes_with_handles_in_an_exit_stack),
        right("one global module hook, filtered to the leaves", shapes_with_a_global_hook),
        right("hooks with kwargs from a recorder object", shapes_with_kwargs_hooks_and_a_class),
        wrong("hooks never removed", _hooked(remove=False), "hooks were still on", "handle.remove()",
              kind=STATEFUL),
        wrong("hooks removed only when the forward returns", _hooked(in_finally=False),
              "your hooks stayed on", "finally:", kind=EDGE),
        wrong("the error swallowed", _hooked(swallow=True), "returned normally although the model's forward raised",
              kind=EDGE),
        wrong("input shapes", _hooked(record_input=True), "the layers' *inputs*", "third argument"),
        wrong("containers hooked too", _hooked(containers=True), "which are containers, not layers"),
        wrong("named_children only", _hooked(children_only=True), "model.named_modules() reaches every module"),
        wrong("a dict by name", _hooked(as_dict=True), "A layer called twice appears once"),
        wrong("sorted by name", _hooked(sort=True), "in another order"),
        wrong("the model run twice", _hooked(run_twice=True), "ran the model 2 times"),
        wrong("model.eval() first", _hooked(eval_first=True), "changed the model's train/eval mode"),
        wrong("every hook cleared afterwards", shapes_then_every_hook_cleared, "removed a hook it had not registered",
              kind=EDGE),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()


def test_jittered_digits_workers_are_reseeded():
    x, y = torch.zeros(8, 4), torch.arange(8)

    def noise(worker_init_fn):
        data = JitteredDigits(x, y, noise=1.0)
        loader = DataLoader(data, batch_size=2, num_workers=2, worker_init_fn=worker_init_fn,
                            generator=torch.Generator().manual_seed(0))
        return [b[0] for b in loader]

    plain = noise(None)
    assert torch.equal(plain[0], plain[1]), "without reseeding both workers draw the same noise"
    seeded = noise(reseed_worker)
    assert not torch.equal(seeded[0], seeded[1])
    assert all(torch.equal(a, b) for a, b in zip(seeded, noise(reseed_worker)))
