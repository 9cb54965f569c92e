"""Finding a batch's learners and reading their notebooks without trusting them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024


@dataclass
class Learner:
    """One learner: the folder or file name is the id; ``files`` are their notebooks."""

    id: str
    files: list[Path] = field(default_factory=list)


class Unreadable(Exception):
    """A submitted file that is not a notebook we can read; the message says why."""


def discover(submissions: Path) -> list[Learner]:
    """``SUBMISSIONS/alice/*.ipynb`` (a folder per learner) or ``SUBMISSIONS/alice.ipynb``."""
    learners = []
    for entry in sorted(submissions.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir() and not entry.is_symlink():
            files = sorted(
                p for p in entry.rglob("*.ipynb")
                if ".ipynb_checkpoints" not in p.parts and p.is_file() and not p.is_symlink()
            )
            learners.append(Learner(entry.name, files))
        elif entry.suffix == ".ipynb" and entry.is_file() and not entry.is_symlink():
            learners.append(Learner(entry.stem, [entry]))
    return learners


def read_submission(path: Path) -> nbformat.NotebookNode:
    """Parse a submitted notebook (nbformat 3 is converted to 4); never executes anything."""
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise Unreadable(f"{path.name} is {size // 1024 // 1024} MB; the limit is "
                         f"{MAX_NOTEBOOK_BYTES // 1024 // 1024} MB")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
        json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Unreadable(f"{path.name} is not a valid notebook file (not JSON: {error})") from None
    try:
        return nbformat.reads(text, as_version=4)
    except Exception as error:  # nbformat's reader raises several kinds
        raise Unreadable(f"{path.name} is not a notebook nbformat can read ({error})") from None


def answer_sources(nb: nbformat.NotebookNode) -> tuple[dict[str, str], list[str]]:
    """grade_id → source of each answer cell, and the ids that appear more than once."""
    sources: dict[str, str] = {}
    duplicated: list[str] = []
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        if not isinstance(grade_id, str):
            continue
        source = cell.get("source", "")
        if isinstance(source, list):  # nbformat 3 style, or hand-edited
            source = "".join(str(part) for part in source)
        if not isinstance(source, str):
            continue
        if grade_id in sources:
            duplicated.append(grade_id)
        sources[grade_id] = source
    return sources, sorted(set(duplicated))
