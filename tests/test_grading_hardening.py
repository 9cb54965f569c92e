"""The grader where it used to be weak: the process limit beside other work of the same user,
root without a pids cgroup, the grader's own failures, and shards on a shared file system.

* A user who already runs many threads (another shard, torch) and starts more while a kernel
  starts: the process limit used to count them all, and a right submission's kernel died. It is
  now set inside the sandbox's own user namespace; a fork bomb there still stops at it.
* Root without a writable pids cgroup (Gradescope's Docker, ``--no-sandbox``): a process that
  left the kernel's session and environment (``setsid env -i``) outlived the batch. Every
  grading worker is now a subreaper and ends such processes after each run.
* A grader bug put its traceback on the learner's feedback page; the learner now gets one line,
  the instructor the traceback (stderr and ``grader-errors.log`` in the results folder).
* ``--hide``: a shard's submissions cannot see the other shards' results beside its own.

The grading runs are small (one or two learners, one worker) but real: the grader's CLI.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import grading_fixtures as gf
from grading_fixtures import TENSOR_EXERCISES, TENSORS
from slow_machine import scaled

PYTHON = str(gf.ROOT / ".venv" / "bin" / "python") if (gf.ROOT / ".venv" / "bin" / "python").exists() else sys.executable
MAX_PROCESSES = 24
GRADER_ARGS = ["--workers", "1", "--cell-timeout", f"{scaled(60):g}", "--notebook-timeout", f"{scaled(300):g}",
               "--max-processes", str(MAX_PROCESSES), "--course", str(gf.GRADING_COURSE)]
RUN_TIMEOUT_S = 600
OTHER_UID = 54322  # a user of its own, so nothing else on the machine runs as it


@functools.lru_cache(maxsize=None)
def bubblewrap_problem() -> str | None:
    from course_utils.grading.sandbox import bubblewrap_problem

    return bubblewrap_problem()


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in {"COURSE_STRICT", "COURSE_EXPECT", "NBGRADER_EXECUTION", "COURSE_GRADING_NO_SANDBOX",
                        "COURSE_SIMULATED_MACHINE", "PYTHONPATH"}}
    env.update(COURSE_NO_PROGRESS="1", **extra)
    return env


def grade(command: list[str], env: dict) -> subprocess.CompletedProcess:
    run = subprocess.run(command, cwd=gf.ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=scaled(RUN_TIMEOUT_S))
    assert run.returncode == 0, f"$ {' '.join(command)}\n{run.stdout[-3000:]}\n--- stderr ---\n{run.stderr[-3000:]}"
    return run


def result(out: Path, learner: str) -> dict:
    return json.loads((out / f"{learner}.json").read_text(encoding="utf-8"))


def scores(res: dict) -> dict[str, int]:
    return {name: entry["score"] for name, entry in res["notebooks"][TENSORS]["exercises"].items()}


ALL_RIGHT = dict.fromkeys(TENSOR_EXERCISES, 1)


# --------------------------------------------------------------------------------------------
# 1. The process limit, counted inside the sandbox's own user namespace
# --------------------------------------------------------------------------------------------
def fork_bomb(count: int) -> str:
    """Start ``count`` sleepers at once (fork fails past the process limit, uncaught), then end
    them again; bounded even if no limit held."""
    return textwrap.dedent(
        f"""\
        import subprocess as _sp
        _children = []
        try:
            for _i in range({count}):
                _children.append(_sp.Popen(["sleep", "60"], stdin=_sp.DEVNULL, stdout=_sp.DEVNULL,
                                           stderr=_sp.DEVNULL))
        finally:
            for _child in _children:
                _child.kill()
                _child.wait()
        """
    )


# Runs as the grader's user beside it: holds 3 * MAX_PROCESSES threads from the start, and each
# time a kernel has started (its kernel.log appears, written by the launcher right after it set
# the limits) starts 3 * MAX_PROCESSES more, as another shard's torch would.
THREAD_HOG = textwrap.dedent(
    f"""\
    import glob, os, sys, threading, time
    threading.stack_size(256 * 1024)
    stop = threading.Event()
    def start(n):
        for _ in range(n):
            threading.Thread(target=stop.wait, daemon=True).start()
    start({3 * MAX_PROCESSES})
    print("ready", flush=True)
    seen = set()
    while not os.path.exists(sys.argv[2]):
        for log in glob.glob(os.path.join(sys.argv[1], "*", "run-*", "kernel.log")):
            if log not in seen and len(seen) < 10:
                seen.add(log)
                start({3 * MAX_PROCESSES})
        time.sleep(0.002)
    print(len(seen), threading.active_count(), flush=True)
    """
)


# Opens the one folder that holds Python (a pyenv in /root, say) in a mount namespace of its own,
# on a tmpfs over the closed folder that is the way to it; the machine's own folder is untouched.
OPEN_PYTHON = ('mount --bind "$1/$2" "$0" && mount -t tmpfs -o mode=755 tmpfs "$1" && mkdir "$1/$2" '
               '&& mount --bind "$0" "$1/$2" && shift 2 && exec "$@"')


def as_user(uid: int, base: Path) -> list[str]:
    """The command prefix that runs a command as ``uid``, with this Python usable by it."""
    command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    real = Path(os.path.realpath(PYTHON))
    closed = next((folder for folder in reversed(real.parents) if not os.stat(folder).st_mode & 0o001), None)
    if closed is None:
        return command
    stash = base / "python-stash"
    stash.mkdir(exist_ok=True)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", OPEN_PYTHON, str(stash), str(closed),
            real.relative_to(closed).parts[0], *command]


def _can_sandbox_as(uid: int, base: Path) -> bool:
    env = clean_env(TMPDIR=str(base / "tmp"), HOME=str(base))
    probe = subprocess.run([*as_user(uid, base), PYTHON, "-c",
                            "from course_utils.grading.sandbox import bubblewrap_problem as p; print(p())"],
                           cwd=gf.ROOT, env=env, capture_output=True, text=True, timeout=120)
    return probe.stdout.strip() == "None"


@pytest.fixture(scope="module")
def busy_user():
    """A right submission and a fork bomb, graded as a user of its own that runs many threads,
    and starts more as each kernel starts."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("unshare") is None:
        pytest.skip("needs root, setpriv and unshare, to grade as a user of its own")
    if tuple(int(part) for part in os.uname().release.split(".")[:2]) < (5, 14):
        pytest.skip(f"Linux {os.uname().release} counts RLIMIT_NPROC per uid, not per user namespace")
    base = Path(tempfile.mkdtemp(prefix="grading-busy-user-"))
    try:
        (base / "tmp").mkdir()
        submissions, out = base / "submissions", base / "results"
        gf.write_submission(submissions, "right", gf.submission())
        gf.write_submission(submissions, "forker", gf.submission(prepend={"outer_sum": fork_bomb(3 * MAX_PROCESSES)}))
        for path in [base, *base.rglob("*")]:
            os.chown(path, OTHER_UID, OTHER_UID)
        if not _can_sandbox_as(OTHER_UID, base):
            pytest.skip(f"bubblewrap cannot make a sandbox as uid {OTHER_UID} here")
        user = as_user(OTHER_UID, base)
        env = clean_env(TMPDIR=str(base / "tmp"), HOME=str(base))
        done = base / "done"
        hog = subprocess.Popen([*user, PYTHON, "-c", THREAD_HOG, str(base / "tmp"), str(done)], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        try:
            assert hog.stdout.readline().strip() == "ready"
            run = grade([*user, PYTHON, "-m", "course_utils.grading", str(submissions), "--out", str(out),
                         *GRADER_ARGS], env)
            done.touch()
            kernels, threads = (int(n) for n in hog.stdout.readline().split())
        finally:
            done.touch()
            hog.kill()
            hog.wait()
        yield {"run": run, "out": out, "kernels": kernels, "threads": threads}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_user_busy_with_threads_still_gets_a_right_submission_graded_full_marks(busy_user):
    assert busy_user["kernels"] == 2 and busy_user["threads"] > 3 * 3 * MAX_PROCESSES, busy_user
    right = result(busy_user["out"], "right")
    assert right["sandbox"] == "bubblewrap"
    assert scores(right) == ALL_RIGHT, json.dumps(right, indent=1)
    assert right["process_limit"].startswith("RLIMIT_NPROC in the sandbox's own user namespace"), right


def test_a_fork_bomb_in_the_sandbox_is_still_stopped_by_the_process_limit(busy_user):
    forker = result(busy_user["out"], "forker")
    exercises = forker["notebooks"][TENSORS]["exercises"]
    assert exercises["outer_sum"]["score"] == 0, exercises["outer_sum"]
    assert "BlockingIOError" in exercises["outer_sum"]["reason"], exercises["outer_sum"]
    assert "(--max-processes)" in exercises["outer_sum"]["reason"], exercises["outer_sum"]
    assert scores(forker) == {**ALL_RIGHT, "outer_sum": 0}, json.dumps(forker, indent=1)
    assert forker["process_limit"].startswith("RLIMIT_NPROC in the sandbox's own user namespace"), forker


# --------------------------------------------------------------------------------------------
# 2. Root without a writable pids cgroup: every worker is a subreaper
# --------------------------------------------------------------------------------------------
# The grader with no pids cgroup to be found, as in Gradescope's Docker (/sys/fs/cgroup read-only).
WITHOUT_PIDS_CGROUP = (
    "import sys\n"
    "from course_utils.grading import processes\n"
    "processes._CANDIDATES = ()\n"
    "from course_utils.grading.__main__ import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def detached_sleeper(marker: str) -> str:
    """A process in a session of its own with an empty environment (``setsid env -i``), so that
    neither the kernel's process group nor the run's HOME finds it; ``marker`` on its command line."""
    return textwrap.dedent(
        f"""\
        import subprocess as _sp, sys as _sys
        _sp.Popen(["env", "-i", _sys.executable, "-c", "import time; time.sleep(1000)", {marker!r}],
                  start_new_session=True, stdin=_sp.DEVNULL, stdout=_sp.DEVNULL, stderr=_sp.DEVNULL)
        """
    )


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="the case of root")
def test_root_without_a_pids_cgroup_ends_a_detached_process_after_the_run(tmp_path):
    marker = gf.new_marker("hardening")
    submissions, out = tmp_path / "submissions", tmp_path / "results"
    gf.write_submission(submissions, "leaver", gf.submission(prepend={"outer_sum": detached_sleeper(marker)}))
    try:
        grade([PYTHON, "-c", WITHOUT_PIDS_CGROUP, str(submissions), "--out", str(out), *GRADER_ARGS,
               "--no-sandbox"], clean_env())
        left = gf.processes_with_marker(marker)
        leaver = result(out, "leaver")
        assert left == {}, f"outlived the batch: {left}"
        assert scores(leaver) == ALL_RIGHT, json.dumps(leaver, indent=1)
        assert leaver["process_limit"] == ("none (root without a writable pids cgroup); "
                                           "leftover processes are ended after the run"), leaver
    finally:
        gf.kill_pids(gf.processes_with_marker(marker))


def test_end_descendants_ends_orphans_but_keeps_what_it_is_told(tmp_path):
    """The mechanism alone: a subreaper adopts a grandchild whose parent exited, and ends it;
    a child it was told to keep lives on, and its exit status is still its own to collect."""
    code = textwrap.dedent(
        """\
        import os, subprocess, sys, time
        from course_utils.grading import reaper
        assert reaper.become_subreaper()
        kept = subprocess.Popen(["sleep", "30"])
        subprocess.run(["sh", "-c", "(setsid sleep 30 &) ; exit 0"], check=True)
        time.sleep(0.2)
        orphans = reaper.descendants(os.getpid(), keep={kept.pid})
        ended = reaper.end_descendants(keep={kept.pid})
        alive = kept.poll() is None
        kept.kill()
        print(len(orphans), ended, alive, kept.wait(), reaper.descendants(os.getpid()))
        """
    )
    run = subprocess.run([PYTHON, "-c", code], cwd=gf.ROOT, capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["1", "1", "True", "-9", "[]"], run.stdout + run.stderr


# --------------------------------------------------------------------------------------------
# 3. The grader's own failure: one line for the learner, the traceback for the instructor
# --------------------------------------------------------------------------------------------
def test_a_grader_failure_shows_the_learner_one_line_and_logs_the_traceback(tmp_path, monkeypatch, capsys):
    from course_utils.grading import batch as batch_module
    from course_utils.grading.reports import read_results, write_learner
    from course_utils.grading.sandbox import Limits
    from course_utils.grading.submissions import Learner

    def broken(learner, batch, sandbox):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'")

    monkeypatch.setattr(batch_module, "grade_learner", broken)
    out = tmp_path / "results"
    out.mkdir()
    batch = batch_module.Batch(gf.GRADING_COURSE, tmp_path / "submissions", out, Limits(), no_sandbox=True)
    for learner in ("bob", "dave"):
        write_learner(out, batch_module._grade_safely(Learner(learner, []), batch, "none: a test"))

    bob = result(out, "bob")
    assert bob["problems"] == ["the grader failed on this learner: TypeError: unsupported operand type(s) "
                               "for +: 'int' and 'NoneType'; the instructor's log has the details"], bob
    page = (out / "feedback" / "bob.html").read_text(encoding="utf-8")
    assert "the grader failed on this learner: TypeError" in page
    assert "Traceback" not in page and "batch.py" not in page and "broken" not in page
    log = (out / batch_module.GRADER_ERRORS).read_text(encoding="utf-8")
    assert log.count("Traceback (most recent call last)") == 2, log
    assert "--- the grader failed on bob\n" in log and "--- the grader failed on dave\n" in log
    assert "in broken" in log and "TypeError: unsupported operand" in log
    stderr = capsys.readouterr().err
    assert "--- the grader failed on bob" in stderr and "in broken" in stderr
    # the log is not a result: reports and merging read NAME.json files only
    assert sorted(r["learner"] for r in read_results(out)) == ["bob", "dave"]


# --------------------------------------------------------------------------------------------
# 4. --hide: the other shards' results, beside this shard's
# --------------------------------------------------------------------------------------------
def peeker(sibling: Path) -> str:
    """An answer cell that looks into ``sibling`` (another shard's results folder): right only
    if it sees nothing there, so the score says what it saw."""
    return textwrap.dedent(
        f"""\
        import os as _os
        _seen = []
        for _folder, _dirs, _files in _os.walk({str(sibling.parent)!r}):
            _seen += [_os.path.join(_folder, _name) for _name in _files]
        try:
            _seen.append(open({str(sibling / "carol.json")!r}).read())
        except OSError:
            pass
        if _seen:
            def match_reference(x, reference):
                raise PermissionError(f"saw the other shard: {{_seen}}")
        else:
        """
    ) + textwrap.indent(gf.answer_source("match_reference"), "    ")


@pytest.fixture
def shared_folder():
    """A folder outside the temporary one (which the sandbox always empties), as a shared file
    system's results folder is."""
    parent = Path("/var/tmp")
    if not (parent.is_dir() and os.access(parent, os.W_OK)):
        pytest.skip("needs a writable /var/tmp, a folder the sandbox does not empty by itself")
    folder = Path(tempfile.mkdtemp(prefix="grading-hide-", dir=parent))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(bubblewrap_problem() is not None, reason="needs the sandbox")
def test_hide_keeps_the_other_shards_results_out_of_sight(tmp_path, shared_folder):
    root = shared_folder / "results"
    sibling = root / "shard-2"
    sibling.mkdir(parents=True)
    (sibling / "carol.json").write_text('{"learner": "carol", "total": 7}')
    submissions = tmp_path / "submissions"
    gf.write_submission(submissions, "peeker", gf.submission(answers={"match_reference": peeker(sibling)}))
    out = root / "shard-1"
    grade([PYTHON, "-m", "course_utils.grading", str(submissions), "--out", str(out), *GRADER_ARGS,
           "--hide", str(root)], clean_env())
    res = result(out, "peeker")
    assert res["sandbox"] == "bubblewrap"
    assert scores(res) == ALL_RIGHT, json.dumps(res["notebooks"][TENSORS]["exercises"]["match_reference"], indent=1)
    assert (sibling / "carol.json").exists()


def test_hide_reaches_the_folders_the_sandbox_empties(tmp_path, monkeypatch):
    """``--hide`` goes into ``Batch.hide``, and from there into what the kernel's sandbox
    empties, beside the folders always hidden."""
    from course_utils.grading import __main__ as cli
    from course_utils.grading import batch as batch_module
    from course_utils.grading.submissions import Learner

    seen = {}
    monkeypatch.setattr(cli, "run_batch", lambda batch, *args: seen.setdefault("batch", batch) and ([], 0))
    monkeypatch.setattr(cli, "choose_sandbox", lambda no_sandbox: "bubblewrap")
    submissions = tmp_path / "submissions"
    gf.write_submission(submissions, "alice", gf.submission())
    assert cli.main([str(submissions), "--out", str(tmp_path / "out"), "--course", str(gf.GRADING_COURSE),
                     "--hide", str(tmp_path / "a"), "--hide", str(tmp_path / "b")]) == 0
    batch = seen["batch"]
    assert batch.hide == ((tmp_path / "a").resolve(), (tmp_path / "b").resolve())

    class Hidden(Exception):
        pass

    def execute(assembly, folder, limits, sandbox, hidden):
        raise Hidden(hidden)

    monkeypatch.setattr("course_utils.grading.execute.execute", execute)
    learner = Learner("alice", sorted((submissions / "alice").glob("*.ipynb")))
    with pytest.raises(Hidden) as hidden:
        batch_module.grade_learner(learner, batch, "bubblewrap")
    assert hidden.value.args[0][-3:] == [batch.out, *batch.hide]


@pytest.mark.parametrize("sandbox, euid, new_kernel, inside", [
    ("bubblewrap", 1000, True, True),  # the usual case: set in the sandbox's user namespace
    ("bubblewrap", 1000, False, False),  # before Linux 5.14 that would count every uid's process
    ("none: a test", 1000, True, False),  # no sandbox, no namespace of its own
    ("bubblewrap", 0, True, False),  # root: exempt from RLIMIT_NPROC (a pids cgroup limits it)
])
def test_the_process_limit_is_set_after_bwrap_only_where_the_count_starts_in_the_sandbox(
        tmp_path, monkeypatch, sandbox, euid, new_kernel, inside):
    from course_utils.grading import sandbox as sandbox_module

    monkeypatch.setattr(sandbox_module.os, "geteuid", lambda: euid)
    monkeypatch.setattr(sandbox_module, "_nproc_counted_per_user_namespace", lambda: new_kernel)
    folder = sandbox_module.RunFolder(tmp_path / "run")
    name = sandbox_module.write_kernel_spec(folder, sandbox_module.Limits(max_processes=7), sandbox, [], None)
    argv = json.loads((folder.kernels / name / "kernel.json").read_text())["argv"]
    launchers = [i for i, arg in enumerate(argv) if arg == "course_utils.grading.limits"]
    where = argv.index("--max-processes")
    assert argv[where + 1] == "7" and argv.count("--max-processes") == 1
    assert argv[-5:] == [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    if inside:
        bwrap = next(i for i, arg in enumerate(argv) if arg.endswith("bwrap"))
        assert launchers[0] < bwrap < launchers[1] < where, argv
        assert argv[launchers[1] + 1:launchers[1] + 4] == ["--max-processes", "7", "--"], argv
    else:
        assert len(launchers) == 1 and where < argv.index("--"), argv
