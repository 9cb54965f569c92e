"""The site's source folder: ``book/`` (configuration, front page) plus one page per chapter.

A page is the executed learner notebook with a short note under its title on how to run it
yourself, and without the test command's markers (``# NBVAL_CHECK_OUTPUT``), which mean nothing
to a reader. Nothing else is changed: what the site shows is what a learner's notebook shows.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import nbformat

import course_utils
from course_utils import publication, readme_links
from course_utils.authoring import setup_cell
from course_utils.book.execute import ExecutedChapter

BOOK_CONFIG = "book"  # the repository's folder with conf.py, index.md and _static/
CHAPTERS = "chapters"  # where the pages go, in the source folder
RUN_IT_CELL_ID = "run-it-yourself"
# What `git clone` is given on the pages, and where the Colab and Kaggle buttons lead:
# course_utils.publication's settings, which COURSE_REPOSITORY_URL and COURSE_BRANCH override
# (the Pages workflow sets the first from the CI's own repository). Without a repository, the
# README's placeholder wording and no buttons.
REPOSITORY_ENV = publication.REPOSITORY_ENV
UNKNOWN_REPOSITORY = "<this repository>"
# The theme's download button offers each page's notebook from here (Sphinx copies the sources).
DOWNLOAD_FOLDER = "_sources"
# Bootstrap's button classes, which the book theme's CSS already has: links that look like buttons.
BUTTON_CLASS = "btn btn-sm btn-outline-primary"


def repository() -> str:
    return publication.repository_url() or UNKNOWN_REPOSITORY


TEST_MARKER = re.compile(r"^[ \t]*# NBVAL_[A-Z_]+[ \t]*\n?", re.MULTILINE)


def open_in_links(chapter_file: str) -> dict[str, str]:
    """``{"Open in Colab": url, "Open in Kaggle": url}`` for the chapter; empty without a GitHub
    repository (no button is better than one that opens someone else's course)."""
    colab, kaggle = publication.colab_url(chapter_file), publication.kaggle_url(chapter_file)
    if colab is None or kaggle is None:
        return {}
    return {"Open in Colab": colab, "Open in Kaggle": kaggle}


def _button(text: str, href: str, *, download: bool = False) -> str:
    extra = " download" if download else ' target="_blank" rel="noopener"'
    return f'<a class="{BUTTON_CLASS}" href="{html.escape(href)}"{extra}>{text}</a>'


def run_it_yourself_text(chapter_file: str) -> str:
    """Markdown any notebook front end renders too: the page's .ipynb is downloadable.

    With a GitHub repository set, a row of buttons opens the chapter in Colab or Kaggle (the
    learner notebook of the published branch) or downloads the page's notebook, which is what
    the theme's download button gives too. The buttons are plain HTML links: the site is built
    offline, so no badge image is fetched from anywhere.
    """
    intro = ("> **Run it yourself.** This page is the learner's notebook, executed: every figure "
             "and number below came from running it. The exercises (✎) are left for you, so their "
             "checks say *not attempted*.")
    links = open_in_links(chapter_file)
    if links:
        buttons = [_button(text, href) for text, href in links.items()]
        buttons.append(_button("Download the notebook",
                               f"../{DOWNLOAD_FOLDER}/{CHAPTERS}/{chapter_file}", download=True))
        opening = [
            intro + " Open it where it runs, in the cloud (free with a Google or Kaggle "
            "account; on Colab, *File → Save a copy in Drive* keeps your work):",
            ">",
            "> " + " ".join(buttons),
            ">",
            "> or work through it on your machine (no GPU needed):",
        ]
    else:
        opening = [intro + " To work through it on your machine (no GPU needed):"]
    return "\n".join([
        *opening,
        ">",
        "> ```bash",
        f"> git clone {repository()} pytorch-course && cd pytorch-course",
        "> ./course lab",
        "> ```",
        ">",
        f"> then open `my-work/{chapter_file}` in JupyterLab. The course's README says more.",
    ])


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
        if cell.get("id") == setup_cell.CELL_ID:
            # The page shows the chapter, not its installer (MyST-NB leaves out "remove-cell");
            # the notebook one downloads from the page keeps it, pointing at the package of the
            # repository this site is built for.
            cell.source = setup_cell.setup_cell_source(
                source=publication.package_source(course_utils.__version__))
            cell.metadata.setdefault("tags", []).append("remove-cell")
    note = nbformat.v4.new_markdown_cell(run_it_yourself_text(f"{chapter.name}.ipynb"))
    note["id"] = RUN_IT_CELL_ID
    nb.cells.insert(_title_index(nb) + 1, note)
    return nb


def page_title(nb: nbformat.NotebookNode) -> str:
    heading = nb.cells[_title_index(nb)].source.lstrip().splitlines()[0]
    return heading.lstrip("#").strip()


def readme_chapter_rows(readme: str) -> dict[str, str]:
    """``{"01_tensors": "what you will be able to do"}`` from the README's Chapters table,
    the one place that says what each chapter teaches (its links, if any, left out)."""
    section = readme.split("\n## Chapters", 1)[-1].split("\n## ", 1)[0]
    # The "open in" column that release adds (course_utils.readme_links) is not the words.
    rows = (readme_links.ROW.match(line) for line in section.splitlines())
    return {row.group(1): row.group(2) for row in rows if row}


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
