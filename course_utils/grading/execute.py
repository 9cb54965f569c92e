"""Run an assembled notebook in a limited kernel and collect each probe's record at once.

Records arrive through a pipe only the kernel's launcher opened (``records``), and each is taken
the moment its probe cell finishes. Once the first cell (the grader's set-up) has loaded the
exercises, their source files are deleted from the run's copy of the package. A timeout, a dead
kernel or a missing record ends the run there; the scoring step gives every exercise not yet
recorded 0, with the reason.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
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
from course_utils.grading.records import Channel
from course_utils.grading.sandbox import Limits, RunFolder, nproc_inside_sandbox, write_kernel_spec


@dataclass
class Execution:
    records: dict[str, object] = field(default_factory=dict)  # check grade_id → plain record
    # check grade_id → why its record cannot be used (sent twice, the channel written to)
    record_problems: dict[str, str] = field(default_factory=dict)
    answer_errors: dict[str, str] = field(default_factory=dict)  # answer grade_id → "Type: msg"
    # The first error in a cell that is not an answer cell (the course's imports, a
    # demonstration): when every check then has no result, this says why.
    first_course_error: str | None = None
    stopped: str | None = None  # why the run ended early, if it did
    # Where it ended: the index of the cell that was running, in the assembled notebook.
    stopped_at: int | None = None
    truncated_outputs: int = 0
    capped_cells: set[int] = field(default_factory=set)  # cells whose output went past the cap
    process_limit: str = ""
    # When a time limit stopped the run, what the kernel did while the cell ran (``KernelTime``).
    kernel_time: "KernelTime | None" = None

    @property
    def starved(self) -> bool:
        return self.kernel_time is not None and self.kernel_time.starved


def first_line(source: str, width: int = 70) -> str:
    """A cell's first line of code, to name the cell in a message."""
    lines = [line.strip() for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]
    line = lines[0] if lines else "(an empty cell)"
    return line if len(line) <= width else line[: width - 1] + "…"


def cell_named(assembly: Assembly, index: int) -> str:
    """How a message names cell ``index`` of the assembled notebook: whose it is, and its first line."""
    source = assembly.notebook.cells[index].source
    if index in assembly.answer_cells:
        whose = f"your answer cell for {assembly.answer_cells[index]}"
    elif index in assembly.cell_of_probe:
        probe = assembly.cell_of_probe[index]
        whose, source = f"the check of {probe.exercise}", probe.check_source or source
    else:
        whose = f"cell {index} (the course's own)"
    return f"{whose}, `{first_line(source)}`"


class _GradingClient(nbclient.NotebookClient):
    """nbclient with a cap on how much output a cell may produce."""

    def __init__(self, *args, output_cap_bytes: int, **kwargs):
        super().__init__(*args, **kwargs)
        self._output_cap = output_cap_bytes
        self._output_bytes: dict[int, int] = {}
        self.truncated_outputs = 0
        self.capped_cells: set[int] = set()
        self.running: int | None = None  # the index of the cell that runs now

    def output(self, outs, msg, display_id, cell_index):
        size = len(str(msg.get("content", "")))
        used = self._output_bytes.get(cell_index, 0) + size
        self._output_bytes[cell_index] = used
        if used > self._output_cap:
            self.truncated_outputs += 1
            self.capped_cells.add(cell_index)
            return None
        return super().output(outs, msg, display_id, cell_index)


def _take_record(channel: Channel, name: str) -> tuple[object, str | None]:
    payload, problem = channel.take(name)
    if payload is None:
        return None, problem
    try:
        return plain.loads(payload), None
    except Exception:  # a damaged record is as good as none
        return None, "the check's record could not be read"


@dataclass
class KernelTime:
    """How a cell spent its wall time, from the scheduler's own counts (Linux's
    ``/proc/PID/task/TID/schedstat``: nanoseconds on a CPU, nanoseconds runnable but waiting for
    one), summed over the kernel's processes and threads. ``waited`` is None where the system
    does not keep the second count."""

    seconds: float
    computed: float  # CPU seconds
    waited: float | None  # seconds runnable, waiting for a core that other work held

    @property
    def starved(self) -> bool:
        """Other work held the kernel back: it waited for a core for at least ``WAITED_SHARE`` of
        the time (where that is not counted: it got less than ``BUSY_BELOW`` of a core)."""
        if self.seconds <= 0:
            return False
        if self.waited is not None:
            return self.waited / self.seconds >= WAITED_SHARE
        return self.computed / self.seconds < BUSY_BELOW

    def words(self) -> str:
        """What the counts say about the timeout, in the reason's words."""
        if self.seconds <= 0:
            return ""
        share = self.computed / self.seconds
        if self.starved:
            waited = "" if self.waited is None else f" and waited {self.waited:.0f} s for one"
            return f"; the kernel got {share:.0%} of a core{waited} meanwhile: the machine was busy with other work"
        if share >= BUSY_BELOW:
            return f"; the kernel used {share:.0%} of a core all along: the cell's own work took that long"
        return (f"; the kernel used {share:.0%} of a core and seldom waited for one: the cell was waiting "
                f"(a sleep, input, a lock), not computing")


def scheduler_counts(pids) -> tuple[float, float | None]:
    """(CPU seconds, seconds waiting for a CPU) the processes ``pids`` have had so far, every
    thread counted; the waiting is None where ``schedstat`` is missing (CPU time then comes from
    ``/proc/PID/stat``)."""
    computed = waited = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as file:
                    on_cpu, waiting = file.read().split()[:2]
                computed += int(on_cpu)
                waited += int(waiting)
            except (OSError, ValueError):
                return _stat_seconds(pids), None
    return computed / 1e9, waited / 1e9


def _stat_seconds(pids) -> float:
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, ValueError, IndexError):
            pass
    return total / ticks


# A timed-out cell whose kernel waited for a core this share of the time or more was starved by
# other work on the machine: the grader grades that learner again, alone (batch.run_batch). A
# cell that computed, or slept, without waiting would have run past its limit on an idle
# machine too. Where waiting is not counted: a kernel that got less than BUSY_BELOW of a core.
WAITED_SHARE = 0.2
BUSY_BELOW = 0.8


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


def _close_sockets(client: nbclient.NotebookClient, km: AsyncKernelManager) -> None:
    """Close the kernel client's channels and the manager's control socket and ZeroMQ context.

    nbclient stops the client's channels only when it made the kernel manager itself; this one
    is the grader's (``km=``), so its shell, iopub, stdin and control sockets would stay open
    until the garbage collector found them, each with a ``ResourceWarning: Unclosed socket`` on
    the instructor's console. Whatever fails here fails quietly: the run is over."""
    kc = getattr(client, "kc", None)
    if kc is not None:
        try:
            kc.stop_channels()
        except Exception:
            pass
        client.kc = None
    try:
        km._close_control_socket()
    except Exception:
        pass
    try:
        if getattr(km, "_created_context", False) and not km.context.closed:  # its own, made for this run
            km.context.destroy(linger=0)
    except Exception:
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
    channel = Channel(folder.records)
    asyncio.get_running_loop().add_reader(channel.fd, channel.drain)
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
        content = (execute_reply or {}).get("content", {})
        if cell_index == 0:  # the grader's set-up has loaded the exercises: their files go
            folder.forget_exercise_sources()
            if content.get("status") == "error":
                result.first_course_error = (f"the grader's set-up cell raised {content.get('ename')}: "
                                             f"{content.get('evalue')}")[:300]
        probe = assembly.cell_of_probe.get(cell_index)
        if probe is not None:
            record, problem = _take_record(channel, probe.record_name)
            if record is not None:
                result.records[probe.grade_id] = record
            elif problem is not None:
                result.record_problems[probe.grade_id] = problem
        answer_id = assembly.answer_cells.get(cell_index)
        if content.get("status") == "error":
            error = f"{content.get('ename')}: {content.get('evalue')}"[:300]
            if answer_id is not None:
                result.answer_errors[answer_id] = error
            elif probe is None and result.first_course_error is None:
                result.first_course_error = f"cell {cell_index + 1} (the course's own) raised {error}"

    started = {}

    def kernel_counts() -> tuple[float, float | None]:
        return scheduler_counts(reaper.descendants(os.getpid(), keep=infrastructure))

    def cell_starts(cell, cell_index, **kwargs):
        client.running = cell_index
        started.update(time=time.monotonic(), counts=kernel_counts())

    def spent() -> KernelTime | None:
        if "time" not in started:
            return None
        (computed, waited), (computed0, waited0) = kernel_counts(), started["counts"]
        return KernelTime(time.monotonic() - started["time"], max(0.0, computed - computed0),
                          None if waited is None or waited0 is None else max(0.0, waited - waited0))

    client.on_cell_executed = cell_done
    client.on_cell_execute = cell_starts
    try:
        await asyncio.wait_for(client.async_execute(), timeout=limits.notebook_timeout_s)
    except CellTimeoutError:  # first: it is a TimeoutError too
        result.kernel_time = spent()
        result.stopped = (f"timeout: {{cell}} ran past the cell time limit of {limits.cell_timeout_s} s "
                          f"(--cell-timeout){_words(result.kernel_time)}")
    except asyncio.TimeoutError:
        result.kernel_time = spent()
        result.stopped = (f"timeout: the notebook ran past its time limit of {limits.notebook_timeout_s} s "
                          f"(--notebook-timeout) during {{cell}}{_words(result.kernel_time)}")
    except DeadKernelError:
        result.stopped = (f"kernel died during {{cell}}: the kernel exited, or used more memory than grading "
                          f"allows ({limits.memory_mb} MB, --memory-mb)")
    except Exception as error:  # anything else nbclient raises: fail closed, batch goes on
        result.stopped = f"the run failed during {{cell}}: {type(error).__name__}: {str(error)[:200]}"
    finally:
        _kill_everything(km, folder)
        group.end()
        try:
            await asyncio.wait_for(km.shutdown_kernel(now=True), timeout=10)
        except Exception:
            pass
        _close_sockets(client, km)
        reaper.end_descendants(keep=infrastructure)
        asyncio.get_running_loop().remove_reader(channel.fd)
        channel.close()
        result.truncated_outputs = client.truncated_outputs
        result.capped_cells = set(client.capped_cells)
        if result.stopped is not None:
            result.stopped_at = client.running
            named = cell_named(assembly, client.running) if client.running is not None else "the kernel's start"
            result.stopped = result.stopped.replace("{cell}", named)
    return result


def _words(spent: KernelTime | None) -> str:
    return "" if spent is None else spent.words()


def execute(assembly: Assembly, folder: RunFolder, limits: Limits, sandbox: str, hidden: list[Path]) -> Execution:
    return asyncio.run(_run(assembly, folder, limits, sandbox, hidden))
