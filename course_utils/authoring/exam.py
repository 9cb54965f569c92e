"""An exam release: the learner notebooks and the package they import, with no solution in it.

``python -m course_utils.authoring release --exam OUT [--chapters 01 02] [--hints none]``
writes a folder a learner installs and works in as they would the course (``./course lab``),
made of small steps:

- ``copy_course``: the course's own files a learner needs (the ``course`` script, pinned
  requirements, data, the chosen chapters' learner notebooks);
- ``copy_package``: ``course_utils`` without what only the instructor has: each chapter's
  exercise module (references, probes that compute expected results), the grader, the authoring
  and book tools;
- ``write_exercises``: in their place, a few lines per chapter that load the exam's exercises,
  and ``exam_data/``: each exercise's face (title, the hints released) and the facts its
  reference gave on the public cases (``course_utils.exercises.exam``);
- ``find_leaks``: every file of the release is scanned for the reference solutions and the
  withheld hints; a release with one is removed and refused.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from course_utils.authoring.errors import AuthoringError
from course_utils.authoring.project import NOTEBOOKS, plan

PACKAGE = "course_utils"
# What stays with the instructor (relative to course_utils/).
INSTRUCTOR_ONLY = ("grading", "authoring", "book", "exercises/exam_data")
COURSE_FILES = ("course", "requirements.txt", "pyproject.toml", "environment.yml")
COURSE_FOLDERS = ("data",)
EXAM_README = """# {title}: exam

This folder is an exam release of the PyTorch course: the chapters {chapters}, to work through
and hand in.

```bash
./course lab      # set up (the first time, a few minutes), then open JupyterLab
```

JupyterLab opens on `my-work/`, your own copy of each chapter. Write each exercise (✎) in its
answer cell and run the check below it.

**How checking works in an exam.** `ex.NAME.check(NAME)` runs your function on *public cases*
and says precisely what differs: passed, failed (and how), not attempted, or your code raised.
Your grade also counts *hidden cases*, which only the grader runs: other inputs, shapes and
dtypes, and repeated calls. Write code that does what the task says for any input it allows,
not only for the public cases. There are no solutions in this release; {hints}.

Hand in the notebooks of `my-work/` as your instructor asks.
"""
HINTS_SENTENCE = {
    "none": "there are no hints either",
    "first": "`ex.NAME.hint()` shows the first hint of each exercise",
    "all": "`ex.NAME.hint()` shows the hints, one more each call",
}


@dataclass
class ExamRelease:
    out: Path
    chapters: list[str]
    exercises: int
    seconds: float
    size_bytes: int


def chosen_chapters(root: Path, names: list[str] | None) -> list[str]:
    """The notebook stems named (``01``, ``01_tensors``, ``tensors``), in course order."""
    from course_utils.exercises import CHAPTERS

    stems = sorted(CHAPTERS)
    if not names:
        return stems
    chosen = []
    for name in names:
        matches = [stem for stem in stems if name in (stem, stem[:2], stem[3:], CHAPTERS[stem])]
        if len(matches) != 1:
            raise AuthoringError(f"--chapters: {name!r} names no chapter (one of {', '.join(stems)})")
        chosen.append(matches[0])
    return [stem for stem in stems if stem in chosen]


def copy_course(root: Path, out: Path, chapters: list[str]) -> None:
    for name in COURSE_FILES:
        if (root / name).exists():
            shutil.copy2(root / name, out / name)
    for name in COURSE_FOLDERS:
        if (root / name).is_dir():
            shutil.copytree(root / name, out / name, ignore=shutil.ignore_patterns("__pycache__"))
    result = plan(root)
    if result.errors:
        raise AuthoringError("solutions/ has errors", result.errors)
    (out / NOTEBOOKS).mkdir()
    for path, data in result.learner.items():
        if path.stem in chapters:
            (out / NOTEBOOKS / path.name).write_bytes(data)


def copy_package(root: Path, out: Path) -> None:
    from course_utils.exercises import CHAPTERS

    source, target = root / PACKAGE, out / PACKAGE
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for relative in INSTRUCTOR_ONLY:
        shutil.rmtree(target / relative, ignore_errors=True)
    for module in CHAPTERS.values():
        (target / "exercises" / f"{module}.py").unlink()


def write_exercises(out: Path, chapters: list[str], hints: str) -> int:
    """The exam's exercise modules and their data; the number of exercises written."""
    from course_utils.exercises import CHAPTERS, chapter_exercises
    from course_utils.exercises.exam import write_chapter

    data = out / PACKAGE / "exercises" / "exam_data"
    count = 0
    for stem, module in CHAPTERS.items():
        (out / PACKAGE / "exercises" / f"{module}.py").write_text(
            f'"""Chapter {stem}\'s exercises in an exam release: checked on public cases only.\n\n'
            "Written by `python -m course_utils.authoring release --exam`; the data it loads is in\n"
            f'exam_data/{module}/ (empty when the chapter is not part of this exam)."""\n\n'
            "from course_utils.exercises.exam import load_chapter as _load_chapter\n\n"
            f'CHAPTER = "{module}"\n'
            "globals().update(_load_chapter(CHAPTER))\n",
            encoding="utf-8",
        )
        if stem in chapters:
            exercises = chapter_exercises(module)
            write_chapter(module, exercises, hints, data)
            count += len(exercises)
    return count


def write_readme(out: Path, chapters: list[str], hints: str) -> None:
    shown = ", ".join(chapters[:-1]) + (" and " if len(chapters) > 1 else "") + chapters[-1]
    (out / "README.md").write_text(EXAM_README.format(
        title="PyTorch, from a working environment to a training loop you can trust",
        chapters=shown, hints=HINTS_SENTENCE[hints]), encoding="utf-8")


def withheld(root: Path, hints: str) -> dict[str, str]:
    """What must appear nowhere in the release: every reference solution (its body, and each
    SOLUTION region of solutions/) and every hint the policy holds back."""
    from course_utils.book.verify import solution_snippets
    from course_utils.exercises import all_exercises
    from course_utils.exercises.exam import released_hints

    secrets = {f"solution: {where}": text for where, text in solution_snippets(root).items()}
    for chapter, exercises in all_exercises().items():
        notebook = root / NOTEBOOKS / f"{chapter}.ipynb"
        lesson = _squeezed(notebook.read_text(encoding="utf-8")) if notebook.exists() else ""
        for exercise in exercises:
            shown = released_hints(exercise.hints, hints)
            for number, hint in enumerate(exercise.hints, start=1):
                # A hint that only repeats what the chapter itself teaches gives nothing away.
                if hint not in shown and _squeezed(hint) not in lesson:
                    secrets[f"hint {number} of {exercise.id}"] = hint
    return secrets


def _squeezed(text: str) -> str:
    return "".join(text.split())


def find_leaks(out: Path, secrets: dict[str, str]) -> list[str]:
    """``"FILE: what"`` for each withheld text found in a file of ``out`` (whitespace ignored,
    so re-indented or re-wrapped code is found too; binary files are read as text as well)."""
    wanted = {what: _squeezed(text) for what, text in secrets.items() if _squeezed(text)}
    found = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        text = _squeezed(path.read_bytes().decode("utf-8", errors="replace"))
        text = text.replace("\\n", "").replace('\\"', '"')  # as JSON (a notebook) stores code
        for what, secret in wanted.items():
            if secret in text:
                found.append(f"{path.relative_to(out)}: {what}")
    return found


def release_exam(root: Path, out: Path, chapters: list[str] | None = None, hints: str = "none") -> ExamRelease:
    from course_utils.exercises.exam import HINT_POLICIES

    started = time.perf_counter()
    if hints not in HINT_POLICIES:
        raise AuthoringError(f"--hints must be one of {', '.join(HINT_POLICIES)}")
    stems = chosen_chapters(root, chapters)
    if out.exists() and any(out.iterdir()):
        raise AuthoringError(f"{out} exists and is not empty: choose a new folder for the release")
    out.mkdir(parents=True, exist_ok=True)
    try:
        copy_course(root, out, stems)
        copy_package(root, out)
        count = write_exercises(out, stems, hints)
        write_readme(out, stems, hints)
        leaks = find_leaks(out, withheld(root, hints))
        if leaks:
            raise AuthoringError("withheld text found in the release", ["withheld text found in the release:"] + leaks)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    size = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    return ExamRelease(out, stems, count, time.perf_counter() - started, size)
