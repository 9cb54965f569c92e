"""Benchmark the batch grader against plain nbclient on the same notebooks.

    .venv/bin/python tools/bench_grading.py                   # 6 learners, 2 per chapter
    .venv/bin/python tools/bench_grading.py --learners 4 --all-chapters --repeat 3
    .venv/bin/python tools/bench_grading.py --chapter-seconds --repeat 3 --write
    .venv/bin/python tools/bench_grading.py --learners 6 --shards 2 --repeat 3

``--shards N`` compares one run using every core with N shards (``--shard K/N``) plus their
merge, run at once on this machine and one after the other (as if each had a machine), in
seconds per submission.
``--chapter-seconds`` times the grading of each chapter's reference solution instead, and with
``--write`` stores them in ``course_utils/grading/chapter_seconds.json``, from which a batch
orders its learners, the longest first (``course_utils.grading.schedule``).

Builds a batch in a temporary folder: learner i submits a copy of ``solutions/<chapter>.ipynb``
(chapters taken in turn; ``--all-chapters`` gives every learner every chapter). Then, for each
repeat, it times

* **plain**: the notebooks the grader would run (the course's learner notebook with the
  learner's answers and probe cells, built by ``course_utils.grading.assemble``), executed one
  after the other with plain nbclient: a fresh kernel each, no sandbox, no limits;
* **workers=1** and **workers=2**: ``python -m course_utils.grading`` on the batch with
  ``--no-cache``, the whole command (start-up included).

It prints the median wall times, the overhead (workers=1 / plain; aim ≤ 1.2) and the speed-up
(workers=1 / workers=2; aim ≥ 1.8 on two cores). A benchmark, not a test: it reports and never
fails on a slow figure. Timings on a busy machine jump; trust only what repeats.

The plain runs get the two settings of the grader's kernel environment that change speed,
``OMP_NUM_THREADS=1`` and ``MPLBACKEND=Agg``, so that the comparison measures the grader's
own cost (sandbox, limits, probes, judging, start-up), not a different thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ("00_environment", "01_tensors", "02_autograd")
OVERHEAD_AIM = 1.2
SPEEDUP_AIM = 1.8


def build_batch(submissions: Path, learners: int, all_chapters: bool,
                chapters_cycle: tuple[str, ...] = CHAPTERS) -> list[tuple[str, Path]]:
    """Write the batch; returns (learner, notebook path) for every submitted notebook."""
    files = []
    for i in range(learners):
        learner = f"learner{i + 1:02d}"
        folder = submissions / learner
        folder.mkdir(parents=True)
        chapters = chapters_cycle if all_chapters else (chapters_cycle[i % len(chapters_cycle)],)
        for chapter in chapters:
            path = folder / f"{chapter}.ipynb"
            shutil.copyfile(ROOT / "solutions" / f"{chapter}.ipynb", path)
            files.append((learner, path))
    return files


def assembled(files: list[tuple[str, Path]]) -> list[tuple[str, nbformat.NotebookNode]]:
    """What the grader runs for each submitted notebook (falls back to the submission itself
    if the grader's assembly API is not importable)."""
    try:
        from course_utils.grading.assemble import assemble
        from course_utils.grading.submissions import answer_sources, read_submission
    except ImportError as error:
        print(f"(course_utils.grading.assemble not importable: {error}; plain runs the submissions as they are)")
        return [(path.stem, nbformat.read(path, as_version=4)) for _, path in files]
    result = []
    for _, path in files:
        chapter = path.stem
        course_nb = nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)
        answers, _ = answer_sources(read_submission(path))
        result.append((chapter, assemble(chapter, course_nb, answers).notebook))
    return result


def run_plain(notebooks, work: Path) -> float:
    """Execute each notebook with plain nbclient, one after the other; total wall seconds."""
    saved = {key: os.environ.get(key) for key in ("OMP_NUM_THREADS", "MPLBACKEND", "COURSE_NO_PROGRESS")}
    os.environ.update(OMP_NUM_THREADS="1", MPLBACKEND="Agg", COURSE_NO_PROGRESS="1")
    try:
        start = time.perf_counter()
        for index, (_, nb) in enumerate(notebooks):
            folder = work / f"plain-{index}"
            folder.mkdir(parents=True, exist_ok=True)
            client = nbclient.NotebookClient(
                nbformat.from_dict(nb), timeout=600, kernel_name="python3", allow_errors=True,
                resources={"metadata": {"path": str(folder)}},
            )
            client.execute()
        return time.perf_counter() - start
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_grader(submissions: Path, out: Path, workers: int, extra: list[str]) -> tuple[float, str]:
    """The grader CLI, timed from the outside; returns (wall seconds, its stdout)."""
    if out.exists():
        shutil.rmtree(out)
    env = {k: v for k, v in os.environ.items() if k not in {"COURSE_STRICT", "COURSE_EXPECT", "NBGRADER_EXECUTION"}}
    command = [sys.executable, "-m", "course_utils.grading", str(submissions), "--out", str(out),
               "--workers", str(workers), "--no-cache", *extra]
    start = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        print(f"  grader --workers {workers} exited with {run.returncode}:\n{run.stderr[-2000:]}")
    return seconds, run.stdout


def scores_line(stdout: str) -> str:
    """"all full marks", or the learners that were not (the benchmark must grade for real)."""
    short = [line for line in stdout.splitlines()
             if (m := re.match(r"^(\S+): (\d+)/(\d+)", line)) and m.group(2) != m.group(3)]
    return "all full marks" if not short else "NOT full marks: " + "; ".join(short)


def run_shards(submissions: Path, work: Path, shards: int, workers: int, extra: list[str],
               together: bool) -> tuple[list[float], float, float]:
    """Grade in ``shards`` grader processes (``--shard K/N``), then merge them.

    ``together``: all shards at once on this machine (wall from the first start to the last
    end); otherwise one after the other, each timed alone, as if each had a machine of its own.
    Returns (each shard's seconds, the shards' wall seconds, the merge's seconds)."""
    env = {k: v for k, v in os.environ.items() if k not in {"COURSE_STRICT", "COURSE_EXPECT", "NBGRADER_EXECUTION"}}
    outs = [work / f"shard-{k}" for k in range(1, shards + 1)]
    for out in outs:
        shutil.rmtree(out, ignore_errors=True)

    def command(k: int) -> list[str]:
        return [sys.executable, "-m", "course_utils.grading", str(submissions), "--out", str(outs[k - 1]),
                "--workers", str(workers), "--no-cache", "--shard", f"{k}/{shards}", *extra]

    each = []
    start = time.perf_counter()
    if together:
        running = [subprocess.Popen(command(k), cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
                   for k in range(1, shards + 1)]
        ended: dict[int, float] = {}
        while len(ended) < len(running):
            for index, process in enumerate(running):
                if index not in ended and process.poll() is not None:
                    ended[index] = time.perf_counter() - start
            time.sleep(0.05)
        each = [ended[index] for index in range(len(running))]
    else:
        for k in range(1, shards + 1):
            began = time.perf_counter()
            subprocess.run(command(k), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
            each.append(time.perf_counter() - began)
    wall = time.perf_counter() - start
    merged = work / "merged"
    shutil.rmtree(merged, ignore_errors=True)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "course_utils.grading", "merge", *map(str, outs), "--out", str(merged)],
                   cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
    return each, wall, time.perf_counter() - began


def compare_shards(submissions: Path, work: Path, files: int, shards: int, repeat: int, extra: list[str]) -> None:
    """One run with every core against ``shards`` shards plus their merge: seconds per submission."""
    cores = os.cpu_count() or 1
    each_workers = max(1, cores // shards)
    rows: dict[str, list[float]] = {"one run": [], "shards together": [], "shards alone": []}
    for round_ in range(repeat):
        seconds, _ = run_grader(submissions, work / "one-run", cores, extra)
        rows["one run"].append(seconds)
        each, wall, merge = run_shards(submissions, work, shards, each_workers, extra, together=True)
        rows["shards together"].append(wall + merge)
        print(f"  [{round_ + 1}] one run --workers {cores}: {seconds:6.1f} s; {shards} shards at once "
              f"(--workers {each_workers} each): {wall:6.1f} s + merge {merge:4.1f} s "
              f"(shards: {', '.join(f'{s:.1f}' for s in each)})")
        each, wall, merge = run_shards(submissions, work, shards, cores, extra, together=False)
        rows["shards alone"].append(max(each) + merge)
        print(f"  [{round_ + 1}] each shard alone (--workers {cores}), as on {shards} machines: "
              f"{', '.join(f'{s:.1f}' for s in each)} s; slowest + merge {max(each) + merge:6.1f} s")
    print()
    for name, values in rows.items():
        median = statistics.median(values)
        print(f"{name:18} {median:7.1f} s   {median / files:5.2f} s per submission")


def measure_chapter_seconds(work: Path, repeat: int) -> dict[str, float]:
    """Seconds the grader takes for each chapter's reference solution: ``grade_learner`` called
    in this process (as a worker calls it), median of ``repeat``, after one warm-up grading."""
    from course_utils.exercises import CHAPTERS as ALL_CHAPTERS
    from course_utils.grading.batch import Batch, grade_learner, load_judges
    from course_utils.grading.sandbox import Limits, choose_sandbox
    from course_utils.grading.submissions import Learner

    sandbox = choose_sandbox()
    batch = Batch(ROOT, work / "submissions", work / "out", Limits(), use_cache=False)
    load_judges()
    learners = {}
    for chapter in ALL_CHAPTERS:
        path = batch.submissions / chapter / f"{chapter}.ipynb"
        path.parent.mkdir(parents=True)
        shutil.copyfile(ROOT / "solutions" / f"{chapter}.ipynb", path)
        learners[chapter] = Learner(chapter, [path])
    grade_learner(learners[next(iter(learners))], batch, sandbox)  # warm-up: file cache, first kernel
    seconds = {}
    for chapter, learner in learners.items():
        runs = []
        for _ in range(repeat):
            start = time.perf_counter()
            result = grade_learner(learner, batch, sandbox)
            runs.append(time.perf_counter() - start)
            if result["total"] != result["max"]:
                print(f"  {chapter}: NOT full marks ({result['total']}/{result['max']}): {result['problems']}")
        seconds[chapter] = round(statistics.median(runs), 1)
        print(f"  {chapter}: {seconds[chapter]:5.1f} s  (runs: {', '.join(f'{r:.1f}' for r in runs)})")
    return seconds


def write_chapter_seconds(seconds: dict[str, float], repeat: int) -> Path:
    """Write ``course_utils/grading/chapter_seconds.json``, which orders a batch (``schedule``)."""
    import platform

    import torch

    from course_utils.grading.schedule import SECONDS_FILE

    SECONDS_FILE.write_text(json.dumps({
        "about": "Seconds the grader took for each chapter's reference solution; only their order "
                 "matters (course_utils/grading/schedule.py).",
        "measured_with": f"tools/bench_grading.py --chapter-seconds --repeat {repeat} --write",
        "machine": f"{os.cpu_count()} CPU cores, {platform.system()}, Python {platform.python_version()}, "
                   f"torch {torch.__version__}",
        "seconds": seconds,
    }, indent=2) + "\n", encoding="utf-8")
    return SECONDS_FILE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=6)
    parser.add_argument("--all-chapters", action="store_true", help="every learner submits every chapter")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each kind (median shown)")
    parser.add_argument("--chapters", nargs="+", default=list(CHAPTERS),
                        help="the chapters learners submit, in turn (default: %(default)s). Chapters "
                             "02, 04, 05 and 06 time things until the timing is steady, so their "
                             "own run time varies from run to run; 00, 01, 03 and 07 do fixed work")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--chapter-seconds", action="store_true",
                        help="instead: time the grading of each chapter's reference solution")
    parser.add_argument("--write", action="store_true",
                        help="with --chapter-seconds: write them to course_utils/grading/chapter_seconds.json")
    parser.add_argument("--shards", type=int, metavar="N",
                        help="instead: one run against N shards (--shard K/N) and their merge, per submission")
    parser.add_argument("grader_args", nargs="*", help="more grader options, after --")
    args = parser.parse_args(argv)
    if args.chapter_seconds:
        work = Path(tempfile.mkdtemp(prefix="bench-chapters-"))
        try:
            seconds = measure_chapter_seconds(work, args.repeat)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if args.write:
            print(f"wrote {write_chapter_seconds(seconds, args.repeat)}")
        return 0

    work = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    try:
        submissions = work / "submissions"
        files = build_batch(submissions, args.learners, args.all_chapters, tuple(args.chapters))
        notebooks = assembled(files)
        counts = {c: sum(1 for _, p in files if p.stem == c) for c in args.chapters}
        from course_utils.grading.sandbox import sandbox_status

        print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPU cores; sandbox: {sandbox_status()}")
        print(f"batch: {args.learners} learners, {len(files)} notebooks "
              f"({', '.join(f'{c} x{n}' for c, n in counts.items() if n)}); repeat {args.repeat}")

        if args.shards:
            compare_shards(submissions, work, len(files), args.shards, args.repeat, args.grader_args)
            return 0
        times: dict[str, list[float]] = {"plain": [], "workers=1": [], "workers=2": []}
        for round_ in range(args.repeat):
            times["plain"].append(run_plain(notebooks, work / "plain"))
            print(f"  [{round_ + 1}] plain nbclient, sequential: {times['plain'][-1]:6.1f} s")
            for workers in (1, 2):
                seconds, stdout = run_grader(submissions, work / f"out-{workers}", workers, args.grader_args)
                times[f"workers={workers}"].append(seconds)
                inner = re.search(r"Done in ([\d.]+) s", stdout)
                inner_text = f" (grader's own timer {inner.group(1)} s)" if inner else ""
                print(f"  [{round_ + 1}] grader --workers {workers}:       {seconds:6.1f} s{inner_text}; "
                      f"{scores_line(stdout)}")

        median = {kind: statistics.median(values) for kind, values in times.items()}
        overhead = median["workers=1"] / median["plain"]
        speedup = median["workers=1"] / median["workers=2"]
        print()
        print(f"plain nbclient, sequential     {median['plain']:7.1f} s")
        print(f"grader --workers 1             {median['workers=1']:7.1f} s")
        print(f"grader --workers 2             {median['workers=2']:7.1f} s")
        print(f"overhead  (workers 1 / plain)  {overhead:7.2f}   aim <= {OVERHEAD_AIM}  "
              f"{'met' if overhead <= OVERHEAD_AIM else 'MISSED'}")
        print(f"speed-up  (workers 1 / 2)      {speedup:7.2f}   aim >= {SPEEDUP_AIM}  "
              f"{'met' if speedup >= SPEEDUP_AIM else 'MISSED'}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
