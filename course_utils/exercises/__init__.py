"""Exercises, one package per chapter: ``from course_utils.exercises import environment as ex``.

A chapter's package holds one module per exercise (``tensors/outer_sum.py``: its probe, judge,
texts and reference) and ``common.py`` for what its exercises share; the package's
``__init__`` names each ``Exercise`` like the function the learner writes, so a notebook reads
``ex.known_gradient.check(known_gradient)``. A chapter may also still be one module
(``tensors.py``); ``chapter_sources`` gives the files either way.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from course_utils.exercises.core import ____, Exercise, Outcome, Verdict  # noqa: F401

# Chapter notebook → module of its exercises, in course order.
CHAPTERS = {
    "00_environment": "environment",
    "01_tensors": "tensors",
    "02_autograd": "autograd",
    "03_models": "models",
    "04_training_loop": "training_loop",
    "05_speed_and_memory": "speed_and_memory",
    "06_debugging": "debugging",
    "07_reliable_practice": "reliable_practice",
}


def chapter_named(name: str) -> str:
    """The notebook stem of the chapter named ``01``, ``01_tensors``, ``tensors`` (or with
    ``.ipynb``), as every command takes it; ValueError naming the chapters there are."""
    name = name.removesuffix(".ipynb")
    matches = [stem for stem in CHAPTERS if name in (stem, stem[:2], stem[3:], CHAPTERS[stem])]
    if len(matches) != 1:
        raise ValueError(f"{name!r} names no chapter (one of {', '.join(CHAPTERS)})")
    return matches[0]


def chapter_sources(exercises_folder: Path, module: str) -> list[Path]:
    """The source files of chapter ``module`` under an ``exercises`` folder (this package's, or
    a copy's): its one module, or every module of its package."""
    single = Path(exercises_folder) / f"{module}.py"
    if single.exists():
        return [single]
    return sorted((Path(exercises_folder) / module).glob("*.py"))


def chapter_exercises(module_name: str) -> list[Exercise]:
    module = importlib.import_module(f"course_utils.exercises.{module_name}")
    return [value for value in vars(module).values() if isinstance(value, Exercise)]


def all_exercises() -> dict[str, list[Exercise]]:
    """Every exercise of the course, per chapter, in the order each module defines them."""
    return {chapter: chapter_exercises(module) for chapter, module in CHAPTERS.items()}
