"""The only grader code that runs inside the learner's kernel: set up, then record each probe.

``setup`` runs in a cell the grader puts before all the learner's code. It loads the notebook's
chapter's exercise module guarded (``guarded_code``: its functions run only for the grader's own
checks; another chapter's module cannot be imported at all), takes out of every exercise what no answer may find (hints, error notes, the worked
answer) and makes the notebook's ``ex.NAME`` a stand-in, keeps a copy of each exercise and of
``Exercise.probe`` for the probes, and installs ``kernel_guard``'s hook. The grader then
deletes the exercise modules' files from the run's copy of the package.

``record`` runs in each check cell. It opens the check's probe window (by the cell's own
record name, which the first cell knew only by its hash, so an answer cannot open one), runs the
exercise's probe on the function the cell's namespace holds, and sends plain data
(``plain.dumps``) through the pipe that only the grader reads (``records``), right after which
the grading process takes it. The namespace is read from the calling cell's frame, not through
names an answer cell could rebind. With the record goes a fingerprint of the probed function's
code, which the grader compares with the code of the answer cell it inserted.
"""

from __future__ import annotations

import copy
import hashlib
import os
import sys
import time
import types
from pathlib import Path

from course_utils.display import show
from course_utils.exercises import CHAPTERS, plain
from course_utils.exercises.core import Exercise, Outcome, ProbeResult, Status, Verdict, _Note
from course_utils.grading import records

_MISSING = object()
_PROBE = Exercise.probe
_DUMPS = plain.dumps
_SEND = records.send
_AUDIT = sys.audit
# (module, exercise name) -> the probe's own copy of the exercise; filled by setup()
_EXERCISES: dict = {}
_PUBLIC: dict = {}
_KERNEL_PID = [os.getpid()]

WITHHELD = ("Not available while a notebook is graded: the grader runs your own code only.")
GRADED_LATER = ("This notebook is being graded: the grader checks every exercise itself, after "
                "running your answer cells, on its own cases.")


def code_fingerprint(code: types.CodeType) -> str:
    """What a function's code is, independent of the file and line it was compiled at, and of
    the process (a set constant, ``x in {"a", "b"}``, is taken in sorted order: its own order
    follows the string hash, which differs from one process to the next)."""
    digest = hashlib.sha256()
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames, code.co_argcount)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            digest.update(code_fingerprint(const).encode())
        else:
            digest.update(_constant_text(const).encode())
    return digest.hexdigest()


def _constant_text(const) -> str:
    if isinstance(const, frozenset):
        return "frozenset(" + ",".join(sorted(_constant_text(item) for item in const)) + ")"
    if isinstance(const, tuple):
        return "(" + ",".join(_constant_text(item) for item in const) + ")"
    return repr(const)


def answer_code(answer):
    """What the grader compares with the answer cell's code: a function's fingerprint, or a list
    of fingerprints that must all be the cell's (a class's own methods, with its metaclass's; a
    callable object's class; a function under a library's decorator, by what it wraps). An empty
    list (a class that defines nothing of its own) and None (a functools.partial, a builtin, an
    object that is not callable) are not code of the cell."""
    if isinstance(answer, types.FunctionType):
        if _library_code(answer.__code__):
            return _wrapped_codes(answer, depth=0)
        return code_fingerprint(answer.__code__)
    if isinstance(answer, type):
        return _class_codes(answer)
    if callable(answer) and _library_class(type(answer)) and hasattr(answer, "__wrapped__"):
        code = answer_code(answer.__wrapped__)  # functools.cache and its kin: the function it caches
        return code if isinstance(code, list) else [code] if code is not None else None
    if callable(answer) and not isinstance(answer, (types.BuiltinFunctionType, types.MethodType)) and (
            "__call__" in vars(type(answer))) and not _library_class(type(answer)):
        return _class_codes(type(answer))
    return None


def _class_codes(cls: type) -> list:
    """The fingerprints of a class's own code, and of its metaclass's where that is not
    ``type`` or a library's (a metaclass whose ``__call__`` is another's function decides what
    calling the class does). Methods made by code at run time (a dataclass's ``__init__``,
    ``"<string>"``) are left out: no cell holds their source."""
    classes = [cls] + ([type(cls)] if not _library_class(type(cls)) else [])
    return [code_fingerprint(f.__code__) if isinstance(f, types.FunctionType) else "not written here"
            for owner in classes for f in own_functions(owner)
            if not (isinstance(f, types.FunctionType) and _made_at_run_time(f.__code__))]


def _made_at_run_time(code: types.CodeType) -> bool:
    """Code a library made from a string while the program ran (``"<string>"``, attrs'
    ``"<attrs generated init ...>"``), not a cell (IPython's ``"<ipython-input-...>"``)."""
    name = code.co_filename
    return name.startswith("<") and not name.startswith("<ipython-input")


_LIBRARY_ROOTS: list = []


def _library_roots() -> tuple[str, ...]:
    """Where the standard library and torch live: a function there is a decorator's wrapper.
    Found once, by ``setup``, before any of the learner's code runs."""
    if not _LIBRARY_ROOTS:
        import sysconfig

        import torch

        roots = [os.path.dirname(torch.__file__), sysconfig.get_paths()["stdlib"]]
        _LIBRARY_ROOTS.append(tuple(os.path.realpath(root) + os.sep for root in roots))
    return _LIBRARY_ROOTS[0]


def _library_code(code: types.CodeType) -> bool:
    return os.path.realpath(code.co_filename).startswith(_library_roots()) if code.co_filename else False


def _library_class(cls: type) -> bool:
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    return cls is type or (getattr(cls, "__module__", None) == "builtins") or (
        bool(path) and os.path.realpath(path).startswith(_library_roots()))


def _wrapped_codes(wrapper: types.FunctionType, depth: int) -> list:
    """A library's decorator around an answer (``@torch.no_grad()``, ``@functools.cache``):
    the code it runs of anyone else's, found by what it wraps and what its closure holds. A
    library function that wraps nothing is nobody's answer (an empty list)."""
    if depth > 8 or not hasattr(wrapper, "__wrapped__"):
        return []
    found = []
    reached = [wrapper.__wrapped__] + [cell.cell_contents for cell in (wrapper.__closure__ or ())
                                       if _cell_holds_code(cell)]
    for item in reached:
        item = getattr(item, "__func__", item)  # a bound method: its function
        if not isinstance(item, types.FunctionType):
            if item is wrapper.__wrapped__:
                code = answer_code(item)
                found += code if isinstance(code, list) else ["not written here" if code is None else code]
            continue
        if _library_code(item.__code__):
            found += _wrapped_codes(item, depth + 1) if hasattr(item, "__wrapped__") else []
        else:
            found.append(code_fingerprint(item.__code__))
    return sorted(set(found)) if found else []


def _cell_holds_code(cell) -> bool:
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return isinstance(getattr(value, "__func__", value), types.FunctionType)


def own_functions(cls: type) -> list:
    """What a class defines that runs: its methods (static and class methods by their function),
    its properties' accessors, and any other callable in its body (not nested classes)."""
    functions = []
    for value in vars(cls).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            functions += [part for part in (value.fget, value.fset, value.fdel) if part is not None]
        elif callable(value) and not isinstance(value, type):
            functions.append(value)
    return functions


def _withheld(name: str):
    def withheld(*args, **kwargs):
        raise PermissionError(f"grading: the worked answer of {name} is not available. {WITHHELD}")
    withheld.__name__ = withheld.__qualname__ = name
    return withheld


def _judged_elsewhere(name: str):
    def judge(*args, **kwargs):
        raise PermissionError(f"grading: {name}'s judge runs in the grader's own process, not in this "
                              f"notebook. {WITHHELD}")
    judge.__name__ = judge.__qualname__ = f"judge_of_{name}"
    return judge


def _withhold(exercise: Exercise) -> None:
    """What an answer must not find on an exercise while it is graded: hints, error notes (the
    classic mistakes, with their fixes) and the worked answer."""
    exercise.hints = (WITHHELD,)
    exercise.error_notes = ()
    exercise.passed_message = "Correct."
    exercise.reference = _withheld(exercise.expects.name)
    # The judge and what the right answer gives run in the grader's process, never here.
    exercise._judge = exercise._expect = _judged_elsewhere(exercise.expects.name)


class _GradedLater(Exercise):
    """What ``ex.NAME`` is in a notebook being graded.

    The course's cells that use a learner's answer once it passes (``answer if
    ex.NAME.verdict(answer).passed else ex.NAME.reference``) then use the learner's own answer;
    a ``check()`` left in an answer cell says that grading checks it; nothing here runs a probe.
    """

    def verdict(self, answer=None) -> Verdict:
        return Verdict(self.id, self.title, Outcome.PASSED, GRADED_LATER)

    def check(self, answer=None) -> Verdict:
        verdict = self.verdict(answer)
        verdict._shown = True
        show(_Note(self.title, GRADED_LATER))
        return verdict

    def hint(self, level=None) -> None:
        show(_Note(f"Hints: {self.title}", WITHHELD))

    def solution_text(self) -> str:
        return WITHHELD

    def solution(self) -> None:
        show(_Note(f"Solution: {self.title}", WITHHELD))


def _silence_forked_copies(kernel_pid: int) -> None:
    """A learner's code that forks (a loop of os.fork(), say) makes copies of the kernel, each of
    which goes on running the notebook's code and answering the grader on the kernel's own
    channels, garbling them for the rest of the notebook. A copy that tries to send a message, or
    a check's record, now ends there."""
    from jupyter_client.session import Session

    def send_only_from_the_kernel(self, *args, _send=Session.send, _pid=kernel_pid, _getpid=os.getpid,
                                  _exit=os._exit, **kwargs):
        if _getpid() != _pid:
            _exit(0)
        return _send(self, *args, **kwargs)

    Session.send = send_only_from_the_kernel


def setup(record_hashes, modules=None) -> None:
    """Load the exercises of ``modules`` (the notebook's chapter; every chapter when None) guarded
    and install the guard; called once, by the grader's first cell. A chapter not loaded cannot
    be imported later: the grader deletes every chapter's module once this cell has run."""
    import logging

    import course_utils
    from course_utils.exercises import running
    from course_utils.exercises.exam import public_probe_exercise
    from course_utils.grading import kernel_guard
    from course_utils.grading.guarded_code import load_chapters

    if _EXERCISES:
        raise PermissionError("grading: set up already")
    package = Path(course_utils.__file__).resolve().parent
    for module_name, module in load_chapters(package.parent, CHAPTERS.values() if modules is None else modules).items():
        for name, value in vars(module).items():
            if isinstance(value, Exercise):
                _withhold(value)
                _EXERCISES[(module_name, name)] = copy.copy(value)
                value.__class__ = _GradedLater
    _PUBLIC.update({key: public_probe_exercise(exercise) for key, exercise in _EXERCISES.items()})
    _library_roots()
    logging._srcfile = None  # logging would walk the stack to name a message's caller
    _silence_forked_copies(_KERNEL_PID[0])
    kernel_guard.install(record_hashes, str(package), running.call_learner.__code__, record.__code__)


def _children() -> set[int]:
    """The kernel's child processes, from /proc (empty where there is none)."""
    me, found = os.getpid(), set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if len(fields) > 1 and fields[1] == str(me).encode():
            found.add(int(entry))
    return found


def _hit_the_process_limit(result: ProbeResult) -> bool:
    return bool(result.error) and any("BlockingIOError" in text for text in result.error.values())


def _let_forked_copies_end(before: set[int], seconds: float = 5.0) -> None:
    """After an answer that forked until the process limit stopped it, wait for its copies.

    Each copy ends on its own (at its next fork that fails, or when it tries to answer), but
    while it is ending, and after, as a zombie until the kernel reaps it, it holds its place
    under the limit: the next cell would find no room even for a thread, and an exercise that
    did nothing wrong would fail. Only the children this probe made are reaped, and only after
    this error, so that no process the learner's code waits for itself loses its exit status.
    """
    new = _children() - before
    deadline = time.monotonic() + seconds
    while new and time.monotonic() < deadline:
        for pid in list(new):
            try:
                ended, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                ended = pid
            if ended:
                new.discard(pid)
        if new:
            time.sleep(0.02)


def record(module_name: str, exercise_name: str, variable: str, record_name: str,
           public: bool = False) -> None:
    namespace = sys._getframe(1).f_globals
    _AUDIT("course.window.open", record_name)
    try:
        exercise = _EXERCISES[(module_name, exercise_name)]
        answer = namespace.get(variable, _MISSING)
        public_result = None
        if answer is _MISSING:
            result, code = ProbeResult(Status.NOT_ATTEMPTED), None
            public_result = result if public else None
        else:
            children = _children()
            result = _PROBE(exercise, answer)
            if os.getpid() == _KERNEL_PID[0] and _hit_the_process_limit(result):
                _let_forked_copies_end(children)
            if public:
                public_exercise = _PUBLIC[(module_name, exercise_name)]
                public_result = (_PROBE(public_exercise, answer) if public_exercise is not None
                                 else ProbeResult(Status.BAD_ANSWER, error={"message": "no public cases"}))
            code = answer_code(answer)
        saved = {"probe": result.to_plain(), "code": code}
        if public_result is not None:
            saved["public"] = public_result.to_plain()
        if os.getpid() != _KERNEL_PID[0]:  # a copy the learner's code forked: not the kernel
            os._exit(0)
        _SEND(record_name, _DUMPS(saved))
    finally:
        _AUDIT("course.window.close", record_name)
