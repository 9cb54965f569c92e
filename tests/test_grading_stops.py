"""Limits and stops that must not cost a learner more than their own answer (issue 25).

* A notebook that hit a time limit while other notebooks were graded beside it (a busy
  machine) is graded again, alone, once the others are done; a result in which a time or memory
  limit ended a run is never cached, so a plain rerun cannot repeat a zero a busy machine made.
* Stopping the grader (SIGTERM or Ctrl-C to its process group, or SIGKILL to the grader alone)
  ends every worker and every kernel; none grades on, reparented to init.
* A limit reached inside a check names the option that sets it, and costs that exercise only:
  a fork loop (copies of the kernel that would answer in its place, garbling the rest of the
  notebook), an 8 GB allocation, a function that prints without end (not "a loop that never
  ends").
* A learner's folder whose ``01_tensors.ipynb`` holds chapter 02's answers is graded as chapter
  02, and the result says so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

import grading_fixtures as gf
from grading_fixtures import TENSOR_EXERCISES, TENSORS
from slow_machine import scaled
from course_utils.grading.submissions import discover

PYTHON = str(gf.ROOT / ".venv" / "bin" / "python") if (gf.ROOT / ".venv" / "bin" / "python").exists() else sys.executable


def _sandbox_args() -> list[str]:
    from course_utils.grading.sandbox import bubblewrap_problem

    return [] if bubblewrap_problem() is None else ["--no-sandbox"]


def _env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in {"COURSE_STRICT", "COURSE_EXPECT", "NBGRADER_EXECUTION", "COURSE_SIMULATED_MACHINE",
                        "PYTHONPATH"}}
    env.update(COURSE_NO_PROGRESS="1", TMPDIR=str(tmp))
    return env


# --------------------------------------------------------------------------------------------
# A busy machine
# --------------------------------------------------------------------------------------------
def _result(learner: str, outcome: str, busy: bool = True) -> dict:
    entry = {"score": int(outcome == "passed"), "max": 1, "outcome": outcome,
             "reason": "timeout: your answer cell for outer_sum, `x` ran past the cell time limit of 60 s "
                       "(--cell-timeout)" if outcome == "timeout" else "Correct.", "mistake": None}
    notebook = {"exercises": {"outer_sum": entry}, "score": entry["score"], "max": 1, "problems": []}
    if outcome == "timeout" and busy:
        notebook["busy_machine"] = True  # its kernel waited for a core: execute.KernelTime.starved
    return {"learner": learner, "sandbox": "none: a test", "grader_version": "test", "problems": [],
            "notebooks": {TENSORS: notebook}, "total": entry["score"], "max": 1}


# What the stand-in below reads: set before the grader forks its workers, which inherit it.
_BUSY = {}


def _graded_on_a_busy_machine(learner, batch, sandbox):
    """Stands in for grading one learner (picklable: a worker runs it): alice times out on her
    first ``times_out`` gradings, as a busy machine would make her, then she is right."""
    tries = _BUSY["tries"]
    attempt = len(list(tries.glob(f"{learner.id}-*")))
    (tries / f"{learner.id}-{attempt}").touch()
    late = learner.id == "alice" and attempt < _BUSY["times_out"]
    return _result(learner.id, "timeout" if late else "passed", busy=_BUSY["busy"])


@pytest.fixture
def busy_batch(tmp_path, monkeypatch):
    """Two learners graded by the real run_batch (two workers, the cache), with the stand-in
    above for grading one learner."""
    from course_utils.grading import batch as batch_module
    from course_utils.grading.sandbox import Limits

    submissions, out = tmp_path / "submissions", tmp_path / "results"
    for learner in ("alice", "bob"):  # not byte for byte the same: the cache would share them
        gf.write_submission(submissions, learner, gf.submission(append={"outer_sum": f"# {learner}\n"}))
    (tmp_path / "tries").mkdir()
    monkeypatch.setattr(batch_module, "_grade_safely", _graded_on_a_busy_machine)

    def run(times_out: int, busy: bool = True):
        _BUSY.update(tries=tmp_path / "tries", times_out=times_out, busy=busy)
        batch = batch_module.Batch(gf.GRADING_COURSE, submissions, out, Limits(), no_sandbox=True)
        lines = []
        results, cached = batch_module.run_batch(batch, discover(submissions), 2, lines.append, "none: a test")
        return ({r["learner"]: r for r in results}, cached, lines,
                sorted(p.name for p in (tmp_path / "tries").iterdir()))

    return run


def test_a_timed_out_notebook_is_graded_again_alone_and_the_second_result_counts(busy_batch):
    results, cached, lines, tries = busy_batch(times_out=1)
    assert tries == ["alice-0", "alice-1", "bob-0"], tries
    alice = results["alice"]
    assert alice["total"] == 1 and alice["problems"][0].startswith("graded a second time, alone"), alice
    assert "alice: 1/1 (graded again, alone, after a time limit)" in lines, lines
    # ... and the right result is cached: a plain rerun grades nothing
    results, cached, lines, tries = busy_batch(times_out=1)
    assert cached == 2 and tries == ["alice-0", "alice-1", "bob-0"], (cached, tries, lines)


def test_a_timeout_with_a_whole_core_is_not_graded_again(busy_batch):
    """Its kernel never waited for a core: it would run past the limit on an idle machine too,
    and grading it again would only cost the time limit once more."""
    results, cached, lines, tries = busy_batch(times_out=1, busy=False)
    assert tries == ["alice-0", "bob-0"], tries
    assert results["alice"]["total"] == 0 and "alice: 0/1" in lines, lines


def test_a_timeout_is_never_cached(busy_batch):
    results, cached, lines, tries = busy_batch(times_out=9)
    assert results["alice"]["notebooks"][TENSORS]["exercises"]["outer_sum"]["outcome"] == "timeout"
    assert tries == ["alice-0", "alice-1", "bob-0"], tries  # graded again once, alone: still late
    results, cached, lines, tries = busy_batch(times_out=9)
    assert cached == 1 and "alice-2" in tries, (cached, tries)  # bob from the cache, alice graded anew


@pytest.mark.skipif(not os.path.exists("/proc/self/task/%d/schedstat" % os.getpid()),
                    reason="the scheduler's counts (Linux's schedstat) are not kept here")
def test_the_busy_verdict_comes_from_the_time_the_kernel_waited_for_a_core():
    """Three loops on one core each wait about two thirds of the time: starved. A sleep hardly
    computes and never waits: not starved, and said to wait on something, not to compute
    (a share of a core alone would call it a busy machine)."""
    from course_utils.grading.execute import KernelTime, scheduler_counts

    def measure(code: str, copies: int) -> KernelTime:
        pin = lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        processes = [subprocess.Popen([sys.executable, "-c", code], preexec_fn=pin) for _ in range(copies)]
        try:
            time.sleep(0.3)
            before, start = scheduler_counts([processes[0].pid]), time.monotonic()
            time.sleep(1.5)
            after, seconds = scheduler_counts([processes[0].pid]), time.monotonic() - start
        finally:
            for process in processes:
                process.kill()
                process.wait()
        return KernelTime(seconds, after[0] - before[0], after[1] - before[1])

    crowded = measure("while True: pass", copies=3)
    assert crowded.starved and crowded.waited / crowded.seconds > 0.4, crowded
    assert "waited" in crowded.words() and "the machine was busy" in crowded.words(), crowded.words()
    asleep = measure("import time; time.sleep(60)", copies=1)
    assert not asleep.starved and asleep.computed < 0.2 and asleep.waited < 0.2, asleep
    assert "the cell was waiting (a sleep, input, a lock), not computing" in asleep.words(), asleep.words()


def test_without_the_waiting_count_the_share_of_a_core_decides():
    from course_utils.grading.execute import KernelTime

    assert KernelTime(20, 19.6, 0.3).words() == (
        "; the kernel used 98% of a core all along: the cell's own work took that long")
    assert not KernelTime(20, 19.6, 0.3).starved and KernelTime(20, 9, 10).starved
    assert KernelTime(20, 9, None).starved and not KernelTime(20, 18, None).starved
    assert KernelTime(20, 9, None).words() == ("; the kernel got 45% of a core meanwhile: the machine was busy "
                                               "with other work")


# --------------------------------------------------------------------------------------------
# Stopping the grader
# --------------------------------------------------------------------------------------------
def _processes_mentioning(text: str) -> dict[int, str]:
    """Processes whose command line or environment holds ``text`` (this test's private folder)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                cmdline = file.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/environ", "rb") as file:
                environ = file.read().decode(errors="replace")
        except OSError:
            continue
        if text in cmdline or text in environ:
            found[int(entry)] = cmdline[:200]
    return found


def _wait_until(condition, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; ends processes Linux's way")
@pytest.mark.parametrize("how", ["SIGTERM to the group", "Ctrl-C to the group", "SIGKILL to the grader"])
def test_stopping_the_grader_ends_every_worker_and_kernel(tmp_path, how):
    tmp = Path(tempfile.mkdtemp(prefix="grading-stop-"))
    try:
        submissions, out = tmp / "submissions", tmp / "results"
        slow = "import time as _time\n_time.sleep(300)\n"
        for learner in ("alice", "bob"):
            gf.write_submission(submissions, learner, gf.submission(prepend={"match_reference": slow}))
        command = [PYTHON, "-m", "course_utils.grading", str(submissions), "--out", str(out), "--workers", "2",
                   "--cell-timeout", "600", "--course", str(gf.GRADING_COURSE), *_sandbox_args()]
        grader = subprocess.Popen(command, cwd=gf.ROOT, env=_env(tmp), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            kernels = lambda: sum("ipykernel_launcher" in c for c in _processes_mentioning(str(tmp)).values())
            assert _wait_until(lambda: kernels() >= 2, scaled(120)), _processes_mentioning(str(tmp))
            time.sleep(1)  # both answer cells are asleep now
            if how == "SIGKILL to the grader":
                grader.kill()
            else:
                os.killpg(grader.pid, signal.SIGTERM if how.startswith("SIGTERM") else signal.SIGINT)
            grader.wait(timeout=scaled(30))
            assert _wait_until(lambda: not _processes_mentioning(str(tmp)), scaled(15)), (
                f"left running after {how}: {_processes_mentioning(str(tmp))}")
            if how != "SIGKILL to the grader":
                said = grader.stdout.read().decode()
                assert grader.returncode != 0 and "stopped" in said.lower(), said
        finally:
            if grader.poll() is None:
                os.killpg(grader.pid, signal.SIGKILL)
            for pid in _processes_mentioning(str(tmp)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Limits reached inside a check
# --------------------------------------------------------------------------------------------
FORK_LOOP = "def flatten_transposed(x):\n    import os\n    while True:\n        os.fork()\n"
EIGHT_GB = "def outer_sum(a, b):\n    return torch.empty(2 ** 31, dtype=torch.float32)\n"
PRINTS_FOREVER = "def residuals(pred, target):\n    while True:\n        print('x' * 100_000)\n"


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading-limits")
    submissions, out = base / "submissions", base / "results"
    gf.write_submission(submissions, "forker", gf.submission(answers={"flatten_transposed": FORK_LOOP}))
    gf.write_submission(submissions, "greedy", gf.submission(answers={"outer_sum": EIGHT_GB}))
    gf.write_submission(submissions, "chatty", gf.submission(answers={"residuals": PRINTS_FOREVER}))
    # chapter 02's notebook (solved) in dave's folder under chapter 01's name
    (submissions / "dave").mkdir()
    nbformat.write(gf.course_notebook("02_autograd"), submissions / "dave" / f"{TENSORS}.ipynb")
    command = [PYTHON, "-m", "course_utils.grading", str(submissions), "--out", str(out), "--workers", "2",
               "--cell-timeout", f"{scaled(60):g}", "--max-processes", "24", "--memory-mb", "2048",
               "--course", str(gf.GRADING_COURSE), *_sandbox_args()]
    run = subprocess.run(command, cwd=gf.ROOT, env=_env(base), capture_output=True, text=True, timeout=scaled(900))
    assert run.returncode == 0, run.stdout + run.stderr
    results = {learner: json.loads((out / f"{learner}.json").read_text())
               for learner in ("forker", "greedy", "chatty", "dave")}
    return {learner: result["notebooks"][TENSORS]["exercises"] if learner != "dave" else result
            for learner, result in results.items()}


def _only(entries: dict, failed: str) -> None:
    assert {name for name, entry in entries.items() if entry["score"] == 0} == {failed}, json.dumps(entries, indent=1)


def test_a_fork_loop_costs_only_its_exercise_and_names_the_process_limit(limited):
    """Its copies of the kernel end when they try to answer for it, so the notebook goes on."""
    entries = limited["forker"]
    _only(entries, "flatten_transposed")
    reason = entries["flatten_transposed"]["reason"]
    assert "--max-processes" in reason and "arrived" not in reason, reason


def test_an_allocation_past_the_memory_limit_names_it(limited):
    entries = limited["greedy"]
    _only(entries, "outer_sum")
    reason = entries["outer_sum"]["reason"]
    assert entries["outer_sum"]["outcome"] == "your code raised" and "--memory-mb" in reason, reason


def test_a_function_that_prints_without_end_is_said_to_print_not_to_loop(limited):
    entries = limited["chatty"]
    _only(entries, "residuals")
    reason = entries["residuals"]["reason"]
    assert "while printing" in reason and "--output-cap-kb" in reason and "never ends" not in reason, reason
    assert entries["residuals"]["mistake"] == "printed-too-much"


def test_a_notebook_of_another_chapter_under_a_chapters_name_is_graded_as_that_chapter(limited):
    dave = limited["dave"]
    assert list(dave["notebooks"]) == ["02_autograd"], dave["notebooks"].keys()
    assert dave["total"] == dave["max"] == 4, dave
    problems = dave["notebooks"]["02_autograd"]["problems"]
    assert f"{TENSORS}.ipynb holds the answers of 02_autograd, not of {TENSORS}: graded as 02_autograd" in problems
    assert not any(e["outcome"] == "missing" for e in dave["notebooks"]["02_autograd"]["exercises"].values())
    assert set(TENSOR_EXERCISES).isdisjoint(dave["notebooks"]["02_autograd"]["exercises"])
