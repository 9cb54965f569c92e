"""Shared fixtures: no test touches the learner's real progress file or strict setting."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_course_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(tmp_path / "progress.json"))
    monkeypatch.delenv("COURSE_NO_PROGRESS", raising=False)
    monkeypatch.delenv("COURSE_STRICT", raising=False)
    monkeypatch.delenv("COURSE_EXPECT", raising=False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
