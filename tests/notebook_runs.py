"""The notebook runs that `./course test` adds to notebooks/ and solutions/.

A learner's machine is rarely the CI's: PyPI's default torch on Linux is a CUDA build, and most
laptops that get it have no NVIDIA GPU; some have ROCm. Each run below is a folder of notebook
copies with a ``run-env.json`` that says how they run (conftest.py reads it when a notebook's
kernel starts). The learner notebooks with every displayed solution pasted in run on a CUDA
build without a GPU in tests/test_hosted.py, one chapter per simulated hosted machine: one run
that is both what a Colab learner meets and what a laptop with PyPI's torch meets.

    python tests/notebook_runs.py OUT_DIR      # writes OUT_DIR/<run>/*.ipynb and run-env.json

Copies run from any folder: the notebooks find the course's files through ``course_utils``.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SIMULATOR = "tests/simulated_machine"  # relative to the course; see its sitecustomize.py


@dataclass(frozen=True)
class Run:
    name: str
    label: str  # how the test command's summary names it
    source: str  # the folder whose notebooks are copied: "solutions"
    machine: str  # a machine of tests/simulated_machine, or "" for this one
    chapters: tuple[str, ...] = ()  # all when empty

    def settings(self) -> dict[str, str]:
        settings = {"LABEL": self.label, "COURSE_STRICT": "1"}
        if self.machine:
            settings.update(COURSE_SIMULATED_MACHINE=self.machine, PYTHONPATH=SIMULATOR)
        return settings


# What a worked answer in solutions/ may do differently on a CUDA build without a GPU. Every
# other line of every chapter runs on such a build in tests/test_hosted.py (the learner
# notebook with each displayed solution pasted in, on a simulated Colab, Kaggle or hub), so the
# solution notebooks run there only where a worked answer matches this, and chapter 00, whose
# subject is the machine. tests/test_simulated_machine.py checks the choice.
DEVICE_SENSITIVE = re.compile(
    r"cuda|pin_memory|autocast|GradScaler|accelerator|non_blocking|\bmps\b|torch\.version|"
    r"is_available|pick_device|device_count|get_device|set_device|synchronize|memory_allocated")
ALWAYS_ON_EVERY_BUILD = ("00_environment",)


def worked_answers(notebook: Path) -> list[str]:
    """The answer cells' sources of a solution notebook (nbgrader's "solution" cells)."""
    nb = nbformat.read(notebook, as_version=4)
    return [cell.source for cell in nb.cells
            if cell.cell_type == "code" and cell.get("metadata", {}).get("nbgrader", {}).get("solution")]


def chapters_for_every_build(solutions: Path = ROOT / "solutions") -> tuple[str, ...]:
    """Chapter 00, and the chapters with a worked answer that ``DEVICE_SENSITIVE`` matches."""
    return tuple(sorted(
        path.stem for path in solutions.glob("*.ipynb")
        if path.stem in ALWAYS_ON_EVERY_BUILD
        or any(DEVICE_SENSITIVE.search(source) for source in worked_answers(path))))


RUNS = (
    Run("solutions-cuda-build-no-gpu", "solution notebooks whose worked answers touch the device, "
        "on a CUDA build without a GPU", "solutions", "cuda-build-no-gpu", chapters_for_every_build()),
    Run("environment-rocm-build-no-gpu", "chapter 00 on a ROCm build without a GPU",
        "solutions", "rocm-build-no-gpu", ("00_environment",)),
)


def write_run(run: Run, folder: Path) -> list[Path]:
    folder.mkdir(parents=True)
    written = [Path(shutil.copy2(path, folder)) for path in sorted((ROOT / run.source).glob("*.ipynb"))]
    if run.chapters:
        for path in written:
            if path.stem not in run.chapters:
                path.unlink()
        written = [path for path in written if path.stem in run.chapters]
    (folder / "run-env.json").write_text(json.dumps(run.settings(), indent=1) + "\n", encoding="utf-8")
    return written


def write_runs(out_dir: Path) -> dict[str, list[Path]]:
    """Every run, written afresh under ``out_dir`` (whatever was there is removed)."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    return {run.name: write_run(run, out_dir / run.name) for run in RUNS}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    write_runs(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
