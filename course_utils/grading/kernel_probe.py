"""The only grader code that runs inside the learner's kernel: record one exercise's probe.

It is imported by a cell the grader puts before all the learner's code, and keeps copies of
every exercise and of ``Exercise.probe`` as they were then, so an answer cell that later
replaces ``Exercise.probe``, an exercise's probe or ``check`` does not change what is run. The
namespace is read from the calling cell's frame, not through names an answer cell could rebind.
With the record goes a fingerprint of the probed function's code, which the grader compares
with the code of the answer cell it inserted. It writes plain data (JSON + ``.npz``) into
``probes/`` and nothing else; the grading process reads it right after the cell.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import sys
import types
from pathlib import Path

from course_utils.exercises import CHAPTERS, plain
from course_utils.exercises.core import Exercise, ProbeResult, Status
from course_utils.exercises.exam import public_probe_exercise

_MISSING = object()
_PROBE = Exercise.probe
_SAVE = plain.save
_EXERCISES = {
    (module, name): copy.copy(value)
    for module in CHAPTERS.values()
    for name, value in vars(importlib.import_module(f"course_utils.exercises.{module}")).items()
    if isinstance(value, Exercise)
}


def code_fingerprint(code: types.CodeType) -> str:
    """What a function's code is, independent of the file and line it was compiled at."""
    digest = hashlib.sha256()
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames, code.co_argcount)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            digest.update(code_fingerprint(const).encode())
        else:
            digest.update(repr(const).encode())
    return digest.hexdigest()


# The public cases' probes (exam grading), copied with the rest before any answer cell runs.
_PUBLIC = {key: public_probe_exercise(exercise) for key, exercise in _EXERCISES.items()}


def record(module_name: str, exercise_name: str, variable: str, record_name: str,
           public: bool = False) -> None:
    namespace = sys._getframe(1).f_globals
    exercise = _EXERCISES[(module_name, exercise_name)]
    answer = namespace.get(variable, _MISSING)
    public_result = None
    if answer is _MISSING:
        result, code = ProbeResult(Status.NOT_ATTEMPTED), None
        public_result = result if public else None
    else:
        result = _PROBE(exercise, answer)
        if public:
            public_exercise = _PUBLIC[(module_name, exercise_name)]
            public_result = (_PROBE(public_exercise, answer) if public_exercise is not None
                             else ProbeResult(Status.BAD_ANSWER, error={"message": "no public cases"}))
        function_code = getattr(answer, "__code__", None)
        code = code_fingerprint(function_code) if isinstance(function_code, types.CodeType) else None
    folder = Path("probes")
    folder.mkdir(exist_ok=True)
    saved = {"probe": result.to_plain(), "code": code}
    if public_result is not None:
        saved["public"] = public_result.to_plain()
    _SAVE(saved, folder / record_name)
