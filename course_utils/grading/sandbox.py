"""How a learner's kernel starts: limits, a scrubbed environment, and bubblewrap.

Grading needs a working sandbox: ``choose_sandbox`` tries bubblewrap once (a trial run in a
run folder of its own) and refuses, with the reason and how to fix it, when it cannot sandbox;
grading without one happens only when the caller says so (``--no-sandbox``).

The sandbox is an allow-list. A kernel sees the operating system's programs and libraries
(``/usr`` and its links, a few files of ``/etc`` that the dynamic loader and Python read), the
Python it runs on (its prefix and base prefix, read-only), its own run folder, and in it a copy
of the course's package made for this run (read-only: ``RunFolder.package``, copied from the
one ``package_copy`` prepares once). Nothing else of
the file system exists in there: no home folder, no course folder (so no ``solutions/`` and no
``.git``), no submissions, no results, no other run, and an empty ``/tmp``, wherever the course
and the submissions live. The chapters' exercise modules, which hold the reference solutions,
are in the copy only until the kernel has loaded them (``kernel_probe.setup``); the grader then
deletes them (``RunFolder.forget_exercise_sources``), so no code of the submission can read them.

The kernel talks to the grader over Unix sockets (ZeroMQ's ipc transport) in the run's own
folder, so the sandbox can drop the network entirely, and a pid namespace ends every process
the kernel started when it ends. The environment holds only what Python needs: nothing says
that grading is running.
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

from course_utils.grading.package_copy import chapter_modules, copy_package, exercise_files

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
    """A run's private folder: ``home``, ``run`` (the kernel's cwd) and ``tmp`` are writable;
    ``package`` is this run's copy of the course's package and data, read-only to the kernel."""

    root: Path
    home: Path = field(init=False)
    run: Path = field(init=False)
    kernels: Path = field(init=False)
    package: Path = field(init=False)
    etc: Path = field(init=False)
    records: Path = field(init=False)

    def __post_init__(self):
        self.home, self.run, self.kernels = self.root / "home", self.root / "run", self.root / "kernels"
        self.package, self.etc = self.root / "course", self.root / "etc"
        # Beside the folder, not in it: a sandboxed kernel cannot see it (records.Channel).
        self.records = self.root.parent / f"{self.root.name}.records"
        for folder in (self.home, self.run, self.root / "tmp", self.kernels / "grading", self.etc):
            folder.mkdir(parents=True, exist_ok=True)
        if not self.package.exists():
            copy_package(RUNS_ROOT, self.package)
        # Who the kernel is, for the few libraries that ask the system (getpass, pwd): this
        # user only, not the machine's list of users.
        uid, gid = (os.getuid(), os.getgid()) if hasattr(os, "getuid") else (1000, 1000)
        (self.etc / "passwd").write_text(f"learner:x:{uid}:{gid}:learner:{self.home}:/bin/sh\n")
        (self.etc / "group").write_text(f"learner:x:{gid}:\n")

    def forget_exercise_sources(self) -> None:
        """Delete the chapters' exercise modules from this run's package copy: called once the
        kernel has loaded them, before any code of the submission runs."""
        for path in exercise_files(self.package):
            path.unlink(missing_ok=True)
        for module in chapter_modules():  # a folder left empty would import as a namespace package
            shutil.rmtree(self.package / "course_utils" / "exercises" / module, ignore_errors=True)


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
        # The run's copy of the package, ahead of the course's own (an editable install points
        # at the course folder, which a sandboxed kernel cannot see).
        "PYTHONPATH": str(folder.package),
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
    }


# One per user: on a machine others share (a cluster node), a folder someone else made first
# would be theirs, and this grader could not make its run folders in it.
RUNS_ROOT = Path(tempfile.gettempdir()) / f"course-grading-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def python_roots() -> list[Path]:
    """The Python a kernel runs on: its environment (a venv) and the installation under it."""
    roots = []
    for path in (Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parents[1]):
        for candidate in (path, path.resolve()):
            if candidate not in roots:
                roots.append(candidate)
    return roots


# The system a kernel sees, read-only: programs and libraries, and the files of /etc that the
# dynamic loader and Python's standard library read. /etc/passwd and /etc/group are the run's own.
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                "/etc/nsswitch.conf", "/etc/alternatives", "/etc/os-release")


def _under(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def bubblewrap_prefix(folder: RunFolder, hidden: list[Path]) -> list[str]:
    """bwrap's arguments: an allow-list of what the kernel sees (see the module's docstring).

    ``hidden`` (the submissions, the results, ``--hide`` folders) cannot be seen anyway, unless
    one lies inside what the kernel must see (a results folder inside the Python's prefix, say):
    such a folder is covered with an empty one.
    """
    # bwrap by its full path: the one on the grader's PATH, which the trial run tried, not
    # whichever one the kernel's own PATH would find
    args = [shutil.which("bwrap") or "bwrap"]
    for name in SYSTEM_FOLDERS:
        path = Path(name)
        if path.is_symlink():  # a merged /usr: /bin -> usr/bin
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    for name in SYSTEM_FILES:
        if os.path.lexists(name):
            args += ["--ro-bind", name, name]
    args += ["--ro-bind", str(folder.etc / "passwd"), "/etc/passwd",
             "--ro-bind", str(folder.etc / "group"), "/etc/group",
             "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind-try", "/sys", "/sys"]
    seen = [Path(name) for name in SYSTEM_FOLDERS]
    for root in python_roots():
        if root.is_dir() and not any(_under(root, other) for other in seen):
            args += ["--ro-bind", str(root), str(root)]
            seen.append(root)
    args += ["--bind", str(folder.root), str(folder.root),
             "--ro-bind", str(folder.package), str(folder.package)]
    needed = [*python_roots(), folder.package]
    for path in hidden:
        if path.is_dir() and any(_under(path, other) for other in [*seen, folder.root]) and not any(
                _under(inside, path) for inside in needed):
            args += ["--tmpfs", str(path.resolve())]
    # Everything outside the run folder and /dev/shm is read-only, the sandbox's own root and
    # its private /tmp included (the folders bwrap made there to mount things on: a course that
    # lives under /tmp would otherwise look writable to a submission). TMPDIR is the run's own.
    args += ["--remount-ro", "/tmp", "--remount-ro", "/", "--unshare-all", "--cap-drop", "ALL", "--die-with-parent",
             "--new-session", "--chdir", str(folder.run)]
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
        command = [*bubblewrap_prefix(folder, []), sys.executable, "-c",
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
    inside = nproc_inside_sandbox(sandbox, cgroup)
    launcher = [sys.executable, "-m", "course_utils.grading.limits",
                "--memory-mb", str(limits.memory_mb),
                "--max-file-mb", str(limits.max_file_mb),
                "--log", str(folder.root / "kernel.log"),
                "--records-fifo", str(folder.records)]
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
