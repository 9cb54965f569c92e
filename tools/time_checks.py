"""How long each exercise's check takes on its reference solution: first call and warm call.

A check must finish "in well under a second" on a learner's CPU. The first call in a session
pays for imports and lazy set-up inside torch; later calls show the check's own cost.

    .venv/bin/python tools/time_checks.py                 # a table, slowest first call first
    .venv/bin/python tools/time_checks.py --json out.json --repeat 3
    .venv/bin/python tools/time_checks.py --fresh         # each chapter in a new process
    .venv/bin/python tools/time_checks.py --fresh tensors.outer_sum   # its chapter, fresh

With ``--fresh`` each chapter runs in a process of its own, as in a learner's kernel that has
just imported its exercises: the first check of a chapter then also pays torch's one-time
set-up (the first ``meta`` operation or optimizer step of a process imports ``torch._dynamo``,
about a second on a slow CPU), which a notebook's earlier cells have often paid already.

Each exercise's reference goes through ``verdict()`` (probe and judge, nothing displayed): once
for the first call, then ``--repeat`` more times, keeping the fastest as the warm figure.
Timings of a busy machine are noise: compare figures from one quiet run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from course_utils.exercises import CHAPTERS, all_exercises, chapter_exercises  # noqa: E402


def _in_fresh_process(module: str, repeat: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "rows.json"
        subprocess.run([sys.executable, __file__, "--chapter", module, "--repeat", str(repeat),
                        "--json", str(out)], check=False, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


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
    parser.add_argument("--fresh", action="store_true", help="each chapter in a new process")
    parser.add_argument("--chapter", help="only this chapter (its module name, e.g. tensors)")
    parser.add_argument("exercises", nargs="*", metavar="CHAPTER.NAME",
                        help="only these exercises (e.g. tensors.outer_sum), as mutate_checks.py takes them")
    args = parser.parse_args(argv)
    if args.exercises:  # checked first, also for --fresh; --chapter alone imports only its chapter
        chosen = {e.id: e for exercises in all_exercises().values() for e in exercises}
        unknown = [name for name in args.exercises if name not in chosen]
        if unknown:
            parser.error(f"no such exercise: {', '.join(unknown)} (one of: {', '.join(chosen)})")
    if args.fresh:  # each chapter (of the exercises named, or every one) in a process of its own
        modules = list(dict.fromkeys(name.split(".")[0] for name in args.exercises)) or list(CHAPTERS.values())
        rows = [row for module in modules for row in _in_fresh_process(module, args.repeat)
                if not args.exercises or row["id"] in args.exercises]
    elif args.exercises:
        rows = [time_exercise(chosen[name], args.repeat) for name in args.exercises]
    elif args.chapter:  # import this chapter's module only, as its notebook does
        rows = [time_exercise(e, args.repeat) for e in chapter_exercises(args.chapter)]
    else:
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
