"""The learner's workspace, my-work/: their own copy of each chapter, kept up to date with the course.

Learners used to type into notebooks/, which git owns, so a pull that brought a fixed chapter
refused, conflicted, or (after a reset) threw their answers away. Now notebooks/ stays as git
has it and learners work in my-work/ (git-ignored). ``sync`` gives every chapter a copy there;
when a chapter's course version changes, it saves the learner's file byte for byte in
my-work/backups/ and rebuilds it from the new version with their work carried in: answers by
nbgrader ``grade_id``, cells they added after the cell they followed, edits to course cells the
course left alone, answers to exercises the course dropped (at the end, with a note); see
``course_utils.workspace_merge``. ``adopt`` saves what learners typed into notebooks/ (the old
layout) before git resets it.

    python -m course_utils.workspace sync   [--root ROOT]   # ./course lab, ./course update
    python -m course_utils.workspace status [--root ROOT]   # what sync would do; writes nothing
    python -m course_utils.workspace adopt  [--root ROOT]   # before `git checkout -- notebooks/`

Exit codes: 0 done, or nothing to do; 1 a file needs the learner's attention: it was left as it
was, the message (on stderr) says why, the other chapters were done; after ``adopt``: do NOT
reset notebooks/; 2 bad usage, or no notebooks/ in ROOT; 3 (``status`` only) sync would change
something. Output: one line per chapter changed, nothing when nothing changed. Standard library
and nbformat only, and nbformat (a second to import) only when a file must be written: it runs
before every JupyterLab start, where it usually has nothing to do.
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from course_utils.workspace_merge import (
    KEPT,
    META,
    Merge,
    content_hash,
    merge,
    origin_record,
    parse,
    with_record,
)

NOTEBOOKS, WORKSPACE, BACKUPS = "notebooks", "my-work", "backups"
SAME, NEW, UPDATED, PENDING, ATTENTION = "same", "new", "updated", "pending", "attention"


@dataclass
class Outcome:
    """What happened to one chapter, and the learner-readable lines that say so."""

    chapter: str
    state: str
    lines: list[str] = field(default_factory=list)
    backup: Path | None = None


def write(path: Path, nb) -> None:
    """nbformat's own layout, atomically (temp file + os.replace), as the course's notebooks."""
    from course_utils.authoring.project import render, write_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, render(nb))


def origin_of(data: bytes) -> str | None:
    """The course version a workspace file records, read without nbformat (the fast path)."""
    try:
        record = json.loads(data).get("metadata", {}).get(META, {})
        return record.get("origin") if isinstance(record, dict) else None
    except (ValueError, AttributeError):
        return None


def backup(root: Path, chapter: str, data: bytes) -> tuple[Path, bool]:
    """A byte-exact copy in my-work/backups/ that never overwrites one; the same bytes are saved
    once (a broken file, synced again and again, leaves one copy). Returns (path, created)."""
    folder = root / WORKSPACE / BACKUPS
    folder.mkdir(parents=True, exist_ok=True)
    stem = chapter.removesuffix(".ipynb")
    for old in sorted(folder.glob(f"{glob.escape(stem)}.*.ipynb")):
        if old.stat().st_size == len(data) and old.read_bytes() == data:
            return old, False
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, 1000):
        path = folder / (f"{stem}.{stamp}.ipynb" if n == 1 else f"{stem}.{stamp}-{n}.ipynb")
        try:
            file = open(path, "xb")  # "x": fails rather than overwrite
        except FileExistsError:
            continue
        with file:
            try:
                file.write(data)
            except BaseException:  # a disk that filled up leaves no half copy
                path.unlink()
                raise
        return path, True
    raise OSError(f"too many backups of {chapter} named {stamp}")


def describe(chapter: str, merged: Merge, saved: Path) -> list[str]:
    """One line for the chapter; a second only for edits that could not be carried."""
    said = [f"{n} {one if n == 1 else many}" for one, many in KEPT.items() if (n := merged.kept[one])]
    new = merged.kept["new exercise"]
    line = f"{WORKSPACE}/{chapter}: updated to the new course version"
    line += (f"; kept your {', '.join(said)}" if said else "") + (
        f"; {new} new exercise{'' if new == 1 else 's'}" if new else "")
    lines = [f"{line}; your previous file is {WORKSPACE}/{BACKUPS}/{saved.name}"]
    if lost := merged.lost_edits:
        shown = ", ".join(lost[:3]) + (", …" if len(lost) > 3 else "")
        lines.append(f"  the course changed {len(lost)} cell(s) you had edited; the course's "
                     f"version is in place, yours is in the backup: {shown}")
    if merged.restored:
        lines.append(f"  answer cells you had deleted are back, with the course's starting code: "
                     f"{_few(merged.restored)}")
    if merged.new_templates:
        lines.append(f"  the course changed the starting code of {_few(merged.new_templates)}; your "
                     f"answer is kept, the new starting code is in {NOTEBOOKS}/{chapter}")
    if merged.outputs_cleared:
        lines.append(f"  the outputs of {merged.outputs_cleared} of the course's cells were cleared "
                     "(the course ships them empty): run the notebook again to see them")
    if merged.checks_cleared:
        checks = "1 of them was a check" if merged.checks_cleared == 1 else f"{merged.checks_cleared} of them were checks"
        lines.append(f"  {checks}: the exercises you passed are still "
                     "recorded (course_utils.progress() lists them), and running a check again shows "
                     "its verdict with the course's new version of it")
    return lines


def _few(names: list[str], limit: int = 3) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def sync_chapter(root: Path, chapter: str, dry_run: bool = False) -> Outcome:
    """One chapter of ``sync``; with dry_run, only say what it would do. The course's version
    is notebooks/<chapter> as git's HEAD has it: edits made there (the old layout) are the
    learner's work, to copy into a new workspace file or for ``adopt`` to save, not a new version."""
    here, mine_path = (root / NOTEBOOKS / chapter).read_bytes(), root / WORKSPACE / chapter
    mine_bytes = mine_path.read_bytes() if mine_path.exists() else None
    if mine_bytes is not None and origin_of(mine_bytes) == content_hash(here):
        return Outcome(chapter, SAME)  # most runs end here, without git or nbformat
    head = head_version(root, chapter)
    course_bytes = here if head is None else head
    yours = content_hash(here) != content_hash(course_bytes)  # edits in notebooks/ itself
    if mine_bytes is not None and yours and origin_of(mine_bytes) == content_hash(course_bytes):
        return Outcome(chapter, SAME)
    try:
        course = parse(course_bytes)
    except ValueError as error:
        return Outcome(chapter, ATTENTION, [f"{NOTEBOOKS}/{chapter} {error} (a git conflict? see "
                                            f"`git status`); {WORKSPACE}/{chapter} is left as it is"])
    record = origin_record(course_bytes, course)
    if mine_bytes is None:
        return new_copy(mine_path, with_record(course, record), (here, course_bytes) if yours else None, dry_run)
    try:
        mine = parse(mine_bytes)
    except ValueError as error:
        saved = None if dry_run else backup(root, chapter, mine_bytes)[0]
        where = f" (a copy is in {WORKSPACE}/{BACKUPS}/{saved.name})" if saved else ""
        return Outcome(chapter, ATTENTION, [
            f"{WORKSPACE}/{chapter} {error}, so sync leaves it as it is{where}. Repair it, or "
            f"rename it to get a fresh copy of the chapter."], saved)
    if dry_run:
        return Outcome(chapter, PENDING, [f"{WORKSPACE}/{chapter}: the course has a new version; sync will update it"])
    merged = merge(mine, course, record)
    saved = backup(root, chapter, mine_bytes)[0]  # first the copy, then the replace
    write(mine_path, merged.notebook)
    return Outcome(chapter, UPDATED, describe(chapter, merged, saved), saved)


def new_copy(path: Path, fresh, edited: tuple[bytes, bytes] | None, dry_run: bool) -> Outcome:
    """A chapter new to my-work/: the course's copy, or, when the learner had typed into
    notebooks/<chapter> (edited = (their file, HEAD's)), theirs, so their answers are there."""
    nb, said = fresh, f"{WORKSPACE}/{path.name}: new chapter"
    if edited is not None:
        try:
            nb, said = adopted(*edited), f"{said}, with the edits you made in {NOTEBOOKS}/{path.name}"
        except ValueError:
            pass  # theirs is unreadable: adopt will save its bytes
    if not dry_run:
        write(path, nb)
    return Outcome(path.name, NEW, [said + (" (to be copied)" if dry_run else "")])


def chapters(root: Path) -> list[str]:
    return sorted(p.name for p in (root / NOTEBOOKS).glob("*.ipynb") if not p.name.startswith("."))


def sync(root: Path, dry_run: bool = False) -> list[Outcome]:
    """Every chapter of notebooks/ into my-work/; never writes to notebooks/ or solutions/."""
    outcomes = []
    for chapter in chapters(root):
        try:
            outcomes.append(sync_chapter(root, chapter, dry_run))
        except Exception as error:  # one odd chapter must not stop the others; writes are atomic
            outcomes.append(Outcome(chapter, ATTENTION, [
                f"{WORKSPACE}/{chapter}: not updated, it is as it was ({type(error).__name__}: {error})"]))
    return outcomes


def git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=120)


def head_version(root: Path, chapter: str, strict: bool = False) -> bytes | None:
    """HEAD's copy of notebooks/<chapter>; None when there is none (no git, not a repository,
    untracked). strict: git failing to run raises (for adopt, where None means: safe to reset)."""
    try:
        shown = git(root, "show", f"HEAD:./{NOTEBOOKS}/{chapter}")  # ./: relative to root
    except (OSError, subprocess.SubprocessError):
        if strict:
            raise
        return None
    return shown.stdout if shown.returncode == 0 else None


def adopted(here: bytes, head: bytes):
    """The learner's edited notebooks/ file as their workspace copy, with HEAD's version as its
    origin, so that the next sync merges their work into whatever the course has become."""
    nb = parse(here)
    nb.metadata[META] = origin_record(head, parse(head))
    return nb


def no_head(root: Path) -> str | None:
    """Why there is nothing to adopt (no git, not a repository, no commit yet), or None."""
    try:
        found = git(root, "rev-parse", "--verify", "--quiet", "HEAD").returncode == 0
    except (OSError, subprocess.SubprocessError) as error:
        return f"git could not run ({error})"
    return None if found else f"{root} is not a git repository with a commit"


def adopt_chapter(root: Path, chapter: str) -> Outcome:
    """Save a notebooks/ file that differs from HEAD byte for byte in backups/, and as the
    workspace copy when there is none, with HEAD's version as its origin (so the next sync
    merges it into the new version): resetting notebooks/ afterwards then loses nothing."""
    head = head_version(root, chapter, strict=True)
    here = (root / NOTEBOOKS / chapter).read_bytes()
    if head is None or content_hash(here) == content_hash(head):
        return Outcome(chapter, SAME)  # untracked (not git's to reset), or unchanged
    saved, created = backup(root, chapter, here)
    mine_path, where = root / WORKSPACE / chapter, f"{WORKSPACE}/{BACKUPS}/{saved.name}"
    if mine_path.exists():
        said = f"{NOTEBOOKS}/{chapter} had your edits: they are in {where} ({WORKSPACE}/{chapter} was kept)"
        return Outcome(chapter, UPDATED, [said], saved) if created else Outcome(chapter, SAME)
    try:
        write(mine_path, adopted(here, head))
    except ValueError as error:
        return Outcome(chapter, UPDATED, [f"{NOTEBOOKS}/{chapter} had your edits but {error}; "
                                          f"it is saved as {where}"], saved)
    return Outcome(chapter, UPDATED, [f"{NOTEBOOKS}/{chapter} had your edits: moved to "
                                      f"{WORKSPACE}/{chapter} (a copy is in {where})"], saved)


def adopt(root: Path) -> list[Outcome]:
    """The old layout → my-work/; nothing to do outside a git repository (or before a commit)."""
    if why := no_head(root):
        return [Outcome("", SAME, [f"{why}: nothing to adopt"])]
    outcomes = []
    for chapter in chapters(root):
        try:
            outcomes.append(adopt_chapter(root, chapter))
        except (OSError, subprocess.SubprocessError) as error:
            outcomes.append(Outcome(chapter, ATTENTION, [f"{NOTEBOOKS}/{chapter}: could not be saved ({error})"]))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.workspace",
                                     description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("sync", "bring my-work/ up to date with notebooks/"),
                       ("status", "say what sync would do; change nothing"),
                       ("adopt", "save edits made in notebooks/ (the old layout) into my-work/")):
        commands.add_parser(name, help=text).add_argument(
            "--root", type=Path, default=Path.cwd(), help="the course folder (default: here)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / NOTEBOOKS).is_dir():
        print(f"workspace: no {NOTEBOOKS}/ folder in {root}; run it in the course folder or pass --root",
              file=sys.stderr)
        return 2
    outcomes = {"sync": sync, "status": lambda r: sync(r, True), "adopt": adopt}[args.command](root)
    for outcome in outcomes:
        for line in outcome.lines:
            print(line, file=sys.stderr if outcome.state == ATTENTION else sys.stdout)
    states = {o.state for o in outcomes}
    if args.command == "status" and states <= {SAME}:
        print(f"{WORKSPACE}/ is up to date ({len(outcomes)} chapters)")
    return 1 if ATTENTION in states else 3 if args.command == "status" and states - {SAME} else 0


if __name__ == "__main__":
    sys.exit(main())
