"""Plant, one at a time, the bugs that the test command's runs were built to catch, and check
that each is still caught.

    .venv/bin/python tools/planted_bugs.py              # every bug
    .venv/bin/python tools/planted_bugs.py NAME ...     # some of them
    .venv/bin/python tools/planted_bugs.py --list

When two test runs are merged into one, or a run keeps fewer chapters, nothing says that what
the old runs caught is still caught. Each bug here is an edit to the course (the exact text
replaced: a bug whose text is gone is reported, never skipped quietly) that some run of
``./course test`` exists to catch, with the tests that must then fail. The tool copies the
course into a temporary folder, plants the bug there, and runs those tests in the copy as the
test command runs them (the notebook runs prepared, COURSE_SMOKE=1, nbval). A bug whose tests
all pass is a hole in the suite: the tool names it and exits 1. A bug's tests that fail for
another reason (an error before the planted code runs) do not count as caught: the failure
must show the bug's own words (``shows``).

The course itself is never edited. About 20 to 40 s a bug on two cores (one or two notebook
runs each); CI's weekly ``planted-bugs`` job runs it (INSTRUCTORS.md, "Tests").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import course_copies  # noqa: E402  (tests/ is not a package)

# Made once per machine and shared with the copy: the hosted platform's environment.
SHARED = (Path(".course") / "venvs",)
RUNS = Path(".course") / "test-runs"
CUDA_STOP = "if torch.version.cuda:\n    torch.cuda.synchronize()  # planted: fine on a CPU build, fails on a CUDA build without a GPU\n"


@dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str
    notebook_cell: str = ""  # for a notebook: the start of the cell whose source is edited


@dataclass(frozen=True)
class Bug:
    name: str
    what: str  # the bug, in words
    catches: str  # which run catches it, and why that run
    edits: tuple[Edit, ...]
    tests: tuple[str, ...]  # pytest ids or paths, relative to the course, that must fail
    shows: str  # text the failure must show: the planted bug's own words


BUGS = (
    Bug("cuda-build-displayed-solution",
        "the reference of training_loop.evaluate, which .solution() displays, synchronizes CUDA "
        "whenever torch is a CUDA build",
        "test_hosted.py: chapter 04 alone on a hosted machine with a CUDA build and no GPU, every "
        "displayed solution pasted in (was: the prepared pasted run on a CUDA build)",
        (Edit("course_utils/exercises/training_loop/evaluate.py", "    with torch.no_grad():            # no graph",
              "    if torch.version.cuda:\n        torch.cuda.synchronize()\n    with torch.no_grad():            # no graph"),),
        ("tests/test_hosted.py::TestChapter04_training_loop",),
        "Found no NVIDIA driver"),
    Bug("cuda-build-lesson-cell",
        "a lesson cell of chapter 03 (not an answer) synchronizes CUDA on a CUDA build",
        "test_hosted.py: chapter 03 on a hosted machine with a CUDA build (was: both prepared "
        "runs on a CUDA build; chapter 03's solutions no longer run there)",
        tuple(Edit(f"{folder}/03_models.ipynb", "", CUDA_STOP, notebook_cell="images, labels = load_digits()")
              for folder in ("notebooks", "solutions")),
        ("tests/test_hosted.py::TestChapter03_models",),
        "Found no NVIDIA driver"),
    Bug("cuda-build-worked-answer-05",
        "the worked answer of scaled_clipped_step in solutions/05 synchronizes CUDA on a CUDA build",
        "the solution notebooks on a CUDA build, which keeps chapter 05 (its worked answer uses autocast)",
        (Edit("solutions/05_speed_and_memory.ipynb", "", CUDA_STOP, notebook_cell="def scaled_clipped_step"),),
        (f"{RUNS}/solutions-cuda-build-no-gpu/05_speed_and_memory.ipynb",),
        "Found no NVIDIA driver"),
    Bug("cuda-build-worked-answer-04",
        "the worked answer of train_step in solutions/04 synchronizes CUDA on a CUDA build",
        "the solution notebooks on a CUDA build: chapter 04 joins that run as soon as a worked "
        "answer mentions CUDA (tests/notebook_runs.py, DEVICE_SENSITIVE)",
        (Edit("solutions/04_training_loop.ipynb", "", CUDA_STOP, notebook_cell="def train_step"),),
        (f"{RUNS}/solutions-cuda-build-no-gpu/04_training_loop.ipynb",),
        "Found no NVIDIA driver"),
    Bug("lesson-cell-needs-a-solved-exercise",
        "a lesson cell of the learner's chapter 03 uses decay_groups without falling back on the "
        "worked answer when it is not solved",
        "notebooks/: the learner notebook, every exercise not attempted",
        (Edit("notebooks/03_models.ipynb", "ex.decay_groups.verdict(decay_groups).passed", "True",
              notebook_cell="groups_of = decay_groups"),),
        ("notebooks/03_models.ipynb",),
        "NotImplementedError"),
    Bug("exam-fallback-raises-something-else",
        "in an exam release, a cell that falls back on a withheld worked answer raises a plain "
        "RuntimeError instead of saying to solve the exercise first",
        "test_exam_release.py: the exam's chapter 03, not attempted (was: chapter 05, three "
        "times slower; both fall back on worked answers)",
        (Edit("course_utils/exercises/exam.py", "        raise NoWorkedAnswer(\n", "        raise RuntimeError(\n"),),
        ("tests/test_exam_release.py::test_an_exam_notebook_runs_with_every_check_not_attempted",),
        "RuntimeError: this cell falls back"),
    Bug("time-checks-fresh-drops-a-chapter",
        "tools/time_checks.py --fresh leaves out the last chapter",
        "test_time_checks.py: --fresh on two exercises of two chapters (was: --fresh over every "
        "check, 40 s; the code that runs each chapter apart is the same)",
        (Edit("tools/time_checks.py", "for module in modules for row", "for module in modules[:-1] for row"),),
        ("tests/test_time_checks.py::test_fresh_runs_each_chapter_in_its_own_process",),
        "autograd.softplus"),
    Bug("time-checks-one-process-fails-quietly",
        "tools/time_checks.py in one process reports a failing reference as passed",
        "test_time_checks.py: every exercise, and the named ones, timed in one process",
        (Edit("tools/time_checks.py", '"passed": verdict.passed,', '"passed": False,'),),
        ("tests/test_time_checks.py::test_exercises_are_named_as_mutate_checks_names_them",),
        "the reference did not pass"),
    Bug("chapter-run-misses-hosted",
        "./course test CHAPTER stops selecting the chapter's hosted run",
        "test_chapter_selection.py: what a chapter's run selects and collects",
        (Edit("tests/chapter_selection.py", '"test_claims.py", "test_hosted.py", ', '"test_claims.py", '),),
        ("tests/test_chapter_selection.py",),
        "TestChapter"),
    Bug("numpy-2-only-call-in-a-check",
        "every check reads a tensor's numbers with np.asarray(..., copy=True), which numpy 1.x "
        "lacks (Kaggle's numpy is 1.26)",
        "test_hosted.py: one chapter on the kaggle-like profile, the platform's own packages "
        "(tests/hosted_profiles.py); our pins have numpy 2, on which it works",
        (Edit("course_utils/exercises/facts.py", 'facts["values"] = readable.numpy().copy()',
              'facts["values"] = np.asarray(readable.numpy(), copy=True)'),),
        ("tests/test_hosted.py::TestChapterOnAPlatformsOwnPackages",),
        "unexpected keyword argument 'copy'"),
    Bug("e2e-hosted-ignores-notebooks",
        "a change to a learner notebook no longer makes the hosted group run again in .ci/run "
        "(its inputs lose notebooks/)",
        "test_e2e_groups.py: which groups a change makes stale",
        (Edit("tests/e2e_groups.py", 'inputs=("notebooks/", "solutions/", "README.md", "requirements-hosted.txt")',
              'inputs=("solutions/", "README.md", "requirements-hosted.txt")'),),
        ("tests/test_e2e_groups.py::test_a_change_makes_stale_exactly_the_groups_that_read_it",),
        "['tools'] == ['hosted', 'tools']"),
    Bug("e2e-landing-keeps-nothing-out",
        "./course test stops leaving the end-to-end groups out (the whole command doubles)",
        "test_e2e_groups.py: what --landing collects",
        (Edit("conftest.py", "keep = group is None if landing else group in wanted",
              "keep = True if landing else group in wanted"),),
        ("tests/test_e2e_groups.py::test_the_test_command_leaves_the_groups_out_and_test_e2e_takes_only_them",),
        "assert landing and not"),
)


def _edit_notebook(path: Path, edit: Edit) -> bool:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and edit.notebook_cell in cell.source:
            if edit.old:
                if edit.old not in cell.source:
                    continue
                cell.source = cell.source.replace(edit.old, edit.new, 1)
            else:
                cell.source = edit.new + cell.source
            nbformat.write(nb, path)
            return True
    return False


def plant(bug: Bug, course: Path) -> None:
    for edit in bug.edits:
        path = course / edit.path
        if edit.path.endswith(".ipynb"):
            if not _edit_notebook(path, edit):
                raise LookupError(f"{bug.name}: no code cell of {edit.path} holds {edit.notebook_cell!r}"
                                  + (f" and {edit.old!r}" if edit.old else ""))
            continue
        text = path.read_text(encoding="utf-8")
        if edit.old not in text:
            raise LookupError(f"{bug.name}: {edit.path} no longer holds {edit.old!r}")
        path.write_text(text.replace(edit.old, edit.new, 1), encoding="utf-8")


def copy_course(into: Path) -> Path:
    course = course_copies.copy_files(into / "course")
    for shared in SHARED:
        if (ROOT / shared).exists():
            (course / shared).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(ROOT / shared, course / shared, target_is_directory=True)
    return course


def tests_environment(course: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_STRICT", "COURSE_EXPECT")}
    env.update(COURSE_SMOKE="1", COURSE_NO_PROGRESS="1", MPLBACKEND="Agg", PYTHONHASHSEED="0",
               COURSE_STATIC_WIDGETS="1", OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1",
               PYTHONPATH=str(course),
               PYTHONDONTWRITEBYTECODE="1")
    return env


@dataclass
class Outcome:
    bug: Bug
    caught: bool
    seconds: float
    detail: str


def try_bug(bug: Bug, scratch: Path) -> Outcome:
    started = time.perf_counter()
    course = copy_course(scratch)
    plant(bug, course)
    env = tests_environment(course)
    prepared = subprocess.run([sys.executable, "tests/notebook_runs.py", str(course / RUNS)], cwd=course,
                              env=env, capture_output=True, text=True)
    if prepared.returncode != 0:
        return Outcome(bug, False, time.perf_counter() - started, "could not prepare the notebook runs:\n"
                       + prepared.stdout + prepared.stderr)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                          "-x", "--nbval-lax", "--nbval-current-env", *bug.tests],
                         cwd=course, env=env, capture_output=True, text=True, timeout=900)
    output = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout + run.stderr)  # nbval colours its messages
    caught = run.returncode == 1 and bug.shows in output
    if run.returncode == 1 and not caught:
        detail = f"the tests failed, but not with {bug.shows!r}:\n{output[-3000:]}"
    elif run.returncode != 1:
        detail = f"pytest exit {run.returncode}:\n{output[-3000:]}"
    else:
        detail = next((line for line in output.splitlines() if line.startswith(("FAILED", "ERROR"))), "failed")
    return Outcome(bug, caught, time.perf_counter() - started, detail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these bugs (see --list)")
    parser.add_argument("--list", action="store_true", help="list the bugs and the runs that catch them")
    parser.add_argument("--json", help="write the outcomes to this file")
    args = parser.parse_args(argv)
    by_name = {bug.name: bug for bug in BUGS}
    if args.list:
        for bug in BUGS:
            print(f"{bug.name}\n    bug:     {bug.what}\n    caught:  {bug.catches}")
        return 0
    unknown = [name for name in args.names if name not in by_name]
    if unknown:
        parser.error(f"no such bug: {', '.join(unknown)} (one of: {', '.join(by_name)})")
    chosen = [by_name[name] for name in args.names] or list(BUGS)
    if any("test_hosted.py" in test for bug in chosen for test in bug.tests):
        import hosted_machine  # the platform's environment, made here once: the copies share it

        hosted_machine.platform_python()
    outcomes = []
    for bug in chosen:
        with tempfile.TemporaryDirectory(prefix=f"planted-{bug.name}-") as scratch:
            try:
                outcome = try_bug(bug, Path(scratch))
            except LookupError as error:
                outcome = Outcome(bug, False, 0.0, f"cannot be planted: {error}")
        outcomes.append(outcome)
        mark = "caught " if outcome.caught else "MISSED "
        print(f"{mark} {bug.name}  ({outcome.seconds:.0f} s)\n         {outcome.detail.splitlines()[0] if outcome.caught else outcome.detail}",
              flush=True)
    missed = [o.bug.name for o in outcomes if not o.caught]
    print(f"\n{len(outcomes) - len(missed)} of {len(outcomes)} planted bugs caught"
          + (f"; missed: {', '.join(missed)}" if missed else ""))
    if args.json:
        Path(args.json).write_text(json.dumps([{"bug": o.bug.name, "caught": o.caught, "seconds": round(o.seconds, 1),
                                                "tests": list(o.bug.tests)} for o in outcomes], indent=1) + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
