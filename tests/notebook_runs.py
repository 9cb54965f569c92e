"""The notebook runs that `./course test` adds to notebooks/ and solutions/.

A learner's machine is rarely the CI's: PyPI's default torch on Linux is a CUDA build, and most
laptops that get it have no NVIDIA GPU; some have ROCm. A learner who gives up and pastes a
displayed solution must get a passing check. Each run below is a folder of notebook copies with
a ``run-env.json`` that says how they run (conftest.py reads it when a notebook's kernel starts):

    python tests/notebook_runs.py OUT_DIR      # writes OUT_DIR/<run>/*.ipynb and run-env.json

Copies run from any folder: the notebooks find the course's files through ``course_utils``.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import pasted_solutions  # noqa: E402  (tests/ is not a package)

SIMULATOR = "tests/simulated_machine"  # relative to the course; see its sitecustomize.py


@dataclass(frozen=True)
class Run:
    name: str
    label: str  # how the test command's summary names it
    source: str  # "solutions", or "pasted": learner notebooks with every solution pasted in
    machine: str  # a machine of tests/simulated_machine, or "" for this one
    chapters: tuple[str, ...] = ()  # all when empty

    def settings(self) -> dict[str, str]:
        settings = {"LABEL": self.label, "COURSE_STRICT": "1"}
        if self.machine:
            settings.update(COURSE_SIMULATED_MACHINE=self.machine, PYTHONPATH=SIMULATOR)
        return settings


RUNS = (
    Run("solutions-cuda-build-no-gpu", "solution notebooks on a CUDA build without a GPU",
        "solutions", "cuda-build-no-gpu"),
    Run("pasted-solutions-cuda-build-no-gpu",
        "learner notebooks, every displayed solution pasted in, on a CUDA build without a GPU",
        "pasted", "cuda-build-no-gpu"),
    Run("environment-rocm-build-no-gpu", "chapter 00 on a ROCm build without a GPU",
        "solutions", "rocm-build-no-gpu", ("00_environment",)),
)


def write_run(run: Run, folder: Path) -> list[Path]:
    folder.mkdir(parents=True)
    if run.source == "pasted":
        written = pasted_solutions.write_pasted(folder)
    else:
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
