"""Regrades with an audit trail: what changed for each learner since a previous grading, and why.

``--regrade PREVIOUS_RESULTS`` grades into a new ``--out`` (the previous results are kept as
they were) and writes ``regrade.json`` and ``regrade.html`` there: per learner the old and the
new total, and per exercise whose score or outcome moved, the old and the new outcome and the
new reason; and what graded each side (course version, grader version, limits), which is why a
score moves without the submission changing.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from course_utils.grading.reports import read_results, write_atomically

AUDIT_KEYS = ("course_version", "grader_version", "limits", "exam", "sandbox")


def _parts(result: dict) -> dict[tuple[str, str], dict]:
    return {(chapter, name): entry for chapter, notebook in result.get("notebooks", {}).items()
            for name, entry in notebook["exercises"].items()}


def compare(previous: list[dict], current: list[dict]) -> dict:
    before = {r["learner"]: r for r in previous}
    after = {r["learner"]: r for r in current}
    learners = []
    for learner in sorted(set(before) | set(after)):
        old, new = before.get(learner), after.get(learner)
        item = {"learner": learner, "old_total": old["total"] if old else None,
                "new_total": new["total"] if new else None, "changes": []}
        if old and new:
            item["graded_by"] = {key: {"old": old.get(key), "new": new.get(key)}
                                 for key in AUDIT_KEYS if old.get(key) != new.get(key)}
            old_parts, new_parts = _parts(old), _parts(new)
            for key in sorted(set(old_parts) | set(new_parts)):
                a, b = old_parts.get(key), new_parts.get(key)
                if a is None or b is None or (a["score"], a["outcome"]) != (b["score"], b["outcome"]):
                    item["changes"].append({
                        "chapter": key[0], "exercise": key[1],
                        "old": a and {"score": a["score"], "outcome": a["outcome"]},
                        "new": b and {"score": b["score"], "outcome": b["outcome"]},
                        "why": (b or a)["reason"].split("\n")[0][:300]})
        elif old:
            item["note"] = "not in the new grading (no submission found)"
        else:
            item["note"] = "new in this grading"
        learners.append(item)
    moved = [item for item in learners if item["old_total"] != item["new_total"] or item["changes"]]
    return {"learners": learners, "moved": len(moved)}


def report_html(report: dict) -> str:
    e = html.escape
    parts = ["<!doctype html><meta charset='utf-8'><title>Regrade</title>",
             "<style>body{font-family:sans-serif;max-width:64em;margin:2em auto}td,th{padding:3px 8px;"
             "border-bottom:1px solid #ddd;text-align:left;vertical-align:top}table{border-collapse:collapse}</style>",
             f"<h1>Regrade: {report['moved']} of {len(report['learners'])} learners changed</h1>",
             "<table><tr><th>learner</th><th>old</th><th>new</th><th>what changed, and why</th></tr>"]
    for item in report["learners"]:
        lines = [f"{e(c['chapter'])}/{e(c['exercise'])}: {e(str(c['old']))} → {e(str(c['new']))}: {e(c['why'])}"
                 for c in item["changes"]]
        lines += [f"graded by: {e(key)} {e(str(v['old']))} → {e(str(v['new']))}"
                  for key, v in item.get("graded_by", {}).items()]
        if item.get("note"):
            lines.append(e(item["note"]))
        parts.append(f"<tr><td>{e(item['learner'])}</td><td>{item['old_total']}</td><td>{item['new_total']}</td>"
                     f"<td>{'<br>'.join(lines)}</td></tr>")
    parts.append("</table>")
    return "\n".join(parts) + "\n"


def write_regrade(previous: Path, out: Path) -> dict:
    report = compare(read_results(previous), read_results(out))
    report["previous"] = str(previous)
    write_atomically(out / "regrade.json", json.dumps(report, indent=1, sort_keys=True))
    write_atomically(out / "regrade.html", report_html(report))
    return report
