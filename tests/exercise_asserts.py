"""What every exercise test says: this answer passes; this one fails with these words."""

from course_utils.exercises.core import Outcome


def assert_passes(exercise, answer):
    verdict = exercise.verdict(answer)
    assert verdict.outcome is Outcome.PASSED, str(verdict)


def assert_fails(exercise, answer, *fragments, outcome=Outcome.FAILED):
    verdict = exercise.verdict(answer)
    assert verdict.outcome is outcome, str(verdict)
    for fragment in fragments:
        assert fragment in verdict.message, str(verdict)
