"""What every exercise test says: this answer passes; this one fails with these words."""

from course_utils.exercises.core import Outcome
from slow_machine import scaled


def assert_passes(exercise, answer):
    verdict = exercise.verdict(answer)
    assert verdict.outcome is Outcome.PASSED, str(verdict)


def assert_fails(exercise, answer, *fragments, outcome=Outcome.FAILED):
    verdict = exercise.verdict(answer)
    assert verdict.outcome is outcome, str(verdict)
    for fragment in fragments:
        assert fragment in verdict.message, str(verdict)


def assert_references_pass_and_leave_the_session_alone(exercises, max_seconds=5.0):
    """Every reference passes, in reasonable time, and the learner's session is as it was.

    A check runs inside the learner's kernel: it must not advance their random stream, switch
    autograd off or change the thread count. The time limit is generous on purpose (a loaded
    CI machine is slow); it catches a check that does far too much work, not a slow machine.
    """
    import time

    import torch

    # Two threads at least, whatever the test command set (one per process): a check that
    # switches to one thread and leaves it so must show.
    threads_before = torch.get_num_threads()
    torch.set_num_threads(max(2, threads_before))
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    try:
        for exercise in exercises:
            start = time.perf_counter()
            assert_passes(exercise, exercise.reference)
            assert time.perf_counter() - start < scaled(max_seconds), f"{exercise.name} took too long"
            assert torch.is_grad_enabled(), f"{exercise.name} left autograd switched off"
        assert torch.equal(torch.rand(3), expected_next), "a check changed the learner's random stream"
        assert torch.get_num_threads() == threads, "a check changed the number of threads"
    finally:
        torch.set_num_threads(threads_before)
