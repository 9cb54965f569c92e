"""A Gradescope autograder made of the course's own grader.

``python -m course_utils.grading gradescope --out autograder.zip --chapters 01 [02 ...]
[--exam [--hints none|first|all] [--reveal-hidden]]`` writes the zip to upload as a Gradescope
"programming assignment" autograder. ``--chapters`` is required: a Gradescope assignment is one
assignment, and its autograder must know which chapter(s) it grades (for an exam, the chapters
the release was made with; ``--hints`` the release's hint policy too).

- ``setup.sh`` (Gradescope runs it once, as root, when it builds the image): installs
  ``python3``, ``python3-venv`` and ``bubblewrap`` with apt, finds a Python the course supports
  (3.10 to 3.14, as the ``course`` script's ``PY_MIN``/``PY_MAX`` say), then runs ``./course
  setup`` in ``/autograder/source`` (the torch build for a machine without a GPU,
  requirements.txt, the course's package) with it, and compiles the course's Python files;
- ``run_autograder`` (Gradescope runs it for each submission): grades
  ``/autograder/submission`` with ``python -m course_utils.grading`` as one learner
  (``--workers 1``; ``--exam --hints POLICY`` when built with ``--exam``) and writes
  ``/autograder/results/results.json``;
- a copy of what the grader needs: the ``course`` script, README.md (``pyproject.toml`` names
  it, so the package does not install without it), requirements.txt, pyproject.toml,
  ``course_utils/`` (with its data files), ``notebooks/`` (the assignment's chapters only), and
  ``gradescope.json`` (how it was built, and every chapter's answer cells, to recognise a
  notebook of another chapter). Never ``solutions/`` (the grader does not read them), ``.git``,
  ``.venv``, ``my-work/`` or ``.course/``.

The image to pick, on the assignment's Configure Autograder page: Base Image OS **Ubuntu**, Base
Image Version **22.04**, Base Image Variant **Base**. Gradescope's documentation
(gradescope-autograders.readthedocs.io, "Base Images") says 22.04 is the default Ubuntu version,
and that *Base* is the OS as installed, with nothing added but what Gradescope's harness needs;
it names no variant with another Python. Its python3 is Ubuntu 22.04's, Python 3.10, inside the
course's 3.10 to 3.14, so nothing else is needed. On an image whose python3 is outside that
range (Ubuntu 18.04 and 20.04 carry 3.6 and 3.8), setup.sh installs the newest ``python3.X``
and ``python3.X-venv`` that apt offers in the range, beside python3 (Gradescope's harness runs on
the image's own python3, which must stay as it is); where apt offers none, or on an image
without apt (Fedora, CentOS, Rocky), setup.sh stops and says which image to pick. Gradescope's
containers have 768 MB of memory and 10 minutes by default (its "Troubleshooting" page): raise
both in the assignment's Autograder Settings (memory above ``--memory-mb``; the timeout above
``--notebook-timeout`` per chapter, at most 40 minutes).

``results.json`` (``results_json``) has one test per exercise of the assignment's chapters,
named ``NN_chapter / exercise``, with the course's own message as its output. An exam's
exercise is two tests: ``...: public cases`` (visible; what the learner's own check said) and
``...: hidden cases``, visible ``after_published`` and saying only passed or failed (or the
grader's message, when built with ``--reveal-hidden``). Gradescope does not show a student the
total while a test of theirs is still hidden, so an exam's total appears when its grades are
published. The top-level ``output`` lists the notebooks found and the problems the grader met
(no notebook, a second notebook for a chapter, a timeout). A chapter of the assignment that was
not handed in scores 0 on each of its exercises, so every submission is out of the same maximum.

A notebook is known by its answer cells, as the grader knows it (``assemble.chapter_of``), not by
its file name: the assignment's chapter under any name is graded; another chapter's notebook
(even one renamed ``01_tensors.ipynb``) is not graded, the output says "homework1.ipynb: this is
chapter 02_autograd's notebook; this assignment is 01_tensors", and the assignment's exercises
score 0 with that reason. A notebook with no answer cell of the course goes to the grader, which
says so.

Where the submission's notebooks are found: every ``.ipynb`` under ``/autograder/submission``,
but only those under a ``my-work/`` folder when there is one (a whole course folder uploaded),
and never in ``backups/``, ``.ipynb_checkpoints/`` or hidden folders, nor through a link.

The sandbox, decided: ``run_autograder`` grades inside bubblewrap when bwrap can make a sandbox
in Gradescope's container (the grader's own trial run says so), and passes ``--no-sandbox``
only when it cannot, which is likely to be the usual case there (Docker's default seccomp
profile refuses the user namespaces bwrap needs; untried on Gradescope itself). Gradescope runs each submission in a container of its own, so an
unsandboxed submission cannot reach another student's work or the instructor's machine, and
the results' top-level ``output`` says that it ran without the sandbox and why. It does run as
root next to the grader, though, so run_autograder also:

- starts the grader with every module of ``course_utils.grading`` and
  ``course_utils.exercises`` already imported, so that no check or judge is read from disk
  after the submission ran (the grader imports some of them only to score);
- is the subreaper of everything the grader starts (``PR_SET_CHILD_SUBREAPER``, ``reaper``): a
  process the submission left behind, however it detached, ends before results.json is written,
  so nothing can rewrite it afterwards (each grading worker already ends them after every run;
  this is the last net, for the grader as a whole);
- notes every file of the course, its Python environment and the standard library before
  grading (size, mtime, inode; and the contents of the course's package and notebooks) and
  compares after: a submission that changed one gets 0, with the files named, for the
  instructor to review (new ``.pyc`` files in ``__pycache__`` are allowed: ``setup.sh``
  compiles everything first, and grading writes none).

What this does not stop without bubblewrap: a submission can read the course's package, the
reference solutions and hidden cases included, and send them over the network. For an exam
that counts, grade where bwrap works (a machine of your own: ``python -m course_utils.grading
--exam``), or keep Gradescope's runs to submissions you would trust with the answers.

The infrastructure failing (the grader refused or crashed) writes no results.json and exits
non-zero: Gradescope then shows that the autograder failed, rather than a grade of 0.

Paths, for running ``run_autograder`` anywhere but in Gradescope (tests):
``GRADESCOPE_ROOT`` (default ``/autograder``; ``source/``, ``submission/`` and ``results/``
lie in it), ``COURSE_PYTHON`` (default ``$GRADESCOPE_ROOT/source/.venv/bin/python``),
``GRADESCOPE_COURSE`` (the course the grader grades against; default the source folder),
``GRADESCOPE_NO_SANDBOX=1`` (grade without bubblewrap even where it works).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import pkgutil
import runpy
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path

from course_utils.grading.reaper import become_subreaper, end_descendants

PROG = "python -m course_utils.grading gradescope"
CONFIG_NAME = "gradescope.json"
LEARNER = "student"
COURSE_FILES = ("course", "README.md", "requirements.txt", "pyproject.toml")
COURSE_FOLDERS = ("course_utils", "notebooks")
REQUIRED = ("course", "README.md", "requirements.txt", "pyproject.toml", "course_utils/grading/__main__.py")
SKIPPED_NAMES = {"__pycache__", ".ipynb_checkpoints", ".DS_Store", ".git"}
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info")
EXECUTABLE = 0o755
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the same bytes for the same course: a reproducible zip
HIDDEN_VISIBILITY = "after_published"
INFRASTRUCTURE_FAILURES = ("the grader failed on this learner", "the grading worker died")
GRADESCOPE_MAX_TIMEOUT_S = 40 * 60  # the most an assignment's settings allow

IMAGE_ADVICE = ("on the assignment's Configure Autograder page, pick Base Image OS: Ubuntu, "
                "Base Image Version: 22.04, Base Image Variant: Base (its python3 is Python 3.10)")

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image. Written by
# `python -m course_utils.grading gradescope`; see course_utils/grading/gradescope.py.
# The image to pick: Base Image OS Ubuntu, Base Image Version 22.04, Base Image Variant Base.
set -euo pipefail
ROOT="${GRADESCOPE_ROOT:-/autograder}"
SOURCE="$ROOT/source"
IMAGE_ADVICE="__IMAGE_ADVICE__"
fail() { printf 'setup.sh: %s\n' "$*" >&2; exit 1; }
cd "$SOURCE"
# The Pythons the course supports, as its own script says (PY_MIN=10, PY_MAX=14: 3.10 to 3.14).
PY_MIN="$(sed -n 's/^PY_MIN=//p' course)"
PY_MAX="$(sed -n 's/^PY_MAX=//p' course)"

# Prints the first of python3, python3.PY_MAX ... python3.PY_MIN that runs and is in range.
supported_python() {
    local minor="$PY_MAX" candidate candidates="python3"
    while [ "$minor" -ge "$PY_MIN" ]; do candidates="$candidates python3.$minor"; minor=$((minor - 1)); done
    for candidate in $candidates; do
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c "import sys; sys.exit(not (3, $PY_MIN) <= sys.version_info[:2] <= (3, $PY_MAX))" 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

# The newest python3.X in range that apt offers, installed beside python3: Gradescope's harness
# runs on the image's own python3, which must stay as it is.
install_supported_python() {
    local minor="$PY_MAX"
    while [ "$minor" -ge "$PY_MIN" ]; do
        if apt-cache show "python3.$minor-venv" >/dev/null 2>&1; then
            apt-get install -y --no-install-recommends "python3.$minor" "python3.$minor-venv"
            return 0
        fi
        minor=$((minor - 1))
    done
    return 1
}

command -v apt-get >/dev/null 2>&1 || fail "this image has no apt-get: $IMAGE_ADVICE."
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv bubblewrap
supported_python >/dev/null || install_supported_python || true
PYTHON="$(supported_python)" ||
    fail "this image's python3 is $(python3 -V 2>&1 || echo 'missing'), and apt offers no Python 3.$PY_MIN to 3.$PY_MAX, which the course needs: $IMAGE_ADVICE."
export PYTHON
echo "The course's Python: $PYTHON ($("$PYTHON" -V 2>&1))"
# No GPU on Gradescope: the small CPU build of torch.
COURSE_TORCH="${COURSE_TORCH:-cpu}" bash ./course setup
# Compiled now, so that grading writes no .pyc file (run_autograder compares the files after).
.venv/bin/python -m compileall -q course_utils
.venv/bin/python -m compileall -q .venv/lib >/dev/null 2>&1 || true
.venv/bin/python -c "from course_utils.grading.sandbox import sandbox_status; print('Sandbox at build time:', sandbox_status())" || true
""".replace("__IMAGE_ADVICE__", IMAGE_ADVICE)

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for each submission: the course's grader grades /autograder/submission and
# writes /autograder/results/results.json. Written by `python -m course_utils.grading gradescope`;
# see course_utils/grading/gradescope.py. GRADESCOPE_ROOT, COURSE_PYTHON, GRADESCOPE_COURSE and
# GRADESCOPE_NO_SANDBOX move it elsewhere for a test.
set -euo pipefail
ROOT="${GRADESCOPE_ROOT:-/autograder}"
SOURCE="$ROOT/source"
PYTHON="${COURSE_PYTHON:-$SOURCE/.venv/bin/python}"
cd "$SOURCE"
exec "$PYTHON" -m course_utils.grading.gradescope run
"""


class BuildError(Exception):
    """The course cannot be made into an autograder; the message says why."""


# --------------------------------------------------------------------------------------------
# results.json
# --------------------------------------------------------------------------------------------
def _listed(chapters: list[str]) -> str:
    """``01_tensors``, ``01_tensors and 02_autograd``, ``a, b and c``."""
    return " and ".join(filter(None, [", ".join(chapters[:-1]), chapters[-1]])) if chapters else "no chapter"


def _status(part: dict) -> str:
    return "passed" if part.get("outcome") == "passed" and part.get("score", 0) >= part.get("max", 1) else "failed"


def _missing(why: str, exam: bool) -> dict:
    part = {"score": 0, "max": 1, "outcome": "missing", "reason": why}
    if not exam:
        return part
    return {**part, "max": 2, "public": dict(part), "hidden": dict(part)}


def _tests_of(name: str, entry: dict, reveal_hidden: bool) -> list[dict]:
    if "public" not in entry:
        return [{"name": name, "score": entry["score"], "max_score": entry["max"], "status": _status(entry),
                 "output": entry.get("reason", ""), "visibility": "visible"}]
    public, hidden = entry["public"], entry["hidden"]
    return [
        {"name": f"{name}: public cases", "score": public["score"], "max_score": public["max"],
         "status": _status(public), "output": public.get("reason", ""), "visibility": "visible"},
        {"name": f"{name}: hidden cases", "score": hidden["score"], "max_score": hidden["max"],
         "status": _status(hidden), "output": hidden.get("reason", "") if reveal_hidden else _status(hidden),
         "visibility": HIDDEN_VISIBILITY},
    ]


def results_json(learner_result: dict, chapters: dict[str, list[str]] | None = None,
                 why_missing: str | None = None) -> dict:
    """Gradescope's results.json for one learner's result from the course's grader.

    One test per exercise (``NN_chapter / exercise``), two for an exam's (public cases,
    visible; hidden cases, ``after_published``). ``chapters`` (the assignment's chapters → their
    exercises in notebook order) are the tests, in that order, and nothing else: every exercise
    the result lacks scores 0 with ``why_missing`` (default: no notebook for its chapter was
    graded), so every submission is out of the same maximum. Without ``chapters``, the
    result's own chapters and exercises, sorted.
    """
    exam = bool(learner_result.get("exam"))
    reveal = bool(learner_result.get("reveal_hidden"))
    notebooks = learner_result.get("notebooks") or {}
    if not chapters:
        chapters = {chapter: [] for chapter in sorted(notebooks)}
    tests = []
    for chapter, listed in chapters.items():
        entries = dict((notebooks.get(chapter) or {}).get("exercises") or {})
        names = list(listed) + sorted(name for name in entries if name not in listed)
        for name in names:
            entry = entries.get(name) or _missing(
                why_missing or f"missing: no notebook for {chapter} was graded", exam)
            tests += _tests_of(f"{chapter} / {name}", entry, reveal)
    lines = [str(problem) for problem in learner_result.get("problems", []) if problem]
    for chapter, notebook in sorted(notebooks.items()):
        lines += [f"{chapter}: {problem}" for problem in notebook.get("problems", []) if problem]
    sandbox = str(learner_result.get("sandbox", ""))
    if sandbox.startswith("none"):
        why = sandbox.partition(":")[2].strip()
        lines.append(f"Graded without the bubblewrap sandbox: {why}. Gradescope runs each "
                     "submission in a container of its own.")
    results = {"score": sum(test["score"] for test in tests), "tests": tests, "stdout_visibility": "hidden"}
    if lines:
        results["output"] = "\n".join(lines)
    return results


# --------------------------------------------------------------------------------------------
# Building the zip
# --------------------------------------------------------------------------------------------
def _skipped(path: Path) -> bool:
    return path.name in SKIPPED_NAMES or path.name.endswith(SKIPPED_SUFFIXES)


def _files_under(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.iterdir()):
        if _skipped(path) or path.is_symlink():
            continue
        if path.is_dir():
            found += _files_under(path)
        elif path.is_file():
            found.append(path)
    return found


def _chapter_names(course: Path, wanted: list[str] | None) -> list[str]:
    """The notebooks/ stems named (``01``, ``01_tensors`` or ``tensors``), in course order.

    Required: a Gradescope assignment is one assignment, and an autograder that did not know
    its chapters would grade whatever chapter was handed in as if it were the assignment.
    """
    if not wanted:
        raise BuildError("--chapters: name the chapter(s) this assignment is, e.g. --chapters 01 "
                         "(for an exam, the chapters of its release)")
    stems = sorted(path.stem for path in (course / "notebooks").glob("*.ipynb"))
    chosen = []
    for name in wanted:
        matches = [stem for stem in stems if name in (stem, stem[:2], stem[3:])]
        if len(matches) != 1:
            raise BuildError(f"--chapters: {name!r} names no chapter of {course / 'notebooks'} "
                             f"(one of {', '.join(stems)})")
        chosen.append(matches[0])
    return [stem for stem in stems if stem in chosen]


def answer_cells(course: Path) -> dict[str, list[str]]:
    """Chapter → the ids of its notebook's answer cells, for every chapter of ``course``: what
    the grader recognises a notebook's chapter by (``assemble.chapter_of``)."""
    from course_utils.grading.assemble import course_answer_ids
    from course_utils.grading.batch import course_notebooks

    return {chapter: sorted(course_answer_ids(notebook)) for chapter, notebook in course_notebooks(course).items()}


def _check_course(course: Path) -> None:
    for name in REQUIRED:
        if not (course / name).exists():
            raise BuildError(f"{course} has no {name}: not a course folder the grader can run from")


def course_files(course: Path, chapters: list[str] | None = None) -> dict[str, Path]:
    """Name in the zip → file of the course, for what the grader needs."""
    _check_course(course)
    files = {name: course / name for name in COURSE_FILES}
    for folder in COURSE_FOLDERS:
        if not (course / folder).is_dir():
            continue
        for path in _files_under(course / folder):
            relative = path.relative_to(course)
            if (folder == "notebooks" and chapters is not None and path.suffix == ".ipynb"
                    and len(relative.parts) == 2 and path.stem not in chapters):
                continue
            files[relative.as_posix()] = path
    return files


def _add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (stat.S_IFREG | mode) << 16
    archive.writestr(info, data)


def build_autograder(course: Path, out_zip: Path, exam: bool = False, chapters: list[str] | None = None,
                     reveal_hidden: bool = False, grader_options: list[str] | None = None,
                     hints: str | None = None) -> Path:
    """Write Gradescope's autograder zip for ``course`` to ``out_zip``; returns ``out_zip``.

    ``chapters`` (``01``, ``01_tensors`` or ``tensors``; required): the assignment's chapters.
    Only their notebooks go in, and every submission is scored on all of their exercises.
    ``hints`` (with ``exam``; default ``none``): the exam release's hint policy, which the
    grader's feedback keeps to. ``grader_options`` go to the grader as they are
    (``--cell-timeout 60``).
    """
    course = course.resolve()
    if reveal_hidden and not exam:
        raise BuildError("--reveal-hidden goes with --exam")
    if hints is not None and not exam:
        raise BuildError("--hints goes with --exam")
    _check_course(course)
    chosen = _chapter_names(course, chapters)
    files = course_files(course, chosen)
    config = {"exam": exam, "reveal_hidden": reveal_hidden, "hints": (hints or "none") if exam else None,
              "chapters": chosen, "answer_cells": answer_cells(course),
              "grader_options": list(grader_options or [])}
    out_zip = out_zip.resolve()
    out_zip.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=out_zip.parent, prefix=f".{out_zip.name}.")
    os.close(handle)
    try:
        with zipfile.ZipFile(tmp, "w") as archive:
            _add(archive, "setup.sh", SETUP_SH.encode(), EXECUTABLE)
            _add(archive, "run_autograder", RUN_AUTOGRADER.encode(), EXECUTABLE)
            _add(archive, CONFIG_NAME, (json.dumps(config, indent=1, sort_keys=True) + "\n").encode(), 0o644)
            for name in sorted(files):
                mode = EXECUTABLE if os.stat(files[name]).st_mode & 0o111 else 0o644
                _add(archive, name, files[name].read_bytes(), mode)
        os.replace(tmp, out_zip)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out_zip


def upload_advice(out: Path, chapters: list[str], notebook_timeout: int, memory_mb: int) -> str:
    """What to do with the zip on Gradescope: the image to pick, and the settings its defaults
    (768 MB, 10 minutes; at most 40 minutes, says its "Troubleshooting" page) would get wrong."""
    with zipfile.ZipFile(out) as archive:
        count = len(archive.namelist())
    needed = notebook_timeout * len(chapters)
    advice = (f"Wrote {out} ({out.stat().st_size // 1024} KB, {count} files), the autograder of "
              f"{_listed(chapters)}. Upload it as the assignment's autograder and, {IMAGE_ADVICE}. "
              f"In the assignment's Autograder Settings, give it more memory than the {memory_mb} MB a "
              "notebook may use (--memory-mb), with room for the grader besides (Gradescope's default is "
              f"768 MB), and a timeout above {needed} s (--notebook-timeout for each chapter).")
    if needed > GRADESCOPE_MAX_TIMEOUT_S:
        advice += (f" Gradescope allows {GRADESCOPE_MAX_TIMEOUT_S // 60} minutes at most: lower "
                   "--notebook-timeout, or make it fewer chapters.")
    return advice


def main(argv: list[str] | None = None) -> int:
    from course_utils.exercises.exam import HINT_POLICIES
    from course_utils.grading.sandbox import Limits

    defaults = Limits()
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Build a Gradescope autograder (setup.sh, run_autograder and the course the grader "
                    "needs) that grades each submission with this course's grader and writes "
                    "Gradescope's results.json: one test per exercise of the assignment's chapters.",
    )
    parser.add_argument("--out", type=Path, required=True, help="the zip to write, e.g. autograder.zip")
    parser.add_argument("--chapters", nargs="+", metavar="CHAPTER", required=True,
                        help="the assignment's chapters (01, 01_tensors or tensors): only their notebooks are "
                             "graded, each submission on all of their exercises; a notebook of another "
                             "chapter is not graded, and the results say so")
    parser.add_argument("--course", type=Path, default=Path(__file__).resolve().parents[2],
                        help="the course folder (default: the one this grader belongs to)")
    parser.add_argument("--exam", action="store_true",
                        help="submissions of an exam release: public cases (visible) and hidden cases "
                             "(shown after the grades are published) scored apart")
    parser.add_argument("--hints", choices=HINT_POLICIES,
                        help="with --exam: the hints the release showed (its --hints; default none), so that "
                             "the public checks' feedback shows no more")
    parser.add_argument("--reveal-hidden", action="store_true",
                        help="with --exam: the hidden cases' tests say what they found, not only passed or failed")
    parser.add_argument("--cell-timeout", type=int, default=defaults.cell_timeout_s, help="seconds")
    parser.add_argument("--notebook-timeout", type=int, default=defaults.notebook_timeout_s,
                        help="seconds; keep the notebooks' total under Gradescope's own autograder timeout")
    parser.add_argument("--memory-mb", type=int, default=defaults.memory_mb)
    args = parser.parse_args(argv)
    options = ["--cell-timeout", str(args.cell_timeout), "--notebook-timeout", str(args.notebook_timeout),
               "--memory-mb", str(args.memory_mb)]
    try:
        out = build_autograder(args.course, args.out, args.exam, args.chapters, args.reveal_hidden, options,
                               args.hints)
    except BuildError as error:
        parser.error(str(error))
    with zipfile.ZipFile(out) as archive:
        chapters = json.loads(archive.read(CONFIG_NAME))["chapters"]
    print(upload_advice(out, chapters, args.notebook_timeout, args.memory_mb))
    return 0


# --------------------------------------------------------------------------------------------
# run_autograder
# --------------------------------------------------------------------------------------------
def _paths() -> dict[str, Path]:
    root = Path(os.environ.get("GRADESCOPE_ROOT") or "/autograder")
    source = root / "source"
    return {"root": root, "source": source, "submission": root / "submission", "results": root / "results",
            "course": Path(os.environ.get("GRADESCOPE_COURSE") or source)}


def submitted_notebooks(submission: Path) -> list[Path]:
    """The notebooks to grade: under ``my-work/`` when there is one, never in backups or
    checkpoints, hidden folders or through links."""
    found = []
    if submission.is_dir():
        for path in sorted(submission.rglob("*.ipynb")):
            parts = path.relative_to(submission).parts
            if any(part.startswith(".") or part == "backups" for part in parts[:-1]):
                continue
            if path.is_symlink() or not path.is_file() or any(
                    parent.is_symlink() for parent in path.parents if submission in parent.parents):
                continue
            found.append(path)
    in_work = [path for path in found if "my-work" in path.relative_to(submission).parts[:-1]]
    return in_work or found


def notebook_chapter(path: Path, answer_cells: dict[str, list[str]]) -> str | None:
    """The chapter a submitted notebook is: the one whose answer cells it shares most (as the
    grader decides, ``assemble.chapter_of``), or, with none of them, the one its file is named
    after. Its answers first, not its name: chapter 02's notebook renamed ``01_tensors.ipynb`` is
    still chapter 02's. None for a file that is no readable notebook, or of no chapter."""
    from course_utils.grading.submissions import Unreadable, answer_sources, read_submission

    try:
        ids = set(answer_sources(read_submission(path))[0])
    except (Unreadable, OSError):
        return None
    shared = {chapter: len(ids & set(cells)) for chapter, cells in answer_cells.items()}
    best = max(shared, key=shared.get, default=None)
    if best is not None and shared[best] > 0:
        return best
    return path.stem if path.stem in answer_cells else None


def sort_by_chapter(found: list[Path], answer_cells: dict[str, list[str]],
                    chapters: list[str]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The notebooks to grade, and those that are another chapter's than the assignment's
    ``chapters`` (each with its chapter), which are not graded. A notebook of no chapter, or one
    that cannot be read, is graded: the grader says what is wrong with it."""
    to_grade, elsewhere = [], []
    for path in found:
        chapter = notebook_chapter(path, answer_cells)
        if chapter is None or chapter in chapters:
            to_grade.append(path)
        else:
            elsewhere.append((path, chapter))
    return to_grade, elsewhere


def another_chapter_notes(elsewhere: list[tuple[Path, str]], chapters: list[str]) -> list[str]:
    """A line of the results' output for each notebook of another chapter than the assignment's."""
    return [f"{path.name}: this is chapter {chapter}'s notebook; this assignment is {_listed(chapters)}. "
            "Not graded." for path, chapter in elsewhere]


def another_chapter_reason(elsewhere: list[tuple[Path, str]], chapters: list[str]) -> str:
    """Why the assignment's exercises score 0 when what was handed in is another chapter's."""
    notebooks = ", ".join(f"{path.name} is chapter {chapter}'s notebook" for path, chapter in elsewhere)
    return f"not graded: {notebooks}; this assignment is {_listed(chapters)}"


def _wait_for(child: subprocess.Popen) -> int:
    """Wait for ``child``, reaping the orphans that come to this subreaper meanwhile."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return child.wait()
        except InterruptedError:
            continue
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)
            return child.returncode


def watched_roots(paths: dict[str, Path]) -> tuple[list[Path], list[Path]]:
    """What an unsandboxed submission must not change: the folders to watch (the course, its
    Python, the standard library) and, among them, those whose files' contents are compared too
    (the course's package and notebooks, which the grader reads)."""
    candidates = [paths["source"], paths["course"], Path(sys.prefix), Path(sys.base_prefix) / "lib",
                  Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["platstdlib"])]
    roots: list[Path] = []
    for path in sorted({p.resolve() for p in candidates if p.exists()}, key=lambda p: len(p.parts)):
        if not any(root == path or root in path.parents for root in roots):
            roots.append(path)
    hashed = [folder.resolve() for folder in (paths["source"] / "course_utils", paths["source"] / "notebooks",
                                              paths["course"] / "course_utils", paths["course"] / "notebooks")
              if folder.is_dir()]
    return roots, hashed


def file_states(roots: list[Path], hashed: list[Path] = ()) -> dict[str, tuple]:
    """Path → (mode, size, mtime, inode) of every file and link under ``roots``, and the sha256
    of the files under ``hashed``. Not the ctime: hard links made to these files elsewhere
    (a copy of the course's .venv by ``cp -al``, as its tests make) change it."""
    states = {}
    hashed_prefixes = tuple(str(folder) + os.sep for folder in hashed)
    for root in roots:
        for folder, dirs, names in os.walk(root):
            for name in names + dirs:
                path = os.path.join(folder, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    continue
                state = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
                if stat.S_ISREG(st.st_mode) and path.startswith(hashed_prefixes):
                    try:
                        with open(path, "rb") as file:
                            state += (hashlib.sha256(file.read()).hexdigest(),)
                    except OSError:
                        pass
                states[path] = state
    return states


def changed_files(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """Files added, removed or changed; a new ``.pyc`` in ``__pycache__`` is not a change."""
    changed = [path for path, state in before.items() if after.get(path) != state]
    changed += [path for path in after if path not in before
                and not (path.endswith(".pyc") and os.path.basename(os.path.dirname(path)) == "__pycache__")]
    return sorted(changed)


def _write_results(results_dir: Path, results: dict) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / "results.json"
    handle, tmp = tempfile.mkstemp(dir=results_dir, prefix=".results.json.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def course_exercises(course: Path) -> dict[str, list[str]]:
    """Chapter → the exercises its notebook in ``course`` checks, in notebook order."""
    from course_utils.grading.batch import course_notebooks, graded_exercises

    return {chapter: graded_exercises(chapter, notebook) for chapter, notebook in course_notebooks(course).items()}


class GraderFailed(Exception):
    """The grader refused, crashed or failed on the submission: no results.json is written, so
    that Gradescope shows the autograder failed rather than a grade of 0."""

    def __init__(self, message: str, returncode: int = 1):
        super().__init__(message)
        self.returncode = returncode


def grader_command(config: dict, submissions: Path, out: Path, course: Path,
                   sandbox_problem: str | None) -> list[str]:
    """The grader's command line for one learner, as the autograder was built (``config``):
    an exam's hint policy included, so that its feedback shows no more hints than the release.
    ``sandbox_problem``: why bubblewrap cannot sandbox here (then ``--no-sandbox``), or None."""
    command = [sys.executable, "-m", "course_utils.grading.gradescope", "grade", str(submissions),
               "--out", str(out), "--course", str(course), "--workers", "1", "--no-cache",
               *config.get("grader_options", [])]
    if config.get("exam"):
        command.append("--exam")
        if config.get("hints"):
            command += ["--hints", config["hints"]]
    if config.get("reveal_hidden"):
        command.append("--reveal-hidden")
    if sandbox_problem is not None:
        command.append("--no-sandbox")
    return command


def _grade_notebooks(paths: dict[str, Path], config: dict, notebooks: list[Path]) -> tuple[dict, list[str]]:
    """Grade ``notebooks`` as one learner with the course's grader; returns its result and the
    files of the grader that the submission changed (watched only without a sandbox). Raises
    ``GraderFailed``."""
    subreaper = become_subreaper()
    from course_utils.grading.sandbox import bubblewrap_problem

    forced = os.environ.get("GRADESCOPE_NO_SANDBOX", "") not in ("", "0")
    problem = "GRADESCOPE_NO_SANDBOX is set" if forced else bubblewrap_problem()
    with tempfile.TemporaryDirectory(prefix="gradescope-") as work:
        submissions, out = Path(work) / "submissions", Path(work) / "results"
        learner = submissions / LEARNER
        learner.mkdir(parents=True)
        for path in notebooks:
            target = learner / path.relative_to(paths["submission"])
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        command = grader_command(config, submissions, out, paths["course"].resolve(), problem)
        print(f"Grading: {', '.join(str(p.relative_to(paths['submission'])) for p in notebooks)}; "
              f"sandbox: {'none (' + problem + ')' if problem else 'bubblewrap'}; subreaper: {subreaper}", flush=True)
        sys.dont_write_bytecode = True
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        roots, hashed = watched_roots(paths) if problem is not None else ([], [])
        before = file_states(roots, hashed)
        child = subprocess.Popen(command, cwd=paths["source"], env=env, stdin=subprocess.DEVNULL)
        returncode = _wait_for(child)
        ended = end_descendants() if subreaper else 0
        if ended:
            print(f"Ended {ended} processes left behind after grading.", flush=True)
        changed = changed_files(before, file_states(roots, hashed)) if roots else []
        result_file = out / f"{LEARNER}.json"
        if returncode != 0 or not result_file.exists():
            raise GraderFailed(f"The grader failed (exit {returncode}); no results.json written.", returncode or 1)
        result = json.loads(result_file.read_text(encoding="utf-8"))
    failures = [p for p in result.get("problems", []) if str(p).startswith(INFRASTRUCTURE_FAILURES)]
    if failures:
        raise GraderFailed("The grader failed on this submission; no results.json written:\n"
                           + "\n".join(map(str, failures)))
    return result, changed


def run(argv: list[str] | None = None) -> int:
    """What ``run_autograder`` does: grade the submission's notebooks of the assignment's
    chapters, write results.json."""
    del argv
    start = time.perf_counter()
    paths = _paths()
    config = json.loads((paths["source"] / CONFIG_NAME).read_text(encoding="utf-8"))
    chapters = config["chapters"]
    # Everything read from the course is read now, before any submission runs.
    exercises = course_exercises(paths["course"])
    found = submitted_notebooks(paths["submission"])
    to_grade, elsewhere = sort_by_chapter(found, config["answer_cells"], chapters)
    print(f"Notebooks found: {', '.join(str(p.relative_to(paths['submission'])) for p in found) or 'none'}",
          flush=True)
    result, changed = {"exam": config.get("exam"), "reveal_hidden": config.get("reveal_hidden"),
                       "notebooks": {}, "problems": []}, []
    if to_grade:
        try:
            result, changed = _grade_notebooks(paths, config, to_grade)
        except GraderFailed as failure:
            print(failure, file=sys.stderr)
            return failure.returncode
    why = another_chapter_reason(elsewhere, chapters) if elsewhere else None
    results = results_json(result, {chapter: exercises[chapter] for chapter in chapters if chapter in exercises}, why)
    notes = [f"Notebooks found: {', '.join(p.name for p in found)}" if found
             else "No notebook (.ipynb) found in the submission."]
    notes += another_chapter_notes(elsewhere, chapters)
    if changed:
        shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
        notes.append(f"Your submission changed files of the grader while it ran ({shown}): scored 0 "
                     "until your instructor has reviewed it.")
        results["score"] = 0
        results["extra_data"] = {"changed_files": changed}
    results["output"] = "\n".join(notes + ([results["output"]] if "output" in results else []))
    results["execution_time"] = round(time.perf_counter() - start)
    path = _write_results(paths["results"], results)
    print(f"{path}: score {results['score']} of {sum(t['max_score'] for t in results['tests'])}", flush=True)
    return 0


def grade(argv: list[str]) -> int:
    """``python -m course_utils.grading ARGV``; without the sandbox, with every module it may
    import already imported (see the module's docstring). In a sandbox, the course is read-only
    to the submission."""
    import course_utils.exercises
    import course_utils.grading

    for package in (course_utils.exercises, course_utils.grading) if "--no-sandbox" in argv else ():
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if module.name in ("course_utils.grading.gradescope", "course_utils.grading.__main__"):
                continue
            try:
                importlib.import_module(module.name)
            except Exception as error:  # a module the grader cannot import, it does not use
                print(f"Not imported beforehand: {module.name} ({type(error).__name__}: {error})",
                      file=sys.stderr)
    sys.argv = [sys.argv[0], *argv]
    try:
        runpy.run_module("course_utils.grading", run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        if isinstance(exit.code, int) or exit.code is None:
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        sys.exit(run(sys.argv[2:]))
    if sys.argv[1:2] == ["grade"]:
        sys.exit(grade(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
