"""Chapter 07's exercises together: every reference passes, a blank answer is not attempted."""

import torch
from torch import nn

from course_utils.exercises import reliable_practice as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_references_pass_and_leave_the_session_alone


EXERCISES = (ex.save_weights, ex.resume, ex.remap_keys)


def test_every_reference_passes_quickly_and_leaves_the_session_alone():
    torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)  # the first optimizer imports dynamo
    assert_references_pass_and_leave_the_session_alone(EXERCISES)


def test_a_blank_answer_is_not_attempted():
    def blank(*args):
        raise NotImplementedError()

    for exercise in EXERCISES:
        assert exercise.verdict(blank).outcome is Outcome.NOT_ATTEMPTED
