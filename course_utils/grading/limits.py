"""Start a command with resource limits and an environment of our choosing.

``python -m course_utils.grading.limits [--memory-mb M] [--max-processes P] [--max-file-mb F]
[--cpu-seconds S] [--cgroup DIR] [--records-fifo PATH] [--env KEY=VALUE ...] -- COMMAND...``

Limits are set on this process and then it ``exec``s the command, which inherits them. Run as
root, RLIMIT_NPROC means nothing; the grader then passes ``--cgroup``, a pids cgroup (see
``processes``) that this process joins, so everything it starts is counted and can be ended.

``--max-processes`` sets RLIMIT_NPROC to the threads this process's user runs now plus the
number given. The grader runs a second launcher, with ``--max-processes`` only, inside the
sandbox's own user namespace, where the count starts from the sandbox alone
(``sandbox.nproc_inside_sandbox`` says why); that one has no ``--env`` and keeps the
environment it was given.

``--memory-mb`` caps writable private memory (RLIMIT_DATA: the heap, and every array and
tensor on the CPU), not address space (RLIMIT_AS). PyPI's CUDA build of torch maps about 3 GB
of libraries and, on a GPU, reserves far more address space than the machine has memory; under
an address-space cap of 3 GB it cannot even be imported, and every notebook would score zero.
Memory on the GPU is not capped by this.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys


def _set(limit: int, value: int) -> None:
    _, hard = resource.getrlimit(limit)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(limit, (value, value))


def _tasks_of(uid: int) -> int:
    """How many threads ``uid`` runs now: what the kernel counts against RLIMIT_NPROC (every
    thread, not every process: a torch process with 40 threads uses 40 of it)."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                pass
    return count


def _end_with_parent() -> None:
    """The command (bwrap, or the kernel) gets SIGKILL when the grading worker that started it
    ends, however it ends: a grader stopped with SIGTERM or SIGKILL leaves no kernel behind.
    Linux only; it lasts across the exec below."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m course_utils.grading.limits")
    parser.add_argument("--memory-mb", type=int)
    parser.add_argument("--max-processes", type=int)
    parser.add_argument("--max-file-mb", type=int)
    parser.add_argument("--cpu-seconds", type=int)
    parser.add_argument("--cgroup", help="a pids cgroup folder to join before starting")
    parser.add_argument("--env", action="append", default=[],
                        help="KEY=VALUE; nothing else is kept (without any --env, all is kept)")
    parser.add_argument("--log", help="send the command's stdout and stderr to this file")
    parser.add_argument("--records-fifo",
                        help="open this named pipe for writing as file descriptor records.RECORDS_FD "
                             "(the grader reads the kernel's check records from it)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")

    _end_with_parent()
    if args.memory_mb:
        _set(resource.RLIMIT_DATA, args.memory_mb * 1024 * 1024)
    if args.max_file_mb:
        _set(resource.RLIMIT_FSIZE, args.max_file_mb * 1024 * 1024)
    if args.cpu_seconds:
        _set(resource.RLIMIT_CPU, args.cpu_seconds)
    _set(resource.RLIMIT_CORE, 0)
    if args.cgroup:
        with open(os.path.join(args.cgroup, "cgroup.procs"), "w") as procs:
            procs.write(str(os.getpid()))
    elif args.max_processes:
        # The limit counts every thread of the user; leave room for what already runs.
        _set(resource.RLIMIT_NPROC, _tasks_of(os.geteuid()) + args.max_processes)
    if args.records_fifo:
        from course_utils.grading.records import RECORDS_FD

        fifo = os.open(args.records_fifo, os.O_WRONLY)
        os.dup2(fifo, RECORDS_FD)
        os.close(fifo)
    if args.log:
        log = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
    environment = dict(item.split("=", 1) for item in args.env) if args.env else dict(os.environ)
    os.execvpe(command[0], command, environment)


if __name__ == "__main__":
    main(sys.argv[1:])
