"""The README's Chapters table and its "open in" column: Colab and Kaggle links, generated.

The table's words (which chapter teaches what) are written by hand; its links are not. They
come from ``course_utils.publication``'s settings, and only from the module's constants, never
from the environment: what ``python -m course_utils.authoring release`` writes must not depend on
the shell of whoever ran it. With no GitHub repository set, the table has no link column at all.

``release`` rewrites the table (``update_readme``); ``check`` reports it when it is not what
release would write (``readme_problems``), as it does for a stale notebook.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from course_utils import publication

README = "README.md"
CHAPTERS_HEADING = "## Chapters"
LINKS_HEADER = "open in"
# A chapter's row: | `01_tensors` | what you will be able to do | (an "open in" cell, or none)
ROW = re.compile(r"^\|\s*`(\d\d_\w+)`\s*\|\s*((?:[^|\\]|\\.)+?)\s*\|(.*)$")


def chapter_links(name: str, *, from_environment: bool = False) -> str:
    """The "open in" cell of chapter ``name`` (e.g. "01_tensors"); "" with no GitHub repository."""
    chapter_file = f"{name}.ipynb"
    colab = publication.colab_url(chapter_file, from_environment=from_environment)
    kaggle = publication.kaggle_url(chapter_file, from_environment=from_environment)
    if colab is None or kaggle is None:
        return ""
    return f"[Colab]({colab}) · [Kaggle]({kaggle})"


def _table_lines(lines: list[str]) -> range:
    """The indices of the Chapters table's lines (header, rule, rows); empty when there is none."""
    try:
        start = lines.index(CHAPTERS_HEADING) + 1
    except ValueError:
        return range(0)
    for index in range(start, len(lines)):
        if lines[index].startswith("## "):
            return range(0)
        if lines[index].startswith("|"):
            end = index
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            return range(index, end)
    return range(0)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def with_chapter_links(readme: str, *, from_environment: bool = False) -> str:
    """``readme`` with its Chapters table's "open in" column made from the settings: one cell of
    links per chapter when a GitHub repository is set, no such column when none is."""
    lines = readme.split("\n")
    table = _table_lines(lines)
    if len(table) < 2:
        return readme
    header, rule, *rows = table
    links = {index: chapter_links(match.group(1), from_environment=from_environment)
             for index in rows if (match := ROW.match(lines[index]))}
    with_column = any(links.values())
    first_two = _cells(lines[header])[:2]
    lines[header] = "| " + " | ".join(first_two + ([LINKS_HEADER] if with_column else [])) + " |"
    lines[rule] = "|" + "---|" * (3 if with_column else 2)
    for index, cell in links.items():
        match = ROW.match(lines[index])
        row = f"| `{match.group(1)}` | {match.group(2)} |"
        lines[index] = f"{row} {cell} |" if with_column else row
    return "\n".join(lines)


def update_readme(root: str | os.PathLike = ".") -> Path | None:
    """Rewrite ``root``'s README.md's chapter links from the settings; the path if it changed."""
    path = Path(root) / README
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    wanted = with_chapter_links(text)
    if wanted == text:
        return None
    path.write_text(wanted, encoding="utf-8")
    return path


def readme_problems(root: str | os.PathLike = ".") -> list[str]:
    """How README.md's Chapters table differs from what release writes; empty when it does not."""
    path = Path(root) / README
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    if with_chapter_links(text) == text:
        return []
    return [f"{README}'s Chapters table is out of date: its Colab/Kaggle links are not what "
            f"release makes of course_utils/publication.py (REPOSITORY_URL, BRANCH)."]
