"""The course's package as a grading kernel gets it: prepared once, copied into every run.

A kernel imports ``course_utils`` from its run's own copy (``RunFolder.package``), read-only,
with bytecode writing off. Copied from the course's sources alone, every kernel would compile
every module it imports, and the chapters' exercise modules through ``guarded_code``'s AST pass
(about 1.5 s for the eight of them): seconds of each notebook's run, for every learner.

So the grader prepares the package once per version of the course and Python: the other
modules compiled to bytecode, each chapter's exercise module compiled guarded and kept as
marshalled code beside its source (``guarded_code.GUARDED_SUFFIX``; ``guarded_code`` loads
that when it is there). Each run copies the prepared folder. The chapters' modules get no ordinary bytecode file,
and their source and guarded code both go once the kernel has loaded them (``exercise_files``).
"""

from __future__ import annotations

import compileall
import functools
import hashlib
import marshal
import os
import py_compile
import shutil
import sys
import tempfile
from pathlib import Path

from course_utils.grading.guarded_code import GUARDED_SUFFIX, guarded_code_object


def package_root() -> Path:
    """The folder that holds the grader's own ``course_utils`` (its data files are inside it)."""
    import course_utils

    return Path(course_utils.__file__).resolve().parents[1]


def chapter_modules() -> list[str]:
    from course_utils.exercises import CHAPTERS

    return list(CHAPTERS.values())


def exercise_files(package: Path) -> list[Path]:
    """The files of a package copy that hold the chapters' reference solutions, probes and
    judges: each exercise module's source and its guarded code."""
    from course_utils.exercises import chapter_sources

    folder = package / "course_utils" / "exercises"
    return [path.with_suffix(suffix) for module in chapter_modules() for path in chapter_sources(folder, module)
            for suffix in (".py", GUARDED_SUFFIX)]


def _skip(directory: str, names: list[str]) -> set[str]:
    return {name for name in names if name in ("__pycache__", "exam_data") or name.endswith(".pyc")}


def _fingerprint(source: Path) -> str:
    """What the prepared copy depends on: every file copied, and the Python that compiles it."""
    digest = hashlib.sha256(sys.version.encode() + sys.executable.encode())
    for top in ("course_utils",):
        for path in sorted((source / top).rglob("*")):
            if path.is_file() and not _skip(str(path.parent), [path.name]) and "exam_data" not in path.parts:
                digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _prepare(source: Path, into: Path) -> None:
    shutil.copytree(source / "course_utils", into / "course_utils", ignore=_skip)
    chapter_sources = {str(path) for path in exercise_files(into) if path.suffix == ".py"}
    for path in (into / "course_utils").rglob("*.py"):
        if str(path) not in chapter_sources:
            compileall.compile_file(str(path), quiet=2, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    from course_utils.exercises import chapter_sources

    for module in chapter_modules():
        for path in chapter_sources(into / "course_utils" / "exercises", module):
            # Compiled for the file name the kernel will load it from (its run's copy, see guarded_code).
            code = guarded_code_object(path.read_text(encoding="utf-8"), str(path), module)
            path.with_suffix(GUARDED_SUFFIX).write_bytes(marshal.dumps(code))


@functools.lru_cache(maxsize=None)
def prepared(root: Path) -> Path:
    """The prepared package under ``root`` (made there once; several graders may race to make it,
    and the first rename wins)."""
    source = package_root()
    final = root / f"package-{_fingerprint(source)}"
    if not final.is_dir():
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        making = Path(tempfile.mkdtemp(prefix="package-making-", dir=root))
        try:
            _prepare(source, making)
            os.rename(making, final)
        except OSError:
            if not final.is_dir():
                raise
        finally:
            shutil.rmtree(making, ignore_errors=True)
        _remove_stale(root, keep=final)
    return final


# A prepared package of an earlier version of the course is removed once it is this old (a
# grader of that version still running would not have made it so long ago).
STALE_AFTER_S = 24 * 3600


def _remove_stale(root: Path, keep: Path) -> None:
    import time

    for folder in root.glob("package-*"):
        try:
            if folder != keep and time.time() - folder.stat().st_mtime > STALE_AFTER_S:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass


def copy_package(root: Path, into: Path) -> None:
    """A run's own copy of the prepared package (``root``: where prepared packages are kept)."""
    shutil.copytree(prepared(root), into, symlinks=False)
