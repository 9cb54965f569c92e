"""No probe computes a right answer where the learner's code runs.

The grader runs each probe inside the learner's kernel, where a mode, a tracer or a signal
handler the answer set up can see what the probe computes. So a probe records the inputs it
gave and what the answer did; what the right answer gives is computed on the judge's side
(``Exercise(expect=...)``), in the grader's own process when grading. Two checks, for every
exercise of the course:

* a probe's record has no ``"expected"`` entry (it is ``expect``'s to add);
* an answer that watches its own check (tests/probe_spy.py) sees none of the right answers
  among the tensors the check computes outside the answer's calls (for function exercises:
  the spy runs the reference; a class exercise is checked by its record alone).
"""

from __future__ import annotations

import importlib

import pytest

from course_utils.exercises import CHAPTERS
from course_utils.exercises.core import Exercise, Status
from probe_spy import seen_right_answers

EXERCISES = [exercise for chapter in CHAPTERS.values()
             for exercise in vars(importlib.import_module(f"course_utils.exercises.{chapter}")).values()
             if isinstance(exercise, Exercise)]

PARAMS = [pytest.param(exercise, id=exercise.id) for exercise in EXERCISES]

# Function exercises whose right answers the spy cannot tell apart from their inputs: a report
# of the machine, booleans, the gradient of w * x (x itself), parameter groups, timings, a
# loader, shapes, a file, a renamed dict of the same tensors. Their records are checked above.
SPY_CANNOT_TELL = {
    "environment.kernel_environment", "environment.seed_check", "autograd.fresh_gradient",
    "models.decay_groups", "speed_and_memory.split_step_time", "debugging.seeded_loader",
    "debugging.layer_output_shapes", "reliable_practice.save_weights", "reliable_practice.remap_keys",
}


def _keys(record, path=""):
    if isinstance(record, dict):
        for key, value in record.items():
            yield f"{path}.{key}", key
            yield from _keys(value, f"{path}.{key}")
    elif isinstance(record, list):
        for index, value in enumerate(record):
            yield from _keys(value, f"{path}[{index}]")


@pytest.mark.parametrize("exercise", PARAMS)
def test_a_probe_records_no_expected_values(exercise):
    result = exercise.probe(exercise.reference)
    assert result.status is Status.OK, result
    found = [path for path, key in _keys(result.data) if key.startswith("expected")]
    assert not found, f"the probe records what the right answer gives: {found[:5]}"
    assert exercise.judge(result).passed


@pytest.mark.parametrize("exercise", [p for p in PARAMS if not isinstance(p.values[0].reference, type)])
def test_an_answer_watching_its_check_sees_no_right_answer(exercise):
    leaked, rights = seen_right_answers(exercise)
    assert leaked == 0, f"{leaked} of the {rights} right answers the spy gave were computed by the check too"
    assert (rights > 0) == (exercise.id not in SPY_CANNOT_TELL), f"the spy found {rights} right answers to look for"
