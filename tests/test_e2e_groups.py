"""The end-to-end groups (tests/e2e_groups.py): what ``./course test`` leaves out, what
``./course test-e2e`` runs, and when ``--if-changed`` may skip a group that passed before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import e2e_groups
from e2e_groups import GROUPS, RECORD

ROOT = Path(__file__).resolve().parents[1]


def collected(*args: str) -> list[str]:
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-p", "no:randomly", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return [line for line in run.stdout.splitlines() if "::" in line]


def test_every_id_a_group_names_is_a_collected_test_of_that_group():
    ids = collected(*dict.fromkeys(file for group in GROUPS.values() for file in group.files))
    for name, group in GROUPS.items():
        for test in group.tests:
            mine = [nodeid for nodeid in ids if nodeid.startswith(test)]
            assert mine, f"{name}: {test} names no test"
            assert {e2e_groups.group_of(nodeid) for nodeid in mine} == {name}, test


def test_the_test_command_leaves_the_groups_out_and_test_e2e_takes_only_them():
    """tests/test_hosted.py holds both: its set-up cell's unit tests stay in ./course test."""
    landing = collected("tests/test_hosted.py", "tests/test_grading_units.py", "tests/test_grading_stops.py",
                        "--landing")
    assert landing and not [nodeid for nodeid in landing if e2e_groups.group_of(nodeid)]
    assert any(nodeid.startswith("tests/test_hosted.py::test_") for nodeid in landing)
    assert any(nodeid.startswith("tests/test_grading_units.py::") for nodeid in landing)
    hosted = collected("tests/test_hosted.py", "tests/test_grading_stops.py", "--e2e-group", "hosted")
    assert hosted and {e2e_groups.group_of(nodeid) for nodeid in hosted} == {"hosted"}
    assert any("::TestChapter07_reliable_practice::" in nodeid for nodeid in hosted)


# --- when a group's inputs changed ---------------------------------------------------------------

LAYOUT = {
    "course_utils/checks.py": "x = 1\n",
    "notebooks/01_tensors.ipynb": "{}\n",
    "solutions/01_tensors.ipynb": "{}\n",
    "tools/time_checks.py": "pass\n",
    "tests/grading_course/notebooks/01_tensors.ipynb": "{}\n",
    "tests/grading_fixtures.py": "pass\n",
    "tests/test_grading_hostile.py": "def test_a(): pass\n",
    "tests/test_hosted.py": "def test_a(): pass\n",
    "tests/test_plots.py": "def test_a(): pass\n",
    "tests/browser/test_site.py": "def test_a(): pass\n",
    "book/conf.py": "pass\n",
    "requirements.txt": "torch==2.13.0\n",
    "INSTRUCTORS.md": "# Instructors\n",
    ".gitignore": "/runs/\n",
}


@pytest.fixture
def course(tmp_path, monkeypatch):
    monkeypatch.setattr(e2e_groups, "_sandbox", lambda: "bubblewrap")
    for path, text in LAYOUT.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "course"], cwd=tmp_path, check=True)
    e2e_groups.record_pass(list(GROUPS), e2e_groups.digests(tmp_path), tmp_path)
    assert e2e_groups.stale(tmp_path) == []
    return tmp_path


CHANGES = [
    ("course_utils/checks.py", "x = 2\n", ["grader", "hosted", "tools"]),
    ("course_utils/new_check.py", "y = 1\n", ["grader", "hosted", "tools"]),  # new, not yet added
    ("tests/grading_fixtures.py", "# helper\n", ["grader", "hosted", "tools"]),
    ("requirements.txt", "torch==2.14.0\n", ["grader", "hosted", "tools"]),
    ("notebooks/01_tensors.ipynb", "{ }\n", ["hosted", "tools"]),
    ("solutions/01_tensors.ipynb", "{ }\n", ["grader", "hosted", "tools"]),  # what hostile answers steal
    ("solutions/03_models.ipynb", "{ }\n", ["hosted", "tools"]),
    ("tests/grading_course/notebooks/01_tensors.ipynb", "{ }\n", ["grader"]),
    ("tests/test_grading_hostile.py", "def test_b(): pass\n", ["grader"]),
    ("tests/test_hosted.py", "def test_b(): pass\n", ["hosted"]),
    ("tools/time_checks.py", "pass  # faster\n", ["tools"]),
    ("INSTRUCTORS.md", "# Instructors, again\n", ["tools"]),
    (".gitignore", "my-work/\n", ["tools"]),
    ("tests/test_plots.py", "def test_b(): pass\n", []),  # a test of the test command
    ("tests/browser/test_site.py", "def test_b(): pass\n", []),
    ("book/conf.py", "x = 1\n", []),
    ("runs/log.txt", "ignored by git\n", []),
]


@pytest.mark.parametrize("path, text, stale", CHANGES, ids=[change[0] for change in CHANGES])
def test_a_change_makes_stale_exactly_the_groups_that_read_it(course, path, text, stale):
    (course / path).parent.mkdir(parents=True, exist_ok=True)
    (course / path).write_text(text)
    assert e2e_groups.stale(course) == stale


def test_a_pass_without_a_sandbox_does_not_count_for_a_machine_with_one(course, monkeypatch):
    monkeypatch.setattr(e2e_groups, "_sandbox", lambda: "no sandbox")
    assert e2e_groups.stale(course) == list(GROUPS)


def test_outside_a_git_clone_every_group_is_stale(tmp_path):
    (tmp_path / RECORD).parent.mkdir(parents=True)
    (tmp_path / RECORD).write_text(json.dumps({name: {"inputs": "0"} for name in GROUPS}))
    assert e2e_groups.stale(tmp_path) == list(GROUPS)


# --- running them ----------------------------------------------------------------------------------


class Runner:
    def __init__(self, rc: int):
        self.rc, self.commands = rc, []

    def __call__(self, command, cwd):
        self.commands.append(command)
        return self.rc


def test_if_changed_runs_only_the_stale_groups_and_records_their_pass(course):
    (course / "notebooks/01_tensors.ipynb").write_text("{ }\n")
    said, runner = [], Runner(0)
    assert e2e_groups.run([], True, [], course, runner, said.append) == 0
    [command] = runner.commands
    files = [arg for arg in command if arg.startswith("tests/")]
    assert files == list(GROUPS["hosted"].files + GROUPS["tools"].files)
    assert command[command.index("--e2e-group") + 1] == "hosted" and command.count("--e2e-group") == 2
    assert "grader: passed before on these very inputs" in said[0]
    assert e2e_groups.stale(course) == []
    again = Runner(0)
    assert e2e_groups.run([], True, [], course, again, said.append) == 0
    assert again.commands == []


def test_a_failed_run_records_nothing(course):
    (course / "course_utils/checks.py").write_text("x = 3\n")
    before = (course / RECORD).read_text()
    assert e2e_groups.run(["grader"], False, [], course, Runner(1), lambda line: None) == 1
    assert (course / RECORD).read_text() == before
    assert e2e_groups.stale(course) == list(GROUPS)


def test_a_run_with_pytest_options_is_not_recorded(course):
    (course / "course_utils/checks.py").write_text("x = 3\n")
    said, runner = [], Runner(0)
    assert e2e_groups.run(["grader"], False, ["-k", "fork"], course, runner, said.append) == 0
    assert runner.commands[0][-2:] == ["-k", "fork"]
    assert "grader" in e2e_groups.stale(course)
    assert "not recorded" in said[-1]


def test_a_group_asked_for_by_name_runs_even_when_it_passed_before(course):
    runner = Runner(0)
    assert e2e_groups.run(["tools"], False, [], course, runner, lambda line: None) == 0
    assert len(runner.commands) == 1


def test_an_unknown_group_is_refused_by_name(course):
    said, runner = [], Runner(0)
    assert e2e_groups.run(["graders"], False, [], course, runner, said.append) == 2
    assert runner.commands == [] and "no group named graders" in said[0]


def test_the_record_in_the_course_names_only_groups_that_exist():
    recorded = json.loads((ROOT / RECORD).read_text())
    assert set(recorded) <= set(GROUPS)
    assert all(len(entry["inputs"]) == 64 for entry in recorded.values())
