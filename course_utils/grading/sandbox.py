"""How a learner's kernel starts: limits, a scrubbed environment, and bubblewrap where it exists.

The kernel talks to the grader over Unix sockets (ZeroMQ's ipc transport) in the run's own
folder, so the sandbox can drop the network entirely. Inside bubblewrap the whole file system
is read-only, the instructor's folders (solutions, submissions, results, other runs) are
replaced by empty ones, and a pid namespace ends every process the kernel started when it
ends. The environment holds only what Python needs: nothing says that grading is running.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

@dataclass
class Limits:
    cell_timeout_s: int = 60
    notebook_timeout_s: int = 600
    memory_mb: int = 3072
    max_processes: int = 64
    max_file_mb: int = 64
    output_cap_kb: int = 512


@dataclass
class RunFolder:
    """A run's private folder: ``home`` and ``run`` (the kernel's cwd) are writable."""

    root: Path
    home: Path = field(init=False)
    run: Path = field(init=False)
    kernels: Path = field(init=False)

    def __post_init__(self):
        self.home, self.run, self.kernels = self.root / "home", self.root / "run", self.root / "kernels"
        for folder in (self.home, self.run, self.run / "probes", self.kernels / "grading"):
            folder.mkdir(parents=True, exist_ok=True)


def sandbox_status() -> str:
    """"bubblewrap", or "none: <why>" — said plainly in every result."""
    if not sys.platform.startswith("linux"):
        return f"none: bubblewrap needs Linux (this is {sys.platform})"
    if shutil.which("bwrap") is None:
        return "none: bwrap (bubblewrap) is not installed"
    if os.environ.get("COURSE_GRADING_NO_SANDBOX") == "1":
        return "none: switched off with COURSE_GRADING_NO_SANDBOX=1"
    return "bubblewrap"


def kernel_environment(folder: RunFolder) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    return {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(folder.home),
        "TMPDIR": str(folder.root / "tmp"),
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
    }


RUNS_ROOT = Path(tempfile.gettempdir()) / "course-grading"


def _needed_inside() -> list[Path]:
    """What the kernel must see: its Python and the course's own package."""
    import course_utils

    return [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve(),
            Path(course_utils.__file__).resolve().parents[1]]


def _under(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def bubblewrap_prefix(folder: RunFolder, hidden: list[Path]) -> list[str]:
    """bwrap's arguments: the system read-only, hidden folders empty, only this run writable.

    /tmp is replaced by an empty one unless the course or its Python lives there (a clone in
    /tmp, as CI may make); every run folder lies in RUNS_ROOT, which is always hidden, so no
    kernel sees another run's files.
    """
    args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    tmp = Path(tempfile.gettempdir())
    if not any(_under(path, tmp) for path in _needed_inside()):
        args += ["--tmpfs", str(tmp.resolve())]
    for path in [*hidden, RUNS_ROOT]:
        if path.is_dir() and not any(_under(needed, path) for needed in _needed_inside()):
            args += ["--tmpfs", str(path.resolve())]
    args += ["--bind", str(folder.root), str(folder.root)]
    args += ["--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
             "--chdir", str(folder.run)]
    return args


def write_kernel_spec(
    folder: RunFolder, limits: Limits, sandbox: str, hidden: list[Path], cgroup: Path | None
) -> str:
    """A kernelspec in the run folder whose argv applies all of the above; returns its name."""
    (folder.root / "tmp").mkdir(exist_ok=True)
    launcher = [sys.executable, "-m", "course_utils.grading.limits",
                "--memory-mb", str(limits.memory_mb),
                "--max-processes", str(limits.max_processes),
                "--max-file-mb", str(limits.max_file_mb),
                "--log", str(folder.root / "kernel.log")]
    if cgroup is not None:
        launcher += ["--cgroup", str(cgroup)]
    for key, value in kernel_environment(folder).items():
        launcher += ["--env", f"{key}={value}"]
    launcher.append("--")
    if sandbox == "bubblewrap":
        launcher += bubblewrap_prefix(folder, hidden)
    launcher += [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": launcher, "display_name": "grading", "language": "python"}
    (folder.kernels / "grading" / "kernel.json").write_text(json.dumps(spec))
    return "grading"
