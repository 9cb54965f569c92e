"""The grader grades only in a sandbox that works, or without one when told ``--no-sandbox``.

Whether bubblewrap is installed here or not, these tests take it away (a PATH without it) or
replace it (a fake ``bwrap`` that fails), so they pass on both kinds of machine. Two of them
run the grader's command line end to end; the rest call it, or its Python API, in-process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import grading_fixtures as gf
from course_utils.grading import __main__ as cli
from course_utils.grading import batch as batch_module
from course_utils.grading import sandbox
from course_utils.grading.batch import Batch, cache_key, course_notebooks, grade_learner, run_batch
from course_utils.grading.sandbox import Limits, SandboxUnavailable
from course_utils.grading.submissions import discover

PYTHON = sys.executable
INSTALL_WORDS = ("sudo apt install bubblewrap", "sudo dnf install bubblewrap", "Linux", "macOS",
                 "--no-sandbox")
NAMESPACES_REFUSED = ("bwrap: No permissions to creating new namespace, likely because the kernel "
                      "does not allow non-privileged user namespaces.")


@pytest.fixture
def no_bwrap(tmp_path, monkeypatch) -> str:
    """A PATH with no bwrap on it, for this process and the grader it starts."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert shutil.which("bwrap") is None
    return str(empty)


def fake_bwrap(tmp_path: Path, monkeypatch, body: str) -> Path:
    """A ``bwrap`` that runs ``body`` (sh), alone on PATH."""
    folder = tmp_path / "fake-bin"
    folder.mkdir()
    script = folder / "bwrap"
    script.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    return script


@pytest.fixture
def batch_dirs(tmp_path) -> tuple[Path, Path, Path]:
    """(submissions, out, marker): one learner, right answers, whose first answer cell writes
    ``marker``, so that the file shows whether a kernel ran the submission."""
    submissions, out, marker = tmp_path / "submissions", tmp_path / "results", tmp_path / "kernel-ran"
    code = f"open({str(marker)!r}, 'w').write('ran')\n"
    gf.write_submission(submissions, "alice", gf.submission(prepend={"match_reference": code}))
    return submissions, out, marker


def grader(submissions: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"COURSE_STRICT", "COURSE_EXPECT", "NBGRADER_EXECUTION"}}
    env["COURSE_NO_PROGRESS"] = "1"
    return subprocess.run(
        [PYTHON, "-m", "course_utils.grading", str(submissions), "--out", str(out), "--workers", "1",
         "--cell-timeout", "60", "--course", str(gf.GRADING_COURSE), *extra],
        cwd=gf.ROOT, env=env, capture_output=True, text=True, timeout=600)


def refuse_to_grade(monkeypatch) -> None:
    """Make any grading at all fail the test: the refusal must come first."""
    def must_not_run(*args, **kwargs):
        raise AssertionError("grading started although there is no sandbox")

    monkeypatch.setattr(cli, "run_batch", must_not_run)
    monkeypatch.setattr(cli, "discover", must_not_run)
    monkeypatch.setattr(batch_module, "grade_learner", must_not_run)


# --------------------------------------------------------------------------------------------
# The command line, end to end
# --------------------------------------------------------------------------------------------
def test_without_bwrap_the_grader_refuses_before_anything_runs(no_bwrap, batch_dirs):
    submissions, out, marker = batch_dirs
    before = gf.tree_digest(submissions)
    run = grader(submissions, out)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Refusing to grade" in run.stderr and "not installed" in run.stderr, run.stderr
    for words in INSTALL_WORDS:
        assert words in run.stderr, (words, run.stderr)
    assert "Grading" not in run.stdout, run.stdout
    assert not out.exists(), sorted(out.rglob("*"))
    assert not marker.exists(), "a kernel ran the submission"
    assert gf.tree_digest(submissions) == before


def test_with_no_sandbox_it_grades_and_every_result_says_none(no_bwrap, batch_dirs):
    submissions, out, marker = batch_dirs
    run = grader(submissions, out, "--no-sandbox")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "WARNING: not sandboxed" in run.stderr, run.stderr
    result = json.loads((out / "alice.json").read_text(encoding="utf-8"))
    assert result["sandbox"].startswith("none: switched off with --no-sandbox"), result["sandbox"]
    assert "not installed" in result["sandbox"], result["sandbox"]
    assert result["total"] == result["max"] == len(gf.TENSOR_EXERCISES), result
    assert marker.read_text() == "ran"
    assert (out / "gradebook.csv").exists() and (out / "feedback" / "alice.html").exists()


# --------------------------------------------------------------------------------------------
# The command line, in-process: bwrap there but unable to sandbox
# --------------------------------------------------------------------------------------------
def test_a_bwrap_that_cannot_make_a_sandbox_is_refused_with_its_reason(
        tmp_path, monkeypatch, capsys, batch_dirs):
    submissions, out, marker = batch_dirs
    fake_bwrap(tmp_path, monkeypatch, f"echo '{NAMESPACES_REFUSED}' >&2\nexit 1\n")
    refuse_to_grade(monkeypatch)
    code = cli.main([str(submissions), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "bwrap is installed but cannot create a sandbox here" in err, err
    assert NAMESPACES_REFUSED in err, err
    for words in INSTALL_WORDS:
        assert words in err, (words, err)
    assert not out.exists() and not marker.exists()


def test_a_bwrap_that_exits_0_without_running_anything_is_refused(tmp_path, monkeypatch):
    fake_bwrap(tmp_path, monkeypatch, "exit 0\n")
    problem = sandbox.bubblewrap_problem()
    assert problem is not None and "cannot create a sandbox" in problem
    with pytest.raises(SandboxUnavailable, match="exited with 0"):
        sandbox.choose_sandbox()


def test_a_bwrap_that_hangs_is_refused_after_the_trials_time_limit(tmp_path, monkeypatch):
    fake_bwrap(tmp_path, monkeypatch, "exec /bin/sleep 30\n")
    monkeypatch.setattr(sandbox, "TRIAL_TIMEOUT_S", 1)
    with pytest.raises(SandboxUnavailable, match="did not finish in 1 s"):
        sandbox.choose_sandbox()


def test_with_no_sandbox_a_failing_bwrap_is_not_used_and_the_result_says_why(tmp_path, monkeypatch):
    fake_bwrap(tmp_path, monkeypatch, f"echo '{NAMESPACES_REFUSED}' >&2\nexit 1\n")
    chosen = sandbox.choose_sandbox(no_sandbox=True)
    assert chosen.startswith("none: switched off with --no-sandbox") and NAMESPACES_REFUSED in chosen


def test_off_linux_the_reason_says_bubblewrap_needs_linux(monkeypatch):
    monkeypatch.setattr(sandbox.sys, "platform", "darwin")
    with pytest.raises(SandboxUnavailable, match="bubblewrap needs Linux") as refusal:
        sandbox.choose_sandbox()
    assert "Linux virtual machine" in str(refusal.value)


def test_where_bwrap_works_it_is_the_sandbox():
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed here")
    problem = sandbox.bubblewrap_problem()
    if problem is not None:
        pytest.skip(f"bwrap cannot sandbox here: {problem}")
    assert sandbox.choose_sandbox() == sandbox.SANDBOXED == "bubblewrap"
    assert sandbox.choose_sandbox(no_sandbox=True) == "none: switched off with --no-sandbox"


# --------------------------------------------------------------------------------------------
# The Python API: unsandboxed only when the batch says no_sandbox
# --------------------------------------------------------------------------------------------
def _batch(submissions: Path, out: Path, **kwargs) -> Batch:
    return Batch(gf.GRADING_COURSE, submissions, out, Limits(), **kwargs)


def test_run_batch_refuses_without_a_sandbox_unless_the_batch_says_no_sandbox(
        no_bwrap, batch_dirs, monkeypatch):
    submissions, out, marker = batch_dirs
    learners = discover(submissions)
    monkeypatch.setattr(batch_module, "_grade_safely", lambda *a: pytest.fail("graded without a sandbox"))
    with pytest.raises(SandboxUnavailable, match="not installed"):
        run_batch(_batch(submissions, out), learners, 1, print)
    with pytest.raises(SandboxUnavailable, match="does not say no_sandbox"):
        run_batch(_batch(submissions, out), learners, 1, print, "none: I say so")
    assert not out.exists() and not marker.exists()
    assert run_batch(_batch(submissions, out, no_sandbox=True), [], 1, print) == ([], 0)


def test_grade_learner_refuses_no_sandbox_unless_the_batch_says_so(batch_dirs):
    submissions, out, marker = batch_dirs
    (learner,) = discover(submissions)
    with pytest.raises(SandboxUnavailable):
        grade_learner(learner, _batch(submissions, out), "none: not asked for")
    with pytest.raises(ValueError, match="unknown sandbox"):
        grade_learner(learner, _batch(submissions, out, no_sandbox=True), "bwrap")
    assert not marker.exists()


def test_the_kernel_spec_knows_only_bubblewrap_or_none(tmp_path):
    folder = sandbox.RunFolder(tmp_path / "run")
    with pytest.raises(ValueError, match="unknown sandbox"):
        sandbox.write_kernel_spec(folder, Limits(), "Bubblewrap", [], None)
    sandbox.write_kernel_spec(folder, Limits(), "none: switched off with --no-sandbox", [], None)
    argv = json.loads((folder.kernels / "grading" / "kernel.json").read_text())["argv"]
    assert not any(Path(arg).name == "bwrap" for arg in argv)
    sandbox.write_kernel_spec(folder, Limits(), "bubblewrap", [], None)
    argv = json.loads((folder.kernels / "grading" / "kernel.json").read_text())["argv"]
    assert any(Path(arg).name == "bwrap" for arg in argv) and "--unshare-all" in argv


def test_a_result_made_without_a_sandbox_never_stands_in_for_a_sandboxed_one(batch_dirs):
    submissions, out, _ = batch_dirs
    (learner,) = discover(submissions)
    batch = _batch(submissions, out)
    courses = course_notebooks(batch.course)
    sandboxed = cache_key(learner, batch, courses, "bubblewrap")
    assert cache_key(learner, batch, courses, "none: a") == cache_key(learner, batch, courses, "none: b")
    assert cache_key(learner, batch, courses, "none: a") != sandboxed
