"""The website builder's own steps (course_utils/book, course_utils/tool_env), without Sphinx:
what goes on a page, what the front page lists, what a kernel runs with, and the solution scan.
The rendered site is tested in a real browser by tests/browser/ (./course test-browser)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.book import execute, pages, verify
from course_utils.book.execute import ExecutedChapter, ExecutionFailed, execute_chapter
from course_utils.progress_store import ProgressReport

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
needs_course_kernel = pytest.mark.skipif(
    Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
    reason="needs the course's own .venv and kernel, set up by ./course setup")


def chapter(*cells, name="01_tensors") -> ExecutedChapter:
    return ExecutedChapter(name, nbformat.v4.new_notebook(cells=list(cells)), 0.0)


def test_a_page_is_the_notebook_with_how_to_run_it_under_the_title_and_no_test_markers():
    page = pages.page_notebook(chapter(
        nbformat.v4.new_markdown_cell("Some words before the title"),
        nbformat.v4.new_markdown_cell("# 01 · Tensors\n\nIntro."),
        nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(1)  # NBVAL_CHECK_OUTPUT stays in a comment"),
    ))
    assert [cell.get("id") for cell in page.cells][2] == pages.RUN_IT_CELL_ID
    note = page.cells[2].source
    assert "./course lab" in note and "my-work/01_tensors.ipynb" in note
    assert page.cells[3].source == "print(1)  # NBVAL_CHECK_OUTPUT stays in a comment"


def test_a_notebook_without_a_title_is_refused():
    with pytest.raises(ValueError, match="no title"):
        pages.page_notebook(chapter(nbformat.v4.new_code_cell("1")))


def test_the_front_page_lists_the_chapters_in_order_with_the_readmes_words():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    said = pages.readme_chapter_rows(readme)
    assert sorted(said) == CHAPTERS, "README.md's Chapters table names every chapter"
    chapters = [chapter(nbformat.v4.new_markdown_cell(f"# {name[:2]} · Title {name}"), name=name)
                for name in CHAPTERS]
    front = pages.front_page("# The course\n", chapters, readme)
    rows = [line for line in front.splitlines() if line.startswith("| [")]
    assert rows[0] == f"| [00 · Title 00_environment](chapters/00_environment.ipynb) | {said['00_environment']} |"
    assert [row.split("(chapters/")[1].split(".ipynb")[0] for row in rows] == CHAPTERS
    toctree = front.split("```{toctree}")[1]
    assert [line for line in toctree.splitlines() if line.startswith("chapters/")] == [
        f"chapters/{name}" for name in CHAPTERS]
    with pytest.raises(ValueError, match="no row for 08_new"):
        pages.front_page("# x", [chapter(nbformat.v4.new_markdown_cell("# 08"), name="08_new")], readme)


def test_the_kernel_runs_as_a_new_learner_with_static_widgets_and_no_test_settings(tmp_path):
    shell = {"MPLBACKEND": "Agg", "COURSE_SMOKE": "1", "COURSE_STRICT": "1", "PATH": "/bin",
             "COURSE_PROGRESS_FILE": "/somewhere/progress.json", "HOME": "/root"}
    env = execute.kernel_environment(smoke=False, home=tmp_path / "home", base=shell)
    assert env["PATH"] == "/bin" and env["HOME"] == str(tmp_path / "home")
    assert env["COURSE_STATIC_WIDGETS"] == "1" and env["COURSE_NO_PROGRESS"] == "1"
    for dropped in ("MPLBACKEND", "COURSE_SMOKE", "COURSE_STRICT", "COURSE_PROGRESS_FILE"):
        assert dropped not in env
    assert execute.kernel_environment(smoke=True, home=tmp_path / "h", base=shell)["COURSE_SMOKE"] == "1"


def test_the_progress_table_names_the_file_as_a_learner_types_it(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    report = ProgressReport([], tmp_path / ".pytorch-course" / "progress.json")
    assert "(~/.pytorch-course/progress.json)" in str(report)
    assert "(~/.pytorch-course/progress.json)" in report._repr_html_()
    assert "(/elsewhere/p.json)" in str(ProgressReport([], Path("/elsewhere/p.json")))


def html_page(tmp_path: Path, body: str) -> Path:
    site = tmp_path / "site"
    (site / "chapters").mkdir(parents=True, exist_ok=True)
    page = site / "chapters" / "01_tensors.html"
    page.write_text(f"<html><head><script>var a = 1;</script></head><body>{body}</body></html>")
    return site


def test_the_scan_finds_a_solution_however_the_page_highlights_and_escapes_it(tmp_path):
    snippet = {"ex.demo.solution()": "    total = (pred - target) ** 2\n    return total.mean() if x > 0 else None\n"}
    highlighted = ('<pre><span class="n">total</span> <span class="o">=</span> (pred - target) '
                   '<span class="o">**</span> 2\n    <span class="k">return</span> total.mean() if x &gt; 0 else None</pre>')
    assert verify.solutions_on_pages(html_page(tmp_path, highlighted), snippet) == [
        "chapters/01_tensors.html: ex.demo.solution()"]
    assert verify.solutions_on_pages(html_page(tmp_path, "<p>total = (pred - target)</p>"), snippet) == []


def test_every_reference_solution_is_scanned_for(tmp_path):
    snippets = verify.solution_snippets(ROOT)
    from course_utils.exercises import all_exercises

    names = [f"{chapter}: ex.{exercise.name}.solution()"
             for chapter, exercises in all_exercises().items() for exercise in exercises]
    left_out = [name for name in names if name not in snippets]
    assert left_out == [name for name in names
                        if name.split("ex.")[1].split(".")[0] in verify.IDIOMS_THE_CHAPTER_TEACHES]
    assert any(where.endswith(".ipynb: cell checked_mse") for where in snippets)


def test_no_learner_notebook_gives_an_exercises_answer_away_in_its_own_cells():
    """A chapter that shows the very code an exercise asks for (once: 01's checked_mse was its
    own demonstration, word for word) hands the answer over; the site would show it too."""
    snippets = verify.solution_snippets(ROOT)
    found = []
    for name in CHAPTERS:
        nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
        text = verify._squeeze("\n".join(cell.source for cell in nb.cells))
        found += [f"{name}: {where}" for where, snippet in snippets.items()
                  if verify._squeeze(snippet) in text]
    assert found == []


def test_a_site_without_a_chapter_or_with_a_solution_is_refused(tmp_path):
    site = html_page(tmp_path, "<p>nothing to see</p>")
    verify.verify_site(site, ["01_tensors"], {"x": "return the_answer_to_everything_here()"})
    with pytest.raises(verify.SiteInvalid, match="no page for 02_autograd"):
        verify.verify_site(site, ["01_tensors", "02_autograd"], {})
    leaky = html_page(tmp_path, "<pre>return the_answer_to_everything_here()</pre>")
    with pytest.raises(verify.SiteInvalid, match="chapters/01_tensors.html: x"):
        verify.verify_site(leaky, ["01_tensors"], {"x": "return the_answer_to_everything_here()"})


@needs_course_kernel
def test_a_chapter_that_raises_stops_the_build_naming_the_cell(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os\nprint(os.environ['COURSE_STATIC_WIDGETS'], os.environ['HOME'], os.getpid())",
                                  id="fine"),
        nbformat.v4.new_code_cell("1 / 0", id="divides"),
    ])
    nb.metadata["kernelspec"] = {"name": "pytorch-course", "display_name": "x", "language": "python"}
    path = tmp_path / "09_broken.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(ExecutionFailed, match=r"09_broken.ipynb: cell divides \('1 / 0'\) failed: .*ZeroDivisionError"):
        execute_chapter(path, tmp_path / "run", smoke=True)
    del nb.cells[1]
    nbformat.write(nb, path)
    done = execute_chapter(path, tmp_path / "run", smoke=True)
    static, home, pid = done.notebook.cells[0].outputs[0]["text"].split()
    assert (static, home) == ("1", str(tmp_path / "run" / "home"))
    with pytest.raises(ProcessLookupError):  # the kernel was shut down, not left running
        os.kill(int(pid), 0)
    assert "eavesdropping" not in (tmp_path / "run" / "09_broken.kernel.log").read_text()


def test_the_pages_name_the_repository_to_clone_when_the_build_knows_it(monkeypatch):
    title = nbformat.v4.new_markdown_cell("# 01 · Tensors")
    monkeypatch.delenv(pages.REPOSITORY_ENV, raising=False)
    assert "git clone <this repository> pytorch-course" in pages.page_notebook(chapter(title)).cells[1].source
    monkeypatch.setenv(pages.REPOSITORY_ENV, "https://github.com/someone/pytorch-course")
    note = pages.page_notebook(chapter(title)).cells[1].source
    assert "git clone https://github.com/someone/pytorch-course pytorch-course" in note
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    intro = (ROOT / "book" / "index.md").read_text(encoding="utf-8")
    assert "<this repository>" in intro
    front = pages.front_page(intro, [chapter(title, name="01_tensors")], readme)
    assert "git clone https://github.com/someone/pytorch-course pytorch-course" in front


def test_with_a_github_repository_a_page_opens_its_notebook_in_colab_and_kaggle(monkeypatch):
    title = nbformat.v4.new_markdown_cell("# 03 · Models")
    monkeypatch.delenv("COURSE_BRANCH", raising=False)
    monkeypatch.setenv(pages.REPOSITORY_ENV, "https://github.com/example-org/pytorch-course.git")
    note = pages.page_notebook(chapter(title, name="03_models")).cells[1].source
    hrefs = re.findall(r'<a class="[^"]*" href="([^"]+)"[^>]*>([^<]+)</a>', note)
    assert [(text, href) for href, text in hrefs] == [
        ("Open in Colab", "https://colab.research.google.com/github/example-org/pytorch-course/blob/main/notebooks/03_models.ipynb"),
        ("Open in Kaggle", "https://kaggle.com/kernels/welcome?src=https://github.com/example-org/pytorch-course/blob/main/notebooks/03_models.ipynb"),
        ("Download the notebook", "../_sources/chapters/03_models.ipynb"),  # what the theme's button gives
    ]
    assert "git clone https://github.com/example-org/pytorch-course pytorch-course" in note
    assert "./course lab" in note and "my-work/03_models.ipynb" in note
    assert all(line.startswith(">") for line in note.splitlines()), "one note, under the title"
    monkeypatch.setenv("COURSE_BRANCH", "spring")
    assert "/blob/spring/notebooks/03_models.ipynb" in pages.run_it_yourself_text("03_models.ipynb")


@pytest.mark.parametrize("url", ["", "https://gitlab.com/example-org/pytorch-course"])
def test_without_a_github_repository_a_page_has_no_colab_or_kaggle_link(monkeypatch, url):
    monkeypatch.setenv(pages.REPOSITORY_ENV, url)
    monkeypatch.setattr(pages.publication, "REPOSITORY_URL", "")
    note = pages.run_it_yourself_text("01_tensors.ipynb")
    assert "colab" not in note.lower() and "kaggle" not in note.lower() and "<a " not in note
    assert note.startswith("> **Run it yourself.**") and "./course lab" in note
    assert f"git clone {url or '<this repository>'} pytorch-course" in note


def test_the_site_check_wants_each_pages_own_colab_and_kaggle_links_or_none(tmp_path):
    colab = "https://colab.research.google.com/github/o/r/blob/main/notebooks/01_tensors.ipynb"
    kaggle = "https://kaggle.com/kernels/welcome?src=https://github.com/o/r/blob/main/notebooks/01_tensors.ipynb"
    site = html_page(tmp_path, f'<a class="btn" href="{colab}">Open in Colab</a> '
                               f'<a href="{kaggle.replace("?", "&#63;")}">Open in Kaggle</a>')
    verify.verify_site(site, ["01_tensors"], {}, {"01_tensors": [colab, kaggle]})
    with pytest.raises(verify.SiteInvalid, match="a link to https://colab.*not asked for"):
        verify.verify_site(site, ["01_tensors"], {}, {"01_tensors": []})
    other = colab.replace("01_tensors", "02_autograd")
    with pytest.raises(verify.SiteInvalid, match=f"chapters/01_tensors.html: no link to {re.escape(other)}"):
        verify.verify_site(site, ["01_tensors"], {}, {"01_tensors": [other, kaggle]})
    verify.verify_site(html_page(tmp_path, "<p>no buttons</p>"), ["01_tensors"], {}, {"01_tensors": []})


def test_a_page_hides_the_set_up_cell_and_its_download_installs_from_the_sites_repository(monkeypatch):
    from course_utils.authoring.setup_cell import CELL_ID

    monkeypatch.setenv("COURSE_REPOSITORY_URL", "https://github.com/example-org/pytorch-course")
    monkeypatch.delenv("COURSE_PACKAGE_SOURCE", raising=False)
    learner = nbformat.read(pages.Path(__file__).resolve().parents[1] / "notebooks" / "01_tensors.ipynb",
                            as_version=4)
    page = pages.page_notebook(ExecutedChapter("01_tensors", learner, 1.0))
    (cell,) = [cell for cell in page.cells if cell.get("id") == CELL_ID]
    assert "remove-cell" in cell.metadata["tags"]
    assert 'source="pytorch-course @ git+https://github.com/example-org/pytorch-course@v' in cell.source
