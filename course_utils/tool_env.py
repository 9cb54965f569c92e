"""Environments of their own for tools that only the website or the browser tests need.

The learner's .venv holds what the course needs to run, nothing more: Sphinx or Playwright
there would only slow set-up and could pin a library the notebooks use. Each tool gets a venv
under ``.course/venvs/NAME`` made from its own pinned requirements file, remade when that file
or the Python changes, like ``./course setup`` does for .venv.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

VENVS = Path(".course") / "venvs"
STAMP = ".tool-env-stamp"


class ToolEnvFailed(RuntimeError):
    pass


def _python_in(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _wanted_stamp(requirements: Path) -> str:
    digest = hashlib.sha256(requirements.read_bytes())
    digest.update(("python %d.%d.%d" % sys.version_info[:3]).encode())
    return digest.hexdigest()


def ensure(root: Path, name: str, requirements: Path) -> Path:
    """The Python of ``.course/venvs/NAME`` with ``requirements`` installed; made if needed."""
    folder = root / VENVS / name
    python, stamp = _python_in(folder), folder / STAMP
    wanted = _wanted_stamp(requirements)
    if python.exists() and stamp.exists() and stamp.read_text().strip() == wanted:
        return python
    print(f"Making the {name} tools' environment in {folder.relative_to(root)} "
          f"from {requirements.name} …", file=sys.stderr, flush=True)
    if folder.exists():
        shutil.rmtree(folder)
    venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    command = [str(python), "-m", "pip", "install", "--disable-pip-version-check",
               "--quiet", "-r", str(requirements)]
    # pip's progress goes to stderr: stdout is for the Python's path (see main()).
    if subprocess.run(command, stdout=sys.stderr).returncode != 0:
        raise ToolEnvFailed(f"could not install {requirements.name} into {folder} (see above)")
    stamp.write_text(wanted + "\n")
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.tool_env",
        description="Print the Python of a tool environment, making it first if needed.")
    parser.add_argument("name", help="the environment's name, e.g. browser")
    parser.add_argument("requirements", type=Path, help="its pinned requirements file")
    parser.add_argument("--root", type=Path, default=Path("."), help="the course folder")
    args = parser.parse_args(argv)
    try:
        python = ensure(args.root.resolve(), args.name, args.requirements.resolve())
    except ToolEnvFailed as error:
        print(f"course: {error}", file=sys.stderr)
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
