"""The guard of a grading kernel (course_utils/grading/kernel_guard.py, guarded_code.py), in a
fresh interpreter set up as a grading kernel's (``guarded_catalogue.guarded_session``).

* Every right answer of the course's catalogue passes (none is refused), and every catalogued
  answer built on a worked answer is refused: ``guarded_catalogue.py --right-only``.
* Every route to the grader's code or data that a learner's code could take is refused, in a
  probe window and outside one; what libraries do for the learner's code (torch.manual_seed
  notes its caller's stack, torch.vmap registers operators) is not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from slow_machine import scaled

ROOT = Path(__file__).resolve().parents[1]
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"COURSE_STRICT", "COURSE_EXPECT", "PYTHONPATH",
                                                             "COURSE_SIMULATED_MACHINE"}}
    env["COURSE_NO_PROGRESS"] = "1"
    return env


def test_every_right_answer_of_the_catalogue_passes_in_a_grading_kernel():
    run = subprocess.run([PYTHON, str(ROOT / "tests" / "guarded_catalogue.py"), "--right-only"], cwd=ROOT,
                         env=_env(), capture_output=True, text=True, timeout=scaled(600))
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "answers built on the course's worked answers were refused" in run.stdout, run.stdout


# Each route: the code a learner's answer could run, and what its refusal says (None: allowed).
BATTERY = textwrap.dedent(
    '''
    import bdb, concurrent.futures, ctypes, functools, gc, inspect, json, marshal, sys, tempfile, traceback, types
    from pathlib import Path
    import torch
    sys.path.insert(0, "tests")
    from guarded_catalogue import guarded_session
    window = guarded_session(Path(tempfile.mkdtemp()))
    from course_utils.exercises import training_loop as loop, tensors
    from course_utils.exercises.core import Outcome

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    step = lambda: loop._train_step(model, opt, torch.nn.functional.cross_entropy, x, y)

    class Borrowed:
        step = loop._EarlyStopping.step

    outcomes = {}

    def route(name, action):
        try:
            action()
            outcomes[name] = None
        except BaseException as error:
            outcomes[name] = f"{type(error).__name__}: {error}"

    def in_window(name, exercise, answer):
        verdict = window(exercise, answer)
        outcomes[name] = None if verdict.outcome is Outcome.PASSED else verdict.message.split(chr(10))[0]

    route("an alias of the reference", step)
    route("a partial of it", lambda: functools.partial(loop._train_step)(model, opt, torch.nn.functional.cross_entropy, x, y))
    route("a thread that runs it", lambda: concurrent.futures.ThreadPoolExecutor(1).submit(step).result())
    route("a method borrowed from a reference class", lambda: Borrowed().step(1.0))
    route("a reference class", lambda: loop._EarlyStopping(3))
    route("a probe", lambda: tensors.outer_sum._probe(lambda a, b: a[:, None] + b, None))
    route("a judge", lambda: tensors.outer_sum._judge({}))
    route("a function made of the reference's code", lambda: types.FunctionType(loop._train_step.__code__, {}))
    route("the reference's code replaced", lambda: setattr(loop._train_step, "__code__", (lambda: 0).__code__))
    route("the reference's code run", lambda: exec(loop._train_step.__code__))
    route("the reference's code marshalled", lambda: marshal.dumps(loop._train_step.__code__))
    route("code compiled under the course's name", lambda: compile("x = 1", loop.__file__, "exec"))
    route("a check opened by the learner", lambda: sys.audit("course.window.open", "a name"))
    route("the heap", lambda: gc.get_objects())
    route("another thread's frames", lambda: sys._current_frames())
    route("tracing", lambda: sys.settrace(lambda *args: None))
    route("profiling", lambda: sys.setprofile(lambda *args: None))

    def debugger():
        tracer = bdb.Bdb()
        try:
            tracer.set_trace()
        finally:
            try:
                tracer.set_continue()
            except BaseException:
                pass

    route("tracing through the standard library's debugger", debugger)
    route("ctypes", lambda: ctypes.string_at(id(x), 8))
    route("the process's memory", lambda: open("/proc/self/mem", "rb"))
    route("its own frame, outside a check", lambda: inspect.currentframe())

    def frames(a, b):
        inspect.currentframe().f_back
        return a[:, None] + b[None, :]

    def traceback_frame(a, b):
        try:
            raise ValueError
        except ValueError as error:
            error.__traceback__.tb_frame.f_back
        return a[:, None] + b[None, :]

    def reference_inside(a, b):
        loop._train_step
        return tensors.outer_sum.reference(a, b)

    def library_work(a, b):
        torch.manual_seed(0)
        torch.vmap(lambda ai: ai + b)(a) if len(a) else None
        return a[:, None] + b[None, :]

    def debugger_inside(a, b):
        debugger()
        return a[:, None] + b[None, :]

    def stack_with_locals(a, b):
        traceback.StackSummary.extract(traceback.walk_stack(None), capture_locals=True)
        return a[:, None] + b[None, :]

    def formats_tracebacks(a, b):
        try:
            raise ValueError("mine")
        except ValueError:
            traceback.format_exc()
        traceback.format_stack()
        return a[:, None] + b[None, :]

    in_window("tracebacks formatted, inside a check", tensors.outer_sum, formats_tracebacks)
    in_window("the check's frames, inside a check", tensors.outer_sum, frames)
    in_window("a debugger's tracer, inside a check", tensors.outer_sum, debugger_inside)
    in_window("the stack's variables, inside a check", tensors.outer_sum, stack_with_locals)
    in_window("a traceback's frames, inside a check", tensors.outer_sum, traceback_frame)
    in_window("the reference, inside a check", tensors.outer_sum, reference_inside)
    in_window("torch.manual_seed and torch.vmap, inside a check", tensors.outer_sum, library_work)
    print(json.dumps(outcomes))
    '''
)

ALLOWED = {"its own frame, outside a check", "torch.manual_seed and torch.vmap, inside a check",
           "tracebacks formatted, inside a check"}


@pytest.fixture(scope="module")
def battery():
    run = subprocess.run([PYTHON, "-c", BATTERY], cwd=ROOT, env=_env(), capture_output=True, text=True,
                         timeout=scaled(300))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_every_route_to_the_graders_code_or_data_is_refused(battery):
    for route, said in battery.items():
        if route in ALLOWED:
            continue
        assert said is not None, f"{route}: not refused"
        assert "grading: " in said, (route, said)


def test_what_libraries_do_for_the_learners_code_is_allowed(battery):
    assert {route: battery[route] for route in ALLOWED} == dict.fromkeys(ALLOWED), battery


def test_a_refused_call_names_what_it_reached_for(battery):
    assert "the course's own training_loop.train_step" in battery["an alias of the reference"]
    assert "the course's own tensors._probe_outer_sum" in battery["a probe"]
    assert "look at the grader's frames" in battery["the check's frames, inside a check"]
