"""Each finished chapter covers its syllabus points, and every exercise is wired to a check."""

import re
from pathlib import Path

import nbformat
import pytest

from course_utils import syllabus
from course_utils.exercises import CHAPTERS as EXERCISE_MODULES
from course_utils.exercises import chapter_exercises

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
CHECK_CALL = re.compile(r"\bex\.(\w+)\.check\(")


def point_of(cell):
    tags = [t for t in cell.metadata.get("tags", []) if t.startswith("point:")]
    return tags[0].split(":", 1)[1] if tags else None


def test_there_are_finished_chapters():
    assert SOLUTIONS, "solutions/ holds no notebook"


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_every_syllabus_point_opens_a_section_in_order(path):
    chapter = syllabus.chapter(path.stem)
    nb = nbformat.read(path, as_version=4)
    tagged = [point_of(c) for c in nb.cells if point_of(c)]
    for cell in nb.cells:
        if point_of(cell):
            assert cell.cell_type == "markdown", f"point:{point_of(cell)} must tag a markdown cell"
    expected = [p.id for p in chapter.points]
    missing = sorted(set(expected) - set(tagged))
    assert not missing, f"{path.name} has no cell tagged point:{', point:'.join(missing)}"
    assert len(tagged) == len(set(tagged)), f"{path.name} tags a point twice: {tagged}"
    assert set(tagged) <= set(expected), f"{path.name} tags points of another chapter: {tagged}"


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_every_practised_point_has_a_graded_exercise(path):
    chapter = syllabus.chapter(path.stem)
    nb = nbformat.read(path, as_version=4)
    sections, current = {}, None
    for cell in nb.cells:
        current = point_of(cell) or current
        if current and cell.metadata.get("nbgrader", {}).get("grade"):
            sections.setdefault(current, []).append(cell.metadata["nbgrader"]["grade_id"])
    for point in chapter.points:
        if point.practised:
            assert sections.get(point.id), f"{path.name}: point {point.id} is practised but has no check cell"


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_check_cells_and_exercises_match_one_to_one(path):
    module = EXERCISE_MODULES[path.stem]
    defined = {exercise.name for exercise in chapter_exercises(module)}
    nb = nbformat.read(path, as_version=4)
    checked = []
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            calls = CHECK_CALL.findall(cell.source)
            assert len(calls) == 1, f"check cell {cell.metadata['nbgrader']['grade_id']} must call one check"
            checked += calls
    assert sorted(checked) == sorted(defined), (
        f"{path.name}: checks {sorted(checked)}, but the module {module} defines {sorted(defined)}"
    )


def test_exercise_modules_follow_the_syllabus_order():
    order = [c.notebook for c in syllabus.CHAPTERS]
    assert list(EXERCISE_MODULES) == [n for n in order if n in EXERCISE_MODULES]


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_every_exercise_opens_with_a_marked_heading(path):
    """README: "solve the exercises marked ✎". A learner scanning a chapter, and the website's
    table of contents, find each exercise by its "✎ Exercise:" heading, one per check."""
    nb = nbformat.read(path, as_version=4)
    heading = re.compile(r"^#{2,4} ✎ Exercise: \S", re.MULTILINE)
    since_heading = 0  # exercise headings seen since the last check cell
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            since_heading += len(heading.findall(cell.source))
        elif cell.metadata.get("nbgrader", {}).get("grade"):
            name = cell.metadata["nbgrader"]["grade_id"]
            assert since_heading == 1, f"{path.name}: {name} has {since_heading} '✎ Exercise:' headings before it"
            since_heading = 0
