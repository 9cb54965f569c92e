"""Chapter 05 (speed_and_memory): the tests about all of its exercises at once."""

from course_utils.exercises import speed_and_memory as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_references_pass_and_leave_the_session_alone


EXERCISES = (
    ex.training_memory_bytes, ex.accumulation_step, ex.split_step_time, ex.scaled_clipped_step
)


def test_every_reference_passes_quickly_and_leaves_the_session_alone():
    ex.accumulation_step.verdict(ex.accumulation_step.reference)  # warm up torch's first calls
    assert_references_pass_and_leave_the_session_alone(EXERCISES)


def test_a_blank_answer_is_not_attempted():
    def blank(*args):
        raise NotImplementedError()

    for exercise in EXERCISES:
        assert exercise.verdict(blank).outcome is Outcome.NOT_ATTEMPTED


def test_every_record_survives_the_graders_round_trip(tmp_path):
    # The grader judges in another process, from what the probe saved to disk.
    from course_utils.exercises import plain
    from course_utils.exercises.core import ProbeResult

    for exercise in EXERCISES:
        path = tmp_path / f"{exercise.name}.json"
        plain.save(exercise.probe(exercise.reference).to_plain(), path)
        again = ProbeResult.from_plain(plain.load(path))
        assert exercise.judge(again).passed, exercise.name
