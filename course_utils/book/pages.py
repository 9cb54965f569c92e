"""The site's source folder: ``book/`` (configuration, front page) plus one page per chapter.

A page is the executed learner notebook with a short note under its title on how to run it
yourself, and without the test command's markers (``# NBVAL_CHECK_OUTPUT``), which mean nothing
to a reader. Nothing else is changed: what the site shows is what a learner's notebook shows.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nbformat

from course_utils.book.execute import ExecutedChapter

BOOK_CONFIG = "book"  # the repository's folder with conf.py, index.md and _static/
CHAPTERS = "chapters"  # where the pages go, in the source folder
RUN_IT_CELL_ID = "run-it-yourself"
# What `git clone` is given on the pages: the repository's address where the build knows it
# (the Pages workflow sets COURSE_REPOSITORY_URL), else the README's placeholder wording.
REPOSITORY_ENV = "COURSE_REPOSITORY_URL"
UNKNOWN_REPOSITORY = "<this repository>"


def repository() -> str:
    return os.environ.get(REPOSITORY_ENV, "").strip() or UNKNOWN_REPOSITORY
TEST_MARKER = re.compile(r"^[ \t]*# NBVAL_[A-Z_]+[ \t]*\n?", re.MULTILINE)


def run_it_yourself_text(chapter_file: str) -> str:
    """Markdown any notebook front end renders too: the page's .ipynb is downloadable."""
    return (
        "> **Run it yourself.** This page is the learner's notebook, executed: every figure "
        "and number below came from running it. The exercises (✎) are left for you, so their "
        "checks say *not attempted*. To work through it on your machine (no GPU needed):\n"
        ">\n"
        "> ```bash\n"
        f"> git clone {repository()} pytorch-course && cd pytorch-course\n"
        "> ./course lab\n"
        "> ```\n"
        ">\n"
        f"> then open `my-work/{chapter_file}` in JupyterLab. The course's README says more."
    )


def _title_index(nb: nbformat.NotebookNode) -> int:
    """The index of the first markdown cell that starts with a heading (the page title)."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
            return index
    raise ValueError("the notebook has no title: its first heading gives the page its name")


def page_notebook(chapter: ExecutedChapter) -> nbformat.NotebookNode:
    """A copy of the executed chapter for the site: the run-it-yourself note after its title,
    no test markers."""
    nb = nbformat.from_dict(chapter.notebook)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = TEST_MARKER.sub("", cell.source)
    note = nbformat.v4.new_markdown_cell(run_it_yourself_text(f"{chapter.name}.ipynb"))
    note["id"] = RUN_IT_CELL_ID
    nb.cells.insert(_title_index(nb) + 1, note)
    return nb


def page_title(nb: nbformat.NotebookNode) -> str:
    heading = nb.cells[_title_index(nb)].source.lstrip().splitlines()[0]
    return heading.lstrip("#").strip()


def readme_chapter_rows(readme: str) -> dict[str, str]:
    """``{"01_tensors": "what you will be able to do"}`` from the README's Chapters table,
    the one place that says what each chapter teaches."""
    section = readme.split("\n## Chapters", 1)[-1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\|\s*`(\d\d_\w+)`\s*\|\s*(.+?)\s*\|\s*$", section, re.MULTILINE))


def front_page(intro: str, chapters: list[ExecutedChapter], readme: str) -> str:
    """``book/index.md`` followed by the table of chapters and the site's navigation."""
    said = readme_chapter_rows(readme)
    missing = [chapter.name for chapter in chapters if chapter.name not in said]
    if missing:
        raise ValueError(f"README.md's Chapters table has no row for {', '.join(missing)}")
    rows = [f"| [{page_title(chapter.notebook)}]({CHAPTERS}/{chapter.name}.ipynb) "
            f"| {said[chapter.name]} |" for chapter in chapters]
    toctree = [f"{CHAPTERS}/{chapter.name}" for chapter in chapters]
    intro = intro.replace(UNKNOWN_REPOSITORY, repository())
    return "\n".join([intro.rstrip(), "", "## Chapters", "", "| chapter | what you will be able to do |",
                      "|---|---|", *rows, "", "```{toctree}", ":hidden:", ":maxdepth: 1", "",
                      *toctree, "```", ""])


def write_source(root: Path, source: Path, chapters: list[ExecutedChapter]) -> None:
    """``source`` made anew: ``book/`` copied, the front page, a page notebook per chapter."""
    if source.exists():
        shutil.rmtree(source)
    shutil.copytree(root / BOOK_CONFIG, source)
    index = source / "index.md"
    readme = (root / "README.md").read_text(encoding="utf-8")
    index.write_text(front_page(index.read_text(encoding="utf-8"), chapters, readme), encoding="utf-8")
    (source / CHAPTERS).mkdir()
    for chapter in chapters:
        nbformat.write(page_notebook(chapter), source / CHAPTERS / f"{chapter.name}.ipynb")
