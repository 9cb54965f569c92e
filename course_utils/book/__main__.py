"""``python -m course_utils.book [--out DIR] [--smoke]``: what ``./course book`` runs."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from course_utils import publication
from course_utils.book.execute import ExecutionFailed, execute_chapter
from course_utils.book.pages import open_in_links, write_source
from course_utils.book.verify import SiteInvalid, folder_size, solution_snippets, verify_site
from course_utils.tool_env import ToolEnvFailed, ensure

REQUIREMENTS = "requirements-book.txt"
WORK = Path(".course") / "book"  # the executed pages, the Sphinx source, Sphinx's cache
# What the site was built for, read by the browser tests: the repository and branch its
# Colab/Kaggle buttons name (none when none was set) and the chapters it has.
BUILD_FACTS = "_course.json"


def write_build_facts(out: Path, chapter_names: list[str]) -> dict[str, list[str]]:
    """``out/_course.json``; returns each chapter's expected Colab/Kaggle links (none: [])."""
    links = {name: list(open_in_links(f"{name}.ipynb").values()) for name in chapter_names}
    facts = {"repository_url": publication.repository_url() or None,
             "branch": publication.branch(),
             "open_in": any(links.values()),
             "chapters": chapter_names}
    (out / BUILD_FACTS).write_text(json.dumps(facts, indent=1) + "\n", encoding="utf-8")
    return links


def render(tool_python: Path, work: Path, out: Path) -> None:
    """Sphinx renders ``work/source`` into ``out``; any warning fails the build (a warning is
    a broken link, a missing image or a page left out of the navigation).

    Sphinx writes into ``work/html`` first, then the site is copied to ``out``: MyST-NB puts
    the images it extracts next to its output folder, which must not be the course folder.
    """
    html = work / "html"
    command = [str(tool_python), "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going",
               "-d", str(work / "doctrees"), str(work / "source"), str(html)]
    if subprocess.run(command).returncode != 0:
        raise SiteInvalid("Sphinx could not render the site (see its messages above)")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(html, out)


def build(root: Path, out: Path, smoke: bool) -> None:
    started = time.perf_counter()
    tool_python = ensure(root, "book", root / REQUIREMENTS)
    chapters = []
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        print(f"running {path.name} …", end=" ", flush=True)
        chapter = execute_chapter(path, root / WORK / "run", smoke=smoke)
        print(f"{chapter.seconds:.1f} s", flush=True)
        chapters.append(chapter)
    write_source(root, root / WORK / "source", chapters)
    print("rendering the pages …", flush=True)
    render(tool_python, root / WORK, out)
    names = [chapter.name for chapter in chapters]
    open_in = write_build_facts(out, names)
    verify_site(out, names, solution_snippets(root), open_in)
    size_mb = folder_size(out) / 1e6
    print(f"The website is in {out} ({len(chapters)} chapters, {size_mb:.1f} MB), built in "
          f"{time.perf_counter() - started:.0f} s{' with COURSE_SMOKE=1' if smoke else ''}; "
          + (f"its Colab/Kaggle buttons open {publication.repository_url()} "
             f"(branch {publication.branch()}). " if any(open_in.values()) else
             "no Colab/Kaggle buttons (no GitHub repository set: COURSE_REPOSITORY_URL). ")
          + f"Open {out / 'index.html'} in a browser.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="./course book",
        description="Build the course's website: every chapter executed, rendered as HTML.")
    parser.add_argument("--out", type=Path, default=Path("_site"),
                        help="the folder to write the site into, replaced (default: _site)")
    parser.add_argument("--smoke", action="store_true",
                        help="shorten long trainings (COURSE_SMOKE=1), as the tests do: faster, "
                             "but the figures are not the real ones")
    parser.add_argument("--root", type=Path, default=Path("."), help="the course folder")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    out = args.out if args.out.is_absolute() else Path.cwd() / args.out
    try:
        build(root, out.resolve(), args.smoke)
    except (ExecutionFailed, SiteInvalid, ToolEnvFailed, ValueError) as error:
        print(f"\ncourse book: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
