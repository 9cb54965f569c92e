"""Run an assembled notebook in a limited kernel and collect each probe's record at once.

Records are read the moment their probe cell finishes, before any more learner code runs, so
a later cell cannot rewrite them. A timeout, a dead kernel or a missing record ends the run
there; the scoring step gives every exercise not yet recorded 0, with the reason.
"""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

import nbclient
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from course_utils.exercises import plain
from course_utils.grading import reaper
from course_utils.grading.assemble import Assembly
from course_utils.grading.processes import ProcessGroup
from course_utils.grading.sandbox import Limits, RunFolder, nproc_inside_sandbox, write_kernel_spec


@dataclass
class Execution:
    records: dict[str, object] = field(default_factory=dict)  # check grade_id → plain record
    answer_errors: dict[str, str] = field(default_factory=dict)  # answer grade_id → "Type: msg"
    # The first error in a cell that is not an answer cell (the course's imports, a
    # demonstration): when every check then has no result, this says why.
    first_course_error: str | None = None
    stopped: str | None = None  # why the run ended early, if it did
    truncated_outputs: int = 0
    process_limit: str = ""


class _GradingClient(nbclient.NotebookClient):
    """nbclient with a cap on how much output a cell may produce."""

    def __init__(self, *args, output_cap_bytes: int, **kwargs):
        super().__init__(*args, **kwargs)
        self._output_cap = output_cap_bytes
        self._output_bytes: dict[int, int] = {}
        self.truncated_outputs = 0

    def output(self, outs, msg, display_id, cell_index):
        size = len(str(msg.get("content", "")))
        used = self._output_bytes.get(cell_index, 0) + size
        self._output_bytes[cell_index] = used
        if used > self._output_cap:
            self.truncated_outputs += 1
            return None
        return super().output(outs, msg, display_id, cell_index)


def _read_record(folder: RunFolder, name: str):
    path = folder.run / "probes" / name
    if not path.exists():
        return None
    try:
        return plain.load(path)
    except Exception:  # a damaged record is as good as none
        return None
    finally:
        for stale in (path, path.with_suffix(".npz")):
            stale.unlink(missing_ok=True)


def _kill_everything(km: AsyncKernelManager, folder: RunFolder) -> None:
    """End the kernel and every process it started, however they tried to slip away.

    The launcher's process group holds bwrap (whose pid namespace takes all its processes
    with it) or the kernel. Without a sandbox a process may start a session of its own, so
    every process whose environment carries this run's HOME is ended too; one that also
    dropped its environment is left to ``reaper`` (see ``_run``).
    """
    provisioner = getattr(km, "provisioner", None)
    process = getattr(provisioner, "process", None)
    pid = getattr(process, "pid", None)
    if pid:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    marker = f"HOME={folder.home}".encode() + b"\0"
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as file:
                if marker in file.read():
                    os.kill(int(entry), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def _process_limit(group: ProcessGroup, sandbox: str) -> str:
    """Which process limit the run had, in words, for the result."""
    if group.path is not None or os.geteuid() == 0:
        return group.how
    if nproc_inside_sandbox(sandbox, group.path):
        return "RLIMIT_NPROC in the sandbox's own user namespace (counts only the sandbox's processes)"
    return "RLIMIT_NPROC for the grader's user (the threads it runs now, plus --max-processes)"


async def _run(assembly: Assembly, folder: RunFolder, limits: Limits, sandbox: str, hidden) -> Execution:
    result = Execution()
    # This grading process adopts whatever the run orphans, so that ending the run can find it
    # (a process in a session of its own, with an empty environment, as root without a pids
    # cgroup, is found no other way); what already ran below it is its own and is kept.
    reaper.become_subreaper()
    infrastructure = set(reaper.descendants(os.getpid()))
    group = ProcessGroup(limits.max_processes)
    result.process_limit = _process_limit(group, sandbox)
    kernel_name = write_kernel_spec(folder, limits, sandbox, hidden, group.path)
    km = AsyncKernelManager(
        kernel_name=kernel_name,
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(folder.kernels)]),
        transport="ipc",
        ip=str(folder.root / "ipc"),
        connection_file=str(folder.root / "connection.json"),
    )
    client = _GradingClient(
        assembly.notebook,
        km=km,
        timeout=limits.cell_timeout_s,
        allow_errors=True,
        interrupt_on_timeout=False,
        startup_timeout=120,
        output_cap_bytes=limits.output_cap_kb * 1024,
        resources={"metadata": {"path": str(folder.run)}},
    )

    def cell_done(cell, cell_index, execute_reply):
        probe = assembly.cell_of_probe.get(cell_index)
        if probe is not None:
            record = _read_record(folder, probe.record_name)
            if record is not None:
                result.records[probe.grade_id] = record
        answer_id = assembly.answer_cells.get(cell_index)
        content = (execute_reply or {}).get("content", {})
        if content.get("status") == "error":
            error = f"{content.get('ename')}: {content.get('evalue')}"[:300]
            if answer_id is not None:
                result.answer_errors[answer_id] = error
            elif probe is None and result.first_course_error is None:
                result.first_course_error = f"cell {cell_index + 1} (the course's own) raised {error}"

    client.on_cell_executed = cell_done
    try:
        await asyncio.wait_for(client.async_execute(), timeout=limits.notebook_timeout_s)
    except CellTimeoutError:  # first: it is a TimeoutError too
        result.stopped = f"timeout: a cell ran past {limits.cell_timeout_s} s"
    except asyncio.TimeoutError:
        result.stopped = f"timeout: the notebook ran past {limits.notebook_timeout_s} s"
    except DeadKernelError:
        result.stopped = "kernel died (it exited, or ran out of memory)"
    except Exception as error:  # anything else nbclient raises: fail closed, batch goes on
        result.stopped = f"the run failed: {type(error).__name__}: {str(error)[:200]}"
    finally:
        _kill_everything(km, folder)
        group.end()
        try:
            await asyncio.wait_for(km.shutdown_kernel(now=True), timeout=10)
        except Exception:
            pass
        reaper.end_descendants(keep=infrastructure)
        result.truncated_outputs = client.truncated_outputs
    return result


def execute(assembly: Assembly, folder: RunFolder, limits: Limits, sandbox: str, hidden: list[Path]) -> Execution:
    return asyncio.run(_run(assembly, folder, limits, sandbox, hidden))
