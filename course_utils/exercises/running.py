"""Running a learner's code inside a check: a time limit, labelled errors, no side effects.

The time limit uses SIGALRM where it exists (Linux, macOS; notebook cells run in the main
thread); elsewhere a timer thread interrupts the main thread. ``CheckTimeout`` is a
BaseException, so an ``except Exception`` in the learner's code cannot swallow it.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import threading
from typing import Callable

class CheckTimeout(BaseException):
    """The learner's code ran past the time limit (a BaseException, so `except Exception` in
    the learner's code cannot swallow it)."""


class LearnerRaised(Exception):
    """The learner's code raised; carries the input it was given."""

    def __init__(self, error: BaseException, on: str):
        super().__init__(on)
        self.error = error
        self.on = on


@contextlib.contextmanager
def time_limit(seconds: float):
    """Stop the code inside after ``seconds`` by raising ``CheckTimeout`` in it.

    SIGALRM where it exists (Linux, macOS; only in the main thread, where notebook cells run);
    elsewhere a timer thread interrupts the main thread.
    """
    in_main_thread = threading.current_thread() is threading.main_thread()
    if hasattr(signal, "setitimer") and in_main_thread:

        def on_alarm(signum, frame):
            raise CheckTimeout()

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    elif in_main_thread:
        fired = threading.Event()

        def interrupt():
            fired.set()
            _thread.interrupt_main()

        timer = threading.Timer(seconds, interrupt)
        timer.start()
        try:
            yield
        except KeyboardInterrupt:
            if fired.is_set():
                raise CheckTimeout() from None
            raise
        finally:
            timer.cancel()
    else:  # no way to interrupt another thread: run without a limit
        yield


@contextlib.contextmanager
def learner_state_preserved():
    """Checking must not change the learner's session: random streams, grad mode, dtype."""
    import torch

    from course_utils.env import random_state_preserved

    grad_enabled = torch.is_grad_enabled()
    default_dtype = torch.get_default_dtype()
    try:
        with random_state_preserved():
            yield
    finally:
        torch.set_grad_enabled(grad_enabled)
        torch.set_default_dtype(default_dtype)


def describe_input(value) -> str:
    """A short, readable description of an input, for "on which input" messages."""
    try:
        import torch

        if isinstance(value, torch.Tensor):
            return f"a tensor of shape {tuple(value.shape)} ({value.dtype}, {value.device})"
    except ImportError:  # pragma: no cover
        pass
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Runner:
    """Handed to a probe: calls the learner's code and labels any exception with its input."""

    def __call__(self, fn: Callable, *args, on: str | None = None, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (Exception, KeyboardInterrupt) as error:  # KeyboardInterrupt: a user's stop
            if isinstance(error, KeyboardInterrupt):
                raise
            label = on if on is not None else ", ".join(describe_input(a) for a in args)
            raise LearnerRaised(error, label) from None
