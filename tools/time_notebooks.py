"""Measure "Run All" of each notebook, as a learner would experience it.

    .venv/bin/python tools/time_notebooks.py                 # every solutions/ notebook
    .venv/bin/python tools/time_notebooks.py --repeat 3 solutions/00_environment.ipynb
    .venv/bin/python tools/time_notebooks.py --smoke notebooks/*.ipynb

Each run starts a fresh kernel (the course's own Python), executes every cell, and reports the
wall time from kernel start to the last cell, plus the slowest cells. The course's budget is 60 s
per solutions notebook on two CPU cores. A benchmark, not a test: timings on a busy machine vary,
so nothing here fails a build.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 60.0


def run_all(path: Path) -> tuple[float, list[tuple[float, str]]]:
    """Execute the notebook once; return total seconds and (seconds, first line) per code cell."""
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=True,
    )
    start = time.perf_counter()
    client.execute()
    total = time.perf_counter() - start
    cells = []
    for cell in nb.cells:
        timing = cell.metadata.get("execution", {})
        began, ended = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if cell.cell_type == "code" and began and ended:
            seconds = _seconds_between(began, ended)
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            cells.append((seconds, first[:60]))
    return total, sorted(cells, reverse=True)


def _seconds_between(began: str, ended: str) -> float:
    from datetime import datetime

    def parse(stamp: str) -> datetime:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    return (parse(ended) - parse(began)).total_seconds()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=1, help="runs per notebook (median shown)")
    parser.add_argument("--smoke", action="store_true", help="set COURSE_SMOKE=1 as the tests do")
    parser.add_argument("--slowest", type=int, default=3, help="slowest cells to list")
    args = parser.parse_args(argv)

    os.environ["COURSE_NO_PROGRESS"] = "1"  # timing must not touch the learner's progress
    os.environ["MPLBACKEND"] = "Agg"
    if args.smoke:
        os.environ["COURSE_SMOKE"] = "1"
    paths = args.notebooks or sorted((ROOT / "solutions").glob("*.ipynb"))
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPU cores, smoke={args.smoke}")
    worst = 0.0
    for path in paths:
        runs = [run_all(path) for _ in range(args.repeat)]
        totals = [total for total, _ in runs]
        median = statistics.median(totals)
        worst = max(worst, median)
        spread = f" (runs: {', '.join(f'{t:.1f}' for t in totals)})" if args.repeat > 1 else ""
        flag = "" if median <= BUDGET_S else f"  OVER the {BUDGET_S:.0f} s budget"
        print(f"{path.name:<32} {median:6.1f} s{spread}{flag}")
        for seconds, first in runs[0][1][: args.slowest]:
            print(f"    {seconds:5.1f} s  {first}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
