"""Running a learner's code inside a check: a time limit, labelled errors, no side effects.

The time limit uses SIGALRM where it exists (Linux, macOS; notebook cells run in the main
thread); elsewhere a timer thread interrupts the main thread. ``CheckTimeout`` is a
BaseException, so an ``except Exception`` in the learner's code cannot swallow it.
"""

from __future__ import annotations

import _thread
import contextlib
import functools
import signal
import threading
from typing import Callable

class CheckTimeout(BaseException):
    """The learner's code ran past the time limit (a BaseException, so `except Exception` in
    the learner's code cannot swallow it)."""


class LearnerRaised(Exception):
    """The learner's code raised; carries the input it was given and the line that raised."""

    def __init__(self, error: BaseException, on: str):
        super().__init__(on)
        self.error = error
        self.on = on
        self.line = learner_line(error)


@functools.lru_cache(maxsize=1)
def _library_folders() -> tuple[str, ...]:
    """Folders whose frames are not the learner's: Python's own, installed packages, this one."""
    import os
    import sysconfig

    folders = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    folders.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # course_utils/
    try:
        import torch

        folders.add(os.path.dirname(torch.__file__))
    except ImportError:  # pragma: no cover
        pass
    return tuple(os.path.realpath(folder) + os.sep for folder in folders)


def learner_line(error: BaseException) -> str | None:
    """```source line` in func`` for the deepest frame of the traceback in the learner's own code.

    In a notebook that is the line of their cell; torch's and the standard library's frames are
    skipped, so a shape error points at the learner's ``x + y``, not at torch internals.
    """
    import linecache
    import os

    folders = _library_folders()
    found = None
    traceback = error.__traceback__
    while traceback is not None:
        code = traceback.tb_frame.f_code
        filename = code.co_filename
        real = os.path.realpath(filename) if os.path.isabs(filename) else filename
        if not real.startswith(folders) and not filename.startswith("<frozen"):
            source = linecache.getline(filename, traceback.tb_lineno).strip()
            if source:
                if len(source) > 120:
                    source = source[:117] + "..."
                found = f"`{source}` in {code.co_name}"
        traceback = traceback.tb_next
    return found


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


def default_device():
    """torch's default device, read the way every supported torch answers.

    Before torch 2.10, ``torch.get_default_device()`` raises ``AttributeError`` once
    ``torch.set_default_device(None)`` has run (a lesson of chapter 06 does): every check that
    asked it then failed, and blamed the answer. A factory's tensor says the same thing."""
    import torch

    try:
        return torch.get_default_device()
    except AttributeError:
        return torch.empty(0).device


@contextlib.contextmanager
def learner_state_preserved():
    """Checking must not change the learner's session: random streams, grad mode, default
    dtype and default device (an answer may call ``torch.set_default_device``), deterministic
    algorithms, and the global module hooks an answer registered and left behind (every later
    forward of every model would run them)."""
    import torch

    from course_utils.env import random_state_preserved

    grad_enabled = torch.is_grad_enabled()
    default_dtype = torch.get_default_dtype()
    device_before = default_device()
    deterministic = (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled())
    hooks_before = {name: dict(hooks) for name, hooks in _global_module_hooks().items()}
    try:
        with random_state_preserved():
            yield
    finally:
        torch.set_grad_enabled(grad_enabled)
        torch.set_default_dtype(default_dtype)
        if default_device() != device_before:
            # None takes the setting away altogether, as a session that never set one has it
            torch.set_default_device(None if device_before.type == "cpu" else device_before)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != deterministic:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        for name, hooks in _global_module_hooks().items():
            for key in [key for key in hooks if key not in hooks_before.get(name, {})]:
                del hooks[key]


def _global_module_hooks() -> dict:
    """torch's tables of hooks that run for every module (``register_module_forward_hook`` and
    its kin), by name; an empty dict where a torch version keeps them elsewhere."""
    from torch.nn.modules import module

    return {name: table for name in ("_global_forward_hooks", "_global_forward_pre_hooks",
                                     "_global_backward_hooks", "_global_backward_pre_hooks",
                                     "_global_forward_hooks_always_called", "_global_forward_hooks_with_kwargs")
            if isinstance(table := getattr(module, name, None), dict)}


@contextlib.contextmanager
def judge_side():
    """Where an ``expect`` rebuilds a probe's model and runs the reference on it: on the CPU, in
    float32, with autograd on; every random stream, the grad mode and the defaults are put back
    afterwards (in a learner's notebook ``expect`` runs in their session)."""
    import torch

    with learner_state_preserved(), torch.device("cpu"), torch.enable_grad():
        torch.set_default_dtype(torch.float32)
        yield


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


def describe_returned(value) -> str:
    """What a learner's function returned, in words, for "the check could not use it"."""
    try:
        import torch

        if isinstance(value, torch.Tensor):
            grad = ", requires grad" if value.requires_grad else ""
            layout = "" if value.layout == torch.strided else f", {value.layout}"
            return (f"a tensor of shape {tuple(value.shape)} ({value.dtype}, "
                    f"{value.device}{layout}{grad})")
        if isinstance(value, torch.nn.Module):
            return f"an nn.Module ({type(value).__name__})"
    except Exception:  # pragma: no cover - a value whose attributes raise
        pass
    if value is None:
        return "None"
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        return f"a {name} of {len(value)} item{'s' if len(value) != 1 else ''}"
    if type(value) is dict:
        keys = ", ".join(repr(key) if isinstance(key, str) else _article(type(key).__name__)
                         for key in list(value)[:4])
        more = ", ..." if len(value) > 4 else ""
        return f"a dict with keys {keys}{more}" if value else "an empty dict"
    return _article(name)


def _article(name: str) -> str:
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def call_learner(fn: Callable, args: tuple, kwargs: dict):
    """The one place a check calls the learner's code. A grading kernel's guard
    (``course_utils.grading.kernel_guard``) knows this function's frame: whatever runs below it is
    the learner's, even code with no frame of its own (a ``functools.partial``, a builtin)."""
    return fn(*args, **kwargs)


class Runner:
    """Handed to a probe: calls the learner's code and labels any exception with its input.

    It remembers what the learner's code returned last, so that when the check itself cannot
    handle a value it can say which value that was.
    """

    def __init__(self):
        self.last_returned: str | None = None
        self.last_on: str | None = None

    def __call__(self, fn: Callable, *args, on: str | None = None, **kwargs):
        label = on
        try:
            result = call_learner(fn, args, kwargs)
        except (Exception, KeyboardInterrupt) as error:  # KeyboardInterrupt: a user's stop
            if isinstance(error, KeyboardInterrupt):
                raise
            if label is None:
                label = ", ".join(describe_input(a) for a in args)
            raise LearnerRaised(error, label) from None
        try:
            self.last_returned = describe_returned(result)
        except Exception:  # a value that cannot even be described
            self.last_returned = "a value the check could not describe"
        self.last_on = label
        return result


# Off in a process that only judges records and never runs a probe (a grading worker, which
# loads every chapter as it starts): there the set-up would cost seconds for nothing.
WARM_UP = {"on": True}


@functools.lru_cache(maxsize=None)
def set_up_torch_once() -> None:
    """Pay torch's one-time lazy set-up when a chapter's exercises are imported, not in a check.

    The first ``meta`` operation or optimizer step of a process imports ``torch._dynamo``
    (about a second on a slow CPU). Chapters whose probes use either call this at import, so
    that the learner waits in the import cell, where a wait is expected, and every check stays
    well under a second even in a fresh kernel.
    """
    import torch

    if not WARM_UP["on"]:
        return
    weight = torch.zeros(1, requires_grad=True)
    weight.grad = torch.ones(1)
    torch.optim.SGD([weight], lr=0.1).step()
    (torch.empty(1, device="meta") * 2).relu()
