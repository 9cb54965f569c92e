"""``python -m course_utils.grading merge RESULTS_1 ... RESULTS_N --out RESULTS``: shards into one.

Each shard (``--shard K/N``, on whatever machine) leaves a results folder; merging them gives
the gradebook, the feedback pages, the class report and the cache that grading the whole class
in one run gives. A learner found in two shards with different results is an error, not a
choice: the shards were not cut from one class.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from course_utils.grading.batch import exercise_columns
from course_utils.grading.class_report import write_class_report
from course_utils.grading.lms import write_lms
from course_utils.grading.reports import read_results, write_gradebook, write_learner


class MergeConflict(ValueError):
    pass


def merge(shards: list[Path], out: Path, lms: str | None = None) -> list[dict]:
    """Write the merged results into ``out``; the learners' results, sorted by learner."""
    merged: dict[str, dict] = {}
    for shard in shards:
        if not (shard / "gradebook.csv").exists():
            raise MergeConflict(f"{shard} is not a results folder (no gradebook.csv)")
        for result in read_results(shard):
            learner = result["learner"]
            if learner in merged and merged[learner] != result:
                raise MergeConflict(f"{learner} is in two shards with different results (the second: {shard})")
            merged[learner] = result
    out.mkdir(parents=True, exist_ok=True)
    results = [merged[learner] for learner in sorted(merged)]
    for result in results:
        write_learner(out, result)
    write_gradebook(out, results, exercise_columns(results))
    write_class_report(out, results)
    if lms:
        write_lms(out, results, lms)
    cache = out / ".cache"
    cache.mkdir(exist_ok=True)
    for shard in shards:
        for entry in (shard / ".cache").glob("*.json"):
            shutil.copy2(entry, cache / entry.name)
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.grading merge",
        description="Join the results folders of --shard runs into one, as one run would have written it.")
    parser.add_argument("shards", type=Path, nargs="+", help="the shards' results folders")
    parser.add_argument("--out", type=Path, required=True, help="the merged results folder")
    parser.add_argument("--lms", choices=("canvas",), help="also write the LMS's gradebook import file")
    args = parser.parse_args(argv)
    if args.out.resolve() in {shard.resolve() for shard in args.shards}:
        parser.error("--out must be a new folder, not one of the shards")
    try:
        results = merge(args.shards, args.out, args.lms)
    except MergeConflict as error:
        print(f"merge: {error}", file=sys.stderr)
        return 1
    print(f"Merged {len(args.shards)} shards: {len(results)} learners; gradebook: {args.out / 'gradebook.csv'}; "
          f"class report: {args.out / 'class_report.html'}")
    return 0


