"""Carrying a learner's work into a new version of a course notebook, by ids, not by position.

The course notebook of a chapter changes (prose fixed, a check made stricter, an exercise added
or dropped) while a learner has typed into their copy of the old one. Diffing the two files
line by line would conflict on every output and execution count, so the merge works on cells:
answer cells match by their nbgrader ``grade_id`` (as the grader matches them), everything else
by nbformat 4.5 cell id, against the record of the version the copy was made from (the old
version's cell ids and source hashes, kept in the copy's metadata). Nothing here touches files.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import nbformat

META = "pytorch_course"  # the notebook metadata key of the record
KEPT = {  # what a merge counts, in the order the learner reads it: singular → plural
    "answer": "answers", "cell of your own": "cells of your own",
    "edit to a course cell": "edits to course cells",
    "answer to a removed exercise (at the end)": "answers to removed exercises (at the end)",
}


@dataclass
class Merge:
    """The rebuilt notebook; what of the learner's work it kept; edits it could not carry."""

    notebook: nbformat.NotebookNode
    kept: Counter = field(default_factory=Counter)
    lost_edits: list[str] = field(default_factory=list)
    # Answer cells the learner had deleted: they come back as the course's starting code.
    restored: list[str] = field(default_factory=list)
    # Answers kept over a starting code the course changed: the new one is not in the copy.
    new_templates: list[str] = field(default_factory=list)
    # The course's cells come without their outputs: how many had some in the learner's copy.
    outputs_cleared: int = 0
    checks_cleared: int = 0  # of those, check cells: their ✅ are still in the progress file


def content_hash(data: bytes) -> str:
    """Names a course version; CRLF is normalised so a Windows checkout is the same version."""
    return hashlib.sha256(data.replace(b"\r\n", b"\n")).hexdigest()


def cell_hash(cell) -> str:
    """Short hash of a cell's source: enough to tell whether the learner or the course edited it."""
    return hashlib.sha256(str(cell.get("source", "")).encode("utf-8")).hexdigest()[:16]


def parse(data: bytes) -> nbformat.NotebookNode:
    """A notebook, without nbformat's repairs (they invent random ids); ValueError says why not."""
    try:
        raw = json.loads(data)
    except json.JSONDecodeError as error:
        raise ValueError(f"is not valid JSON (line {error.lineno}: {error.msg})") from None
    except ValueError:  # not UTF-8 (nor UTF-16/32)
        raise ValueError("is not a text file") from None
    cells = raw.get("cells") if isinstance(raw, dict) else None
    if not isinstance(cells, list) or raw.get("nbformat") != 4 or not all(isinstance(c, dict) for c in cells):
        raise ValueError("is not an nbformat 4 notebook")
    raw["metadata"] = raw["metadata"] if isinstance(raw.get("metadata"), dict) else {}
    from nbformat.v4 import to_notebook_json

    return to_notebook_json(raw)  # joins sources stored as lists of lines


def section(node, key: str) -> dict:
    """``node.metadata[key]`` when it is a dict, else {}: a learner's file may hold anything."""
    value = node.get("metadata", {}).get(key)
    return value if isinstance(value, dict) else {}


def origin_record(course_bytes: bytes, course) -> dict:
    """Stored in the workspace copy: the course version it came from and that version's cells,
    so that a later merge tells the learner's cells and edits from the course's own changes."""
    cells = {c["id"]: cell_hash(c) for c in course.cells if isinstance(c.get("id"), str)}
    return {"origin": content_hash(course_bytes), "origin_cells": cells}


def with_record(course, record: dict) -> nbformat.NotebookNode:
    nb = copy.deepcopy(course)
    nb.metadata[META] = record
    return nb


def pick_answers(mine, course) -> dict[str, object]:
    """grade_id → the learner's answer cell. Unlike the grader's last-wins ``answer_sources``,
    the cell that keeps the course's id wins, so a duplicated answer cell hides nothing."""
    course_ids = {section(c, "nbgrader").get("grade_id"): c.get("id") for c in course.cells}
    picked: dict[str, object] = {}
    for cell in mine.cells:
        meta = section(cell, "nbgrader")
        grade_id = meta.get("grade_id")
        if meta.get("solution") and isinstance(grade_id, str) and (
                grade_id not in picked or cell.get("id") == course_ids.get(grade_id)):
            picked[grade_id] = cell
    return picked


def label(cell) -> str:
    """A cell as a learner recognises it: its first line, without markdown's leading #."""
    lines = str(cell.get("source", "")).splitlines()
    first = next((line.strip().lstrip("#").strip() for line in lines if line.strip()), "")
    return f'"{first[:40]}{"…" if len(first) > 40 else ""}"'


def merge(mine, course, record: dict) -> Merge:
    """The new course notebook with the learner's work carried in. Outputs: the learner's own
    cells keep theirs; the course's cells come as the course ships them (re-run them anyway)."""
    from course_utils.grading.assemble import course_answer_ids

    old = section(mine, META).get("origin_cells")
    old = old if isinstance(old, dict) else None  # None: origin unknown, so keep all we can
    result = Merge(with_record(course, record))
    out, kept = result.notebook, result.kept
    course_cells = {c.get("id"): c for c in out.cells}

    def edited(cell) -> bool:
        return old is None or old.get(cell.get("id")) != cell_hash(cell)

    answers, matched = pick_answers(mine, course), {}
    for cell in out.cells:
        meta = section(cell, "nbgrader")
        if meta.get("solution") and meta.get("grade_id") in answers:
            theirs = answers[meta["grade_id"]]
            matched[id(theirs)] = cell.get("id")
            if edited(theirs) and theirs.get("source", "") != cell.source:
                if old is not None and old.get(cell.get("id")) not in (None, cell_hash(cell)):
                    result.new_templates.append(meta["grade_id"])
                cell.source = theirs.get("source", "")
                kept["answer"] += 1
        elif meta.get("solution") and old is not None and cell.get("id") not in old:
            kept["new exercise"] += 1
        elif meta.get("solution") and old is not None:
            result.restored.append(meta.get("grade_id") or label(cell))
    live, known = course_answer_ids(out), set(course_cells if old is None else old)
    runs: dict[object, list] = {}  # the learner's cells, by the id of the course cell before them
    removed, anchor = [], None
    for cell in mine.cells:
        cell_id, meta = cell.get("id"), section(cell, "nbgrader")
        if id(cell) in matched:
            anchor = matched[id(cell)]
        elif meta.get("solution") and meta.get("grade_id") not in live:
            anchor = cell_id
            if edited(cell):  # an untouched stub is nobody's work: it goes
                removed.append(cell)
        elif cell_id in known and cell_id is not None:
            anchor = cell_id
            if edited(cell):
                carry_edit(cell, course_cells.get(cell_id), old, result)
        else:
            runs.setdefault(anchor, []).append(cell)
            kept["cell of your own"] += 1
    mine_by_id = {c.get("id"): c for c in mine.cells if c.get("cell_type") == "code"}
    cleared = [cell for cell in out.cells
               if cell.get("cell_type") == "code" and not cell.get("outputs")
               and mine_by_id.get(cell.get("id"), {}).get("outputs")]
    result.outputs_cleared = len(cleared)
    result.checks_cleared = sum(1 for cell in cleared if section(cell, "nbgrader").get("grade"))
    out.cells = place(out.cells, removed, runs, result)
    return result


def carry_edit(theirs, cell, old, result: Merge) -> None:
    """A course cell the learner edited keeps their version if the course left it alone;
    otherwise the course's version wins and the edit is reported (it stays in the backup)."""
    if cell is not None and theirs.get("source", "") == cell.source:
        return
    if cell is not None and old is not None and old.get(cell.get("id")) == cell_hash(cell):
        cell.source = theirs.get("source", "")
        if "attachments" in theirs and cell.cell_type == theirs.get("cell_type"):
            cell["attachments"] = theirs["attachments"]
        result.kept["edit to a course cell"] += 1
    else:
        result.lost_edits.append(label(theirs))


def place(course_cells: list, removed: list, runs: dict, result: Merge) -> list:
    """Course cells in course order, each followed by the learner's cells that followed it;
    then answers to removed exercises, each after a note; then cells whose anchor is gone."""
    from nbformat.v4 import new_markdown_cell

    cells = list(runs.pop(None, []))

    def emit(cell) -> None:
        cells.append(cell)
        cells.extend(runs.pop(cell.get("id"), []))

    for cell in course_cells:
        emit(cell)
    for cell in removed:
        grade_id = section(cell, "nbgrader")["grade_id"]
        cells.append(new_markdown_cell(
            f"**Kept from an earlier version of this chapter.** The exercise `{grade_id}` is no "
            "longer in the course, so nothing checks the answer below; it is kept so that "
            "nothing you wrote is lost.", id=f"kept-note-{grade_id}"[:64]))
        cell = copy.deepcopy(cell)
        del cell.metadata["nbgrader"]  # no longer an answer that a grader would look for
        emit(cell)
        result.kept["answer to a removed exercise (at the end)"] += 1
    for rest in runs.values():
        cells.extend(rest)
    give_way(cells, course_cells)
    return cells


def give_way(cells: list, course_cells: list) -> None:
    """Unique, valid ids: the course keeps its own; a clashing learner cell gets a new one,
    derived from its source (not random), so that the same inputs give the same bytes."""
    taken, course = {c.get("id") for c in course_cells}, {id(c) for c in course_cells}
    for cell in (c for c in cells if id(c) not in course):
        cell_id = cell.get("id")
        if not isinstance(cell_id, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", cell_id) or cell_id in taken:
            base = "mine-" + cell_hash(cell)[:8]
            cell_id = cell["id"] = next(f"{base}-{n}" for n in range(1, len(cells) + 2)
                                        if f"{base}-{n}" not in taken)
        taken.add(cell_id)

