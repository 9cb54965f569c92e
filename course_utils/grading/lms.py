"""Gradebook files an LMS imports, made from the same results as gradebook.csv.

Canvas (``--lms canvas``): Canvas's gradebook import reads the columns Student, ID, SIS User ID,
SIS Login ID and Section, then one column per assignment; a second row, "Points Possible",
gives each assignment's maximum. Each graded chapter is an assignment named
"PyTorch course: CHAPTER"; a learner is matched on SIS Login ID, which is the learner's folder
or file name in SUBMISSIONS (name them by login, or edit the column before importing).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from course_utils.exercises import CHAPTERS
from course_utils.grading.reports import write_atomically

CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
ASSIGNMENT_PREFIX = "PyTorch course: "


def canvas_csv(results: list[dict]) -> str:
    chapters = [c for c in CHAPTERS if any(c in r["notebooks"] for r in results)]
    maxima = {c: max(r["notebooks"][c]["max"] for r in results if c in r["notebooks"]) for c in chapters}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CANVAS_IDENTITY + [f"{ASSIGNMENT_PREFIX}{c}" for c in chapters])
    writer.writerow(["Points Possible", "", "", "", ""] + [maxima[c] for c in chapters])
    for result in sorted(results, key=lambda r: r["learner"]):
        scores = [result["notebooks"][c]["score"] if c in result["notebooks"] else 0 for c in chapters]
        writer.writerow([result["learner"], "", "", result["learner"], ""] + scores)
    return buffer.getvalue()


def write_lms(out: Path, results: list[dict], lms: str) -> Path:
    if lms != "canvas":
        raise ValueError(f"unknown LMS {lms!r}")
    path = out / "canvas.csv"
    write_atomically(path, canvas_csv(results))
    return path
