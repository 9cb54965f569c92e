"""Ending every process a run left behind, however it detached.

A submission's process can leave the kernel's process group (``setsid``) and drop the run's
HOME from its environment (``env -i``); a pids cgroup would still hold it, but as root without
a writable pids controller (Gradescope's Docker, ``--no-sandbox``) nothing else does, and it
could outlive the batch and rewrite results. So a grading process makes itself a *child
subreaper* (``PR_SET_CHILD_SUBREAPER``, Linux): an orphan below it is re-parented to it rather
than to init, and stays its descendant. After a run, ``end_descendants`` kills every descendant
that was not there before the run (the process's own infrastructure) and reaps it.

Used by ``execute`` after each kernel and by the Gradescope wrapper after the whole grader.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from collections.abc import Collection

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants; False where that cannot be done."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(pid: int, keep: Collection[int] = ()) -> list[int]:
    """Every process below ``pid``, read from /proc; ``keep`` and what lies below them left out."""
    tree: dict[int, list[int]] = {}
    if not os.path.isdir("/proc"):
        return []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                ppid = int(file.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        tree.setdefault(ppid, []).append(int(entry))
    found, todo = [], [child for child in tree.get(pid, []) if child not in keep]
    while todo:
        child = todo.pop()
        found.append(child)
        todo += [grandchild for grandchild in tree.get(child, []) if grandchild not in keep]
    return found


def end_descendants(keep: Collection[int] = (), timeout_s: float = 5.0) -> int:
    """Kill every descendant of this process but ``keep`` (and theirs), reap those that become
    its children, and return how many were killed.

    Reaping is by pid, never ``waitpid(-1)``: a status that belongs to a child this process
    started on purpose (a ``subprocess.Popen`` it still waits for) is left alone.
    """
    ended: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        left = descendants(os.getpid(), keep)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                ended.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in left:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not (yet) ours: its parent reaps it, or it comes to us
                pass
        if not left or time.monotonic() > deadline:
            return len(ended)
        time.sleep(0.05)
