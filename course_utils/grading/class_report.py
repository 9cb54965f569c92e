"""What a class got wrong: ``RESULTS/class_report.json`` and ``class_report.html``.

For each exercise: the share of learners who passed, failed (by mistake id, most common first,
with the message a learner saw), did not attempt, or whose code raised; per chapter a stacked
bar chart of that split; the exercises the class found hardest. Made from the learners'
results alone, so a merged set of shards gives the same report as one run.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from pathlib import Path

from course_utils.grading.reports import write_atomically

GROUPS = ("passed", "failed", "not attempted", "raised")


def _group(outcome: str) -> str:
    if outcome == "passed":
        return "passed"
    if outcome in ("not attempted", "missing"):
        return "not attempted"
    if outcome in ("your code raised", "timeout", "kernel died"):
        return "raised"
    return "failed"


def _graded_part(entry: dict) -> dict:
    """The part of an exercise's result that decides it: the hidden cases in an exam."""
    return entry.get("hidden", entry)


def class_summary(results: list[dict]) -> dict:
    """Plain data: per chapter and exercise, the counts and the mistakes, most common first."""
    chapters: dict[str, dict] = {}
    for result in sorted(results, key=lambda r: r["learner"]):
        for chapter, notebook in result["notebooks"].items():
            for name, entry in notebook["exercises"].items():
                part = _graded_part(entry)
                slot = chapters.setdefault(chapter, {}).setdefault(
                    name, {"learners": 0, "counts": Counter(), "mistakes": Counter(), "said": {}})
                slot["learners"] += 1
                group = _group(part["outcome"])
                slot["counts"][group] += 1
                if group != "passed":
                    mistake = part.get("mistake") or part["outcome"].replace(" ", "-")
                    slot["mistakes"][mistake] += 1
                    slot["said"].setdefault(mistake, part["reason"].split("\n")[0][:300])
    summary = {"learners": len(results), "chapters": {}, "hardest": []}
    rates = []
    for chapter in sorted(chapters):
        summary["chapters"][chapter] = {}
        for name, slot in chapters[chapter].items():
            learners = slot["learners"]
            shares = {group: round(slot["counts"][group] / learners, 4) for group in GROUPS}
            mistakes = [{"mistake": mistake, "learners": count, "share": round(count / learners, 4),
                         "message": slot["said"][mistake]}
                        for mistake, count in sorted(slot["mistakes"].items(), key=lambda kv: (-kv[1], kv[0]))]
            summary["chapters"][chapter][name] = {"learners": learners, "shares": shares, "mistakes": mistakes}
            rates.append((shares["passed"], chapter, name))
    summary["hardest"] = [{"chapter": chapter, "exercise": name, "passed": rate}
                          for rate, chapter, name in sorted(rates)[:5]]
    return summary


def _chapter_chart(exercises: dict) -> str:
    """A horizontal stacked bar per exercise, as a base64 PNG."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    names = list(exercises)
    colours = {"passed": "#2e7d32", "failed": "#c62828", "not attempted": "#9e9e9e", "raised": "#ef6c00"}
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.0))
    left = [0.0] * len(names)
    for group in GROUPS:
        widths = [exercises[name]["shares"][group] * 100 for name in names]
        ax.barh(names, widths, left=left, color=colours[group], label=group)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of learners")
    ax.invert_yaxis()
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, frameon=False, fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def report_html(summary: dict) -> str:
    e = html.escape
    parts = ["<!doctype html><meta charset='utf-8'><title>Class report</title>",
             "<style>body{font-family:sans-serif;max-width:64em;margin:2em auto;color:#222}"
             "td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
             "table{border-collapse:collapse}</style>",
             f"<h1>Class report: {summary['learners']} learners</h1>", "<h2>Hardest exercises</h2><ol>"]
    for item in summary["hardest"]:
        parts.append(f"<li>{e(item['chapter'])} / {e(item['exercise'])}: {item['passed']:.0%} passed</li>")
    parts.append("</ol>")
    for chapter, exercises in summary["chapters"].items():
        parts.append(f"<h2>{e(chapter)}</h2>")
        parts.append(f"<img alt='outcomes per exercise in {e(chapter)}' src='data:image/png;base64,{_chapter_chart(exercises)}'>")
        parts.append("<table><tr><th>exercise</th><th>passed</th><th>failed</th><th>not attempted</th>"
                     "<th>raised</th><th>what went wrong, most common first</th></tr>")
        for name, data in exercises.items():
            shares = data["shares"]
            wrong = "<br>".join(f"<b>{e(m['mistake'])}</b> ({m['learners']}): {e(m['message'])}"
                                for m in data["mistakes"])
            parts.append(f"<tr><td>{e(name)}</td>" + "".join(f"<td>{shares[g]:.0%}</td>" for g in GROUPS)
                         + f"<td>{wrong}</td></tr>")
        parts.append("</table>")
    return "\n".join(parts) + "\n"


def write_class_report(out: Path, results: list[dict]) -> Path:
    summary = class_summary(results)
    write_atomically(out / "class_report.json", json.dumps(summary, indent=1, sort_keys=True))
    path = out / "class_report.html"
    write_atomically(path, report_html(summary))
    return path
