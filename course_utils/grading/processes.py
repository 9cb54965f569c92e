"""A bound on how many processes a submission may run, and a sure way to end them all.

As root, RLIMIT_NPROC does not apply, so the grader uses the kernel's pids cgroup controller:
a cgroup per run, with ``pids.max`` set, that the kernel's launcher joins before it starts
anything. Every process the submission creates lands in it, and ending the run kills exactly
those. Where no writable pids controller exists (not root, or no cgroups), RLIMIT_NPROC is the
limit (``sandbox.process_limit`` says where it is counted), and the result says which one applied.
Root without one has no process limit at all (root is exempt from RLIMIT_NPROC): the result says
so, and ``reaper`` ends whatever the run left behind.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path

_CANDIDATES = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))


def _pids_root() -> Path | None:
    if os.geteuid() != 0:
        return None
    for root in _CANDIDATES:
        if (root / "cgroup.procs").exists() and os.access(root, os.W_OK):
            controllers = root / "cgroup.controllers"  # cgroup v2 lists them; v1 has none
            if controllers.exists() and "pids" not in controllers.read_text().split():
                continue
            if not controllers.exists() and root.name != "pids":
                continue
            return root
    return None


def _without_cgroup(as_root: str, otherwise: str) -> str:
    """What limits a run's processes when it has no pids cgroup: RLIMIT_NPROC, except as root,
    which the kernel exempts from it (``reaper`` then ends what the run left behind)."""
    if os.geteuid() == 0:
        return f"none (root{as_root}); leftover processes are ended after the run"
    return f"RLIMIT_NPROC ({otherwise})"


class ProcessGroup:
    """A pids cgroup for one run (``path`` is None when none could be made; see ``how``)."""

    def __init__(self, max_processes: int):
        self.path: Path | None = None
        root = _pids_root()
        if root is None:
            self.how = _without_cgroup(" without a writable pids cgroup", "no writable pids cgroup here")
            return
        path = root / f"course-grading-{secrets.token_hex(6)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_processes))
        except OSError as error:
            why = f"could not make a pids cgroup: {error.strerror}"
            self.how = _without_cgroup(f", and {why}", why)
            return
        self.path = path
        self.how = "pids cgroup"

    def pids(self) -> list[int]:
        if self.path is None:
            return []
        try:
            return [int(line) for line in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def end(self) -> None:
        """Kill every process in the group, then remove it."""
        if self.path is None:
            return
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        try:
            self.path.rmdir()
        except OSError:
            pass
