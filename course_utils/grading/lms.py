"""Gradebook files an LMS imports, made from the same results as gradebook.csv.

Canvas (``--lms canvas``) writes ``canvas.csv`` in the layout Canvas's gradebook import reads
(``app/models/gradebook_importer.rb`` in instructure/canvas-lms):

* the header row starts with Student, ID, SIS User ID, SIS Login ID and Section (the importer
  wants "Student" and "ID" first and "Section" last of these), then one column per
  assignment; a second row whose first cell is "Points Possible" gives each one's maximum;
* an assignment column is matched by the id in parentheses at the end of its header
  (``Tensors (48213)``, as Canvas exports it), else by its whole header as a title, else it
  becomes a new assignment. ``--canvas-assignment CHAPTER=HEADER`` names a chapter's column
  as the assignment's header in Canvas; by default it is "PyTorch course: CHAPTER" (a new
  assignment, the first time);
* a learner is matched by ID, else by SIS User ID, else SIS Login ID, else by name. Without a
  roster, SIS Login ID is the learner's folder or file name in SUBMISSIONS and the other ids
  are empty. With ``--canvas-roster EXPORT.csv`` (the gradebook as Canvas exports it) each
  learner is looked up in the roster by the column ``--canvas-match`` names (SIS Login ID by
  default) and gets the roster's Student, ID, SIS User ID, SIS Login ID and Section; a learner
  the roster does not have is left out of the file and named in the command's output;
* an empty cell is no grade. A chapter the learner did not hand in (or handed in unreadable)
  is empty, never 0, so that the import does not write zeros over grades entered by hand.
  Canvas's review page shows an empty cell over an existing grade as that grade removed, so
  where the roster has the assignment's column, such a cell carries the roster's own value
  instead: the import changes nothing there.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from course_utils.exercises import CHAPTERS
from course_utils.grading.reports import POINTS_POSSIBLE, assignment_of, counted, handed_in, write_atomically

CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
ASSIGNMENT_PREFIX = "PyTorch course: "
DEFAULT_MATCH = "SIS Login ID"
# How Canvas reads an assignment header: "Title (id)" (Assignment.title_and_id).
TITLE_AND_ID = re.compile(r"\A(.*)\s\((\d+)\)\Z")


class CanvasProblem(ValueError):
    """A Canvas option or roster the grader cannot use; the message says why."""


@dataclass
class CanvasOptions:
    """What the instructor told the grader about their Canvas course."""

    assignments: dict[str, str] = field(default_factory=dict)  # chapter → the assignment's header
    roster: Path | None = None  # a gradebook CSV exported from Canvas
    match: str = DEFAULT_MATCH  # the roster column that the submission names are


@dataclass
class LmsFile:
    """What ``write_lms`` wrote, and what the instructor should read about it."""

    path: Path
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------
def _assignment(text: str) -> tuple[str, str]:
    chapter, equals, header = text.partition("=")
    chapter, header = chapter.strip(), header.strip()
    if not equals or not header:
        raise argparse.ArgumentTypeError('write it as CHAPTER="HEADER", e.g. 01_tensors="Tensors (48213)"')
    if chapter not in CHAPTERS:
        raise argparse.ArgumentTypeError(f"{chapter!r} is not a chapter; the chapters are {', '.join(CHAPTERS)}")
    return chapter, header


def add_canvas_options(parser: argparse.ArgumentParser) -> None:
    """The options that say how canvas.csv meets the instructor's Canvas course."""
    parser.add_argument(
        "--canvas-assignment", type=_assignment, action="append", default=[], metavar='CHAPTER="HEADER"',
        help="with --lms canvas: name CHAPTER's column exactly as the assignment's column header in "
             "Canvas (as a Canvas export shows it, e.g. 01_tensors=\"Tensors (48213)\": Canvas matches "
             "the id in parentheses), so that the import fills that assignment instead of making a new "
             "one (repeatable). Default: \"PyTorch course: CHAPTER\", or the roster's column of that title")
    parser.add_argument(
        "--canvas-roster", type=Path, metavar="EXPORT.csv",
        help="with --lms canvas: a gradebook CSV exported from Canvas; each learner gets the Student, ID, "
             "SIS User ID, SIS Login ID and Section of their row in it, and learners not in it are listed "
             "and left out of canvas.csv")
    parser.add_argument(
        "--canvas-match", default=DEFAULT_MATCH, metavar="COLUMN",
        help="with --canvas-roster: the roster column that the submission folder or file names are: "
             "SIS Login ID (a login, or an email-like login), SIS User ID, ID or Student "
             "(default: %(default)s)")


def canvas_options(args: argparse.Namespace) -> CanvasOptions:
    """The parsed options as a ``CanvasOptions``."""
    return CanvasOptions(dict(args.canvas_assignment), args.canvas_roster, args.canvas_match)


def canvas_option_problem(args: argparse.Namespace) -> str | None:
    """Why the Canvas options cannot be used (checked before grading starts), or None."""
    given = args.canvas_assignment or args.canvas_roster or args.canvas_match != DEFAULT_MATCH
    if given and args.lms != "canvas":
        return "--canvas-assignment, --canvas-roster and --canvas-match go with --lms canvas"
    if args.canvas_match != DEFAULT_MATCH and args.canvas_roster is None:
        return "--canvas-match says which roster column to match: give --canvas-roster too"
    if args.canvas_roster is not None:
        try:
            Roster.read(args.canvas_roster, args.canvas_match)
        except CanvasProblem as problem:
            return str(problem)
    return None


# --------------------------------------------------------------------------------------------
# The roster: a gradebook exported from Canvas
# --------------------------------------------------------------------------------------------
def _key(text: str) -> str:
    """Names, logins and emails compare without case and extra spaces."""
    return " ".join(text.split()).casefold()


def _is_student_row(row: dict) -> bool:
    """Not the "Points Possible" row, nor the "Muted"/"Manual Posting" row of an export."""
    first = (row.get("Student") or "").strip()
    if first == POINTS_POSSIBLE:
        return False
    cells = [(value or "").strip() for value in row.values() if isinstance(value, str)]
    return not all(re.fullmatch(r"(?i)(muted|manual posting.*)?", cell) for cell in cells)


@dataclass
class Roster:
    """The students of a Canvas gradebook export, found by the column that names them."""

    columns: list[str]
    rows: list[dict]
    match: str

    @classmethod
    def read(cls, path: Path, match: str) -> "Roster":
        try:
            with open(path, newline="", encoding="utf-8-sig") as file:
                reader = csv.DictReader(file)
                columns = list(reader.fieldnames or [])
                rows = [row for row in reader if _is_student_row(row)]
        except (OSError, UnicodeDecodeError, csv.Error) as error:
            raise CanvasProblem(f"cannot read the roster {path}: {error}") from None
        if not {"Student", "ID"} <= set(columns):
            raise CanvasProblem(f"the roster {path} is not a Canvas gradebook export: its first row has no "
                                "Student and ID columns")
        if match not in columns:
            raise CanvasProblem(f"--canvas-match {match!r}: the roster {path} has no such column; "
                                f"its columns start {', '.join(columns[:6])}")
        return cls(columns, rows, match)

    def find(self, learner: str) -> tuple[dict | None, str]:
        """The roster row of ``learner`` (a submission's name), or None and why not."""
        found = [row for row in self.rows if _key(row.get(self.match) or "") == _key(learner)]
        if not found and self.match == "SIS Login ID":
            found = self._by_login_user(learner)
        if len(found) == 1:
            return found[0], ""
        if found:
            return None, f"{learner} ({counted(len(found), 'roster row')} with that {self.match})"
        return None, learner

    def _by_login_user(self, learner: str) -> list[dict]:
        """Where one of the two is email-like: the login that is the other's part before "@"."""
        def user(login: str) -> str:
            return _key(login).split("@", 1)[0]

        return [row for row in self.rows
                if ("@" in learner) != ("@" in (row.get(self.match) or ""))
                and user(row.get(self.match) or "") == user(learner)]

    def column_for(self, header: str) -> str | None:
        """The roster's column for the assignment ``header``: the same header, else the same id."""
        if header in self.columns:
            return header
        wanted = TITLE_AND_ID.match(header)
        same_id = [c for c in self.columns if wanted and (m := TITLE_AND_ID.match(c)) and m.group(2) == wanted.group(2)]
        return same_id[0] if len(same_id) == 1 else None

    def column_titled(self, title: str) -> str | None:
        """The roster's one column whose title (the header without its id) is ``title``."""
        titled = [c for c in self.columns if (m := TITLE_AND_ID.match(c)) and m.group(1) == title]
        return titled[0] if len(titled) == 1 else None


# --------------------------------------------------------------------------------------------
# canvas.csv
# --------------------------------------------------------------------------------------------
def _assignment_headers(chapters: list[str], options: CanvasOptions, roster: Roster | None,
                        notes: list[str]) -> dict[str, str]:
    """Each chapter's column header: as given, else the roster's column of the default title."""
    headers = {}
    for chapter in chapters:
        default = f"{ASSIGNMENT_PREFIX}{chapter}"
        header = options.assignments.get(chapter)
        if header is None and roster is not None:
            header = roster.column_titled(default)
            if header is not None:
                notes.append(f"{chapter}: the roster's column {header!r}")
        headers[chapter] = header or default
    return headers


def _identity(learner: str, row: dict | None) -> list[str]:
    if row is None:
        return [learner, "", "", learner, ""]
    return [(row.get(column) or "").strip() for column in CANVAS_IDENTITY]


def _chapter_cell(result: dict, chapter: str, roster_row: dict | None, roster_column: str | None):
    """The score of a chapter handed in; else the roster's value (no change), else blank."""
    notebook = result["notebooks"].get(chapter)
    if handed_in(notebook):
        return notebook["score"]
    if roster_row is not None and roster_column is not None:
        return (roster_row.get(roster_column) or "").strip()
    return ""


def canvas_csv(results: list[dict], options: CanvasOptions | None = None) -> tuple[str, list[str]]:
    """The text of canvas.csv, and the notes the instructor should read (learners left out)."""
    options = options or CanvasOptions()
    roster = Roster.read(options.roster, options.match) if options.roster is not None else None
    unknown = set(options.assignments) - set(CHAPTERS)
    if unknown:
        raise CanvasProblem(f"--canvas-assignment for {', '.join(sorted(unknown))}: not a chapter")
    notes: list[str] = []
    # A chapter nobody handed in (the stand-in of a learner who handed in nothing) gets no
    # column: Canvas would make it a new, empty assignment.
    chapters = [c for c in CHAPTERS if any(handed_in(r["notebooks"].get(c)) for r in results)]
    headers = _assignment_headers(chapters, options, roster, notes)
    roster_columns = {c: roster.column_for(headers[c]) for c in chapters} if roster else {}
    maxima = assignment_of(results)  # one maximum per chapter, as the gradebook's Points Possible
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CANVAS_IDENTITY + [headers[c] for c in chapters])
    writer.writerow([POINTS_POSSIBLE, "", "", "", ""] + [maxima[c] for c in chapters])
    rows, left_out, shared = _roster_rows(results, roster)
    for result in sorted(results, key=lambda r: r["learner"]):
        if roster is not None and result["learner"] not in rows:
            continue
        row = rows.get(result["learner"])
        cells = [_chapter_cell(result, c, row, roster_columns.get(c)) for c in chapters]
        writer.writerow(_identity(result["learner"], row) + cells)
    if left_out:
        notes.append(f"{counted(len(left_out), 'learner')} not in the roster {options.roster} by "
                     f"{options.match}, left out of canvas.csv: {', '.join(left_out)}")
    if shared:
        notes.append(f"learners that the roster finds in one row, left out of canvas.csv: {'; '.join(shared)}")
    return buffer.getvalue(), notes


def _roster_rows(results: list[dict], roster: Roster | None) -> tuple[dict[str, dict], list[str], list[str]]:
    """Each learner's roster row; the learners the roster lacks (with why); and the groups of
    learners that one roster row would take (both left out: Canvas would take either)."""
    if roster is None:
        return {}, [], []
    rows, left_out = {}, []
    for result in sorted(results, key=lambda r: r["learner"]):
        row, why_not = roster.find(result["learner"])
        if row is None:
            left_out.append(why_not)
        else:
            rows[result["learner"]] = row
    by_row: dict[int, list[str]] = {}
    for learner, row in rows.items():
        by_row.setdefault(id(row), []).append(learner)
    shared = []
    for learners in by_row.values():
        if len(learners) > 1:
            shared.append(f"{' and '.join(learners)} ({(rows[learners[0]].get('Student') or '').strip()})")
            for learner in learners:
                del rows[learner]
    return rows, left_out, shared


def write_lms(out: Path, results: list[dict], lms: str, canvas: CanvasOptions | None = None) -> LmsFile:
    """Write the LMS's import file into ``out``; ``CanvasProblem`` if the roster cannot be used."""
    if lms != "canvas":
        raise ValueError(f"unknown LMS {lms!r}")
    text, notes = canvas_csv(results, canvas)
    path = out / "canvas.csv"
    write_atomically(path, text)
    return LmsFile(path, notes)
