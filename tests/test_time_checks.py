"""tools/time_checks.py times every exercise's check on its reference, first call and warm."""

import json
import subprocess
import sys
from pathlib import Path

from course_utils.exercises import all_exercises

ROOT = Path(__file__).resolve().parents[1]


def test_every_exercise_is_timed_and_its_reference_passes(tmp_path):
    out = tmp_path / "times.json"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "time_checks.py"), "--repeat", "1",
                          "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads(out.read_text())
    assert sorted(row["id"] for row in rows) == sorted(
        e.id for exercises in all_exercises().values() for e in exercises)
    assert all(row["passed"] and row["first_s"] > 0 and row["warm_s"] > 0 for row in rows)
    firsts = [row["first_s"] for row in rows]
    assert firsts == sorted(firsts, reverse=True), "the slowest first call comes first"
    assert run.stdout.splitlines()[0].split() == ["exercise", "first", "call", "warm", "call"]


def test_fresh_runs_each_chapter_in_its_own_process(tmp_path):
    """Two exercises of two chapters: each chapter in a process of its own, only those rows.
    (Every chapter fresh takes 40 s on two cores; the code is the same for two.)"""
    out = tmp_path / "times.json"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "time_checks.py"), "--fresh", "--repeat", "1",
                          "tensors.outer_sum", "autograd.softplus", "--json", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads(out.read_text())
    assert sorted(row["id"] for row in rows) == ["autograd.softplus", "tensors.outer_sum"]
    assert all(row["passed"] for row in rows)


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
