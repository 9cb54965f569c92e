"""Where the course is published (course_utils/publication.py) and the links made from it: the
Colab and Kaggle addresses of each chapter, and the README's Chapters table, which
``python -m course_utils.authoring release`` writes and ``check`` verifies."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from course_utils import publication, readme_links
from course_utils.authoring.__main__ import main as authoring
from course_utils.book import pages

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
README = (ROOT / "README.md").read_text(encoding="utf-8")
EXAMPLE = "https://github.com/example-org/pytorch-course"


@pytest.fixture
def shell(monkeypatch):
    """No publication setting from the shell that runs the tests, nor in the module."""
    for name in (publication.REPOSITORY_ENV, publication.BRANCH_ENV, publication.PACKAGE_SOURCE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(publication, "REPOSITORY_URL", "")
    monkeypatch.setattr(publication, "BRANCH", "main")
    return monkeypatch


def test_every_chapter_opens_its_own_notebook_in_colab_and_kaggle(shell):
    assert len(CHAPTERS) == 8
    shell.setenv("COURSE_REPOSITORY_URL", EXAMPLE)
    for chapter in CHAPTERS:
        assert publication.colab_url(f"{chapter}.ipynb") == (
            f"https://colab.research.google.com/github/example-org/pytorch-course/blob/main/notebooks/{chapter}.ipynb")
        assert publication.kaggle_url(f"{chapter}.ipynb") == (
            f"https://kaggle.com/kernels/welcome?src=https://github.com/example-org/pytorch-course/blob/main/notebooks/{chapter}.ipynb")
        assert publication.notebook_on_github(f"{chapter}.ipynb") == (
            f"https://github.com/example-org/pytorch-course/blob/main/notebooks/{chapter}.ipynb")


def test_course_branch_changes_the_branch_the_buttons_open(shell):
    shell.setenv("COURSE_REPOSITORY_URL", EXAMPLE)
    shell.setenv("COURSE_BRANCH", "spring-2026")
    assert publication.branch() == "spring-2026"
    assert publication.colab_url("01_tensors.ipynb") == (
        "https://colab.research.google.com/github/example-org/pytorch-course/blob/spring-2026/notebooks/01_tensors.ipynb")
    assert publication.kaggle_url("01_tensors.ipynb").endswith(
        "/example-org/pytorch-course/blob/spring-2026/notebooks/01_tensors.ipynb")


@pytest.mark.parametrize("url", ["", "   ", "https://gitlab.com/example-org/pytorch-course",
                                 "https://github.com/example-org", "git@github.com:example-org/pytorch-course.git"])
def test_no_github_repository_gives_no_link(shell, url):
    shell.setenv("COURSE_REPOSITORY_URL", url)
    assert publication.colab_url("01_tensors.ipynb") is None
    assert publication.kaggle_url("01_tensors.ipynb") is None
    assert publication.notebook_on_github("01_tensors.ipynb") is None
    assert pages.open_in_links("01_tensors.ipynb") == {}


@pytest.mark.parametrize("suffix", [".git", "/", ".git/", "//"])
def test_a_trailing_git_or_slash_is_dropped(shell, suffix):
    shell.setenv("COURSE_REPOSITORY_URL", EXAMPLE + suffix)
    assert publication.repository_url() == EXAMPLE
    assert publication.colab_url("01_tensors.ipynb") == (
        "https://colab.research.google.com/github/example-org/pytorch-course/blob/main/notebooks/01_tensors.ipynb")
    shell.delenv("COURSE_REPOSITORY_URL")
    shell.setattr(publication, "REPOSITORY_URL", EXAMPLE + suffix)
    assert publication.repository_url(from_environment=False) == EXAMPLE


def test_without_the_environment_only_the_modules_settings_count(shell):
    shell.setenv("COURSE_REPOSITORY_URL", EXAMPLE)
    shell.setenv("COURSE_BRANCH", "elsewhere")
    assert publication.repository_url(from_environment=False) == ""
    assert publication.colab_url("01_tensors.ipynb", from_environment=False) is None
    assert publication.kaggle_url("01_tensors.ipynb", from_environment=False) is None
    shell.setattr(publication, "REPOSITORY_URL", "https://github.com/fork/course")
    shell.setattr(publication, "BRANCH", "stable")
    assert publication.branch(from_environment=False) == "stable"
    assert publication.colab_url("01_tensors.ipynb", from_environment=False) == (
        "https://colab.research.google.com/github/fork/course/blob/stable/notebooks/01_tensors.ipynb")
    # The environment still wins where it is asked for (the website's build).
    assert publication.colab_url("01_tensors.ipynb").startswith(
        "https://colab.research.google.com/github/example-org/pytorch-course/blob/elsewhere/")


def chapter_table(readme: str) -> list[str]:
    section = readme.split("\n## Chapters\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|")]


def test_with_no_repository_the_readme_table_is_as_written(shell):
    shell.setenv("COURSE_REPOSITORY_URL", EXAMPLE)  # the environment does not count for the README
    assert readme_links.with_chapter_links(README) == README
    assert chapter_table(README)[:2] == ["| notebook | what you will be able to do |", "|---|---|"]
    assert readme_links.readme_problems(ROOT) == [], "README.md is what release writes"


def test_with_a_repository_the_readme_table_opens_each_chapter_in_colab_and_kaggle(shell):
    shell.setattr(publication, "REPOSITORY_URL", EXAMPLE + ".git")
    linked = readme_links.with_chapter_links(README)
    table = chapter_table(linked)
    assert table[:2] == ["| notebook | what you will be able to do | open in |", "|---|---|---|"]
    rows = table[2:]
    assert [re.match(r"\| `(\w+)`", row).group(1) for row in rows] == CHAPTERS
    for chapter, row in zip(CHAPTERS, rows):
        links = dict(re.findall(r"\[(\w+)\]\(([^)\s]+)\)", row.rsplit("|", 2)[1]))
        assert links == {
            "Colab": f"https://colab.research.google.com/github/example-org/pytorch-course/blob/main/notebooks/{chapter}.ipynb",
            "Kaggle": f"https://kaggle.com/kernels/welcome?src={EXAMPLE}/blob/main/notebooks/{chapter}.ipynb",
        }
    # Only the table changed; the front page still gets the plain words of each chapter.
    assert linked.replace("\n".join(table), "") == README.replace("\n".join(chapter_table(README)), "")
    assert pages.readme_chapter_rows(linked) == pages.readme_chapter_rows(README)
    assert sorted(pages.readme_chapter_rows(linked)) == CHAPTERS
    assert all("](http" not in words for words in pages.readme_chapter_rows(linked).values())
    # Regenerating is stable, and going back to no repository gives the table as written.
    assert readme_links.with_chapter_links(linked) == linked
    shell.setattr(publication, "REPOSITORY_URL", "")
    assert readme_links.with_chapter_links(linked) == README


def test_authoring_check_fails_on_a_stale_readme_table_and_release_fixes_it(shell, tmp_path, capsys):
    (tmp_path / "solutions").mkdir()
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    assert authoring(["check", "--root", str(tmp_path)]) == 0
    shell.setattr(publication, "REPOSITORY_URL", EXAMPLE)
    capsys.readouterr()
    assert authoring(["check", "--root", str(tmp_path)]) == 1
    assert "README.md's Chapters table is out of date" in capsys.readouterr().err
    assert authoring(["release", "--root", str(tmp_path)]) == 0
    assert "wrote README.md" in capsys.readouterr().out
    assert "notebooks/01_tensors.ipynb" in (tmp_path / "README.md").read_text(encoding="utf-8")
    assert authoring(["check", "--root", str(tmp_path)]) == 0
    # The shell's COURSE_REPOSITORY_URL does not enter a release: the table stays as released.
    shell.setenv("COURSE_REPOSITORY_URL", "https://github.com/someone-else/course")
    assert authoring(["check", "--root", str(tmp_path)]) == 0
    shell.setattr(publication, "REPOSITORY_URL", "")
    assert authoring(["check", "--root", str(tmp_path)]) == 1, "links left from an earlier setting are stale too"
