"""The order a batch grades in: the longest expected learner first, judges loaded before any.

With two workers, a long notebook graded last runs alone while the other worker waits; these
tests hold the grader to starting the long ones first, from the measured chapter times.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from course_utils.exercises import CHAPTERS
from course_utils.grading import batch as batch_module
from course_utils.grading.batch import Batch, run_batch
from course_utils.grading.sandbox import Limits
from course_utils.grading.schedule import chapter_seconds, expected_seconds, longest_first
from course_utils.grading.submissions import Learner, discover


def _learner(name: str, *chapters: str) -> Learner:
    return Learner(name, [Path(f"/submissions/{name}/{chapter}.ipynb") for chapter in chapters])


def test_every_chapter_has_a_measured_time():
    seconds = chapter_seconds()
    assert set(seconds) == set(CHAPTERS)
    assert all(value > 0 for value in seconds.values())


def test_a_learner_costs_the_sum_of_their_notebooks():
    seconds = chapter_seconds()
    both = _learner("both", "00_environment", "05_speed_and_memory")
    assert expected_seconds(both) == seconds["00_environment"] + seconds["05_speed_and_memory"]
    assert expected_seconds(_learner("none")) == 0
    # A notebook named otherwise still costs something: a chapter of middling length.
    renamed = expected_seconds(_learner("renamed", "my homework"))
    assert min(seconds.values()) <= renamed <= max(seconds.values())


def test_longest_first_keeps_the_order_of_equals():
    seconds = chapter_seconds()
    longest = max(seconds, key=seconds.get)
    shortest = min(seconds, key=seconds.get)
    learners = [_learner("a", shortest), _learner("b", longest), _learner("c", shortest),
                _learner("d", shortest, longest)]
    assert [l.id for l in longest_first(learners, lambda l: l)] == ["d", "b", "a", "c"]


GRADED = "graded-order.txt"


def _recording_grader(learner, batch, sandbox):
    """Stands in for grading: notes the learner, and the process that graded it."""
    with open(batch.out / GRADED, "a", encoding="utf-8") as file:
        file.write(f"{os.getpid()} {learner.id}\n")
    return {"learner": learner.id, "sandbox": sandbox, "notebooks": {}, "problems": [], "total": 0, "max": 0}


@pytest.mark.parametrize("sandbox", ["bubblewrap", "none: a test"])
def test_run_batch_grades_the_longest_first_with_the_judges_loaded(tmp_path, monkeypatch, sandbox):
    """Every process that grades has loaded the judges before its first learner; where workers
    are forked (Linux), and everywhere without a sandbox, the grading process loads them before
    any worker exists."""
    seconds = chapter_seconds()
    order = sorted(seconds, key=seconds.get)  # shortest first: the folder's order is the worst
    submissions = tmp_path / "submissions"
    for index, chapter in enumerate(order):
        folder = submissions / f"learner{index}"
        folder.mkdir(parents=True)
        (folder / f"{chapter}.ipynb").write_text("{}")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(batch_module, "_grade_safely", _recording_grader)
    real_load_judges = batch_module.load_judges

    def recording_load_judges(exam=False):
        real_load_judges(exam)
        loaded = all(f"course_utils.exercises.{module}" in sys.modules for module in CHAPTERS.values())
        with open(out / GRADED, "a", encoding="utf-8") as file:
            file.write(f"{os.getpid()} judges-loaded={loaded}\n")

    monkeypatch.setattr(batch_module, "load_judges", recording_load_judges)
    batch = Batch(Path(__file__).resolve().parents[1], submissions, out, Limits(), use_cache=False,
                  no_sandbox=sandbox != "bubblewrap")
    run_batch(batch, discover(submissions), 1, lambda line: None, sandbox)
    lines = [line.split() for line in (out / GRADED).read_text().splitlines()]
    graded = [what for _, what in lines if what.startswith("learner")]
    assert graded == [f"learner{i}" for i in reversed(range(len(order)))]
    ready = set()
    for pid, what in lines:
        if what.startswith("judges"):
            assert what == "judges-loaded=True"
            ready.add(pid)
        else:
            assert pid in ready or str(os.getpid()) in ready, f"{what} graded before its process loaded the judges"
    forked = batch_module._start_method() == "fork"
    assert (str(os.getpid()) in ready) == (sandbox != "bubblewrap" or forked), (
        "loaded before any worker when the workers are forked (once, not once per worker), or without a sandbox")
