"""tools/time_checks.py times every exercise's check on its reference, first call and warm."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.exercises import all_exercises

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fresh_run(tmp_path_factory):
    """One run over every check, each chapter in a process of its own (``--fresh``): it times
    every check, as the run in one process does, and also the process per chapter. (Two runs,
    one of each kind, timed every check twice: a minute of the test command.)"""
    out = tmp_path_factory.mktemp("time-checks") / "times.json"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "time_checks.py"), "--fresh",
                          "--repeat", "1", "--json", str(out)], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return run, json.loads(out.read_text())


def test_every_exercise_is_timed_and_its_reference_passes(fresh_run):
    run, rows = fresh_run
    assert sorted(row["id"] for row in rows) == sorted(
        e.id for exercises in all_exercises().values() for e in exercises)
    assert all(row["passed"] and row["first_s"] > 0 and row["warm_s"] > 0 for row in rows)
    firsts = [row["first_s"] for row in rows]
    assert firsts == sorted(firsts, reverse=True), "the slowest first call comes first"
    assert run.stdout.splitlines()[0].split() == ["exercise", "first", "call", "warm", "call"]


def test_exercises_are_named_as_mutate_checks_names_them(tmp_path):
    out = tmp_path / "times.json"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "time_checks.py"), "--repeat", "1",
                          "tensors.outer_sum", "autograd.softplus", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads(out.read_text())  # in this one process (no --fresh)
    assert sorted(row["id"] for row in rows) == ["autograd.softplus", "tensors.outer_sum"]
    assert all(row["passed"] for row in rows)
    wrong = subprocess.run([sys.executable, str(ROOT / "tools" / "time_checks.py"), "tensors"],
                           capture_output=True, text=True, timeout=300)
    assert wrong.returncode == 2 and "no such exercise: tensors" in wrong.stderr
