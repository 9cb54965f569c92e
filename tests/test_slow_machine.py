"""COURSE_TEST_TIME_SCALE: the one knob for the tests' time limits."""

import pytest

from slow_machine import scaled, time_scale


def test_the_scale_is_one_unless_set(monkeypatch):
    monkeypatch.delenv("COURSE_TEST_TIME_SCALE", raising=False)
    assert time_scale() == 1 and scaled(10) == 10


def test_the_scale_multiplies_every_limit(monkeypatch):
    monkeypatch.setenv("COURSE_TEST_TIME_SCALE", "2.5")
    assert scaled(10) == 25


@pytest.mark.parametrize("text", ["fast", "0", "-1"])
def test_a_scale_that_makes_no_sense_is_refused_with_its_value(monkeypatch, text):
    monkeypatch.setenv("COURSE_TEST_TIME_SCALE", text)
    with pytest.raises(ValueError, match=repr(text).replace("-", r"\-")):
        time_scale()


def test_pytest_keeps_each_module_on_one_worker_whoever_runs_it():
    """The grading tests share one graded batch per module, and nbval must run a notebook's
    cells in order in one kernel: a plain `pytest -n 2` must not split them across workers."""
    import re
    import shlex
    from pathlib import Path

    text = (Path(__file__).parents[1] / "pyproject.toml").read_text()  # no tomllib on 3.10
    addopts = shlex.split(re.search(r'^addopts = "([^"]*)"', text, re.M)[1])
    assert addopts[addopts.index("--dist") + 1] == "loadscope"
