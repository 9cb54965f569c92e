"""The line per part that `./course test` prints comes from conftest.py's summary hook."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SOME_OUTCOMES = """\
import pytest

def test_one():
    pass

def test_two():
    pass

def test_three():
    assert False, "fails on purpose"

@pytest.mark.skip(reason="skipped on purpose")
def test_four():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("a fixture that errors on purpose")

def test_five(broken):
    pass
"""


def run_with_summary(tmp_path: Path, *extra: str, summary: bool = True):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_outcomes.py").write_text(SOME_OUTCOMES)
    summary_file = tmp_path / "summary.txt"
    env = {k: v for k, v in os.environ.items()
           if k not in ("REQUIRE_GPU", "PYTEST_ADDOPTS", "COURSE_SUMMARY_FILE")}
    if summary:
        env["COURSE_SUMMARY_FILE"] = str(summary_file)
    run = subprocess.run(
        # -p conftest loads the course's root conftest.py (cwd is on sys.path with -m).
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), *extra, str(tests)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    return run, summary_file.read_text().splitlines() if summary_file.exists() else []


@pytest.mark.parametrize("extra", [("-p", "no:xdist"), ("-n", "2")], ids=["one process", "two workers"])
def test_the_summary_counts_each_outcome_once(tmp_path, extra):
    run, lines = run_with_summary(tmp_path, *extra)
    assert run.returncode == 1, run.stdout + run.stderr
    # a fixture error counts as a failure: the learner's part did not pass
    assert [line.split(None, 2)[-1] for line in lines[:-1]] == ["2 passed, 2 failed, 1 skipped"]
    assert lines[0].startswith("unit tests")
    assert lines[-1] == "total: 2 passed, 2 failed, 1 skipped"


def test_without_the_variable_nothing_is_written(tmp_path):
    run, lines = run_with_summary(tmp_path, "-p", "no:xdist", summary=False)
    assert run.returncode == 1, run.stdout + run.stderr
    assert lines == [] and sorted(p.name for p in tmp_path.iterdir()) == ["tests"]


def load_root_conftest():
    spec = importlib.util.spec_from_file_location("course_root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_test_is_filed_under_its_part_of_the_test_command(tmp_path, monkeypatch):
    hooks = load_root_conftest()
    assert hooks._part_of("tests/test_env.py::test_x") == "unit tests"
    assert hooks._part_of("notebooks/01_tensors.ipynb::Cell 3") == (
        "learner notebooks (every exercise not attempted)")
    assert hooks._part_of("solutions/01_tensors.ipynb::Cell 3") == (
        "solution notebooks (every exercise passed)")
    run = tmp_path / ".course" / "test-runs" / "rocm"
    run.mkdir(parents=True)
    (run / "run-env.json").write_text(json.dumps({"LABEL": "chapter 00 on ROCm"}))
    monkeypatch.setattr(hooks, "ROOT", tmp_path)
    assert hooks._part_of(".course/test-runs/rocm/00_environment.ipynb::Cell 1") == "chapter 00 on ROCm"
    # a run folder without its settings file is named by the folder
    assert hooks._part_of(".course/test-runs/other/00.ipynb::Cell 1") == "other"
