"""tools/planted_bugs.py: every bug still plants into today's course, and one that cannot is
reported by name. (Running the bugs' tests is the tool's own job: CI's weekly planted-bugs job.)"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import planted_bugs  # noqa: E402


@pytest.mark.parametrize("bug", planted_bugs.BUGS, ids=lambda bug: bug.name)
def test_every_bug_plants_into_todays_course(bug, tmp_path):
    course = planted_bugs.copy_course(tmp_path)
    before = {edit.path: (course / edit.path).read_bytes() for edit in bug.edits}
    planted_bugs.plant(bug, course)
    for edit in bug.edits:
        assert (course / edit.path).read_bytes() != before[edit.path], edit.path
        assert (ROOT / edit.path).read_bytes() == before[edit.path], "the course itself was edited"
    for test in bug.tests:
        path = test.split("::")[0]
        if not path.startswith(str(planted_bugs.RUNS)):  # the runs are prepared when the tool runs
            assert (course / path).exists(), test


def test_a_bug_whose_text_is_gone_is_reported_by_name(tmp_path):
    course = planted_bugs.copy_course(tmp_path)
    gone = planted_bugs.Bug("gone", "", "", (planted_bugs.Edit("README.md", "no such text anywhere", "x"),),
                            ("tests/test_readme.py",), "x")
    with pytest.raises(LookupError, match="gone: README.md no longer holds"):
        planted_bugs.plant(gone, course)
    cell = planted_bugs.Bug("cell", "", "", (planted_bugs.Edit("notebooks/01_tensors.ipynb", "", "x",
                                                                notebook_cell="no such cell"),), (), "x")
    with pytest.raises(LookupError, match="cell: no code cell of notebooks/01_tensors.ipynb holds 'no such cell'"):
        planted_bugs.plant(cell, course)


def test_the_bugs_have_distinct_names_and_an_unknown_name_is_refused():
    names = [bug.name for bug in planted_bugs.BUGS]
    assert len(names) == len(set(names))
    listed = subprocess.run([sys.executable, str(ROOT / "tools" / "planted_bugs.py"), "--list"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and all(name in listed.stdout for name in names), listed.stderr
    wrong = subprocess.run([sys.executable, str(ROOT / "tools" / "planted_bugs.py"), "no-such-bug"],
                           capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "no such bug: no-such-bug" in wrong.stderr
