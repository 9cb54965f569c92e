"""What the grader leaves: one JSON per learner, a CSV gradebook, a feedback page per learner.

Every file is written atomically (a temporary file, then a rename), so an interrupted batch
never leaves a half-written result that looks whole.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import tempfile
from pathlib import Path


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


def write_learner(out: Path, result: dict) -> None:
    write_atomically(out / f"{result['learner']}.json", json.dumps(result, indent=1, sort_keys=True))
    write_atomically(out / "feedback" / f"{result['learner']}.html", feedback_page(result))


def read_results(out: Path) -> list[dict]:
    results = []
    for path in sorted(out.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(record, dict) and "learner" in record and "notebooks" in record:
            results.append(record)
    return results


def write_gradebook(out: Path, results: list[dict], columns: list[str]) -> Path:
    """One row per learner, one column per exercise (``chapter/exercise``), and the total."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["learner", *columns, "total"])
    for result in sorted(results, key=lambda r: r["learner"]):
        scores = {}
        for chapter, notebook in result["notebooks"].items():
            for name, entry in notebook["exercises"].items():
                scores[f"{chapter}/{name}"] = entry["score"]
                for part in ("public", "hidden"):
                    if part in entry:
                        scores[f"{chapter}/{name} {part}"] = entry[part]["score"]
        writer.writerow([result["learner"], *(scores.get(c, 0) for c in columns), result["total"]])
    path = out / "gradebook.csv"
    write_atomically(path, buffer.getvalue())
    return path


_OUTCOME_COLOUR = {"passed": "#2e7d32", "not attempted": "#757575"}
HIDDEN_NOT_SHOWN = ("the hidden cases' inputs are not shown (other inputs, shapes and dtypes than "
                    "the public ones, and repeated calls)")


def feedback_page(result: dict) -> str:
    e = html.escape
    parts = [
        "<!doctype html><meta charset='utf-8'>",
        f"<title>Feedback for {e(result['learner'])}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}"
        "td,th{padding:4px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
        "table{border-collapse:collapse;width:100%}</style>",
        f"<h1>{e(result['learner'])}: {result['total']} / {result['max']}</h1>",
    ]
    for problem in result.get("problems", []):
        parts.append(f"<p>⚠ {e(problem)}</p>")
    for chapter, notebook in result["notebooks"].items():
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
