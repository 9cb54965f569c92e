"""Run one learner notebook in the course's kernel, as a learner's Run All would.

The settings are those of a person's first run, with two exceptions that a website needs:
explorers render statically (no front end will ever answer a live widget), and nothing is
written to a progress file. The kernel's home folder is a fresh one of the build's, so that
what a page shows of "your" machine (the progress table) is a new learner's, not the builder's. Long trainings run at full length unless the caller
asks for the shortened ones (``COURSE_SMOKE=1``, what the test command uses).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from traitlets.config import Config
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

KERNEL_NAME = "pytorch-course"
CELL_TIMEOUT_S = 600
# Set for every run: no live widgets, no progress file.
FIXED_SETTINGS = {"COURSE_STATIC_WIDGETS": "1", "COURSE_NO_PROGRESS": "1"}
# Never inherited from the shell that started the build: MPLBACKEND=Agg (the test command's)
# would leave plain matplotlib figures off the page; the others change what a chapter runs.
DROPPED_SETTINGS = ("MPLBACKEND", "COURSE_SMOKE", "COURSE_STRICT", "COURSE_EXPECT",
                    "COURSE_SIMULATED_MACHINE", "NBGRADER_EXECUTION")


class ExecutionFailed(RuntimeError):
    """A chapter stopped on an error a learner would see as a traceback."""


@dataclass(frozen=True)
class ExecutedChapter:
    name: str  # "01_tensors"
    notebook: nbformat.NotebookNode
    seconds: float


def kernel_environment(smoke: bool, home: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    env = {key: value for key, value in (os.environ if base is None else base).items()
           if key not in DROPPED_SETTINGS + ("COURSE_PROGRESS_FILE",)}
    env.update(FIXED_SETTINGS)
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    if smoke:
        env["COURSE_SMOKE"] = "1"
    return env


def _where(nb: nbformat.NotebookNode, error: Exception) -> str:
    """The failing cell, named by its id and first line, from nbclient's error."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
                return f"cell {cell.get('id', '?')} ({first[:60]!r})"
    return "a cell"


def execute_chapter(path: Path, workdir: Path, *, smoke: bool) -> ExecutedChapter:
    """``path`` executed in a fresh kernel whose working directory is ``workdir``.

    What the kernel process itself prints (not the notebook: worker processes a chapter starts
    on purpose, and which fail on purpose) goes to ``workdir/NAME.kernel.log``. Raises
    ExecutionFailed naming the cell when a cell raises or times out, or the kernel dies: a
    page with a traceback in it is a broken page.
    """
    nb = nbformat.read(path, as_version=4)
    workdir.mkdir(parents=True, exist_ok=True)
    # Local sockets, as ./course lab's kernels use: nothing to eavesdrop on, no warning. Given
    # as configuration, not as a kernel manager of ours, so that nbclient owns the kernel and
    # shuts it down after the run.
    sockets = Config({"KernelManager": {"transport": "ipc", "ip": str(workdir / f".{path.stem}.ipc")}})
    client = NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=CELL_TIMEOUT_S, allow_errors=False,
                            resources={"metadata": {"path": str(workdir)}}, config=sockets)
    log = workdir / f"{path.stem}.kernel.log"
    start = time.perf_counter()
    try:
        with open(log, "w") as kernel_output:
            # The kernel manager hands env and the streams to the kernel's process.
            client.execute(env=kernel_environment(smoke, workdir / "home"), stdout=kernel_output, stderr=kernel_output)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
        summary = str(error).strip().splitlines()
        raise ExecutionFailed(
            f"{path.name}: {_where(nb, error)} failed: {summary[-1] if summary else error} "
            f"(the kernel's own output is in {log})"
        ) from error
    return ExecutedChapter(path.stem, nb, time.perf_counter() - start)
