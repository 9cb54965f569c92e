"""How long each exercise's check takes on its reference solution: first call and warm call.

A check must finish "in well under a second" on a learner's CPU. The first call in a session
pays for imports and lazy set-up inside torch; later calls show the check's own cost. Run it
in a fresh process for honest first-call figures:

    .venv/bin/python tools/time_checks.py                 # a table, slowest first call first
    .venv/bin/python tools/time_checks.py --json out.json --repeat 3

Each exercise's reference goes through ``verdict()`` (probe and judge, nothing displayed): once
for the first call, then ``--repeat`` more times, keeping the fastest as the warm figure.
Timings of a busy machine are noise: compare figures from one quiet run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from course_utils.exercises import all_exercises  # noqa: E402


def time_exercise(exercise, repeat: int) -> dict:
    start = time.perf_counter()
    verdict = exercise.verdict(exercise.reference)
    first = time.perf_counter() - start
    warm = []
    for _ in range(repeat):
        start = time.perf_counter()
        exercise.verdict(exercise.reference)
        warm.append(time.perf_counter() - start)
    return {"id": exercise.id, "passed": verdict.passed, "first_s": first,
            "warm_s": min(warm) if warm else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="warm calls per exercise")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    rows = [time_exercise(e, args.repeat) for exercises in all_exercises().values() for e in exercises]
    rows.sort(key=lambda row: -row["first_s"])
    width = max(len(row["id"]) for row in rows)
    print(f"{'exercise':<{width}}  first call  warm call")
    for row in rows:
        warm = "-" if row["warm_s"] is None else f"{row['warm_s'] * 1000:8.1f} ms"
        flag = "" if row["passed"] else "  (the reference did not pass!)"
        print(f"{row['id']:<{width}}  {row['first_s'] * 1000:8.1f} ms  {warm}{flag}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(row["passed"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
