"""./course setup after the course folder was copied and moved: everything works from the new place.

The copy is made the way a learner makes one (the whole folder, .venv included); only the bulk
of .venv/lib is hard-linked instead of copied, to keep the test fast. Set-up never writes into
those files: it replaces the few it changes, so the original .venv is not touched.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
LEFT_OUT = {".venv", ".git", ".course", "my-work", "__pycache__", ".ipynb_checkpoints",
            ".nbgrader-venv"}

needs_set_up_course = pytest.mark.skipif(
    not (VENV / ".course-stamp").is_file() or Path(sys.prefix).resolve() != VENV.resolve(),
    reason="needs the course's own .venv, set up by ./course setup",
)


def copy_course(destination: Path) -> Path:
    shutil.copytree(ROOT, destination, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if n in LEFT_OUT])
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
    return destination


def course(folder: Path, *args, **env):
    return subprocess.run(
        [str(folder / "course"), *args], capture_output=True, text=True, timeout=600,
        env={**os.environ, **env}, stdin=subprocess.DEVNULL,
    )


@needs_set_up_course
def test_a_copied_then_moved_course_works_from_its_new_place(tmp_path):
    copied = copy_course(tmp_path / "copy")
    moved = tmp_path / "moved" / "pytorch course"  # a space in the path, as learners have
    moved.parent.mkdir()
    copied.rename(moved)

    first = course(moved, "setup")
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"moved or copied here from {ROOT}" in first.stdout
    assert "Set-up done." in first.stdout

    python = moved / ".venv" / "bin" / "python"
    where = subprocess.run(
        [str(python), "-I", "-c",
         "import torch, jupyterlab, course_utils, sys; print(course_utils.__file__); print(sys.prefix)"],
        capture_output=True, text=True, cwd="/", check=True,
    ).stdout.split("\n")
    assert where[0].startswith(str(moved / "course_utils")), where
    assert where[1] == str(moved / ".venv")

    spec = json.loads((moved / ".venv/share/jupyter/kernels/pytorch-course/kernel.json").read_text())
    assert spec["argv"][0] == str(python)
    # A script whose first line names the venv's Python runs from the new place.
    version = subprocess.run([str(moved / ".venv/bin/jupyter-lab"), "--version"],
                             capture_output=True, text=True, cwd="/")
    assert version.returncode == 0, version.stderr
    assert f'"{moved}/.venv"' in (moved / ".venv/bin/activate").read_text()

    second = course(moved, "setup")
    assert second.returncode == 0 and second.stdout == "", second.stdout + second.stderr
    assert (VENV / ".course-stamp").read_text().splitlines()[1] == str(ROOT), "the original is untouched"


def test_a_python_newer_than_torch_supports_is_refused_by_name(tmp_path):
    folder = tmp_path / "course"
    shutil.copytree(ROOT, folder, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if n in LEFT_OUT])
    fake = tmp_path / "python3.15"
    fake.write_text("#!/bin/sh\necho 3.15.0\nexit 1\n")
    fake.chmod(0o755)
    result = course(folder, "setup", PYTHON=str(fake))
    assert result.returncode != 0
    assert "is Python 3.15.0, which is not a Python 3.10 to 3.14" in result.stderr
    assert not (folder / ".venv").exists()
