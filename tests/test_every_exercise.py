"""What every exercise of the course promises, tried on each one.

A blank answer is "not attempted"; the reference passes and leaves the learner's session as it
was; the probe's record survives the trip to disk that the batch grader makes and is judged the
same there; every hint and the solution render, and the solution shown is code that compiles.
"""

import pytest
import torch

from course_utils.exercises import ____, all_exercises, plain
from course_utils.exercises.core import Outcome, ProbeResult
from exercise_asserts import assert_references_pass_and_leave_the_session_alone

EXERCISES = [exercise for exercises in all_exercises().values() for exercise in exercises]


@pytest.fixture(params=EXERCISES, ids=lambda exercise: exercise.id)
def exercise(request):
    return request.param


def test_a_blank_answer_is_not_attempted(exercise):
    assert exercise.verdict().outcome is Outcome.NOT_ATTEMPTED
    assert exercise.verdict(____).outcome is Outcome.NOT_ATTEMPTED


def test_the_unchanged_answer_cell_is_not_attempted(exercise):
    """What the learner's notebook holds before they write anything: the body raises."""
    params = ", ".join(exercise.expects.params)
    namespace = {}
    exec(f"def {exercise.expects.name}({params}):\n    raise NotImplementedError()\n", namespace)
    stub = namespace[exercise.expects.name]
    assert exercise.verdict(stub).outcome is Outcome.NOT_ATTEMPTED


def test_the_reference_passes_and_leaves_the_session_alone(exercise):
    dtype = torch.get_default_dtype()
    assert_references_pass_and_leave_the_session_alone([exercise])
    assert torch.get_default_dtype() == dtype
    assert torch.get_default_device() == torch.device("cpu")


def test_the_record_survives_the_graders_trip_to_disk(exercise, tmp_path):
    """The grader runs the probe in the learner's kernel, saves the record with plain.save, and
    judges it in its own process."""
    for index, answer in enumerate((exercise.reference, lambda *args: None)):
        record = exercise.probe(answer)
        path = tmp_path / f"record{index}.json"
        plain.save(record.to_plain(), path)
        again = exercise.judge(ProbeResult.from_plain(plain.load(path)))
        assert again.to_dict() == exercise.judge(record).to_dict()


def test_hints_and_the_solution_render(exercise, capsys):
    assert exercise.hints, "an exercise without hints"
    for level in range(1, len(exercise.hints) + 1):
        exercise.hint(level)
        shown = capsys.readouterr().out
        assert f"Hint {level} of {len(exercise.hints)}" in shown
        assert exercise.hints[level - 1].split()[0] in shown
    exercise.solution()
    shown = capsys.readouterr().out
    assert f"Solution: {exercise.title}" in shown
    source = exercise.solution_text()
    compile(source, f"<solution of {exercise.id}>", "exec")
    assert f"{exercise.expects.name}" in source


def test_the_solution_shown_defines_what_the_check_expects(exercise):
    namespace = {}
    exec(compile(exercise.solution_text(), "<solution>", "exec"), namespace)
    pasted = namespace[exercise.expects.name]
    assert exercise.verdict(pasted).outcome is Outcome.PASSED
