"""Learner progress: recorded on a passed check, never in the way of one."""

import json
import os
import stat
import subprocess
import sys

import pytest

from course_utils import progress, progress_store
from course_utils.exercises import all_exercises
from course_utils.exercises import environment as ex


def test_a_passed_check_is_recorded_and_shown_per_chapter(capsys):
    ex.seeded_draw.check(ex.seeded_draw.reference)
    progress()
    report = progress_store.progress_report(exercises=all_exercises())
    chapter = next(c for c in report.chapters if c.chapter == "00_environment")
    assert chapter.done == ["seeded_draw"]
    assert "kernel_environment" in chapter.todo
    out = capsys.readouterr().out
    assert "00_environment" in out and "1/5" in out


def test_failed_checks_and_verdicts_are_not_recorded():
    ex.seeded_draw.check(lambda seed, n: None)
    ex.seeded_draw.verdict(ex.seeded_draw.reference)
    assert progress_store.load()["passed"] == {}


@pytest.mark.parametrize("variable, value", [("COURSE_NO_PROGRESS", "1"), ("COURSE_STRICT", "1")])
def test_test_runs_and_strict_mode_do_not_write(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    ex.seeded_draw.check(ex.seeded_draw.reference)
    assert not progress_store.progress_file().exists()


def test_writes_are_atomic_and_keep_the_first_pass_time():
    path = progress_store.progress_file()
    progress_store.record_pass("environment.seeded_draw")
    first = json.loads(path.read_text())["passed"]["environment.seeded_draw"]["first_passed"]
    progress_store.record_pass("environment.seeded_draw")
    record = json.loads(path.read_text())
    assert record["passed"]["environment.seeded_draw"]["first_passed"] == first
    assert [p.name for p in path.parent.iterdir()] == ["progress.json"]


def test_a_corrupt_file_is_kept_aside_with_a_warning_and_the_check_still_passes():
    path = progress_store.progress_file()
    path.write_text("{ this is not json")
    with pytest.warns(RuntimeWarning, match="unreadable; kept it as progress.json.corrupt-"):
        verdict = ex.seeded_draw.check(ex.seeded_draw.reference)
    assert verdict.passed
    kept = [p for p in path.parent.iterdir() if p.name.startswith("progress.json.corrupt-")]
    assert len(kept) == 1 and kept[0].read_text() == "{ this is not json"
    assert "environment.seeded_draw" in progress_store.load()["passed"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_an_unwritable_folder_gives_a_warning_not_an_error(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(locked / "progress.json"))
    with pytest.warns(RuntimeWarning, match="could not save"):
        assert ex.seeded_draw.check(ex.seeded_draw.reference).passed


def test_a_progress_path_that_is_a_folder_gives_a_warning_not_an_error(tmp_path, monkeypatch):
    folder = tmp_path / "progress.json"
    folder.mkdir()
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(folder))
    with pytest.warns(RuntimeWarning, match="course progress"):
        assert ex.seeded_draw.check(ex.seeded_draw.reference).passed


def test_reset_keeps_the_old_file_aside():
    progress_store.record_pass("environment.seed_check")
    progress_store.reset()
    assert progress_store.load()["passed"] == {}
    kept = [p.name for p in progress_store.progress_file().parent.iterdir()]
    assert any(name.startswith("progress.json.before-reset-") for name in kept)


def test_recording_a_pass_imports_no_exercise(tmp_path):
    """The store knows exercises by id; the exercises import it, so it must not import them."""
    path = tmp_path / "progress.json"
    code = (
        "import sys\n"
        "import course_utils.progress_store as store\n"
        "store.record_pass('environment.seeded_draw')\n"
        "assert 'environment.seeded_draw' in store.load()['passed']\n"
        "print(sorted(m for m in sys.modules if m.startswith('course_utils.exercises')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "COURSE_NO_PROGRESS"}
    env["COURSE_PROGRESS_FILE"] = str(path)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.strip() == "[]"
    assert "environment.seeded_draw" in json.loads(path.read_text())["passed"]


def test_progress_shows_the_exercises_it_is_given():
    progress_store.record_pass("a.one")

    class Listed:
        def __init__(self, name):
            self.name, self.id = name, f"a.{name}"

    report = progress_store.progress_report(exercises={"chapter a": [Listed("one"), Listed("two")]})
    shown = [(c.chapter, c.done, c.todo) for c in report.chapters]
    assert shown == [("chapter a", ["one"], ["two"])]
