"""An answer that is right on its first calls and then raises never passes.

A probe that meets an error on a later input records it for the judge, which weighs it against
the earlier inputs (``core.later_error``, ``core.Raised``). An error the probe records must not
vanish there: tried for every function exercise with an answer that runs the reference for its
first N calls, then raises, the stub's own NotImplementedError() (not attempted) or any other.
"""

from __future__ import annotations

import copy
import importlib
import inspect

import pytest

from course_utils.exercises import CHAPTERS
from course_utils.exercises.core import Exercise

EXERCISES = [exercise for chapter in CHAPTERS.values()
             for exercise in vars(importlib.import_module(f"course_utils.exercises.{chapter}")).values()
             if isinstance(exercise, Exercise) and not isinstance(exercise.reference, type)]


def stops_working(reference, after: int, error):
    """The reference for ``after`` calls, then ``error()`` on every call; counts its calls."""
    reference = copy.copy(reference)

    def answer(*args, **kwargs):
        answer.calls += 1
        if answer.calls > after:
            raise error()
        return reference(*args, **kwargs)

    answer.calls = 0
    answer.__signature__ = inspect.signature(reference)
    return answer


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda exercise: exercise.id)
def test_an_answer_that_raises_after_its_first_calls_does_not_pass(exercise):
    for error in (NotImplementedError, lambda: ValueError("stopped working")):
        for after in (1, 2, 3, 5):
            answer = stops_working(exercise.reference, after, error)
            verdict = exercise.verdict(answer)
            if answer.calls > after:
                assert not verdict.passed, f"raised on call {after + 1} of {answer.calls}, and passed"
