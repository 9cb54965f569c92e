"""Chapter 04 (training_loop): the tests about all of its exercises at once."""

from course_utils.exercises import training_loop as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_references_pass_and_leave_the_session_alone


EXERCISES = (ex.train_step, ex.evaluate, ex.EarlyStopping)


def test_blank_answers_are_not_attempted():
    def blank(*args, **kwargs):
        raise NotImplementedError()

    class BlankStopper:
        def __init__(self, patience):
            raise NotImplementedError()

    for exercise in (ex.train_step, ex.evaluate):
        assert exercise.verdict(blank).outcome is Outcome.NOT_ATTEMPTED
    assert ex.EarlyStopping.verdict(BlankStopper).outcome is Outcome.NOT_ATTEMPTED


def test_checks_are_fast_and_leave_the_session_alone():
    assert_references_pass_and_leave_the_session_alone(EXERCISES)
