"""REQUIRE_GPU=1 (the GPU CI job) stops the run when torch sees no accelerator."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.env import pick_device

ROOT = Path(__file__).resolve().parents[1]


def run_pytest_on(test_file: Path, require_gpu: str | None):
    env = {k: v for k, v in os.environ.items() if k != "REQUIRE_GPU"}
    if require_gpu is not None:
        env["REQUIRE_GPU"] = require_gpu
    return subprocess.run(
        # -p conftest loads the course's root conftest.py (cwd is on sys.path with -m).
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:xdist", "-p", "no:cacheprovider",
         "--rootdir", str(test_file.parent), str(test_file)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.fixture
def trivial_test(tmp_path):
    path = tmp_path / "test_trivial.py"
    path.write_text("def test_nothing():\n    pass\n")
    return path


@pytest.mark.skipif(pick_device().type != "cpu", reason="this machine has an accelerator")
def test_without_an_accelerator_the_run_fails_at_once(trivial_test):
    result = run_pytest_on(trivial_test, "1")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "REQUIRE_GPU=1 but torch sees no accelerator" in result.stdout + result.stderr


def test_without_the_variable_the_same_run_passes(trivial_test):
    result = run_pytest_on(trivial_test, None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "course device:" in result.stdout
