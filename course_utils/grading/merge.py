"""``python -m course_utils.grading merge RESULTS_1 ... RESULTS_N --out RESULTS``: folders into one.

Each shard (``--shard K/N``, on whatever machine) leaves a results folder; merging them gives
the gradebook, the feedback pages, the class report and the cache that grading the whole class
in one run gives. A learner found in two folders with different results is an error, not a
choice: the shards were not cut from one class.

Every grading run records, in ``shard.txt`` in its results folder (``SHARD_RECORD``, written
before it grades anyone and again when it is done), which shard it is (K and N; none for a run
of the whole class), the learners it grades, the whole class's learners and the assignment
(each chapter and its maximum). So merge refuses what would lose learners without a word: an
incomplete set of shards (it names the shard numbers missing, K of N, and the learners they
hold), shards of different N, two copies of one K, shards cut from different classes, and a
shard whose run did not finish or whose folder lacks a learner it graded. ``--partial`` merges
an incomplete set all the same; the output, the class report and the merged ``shard.txt`` then
say what is missing. A results folder without ``shard.txt`` (from a grader before it) is
merged as it is.

Unless ``--update`` says it is a choice: then a learner in a later folder on the command line
replaces the same learner from the earlier ones, which is how a regrade of a few learners
(``--regrade results/ --out results-dave/``) goes back into the class's results
(``merge results/ results-dave/ --out results-final/ --update``); the command names who was
replaced. Those are runs of no shard, so none of the shard checks applies to them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from course_utils.grading.batch import exercise_columns
from course_utils.grading.class_report import write_class_report
from course_utils.grading.lms import (CanvasOptions, CanvasProblem, add_canvas_options, canvas_option_problem,
                                      canvas_options, write_lms)
from course_utils.grading.reports import (assignment_of, counted, out_of, out_of_assignment, read_results,
                                          write_atomically, write_gradebook, write_learner)

# In every results folder: what the run that wrote it graded (see the module's docstring). JSON,
# but not named ``*.json``: a results folder's ``NAME.json`` files are its learners' results.
SHARD_RECORD = "shard.txt"


class MergeConflict(ValueError):
    pass


# --------------------------------------------------------------------------------------------
# shard.txt
# --------------------------------------------------------------------------------------------
def shard_record(shard: tuple[int, int] | None, learners: list[str], whole_class: list[str],
                 assignment: dict[str, int], finished: bool = False, **more) -> dict:
    """What a run records about itself: ``shard`` (K, N) or None for the whole class; the ids of
    the learners it grades and of the whole class; the assignment; whether it finished."""
    return {"shard": list(shard) if shard else None, "learners": sorted(learners), "class": sorted(whole_class),
            "assignment": dict(assignment), "finished": finished, **more}


def write_shard_record(folder: Path, record: dict) -> Path:
    path = folder / SHARD_RECORD
    write_atomically(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path


def read_shard_record(folder: Path) -> dict | None:
    """The folder's ``shard.txt``, or None where it has none (or one that makes no sense)."""
    try:
        record = json.loads((folder / SHARD_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("learners"), list):
        return None
    shard = record.get("shard")
    well_formed = isinstance(shard, list) and len(shard) == 2 and all(isinstance(x, int) for x in shard)
    if shard is not None and not well_formed:
        return None
    return record


def _shard_of(record: dict | None) -> tuple[int, int] | None:
    return tuple(record["shard"]) if record and record.get("shard") else None


def run_name(shard: tuple[int, int] | None) -> str:
    """``--shard 2/3``, or ``a run of the whole class (no --shard)``."""
    return f"--shard {shard[0]}/{shard[1]}" if shard else "a run of the whole class (no --shard)"


def folder_problem(out: Path, shard: tuple[int, int] | None) -> str | None:
    """Why a run ``--shard shard`` must not grade into ``out``: the folder holds another run's
    results (another K or N, or shards where this run is of the whole class, or the reverse),
    whose learners its gradebook would have listed and merge would have mixed up. None: go on."""
    record = read_shard_record(out)
    if record is None or _shard_of(record) == (tuple(shard) if shard else None):
        return None
    return (f"{out} holds the results of {run_name(_shard_of(record))} (its {SHARD_RECORD} says so), and this "
            f"run is {run_name(shard)}. A results folder holds one run's learners: give this run a folder of "
            f"its own (e.g. --out {out.parent / _folder_name(shard)}), or delete {out} and grade again "
            f"(copy {out / '.cache'} into the new folder first to keep its cache).")


def _folder_name(shard: tuple[int, int] | None) -> str:
    return f"shard-{shard[0]}-of-{shard[1]}" if shard else "all"


# --------------------------------------------------------------------------------------------
# Merging
# --------------------------------------------------------------------------------------------
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
    # Where the set was incomplete and --partial merged it anyway: what is missing, in words.
    partial: str | None = None
    shards: str | None = None  # which shards were merged, in words ("shards 1, 2 and 3 of 3")
    ignored: list[str] = field(default_factory=list)  # result files a folder's run did not grade


def _total(result: dict) -> str:
    return f"{result['total']}/{out_of(result)}"


def _listed(items) -> str:
    items = [str(item) for item in items]
    return " and ".join(filter(None, [", ".join(items[:-1]), items[-1]])) if items else ""


@dataclass
class _Set:
    """What the folders' records say about the set being merged."""

    shards: str | None = None
    missing: list[str] = field(default_factory=list)  # what is missing, in words, one per kind
    learners: dict = field(default_factory=dict)  # folder → the learners its run graded (with a record)
    whole_class: list[str] = field(default_factory=list)
    assignments: list[dict] = field(default_factory=list)


def check_set(records: dict[Path, dict | None]) -> _Set:
    """What the records say; ``MergeConflict`` for what no option makes right (shards of
    different N, one shard twice, shards of different classes). What is merely missing goes
    into ``missing``."""
    found = _Set()
    sharded = {folder: _shard_of(record) for folder, record in records.items() if _shard_of(record)}
    for folder, record in records.items():
        if record is not None:
            found.learners[folder] = list(record["learners"])
            found.assignments.append(record.get("assignment") or {})
            if record.get("partial"):
                found.missing.append(f"{folder} is a partial merge ({record['partial']})")
    if sharded:
        sizes = {n for _, n in sharded.values()}
        if len(sizes) > 1:
            raise MergeConflict(
                "these folders are shards of different runs: "
                + "; ".join(f"{folder} is shard {k} of {n}" for folder, (k, n) in sharded.items())
                + f". Merge the N folders of one --shard K/N run (each records its K and N in {SHARD_RECORD})")
        [n] = sizes
        by_k: dict[int, Path] = {}
        for folder, (k, _) in sharded.items():
            if k in by_k:
                raise MergeConflict(f"{by_k[k]} and {folder} are both shard {k} of {n}: merge each shard once "
                                    "(the folder of its latest run)")
            by_k[k] = folder
        classes = {tuple(records[folder].get("class") or ()) for folder in sharded}
        if len(classes) > 1:
            raise MergeConflict("these shards were graded from different classes (their " + SHARD_RECORD
                                + " files list different learners): grade every shard from the same "
                                  "submissions, then merge")
        found.whole_class = list(next(iter(classes)))
        found.shards = f"{'shard' if len(by_k) == 1 else 'shards'} {_listed(sorted(by_k))} of {n}"
        absent = sorted(set(range(1, n + 1)) - set(by_k))
        if absent:
            graded = {learner for folder in sharded for learner in records[folder]["learners"]}
            lost = [learner for learner in found.whole_class if learner not in graded]
            whose = f": {counted(len(lost), 'learner')} of the class ({_listed(lost)})" if lost else ""
            found.missing.append(f"{'shard' if len(absent) == 1 else 'shards'} {_listed(absent)} of {n} "
                                 f"missing{whose}")
    for folder, record in records.items():
        if record is None:
            continue
        present = {path.stem for path in folder.glob("*.json")}
        lacking = [learner for learner in record["learners"] if learner not in present]
        if lacking:
            what = f"shard {record['shard'][0]} of {record['shard'][1]}" if record.get("shard") else "its run"
            stopped = " (its run did not finish: run its grading command again)" if not record.get("finished") else ""
            found.missing.append(f"{folder} ({what}) has no result for {counted(len(lacking), 'learner')} it "
                                 f"grades ({_listed(lacking)}){stopped}")
        elif not record.get("finished"):
            found.missing.append(f"{folder}: its run did not finish (run its grading command again)")
    return found


def gather(folders: list[Path], update: bool = False, partial: bool = False) -> Merged:
    """Every learner's result from ``folders`` (with ``update``, the last folder's wins), each
    out of the merged class's assignment, before anything is written: ``MergeConflict`` where the
    merge would lose or mix learners (see the module's docstring)."""
    records = {folder: read_shard_record(folder) for folder in folders}
    for folder, record in records.items():
        if record is None and not (folder / "gradebook.csv").exists():
            raise MergeConflict(f"{folder} is not a results folder (no gradebook.csv, no {SHARD_RECORD})")
    found = check_set(records)
    if found.missing and not partial:
        raise MergeConflict("incomplete: " + "; ".join(found.missing)
                            + ". Merge every shard's folder (each complete), or add --partial to merge these "
                              "alone: the output and the class report then say the class is incomplete")
    merged: dict[str, tuple[dict, Path]] = {}
    replacing, ignored = [], []
    for folder in folders:
        graded = found.learners.get(folder)
        if graded is not None:  # result files its run did not write: an older run's, left out
            others = sorted({path.stem for path in folder.glob("*.json")} - set(graded))
            ignored += [f"{folder / name}.json" for name in others if read_results(folder, [name])]
        for result in read_results(folder, graded):
            learner = result["learner"]
            earlier = merged.get(learner)
            if earlier is not None and _graded(earlier[0]) != _graded(result):
                if not update:
                    raise MergeConflict(
                        f"{learner} is in two results folders with different results ({earlier[1]} and "
                        f"{folder}). Shards of one class never share a learner; to replace the earlier "
                        f"result with the later one (a regrade), merge again with --update")
                replacing.append((learner, earlier, (result, folder)))
            merged[learner] = (result, folder)
    results = [merged[learner][0] for learner in sorted(merged)]
    assignment = assignment_of(results, *found.assignments)
    for result in results:
        out_of_assignment(result, assignment)
    replaced = [Replaced(learner, old_folder, new_folder, _total(out_of_assignment(old, assignment)), _total(new))
                for learner, (old, old_folder), (new, new_folder) in replacing]
    return Merged(results, replaced, partial="; ".join(found.missing) or None, shards=found.shards, ignored=ignored)


def _graded(result: dict) -> dict:
    """A result without what the run it came from says about the class (its assignment)."""
    return {key: value for key, value in result.items() if key not in ("assignment", "out_of")}


def merge(shards: list[Path], out: Path, lms: str | None = None, update: bool = False,
          canvas: CanvasOptions | None = None, partial: bool = False) -> Merged:
    """Write the merged results into ``out``."""
    merged = gather(shards, update, partial)
    results = merged.results
    out.mkdir(parents=True, exist_ok=True)
    for result in results:
        write_learner(out, result)
    write_gradebook(out, results, exercise_columns(results))
    write_class_report(out, results, incomplete=merged.partial)
    merged.notes = write_lms(out, results, lms, canvas).notes if lms else []
    cache = out / ".cache"
    cache.mkdir(exist_ok=True)
    for shard in shards:
        for entry in (shard / ".cache").glob("*.json"):
            shutil.copy2(entry, cache / entry.name)
    records = [read_shard_record(shard) for shard in shards]
    whole_class = sorted({learner for record in records if record for learner in record.get("class") or ()})
    write_shard_record(out, shard_record(None, [r["learner"] for r in results], whole_class or
                                         [r["learner"] for r in results], assignment_of(results), finished=True,
                                         merged_from=[str(shard) for shard in shards], partial=merged.partial))
    return merged


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
    parser.add_argument("--partial", action="store_true",
                        help="merge an incomplete set of shards (some of the N missing, or a shard whose run "
                             "did not finish); the output and the class report say what is missing")
    parser.add_argument("--lms", choices=("canvas",), help="also write the LMS's gradebook import file")
    add_canvas_options(parser)
    args = parser.parse_args(argv)
    if args.out.resolve() in {shard.resolve() for shard in args.shards}:
        parser.error("--out must be a new folder, not one of the folders merged")
    problem = canvas_option_problem(args)
    if problem:
        parser.error(problem)
    try:
        merged = merge(args.shards, args.out, args.lms, args.update, canvas_options(args), args.partial)
    except (MergeConflict, CanvasProblem) as error:
        print(f"merge: {error}", file=sys.stderr)
        return 1
    for replaced in merged.replaced:
        print(f"Replaced {replaced}")
    for path in merged.ignored:
        print(f"Left out {path}: its folder's run did not grade that learner (an older run's result)")
    for note in merged.notes:
        print(f"canvas.csv: {note}")
    if merged.partial:
        print(f"PARTIAL: {merged.partial}. These results are not the whole class; the class report says so.")
    shards = f" ({merged.shards})" if merged.shards else ""
    print(f"Merged {counted(len(args.shards), 'folder')}{shards}: {counted(len(merged.results), 'learner')}"
          + (f", {len(merged.replaced)} replaced" if args.update else "")
          + (" (partial)" if merged.partial else "")
          + f"; gradebook: {args.out / 'gradebook.csv'}; class report: {args.out / 'class_report.html'}")
    return 0
