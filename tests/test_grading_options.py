"""The grader's options as an instructor uses them, end to end through the command line.

``--shard`` (a class graded in parts), ``--no-cache``, ``--course``, the cache after the course's
checks change, ``--max-processes`` reached, a chapter other than 01_tensors, and
``python -m course_utils.authoring refresh`` on a solutions notebook.

One small class, graded by the real grader CLI in a few stages, each run once per module and
only when a test asks for it (so ``-k`` can pick a stage):

* alice: 01_tensors, every answer right;
* bob: 01_tensors, every answer right, but the answer cell of ``outer_sum`` first starts more
  processes than ``--max-processes`` allows (the one of ``match_reference`` starts a few, well
  under it);
* carol: 02_autograd, ``new_parameter`` wrong (never tracked), the other three right.

Stages: ``--shard 1/2`` and ``--shard 2/2`` (at once, as two machines would), then a full run
into a results folder holding both shards' caches (once as is, once ``--no-cache``), then a run
``--course`` a copy of the course whose 01_tensors has lost a check and which has no 02_autograd.
Every run grades against ``--course``: a snapshot of notebooks/ taken at the start, so the
module does not depend on notebooks/ staying the same while it runs.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

import grading_fixtures as gf
from grading_fixtures import TENSOR_EXERCISES, TENSORS
from slow_machine import scaled

PYTHON = sys.executable
AUTOGRAD = "02_autograd"
AUTOGRAD_EXERCISES = ("new_parameter", "fresh_gradient", "sgd_update", "softplus")
MAX_PROCESSES = 24
GRADER_ARGS = ["--workers", "2", "--cell-timeout", f"{scaled(60):g}", "--notebook-timeout", f"{scaled(300):g}",
               "--max-processes", str(MAX_PROCESSES)]
RUN_TIMEOUT_S = 600
LEARNERS = {"alice", "bob", "carol"}
SUMMARY = re.compile(r"Done in [\d.]+ s: (\d+) graded, (\d+) from the cache")

pytestmark = pytest.mark.skipif(
    not (gf.ROOT / "course_utils" / "grading" / "__main__.py").exists(),
    reason="the batch grader (course_utils/grading) is not there yet",
)


@functools.lru_cache(maxsize=None)
def bubblewrap_problem() -> str | None:
    from course_utils.grading.sandbox import bubblewrap_problem

    return bubblewrap_problem()


def sandbox_args() -> list[str]:
    """Sandboxed where bubblewrap works, else the explicit opt-out the grader demands."""
    return [] if bubblewrap_problem() is None else ["--no-sandbox"]


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in {"COURSE_STRICT", "COURSE_EXPECT", "NBGRADER_EXECUTION", "COURSE_GRADING_NO_SANDBOX",
                        "COURSE_SIMULATED_MACHINE", "PYTHONPATH"}}
    env["COURSE_NO_PROGRESS"] = "1"
    return env


@dataclass
class Run:
    command: list
    returncode: int
    stdout: str
    stderr: str

    def log(self) -> str:
        return f"$ {' '.join(self.command)}\nexit {self.returncode}\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-3000:]}"

    def counts(self) -> tuple[int, int]:
        """(graded, from the cache), as the last line says."""
        match = SUMMARY.search(self.stdout)
        assert match, self.log()
        return int(match.group(1)), int(match.group(2))

    def lines(self) -> dict[str, str]:
        """learner → what the grader printed for them ("7/7", "7/7 (cached)")."""
        return dict(re.findall(r"^(\w+): (\d+/\d+(?: \(cached\))?)$", self.stdout, re.M))


def start_grader(submissions: Path, out: Path, course: Path, *extra: str):
    command = [PYTHON, "-m", "course_utils.grading", str(submissions), "--out", str(out), "--course", str(course),
               *GRADER_ARGS, *sandbox_args(), *extra]
    log = out.parent / f"{out.name}.log"
    stdout, stderr = open(f"{log}.out", "w+"), open(f"{log}.err", "w+")
    process = subprocess.Popen(command, cwd=gf.ROOT, env=clean_env(), stdout=stdout, stderr=stderr, text=True)
    return command, process, stdout, stderr


def finish(started) -> Run:
    command, process, stdout, stderr = started
    try:
        process.wait(timeout=RUN_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with stdout, stderr:
        stdout.seek(0)
        stderr.seek(0)
        return Run(command, process.returncode, stdout.read(), stderr.read())


def grade(submissions: Path, out: Path, course: Path, *extra: str) -> Run:
    return finish(start_grader(submissions, out, course, *extra))


def results(out: Path) -> dict[str, dict]:
    """The learners' results in a results folder (one NAME.json each; the class report and a
    regrade report, JSON files too, are left out)."""
    found = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(out.glob("*.json"))}
    return {name: data for name, data in found.items() if "learner" in data}


def gradebook(out: Path) -> dict[str, dict]:
    """The learners' rows (not the second row, "Points Possible")."""
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as file:
        return {row["learner"]: row for row in csv.DictReader(file) if row["learner"] != "Points Possible"}


def seed_cache(out: Path, *sources: Path) -> int:
    """Put the cache entries of earlier results folders into ``out``'s cache."""
    cache = out / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    for source in sources:
        for entry in (source / ".cache").glob("*.json"):
            shutil.copy2(entry, cache / entry.name)
    return len(list(cache.glob("*.json")))


def spawner(marker: str, count: int) -> str:
    """Start ``count`` sleepers at once (fork fails past the process limit, uncaught), then end
    them again, so that only this answer cell is affected."""
    return textwrap.dedent(
        f"""\
        import subprocess as _sp
        _children = []
        try:
            for _i in range({count}):
                _children.append(_sp.Popen(["sleep", "60"], env={{"PATH": "/usr/bin:/bin", "OPTIONS_MARKER": {marker!r}}},
                                           stdin=_sp.DEVNULL, stdout=_sp.DEVNULL, stderr=_sp.DEVNULL))
        finally:
            for _child in _children:
                _child.kill()
                _child.wait()
        """
    )


# --------------------------------------------------------------------------------------------
# The class, the course, and the stages
# --------------------------------------------------------------------------------------------
@dataclass
class Class:
    base: Path
    submissions: Path
    course: Path
    marker: str


@pytest.fixture(scope="module")
def klass(tmp_path_factory) -> Class:
    base = tmp_path_factory.mktemp("grading-options")
    course = base / "course"
    (course / "notebooks").mkdir(parents=True)
    for notebook in gf.NOTEBOOKS.glob("*.ipynb"):
        shutil.copy2(notebook, course / "notebooks" / notebook.name)
    submissions = base / "submissions"
    marker = gf.new_marker("options")
    gf.write_submission(submissions, "alice", gf.submission())
    gf.write_submission(submissions, "bob", gf.submission(prepend={
        "match_reference": spawner(marker, 4),
        "outer_sum": spawner(marker, 3 * MAX_PROCESSES),
    }))
    carol = gf.submission(AUTOGRAD, answers={
        "new_parameter": "def new_parameter(shape):\n    return torch.randn(shape) * 0.01\n"})
    gf.write_submission(submissions, "carol", carol, chapter=AUTOGRAD)
    yield Class(base, submissions, course, marker)
    gf.kill_pids(gf.processes_with_marker(marker))


@dataclass
class Shards:
    runs: dict  # shard number → Run
    outs: dict  # shard number → results folder
    survivors: dict  # marked processes alive after both runs


@pytest.fixture(scope="module")
def shards(klass) -> Shards:
    """``--shard 1/2`` and ``--shard 2/2`` at the same time, each into its own results folder."""
    outs = {k: klass.base / f"shard-{k}" for k in (1, 2)}
    started = {k: start_grader(klass.submissions, outs[k], klass.course, "--shard", f"{k}/2") for k in (1, 2)}
    runs = {k: finish(started[k]) for k in (1, 2)}
    survivors = gf.processes_with_marker(klass.marker)
    gf.kill_pids(survivors)
    return Shards(runs, outs, survivors)


@dataclass
class Full:
    out: Path
    seeded: int  # cache entries copied in from the shards
    cached: Run  # the full run, cache as is
    cached_results: dict
    fresh: Run  # the same again, --no-cache
    fresh_results: dict


@pytest.fixture(scope="module")
def full(klass, shards) -> Full:
    out = klass.base / "full"
    seeded = seed_cache(out, *shards.outs.values())
    cached = grade(klass.submissions, out, klass.course)
    cached_results = results(out)
    fresh = grade(klass.submissions, out, klass.course, "--no-cache")
    gf.kill_pids(gf.processes_with_marker(klass.marker))
    return Full(out, seeded, cached, cached_results, fresh, results(out))


@dataclass
class Changed:
    course: Path
    out: Path
    run: Run
    results: dict


@pytest.fixture(scope="module")
def changed_course(klass, full) -> Changed:
    """alice and carol graded ``--course`` a copy of the course whose 01_tensors has lost the
    check of ``checked_mse`` and which has no 02_autograd, into a results folder holding the
    full run's cache (where both have an entry for the unchanged course)."""
    course = klass.base / "changed-course"
    (course / "notebooks").mkdir(parents=True)
    nb = nbformat.read(klass.course / "notebooks" / f"{TENSORS}.ipynb", as_version=4)
    before = len(nb.cells)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "check_checked_mse"]
    assert len(nb.cells) == before - 1, "the course's 01_tensors has no check_checked_mse cell"
    nbformat.write(nb, course / "notebooks" / f"{TENSORS}.ipynb")
    submissions = klass.base / "changed-submissions"
    for learner in ("alice", "carol"):
        shutil.copytree(klass.submissions / learner, submissions / learner)
    out = klass.base / "changed-results"
    seed_cache(out, full.out)
    run = grade(submissions, out, course)
    return Changed(course, out, run, results(out))


# --------------------------------------------------------------------------------------------
# --shard
# --------------------------------------------------------------------------------------------
def test_each_learner_is_graded_in_exactly_one_shard(shards):
    graded = {}
    for k, run in shards.runs.items():
        assert run.returncode == 0, run.log()
        names = set(results(shards.outs[k]))
        assert f"Grading {len(names)} learners" in run.stdout, run.log()
        assert set(run.lines()) == names, run.log()
        assert set(gradebook(shards.outs[k])) == names, (k, names)
        assert {p.stem for p in (shards.outs[k] / "feedback").glob("*.html")} == names
        graded[k] = names
    assert graded[1] and graded[2], f"a shard graded nobody: {graded} (alice, bob, carol split 1/2 under sha256)"
    assert not graded[1] & graded[2], f"graded in both shards: {graded[1] & graded[2]}"
    assert graded[1] | graded[2] == LEARNERS, graded


def test_the_shards_together_equal_a_full_run(shards, full):
    assert full.fresh.returncode == 0, full.fresh.log()
    union = {}
    for k in (1, 2):
        union.update(results(shards.outs[k]))
    assert set(union) == set(full.fresh_results) == LEARNERS
    for learner, result in union.items():
        assert result == full.fresh_results[learner], learner
    book = gradebook(full.out)
    for k in (1, 2):
        for learner, row in gradebook(shards.outs[k]).items():
            assert {c: book[learner][c] for c in row} == row, (learner, row, book[learner])


# --------------------------------------------------------------------------------------------
# The cache and --no-cache
# --------------------------------------------------------------------------------------------
def test_without_no_cache_the_shards_results_are_reused(full):
    """The control for --no-cache: the cache copied from the shards stands for a full run."""
    assert full.seeded == len(LEARNERS)
    assert full.cached.returncode == 0, full.cached.log()
    assert full.cached.counts() == (0, len(LEARNERS)), full.cached.log()
    assert all(line.endswith("(cached)") for line in full.cached.lines().values()), full.cached.log()


def test_no_cache_grades_everything_again(full):
    assert full.fresh.returncode == 0, full.fresh.log()
    assert full.fresh.counts() == (len(LEARNERS), 0), full.fresh.log()
    lines = full.fresh.lines()
    assert set(lines) == LEARNERS and not any("cached" in line for line in lines.values()), full.fresh.log()
    assert full.fresh_results == full.cached_results


# --------------------------------------------------------------------------------------------
# --course, and the cache when the course changes
# --------------------------------------------------------------------------------------------
def test_the_course_option_grades_against_that_folders_notebooks(changed_course):
    run = changed_course.run
    assert run.returncode == 0, run.log()
    alice = changed_course.results["alice"]
    exercises = alice["notebooks"][TENSORS]["exercises"]
    assert set(exercises) == set(TENSOR_EXERCISES) - {"checked_mse"}, exercises
    assert all(e["outcome"] == "passed" for e in exercises.values()), exercises
    assert (alice["total"], alice["max"]) == (6, 6), alice
    assert run.lines()["alice"] == "6/6", run.log()
    carol = changed_course.results["carol"]  # that course has no 02_autograd to grade against
    assert carol["total"] == 0 and AUTOGRAD not in carol["notebooks"], carol
    assert any(f"{AUTOGRAD}.ipynb: no answer cell of this course's notebooks" in p for p in carol["problems"]), carol


def test_a_cached_result_is_not_reused_after_the_course_changes(full, changed_course):
    # the same submissions, limits and cache hit before the course changed (full.cached) ...
    assert full.cached_results["alice"]["total"] == 7
    # ... but not after
    run = changed_course.run
    assert run.counts() == (2, 0), run.log()
    assert not any("cached" in line for line in run.lines().values()), run.log()
    assert changed_course.results["alice"] != full.cached_results["alice"]
    assert gradebook(changed_course.out)["alice"]["total"] == "6"


# --------------------------------------------------------------------------------------------
# --max-processes
# --------------------------------------------------------------------------------------------
def test_more_processes_than_max_processes_fail_that_answer_with_the_reason(klass, shards):
    bob = next(results(out)["bob"] for out in shards.outs.values() if (out / "bob.json").exists())
    exercises = bob["notebooks"][TENSORS]["exercises"]
    hog = exercises["outer_sum"]
    assert hog["score"] == 0, f"{3 * MAX_PROCESSES} processes started under --max-processes {MAX_PROCESSES}: {hog}"
    assert "the answer cell raised BlockingIOError" in hog["reason"], hog
    assert "Resource temporarily unavailable" in hog["reason"], hog
    assert "more processes or threads than grading allows (--max-processes)" in hog["reason"], hog
    assert hog["outcome"] == "your code raised", hog
    # a few processes, well under the limit, are fine; so is everything after the limit bit
    assert {n for n, e in exercises.items() if e["score"]} == set(TENSOR_EXERCISES) - {"outer_sum"}, exercises
    assert (bob["total"], bob["max"]) == (6, 7)
    assert bob["process_limit"] == "pids cgroup" or bob["process_limit"].startswith("RLIMIT_NPROC"), bob
    printed = next(run.lines() for run in shards.runs.values() if "bob" in run.lines())
    assert printed["bob"] == "6/11", "out of the class's assignment: 01_tensors (7) and carol's 02_autograd (4)"
    assert shards.survivors == {}, shards.survivors


# --------------------------------------------------------------------------------------------
# A chapter other than 01_tensors
# --------------------------------------------------------------------------------------------
def test_02_autograd_scores_the_right_answers_and_fails_the_wrong_one(shards):
    carol = next(results(out)["carol"] for out in shards.outs.values() if (out / "carol.json").exists())
    assert list(carol["notebooks"]) == [AUTOGRAD], carol
    exercises = carol["notebooks"][AUTOGRAD]["exercises"]
    assert set(exercises) == set(AUTOGRAD_EXERCISES), exercises
    wrong = exercises["new_parameter"]
    assert (wrong["score"], wrong["outcome"]) == (0, "failed"), wrong
    assert "does not require grad" in wrong["reason"], wrong
    for name in AUTOGRAD_EXERCISES[1:]:
        assert (exercises[name]["score"], exercises[name]["outcome"]) == (1, "passed"), (name, exercises[name])
    assert (carol["total"], carol["max"]) == (3, 4), carol
    out = next(out for out in shards.outs.values() if (out / "carol.json").exists())
    row = gradebook(out)["carol"]
    assert row[f"{AUTOGRAD}/new_parameter"] == "0" and row[f"{AUTOGRAD}/softplus"] == "1", row
    assert row["total"] == "3", row
    page = (out / "feedback" / "carol.html").read_text(encoding="utf-8")
    assert f"{AUTOGRAD}: 3 / 4" in page and "does not require grad" in page


def test_a_fully_right_01_tensors_scores_full_marks(shards):
    alice = next(results(out)["alice"] for out in shards.outs.values() if (out / "alice.json").exists())
    assert (alice["total"], alice["max"]) == (7, 7), alice
    if bubblewrap_problem() is None:
        assert alice["sandbox"] == "bubblewrap", alice["sandbox"]
    else:
        assert alice["sandbox"].startswith("none: switched off with --no-sandbox"), alice["sandbox"]


# --------------------------------------------------------------------------------------------
# python -m course_utils.authoring refresh
# --------------------------------------------------------------------------------------------
@dataclass
class Refreshed:
    original: nbformat.NotebookNode  # the part of solutions/01_tensors.ipynb used, as stored
    path: Path
    run: Run
    broken_path: Path
    broken_before: bytes
    broken_run: Run


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs)


def _checked(cell) -> bool:
    return cell.cell_type == "code" and cell.source.lstrip().startswith("# NBVAL_CHECK_OUTPUT")


def start_refresh(path: Path, logs: Path):
    command = [PYTHON, "-m", "course_utils.authoring", "refresh", str(path)]
    stdout, stderr = open(logs / f"{path.name}.out", "w+"), open(logs / f"{path.name}.err", "w+")
    process = subprocess.Popen(command, cwd=gf.ROOT, env=clean_env(), stdout=stdout, stderr=stderr, text=True)
    return command, process, stdout, stderr


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory) -> Refreshed:
    """The start of solutions/01_tensors.ipynb (setup, a checked output, the first exercise and
    its check, the next checked output), as an author saves it after working in it: stale and
    leaked outputs, timing metadata, widget state. Then the same with a wrong answer."""
    base = tmp_path_factory.mktemp("refresh") / "solutions"
    base.mkdir()
    logs = base.parent / "logs"
    logs.mkdir()
    original = gf.course_notebook(TENSORS)
    first_check = next(i for i, c in enumerate(original.cells) if c.metadata.get("nbgrader", {}).get("grade"))
    last = next(i for i, c in enumerate(original.cells) if i > first_check and _checked(c))
    original.cells = original.cells[: last + 1]

    dirty = nbformat.from_dict(json.loads(json.dumps(original)))
    for count, cell in enumerate((c for c in dirty.cells if c.cell_type == "code"), start=40):
        cell.execution_count = count
        cell.metadata["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00Z"}
        cell.metadata["scrolled"] = True
        text = "STALE OUTPUT\n" if _checked(cell) else "LEAKED ANSWER OUTPUT\n"
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    dirty.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    path = base / f"{TENSORS}.ipynb"
    nbformat.write(dirty, path)

    broken = nbformat.from_dict(json.loads(json.dumps(dirty)))
    gf.cell_by_grade_id(broken, "match_reference").source = "def match_reference(x, reference):\n    return x\n"
    broken_path = base / "broken.ipynb"
    nbformat.write(broken, broken_path)
    broken_before = broken_path.read_bytes()
    started = [start_refresh(p, logs) for p in (path, broken_path)]  # both at once
    run, broken_run = (finish(s) for s in started)
    return Refreshed(original, path, run, broken_path, broken_before, broken_run)


def test_refresh_exits_0_and_keeps_only_the_checked_outputs_of_a_clean_run(refreshed):
    run = refreshed.run
    assert run.returncode == 0, run.log()
    assert run.stdout == f"refreshed {refreshed.path}\nNow run `python -m course_utils.authoring release`.\n", run.log()
    text = refreshed.path.read_text(encoding="utf-8")
    assert "LEAKED ANSWER OUTPUT" not in text and "STALE OUTPUT" not in text
    nb = nbformat.read(refreshed.path, as_version=4)
    assert "widgets" not in nb.metadata
    assert [c.source for c in nb.cells] == [c.source for c in refreshed.original.cells]
    code = [c for c in nb.cells if c.cell_type == "code"]
    original_code = [c for c in refreshed.original.cells if c.cell_type == "code"]
    assert any(_checked(c) for c in code) and not all(_checked(c) for c in code)
    for count, (cell, stored) in enumerate(zip(code, original_code), start=1):
        assert not {"execution", "scrolled"} & set(cell.metadata), cell.metadata
        assert cell.metadata.get("nbgrader") == stored.metadata.get("nbgrader")
        if _checked(cell):  # a clean run's output, numbered as a clean run numbers it
            assert cell.execution_count == count, (count, cell)
            assert _text(cell) and _text(cell) == _text(stored), (_text(cell), _text(stored))
        else:
            assert cell.outputs == [] and cell.execution_count is None, cell


def test_refresh_of_a_solution_that_fails_its_check_exits_1_and_writes_nothing(refreshed):
    run = refreshed.broken_run
    assert run.returncode == 1, run.log()
    assert f"{refreshed.broken_path}: a cell failed while refreshing" in run.stderr, run.log()
    assert "refreshed" not in run.stdout and "Now run" not in run.stdout, run.log()
    assert refreshed.broken_path.read_bytes() == refreshed.broken_before
    names = sorted(p.name for p in refreshed.broken_path.parent.iterdir())  # no temporary file left
    assert names == sorted([refreshed.path.name, refreshed.broken_path.name]), names
