"""What the grader leaves: one JSON per learner, a CSV gradebook, a feedback page per learner.

Every file is written atomically (a temporary file, then a rename), so an interrupted batch
never leaves a half-written result that looks whole.

A learner's JSON is written with sorted keys (the same result, the same bytes), which would
put each notebook's exercises in alphabetical order; so each notebook also records its
exercises' order in the course notebook (``"order"``), and ``read_results`` gives them back in
that order. A page or gradebook made from results read back (``merge``) is then the one a
single run writes. Results written before ``"order"`` existed get the order in which the
course's exercise module defines them.

Every learner of a run is graded out of one maximum, the assignment's: ``"assignment"`` (each
chapter the class handed in, with its maximum) and ``"out_of"`` (their sum), set by the run
(``out_of_assignment``); a chapter a learner did not hand in counts 0 of its maximum. ``"max"``
stays what the chapters graded for that learner could score. The console, the feedback page,
the gradebook's "Points Possible" and canvas.csv show the assignment's maximum.
"""

from __future__ import annotations

import csv
import functools
import html
import io
import json
import os
import tempfile
from pathlib import Path

from course_utils.exercises import CHAPTERS

# The gradebook's second row, as in Canvas's: each column's maximum.
POINTS_POSSIBLE = "Points Possible"


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as file:
            file.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def counted(number: int, word: str) -> str:
    """``1 learner``, ``2 learners``: a count a person reads."""
    return f"{number} {word}" if number == 1 else f"{number} {word}s"


def shortened(text: str, limit: int = 300) -> str:
    """The first line of ``text``, cut at a word boundary to at most ``limit`` characters, with
    "…" where something was cut: a message shown in a table stays readable."""
    line = text.split("\n", 1)[0].strip()
    if len(line) <= limit:
        return line
    cut = line[:limit - 1]
    if " " in cut and not line[limit - 1].isspace():
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:.-") + "…"


# --------------------------------------------------------------------------------------------
# The order of chapters and exercises
# --------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _defined_order(chapter: str) -> tuple[str, ...]:
    """The exercises of ``chapter`` in the order its module defines them (the notebook's order)."""
    from course_utils.exercises import chapter_exercises

    if chapter not in CHAPTERS:
        return ()
    return tuple(exercise.name for exercise in chapter_exercises(CHAPTERS[chapter]))


def exercise_order(chapter: str, notebook: dict) -> list[str]:
    """The names of a notebook's exercises in course order: its recorded ``"order"`` where it
    has one that names them all, else the module's order (results from before ``"order"``)."""
    names = list(notebook["exercises"])
    recorded = notebook.get("order")
    if isinstance(recorded, list) and sorted(recorded) == sorted(names):
        return list(recorded)
    known = [name for name in _defined_order(chapter) if name in notebook["exercises"]]
    return known + [name for name in names if name not in known]


def in_course_order(result: dict) -> dict:
    """``result`` with its chapters in course order and each one's exercises in notebook order."""
    notebooks = result.get("notebooks", {})
    ordered = {}
    for chapter in chapter_order(notebooks):
        notebook = dict(notebooks[chapter])
        names = exercise_order(chapter, notebook)
        notebook["exercises"] = {name: notebook["exercises"][name] for name in names}
        notebook["order"] = names
        ordered[chapter] = notebook
    return {**result, "notebooks": ordered}


def chapter_order(chapters) -> list[str]:
    """``chapters`` in course order; any the course does not know after them, sorted."""
    return sorted(chapters, key=lambda c: (list(CHAPTERS).index(c) if c in CHAPTERS else len(CHAPTERS), c))


def assignment_of(results: list[dict], *more: dict) -> dict[str, int]:
    """The assignment the ``results`` were graded as: chapter → its maximum, in course order.

    Every chapter some result has (at the largest maximum it has there), and every chapter a
    result's ``"assignment"``, or one of ``more`` (what a run recorded), says the assignment has,
    handed in or not."""
    maxima: dict[str, int] = {}
    for assignment in [*(r.get("assignment") or {} for r in results), *more]:
        for chapter, most in assignment.items():
            maxima[chapter] = max(maxima.get(chapter, 0), int(most))
    for result in results:
        for chapter, notebook in result.get("notebooks", {}).items():
            maxima[chapter] = max(maxima.get(chapter, 0), notebook["max"])
    return {chapter: maxima[chapter] for chapter in chapter_order(maxima)}


def out_of_assignment(result: dict, assignment: dict[str, int] | None) -> dict:
    """``result`` graded out of ``assignment`` (chapter → maximum): its ``"assignment"`` and
    ``"out_of"`` say so. A chapter of the result the assignment lacks is added at the result's
    own maximum. ``None``: the result is out of its own chapters alone (both keys removed)."""
    if assignment is None:
        result.pop("assignment", None)
        result.pop("out_of", None)
        return result
    maxima = dict(assignment)
    for chapter, notebook in result.get("notebooks", {}).items():
        maxima.setdefault(chapter, notebook["max"])
    result["assignment"] = {chapter: maxima[chapter] for chapter in chapter_order(maxima)}
    result["out_of"] = sum(maxima.values())
    return result


def out_of(result: dict) -> int:
    """The most ``result`` could score: the assignment's maximum where the run recorded one."""
    return result.get("out_of", result["max"])


def handed_in(notebook: dict | None) -> bool:
    """Whether a chapter was graded from a notebook the learner handed in for it.

    Not when the chapter is absent, nor when its notebook is the stand-in the grader writes
    where nothing could be graded (no notebook handed in, an unreadable file, a file of no
    chapter): there every exercise is "missing" for the notebook's own problem.
    """
    if notebook is None:
        return False
    problems = set(notebook.get("problems", []))
    entries = list(notebook["exercises"].values())
    return not entries or not all(e["outcome"] == "missing" and e["reason"] in problems for e in entries)


def write_learner(out: Path, result: dict) -> None:
    """The learner's JSON (with each notebook's ``"order"``) and feedback page."""
    ordered = in_course_order(result)
    write_atomically(out / f"{result['learner']}.json", json.dumps(ordered, indent=1, sort_keys=True))
    write_atomically(out / "feedback" / f"{result['learner']}.html", feedback_page(ordered))


def read_results(out: Path, learners=None) -> list[dict]:
    """The learners' results in ``out``, sorted by learner, each in course order; with
    ``learners`` (their ids), theirs alone (a learner without a result file is left out)."""
    results = []
    paths = sorted(out.glob("*.json")) if learners is None else [out / f"{name}.json" for name in sorted(learners)]
    for path in paths:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(record, dict) and "learner" in record and "notebooks" in record:
            results.append(in_course_order(record))
    return results


# --------------------------------------------------------------------------------------------
# The gradebook
# --------------------------------------------------------------------------------------------
def _column_parts(chapter: str, name: str, entry: dict) -> dict[str, dict]:
    """The gradebook columns of one exercise and the part of its result each shows: the
    exercise, and in an exam its public and hidden parts too."""
    parts = {f"{chapter}/{name}": entry}
    parts.update({f"{chapter}/{name} {part}": entry[part] for part in ("public", "hidden") if part in entry})
    return parts


def _scores(result: dict) -> dict[str, int]:
    """Each gradebook column's score in ``result``, for the chapters it handed in."""
    scores = {}
    for chapter, notebook in result["notebooks"].items():
        if handed_in(notebook):
            for name, entry in notebook["exercises"].items():
                scores.update({column: part["score"] for column, part in _column_parts(chapter, name, entry).items()})
    return scores


def points_possible(results: list[dict], columns: list[str]) -> list:
    """The most each column can score (blank where no result has it), then the assignment's
    maximum (``assignment_of``): their sum, and the maximum every learner's total is out of."""
    best: dict[str, int] = {}
    for result in results:
        for chapter, notebook in result["notebooks"].items():
            for name, entry in notebook["exercises"].items():
                for column, part in _column_parts(chapter, name, entry).items():
                    best[column] = max(best.get(column, 0), part["max"])
    row = [best.get(column, "") for column in columns]
    return [*row, max(sum(value for value in row if value != ""), sum(assignment_of(results).values()))]


def write_gradebook(out: Path, results: list[dict], columns: list[str]) -> Path:
    """One row per learner, one column per exercise (``chapter/exercise``), and the total.

    The second row, "Points Possible", gives each column's maximum (as Canvas's gradebook
    does). A chapter the learner did not hand in (or handed in unreadable) is blank, not 0: it
    was not graded; the total still counts it as 0.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["learner", *columns, "total"])
    writer.writerow([POINTS_POSSIBLE, *points_possible(results, columns)])
    for result in sorted(results, key=lambda r: r["learner"]):
        scores = _scores(result)
        writer.writerow([result["learner"], *(scores.get(c, "") for c in columns), result["total"]])
    path = out / "gradebook.csv"
    write_atomically(path, buffer.getvalue())
    return path


# What the problems of a result say when the grader itself failed on that learner (batch.py).
GRADER_FAILED_SIGNS = ("the grader failed on this learner", "the grading worker died")


def grader_failed(result: dict) -> bool:
    """Whether grading crashed on this learner (then nothing in the result is the learner's)."""
    return any(sign in problem for problem in result.get("problems", []) for sign in GRADER_FAILED_SIGNS)


_OUTCOME_COLOUR = {"passed": "#2e7d32", "not attempted": "#757575"}
HIDDEN_NOT_SHOWN = ("the hidden cases' inputs are not shown (other inputs, shapes and dtypes than "
                    "the public ones, and repeated calls)")


def feedback_page(result: dict) -> str:
    """A learner's page: every chapter in course order, every exercise in notebook order; a
    chapter of the assignment that was not graded, as 0 of its maximum."""
    e = html.escape
    result = in_course_order(result)
    parts = [
        "<!doctype html><meta charset='utf-8'>",
        f"<title>Feedback for {e(result['learner'])}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}"
        "td,th{padding:4px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
        "table{border-collapse:collapse;width:100%}</style>",
        f"<h1>{e(result['learner'])}: {result['total']} / {out_of(result)}</h1>",
    ]
    for problem in result.get("problems", []):
        parts.append(f"<p>⚠ {e(problem)}</p>")
    assignment = result.get("assignment") or {}
    for chapter in chapter_order({*result["notebooks"], *assignment}):
        if chapter not in result["notebooks"]:
            why = ("the grader failed on your submission (above)" if grader_failed(result)
                   else "no notebook of this chapter was handed in")
            parts.append(f"<h2>{e(chapter)}: 0 / {assignment[chapter]}</h2>")
            parts.append(f"<p>⚠ Not graded: {why}; it counts 0 towards your total.</p>")
            continue
        notebook = result["notebooks"][chapter]
        parts.append(f"<h2>{e(chapter)}: {notebook['score']} / {notebook['max']}</h2>")
        for problem in notebook.get("problems", []):
            parts.append(f"<p>⚠ {e(problem)}</p>")
        parts.append("<table><tr><th>exercise</th><th>score</th><th>result</th><th>why</th></tr>")
        for name, entry in notebook["exercises"].items():
            rows = [(name, entry)]
            if "public" in entry:
                hidden = dict(entry["hidden"])
                if not result.get("reveal_hidden"):
                    hidden["reason"] = HIDDEN_NOT_SHOWN
                rows = [(f"{name}: public cases", entry["public"]), (f"{name}: hidden cases", hidden)]
            for label, part in rows:
                colour = _OUTCOME_COLOUR.get(part["outcome"], "#c62828")
                reason = e(part["reason"]).replace("\n", "<br>")
                parts.append(
                    f"<tr><td>{e(label)}</td><td>{part['score']} / {part['max']}</td>"
                    f"<td style='color:{colour}'>{e(part['outcome'])}</td><td>{reason}</td></tr>"
                )
        parts.append("</table>")
    parts.append(f"<p><small>graded with {e(result['sandbox'])} sandbox</small></p>")
    return "\n".join(parts) + "\n"
