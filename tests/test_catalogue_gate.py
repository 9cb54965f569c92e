"""Every exercise of the course has its catalogue of answers (see tests/exercise_catalogue.py).

Each exercise's ``tests/catalogue/<chapter>/test_<exercise>.py`` (or a chapter's
``tests/test_exercises_<chapter>.py``) runs its own catalogue; this module only holds every
exercise to the minimum counts, so a new exercise cannot ship without one.
"""

import pytest

from course_utils.exercises import CHAPTERS, chapter_exercises
from exercise_catalogue import (MIN_RIGHT, MIN_WRONG, MIN_WRONG_STATEFUL_OR_EDGE, Catalogue,
                                catalogue_modules, chapter_catalogue)

MODULES = list(CHAPTERS.values())


def catalogue_of(module_name: str) -> Catalogue:
    return chapter_catalogue(module_name)


@pytest.mark.parametrize("module_name", MODULES)
def test_every_exercise_has_its_catalogue(module_name):
    catalogue = catalogue_of(module_name)
    short = []
    for exercise in chapter_exercises(module_name):
        counts = catalogue.counts(exercise)
        if (counts["wrong"] < MIN_WRONG or counts["right"] < MIN_RIGHT
                or counts["stateful_or_edge"] < MIN_WRONG_STATEFUL_OR_EDGE):
            short.append(f"{exercise.name}: {counts}")
    assert not short, (
        f"needs at least {MIN_WRONG} wrong answers ({MIN_WRONG_STATEFUL_OR_EDGE} of them stateful "
        f"or edge cases) and {MIN_RIGHT} right ones in other styles:\n" + "\n".join(short)
    )


@pytest.mark.parametrize("module_name", MODULES)
def test_catalogue_entries_belong_to_their_chapter(module_name):
    own = set(map(id, chapter_exercises(module_name)))
    strangers = [e.name for e in catalogue_of(module_name).entries if id(e) not in own]
    assert not strangers, f"exercises of another chapter in this catalogue: {strangers}"


def test_each_test_module_with_a_catalogue_runs_it():
    for module_name in MODULES:
        for tests in catalogue_modules(module_name):
            if getattr(tests, "CATALOGUE", None) is None:
                continue
            runner = getattr(tests, "test_catalogue", None)
            assert runner is not None, f"{tests.__name__} does not run its catalogue"
            marks = [m for m in getattr(runner, "pytestmark", []) if m.name == "parametrize"]
            assert marks and marks[0].args[1] is tests.CATALOGUE.cases, (
                f"{tests.__name__}.test_catalogue must be parametrized over CATALOGUE.cases"
            )
