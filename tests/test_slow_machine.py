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


def test_the_longest_modules_go_first_and_each_still_exists():
    """conftest.LONGEST_FIRST names modules that are there (a renamed one would silently lose its
    place), and a collection puts them first, in that order, with pytest-xdist's own reordering
    off."""
    import importlib.util
    import re
    import shlex
    from pathlib import Path

    root = Path(__file__).parents[1]
    spec = importlib.util.spec_from_file_location("course_root_conftest", root / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    assert [m for m in conftest.LONGEST_FIRST if not (root / m).is_file()] == []
    text = (root / "pyproject.toml").read_text()
    assert "--no-loadscope-reorder" in shlex.split(re.search(r'^addopts = "([^"]*)"', text, re.M)[1])

    class Item:
        def __init__(self, nodeid):
            self.nodeid = nodeid

    items = [Item("tests/test_a.py::x"), Item("tests/test_b.py::x"), Item("tests/test_b.py::y"),
             Item(f"{conftest.LONGEST_FIRST[1]}::x"), Item(f"{conftest.LONGEST_FIRST[0]}::z"),
             Item(f"{conftest.LONGEST_FIRST[0]}::a")]
    conftest.pytest_collection_modifyitems(None, None, items)
    assert [i.nodeid for i in items] == [f"{conftest.LONGEST_FIRST[0]}::z", f"{conftest.LONGEST_FIRST[0]}::a",
                                         f"{conftest.LONGEST_FIRST[1]}::x", "tests/test_b.py::x",
                                         "tests/test_b.py::y", "tests/test_a.py::x"]
