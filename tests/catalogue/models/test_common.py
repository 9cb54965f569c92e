"""Chapter 03's tests about several exercises at once."""

from torch import nn

from course_utils.exercises import models as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_references_pass_and_leave_the_session_alone


EXERCISES = (ex.SkipBlock, ex.Tower, ex.cross_entropy_from_logits, ex.multilabel_loss, ex.decay_groups)


def test_every_reference_passes_quickly_and_leaves_the_session_alone():
    assert_references_pass_and_leave_the_session_alone(EXERCISES)


def test_a_blank_answer_is_not_attempted():
    def blank(*args):
        raise NotImplementedError()

    class Blank(nn.Module):
        def __init__(self, a, b):
            raise NotImplementedError()

    for exercise in EXERCISES:
        answer = Blank if exercise.name in ("SkipBlock", "Tower") else blank
        assert exercise.verdict(answer).outcome is Outcome.NOT_ATTEMPTED
