"""Regrades with an audit trail: what changed for each learner since a previous grading, and why.

``--regrade PREVIOUS_RESULTS`` grades into a new ``--out`` (the previous results are kept as
they were) and writes ``regrade.json`` and ``regrade.html`` there. Each learner of either
grading is one of:

* **changed**: regraded, and their total or some exercise's score or outcome moved; each such
  exercise is listed as a person reads it ("0/1 failed → 1/1 passed") with the new reason;
* **unchanged**: regraded, and nothing moved;
* **not regraded**: in the previous grading only (the new run did not grade them: a regrade
  of one learner, or their submission is gone); their new total is "—";
* **new**: in the new grading only.

And what graded each side, which is why a score moves without the submission changing: where
both results record ``check_versions`` (a hash of each exercise's check code), the exercises
whose check changed ("the check of 01_tensors/outer_sum changed"); where one side lacks it,
the course version (a hash of the whole course); and the grader version, limits, exam mode and
sandbox where they differ.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from course_utils.grading.reports import counted, read_results, shortened, write_atomically

CHANGED, UNCHANGED, NOT_REGRADED, NEW = "changed", "unchanged", "not regraded", "new"
NOT_GRADED = "—"  # a total or a value a side does not have
# What graded a result, besides the checks' code: compared as they are.
AUDIT_KEYS = ("grader_version", "limits", "exam", "sandbox")


def _parts(result: dict) -> dict[tuple[str, str], dict]:
    """Every exercise of a result by (chapter, exercise), in course order."""
    return {(chapter, name): entry for chapter, notebook in result.get("notebooks", {}).items()
            for name, entry in notebook["exercises"].items()}


def as_read(part: dict | None) -> str:
    """An exercise's result as a person reads it: ``0/1 failed``; ``—`` where there is none."""
    if part is None:
        return NOT_GRADED
    return f"{part['score']}/{part['max']} {part['outcome']}"


def _total(result: dict | None) -> str:
    """A learner's total out of the assignment's maximum (``reports.out_of``), as everywhere."""
    from course_utils.grading.reports import out_of

    return NOT_GRADED if result is None else f"{result['total']}/{out_of(result)}"


def _exercise_changes(old: dict, new: dict) -> list[dict]:
    """Each exercise whose score or outcome moved: old → new, and the reason for the new one."""
    old_parts, new_parts = _parts(old), _parts(new)
    changes = []
    for key in [*new_parts, *(k for k in old_parts if k not in new_parts)]:
        a, b = old_parts.get(key), new_parts.get(key)
        if a is not None and b is not None and (a["score"], a["outcome"]) == (b["score"], b["outcome"]):
            continue
        changes.append({"chapter": key[0], "exercise": key[1],
                        "old": a and {"score": a["score"], "max": a["max"], "outcome": a["outcome"]},
                        "new": b and {"score": b["score"], "max": b["max"], "outcome": b["outcome"]},
                        "said": f"{key[0]}/{key[1]}: {as_read(a)} → {as_read(b)}",
                        "why": shortened((b or a)["reason"])})
    return changes


def _changed_checks(old: dict, new: dict) -> list[str] | None:
    """The exercises (``chapter/exercise``) whose check code differs; None where a side does
    not record ``check_versions``."""
    before, after = old.get("check_versions"), new.get("check_versions")
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    changed = []
    for chapter in [*after, *(c for c in before if c not in after)]:
        old_checks, new_checks = before.get(chapter) or {}, after.get(chapter) or {}
        for name in [*new_checks, *(n for n in old_checks if n not in new_checks)]:
            if old_checks.get(name) != new_checks.get(name):
                changed.append(f"{chapter}/{name}")
    return changed


def _value(value) -> str:
    """A recorded value as a person reads it."""
    if value is None:
        return "not recorded"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _graded_by(old: dict, new: dict) -> list[str]:
    """What differed in what graded the two results, in words."""
    said = []
    checks = _changed_checks(old, new)
    if checks:
        said += [f"the check of {name} changed" for name in checks]
    elif old.get("course_version") != new.get("course_version"):
        versions = f"course version {_value(old.get('course_version'))} → {_value(new.get('course_version'))}"
        said.append(f"{versions} (these results do not say which checks changed)" if checks is None
                    else f"{versions}, but none of this learner's checks changed")
    for key in AUDIT_KEYS:
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if isinstance(before, dict) and isinstance(after, dict):
            said += [f"{key}: {name} {_value(before.get(name))} → {_value(after.get(name))}"
                     for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)]
        else:
            said.append(f"{key.replace('_', ' ')}: {_value(before)} → {_value(after)}")
    return said


def _learner(learner: str, old: dict | None, new: dict | None) -> dict:
    item = {"learner": learner, "old_total": old["total"] if old else None,
            "new_total": new["total"] if new else None,
            "old": _total(old), "new": _total(new), "changes": [], "graded_by": []}
    if old is None:
        item["status"] = NEW
    elif new is None:
        item["status"] = NOT_REGRADED
        item["note"] = "not regraded: not in the new grading"
    else:
        item["changes"] = _exercise_changes(old, new)
        item["graded_by"] = _graded_by(old, new)
        moved = item["changes"] or old["total"] != new["total"]
        item["status"] = CHANGED if moved else UNCHANGED
    return item


def compare(previous: list[dict], current: list[dict]) -> dict:
    """Per learner of either grading, what changed; and how many learners are in each status."""
    before = {r["learner"]: r for r in previous}
    after = {r["learner"]: r for r in current}
    learners = [_learner(name, before.get(name), after.get(name)) for name in sorted(set(before) | set(after))]
    counts = {status: sum(item["status"] == status for item in learners)
              for status in (CHANGED, UNCHANGED, NOT_REGRADED, NEW)}
    return {"learners": learners, "counts": counts, "moved": counts[CHANGED]}


def headline(report: dict) -> str:
    """``2 learners changed (of 3 regraded); 8 not regraded``."""
    counts = report["counts"]
    regraded = counts[CHANGED] + counts[UNCHANGED]
    line = f"{counted(counts[CHANGED], 'learner')} changed (of {regraded} regraded)"
    if counts[NOT_REGRADED]:
        line += f"; {counts[NOT_REGRADED]} not regraded"
    if counts[NEW]:
        line += f"; {counts[NEW]} new"
    return line


def learner_line(item: dict) -> str:
    """One learner's change on one line, for the command's output."""
    details = [change["said"] for change in item["changes"]] + item["graded_by"]
    return f"{item['learner']}: {item['old']} → {item['new']}" + (f" ({'; '.join(details)})" if details else "")


def report_html(report: dict) -> str:
    e = html.escape
    parts = ["<!doctype html><meta charset='utf-8'><title>Regrade</title>",
             "<style>body{font-family:sans-serif;max-width:64em;margin:2em auto}td,th{padding:3px 8px;"
             "border-bottom:1px solid #ddd;text-align:left;vertical-align:top}table{border-collapse:collapse}</style>",
             f"<h1>Regrade: {e(headline(report))}</h1>",
             "<table><tr><th>learner</th><th>old</th><th>new</th><th></th><th>what changed, and why</th></tr>"]
    for item in report["learners"]:
        lines = [f"{e(c['said'])}: {e(c['why'])}" for c in item["changes"]]
        lines += [f"graded by: {e(line)}" for line in item["graded_by"]]
        if item.get("note"):
            lines.append(e(item["note"]))
        parts.append(f"<tr><td>{e(item['learner'])}</td><td>{e(item['old'])}</td><td>{e(item['new'])}</td>"
                     f"<td>{e(item['status'])}</td><td>{'<br>'.join(lines)}</td></tr>")
    parts.append("</table>")
    return "\n".join(parts) + "\n"


def write_regrade(previous: Path, out: Path) -> dict:
    report = compare(read_results(previous), read_results(out))
    report["previous"] = str(previous)
    write_atomically(out / "regrade.json", json.dumps(report, indent=1, sort_keys=True))
    write_atomically(out / "regrade.html", report_html(report))
    return report
