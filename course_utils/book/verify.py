"""What a built site must hold: a page for every chapter, and no reference solution anywhere;
and on each page the "Open in Colab / Kaggle" buttons of its own notebook, or none at all.

The pages are learner notebooks, which never contain solutions; this scan makes sure of it for
the rendered HTML, where a solution could still leak in through an output (a check that printed
the reference, a ``solution()`` call left in a chapter).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat

from course_utils.authoring.markers import SOLUTION, find_regions

# A solution shorter than this (in characters, whitespace removed) is too generic to scan for.
MIN_SCANNED_CHARS = 16
# Exercises whose answer is a one-line idiom that the chapter shows just before asking for it:
# practising the idiom is the point, so a page that shows it gives nothing away.
IDIOMS_THE_CHAPTER_TEACHES = {
    "sgd_update": "02 shows `with torch.no_grad(): w -= lr * w.grad` as the update rule",
    "save_weights": "07 shows `torch.save(model.state_dict(), path)` as the way to save",
}


class SiteInvalid(RuntimeError):
    pass


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def page_text(page: Path) -> str:
    """A page's visible text and code, tags removed and entities decoded, whitespace-free."""
    raw = page.read_text(encoding="utf-8", errors="replace")
    raw = re.sub(r"<script\b.*?</script>|<style\b.*?</style>", "", raw, flags=re.DOTALL)
    return _squeeze(html.unescape(re.sub(r"<[^>]+>", "", raw)))


def _function_body(source: str) -> str:
    """``source`` without its first ``def`` line (and the docstring-free header above it)."""
    lines = source.splitlines()
    for index, line in enumerate(lines):
        if line.lstrip().startswith("def "):
            return "\n".join(lines[index + 1:])
    return source


def solution_snippets(root: Path) -> dict[str, str]:
    """Every reference solution a learner must not see, by where it comes from: the bodies of
    the exercises' references, and each ``### BEGIN SOLUTION`` region of solutions/."""
    from course_utils.exercises import all_exercises

    snippets = {}
    for chapter, exercises in all_exercises().items():
        for exercise in exercises:
            if exercise.name in IDIOMS_THE_CHAPTER_TEACHES:
                continue
            snippets[f"{chapter}: ex.{exercise.name}.solution()"] = _function_body(exercise.solution_text())
    for path in sorted((root / "solutions").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code" or cell.get("id") in IDIOMS_THE_CHAPTER_TEACHES:
                continue
            lines = cell.source.splitlines()
            for region in find_regions(cell.source, None):
                if region.kind == SOLUTION:
                    body = "\n".join(lines[region.begin.line + 1:region.end.line])
                    snippets[f"{path.name}: cell {cell.get('id', '?')}"] = body
    return {where: text for where, text in snippets.items() if len(_squeeze(text)) >= MIN_SCANNED_CHARS}


def solutions_on_pages(site: Path, snippets: dict[str, str]) -> list[str]:
    """``"page: what"`` for each solution found on a page of ``site``."""
    found = []
    for page in sorted(site.rglob("*.html")):
        text = page_text(page)
        for where, snippet in snippets.items():
            if _squeeze(snippet) in text:
                found.append(f"{page.relative_to(site)}: {where}")
    return found


# Where an "Open in Colab / Kaggle" button leads: a link to either is one of the buttons.
OPEN_IN_HOSTS = re.compile(r"^https://(colab\.research\.google\.com|(www\.)?kaggle\.com)/")


def page_links(page: Path) -> list[str]:
    """Every ``href`` of the page's links, entities decoded, in page order."""
    raw = page.read_text(encoding="utf-8", errors="replace")
    return [html.unescape(href) for href in re.findall(r"<a\s[^>]*?href=\"([^\"]*)\"", raw)]


def open_in_problems(site: Path, expected: dict[str, list[str]]) -> list[str]:
    """``"page: what"`` for each chapter page whose Colab/Kaggle links are not ``expected[name]``
    (a missing one, one for another notebook or branch, or any at all where none is expected)."""
    problems = []
    for name, wanted in expected.items():
        page = site / "chapters" / f"{name}.html"
        found = [href for href in page_links(page) if OPEN_IN_HOSTS.match(href)]
        for href in wanted:
            if href not in found:
                problems.append(f"{page.relative_to(site)}: no link to {href}")
        for href in found:
            if href not in wanted:
                problems.append(f"{page.relative_to(site)}: a link to {href}, not asked for by the build")
    return problems


def verify_site(site: Path, chapter_names: list[str], snippets: dict[str, str],
                open_in: dict[str, list[str]] | None = None) -> None:
    """Raise SiteInvalid unless every chapter has a page, no page shows a solution and, where
    ``open_in`` is given, each page's Colab/Kaggle links are exactly ``open_in[chapter]``."""
    missing = [name for name in chapter_names if not (site / "chapters" / f"{name}.html").exists()]
    if missing:
        raise SiteInvalid(f"no page for {', '.join(missing)} in {site}")
    leaks = solutions_on_pages(site, snippets)
    if leaks:
        raise SiteInvalid("reference solutions are on the site:\n  " + "\n  ".join(leaks))
    wrong = open_in_problems(site, open_in or {})
    if wrong:
        raise SiteInvalid("the pages' Open in Colab/Kaggle links are wrong:\n  " + "\n  ".join(wrong))


def folder_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
