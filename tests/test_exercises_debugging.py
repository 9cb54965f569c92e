"""Chapter 06's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them."""

import copy

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.data import JitteredDigits, reseed_worker
from course_utils.exercises import debugging as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import (
    assert_fails,
    assert_passes,
    assert_references_pass_and_leave_the_session_alone,
)

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
def test_flat_features_alternatives_pass():
    def on_a_copy(features, sample_shape):
        dry = copy.deepcopy(features)
        out = dry(torch.zeros(2, *sample_shape))  # train mode is fine on a copy
        return out.flatten(1).shape[1]

    def on_meta(features, sample_shape):
        dry = copy.deepcopy(features).to("meta").eval()
        return int(np.prod(dry(torch.empty(1, *sample_shape, device="meta")).shape[1:]))

    assert_passes(ex.flat_features, on_a_copy)
    assert_passes(ex.flat_features, on_meta)


def test_flat_features_classic_mistakes():
    def with_batch(features, sample_shape):
        copy_ = copy.deepcopy(features).eval()
        return copy_(torch.zeros(2, *sample_shape)).numel()

    assert_fails(ex.flat_features, with_batch, "2 times", "counted the batch dimension")

    def shape(features, sample_shape):
        return copy.deepcopy(features).eval()(torch.zeros(1, *sample_shape)).shape[1:]

    assert_fails(ex.flat_features, shape, "returned a shape", "out[0].numel()")

    def train_mode(features, sample_shape):
        with torch.no_grad():
            return features(torch.zeros(2, *sample_shape))[0].numel()

    assert_fails(ex.flat_features, train_mode, "running statistics", "eval mode")

    def left_in_eval(features, sample_shape):
        features.eval()
        with torch.no_grad():
            return features(torch.zeros(1, *sample_shape))[0].numel()

    assert_fails(ex.flat_features, left_in_eval, "left the stack in eval mode")

    def as_tensor(features, sample_shape):
        return torch.tensor(64.0)

    assert_fails(ex.flat_features, as_tensor, "return one Python int")


# -- PositionWeights (D3) --------------------------------------------------------------------
def test_position_weights_alternatives_pass():
    class WithBuffer(nn.Module):
        def __init__(self, max_length):
            super().__init__()
            self.register_buffer("steps", torch.arange(1, max_length + 1), persistent=False)

        def forward(self, x):
            length = x.shape[1]
            weights = (self.steps[:length] / length).to(x.dtype)
            return x * weights[:, None]

    class FromInput(nn.Module):
        def __init__(self, max_length):
            super().__init__()

        def forward(self, x):
            length = x.shape[1]
            steps = torch.arange(1, length + 1, device=x.device).to(x.dtype) / length
            return x * steps.view(1, length, 1)

    assert_passes(ex.PositionWeights, WithBuffer)
    assert_passes(ex.PositionWeights, FromInput)


def test_position_weights_classic_mistakes():
    class Buggy(nn.Module):  # the notebook's module
        def __init__(self, max_length):
            super().__init__()

        def forward(self, x):
            length = x.shape[1]
            return x * (torch.arange(1, length + 1) / length)[:, None]

    assert_fails(ex.PositionWeights, Buggy, "is not on the expected device meta", "device=x.device")

    class DeviceOnly(nn.Module):
        def __init__(self, max_length):
            super().__init__()

        def forward(self, x):
            length = x.shape[1]
            return x * (torch.arange(1, length + 1, device=x.device) / length)[:, None]

    assert_fails(ex.PositionWeights, DeviceOnly, "float32 for a bfloat16 input", "dtype=x.dtype")

    class PlainAttribute(nn.Module):
        def __init__(self, max_length):
            super().__init__()
            self.steps = torch.arange(1, max_length + 1)

        def forward(self, x):
            length = x.shape[1]
            return x * (self.steps[:length] / length).to(x.dtype)[:, None]

    assert_fails(ex.PositionWeights, PlainAttribute, "self.steps is a plain tensor attribute", "register_buffer")

    class WrongWeights(nn.Module):
        def __init__(self, max_length):
            super().__init__()

        def forward(self, x):
            length = x.shape[1]
            return x * (torch.arange(length, device=x.device, dtype=x.dtype) / length)[:, None]

    assert_fails(ex.PositionWeights, WrongWeights, "(t + 1) / length")


# -- drop_non_finite (D5) --------------------------------------------------------------------
def test_drop_non_finite_alternatives_pass():
    def with_reshape(x, y):
        keep = torch.isfinite(x.reshape(len(x), -1)).all(dim=-1)
        return x[keep], y[keep]

    def with_nan_and_inf(x, y):
        bad = (torch.isnan(x) | torch.isinf(x)).flatten(1).any(1)
        return x[~bad], y[~bad]

    assert_passes(ex.drop_non_finite, with_reshape)
    assert_passes(ex.drop_non_finite, with_nan_and_inf)


def test_drop_non_finite_classic_mistakes():
    def nan_only(x, y):
        keep = ~torch.isnan(x).flatten(1).any(1)
        return x[keep], y[keep]

    assert_fails(ex.drop_non_finite, nan_only, "finds nan but not inf", "torch.isfinite")

    def self_equal(x, y):
        keep = (x == x).flatten(1).all(1)
        return x[keep], y[keep]

    assert_fails(ex.drop_non_finite, self_equal, "finds nan but not inf")

    def table_only(x, y):
        keep = torch.isfinite(x).all(dim=1)
        return x[keep], y[keep]

    assert_fails(ex.drop_non_finite, table_only, "every dimension but the first", outcome=Outcome.RAISED)

    def columns(x, y):
        keep = torch.isfinite(x).all(dim=0)
        return x[:, keep], y

    assert_fails(ex.drop_non_finite, columns, "Drop whole examples")

    def forgot_labels(x, y):
        keep = torch.isfinite(x).flatten(1).all(1)
        return x[keep], y[: int(keep.sum())]

    assert_fails(ex.drop_non_finite, forgot_labels, "your y is not")

    def replaced(x, y):
        return torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), y

    assert_fails(ex.drop_non_finite, replaced, "still has all 7 examples")

    def in_place(x, y):
        x.nan_to_num_(0.0, 0.0, 0.0)
        return ex.drop_non_finite.reference(x, y)

    assert_fails(ex.drop_non_finite, in_place, "changed the tensors it was given")


# -- clipped_step (D6) -----------------------------------------------------------------------
def test_clipped_step_alternatives_pass():
    def returns_float(model, optimizer, loss, max_norm):
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
        optimizer.step()
        optimizer.zero_grad()
        return norm.item()

    def by_hand(model, optimizer, loss, max_norm):
        optimizer.zero_grad()
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        total = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
        scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(scale)
        optimizer.step()
        return total

    assert_passes(ex.clipped_step, returns_float)
    assert_passes(ex.clipped_step, by_hand)


def test_clipped_step_classic_mistakes():
    def after_step(model, optimizer, loss, max_norm):
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return nn.utils.clip_grad_norm_(model.parameters(), max_norm)

    assert_fails(ex.clipped_step, after_step, "unclipped gradient", "before optimizer.step()")

    def before_backward(model, optimizer, loss, max_norm):
        optimizer.zero_grad()
        total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        loss.backward()
        optimizer.step()
        return total

    assert_fails(ex.clipped_step, before_backward, "unclipped gradient", "after loss.backward()")

    def by_value(model, optimizer, loss, max_norm):
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), max_norm)
        optimizer.step()
        return max_norm

    assert_fails(ex.clipped_step, by_value, "clip_grad_value_", "direction")

    def clipped_norm(model, optimizer, loss, max_norm):
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        return nn.utils.get_total_norm([p.grad for p in model.parameters()])

    assert_fails(ex.clipped_step, clipped_norm, "the norm after clipping")

    def zeroes_before_step(model, optimizer, loss, max_norm):
        loss.backward()
        total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.zero_grad()
        optimizer.step()
        return total

    assert_fails(ex.clipped_step, zeroes_before_step, "did not move")

    def returns_nothing(model, optimizer, loss, max_norm):
        ex.clipped_step.reference(model, optimizer, loss, max_norm)

    assert_fails(ex.clipped_step, returns_nothing, "returned None", "`return`")


def test_clipped_step_is_called_twice_with_a_stateful_optimizer():
    def model_zero_grad(model, optimizer, loss, max_norm):
        model.zero_grad(set_to_none=False)
        loss.backward()
        total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        return total

    assert_passes(ex.clipped_step, model_zero_grad)

    def no_zero_grad(model, optimizer, loss, max_norm):
        loss.backward()
        total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        return total

    assert_fails(ex.clipped_step, no_zero_grad, "second call", "plus the first call's",
                 "optimizer.zero_grad() before loss.backward()")


# -- seeded_loader (D8) ----------------------------------------------------------------------
def test_seeded_loader_alternatives_pass():
    def keyword_generator(dataset, batch_size, seed):
        g = torch.Generator().manual_seed(seed)
        sampler = torch.utils.data.RandomSampler(dataset, generator=g)
        return DataLoader(dataset, batch_size=batch_size, sampler=sampler)

    def with_worker_seeding(dataset, batch_size, seed):
        g = torch.Generator()
        g.manual_seed(seed)
        return DataLoader(dataset, batch_size, shuffle=True, generator=g, worker_init_fn=reseed_worker)

    assert_passes(ex.seeded_loader, keyword_generator)
    assert_passes(ex.seeded_loader, with_worker_seeding)


def test_seeded_loader_classic_mistakes():
    def global_seed(dataset, batch_size, seed):
        torch.manual_seed(seed)
        return DataLoader(dataset, batch_size=batch_size, shuffle=True)

    assert_fails(ex.seeded_loader, global_seed, "global random stream", "generator=")

    def no_shuffle(dataset, batch_size, seed):
        return DataLoader(dataset, batch_size=batch_size)

    assert_fails(ex.seeded_loader, no_shuffle, "does not shuffle")

    def batches(dataset, batch_size, seed):
        return list(ex.seeded_loader.reference(dataset, batch_size, seed))

    assert_fails(ex.seeded_loader, batches, "returned list", "DataLoader")

    def ignores_seed(dataset, batch_size, seed):
        return DataLoader(dataset, batch_size, shuffle=True, generator=torch.Generator().manual_seed(0))

    assert_fails(ex.seeded_loader, ignores_seed, "seed=7 and seed=8 gave the same order")


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
