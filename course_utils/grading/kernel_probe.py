"""The only grader code that runs inside the learner's kernel: record one exercise's probe.

It writes plain data (JSON + ``.npz``) into ``probes/`` of the kernel's working folder and
nothing else; the grading process reads the file right after this cell, before any more of
the learner's code runs, and decides the verdict itself.
"""

from __future__ import annotations

import importlib
from pathlib import Path

_MISSING = object()


def record(module_name: str, exercise_name: str, variable: str, record_name: str, namespace: dict) -> None:
    from course_utils.exercises import plain
    from course_utils.exercises.core import ProbeResult, Status

    exercise = getattr(importlib.import_module(f"course_utils.exercises.{module_name}"), exercise_name)
    answer = namespace.get(variable, _MISSING)
    if answer is _MISSING:
        result = ProbeResult(Status.NOT_ATTEMPTED)
    else:
        result = exercise.probe(answer)
    folder = Path("probes")
    folder.mkdir(exist_ok=True)
    plain.save(result.to_plain(), folder / record_name)
