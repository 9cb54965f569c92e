"""What a class got wrong: ``RESULTS/class_report.json`` and ``class_report.html``.

For each exercise, the share of learners in each group:

* **passed**;
* **failed** and **raised** (the answer's code raised, ran out of time or killed its kernel):
  the learner's own mistakes, listed by mistake id, most common first, with the message a
  learner saw;
* **not attempted**: the answer cell still holds the stub;
* **not handed in or unreadable**: no answer to grade (outcome "missing": no notebook for the
  chapter, a file that is not a notebook, a notebook of another chapter, a deleted answer cell);
* **no result: grading problem**: the grader, not the learner, failed (a check that produced no
  result though the answer did not raise, or a learner whose grading crashed). Not counted as
  the learner's mistake; ``grader-errors.log`` says more.

In an exam each exercise has a public and a hidden part, each with its own shares and
mistakes. Per chapter a stacked bar chart of that split, how many learners the chapter has
(and how many handed it in), and the exercises the class found hardest. Made from the
learners' results alone, so a merged set of shards gives the same report as one run; a partial
merge of shards (``merge --partial``) says at the top what is missing.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from pathlib import Path

from course_utils.grading.reports import counted, grader_failed, handed_in, shortened, write_atomically

PASSED, FAILED, RAISED, NOT_ATTEMPTED = "passed", "failed", "raised", "not attempted"
NOT_HANDED_IN, GRADING_PROBLEM = "not handed in or unreadable", "no result: grading problem"
GROUPS = (PASSED, FAILED, RAISED, NOT_ATTEMPTED, NOT_HANDED_IN, GRADING_PROBLEM)
MISTAKE_GROUPS = (FAILED, RAISED)  # the learner's own mistakes: listed by mistake id
COLOURS = {PASSED: "#2e7d32", FAILED: "#c62828", RAISED: "#ef6c00", NOT_ATTEMPTED: "#9e9e9e",
           NOT_HANDED_IN: "#cfd8dc", GRADING_PROBLEM: "#6a1b9a"}
MESSAGE_CHARS = 300


def group_of(part: dict) -> str:
    """Which group an exercise's (part of a) result falls in."""
    outcome = part["outcome"]
    if outcome == "passed":
        return PASSED
    if outcome == "not attempted":
        return NOT_ATTEMPTED
    if outcome == "missing":
        return NOT_HANDED_IN
    if outcome in ("your code raised", "timeout", "kernel died"):
        return RAISED
    if outcome == "no result":  # the learner's answer cell raising is the learner's; the rest is ours
        return RAISED if part["reason"].startswith("the answer cell raised") else GRADING_PROBLEM
    return FAILED


def _mistake_id(part: dict) -> str:
    return part.get("mistake") or part["outcome"].replace(" ", "-")


def _parts(entry: dict) -> dict[str, dict]:
    """The parts of an exercise's result the report counts: an exam's public and hidden cases."""
    if "public" in entry and "hidden" in entry:
        return {"public": entry["public"], "hidden": entry["hidden"]}
    return {"": entry}


class _Tally:
    """The counts of one exercise (or one part of it) across the class."""

    def __init__(self):
        self.learners = 0
        self.groups: Counter = Counter()
        self.mistakes: Counter = Counter()
        self.problems: Counter = Counter()
        self.said: dict[str, str] = {}

    def add(self, part: dict, group: str) -> None:
        self.learners += 1
        self.groups[group] += 1
        message = shortened(part["reason"], MESSAGE_CHARS)
        if group in MISTAKE_GROUPS:
            mistake = _mistake_id(part)
            self.mistakes[mistake] += 1
            self.said.setdefault(mistake, message)
        elif group == GRADING_PROBLEM:
            self.problems[message] += 1

    def share(self, count: int) -> float:
        return round(count / self.learners, 4)

    def summary(self) -> dict:
        return {
            "learners": self.learners,
            "shares": {group: self.share(self.groups[group]) for group in GROUPS},
            "mistakes": [{"mistake": mistake, "learners": count, "share": self.share(count),
                          "message": self.said[mistake]} for mistake, count in _most_common(self.mistakes)],
            "grading_problems": [{"learners": count, "message": message}
                                 for message, count in _most_common(self.problems)],
        }


def _most_common(counter: Counter) -> list[tuple[str, int]]:
    """Most common first; equal counts in a fixed order, so that every run writes the same."""
    return sorted(counter.items(), key=lambda item: (-item[1], item[0]))


def _count_results(results: list[dict]) -> tuple[dict, dict]:
    """Per chapter and exercise (and part), the tallies; per chapter, who has it and handed it in."""
    tallies: dict[str, dict[str, dict[str, _Tally]]] = {}
    chapters: dict[str, dict] = {}
    for result in sorted(results, key=lambda r: r["learner"]):
        crashed = grader_failed(result)
        for chapter, notebook in result["notebooks"].items():
            counts = chapters.setdefault(chapter, {"learners": 0, "handed_in": 0, "order": []})
            counts["learners"] += 1
            counts["handed_in"] += int(handed_in(notebook) and not crashed)
            for name, entry in notebook["exercises"].items():
                if name not in counts["order"]:
                    counts["order"].append(name)
                exercise = tallies.setdefault(chapter, {}).setdefault(name, {})
                for part_name, part in _parts(entry).items():
                    group = GRADING_PROBLEM if crashed else group_of(part)
                    exercise.setdefault(part_name, _Tally()).add(part, group)
    return tallies, chapters


def class_summary(results: list[dict]) -> dict:
    """Plain data: per chapter and exercise the shares and the mistakes, most common first.

    An exercise is ``{"learners", "shares", "mistakes", "grading_problems"}``; in an exam it is
    ``{"learners", "public": {...}, "hidden": {...}}``, each part with its own shares, mistakes
    and grading problems. ``per_chapter`` says how many learners each chapter has, how many
    handed it in, and the exercises in notebook order; ``grader_failed`` names the learners
    whose grading crashed and who therefore have no chapter.
    """
    tallies, chapters = _count_results(results)
    summary = {"learners": len(results), "chapters": {}, "per_chapter": {}, "hardest": [],
               "grader_failed": sorted(r["learner"] for r in results if grader_failed(r) and not r["notebooks"])}
    rates = []
    for chapter in sorted(tallies):
        summary["per_chapter"][chapter] = chapters[chapter]
        summary["chapters"][chapter] = {}
        for name in chapters[chapter]["order"]:
            parts = {part: tally.summary() for part, tally in tallies[chapter][name].items()}
            if "" in parts:
                summary["chapters"][chapter][name] = parts[""]
                deciding = parts[""]
            else:
                summary["chapters"][chapter][name] = {"learners": parts["hidden"]["learners"], **parts}
                deciding = parts["hidden"]
            rates.append((deciding["shares"][PASSED], chapter, name))
    summary["hardest"] = [{"chapter": chapter, "exercise": name, "passed": rate}
                          for rate, chapter, name in sorted(rates)[:5]]
    return summary


def _rows(name: str, data: dict) -> list[tuple[str, dict]]:
    """An exercise's rows in the table and the chart: one, or an exam's public and hidden parts."""
    if "hidden" in data:
        return [(f"{name}: public cases", data["public"]), (f"{name}: hidden cases", data["hidden"])]
    return [(name, data)]


def _chapter_chart(exercises: dict) -> str:
    """A horizontal stacked bar per exercise (per part in an exam), as a base64 PNG."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    rows = [row for name, data in exercises.items() for row in _rows(name, data)]
    labels = [label for label, _ in rows]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.2))
    left = [0.0] * len(rows)
    for group in GROUPS:
        widths = [part["shares"][group] * 100 for _, part in rows]
        ax.barh(labels, widths, left=left, color=COLOURS[group], label=group)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of learners")
    ax.invert_yaxis()
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False, fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _what_went_wrong(part: dict) -> str:
    e = html.escape
    lines = [f"<b>{e(m['mistake'])}</b> ({m['learners']}): {e(m['message'])}" for m in part["mistakes"]]
    lines += [f"<i>grading problem</i> ({p['learners']}): {e(p['message'])}" for p in part["grading_problems"]]
    return "<br>".join(lines)


def _chapter_heading(chapter: str, counts: dict) -> str:
    learners, handed = counts["learners"], counts["handed_in"]
    also = "" if handed == learners else f", {handed} handed it in"
    return f"<h2>{html.escape(chapter)}: {counted(learners, 'learner')}{also}</h2>"


def report_html(summary: dict) -> str:
    e = html.escape
    parts = ["<!doctype html><meta charset='utf-8'><title>Class report</title>",
             "<style>body{font-family:sans-serif;max-width:64em;margin:2em auto;color:#222}"
             "td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
             "table{border-collapse:collapse}</style>",
             f"<h1>Class report: {counted(summary['learners'], 'learner')}</h1>"]
    if summary.get("incomplete"):
        parts.append(f"<p>⚠ <b>Incomplete: not the whole class.</b> {e(summary['incomplete'])}. These results "
                     "were merged with --partial: learners without a result are in no count below.</p>")
    if summary["grader_failed"]:
        parts.append(f"<p>⚠ The grader failed on {counted(len(summary['grader_failed']), 'learner')} "
                     f"({e(', '.join(summary['grader_failed']))}): no result, in no chapter below; "
                     "grader-errors.log in the results folder says why.</p>")
    parts.append("<h2>Hardest exercises</h2><ol>")
    for item in summary["hardest"]:
        parts.append(f"<li>{e(item['chapter'])} / {e(item['exercise'])}: {item['passed']:.0%} passed</li>")
    parts.append("</ol>")
    header = "".join(f"<th>{e(group)}</th>" for group in GROUPS)
    for chapter, exercises in summary["chapters"].items():
        parts.append(_chapter_heading(chapter, summary["per_chapter"][chapter]))
        chart = _chapter_chart(exercises)
        parts.append(f"<img alt='outcomes per exercise in {e(chapter)}' src='data:image/png;base64,{chart}'>")
        parts.append(f"<table><tr><th>exercise</th>{header}<th>what went wrong, most common first</th></tr>")
        for name, data in exercises.items():
            for label, part in _rows(name, data):
                shares = "".join(f"<td>{part['shares'][group]:.0%}</td>" for group in GROUPS)
                parts.append(f"<tr><td>{e(label)}</td>{shares}<td>{_what_went_wrong(part)}</td></tr>")
        parts.append("</table>")
    return "\n".join(parts) + "\n"


def write_class_report(out: Path, results: list[dict], incomplete: str | None = None) -> Path:
    """``class_report.json`` and ``.html``; ``incomplete``: what a partial merge lacks (``merge
    --partial``), said at the top of both."""
    summary = class_summary(results)
    if incomplete:
        summary["incomplete"] = incomplete
    write_atomically(out / "class_report.json", json.dumps(summary, indent=1, sort_keys=True))
    path = out / "class_report.html"
    write_atomically(path, report_html(summary))
    return path
