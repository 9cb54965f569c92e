"""./course setup after the course folder was copied and moved: everything works from the new place."""

import json
import subprocess
from pathlib import Path

from course_copies import ROOT, VENV, copy_files, copy_venv, course, needs_set_up_course


def copy_course(destination: Path) -> Path:
    copy_files(destination)
    copy_venv(destination)
    return destination


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
    folder = copy_files(tmp_path / "course")
    fake = tmp_path / "python3.15"
    fake.write_text("#!/bin/sh\necho 3.15.0\nexit 1\n")
    fake.chmod(0o755)
    result = course(folder, "setup", PYTHON=str(fake))
    assert result.returncode != 0
    assert "is Python 3.15.0, which is not a Python 3.10 to 3.14" in result.stderr
    assert not (folder / ".venv").exists()
