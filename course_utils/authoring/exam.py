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
  and ``exam_data/``: each exercise's face (title, the hints and error notes released) and the
  facts its reference gave on the public cases (``course_utils.exercises.exam``);
- ``exam_notebook``: a lesson cell that shows an exercise's whole answer (``EXAM_REWRITES``)
  is rewritten or dropped in the exam's copy of its notebook; notebooks/ keeps it for practice;
- ``find_leaks``: every file of the release, and every member of an archive or compressed file
  in it, is scanned for the reference solutions and the withheld hints and error notes
  (``withheld``); a release with one is removed and refused. A notebook is read cell by cell
  too: its JSON stores each line of a cell as a string of its own, and a worked answer of
  several lines is found only in the cell's joined text.

What ``--hints`` releases: ``none``, no hint and no error note; ``first``, each exercise's first
hint and no error note; ``all``, every hint and every error note. An error note (the classic
mistake behind an error, shown as the "Likely cause:" when the learner's code raises it) is a
worked hint, nearly always with the step that fixes it, and no rule tells the few without one
apart reliably, so only ``all`` ships them (``course_utils.exercises.exam.released_notes``).
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import re
import shutil
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from course_utils.authoring.errors import AuthoringError
from course_utils.authoring.project import NOTEBOOKS, plan, render

PACKAGE = "course_utils"
# What stays with the instructor (relative to course_utils/).
INSTRUCTOR_ONLY = ("grading", "authoring", "book", "exercises/exam_data")
# Also left out of an exam: the code that derives a quick-path exercise's check from its
# reference (practice releases keep it: their exercise modules use it).
NOT_IN_AN_EXAM = ("exercises/quick.py",)
COURSE_FILES = ("course", "requirements.txt", "pyproject.toml", "environment.yml")
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
not only for the public cases. There are no solutions in this release; {hints}. {notes}

Hand in the notebooks of `my-work/` as your instructor asks.
"""
HINTS_SENTENCE = {
    "none": "there are no hints either",
    "first": "`ex.NAME.hint()` shows the first hint of each exercise",
    "all": "`ex.NAME.hint()` shows the hints, one more each call",
}
# What a check adds when the learner's code raises: the exercise's error notes ship with
# --hints all only (``course_utils.exercises.exam.released_notes`` says why).
WITHOUT_NOTES = ("When your code raises an error, the check shows the error, the input it raised "
                 "on, your line, and what the error's own text points to.")
NOTES_SENTENCE = {
    "none": WITHOUT_NOTES,
    "first": WITHOUT_NOTES,
    "all": "When your code raises an error, the check also names the classic mistake that usually "
           "causes it.",
}


@dataclass(frozen=True)
class LessonRewrite:
    """How an exam changes one lesson cell (by its id): each ``(old, new)`` replaced, or the
    cell dropped."""

    cell: str
    replace: tuple[tuple[str, str], ...] = ()
    drop: bool = False


@dataclass(frozen=True)
class HiddenAnswer:
    """An exercise whose whole answer a lesson cell of its chapter shows, and the cells an exam
    changes so that its copy of the chapter shows it nowhere."""

    chapter: str
    cells: tuple[LessonRewrite, ...]


# Exercises whose answer their chapter's lesson shows (``IDIOMS_THE_CHAPTER_TEACHES`` of
# course_utils/book/verify.py, which the practice pages may show) and that an exam hides:
# its notebook does what the lesson does without showing the answer, and the release's scan
# looks for the answer like any other. INSTRUCTORS.md lists every exempted exercise, and says
# which of them an exam still shows (tests/test_exam_release.py checks that the two agree).
EXAM_REWRITES = {
    # The lesson updates w by hand under torch.no_grad(), twice: the exercise's whole answer.
    "sgd_update": HiddenAnswer(
        chapter="02_autograd",
        cells=(
            # Gradient descent with and without clearing: the optimizer that the chapter
            # introduced a few cells before does the update.
            LessonRewrite("ag-25-code", replace=(
                ("    w = torch.zeros(1, device=device, requires_grad=True)\n",
                 "    w = torch.zeros(1, device=device, requires_grad=True)\n"
                 "    optimizer = torch.optim.SGD([w], lr=lr)\n"),
                ("        with torch.no_grad():\n            w -= lr * w.grad\n",
                 "        optimizer.step()\n"),
            )),
            # The update under no_grad, after the refused one: said in words, left to write.
            LessonRewrite("ag-53-md", replace=(
                ("only its numbers and its version change:",
                 "only its numbers and its version change. Writing that update is the next exercise."),
            )),
            LessonRewrite("ag-54-code", drop=True),
        ),
    ),
}


def exam_notebook(stem: str, data: bytes) -> bytes:
    """The exam's copy of a learner notebook: ``data`` with the ``EXAM_REWRITES`` of chapter
    ``stem`` made. A rewrite that no longer fits its cell (the lesson was edited) is an error
    that names the cell: the release must not ship the answer it was meant to hide."""
    from nbformat.reader import reads

    rewrites = [(name, change) for name, hidden in EXAM_REWRITES.items() if hidden.chapter == stem
                for change in hidden.cells]
    if not rewrites:
        return data
    nb = reads(data.decode("utf-8"))
    cells = {cell.get("id"): cell for cell in nb.cells}
    problems, dropped = [], set()
    for name, change in rewrites:
        cell = cells.get(change.cell)
        if cell is None:
            problems.append(f"{NOTEBOOKS}/{stem}.ipynb has no cell {change.cell}, which an exam "
                            f"rewrites to hide {name}'s answer: update EXAM_REWRITES")
            continue
        if change.drop:
            dropped.add(change.cell)
        for old, new in change.replace:
            if cell.source.count(old) != 1:
                problems.append(f"{NOTEBOOKS}/{stem}.ipynb, cell {change.cell}: {old.strip()!r} is not "
                                f"in it once, so the exam cannot hide {name}'s answer: update EXAM_REWRITES")
                continue
            cell.source = cell.source.replace(old, new)
    if problems:
        raise AuthoringError("an exam's rewrite of a lesson no longer fits", problems)
    nb.cells = [cell for cell in nb.cells if cell.get("id") not in dropped]
    return render(nb)


@dataclass
class ExamRelease:
    out: Path
    chapters: list[str]
    exercises: int
    seconds: float
    size_bytes: int


def chosen_chapters(root: Path, names: list[str] | None) -> list[str]:
    """The notebook stems named (``01``, ``01_tensors``, ``tensors``), in course order."""
    from course_utils.exercises import CHAPTERS, chapter_named

    stems = sorted(CHAPTERS)
    if not names:
        return stems
    try:
        chosen = {chapter_named(name) for name in names}
    except ValueError as error:
        raise AuthoringError(f"--chapters: {error}") from None
    return [stem for stem in stems if stem in chosen]


def copy_course(root: Path, out: Path, chapters: list[str]) -> None:
    for name in COURSE_FILES:
        if (root / name).exists():
            shutil.copy2(root / name, out / name)
    result = plan(root)
    if result.errors:
        raise AuthoringError("solutions/ has errors", result.errors)
    (out / NOTEBOOKS).mkdir()
    for path, data in result.learner.items():
        if path.stem in chapters:
            (out / NOTEBOOKS / path.name).write_bytes(exam_notebook(path.stem, data))


def copy_package(root: Path, out: Path) -> None:
    from course_utils.exercises import CHAPTERS

    source, target = root / PACKAGE, out / PACKAGE
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for relative in INSTRUCTOR_ONLY:
        shutil.rmtree(target / relative, ignore_errors=True)
    for relative in NOT_IN_AN_EXAM:
        (target / relative).unlink(missing_ok=True)
    for module in CHAPTERS.values():  # each becomes the exam's module of public checks
        (target / "exercises" / f"{module}.py").unlink(missing_ok=True)
        shutil.rmtree(target / "exercises" / module, ignore_errors=True)


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
        chapters=shown, hints=HINTS_SENTENCE[hints], notes=NOTES_SENTENCE[hints]), encoding="utf-8")


def withheld(root: Path, hints: str) -> dict[str, str]:
    """What must appear nowhere in the release: every reference solution (its body, and each
    SOLUTION region of solutions/), the answers of ``EXAM_REWRITES`` too, and every hint and
    error note the policy holds back. A solution that a hint the policy releases holds whole
    (with ``all``, a last hint is often the answer) is the instructor's to give, not a leak."""
    from course_utils.book.verify import _function_body, solution_snippets
    from course_utils.exercises import all_exercises
    from course_utils.exercises.exam import released_hints, released_notes

    solutions = {f"solution: {where}": text for where, text in solution_snippets(root).items()}
    released = []
    for chapter, exercises in all_exercises().items():
        for exercise in exercises:
            released += [_squeezed(hint) for hint in released_hints(exercise.hints, hints)]
            if exercise.name in EXAM_REWRITES:  # exempted for the lessons, and hidden in an exam
                solutions[f"solution: {chapter}: ex.{exercise.name}.solution()"] = _function_body(exercise.solution_text())
    secrets = {where: text for where, text in solutions.items()
               if not any(_squeezed(text) in hint for hint in released)}
    for chapter, exercises in all_exercises().items():
        # What the exam's copy of the chapter shows, read as the scan reads it (cell by cell).
        notebook = root / NOTEBOOKS / f"{chapter}.ipynb"
        lesson = "\n".join(text for _, text in contents(
            notebook.name, exam_notebook(chapter, notebook.read_bytes()))) if notebook.exists() else ""
        for exercise in exercises:
            # A hint or a note that only repeats what the chapter itself teaches gives nothing away.
            shown = released_hints(exercise.hints, hints)
            for number, hint in enumerate(exercise.hints, start=1):
                if hint not in shown and _squeezed(hint) not in lesson:
                    secrets[f"hint {number} of {exercise.id}"] = hint
            shown_notes = released_notes(exercise.error_notes, hints)
            for note in exercise.error_notes:
                if note not in shown_notes and _squeezed(note.text) not in lesson:
                    secrets[f"error note {note.id} of {exercise.id}"] = note.text
    return secrets


def _squeezed(text: str) -> str:
    return "".join(text.split())


def find_leaks(out: Path, secrets: dict[str, str]) -> list[str]:
    """``"FILE: what"`` for each withheld text found in a file of ``out``, or in a member of an
    archive or a compressed file in it (``"FILE/MEMBER: what"``). Whitespace is ignored, so
    re-indented or re-wrapped code is found too, and each file is read in every way it can
    hold a text (``contents``)."""
    wanted = {what: _squeezed(text) for what, text in secrets.items() if _squeezed(text)}
    found = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        for where, text in contents(path.relative_to(out).as_posix(), path.read_bytes()):
            found += [f"{where}: {what}" for what, secret in wanted.items() if secret in text]
    return found


# Archives inside archives are opened this deep (the release writes one level: .npz files).
MAX_NESTING = 4
COMPRESSED = ((b"\x1f\x8b", gzip.decompress), (b"BZh", bz2.decompress), (b"\xfd7zXZ\x00", lzma.decompress))


def contents(where: str, data: bytes, nesting: int = 0) -> Iterator[tuple[str, str]]:
    """``(where, text)`` for a file and for what it holds: each member of a zip archive (an
    ``.npz`` is one) and the content of a gzip, bzip2 or xz file, each opened in turn. A text is
    every reading of the bytes (``readings``), squeezed, one per line: a squeezed secret has no
    line break, so it is found only where one reading holds it whole."""
    yield where, "\n".join(_squeezed(text) for text in readings(data))
    if nesting >= MAX_NESTING:
        return
    if zipfile.is_zipfile(io.BytesIO(data)):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in archive.infolist():
                if not member.is_dir():
                    yield from contents(f"{where}/{member.filename}", archive.read(member), nesting + 1)
        return
    for magic, decompress in COMPRESSED:
        if data.startswith(magic):
            try:
                inner = decompress(data)
            except (OSError, EOFError, ValueError, lzma.LZMAError):
                return  # not that format after all: its bytes were read as they are, above
            yield from contents(f"{where} (decompressed)", inner, nesting + 1)
            return


def readings(data: bytes) -> list[str]:
    """The ways ``data`` can hold a text: as UTF-8; with the escapes of a JSON or Python string
    undone (a notebook's code, ``\\u2192`` for →); each list of strings of a JSON document
    joined (``joined_lines``: a notebook cell's source, an output's text); and, where it holds
    zero bytes, as UTF-16 and UTF-32 from each alignment (NumPy stores an array of strings as
    UTF-32)."""
    text = data.decode("utf-8", errors="replace")
    found = [text, _unescaped(text), *joined_lines(data)]
    if b"\0" in data:
        for encoding, width in (("utf-16-le", 2), ("utf-16-be", 2), ("utf-32-le", 4), ("utf-32-be", 4)):
            for start in range(width):
                whole = start + (len(data) - start) // width * width
                found.append(data[start:whole].decode(encoding, errors="replace"))
    return found


def joined_lines(data: bytes) -> list[str]:
    """Each list of strings in ``data`` read as a JSON document, joined into one text; none when
    it is not JSON. A notebook stores each line of a cell's source, and of an output's text, as a
    string of its own: the JSON between them (``",\\n    "``) would cut a worked answer of
    several lines (in a markdown cell, or printed by a cell) into pieces no scan recognises."""
    if data.lstrip()[:1] not in (b"{", b"["):
        return []
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):  # not JSON after all (or not UTF-8/16/32)
        return []
    found, pending = [], [document]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            if value and all(isinstance(item, str) for item in value):
                found.append("".join(value))
            else:
                pending.extend(reversed(value))
    return found


_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])')
_ESCAPED = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescaped(text: str) -> str:
    """``text`` with the escapes of a JSON string (most of Python's too) undone; an escaped
    surrogate pair (``\\ud83d\\ude00``) becomes its one character."""
    plain = _ESCAPE.sub(lambda m: chr(int(m[1][1:], 16)) if len(m[1]) == 5 else _ESCAPED[m[1]], text)
    return plain.encode("utf-16", "surrogatepass").decode("utf-16", errors="replace")


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
