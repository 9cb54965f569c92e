"""Exercises, one module per chapter: ``from course_utils.exercises import environment as ex``.

Each module holds ``Exercise`` objects named like the function the learner writes, so a
notebook reads ``ex.known_gradient.check(known_gradient)``.
"""

from __future__ import annotations

import importlib

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


def chapter_exercises(module_name: str) -> list[Exercise]:
    module = importlib.import_module(f"course_utils.exercises.{module_name}")
    return [value for value in vars(module).values() if isinstance(value, Exercise)]


def all_exercises() -> dict[str, list[Exercise]]:
    """Every exercise of the course, per chapter, in the order each module defines them."""
    return {chapter: chapter_exercises(module) for chapter, module in CHAPTERS.items()}
