"""Chapter 00 (environment): the tests about all of its exercises at once."""

from course_utils.exercises import chapter_exercises


def test_references_pass():
    for exercise in chapter_exercises("environment"):
        verdict = exercise.verdict(exercise.reference)
        assert verdict.passed, verdict
