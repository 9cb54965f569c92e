"""Grading names the mistake the learner's own check names, for every wrong answer we know.

The grader judges a record from the learner's kernel in its own process, and refuses one that
passes only because it was changed there. A probe stops early on a wrong answer, so an honest
wrong answer's record lacks parts of a right one's: that is a failure with the judge's own
message and mistake id, never "tampering". Tried on every wrong answer of every chapter's
catalogue (tests/catalogue/), and on every right one, which must pass.
"""

from __future__ import annotations

import pytest

from course_utils.exercises import CHAPTERS
from course_utils.exercises.core import Exercise
from course_utils.grading import scoring
from exercise_catalogue import CATALOGUE_TIME_LIMIT_S, Right, chapter_catalogue
from slow_machine import scaled


def _graded(exercise: Exercise, answer):
    """The practice verdict, and the grader's on the same probe's record (with the catalogue's
    time limit: a busy machine must not turn a right answer into a timeout)."""
    limit = exercise.time_limit_s
    exercise.time_limit_s = max(limit, scaled(CATALOGUE_TIME_LIMIT_S))
    try:
        result = exercise.probe(answer)
    finally:
        exercise.time_limit_s = limit
    practice = exercise.judge(result)
    graded = scoring.judge_record(exercise.chapter, exercise.name, result)
    return practice, graded


@pytest.mark.parametrize("chapter", sorted(CHAPTERS.values()))
def test_grading_gives_each_catalogue_answer_its_practice_verdict(chapter):
    catalogue = chapter_catalogue(chapter)
    problems = []
    for case in catalogue.cases:
        practice, graded = _graded(case.exercise, case.entry.answer)
        if graded is None:
            problems.append(f"{case}: called tampering; practice says {practice.mistake}")
        elif (graded.outcome, graded.mistake) != (practice.outcome, practice.mistake):
            problems.append(f"{case}: graded {graded.outcome.value}/{graded.mistake}, "
                            f"practice {practice.outcome.value}/{practice.mistake}")
        elif isinstance(case.entry, Right) and not graded.passed:
            problems.append(f"{case}: a right answer failed")
    assert not problems, "\n".join(problems)
