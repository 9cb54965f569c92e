"""The batch grader against hostile and broken submissions: one batch, one grader run.

Every learner below is one case. The whole batch is graded by ONE run of
``python -m course_utils.grading`` (two workers, short limits), then each test reads that
learner's result. A second run of the same batch must come from the cache.

Select this file alone with ``pytest tests/test_grading_hostile.py`` (or ``-k grading_hostile``).
It takes a couple of minutes on two cores: two dozen 01_tensors notebooks, some of which run
into the time limits on purpose.

Every hostile case is bounded (see tests/grading_fixtures.py): it cannot take the machine down
even if the grader's limits failed. Anything a case could leave behind if the sandbox failed
(processes, files) is found, reported by the test, and removed.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import grading_fixtures as gf
from grading_fixtures import TENSOR_EXERCISES, TENSORS
from slow_machine import scaled

PYTHON = str(gf.ROOT / ".venv" / "bin" / "python") if (gf.ROOT / ".venv" / "bin" / "python").exists() else sys.executable
# The cell timeout stops the endless loops below; it must also let a loaded machine import torch
# in a fresh kernel (10 s was not enough with CI's load beside two grading workers).
GRADER_ARGS = ["--workers", "2", "--cell-timeout", f"{scaled(20):g}", "--notebook-timeout", f"{scaled(180):g}",
               "--memory-mb", "2048"]
RUN_TIMEOUT_S = 900  # the whole batch; far above what it needs
SPAWNED = 20  # processes the spawner starts; each is alive when grading ends unless killed


@functools.lru_cache(maxsize=None)
def bubblewrap_problem() -> str | None:
    """Why the grader cannot sandbox here (None when it can), asked once per session."""
    from course_utils.grading.sandbox import bubblewrap_problem

    return bubblewrap_problem()


def sandbox_args() -> list[str]:
    """Sandboxed where bubblewrap works; otherwise the explicit opt-out the grader demands (the
    tests that need the sandbox then skip)."""
    return [] if bubblewrap_problem() is None else ["--no-sandbox"]


OUTCOMES = {"passed", "failed", "not attempted", "your code raised", "missing", "timeout",
            "kernel died", "no result"}

pytestmark = pytest.mark.skipif(
    not (gf.ROOT / "course_utils" / "grading" / "__main__.py").exists(),
    reason="the batch grader (course_utils/grading) is not there yet",
)


# --------------------------------------------------------------------------------------------
# The batch
# --------------------------------------------------------------------------------------------
@dataclass
class Batch:
    base: Path
    submissions: Path
    out: Path
    marker: str
    run: subprocess.CompletedProcess
    seconds: float
    digest_before: dict
    digest_after: dict
    survivors: dict  # pid → command line of marked processes alive right after the run
    most_marked: int  # the most marked processes seen at once during the run
    escaped_files: list  # files a submission managed to create outside its run folder
    result_names: set  # the learners' result files right after the run
    gradebook: str  # gradebook.csv right after the run
    hack_paths: list = field(default_factory=list)

    def result(self, learner: str) -> dict:
        path = self.out / f"{learner}.json"
        assert path.exists(), f"no result for {learner}; grader output:\n{self.log()}"
        return json.loads(path.read_text(encoding="utf-8"))

    def log(self) -> str:
        return (self.run.stdout[-4000:] + "\n--- stderr ---\n" + self.run.stderr[-4000:])


def grader_env(base: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in {"COURSE_STRICT", "COURSE_EXPECT", "NBGRADER_EXECUTION", "COURSE_GRADING_NO_SANDBOX"}}
    env["COURSE_PROGRESS_FILE"] = str(base / "progress.json")
    env["COURSE_NO_PROGRESS"] = "1"
    return env


def run_grader(
    submissions: Path, out: Path, base: Path, *extra: str, marker: str | None = None
) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run the grader CLI; also returns the most processes carrying ``marker`` seen at once
    while it ran (sampled every half second), to show that the spawner really spawned."""
    command = [PYTHON, "-m", "course_utils.grading", str(submissions), "--out", str(out), *GRADER_ARGS,
               "--course", str(gf.GRADING_COURSE), *sandbox_args(), *extra]
    start = time.monotonic()
    most = 0
    with open(base / "grader.stdout", "w+") as stdout, open(base / "grader.stderr", "w+") as stderr:
        process = subprocess.Popen(command, cwd=gf.ROOT, env=grader_env(base), stdout=stdout, stderr=stderr, text=True)
        try:
            while process.poll() is None:
                if time.monotonic() - start > RUN_TIMEOUT_S:
                    process.kill()
                    process.wait()
                    break
                if marker is not None:
                    most = max(most, len(gf.processes_with_marker(marker)))
                time.sleep(0.5)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stdout.seek(0)
        stderr.seek(0)
        run = subprocess.CompletedProcess(command, process.returncode, stdout.read(), stderr.read())
    return run, time.monotonic() - start, most


def hack_paths(base: Path, submissions: Path, out: Path, marker: str) -> list[str]:
    """Where the write_outside learner tries to create files. All but the first are temporary
    folders; the first is the course folder itself (removed again below if it got there)."""
    return [
        str(gf.ROOT / f"HACKED-{marker}"),
        f"/tmp/hacked-{marker}",
        f"/dev/shm/hacked-{marker}",
        str(base / f"hacked-{marker}"),
        str(submissions / f"hacked-{marker}.ipynb"),
        str(submissions / "write_outside" / f"hacked-{marker}"),
        str(out / f"hacked-{marker}.json"),
    ]


def build_batch(submissions: Path, base: Path, out: Path, marker: str) -> list[str]:
    """Write every case; returns the hack paths of the write_outside case."""
    write, solved, wrong = gf.write_submission, gf.submission, gf.all_wrong()
    right = {name: gf.answer_source(name) for name in TENSOR_EXERCISES}

    # -- honest learners, both layouts ------------------------------------------------------
    write(submissions, "correct", solved())
    write(submissions, "correct_twin", solved())  # byte-identical to "correct"
    write(submissions, "blank", solved(base="notebooks"), layout="file")
    half = {name: wrong[name] for name in ("outer_sum", "residuals", "checked_mse")}
    write(submissions, "half_right", solved(answers=half), layout="file")

    # -- time ------------------------------------------------------------------------------
    write(submissions, "loop_in_function", solved(answers={"flatten_transposed": gf.loop_in_function()}))
    # two stops in one notebook: a top-level loop in outer_sum's answer cell, and in residuals a
    # function that swallows the check's own time limit and loops on
    write(submissions, "loops", solved(answers={"residuals": gf.stubborn_loop_in_function()},
                                       prepend={"outer_sum": gf.TOP_LEVEL_LOOP}))

    # -- memory, exits, processes ----------------------------------------------------------
    write(submissions, "memory_hog", solved(prepend={"outer_sum": gf.MEMORY_HOG}))
    write(submissions, "sys_exit", solved(prepend={"checked_mse": gf.SYS_EXIT}))
    write(submissions, "os_exit", solved(prepend={"remove_batch_dim": gf.OS_EXIT}))
    write(submissions, "spawner", solved(prepend={"match_reference": gf.spawn_processes(marker, SPAWNED)}))

    # -- cheating the checks ---------------------------------------------------------------
    write(submissions, "patch_torch", solved(answers=wrong, prepend={"match_reference": gf.PATCH_TORCH}))
    write(submissions, "patch_course_utils",
          solved(answers=wrong, prepend={"match_reference": gf.PATCH_COURSE_UTILS}))
    write(submissions, "forge_probe", solved(answers=wrong, prepend={"match_reference": gf.FORGE_PROBE}))
    write(submissions, "forge_globals", solved(answers=wrong, prepend={"match_reference": gf.FORGE_GLOBALS}))
    write(submissions, "rewrite_expected",
          solved(answers=wrong, prepend={"match_reference": gf.REWRITE_EXPECTED}))
    write(submissions, "rigged_eq", solved(answers=gf.rigged_eq_answers()), layout="file")
    write(submissions, "watch_debugger", solved(answers=wrong, prepend={"match_reference": gf.WATCH_WITH_A_DEBUGGER}))
    for learner, cell in (("watch_stack", gf.WATCH_THE_STACK), ("watch_signal", gf.WATCH_WITH_A_SIGNAL),
                          ("watch_mode", gf.WATCH_WITH_A_MODE)):
        write(submissions, learner, solved(answers=gf.watching_answers(wrong), prepend={"match_reference": cell}))

    nb = solved()
    gf.edit_check_cells(nb, new_source='print("{name}: passed")', delete=("outer_sum", "residuals"))
    write(submissions, "edited_checks_right", nb)
    nb = solved(answers=wrong)
    gf.edit_check_cells(
        nb, new_source="from IPython.display import display\ndisplay('✅ {name}: passed')",
        delete=("flatten_transposed", "checked_mse"),
    )
    write(submissions, "edited_checks_wrong", nb)
    nb = solved(answers=wrong)
    gf.paste_fake_outputs(nb)
    write(submissions, "fake_outputs", nb, layout="file")

    # -- broken files ----------------------------------------------------------------------
    gf.write_bytes(submissions, "invalid_json", gf.truncated(solved()))
    gf.write_bytes(submissions, "nbformat3", gf.as_nbformat3(solved()))
    write(submissions, "nul_bytes", solved(append={"flatten_transposed": "# a NUL: \x00 here\n"}))
    write(submissions, "big_output", solved(prepend={"match_reference": gf.fake_output_prints(20)}))

    # -- the machine -----------------------------------------------------------------------
    paths = hack_paths(base, submissions, out, marker)
    course_file = str(gf.ROOT / "course_utils" / "exercises" / "tensors" / "outer_sum.py")
    guarded = gf.write_outside(paths, [p for p in paths if p.startswith(str(gf.ROOT))], course_file)
    guarded += textwrap.dedent(
        """\
        if _escaped:
            def match_reference(x, reference):
                raise PermissionError(f"escaped: {_escaped}")
        else:
        """
    ) + textwrap.indent(right["match_reference"], "    ")
    write(submissions, "write_outside", solved(answers={"match_reference": guarded}))

    # exercises 1-3 copy what opening solutions/ gives, 4-7 what `git show` gives
    stolen = {name: gf.use_stolen(name, "open" if i < 3 else "git") for i, name in enumerate(TENSOR_EXERCISES)}
    stolen["match_reference"] = (
        gf.read_solutions(str(gf.SOLUTIONS / f"{TENSORS}.ipynb"), str(gf.ROOT)) + stolen["match_reference"]
    )
    write(submissions, "read_solutions", solved(base="notebooks", answers=stolen))

    write(submissions, "grader_names", solved(append={"match_reference": gf.GRADER_NAMES}))

    # -- the grader's own code, data and memory (issue 25) -------------------------------------
    write(submissions, "reach_code", solved(answers=gf.REACH_FOR_CODE))
    write(submissions, "reach_memory", solved(answers=gf.REACH_FOR_MEMORY))
    write(submissions, "forge_records", solved(answers=wrong, prepend={"match_reference": gf.FORGE_RECORDS}))
    write(submissions, "texts_and_channel", solved(answers={"outer_sum": gf.REACH_FOR_TEXTS},
                                                   append={"checked_mse": gf.WRITE_TO_THE_CHANNEL}))
    write(submissions, "read_machine", solved(answers={"match_reference": gf.read_these(unreadable_paths(
        base, submissions, marker))}))

    # a learner folder whose notebook and sub-folder are symlinks into the course's solutions/
    (submissions / "symlinks").mkdir()
    (submissions / "symlinks" / f"{TENSORS}.ipynb").symlink_to(gf.SOLUTIONS / f"{TENSORS}.ipynb")
    (submissions / "symlinks" / "more").symlink_to(gf.SOLUTIONS, target_is_directory=True)
    return paths


def unreadable_paths(base: Path, submissions: Path, marker: str) -> list[str]:
    """Files a submission must not be able to read, wherever they are: the course folder (its
    solutions, its history, its own package), another learner's notebook, earlier results,
    another clone of the course, the grader's home folder and the system's temporary folder,
    and the machine's configuration. Makes the ones the test owns (removed by
    ``remove_planted``)."""
    earlier = base / "results-earlier" / "alice.json"
    earlier.parent.mkdir()
    earlier.write_text('{"learner": "alice", "total": 7}')
    clone = base / "other-clone" / "solutions" / f"{TENSORS}.ipynb"
    clone.parent.mkdir(parents=True)
    clone.write_bytes((gf.SOLUTIONS / f"{TENSORS}.ipynb").read_bytes())
    for planted in planted_files(marker):
        planted.write_text("a file of the grader's user")
    paths = [gf.ROOT / "README.md", gf.SOLUTIONS / f"{TENSORS}.ipynb", gf.ROOT / ".git" / "HEAD",
             gf.GRADING_COURSE / "solutions" / f"{TENSORS}.ipynb",
             gf.ROOT / "course_utils" / "exercises" / "tensors" / "outer_sum.py",
             submissions / "correct" / f"{TENSORS}.ipynb", earlier, clone, *planted_files(marker),
             Path("/etc/shadow"), Path("/etc/hostname"), Path("/etc/hosts")]
    return [str(path) for path in paths if path.exists() or path.parent == submissions / "correct"]


def planted_files(marker: str) -> list[Path]:
    import tempfile

    return [Path.home() / f".course-grading-test-{marker}", Path(tempfile.gettempdir()) / f"course-grading-test-{marker}"]


LEARNERS = {
    "correct", "correct_twin", "blank", "half_right", "loop_in_function", "loops",
    "memory_hog", "sys_exit", "os_exit", "spawner", "patch_torch",
    "patch_course_utils", "forge_probe", "forge_globals", "rewrite_expected", "rigged_eq", "edited_checks_right",
    "edited_checks_wrong", "fake_outputs", "invalid_json", "nbformat3", "nul_bytes",
    "big_output", "write_outside", "read_solutions", "grader_names", "symlinks",
    "reach_code", "reach_memory", "forge_records", "texts_and_channel", "read_machine",
    "watch_debugger", "watch_stack", "watch_signal", "watch_mode",
}


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Batch:
    base = tmp_path_factory.mktemp("grading-hostile")
    submissions, out = base / "submissions", base / "results"
    submissions.mkdir()
    marker = gf.new_marker()
    paths = build_batch(submissions, base, out, marker)
    before = gf.tree_digest(submissions)

    run, seconds, most = run_grader(submissions, out, base, marker=marker)

    survivors = gf.processes_with_marker(marker)
    gf.kill_pids(survivors)
    escaped = [p for p in paths if os.path.lexists(p)]
    for path in escaped:  # e.g. ROOT/HACKED-...: never leave it in the course folder
        Path(path).unlink(missing_ok=True)
    after = gf.tree_digest(submissions)
    names = {p.stem for p in out.glob("*.json")} - {"class_report"}  # a NAME.json per learner, and the report
    gradebook = (out / "gradebook.csv").read_text(encoding="utf-8") if (out / "gradebook.csv").exists() else ""
    batch = Batch(base, submissions, out, marker, run, seconds, before, after, survivors, most, escaped,
                  names, gradebook, paths)
    yield batch
    gf.kill_pids(gf.processes_with_marker(marker))
    for path in [*paths, *planted_files(marker)]:
        if os.path.lexists(path):
            Path(path).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def rerun(batch):
    """The batch graded again into the same results folder, plus "copycat", a new learner whose
    folder is a byte-identical copy of "correct": every result comes from the cache. Without the
    learners whose results are never cached (a time or memory limit ended a run: that a rerun
    grades them again is tested in test_grading_stops.py), which would only cost their limits."""
    from course_utils.grading.batch import _cacheable

    first_results = {learner: batch.result(learner) for learner in LEARNERS}
    again = batch.base / "submissions-again"
    for entry in batch.submissions.iterdir():
        if entry.name.split(".")[0] in LEARNERS and not _cacheable(first_results[entry.name.split(".")[0]]):
            continue
        if entry.is_symlink():
            (again / entry.name).parent.mkdir(exist_ok=True)
            (again / entry.name).symlink_to(os.readlink(entry), target_is_directory=entry.is_dir())
        elif entry.is_dir():
            shutil.copytree(entry, again / entry.name, symlinks=True)
        else:
            again.mkdir(exist_ok=True)
            shutil.copy2(entry, again / entry.name)
    copycat = again / "copycat"
    copycat.mkdir()
    (copycat / f"{TENSORS}.ipynb").write_bytes((batch.submissions / "correct" / f"{TENSORS}.ipynb").read_bytes())
    run, seconds, _ = run_grader(again, batch.out, batch.base)
    not_cached = {learner for learner in LEARNERS if not _cacheable(first_results[learner])}
    return run, seconds, first_results, not_cached


def exercises(batch: Batch, learner: str, chapter: str = TENSORS) -> dict:
    result = batch.result(learner)
    assert chapter in result["notebooks"], (learner, result)
    return result["notebooks"][chapter]["exercises"]


def scores(batch: Batch, learner: str) -> dict[str, int]:
    return {name: entry["score"] for name, entry in exercises(batch, learner).items()}


def assert_scores(batch: Batch, learner: str, passed: set[str]) -> None:
    """Exactly ``passed`` score 1; every other exercise 0 with a reason."""
    entries = exercises(batch, learner)
    assert set(entries) == set(TENSOR_EXERCISES), entries
    got = {name for name, entry in entries.items() if entry["score"] == 1}
    assert got == set(passed), f"{learner}: passed {sorted(got)}, expected {sorted(passed)}\n" + json.dumps(entries, indent=1)
    for name, entry in entries.items():
        assert entry["max"] == 1
        assert entry["outcome"] in OUTCOMES, entry
        assert (entry["outcome"] == "passed") == (entry["score"] == 1), (name, entry)
        if entry["score"] == 0:
            assert entry["reason"].strip(), (name, entry)
    result = batch.result(learner)
    assert result["total"] == len(passed) and result["max"] == len(TENSOR_EXERCISES), result


def first(n: int) -> set[str]:
    return set(TENSOR_EXERCISES[:n])


ALL = set(TENSOR_EXERCISES)


# --------------------------------------------------------------------------------------------
# The run as a whole
# --------------------------------------------------------------------------------------------
def test_the_batch_finishes_and_every_learner_has_a_result(batch):
    assert batch.run.returncode == 0, batch.log()
    for learner in LEARNERS:
        result = batch.result(learner)
        assert result["learner"] == learner
        assert (batch.out / "feedback" / f"{learner}.html").exists(), learner
    assert batch.result_names == LEARNERS, batch.result_names ^ LEARNERS


def test_the_sandbox_is_bubblewrap_where_bwrap_works(batch):
    if bubblewrap_problem() is not None:
        sandboxes = {batch.result(learner)["sandbox"] for learner in LEARNERS}
        assert all(s.startswith("none: switched off with --no-sandbox") for s in sandboxes), sandboxes
        pytest.skip(f"no sandbox here ({bubblewrap_problem()}); graded with --no-sandbox")
    sandboxes = {batch.result(learner)["sandbox"] for learner in LEARNERS}
    assert sandboxes == {"bubblewrap"}, sandboxes


def test_the_gradebook_has_one_row_per_learner(batch):
    rows = [row for row in csv.DictReader(io.StringIO(batch.gradebook)) if row["learner"] != "Points Possible"]
    assert [row["learner"] for row in rows] == sorted(LEARNERS)
    columns = set(rows[0])
    assert {"learner", "total"} | {f"{TENSORS}/{name}" for name in TENSOR_EXERCISES} <= columns, columns
    from course_utils.grading.reports import handed_in

    for row in rows:
        result = batch.result(row["learner"])
        assert int(row["total"]) == result["total"], row
        notebook = result["notebooks"].get(TENSORS)
        for name in TENSOR_EXERCISES:  # a chapter not handed in (or unreadable) is blank, not 0
            entry = (notebook or {}).get("exercises", {}).get(name)
            assert row[f"{TENSORS}/{name}"] == (str(entry["score"]) if handed_in(notebook) else ""), (row, name)


def test_no_submission_file_was_changed(batch):
    assert batch.digest_after == batch.digest_before


def test_no_process_a_submission_started_outlives_the_batch(batch):
    assert batch.survivors == {}, f"{len(batch.survivors)} processes survived: {batch.survivors}"


def test_no_result_file_is_half_written(batch):
    leftovers = [p.name for p in batch.out.rglob(".*") if p.is_file() and ".cache" not in p.parts]
    assert leftovers == []


# --------------------------------------------------------------------------------------------
# Honest learners
# --------------------------------------------------------------------------------------------
def test_correct_scores_full_marks(batch):
    assert_scores(batch, "correct", ALL)


def test_an_identical_twin_gets_its_own_result(batch):
    assert_scores(batch, "correct_twin", ALL)
    assert batch.result("correct_twin")["learner"] == "correct_twin"


def test_blank_scores_zero_as_not_attempted(batch):
    assert_scores(batch, "blank", set())
    assert {e["outcome"] for e in exercises(batch, "blank").values()} == {"not attempted"}


def test_half_right_scores_the_right_half(batch):
    assert_scores(batch, "half_right", first(4))
    for name in ("outer_sum", "residuals", "checked_mse"):
        assert exercises(batch, "half_right")[name]["outcome"] in {"failed", "your code raised"}


# --------------------------------------------------------------------------------------------
# Time
# --------------------------------------------------------------------------------------------
def test_a_loop_inside_an_answer_is_stopped_by_the_checks_time_limit(batch):
    assert_scores(batch, "loop_in_function", ALL - {"flatten_transposed"})
    entry = exercises(batch, "loop_in_function")["flatten_transposed"]
    assert "stopped after" in entry["reason"], entry


def test_a_loop_costs_only_its_own_exercise(batch):
    """A top-level loop in an answer cell, and a function that swallows the check's own time
    limit: each runs past the cell time limit, its exercise scores 0 with a reason that names the
    cell, the limit and what the kernel did meanwhile; the notebook is graded again without
    that answer, so the exercises after it count (checked_mse, after both). Both loops sleep:
    however busy the machine, their kernel never waited for a core, so the reason says the cell
    was waiting, and the notebook is not graded a second time alone."""
    assert_scores(batch, "loops", ALL - {"outer_sum", "residuals"})
    entries = exercises(batch, "loops")
    assert entries["outer_sum"]["outcome"] == entries["residuals"]["outcome"] == "timeout", entries
    assert_cell_timeout_reason(entries["outer_sum"], "your answer cell for outer_sum, `while True:`")
    assert_cell_timeout_reason(entries["residuals"], "the check of residuals, `ex.residuals.check(residuals)`")
    problems = batch.result("loops")["notebooks"][TENSORS]["problems"]
    for name in ("outer_sum", "residuals"):
        assert any(f"graded again without the answer for {name}" in p for p in problems), problems
        assert "the cell was waiting (a sleep, input, a lock), not computing" in entries[name]["reason"], entries
    assert not any(p.startswith("graded a second time, alone") for p in batch.result("loops")["problems"])


def assert_cell_timeout_reason(entry, cell):
    """The reason names the cell (whose it is, and its first line), the limit and its option,
    and what the kernel did meanwhile (its share of a core; how long it waited for one decides a
    second grading alone)."""
    reason = entry["reason"]
    assert cell in reason and f"cell time limit of {scaled(20):g} s (--cell-timeout)" in reason, entry
    assert re.search(r"; the kernel (got|used) \d+% of a core", reason), entry


# --------------------------------------------------------------------------------------------
# Memory, exits, processes
# --------------------------------------------------------------------------------------------
def test_endless_allocation_is_bounded_by_the_memory_cap(batch):
    entries = exercises(batch, "memory_hog")
    assert {n for n, e in entries.items() if e["score"]} >= first(4), entries
    hog = entries["outer_sum"]
    assert hog["score"] == 0, hog
    if hog["outcome"] != "kernel died":
        assert hog["outcome"] == "your code raised", hog
        assert "MemoryError" in hog["reason"] and "(--memory-mb)" in hog["reason"], hog
    for name in ("residuals", "checked_mse"):  # graded on after a MemoryError, or 0 with why
        assert entries[name]["score"] == 1 or entries[name]["reason"].strip(), entries[name]


def test_sys_exit_in_an_answer_cell(batch):
    assert_scores(batch, "sys_exit", ALL - {"checked_mse"})
    assert "SystemExit" in exercises(batch, "sys_exit")["checked_mse"]["reason"]


def test_os_exit_kills_the_kernel_and_costs_only_its_own_exercise(batch):
    assert_scores(batch, "os_exit", ALL - {"remove_batch_dim"})
    entry = exercises(batch, "os_exit")["remove_batch_dim"]
    assert entry["outcome"] == "kernel died", entry
    assert "during your answer cell for remove_batch_dim" in entry["reason"], entry


def test_spawned_processes_do_not_outlive_grading(batch):
    # All of them are seen: the spawner waits 1.5 s after starting them, three of the sampler's
    # periods. (Kept well under --max-processes, which also counts the kernel's own threads.)
    assert batch.most_marked >= SPAWNED, f"only {batch.most_marked} of the spawner's {SPAWNED} processes were seen"
    assert batch.survivors == {}, batch.survivors
    assert_scores(batch, "spawner", ALL)


# --------------------------------------------------------------------------------------------
# Cheating the checks
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("learner", ["patch_torch", "patch_course_utils"])
def test_patching_comparisons_or_course_utils_gains_nothing(batch, learner):
    assert_scores(batch, learner, set())


def test_rewriting_the_probes_facts_gains_nothing(batch):
    """Every fact the probe records made one constant: the inputs it gave too, so the grader,
    which computes the right answer from those, judges nonsense, and refuses what would pass."""
    assert_scores(batch, "rewrite_expected", set())


@pytest.mark.parametrize("learner", ["watch_debugger", "watch_stack", "watch_signal", "watch_mode"])
def test_watching_the_check_from_inside_the_kernel_gains_nothing(batch, learner):
    """A tracer, the stack's variables, a signal handler's frames, a torch function mode: the
    kernel computes no right answer to see, and the guard refuses the first two by name."""
    assert_scores(batch, learner, set())
    reasons = " ".join(entry["reason"] for entry in exercises(batch, learner).values())
    said = {"watch_debugger": "your code may not use sys.settrace",
            "watch_stack": "your code may not look at the grader's frames"}.get(learner)
    assert said is None or said in reasons, reasons


@pytest.mark.parametrize("learner", ["forge_probe", "forge_globals"])
def test_making_the_probe_run_the_reference_gains_nothing(batch, learner):
    """The probe runs in the learner's kernel. Here the submission makes it probe the course's
    reference answers (by patching Exercise.probe, or by shadowing globals() for the probe
    cell) while its own answers are wrong."""
    assert_scores(batch, learner, set())


def test_an_object_equal_to_everything_scores_zero(batch):
    assert_scores(batch, "rigged_eq", ALL - {"outer_sum", "residuals"})


def test_edited_and_deleted_check_cells_change_nothing(batch):
    assert_scores(batch, "edited_checks_right", ALL)
    assert_scores(batch, "edited_checks_wrong", set())


def test_pasted_outputs_and_points_are_ignored(batch):
    assert_scores(batch, "fake_outputs", set())


# --------------------------------------------------------------------------------------------
# Broken files
# --------------------------------------------------------------------------------------------
def _all_text(result: dict) -> str:
    return json.dumps(result)


def test_invalid_json_scores_zero_with_the_reason(batch):
    result = batch.result("invalid_json")
    assert result["total"] == 0
    problems = list(result.get("problems", []))
    for notebook in result["notebooks"].values():
        problems += notebook.get("problems", [])
        assert all(e["score"] == 0 and e["reason"] for e in notebook["exercises"].values())
    assert any("not valid" in p or "JSON" in p for p in problems), result


def test_invalid_json_is_reported_under_the_chapter_its_name_gives(batch):
    """The file is SUBMISSIONS/invalid_json/01_tensors.ipynb: its row belongs to 01_tensors
    (7 exercises), not to the course's first chapter."""
    result = batch.result("invalid_json")
    assert list(result["notebooks"]) == [TENSORS], list(result["notebooks"])
    assert result["max"] == len(TENSOR_EXERCISES), result["max"]


def test_symlinked_notebooks_are_not_followed(batch):
    result = batch.result("symlinks")
    assert result["total"] == 0, result
    assert all(
        e["score"] == 0 for n in result["notebooks"].values() for e in n["exercises"].values()
    ), result


def test_nbformat_3_is_converted_and_graded(batch):
    assert_scores(batch, "nbformat3", ALL)


def test_nul_bytes_fail_only_that_exercise(batch):
    assert_scores(batch, "nul_bytes", ALL - {"flatten_transposed"})
    entry = exercises(batch, "nul_bytes")["flatten_transposed"]
    assert "null" in entry["reason"].lower() or "nul" in entry["reason"].lower(), entry


def test_megabytes_of_output_are_capped(batch):
    assert_scores(batch, "big_output", ALL)
    assert (batch.out / "big_output.json").stat().st_size < 100_000
    assert (batch.out / "feedback" / "big_output.html").stat().st_size < 200_000
    assert any("cut off" in p for p in batch.result("big_output")["notebooks"][TENSORS]["problems"])


# --------------------------------------------------------------------------------------------
# The machine (what only a sandbox prevents)
# --------------------------------------------------------------------------------------------
@pytest.fixture
def sandboxed(batch):
    sandbox = batch.result("write_outside")["sandbox"]
    if sandbox != "bubblewrap":
        pytest.skip(f"needs the sandbox; this run had {sandbox!r}")


def test_writing_outside_the_run_folder_fails(batch, sandboxed):
    assert batch.escaped_files == []
    # the answer is right only if every write, and opening a course file for writing, failed
    assert_scores(batch, "write_outside", ALL)


def test_the_solutions_cannot_be_read_from_solutions(batch, sandboxed):
    entries = exercises(batch, "read_solutions")
    assert {n for n in TENSOR_EXERCISES[:3] if entries[n]["score"]} == set(), entries


def test_the_solutions_cannot_be_read_from_git_history(batch, sandboxed):
    """The repository's .git holds every committed solution; `git show HEAD:solutions/...`."""
    entries = exercises(batch, "read_solutions")
    assert {n for n in TENSOR_EXERCISES[3:] if entries[n]["score"]} == set(), entries


def test_rebinding_the_graders_names_changes_nothing(batch):
    """Right answers in a cell that also rebinds ex, __import__, json, sys... get full marks:
    the grader's probe uses none of the notebook's names."""
    entries = exercises(batch, "grader_names")
    assert {name: (e["outcome"], e["score"]) for name, e in entries.items()} == {
        name: ("passed", 1) for name in TENSOR_EXERCISES}
    # the batch went on: learners graded after this one exist (checked by the first test too)
    assert batch.result("correct")["total"] == len(TENSOR_EXERCISES)


# --------------------------------------------------------------------------------------------
# The grader's own code, data and memory, and the machine's files (issue 25)
# --------------------------------------------------------------------------------------------
REACHED = {  # what each refused reach says
    "reach_code": {
        "match_reference": "grading: the worked answer of match_reference is not available",
        "independent_copy": "grading: the worked answer of independent_copy is not available",
        "flatten_transposed": "called the course's own tensors._probe_flatten_transposed",
        "remove_batch_dim": "could not get source code",
        "outer_sum": "No module named 'course_utils.exercises.models'; [Errno 2] No such file or directory",
        "residuals": "grading: this check was opened already, or is not one of this run's",
        "checked_mse": "grading: checked_mse's judge runs in the grader's own process",
    },
    "reach_memory": {
        "match_reference": "may not search the interpreter (gc.get_objects)",
        "independent_copy": "may not look at the grader's frames",
        "flatten_transposed": "may not look at the grader's frames",
        "remove_batch_dim": "may not use sys.settrace",
        "outer_sum": "may not use ctypes",
        "residuals": "a kernel's memory cannot be read",
        "checked_mse": "may not search the interpreter (sys._current_frames)",
    },
}


@pytest.mark.parametrize("learner", sorted(REACHED))
def test_an_answer_that_reaches_for_the_graders_code_or_memory_scores_zero_and_says_why(batch, learner):
    """Each answer gets its result only through what it reaches for: the worked answer (through
    `ex` or an import), the probe, the judge, the module's source or file, a check of its own;
    the heap, the check's frames, tracing, ctypes, the process's memory."""
    entries = exercises(batch, learner)
    for name, says in REACHED[learner].items():
        entry = entries[name]
        assert (entry["score"], entry["outcome"]) == (0, "your code raised"), (name, entry)
        assert says in entry["reason"], (name, entry["reason"])
        if "grading: " in entry["reason"] or "may not" in entry["reason"]:
            assert "Likely cause: your code reached for the grader's own code or data" in entry["reason"], entry


def test_the_exercises_texts_are_not_in_a_graded_notebook(batch):
    """Running the solution text as code (and so every hint, note and worked answer) gains nothing."""
    assert_scores(batch, "texts_and_channel", ALL - {"outer_sum", "checked_mse"})
    assert "SyntaxError" in exercises(batch, "texts_and_channel")["outer_sum"]["reason"]


def test_a_check_record_cannot_be_rewritten_beside_the_check(batch):
    """A thread that copies each record's expected values into the answer's, between the probe
    writing the record and the grader reading it, scored wrong answers as right."""
    assert_scores(batch, "forge_records", set())


def test_junk_on_the_record_channel_costs_the_writer_only_what_follows(batch):
    assert_scores(batch, "texts_and_channel", ALL - {"outer_sum", "checked_mse"})
    reason = exercises(batch, "texts_and_channel")["checked_mse"]["reason"]
    assert "wrote to the grader's record channel" in reason, reason


def test_a_submission_reads_nothing_of_the_machine_but_what_grading_allows(batch, sandboxed):
    """The course folder (solutions, .git, its package), other learners' notebooks, earlier
    results, another clone, the grader's home and temporary folders, /etc: none can be read."""
    entry = exercises(batch, "read_machine")["match_reference"]
    assert entry["score"] == 1, entry["reason"]
    assert_scores(batch, "read_machine", ALL)


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------
def test_a_rerun_comes_from_the_cache_with_the_same_results(batch, rerun):
    """Every result comes from the cache, except one in which a time or memory limit ended a run
    (a busy machine may have caused it), which is never cached (here left out of the rerun)."""
    run, seconds, first_results, not_cached = rerun
    assert {"loops", "os_exit"} <= not_cached, not_cached
    assert run.returncode == 0, run.stdout + run.stderr
    graded = re.search(r"(\d+) graded, (\d+) from the cache", run.stdout)
    assert graded, run.stdout
    assert (int(graded.group(1)), int(graded.group(2))) == (0, len(LEARNERS) + 1 - len(not_cached)), run.stdout
    for learner in LEARNERS - not_cached:
        assert batch.result(learner) == first_results[learner], learner
    assert gf.tree_digest(batch.submissions) == batch.digest_before


def test_a_cached_result_is_filed_under_the_learner_who_submitted_it(batch, rerun):
    """copycat's notebook is byte-identical to correct's (same file name too): the cache may
    reuse the verdicts, but the result must be copycat's own."""
    run, _, _, _ = rerun
    assert re.search(r"^copycat: 7/7", run.stdout, re.M), run.stdout
    assert (batch.out / "copycat.json").exists(), sorted(p.name for p in batch.out.glob("*.json"))
    assert batch.result("copycat")["learner"] == "copycat"
    assert_scores(batch, "copycat", ALL)
    with open(batch.out / "gradebook.csv", newline="", encoding="utf-8") as file:
        assert "copycat" in {row["learner"] for row in csv.DictReader(file)}
