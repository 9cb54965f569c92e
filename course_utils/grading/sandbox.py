"""How a learner's kernel starts: limits, a scrubbed environment, and bubblewrap.

Grading needs a working sandbox: ``choose_sandbox`` tries bubblewrap once (a trial run in a
run folder of its own) and refuses, with the reason and how to fix it, when it cannot sandbox;
grading without one happens only when the caller says so (``--no-sandbox``).

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
import subprocess
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


# One per user: on a machine others share (a cluster node), a folder someone else made first
# would be theirs, and this grader could not make its run folders in it.
RUNS_ROOT = Path(tempfile.gettempdir()) / f"course-grading-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


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
    # bwrap by its full path: the one on the grader's PATH, which the trial run tried, not
    # whichever one the kernel's own PATH would find
    args = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
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


SANDBOXED = "bubblewrap"
"""The ``sandbox`` of a sandboxed run; an unsandboxed one is ``"none: <why>"``."""

TRIAL_TIMEOUT_S = 60


class SandboxUnavailable(RuntimeError):
    """No sandbox here, and grading without one was not asked for: nothing is graded."""


INSTALL_HELP = """\
The grader runs every submission as untrusted code inside bubblewrap (bwrap): without it a
submission can read and change your files (the solutions, other learners' work, the results)
and use the network. Either:

  * install bubblewrap (it exists for Linux only):
      Debian, Ubuntu:     sudo apt install bubblewrap
      Fedora, RHEL:       sudo dnf install bubblewrap
      Arch:               sudo pacman -S bubblewrap
      openSUSE:           sudo zypper install bubblewrap
      macOS, Windows:     there is no bubblewrap; grade inside a Linux virtual machine (or WSL 2,
                          or a container that allows user namespaces) with bubblewrap installed
    bwrap must be able to create namespaces: if it is installed but fails, unprivileged user
    namespaces are probably switched off (sysctl kernel.unprivileged_userns_clone,
    user.max_user_namespaces, Ubuntu's kernel.apparmor_restrict_unprivileged_userns) or a
    container forbids them;
  * or pass --no-sandbox to grade without a sandbox, knowingly: only for submissions you trust.
    Every result then says "sandbox": "none: ..."."""


def bubblewrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox a kernel here, or None when it can.

    Being installed is not enough (user namespaces may be switched off, a container may forbid
    them), so this makes a sandbox as a kernel's would be made, in a run folder of its own,
    and checks that Python ran inside it.
    """
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux (this is {sys.platform})"
    if shutil.which("bwrap") is None:
        return "bwrap (bubblewrap) is not installed (not found on PATH)"
    token = "sandbox-trial-ok"
    RUNS_ROOT.mkdir(mode=0o700, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trial-", dir=RUNS_ROOT) as root:
        folder = RunFolder(Path(root))
        (folder.root / "tmp").mkdir()
        command = [*bubblewrap_prefix(folder, []), sys.executable, "-I", "-c",
                   f"import course_utils; print({token!r})"]
        try:
            run = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                 timeout=TRIAL_TIMEOUT_S, env=kernel_environment(folder))
        except subprocess.TimeoutExpired:
            return f"bwrap is installed but its trial run did not finish in {TRIAL_TIMEOUT_S} s"
        except OSError as error:
            return f"bwrap is installed but could not be started: {error}"
    if run.returncode == 0 and run.stdout.strip() == token:
        return None
    said = " ".join((run.stderr or run.stdout).split())[-300:] or "no message"
    return (f"bwrap is installed but cannot create a sandbox here (its trial run exited with "
            f"{run.returncode}: {said})")


def choose_sandbox(no_sandbox: bool = False) -> str:
    """The sandbox to grade with: ``SANDBOXED``, or ``"none: <why>"`` only when ``no_sandbox``.

    Raises ``SandboxUnavailable`` (saying why, and how to fix it) when bubblewrap cannot
    sandbox here and grading without a sandbox was not asked for.
    """
    problem = bubblewrap_problem()
    if no_sandbox:
        return "none: switched off with --no-sandbox" + (f" ({problem})" if problem else "")
    if problem is None:
        return SANDBOXED
    raise SandboxUnavailable(f"Refusing to grade: no sandbox. {problem}.\n\n{INSTALL_HELP}")


def sandbox_status() -> str:
    """What grading gets here unless told otherwise: ``SANDBOXED``, or ``"none: <why>"``."""
    problem = bubblewrap_problem()
    return SANDBOXED if problem is None else f"none: {problem}"


def check_sandbox(sandbox: str) -> str:
    """``sandbox`` itself, if it is one the kernel spec knows; anything else is an error."""
    if sandbox == SANDBOXED or sandbox.startswith("none"):
        return sandbox
    raise ValueError(f"unknown sandbox {sandbox!r}: {SANDBOXED!r} or 'none: <why>'")


def _nproc_counted_per_user_namespace() -> bool:
    """Since Linux 5.14 RLIMIT_NPROC counts a user's processes per user namespace (ucounts)."""
    try:
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
    except (AttributeError, ValueError):
        return False
    return (major, minor) >= (5, 14)


def nproc_inside_sandbox(sandbox: str, cgroup: Path | None) -> bool:
    """Whether the kernel's RLIMIT_NPROC is set inside bubblewrap's new user namespace.

    Set outside, it has to leave room for every thread the grader's user runs on the machine
    (another shard, another worker, an unrelated program): threads started after it was set
    push the user over it, and a right submission's kernel dies at start. Inside the sandbox's
    own user namespace the kernel counts only the sandbox's processes, so the limit is exactly
    ``max_processes`` whatever else the user runs. Not for root (exempt from RLIMIT_NPROC; a
    pids cgroup, when there is one, limits it), nor on kernels before 5.14, which count
    every process of the uid there too.
    """
    return (check_sandbox(sandbox) == SANDBOXED and cgroup is None and os.geteuid() != 0
            and _nproc_counted_per_user_namespace())


def write_kernel_spec(
    folder: RunFolder, limits: Limits, sandbox: str, hidden: list[Path], cgroup: Path | None
) -> str:
    """A kernelspec in the run folder whose argv applies all of the above; returns its name.

    ``limits (memory, file size, environment, log) -- bwrap ... -- limits --max-processes N --
    ipykernel``: the process limit by the second launcher, inside the sandbox, when
    ``nproc_inside_sandbox``; otherwise by the first.
    """
    (folder.root / "tmp").mkdir(exist_ok=True)
    inside = nproc_inside_sandbox(sandbox, cgroup)
    launcher = [sys.executable, "-m", "course_utils.grading.limits",
                "--memory-mb", str(limits.memory_mb),
                "--max-file-mb", str(limits.max_file_mb),
                "--log", str(folder.root / "kernel.log")]
    if not inside:
        launcher += ["--max-processes", str(limits.max_processes)]
    if cgroup is not None:
        launcher += ["--cgroup", str(cgroup)]
    for key, value in kernel_environment(folder).items():
        launcher += ["--env", f"{key}={value}"]
    launcher.append("--")
    if check_sandbox(sandbox) == SANDBOXED:
        launcher += bubblewrap_prefix(folder, hidden)
    if inside:  # keeps the environment the first one gave
        launcher += [sys.executable, "-m", "course_utils.grading.limits",
                     "--max-processes", str(limits.max_processes), "--"]
    launcher += [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": launcher, "display_name": "grading", "language": "python"}
    (folder.kernels / "grading" / "kernel.json").write_text(json.dumps(spec))
    return "grading"
