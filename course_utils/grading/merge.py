"""``python -m course_utils.grading merge RESULTS_1 ... RESULTS_N --out RESULTS``: folders into one.

Each shard (``--shard K/N``, on whatever machine) leaves a results folder; merging them gives
the gradebook, the feedback pages, the class report and the cache that grading the whole class
in one run gives. A learner found in two folders with different results is an error, not a
choice: the shards were not cut from one class.

Unless ``--update`` says it is a choice: then a learner in a later folder on the command line
replaces the same learner from the earlier ones, which is how a regrade of a few learners
(``--regrade results/ --out results-dave/``) goes back into the class's results
(``merge results/ results-dave/ --out results-final/ --update``); the command names who was
replaced.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from course_utils.grading.batch import exercise_columns
from course_utils.grading.class_report import write_class_report
from course_utils.grading.lms import (CanvasOptions, CanvasProblem, add_canvas_options, canvas_option_problem,
                                      canvas_options, write_lms)
from course_utils.grading.reports import counted, read_results, write_gradebook, write_learner


class MergeConflict(ValueError):
    pass


@dataclass
class Replaced:
    """A learner whose result from an earlier folder a later folder's replaced (``--update``)."""

    learner: str
    old_folder: Path
    new_folder: Path
    old_total: str
    new_total: str

    def __str__(self) -> str:
        return (f"{self.learner}: {self.old_total} from {self.old_folder} replaced by "
                f"{self.new_total} from {self.new_folder}")


@dataclass
class Merged:
    results: list[dict]  # sorted by learner
    replaced: list[Replaced] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the LMS file's writing said


def _total(result: dict) -> str:
    return f"{result['total']}/{result['max']}"


def collect(folders: list[Path], update: bool = False) -> tuple[list[dict], list[Replaced]]:
    """Every learner's result from ``folders``; with ``update``, the last folder's wins."""
    merged: dict[str, tuple[dict, Path]] = {}
    replaced = []
    for folder in folders:
        if not (folder / "gradebook.csv").exists():
            raise MergeConflict(f"{folder} is not a results folder (no gradebook.csv)")
        for result in read_results(folder):
            learner = result["learner"]
            earlier = merged.get(learner)
            if earlier is not None and earlier[0] != result:
                if not update:
                    raise MergeConflict(
                        f"{learner} is in two results folders with different results ({earlier[1]} and "
                        f"{folder}). Shards of one class never share a learner; to replace the earlier "
                        f"result with the later one (a regrade), merge again with --update")
                replaced.append(Replaced(learner, earlier[1], folder, _total(earlier[0]), _total(result)))
            merged[learner] = (result, folder)
    return [merged[learner][0] for learner in sorted(merged)], replaced


def merge(shards: list[Path], out: Path, lms: str | None = None, update: bool = False,
          canvas: CanvasOptions | None = None) -> Merged:
    """Write the merged results into ``out``."""
    results, replaced = collect(shards, update)
    out.mkdir(parents=True, exist_ok=True)
    for result in results:
        write_learner(out, result)
    write_gradebook(out, results, exercise_columns(results))
    write_class_report(out, results)
    notes = write_lms(out, results, lms, canvas).notes if lms else []
    cache = out / ".cache"
    cache.mkdir(exist_ok=True)
    for shard in shards:
        for entry in (shard / ".cache").glob("*.json"):
            shutil.copy2(entry, cache / entry.name)
    return Merged(results, replaced, notes)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.grading merge",
        description="Join results folders into one, as one run would have written it: the shards of "
                    "--shard runs, or (with --update) a class's results and a regrade of some of its learners.")
    parser.add_argument("shards", type=Path, nargs="+", metavar="RESULTS",
                        help="the results folders, earliest first")
    parser.add_argument("--out", type=Path, required=True, help="the merged results folder (a new one)")
    parser.add_argument("--update", action="store_true",
                        help="a learner in a later folder replaces the same learner from earlier folders "
                             "(without it, a learner with different results in two folders is an error)")
    parser.add_argument("--lms", choices=("canvas",), help="also write the LMS's gradebook import file")
    add_canvas_options(parser)
    args = parser.parse_args(argv)
    if args.out.resolve() in {shard.resolve() for shard in args.shards}:
        parser.error("--out must be a new folder, not one of the folders merged")
    problem = canvas_option_problem(args)
    if problem:
        parser.error(problem)
    try:
        merged = merge(args.shards, args.out, args.lms, args.update, canvas_options(args))
    except (MergeConflict, CanvasProblem) as error:
        print(f"merge: {error}", file=sys.stderr)
        return 1
    for replaced in merged.replaced:
        print(f"Replaced {replaced}")
    for note in merged.notes:
        print(f"canvas.csv: {note}")
    print(f"Merged {counted(len(args.shards), 'folder')}: {counted(len(merged.results), 'learner')}"
          + (f", {len(merged.replaced)} replaced" if args.update else "")
          + f"; gradebook: {args.out / 'gradebook.csv'}; class report: {args.out / 'class_report.html'}")
    return 0
