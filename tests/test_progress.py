"""Learner progress: recorded on a passed check, never in the way of one."""

import json
import os
import stat

import pytest

from course_utils import progress, progress_store
from course_utils.exercises import environment as ex


def test_a_passed_check_is_recorded_and_shown_per_chapter(capsys):
    ex.seeded_draw.check(ex.seeded_draw.reference)
    progress()
    report = progress_store.progress_report()
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
