"""Command line: ``python -m course_utils.authoring {release,check,refresh,new-exercise,hub-branch,hub-link}``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course_utils.authoring.errors import AuthoringError
from course_utils.authoring.project import (
    NOTEBOOKS,
    RELEASE_COMMAND,
    SOLUTIONS,
    check_details,
    release_changes,
)


def main(argv: list[str] | None = None) -> int:
    root_help = f"the course folder, holding {SOLUTIONS}/ and {NOTEBOOKS}/ (default: .)"
    # --root is accepted before or after the command; SUPPRESS keeps the subcommand's
    # default from overwriting a --root given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=argparse.SUPPRESS, help=root_help)
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.authoring",
        description=f"Generate the learner notebooks ({NOTEBOOKS}/) from {SOLUTIONS}/.",
    )
    parser.add_argument("--root", default=".", help=root_help)
    commands = parser.add_subparsers(dest="command", required=True)
    release = commands.add_parser(
        "release", parents=[common], help=f"regenerate {NOTEBOOKS}/ from {SOLUTIONS}/, or write an exam release"
    )
    release.add_argument("--exam", metavar="OUT", type=Path,
                         help="instead, write an exam release into OUT: the learner notebooks and "
                              "the package, no solutions, checks on public cases only")
    release.add_argument("--chapters", nargs="+", metavar="CHAPTER",
                         help="with --exam: the chapters to include (01, 01_tensors or tensors; default all)")
    release.add_argument("--hints", choices=("none", "first", "all"), default="none",
                         help="with --exam: which hints the release shows (default: none)")
    commands.add_parser(
        "check",
        parents=[common],
        help=f"exit 1 unless {NOTEBOOKS}/ is exactly what release would write",
    )
    refresh = commands.add_parser(
        "refresh",
        help=f"re-run {SOLUTIONS}/ notebooks and keep only the outputs nbval compares",
    )
    refresh.add_argument("notebooks", nargs="+", help=f"paths of {SOLUTIONS}/ notebooks")
    new = commands.add_parser(
        "new-exercise", parents=[common],
        help="write a new exercise's module, catalogue, notebook cells and listing from templates")
    new.add_argument("chapter", help="01, 01_tensors or tensors")
    new.add_argument("name", help="the function the learner writes, e.g. normalize")
    new.add_argument("--params", default="x", help="its parameters, comma-separated (default: x)")
    new.add_argument("--after", metavar="EXERCISE",
                     help="put it after this exercise (default: last, before the checklist)")
    add_hub_commands(commands, common)
    args = parser.parse_args(argv)
    if args.command == "refresh":
        return run_refresh(args.notebooks)
    if args.command == "new-exercise":
        return run_new_exercise(Path(args.root), args.chapter, args.name, args.params, args.after)
    if args.command == "hub-branch":
        return run_hub_branch(args.root, args.branch)
    if args.command == "hub-link":
        return run_hub_link(args)
    if args.command == "release" and args.exam is not None:
        return run_exam_release(args.root, args.exam, args.chapters, args.hints)
    if args.command == "release" and (args.chapters or args.hints != "none"):
        parser.error("--chapters and --hints go with --exam OUT")
    return run_release(args.root) if args.command == "release" else run_check(args.root)


def add_hub_commands(commands, common) -> None:
    from course_utils.authoring.hub import DEFAULT_BRANCH, DEFAULT_CHAPTER, DEFAULT_FOLDER, INTERFACES

    branch = commands.add_parser(
        "hub-branch", parents=[common],
        help=f"commit the learner notebooks and the package to a git branch that nbgitpuller pulls "
             f"(default: {DEFAULT_BRANCH}); the checkout is not touched")
    branch.add_argument("--branch", default=DEFAULT_BRANCH,
                        help=f"the branch to commit to (default: {DEFAULT_BRANCH})")
    link = commands.add_parser(
        "hub-link", parents=[common],
        help="print the nbgitpuller link that pulls the learner branch into a hub and opens a chapter")
    link.add_argument("hub_url", metavar="HUB_URL",
                      help="the hub's address, e.g. https://hub.example.edu")
    link.add_argument("--repository", metavar="URL",
                      help="the git repository the hub clones (default: course_utils.publication, "
                           "or $COURSE_REPOSITORY_URL)")
    link.add_argument("--branch", default=DEFAULT_BRANCH, help=f"default: {DEFAULT_BRANCH}")
    link.add_argument("--chapter", default=DEFAULT_CHAPTER,
                      help=f"the chapter the link opens (default: {DEFAULT_CHAPTER}; "
                           "'' opens the folder)")
    link.add_argument("--folder", default=DEFAULT_FOLDER,
                      help="the folder of the learner's hub home the course goes into "
                           f"(default: {DEFAULT_FOLDER})")
    link.add_argument("--interface", choices=sorted(INTERFACES), default="lab",
                      help="JupyterLab (default) or the classic Notebook")


def run_hub_branch(root: str, branch: str) -> int:
    from course_utils.authoring.hub import publish

    try:
        made = publish(Path(root), branch)
    except AuthoringError as error:
        print(f"No learner branch written: {error}", file=sys.stderr)
        return 1
    state = "" if made.changed else " (nothing changed: no new commit)"
    print(f"{made.branch}: {made.commit}, {made.chapters} chapters{state}")
    return 0


def run_hub_link(args) -> int:
    from course_utils import publication
    from course_utils.authoring.hub import chapter_stem, nbgitpuller_link

    repository = args.repository if args.repository is not None else publication.repository_url()
    if not repository.strip():
        print("hub-link: no repository to pull from: pass --repository URL, or set "
              f"{publication.REPOSITORY_ENV} (or REPOSITORY_URL in course_utils/publication.py).",
              file=sys.stderr)
        return 2
    try:
        chapter = chapter_stem(Path(args.root), args.chapter)
        print(nbgitpuller_link(args.hub_url, repository.strip(), args.branch, chapter, args.folder,
                               args.interface))
    except AuthoringError as error:
        print(f"hub-link: {error}", file=sys.stderr)
        return 2
    return 0


def run_new_exercise(root: Path, chapter: str, name: str, params: str, after: str | None) -> int:
    from course_utils.authoring.new_exercise import chapter_of, new_exercise, next_steps

    try:
        made = new_exercise(root, chapter, name, tuple(p.strip() for p in params.split(",")), after)
    except AuthoringError as error:
        print(f"new-exercise: {error}", file=sys.stderr)
        return 2
    print(next_steps(made, chapter_of(chapter)[1], name))
    return 0


def run_exam_release(root: str, out: Path, chapters: list[str] | None, hints: str) -> int:
    from course_utils.authoring.exam import release_exam

    try:
        made = release_exam(Path(root).resolve(), out.resolve(), chapters, hints)
    except AuthoringError as error:
        print("No exam release written:", file=sys.stderr)
        for problem in error.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print(f"Exam release in {made.out}: chapters {', '.join(made.chapters)}, {made.exercises} "
          f"exercises checked on public cases, hints: {hints}; {made.size_bytes / 1e6:.1f} MB, "
          f"written in {made.seconds:.1f} s. No reference solution, withheld hint or withheld error note is in it "
          "(every file was scanned).")
    return 0


def run_refresh(paths: list[str]) -> int:
    from course_utils.authoring.refresh import refresh

    for path in paths:
        try:
            refresh(path)
        except AuthoringError as error:
            print(error, file=sys.stderr)
            return 1
        print(f"refreshed {path}")
    print(f"Now run `{RELEASE_COMMAND}`.")
    return 0


def run_release(root: str) -> int:
    try:
        written, removed = release_changes(root)
    except AuthoringError as error:
        print(f"Nothing released: fix these in {SOLUTIONS}/ first:", file=sys.stderr)
        for problem in error.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {NOTEBOOKS}/{path.name}")
    for path in removed:
        print(f"removed {NOTEBOOKS}/{path.name} (no {SOLUTIONS}/{path.name})")
    # The README's Chapters table links each chapter's notebook (course_utils/publication.py).
    from course_utils.readme_links import update_readme

    readme = update_readme(root)
    if readme is not None:
        print(f"wrote {readme.name} (the Chapters table's Colab/Kaggle links)")
    return 0


def run_check(root: str) -> int:
    from course_utils.readme_links import readme_problems

    errors, out_of_sync = check_details(root)
    readme = readme_problems(root)  # the README's chapter links, which release writes too
    if not errors and not out_of_sync and not readme:
        print(f"{NOTEBOOKS}/ is in sync with {SOLUTIONS}/.")
        return 0
    stale = " and ".join([f"{NOTEBOOKS}/"] * bool(errors or out_of_sync) + ["README.md"] * bool(readme))
    if errors or out_of_sync:
        print(f"{NOTEBOOKS}/ is not what release would make of {SOLUTIONS}/:", file=sys.stderr)
    else:
        print("README.md is not what release would write:", file=sys.stderr)
    out_of_sync += readme
    for problem in errors + out_of_sync:
        print(f"  - {problem}", file=sys.stderr)
    if errors:
        print(
            f"Fix the errors above in {SOLUTIONS}/, then run `{RELEASE_COMMAND}`.", file=sys.stderr
        )
    else:
        print(f"Run `{RELEASE_COMMAND}` to regenerate {stale}.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
