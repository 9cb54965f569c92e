"""The grader on right answers written every way learners write them, and on honest mistakes.

One batch, one grader run over the grading course (tests/grading_course/: chapters 01 and 02):
learners whose answer cells are right, each in other styles (tests/answer_cell_styles.py:
imports at the top or inside, helpers, decorators, type hints, a lambda, a callable object, ...),
must score full marks, in the grading kernel itself, on whatever Python runs the tests; a
learner with typical wrong answers must get, for each, the mistake their own check names in
the notebook, never an accusation of tampering.
"""

from __future__ import annotations

import shutil

import pytest

import answer_cell_styles as styles
import grading_fixtures as gf
from grading_fixtures import TENSORS
from test_grading_options import grade, results

from course_utils.exercises import tensors

CHAPTERS = ("01_tensors", "02_autograd")
# Honest wrong answers: the usual ones (grading_fixtures.WRONG), and two the issue saw reported
# as tampering (a loop in outer_sum; a probe that stops early on flatten_transposed).
HONEST = dict(gf.WRONG, outer_sum=(
    "def outer_sum(a, b):\n    return torch.stack([row + b for row in a])\n"))


def _learners() -> dict[str, dict[str, dict[str, tuple[str, str]]]]:
    """learner -> chapter -> grade_id -> (style, answer cell)."""
    learners = {}
    for chapter in CHAPTERS:
        for index, answers in enumerate(styles.learners(chapter)):
            learners.setdefault(f"style{index}", {})[chapter] = answers
        learners.setdefault("helper", {})[chapter] = styles.helper_in_an_earlier_cell(chapter)
    return learners


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading-styles")
    course = base / "course"
    (course / "notebooks").mkdir(parents=True)
    for chapter in CHAPTERS:
        shutil.copy2(gf.NOTEBOOKS / f"{chapter}.ipynb", course / "notebooks" / f"{chapter}.ipynb")
    submissions = base / "submissions"
    learners = _learners()
    for learner, chapters in learners.items():
        for chapter, answers in chapters.items():
            nb = gf.submission(chapter, answers={name: source for name, (_, source) in answers.items()})
            gf.write_submission(submissions, learner, nb, chapter=chapter)
    gf.write_submission(submissions, "honest", gf.submission(answers=HONEST))
    out = base / "results"
    run = grade(submissions, out, course)
    assert run.returncode == 0, run.log()
    return learners, results(out)


def test_right_answers_in_every_style_score_full_marks(graded):
    learners, found = graded
    problems = []
    for learner, chapters in learners.items():
        for chapter, answers in chapters.items():
            exercises = found[learner]["notebooks"][chapter]["exercises"]
            for name, (style, source) in answers.items():
                entry = exercises[name]
                if entry["score"] != 1:
                    problems.append(f"{learner} {chapter}/{name} in style {style}: {entry['outcome']}: "
                                    f"{entry['reason']}\n{source}")
    assert not problems, "\n\n".join(problems)


def test_every_style_was_graded(graded):
    learners, _ = graded
    used = {style for chapters in learners.values() for answers in chapters.values() for style, _ in answers.values()}
    assert used == {f.__name__ for f in styles.STYLES} | {"helper_in_an_earlier_cell"}


def test_an_honest_mistake_is_named_as_in_the_notebook(graded):
    _, found = graded
    exercises = found["honest"]["notebooks"][TENSORS]["exercises"]
    namespace = {"torch": __import__("torch")}
    for name, source in HONEST.items():
        exec(source, namespace)
        practice = getattr(tensors, name).verdict(namespace[name])
        entry = exercises[name]
        assert entry["score"] == 0, (name, entry)
        assert "changed from inside the notebook" not in entry["reason"], (name, entry["reason"])
        assert (entry["outcome"], entry["mistake"]) == (practice.outcome.value, practice.mistake), (name, entry)
