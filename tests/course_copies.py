"""Copies of the course for tests of ./course itself: the files, and a .venv that works.

A learner's copy includes .venv; here only the bulk of .venv/lib is hard-linked instead of
copied, to keep tests fast. ./course setup never writes into those files (it replaces the few it
changes), so the course's own .venv is not touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
LEFT_OUT = {".venv", ".git", ".course", "my-work", "__pycache__", ".ipynb_checkpoints",
            ".nbgrader-venv", "pytorch_course.egg-info"}

needs_set_up_course = pytest.mark.skipif(
    not (VENV / ".course-stamp").is_file() or Path(sys.prefix).resolve() != VENV.resolve(),
    reason="needs the course's own .venv, set up by ./course setup",
)


def copy_files(destination: Path) -> Path:
    """The course's files as they are in this folder, without .venv, .git or generated files."""
    shutil.copytree(ROOT, destination, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if n in LEFT_OUT])
    return destination


def copy_venv(destination: Path) -> None:
    """The course's .venv into the course folder ``destination``, as a learner's copy has it."""
    venv = destination / ".venv"
    venv.mkdir()
    for entry in VENV.iterdir():
        target = venv / entry.name
        if entry.name == "lib":
            subprocess.run(["cp", "-al", str(entry), str(target)], check=True)
        elif entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True)
        else:
            shutil.copy2(entry, target)


def course(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(folder / "course"), *args], capture_output=True, text=True, timeout=600,
        env={**os.environ, **env}, stdin=subprocess.DEVNULL,
    )
