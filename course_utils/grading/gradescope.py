"""A Gradescope autograder made of the course's own grader.

``python -m course_utils.grading gradescope --out autograder.zip [--exam] [--chapters 01 02]``
writes the zip to upload as a Gradescope "programming assignment" autograder:

- ``setup.sh`` (Gradescope runs it once, as root, when it builds the image): installs
  ``python3-venv`` and ``bubblewrap`` with apt, then ``./course setup`` in
  ``/autograder/source`` (the torch build for a machine without a GPU, requirements.txt, the
  course's package), and compiles the course's Python files;
- ``run_autograder`` (Gradescope runs it for each submission): grades
  ``/autograder/submission`` with ``python -m course_utils.grading`` as one learner
  (``--workers 1``, ``--exam`` when built with ``--exam``) and writes
  ``/autograder/results/results.json``;
- a copy of what the grader needs: the ``course`` script, README.md (``pyproject.toml`` names
  it, so the package does not install without it), requirements.txt, pyproject.toml,
  ``course_utils/``, ``notebooks/`` (only the chosen chapters with ``--chapters``), ``data/``,
  and ``gradescope.json`` (how it was built). Never ``solutions/`` (the grader does not read
  them), ``.git``, ``.venv``, ``my-work/`` or ``.course/``.

``results.json`` (``results_json``) has one test per exercise, named ``NN_chapter / exercise``,
with the course's own message as its output. An exam's exercise is two tests: ``...: public
cases`` (visible; what the learner's own check said) and ``...: hidden cases``, visible
``after_published`` and saying only passed or failed (or the grader's message, when built with
``--reveal-hidden``). Gradescope does not show a student the total while a test of theirs is
still hidden, so an exam's total appears when its grades are published. The top-level
``output`` lists the notebooks found and the problems the grader met (no notebook, a second
notebook for a chapter, a timeout). With ``--chapters``, a chapter that was not handed in scores
0 on each of its exercises, so every submission is out of the same maximum.

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
COURSE_FOLDERS = ("course_utils", "notebooks", "data")
REQUIRED = ("course", "README.md", "requirements.txt", "pyproject.toml", "course_utils/grading/__main__.py")
SKIPPED_NAMES = {"__pycache__", ".ipynb_checkpoints", ".DS_Store", ".git"}
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info")
EXECUTABLE = 0o755
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the same bytes for the same course: a reproducible zip
HIDDEN_VISIBILITY = "after_published"
INFRASTRUCTURE_FAILURES = ("the grader failed on this learner", "the grading worker died")

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu 22.04 or
# newer: the course needs Python 3.10 or later). Written by `python -m course_utils.grading gradescope`.
set -euo pipefail
ROOT="${GRADESCOPE_ROOT:-/autograder}"
SOURCE="$ROOT/source"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv bubblewrap
cd "$SOURCE"
# No GPU on Gradescope: the small CPU build of torch.
COURSE_TORCH="${COURSE_TORCH:-cpu}" bash ./course setup
# Compiled now, so that grading writes no .pyc file (run_autograder compares the files after).
.venv/bin/python -m compileall -q course_utils
.venv/bin/python -m compileall -q .venv/lib >/dev/null 2>&1 || true
.venv/bin/python -c "from course_utils.grading.sandbox import sandbox_status; print('Sandbox at build time:', sandbox_status())" || true
"""

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


def results_json(learner_result: dict, chapters: dict[str, list[str]] | None = None) -> dict:
    """Gradescope's results.json for one learner's result from the course's grader.

    One test per exercise (``NN_chapter / exercise``), two for an exam's (public cases,
    visible; hidden cases, ``after_published``). ``chapters`` (chapter → its exercises in
    notebook order) orders the tests and adds, scored 0, every exercise of a chapter the result
    lacks; without it, the result's own chapters and exercises, sorted.
    """
    exam = bool(learner_result.get("exam"))
    reveal = bool(learner_result.get("reveal_hidden"))
    notebooks = learner_result.get("notebooks") or {}
    chapters = chapters or {}
    tests = []
    for chapter in sorted(set(notebooks) | set(chapters)):
        entries = dict((notebooks.get(chapter) or {}).get("exercises") or {})
        names = list(chapters.get(chapter, []))
        names += sorted(name for name in entries if name not in names)
        for name in names:
            entry = entries.get(name) or _missing(
                f"missing: no notebook for {chapter} was graded", exam)
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


def _chapter_names(course: Path, wanted: list[str] | None) -> list[str] | None:
    """The notebooks/ stems named (``01``, ``01_tensors`` or ``tensors``), in course order."""
    if not wanted:
        return None
    stems = sorted(path.stem for path in (course / "notebooks").glob("*.ipynb"))
    chosen = []
    for name in wanted:
        matches = [stem for stem in stems if name in (stem, stem[:2], stem[3:])]
        if len(matches) != 1:
            raise BuildError(f"--chapters: {name!r} names no chapter of {course / 'notebooks'} "
                             f"(one of {', '.join(stems)})")
        chosen.append(matches[0])
    return [stem for stem in stems if stem in chosen]


def course_files(course: Path, chapters: list[str] | None = None) -> dict[str, Path]:
    """Name in the zip → file of the course, for what the grader needs."""
    for name in REQUIRED:
        if not (course / name).exists():
            raise BuildError(f"{course} has no {name}: not a course folder the grader can run from")
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
                     reveal_hidden: bool = False, grader_options: list[str] | None = None) -> Path:
    """Write Gradescope's autograder zip for ``course`` to ``out_zip``; returns ``out_zip``.

    ``chapters`` (``01``, ``01_tensors`` or ``tensors``): only these notebooks go in, and every
    submission is scored on all of their exercises. ``grader_options`` go to the grader as
    they are (``--cell-timeout 60``).
    """
    course = course.resolve()
    if reveal_hidden and not exam:
        raise BuildError("--reveal-hidden goes with --exam")
    chosen = _chapter_names(course, chapters)
    files = course_files(course, chosen)
    config = {"exam": exam, "reveal_hidden": reveal_hidden, "chapters": chosen,
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


def main(argv: list[str] | None = None) -> int:
    from course_utils.grading.sandbox import Limits

    defaults = Limits()
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Build a Gradescope autograder (setup.sh, run_autograder and the course the grader "
                    "needs) that grades each submission with this course's grader and writes "
                    "Gradescope's results.json: one test per exercise.",
    )
    parser.add_argument("--out", type=Path, required=True, help="the zip to write, e.g. autograder.zip")
    parser.add_argument("--course", type=Path, default=Path(__file__).resolve().parents[2],
                        help="the course folder (default: the one this grader belongs to)")
    parser.add_argument("--exam", action="store_true",
                        help="submissions of an exam release: public cases (visible) and hidden cases "
                             "(shown after the grades are published) scored apart")
    parser.add_argument("--reveal-hidden", action="store_true",
                        help="with --exam: the hidden cases' tests say what they found, not only passed or failed")
    parser.add_argument("--chapters", nargs="+", metavar="CHAPTER",
                        help="only these chapters (01, 01_tensors or tensors), each submission scored on all "
                             "of their exercises; default: every notebook, scored on those handed in")
    parser.add_argument("--cell-timeout", type=int, default=defaults.cell_timeout_s, help="seconds")
    parser.add_argument("--notebook-timeout", type=int, default=defaults.notebook_timeout_s,
                        help="seconds; keep the notebooks' total under Gradescope's own autograder timeout")
    parser.add_argument("--memory-mb", type=int, default=defaults.memory_mb)
    args = parser.parse_args(argv)
    options = ["--cell-timeout", str(args.cell_timeout), "--notebook-timeout", str(args.notebook_timeout),
               "--memory-mb", str(args.memory_mb)]
    try:
        out = build_autograder(args.course, args.out, args.exam, args.chapters, args.reveal_hidden, options)
    except BuildError as error:
        parser.error(str(error))
    with zipfile.ZipFile(out) as archive:
        count = len(archive.namelist())
    print(f"Wrote {out} ({out.stat().st_size // 1024} KB, {count} files). Upload it as the assignment's "
          "autograder, on an Ubuntu 22.04 or newer base image, with an autograder timeout above "
          f"{args.notebook_timeout} s per chapter handed in.")
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


def run(argv: list[str] | None = None) -> int:
    """What ``run_autograder`` does: grade the submission, write results.json."""
    del argv
    start = time.perf_counter()
    paths = _paths()
    config = json.loads((paths["source"] / CONFIG_NAME).read_text(encoding="utf-8"))
    subreaper = become_subreaper()
    from course_utils.grading.sandbox import bubblewrap_problem

    forced = os.environ.get("GRADESCOPE_NO_SANDBOX", "") not in ("", "0")
    problem = "GRADESCOPE_NO_SANDBOX is set" if forced else bubblewrap_problem()
    # Everything read from the course is read now, before any submission runs.
    exercises = course_exercises(paths["course"])
    with tempfile.TemporaryDirectory(prefix="gradescope-") as work:
        submissions, out = Path(work) / "submissions", Path(work) / "results"
        learner = submissions / LEARNER
        learner.mkdir(parents=True)
        found = submitted_notebooks(paths["submission"])
        for path in found:
            target = learner / path.relative_to(paths["submission"])
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        command = [sys.executable, "-m", "course_utils.grading.gradescope", "grade", str(submissions),
                   "--out", str(out), "--course", str(paths["course"].resolve()), "--workers", "1", "--no-cache",
                   *config.get("grader_options", [])]
        if config.get("exam"):
            command.append("--exam")
        if config.get("reveal_hidden"):
            command.append("--reveal-hidden")
        if problem is not None:
            command.append("--no-sandbox")
        print(f"Notebooks found: {', '.join(str(p.relative_to(paths['submission'])) for p in found) or 'none'}; "
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
            print(f"The grader failed (exit {returncode}); no results.json written.", file=sys.stderr)
            return returncode or 1
        result = json.loads(result_file.read_text(encoding="utf-8"))
    failures = [p for p in result.get("problems", []) if str(p).startswith(INFRASTRUCTURE_FAILURES)]
    if failures:
        print("The grader failed on this submission; no results.json written:\n" + "\n".join(map(str, failures)),
              file=sys.stderr)
        return 1
    wanted = config.get("chapters")
    if wanted is None:  # only the chapters graded count; the course gives their order
        wanted = list(result.get("notebooks", {}))
    results = results_json(result, {chapter: exercises[chapter] for chapter in wanted if chapter in exercises})
    notes = [f"Notebooks found: {', '.join(p.name for p in found)}" if found
             else "No notebook (.ipynb) found in the submission."]
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
