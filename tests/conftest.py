"""Shared fixtures: no test touches the learner's real progress file, or inherits the test command's
settings (strict, expected outcome, static widgets)."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_course_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(tmp_path / "progress.json"))
    monkeypatch.delenv("COURSE_NO_PROGRESS", raising=False)
    monkeypatch.delenv("COURSE_STRICT", raising=False)
    monkeypatch.delenv("COURSE_EXPECT", raising=False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    # ./course test sets it for nbval's headless kernels; unit tests choose for themselves.
    monkeypatch.delenv("COURSE_STATIC_WIDGETS", raising=False)
