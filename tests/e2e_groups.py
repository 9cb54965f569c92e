"""The end-to-end groups: tests kept out of ``./course test`` that ``./course test-e2e`` runs.

Some tests start a whole machine's worth of work for each case: the grader's batches (a class of
submissions, hostile ones, limits, exams), each chapter alone on a fresh simulated hosted Jupyter,
and the instructor tools on a copy of the course (a new exercise, an exam release, set-up and
update of a learner's clone). Together they were about half of the test command's time, so the
command that runs on every change leaves them out and ``./course test-e2e`` runs them, in three
groups.

Nothing lands without them. Each group names its **inputs**, the files whose content can change
its outcome; when a group passes, ``./course test-e2e`` records a digest of those files in
``tests/e2e_passed.json`` (commit it with your change). ``.ci/run`` runs
``./course test-e2e --if-changed`` after the test command: a group runs again unless its inputs
are exactly those it last passed on. A change to the grader runs the grader's group; a sentence in a
chapter runs the hosted and tools groups; a change to the tests of the website runs none.

Usage: ``python tests/e2e_groups.py run [--if-changed] [GROUP ...] [-- PYTEST ARGS]``,
``python tests/e2e_groups.py stale`` (the groups whose inputs changed, on one line).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = "tests/e2e_passed.json"

# What every group reads: the course package, the tests' settings and helpers (not the other
# test files: a group reads only its own), the pins.
COMMON_INPUTS = ("course_utils/", "conftest.py", "tests/*.py", "tests/simulated_machine/",
                 "pyproject.toml", "requirements.txt")
OTHER_TESTS = "tests/test_*.py"


@dataclass(frozen=True)
class Group:
    tests: tuple[str, ...]  # test ids or id prefixes: a file, or a file::Class
    inputs: tuple[str, ...]  # besides COMMON_INPUTS: folders (ending in /) and file patterns
    about: str

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(test.split("::", 1)[0] for test in self.tests))


GROUPS = {
    "grader": Group(
        tests=("tests/test_grading_hostile.py", "tests/test_grading_options.py",
               "tests/test_grading_class.py", "tests/test_grading_stops.py",
               "tests/test_grading_hardening.py", "tests/test_grading_exam.py",
               "tests/test_grading_guard.py", "tests/test_grading_sandbox_required.py",
               "tests/test_grading_shards.py", "tests/test_grading_answer_styles.py"),
        # and the real solutions of chapter 01, which a hostile submission tries to read
        inputs=("tests/grading_course/", "tests/catalogue/", "solutions/01_tensors.ipynb",
                "tests/answer_cell_styles.py"),
        about="the grader's command line on whole batches: hostile and broken submissions, "
              "limits and stops, a class in shards, exams, the kernel guard"),
    "hosted": Group(
        tests=("tests/test_hosted.py::TestChapter", "tests/test_hosted.py::TestEnvironmentChapterOnColab"),
        inputs=("notebooks/", "solutions/", "README.md", "requirements-hosted.txt"),
        about="each chapter alone on a fresh simulated Colab, Kaggle or hub, every displayed "
              "solution pasted in"),
    "tools": Group(
        tests=("tests/test_new_exercise.py", "tests/test_exam_release.py", "tests/test_digits_project.py",
               "tests/test_time_checks.py", "tests/test_course_setup.py", "tests/test_course_update.py"),
        inputs=("notebooks/", "solutions/", "tools/", "course", "README.md", "INSTRUCTORS.md",
                "environment.yml", "requirements-*.txt", ".gitignore"),  # update: a git clone of a copy
        about="the instructor's and learner's tools on a copy of the course: a new exercise, an "
              "exam release, the chapter 07 project, timing the checks, ./course setup and update"),
}


def group_of(nodeid: str) -> str | None:
    """The end-to-end group the test ``nodeid`` (relative to the course) belongs to, if any."""
    for name, group in GROUPS.items():
        for test in group.tests:
            if nodeid == test or nodeid.startswith(test + ("::" if "::" not in test else "")):
                return name
    return None


def whole_files() -> set[str]:
    """Test files all of whose tests belong to a group (the test command need not collect them)."""
    return {test for group in GROUPS.values() for test in group.tests if "::" not in test}


def _course_files(root: Path) -> list[str] | None:
    """Files of the course that git keeps or would keep (tracked, or new and not ignored)."""
    if not shutil.which("git"):
        return None
    run = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                         cwd=root, capture_output=True)
    if run.returncode != 0:
        return None
    return sorted(set(filter(None, run.stdout.decode("utf-8", "surrogateescape").split("\0"))))


def _matches(path: str, pattern: str) -> bool:
    """``folder/`` holds everything below it; otherwise each part of the path matches its part of the pattern."""
    if pattern.endswith("/"):
        return path.startswith(pattern)
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, wanted))


def inputs_of(name: str, files: list[str]) -> list[str]:
    group = GROUPS[name]
    patterns = COMMON_INPUTS + group.inputs
    return [path for path in files
            if path in group.files
            or (path != RECORD and not _matches(path, OTHER_TESTS) and any(_matches(path, p) for p in patterns))]


def _sandbox() -> str:
    """A pass without bubblewrap skipped what only a sandbox can check: it does not count for one with it."""
    return "bubblewrap" if shutil.which("bwrap") else "no sandbox"


def digests(root: Path = ROOT) -> dict[str, str] | None:
    """Each group's digest of its inputs as they are on disk now; None where git cannot list them."""
    files = _course_files(root)
    if files is None:
        return None
    result = {}
    for name in GROUPS:
        sha = hashlib.sha256(f"{name}\n{_sandbox()}\n".encode())
        for path in inputs_of(name, files):
            full = root / path
            if full.is_file():
                sha.update(path.encode("utf-8", "surrogateescape") + b"\0")
                sha.update(hashlib.sha256(full.read_bytes()).digest())
        result[name] = sha.hexdigest()
    return result


def recorded(root: Path = ROOT) -> dict[str, str]:
    try:
        data = json.loads((root / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {name: entry["inputs"] for name, entry in data.items() if isinstance(entry, dict) and "inputs" in entry}


def stale(root: Path = ROOT, now: dict[str, str] | None = None) -> list[str]:
    """The groups whose inputs are not those they last passed on (all, where git cannot tell)."""
    now = digests(root) if now is None else now
    if now is None:
        return list(GROUPS)
    passed = recorded(root)
    return [name for name in GROUPS if passed.get(name) != now[name]]


def record_pass(names: list[str], now: dict[str, str], root: Path = ROOT) -> None:
    path = root / RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    for name in names:
        data[name] = {"inputs": now[name], "about": GROUPS[name].about}
    path.write_text(json.dumps({name: data[name] for name in sorted(data)}, indent=1) + "\n", encoding="utf-8")


def pytest_command(names: list[str], pytest_args: list[str]) -> list[str]:
    files = [file for name in names for file in GROUPS[name].files]
    groups = [arg for name in names for arg in ("--e2e-group", name)]
    return [sys.executable, "-m", "pytest", "-n", "auto", "--dist", "loadscope", *files, *groups, *pytest_args]


def run(names: list[str], if_changed: bool, pytest_args: list[str], root: Path = ROOT,
        runner=subprocess.call, say=print) -> int:
    """Run the groups ``names`` (all when empty); record each pass. Returns pytest's exit code."""
    unknown = [name for name in names if name not in GROUPS]
    if unknown:
        say(f"course test-e2e: no group named {', '.join(unknown)}; the groups are {', '.join(GROUPS)}")
        return 2
    names = names or list(GROUPS)
    now = digests(root)
    if if_changed:
        changed = stale(root, now)
        kept = [name for name in names if name not in changed]
        if kept:
            say(f"course test-e2e: {', '.join(kept)}: passed before on these very inputs ({RECORD}); not run again")
        names = [name for name in names if name in changed]
        if not names:
            return 0
    say(f"course test-e2e: running {', '.join(names)}")
    rc = runner(pytest_command(names, pytest_args), cwd=root)
    if rc == 0 and now is not None and not pytest_args:
        record_pass(names, now, root)
        say(f"course test-e2e: recorded the pass of {', '.join(names)} in {RECORD}; commit it with your change, "
            "so that CI need not run them again")
    elif rc == 0 and pytest_args:
        say(f"course test-e2e: passed, not recorded in {RECORD} (pytest options were given: "
            "some tests may not have run)")
    elif rc == 0:
        say(f"course test-e2e: passed, not recorded in {RECORD} (git could not list the course's files)")
    return rc


def main(argv: list[str]) -> int:
    if argv[:1] == ["stale"]:
        print(" ".join(stale()))
        return 0
    if argv[:1] != ["run"]:
        print(__doc__)
        return 2
    argv = argv[1:]
    pytest_args = []
    if "--" in argv:
        at = argv.index("--")
        argv, pytest_args = argv[:at], argv[at + 1:]
    if_changed = "--if-changed" in argv
    names = [arg for arg in argv if arg != "--if-changed"]
    return run(names, if_changed, pytest_args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
