"""What a result was graded with: precise enough to say which check changed, and to grade again
only the learners whose chapters' checks changed.

A result records ``check_versions``: per exercise, a hash of the code its check runs (its
probe, judge and reference, and every function, class and constant of its module that they
name, and that those name). A regrade can then say "the check of 01_tensors/outer_sum changed"
instead of "the course changed". The cache key of a learner depends on the chapters they handed
in (each one's notebook, exercise module and public cases) and on the code every check shares,
not on the rest of the course: a fix to chapter 03's checks regrades chapter 03's learners only.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import sys
import types
from pathlib import Path

import nbformat

from course_utils.exercises import CHAPTERS

PACKAGE = Path(__file__).resolve().parents[1]


def course_version(course: Path) -> str:
    """Every notebook of the course and every file of the package: what graded a result, in one hash."""
    digest = hashlib.sha256()
    files = sorted((course / "notebooks").glob("*.ipynb")) + sorted(PACKAGE.rglob("*.py"))
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _chapter_files() -> set[Path]:
    """The package's files that belong to one chapter: its exercise module and its public cases."""
    from course_utils.exercises import chapter_sources

    folder = PACKAGE / "exercises"
    return {path for module in CHAPTERS.values()
            for path in (*chapter_sources(folder, module), folder / "public_cases" / f"{module}.py")}


@functools.lru_cache(maxsize=None)
def shared_version() -> str:
    """The code every check shares (the framework, the grader, the helpers the notebooks use)."""
    digest = hashlib.sha256()
    chapter_files = _chapter_files()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path not in chapter_files:
            digest.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _codes(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _code_parts(value) -> list[types.CodeType]:
    """The code objects of a function, or of a class's functions (methods, properties)."""
    if isinstance(value, types.FunctionType):
        return list(_codes(value.__code__))
    if isinstance(value, type):
        from course_utils.grading.kernel_probe import own_functions

        return [code for f in own_functions(value) if isinstance(f, types.FunctionType) for code in _codes(f.__code__)]
    return []


def _stable_repr(value) -> str:
    """``repr``, the same in every process: functions and classes inside a constant (a table of
    cases) by their code, not by their address."""
    from course_utils.grading.kernel_probe import code_fingerprint

    if isinstance(value, (tuple, list)):
        return type(value).__name__ + "(" + ",".join(_stable_repr(item) for item in value) + ")"
    if isinstance(value, (set, frozenset)):
        return type(value).__name__ + "(" + ",".join(sorted(_stable_repr(item) for item in value)) + ")"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_stable_repr(k)}:{_stable_repr(v)}" for k, v in value.items()) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # quick.Inputs, quick.Slip
        return type(value).__qualname__ + "(" + ",".join(
            f"{f.name}={_stable_repr(getattr(value, f.name))}" for f in dataclasses.fields(value)) + ")"
    codes = _code_parts(value)
    if codes:
        return "code(" + ",".join(code_fingerprint(code) for code in codes) + ")"
    text = repr(value)
    return text if " at 0x" not in text else type(value).__qualname__


def _names_seen_by(value) -> dict:
    """The namespace ``value``'s code looks its global names up in: its module's."""
    if isinstance(value, types.FunctionType):
        return value.__globals__
    module = sys.modules.get(getattr(value, "__module__", None) or "")
    return vars(module) if module is not None else {}


@functools.lru_cache(maxsize=None)
def check_version(exercise) -> str:
    """A hash of the code ``exercise``'s check runs, and of what it names in its chapter's
    modules (its own, and the chapter's common helpers), followed from name to name."""
    from course_utils.grading.kernel_probe import code_fingerprint

    chapter = f"course_utils.exercises.{exercise.chapter}"
    seen: dict[str, str] = {}
    queue = [("probe", exercise._probe), ("judge", exercise._judge), ("reference", exercise.reference)]
    if exercise._expect is not None:  # the judge's half that computes what the right answer gives
        queue.append(("expect", exercise._expect))
    while queue:
        name, value = queue.pop()
        if name in seen:
            continue
        codes = _code_parts(value)
        if codes:
            seen[name] = hashlib.sha256("".join(code_fingerprint(code) for code in codes).encode()).hexdigest()
            # what a function closes over is part of its check (a quick-path probe's inputs)
            for index, cell in enumerate(getattr(value, "__closure__", None) or ()):
                try:
                    queue.append((f"{name}.closure{index}", cell.cell_contents))
                except ValueError:  # a cell not filled yet
                    pass
            namespace = _names_seen_by(value)
            for code in codes:
                for used in code.co_names:
                    item = namespace.get(used)
                    home = getattr(item, "__module__", None) or chapter
                    if item is not None and (home == chapter or home.startswith(chapter + ".")) \
                            and not isinstance(item, types.ModuleType):
                        queue.append((f"{home}.{used}" if home != chapter else used, item))
        elif not isinstance(value, types.ModuleType):
            seen[name] = hashlib.sha256(_stable_repr(value).encode()).hexdigest()
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(f"{name}\0{seen[name]}\0".encode())
    return digest.hexdigest()[:16]


def check_versions(module: str, names: list[str]) -> dict[str, str]:
    """``{exercise: check_version}`` for the exercises ``names`` of chapter module ``module``."""
    chapter = importlib.import_module(f"course_utils.exercises.{module}")
    return {name: check_version(getattr(chapter, name)) for name in names if hasattr(chapter, name)}


@functools.lru_cache(maxsize=None)
def chapter_version(course: Path, chapter: str) -> str:
    """What a chapter's grades depend on: its notebook, its exercise module and public cases, and
    the code every check shares. Read from the files, so the grading process need not import the
    checks to know which cached results still stand."""
    digest = hashlib.sha256(shared_version().encode())
    notebook = course / "notebooks" / f"{chapter}.ipynb"
    module = CHAPTERS.get(chapter)
    if module is None:
        return digest.hexdigest()[:16]
    from course_utils.exercises import chapter_sources

    folder = PACKAGE / "exercises"
    for path in (notebook, *chapter_sources(folder, module), folder / "public_cases" / f"{module}.py"):
        if path.exists():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def notebook_chapter(path: Path, courses: dict[str, nbformat.NotebookNode]) -> str | None:
    """The chapter a submitted notebook is graded as (its answer cells decide), or None."""
    from course_utils.grading.assemble import chapter_of
    from course_utils.grading.submissions import Unreadable, read_submission

    try:
        return chapter_of(path, read_submission(path), courses)
    except Unreadable:
        return None
