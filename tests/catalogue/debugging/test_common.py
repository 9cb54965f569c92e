"""Chapter 06's exercises together: every reference passes, a blank answer is not attempted; the data's
worker seeding."""

import torch
from torch import nn
from torch.utils.data import DataLoader

from course_utils.data import JitteredDigits, reseed_worker
from course_utils.exercises import debugging as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_references_pass_and_leave_the_session_alone


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
