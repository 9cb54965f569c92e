"""Make a virtual environment work again after its folder was moved or copied.

Learners clone the course into one folder and move it, or copy a set-up course to start over.
A virtual environment names its own folder in a few places: the ``#!`` line of every script in
``bin/``, the ``activate`` scripts, and ``pyvenv.cfg``. Rewriting those is enough for the
interpreter and the scripts; the course's editable install and its Jupyter kernel are then
installed again by ``./course setup``, which also checks that everything imports from the new
place and makes the environment anew if it does not. That saves a learner reinstalling several
GB of torch because a folder was renamed.

    python -m course_utils.venv_move OLD_VENV NEW_VENV

Standard library only: it runs before the moved environment is known to work.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

MAX_SCRIPT_BYTES = 1 << 20  # scripts in bin/ are small; anything larger is a binary
MAX_SHEBANG_BYTES = 127  # what Linux reads of a "#!" line
# pip's way of starting a script whose Python cannot be named on a "#!" line: sh runs the
# exec line, and Python reads the same two lines as a string and skips them.
SH_TRAMPOLINE = b"#!/bin/sh\n'''exec' \"%s\" \"$0\" \"$@\"\n' '''\n"


def _runnable_first_line(data: bytes) -> bytes:
    """Keep a script runnable when its interpreter's path holds a space or is too long."""
    first, _, rest = data.partition(b"\n")
    if not first.startswith(b"#!") or first.startswith(b"#!/bin/sh"):
        return data
    interpreter = first[2:].strip()
    if b" " not in interpreter and len(first) <= MAX_SHEBANG_BYTES:
        return data
    return SH_TRAMPOLINE % interpreter + rest


def files_naming(venv: Path) -> list[Path]:
    """The text files of a venv that name its folder: bin/ scripts and pyvenv.cfg."""
    candidates = [venv / "pyvenv.cfg"]
    bin_dir = venv / "bin"
    if bin_dir.is_dir():
        candidates += sorted(p for p in bin_dir.iterdir() if p.is_file() and not p.is_symlink())
    return [p for p in candidates if p.is_file() and p.stat().st_size <= MAX_SCRIPT_BYTES]


def relocate(old_venv: str, new_venv: Path) -> list[Path]:
    """Replace ``old_venv`` by ``new_venv`` in the files that name it; return those changed."""
    old, new = os.fsencode(old_venv.rstrip("/")), os.fsencode(str(new_venv).rstrip("/"))
    # Whole paths only (after a quote, space, '!' or '='; before '/', a quote, space or the
    # end), so that running it twice cannot grow a path that contains the old one.
    whole_path = re.compile(rb"(?<![^\s\"'=!])" + re.escape(old) + rb"(?=[/\s\"']|$)", re.M)
    changed = []
    for path in files_naming(new_venv):
        data = path.read_bytes()
        if b"\0" in data or not whole_path.search(data):
            continue
        mode = path.stat().st_mode
        temporary = path.with_name(path.name + ".moving")
        temporary.write_bytes(_runnable_first_line(whole_path.sub(lambda _: new, data)))
        os.chmod(temporary, mode)
        os.replace(temporary, path)
        changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m course_utils.venv_move OLD_VENV NEW_VENV", file=sys.stderr)
        return 2
    new_venv = Path(argv[1])
    if not (new_venv / "pyvenv.cfg").is_file():
        print(f"{new_venv} is not a virtual environment (no pyvenv.cfg)", file=sys.stderr)
        return 1
    relocate(argv[0], new_venv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
