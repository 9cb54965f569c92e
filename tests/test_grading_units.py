"""The grader's parts: reading submissions, assembling what runs, judging records, limits."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.exercises import tensors
from course_utils.grading import scoring
from course_utils.grading.assemble import assemble
from course_utils.grading.execute import Execution
from course_utils.grading.submissions import Unreadable, answer_sources, discover, read_submission

ROOT = Path(__file__).resolve().parents[1]
# The fixed copy the grader's tests grade (tests/grading_course/README.md): 7 exercises.
COURSE_01 = nbformat.read(ROOT / "tests" / "grading_course" / "notebooks" / "01_tensors.ipynb", as_version=4)


def test_learners_are_folders_or_files(tmp_path):
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "01_tensors.ipynb").write_text("{}")
    (tmp_path / "bob.ipynb").write_text("{}")
    (tmp_path / "notes.txt").write_text("not a notebook")
    learners = discover(tmp_path)
    assert [(l.id, [f.name for f in l.files]) for l in learners] == [
        ("alice", ["01_tensors.ipynb"]), ("bob", ["bob.ipynb"])]


def test_unreadable_files_say_why(tmp_path):
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [')
    with pytest.raises(Unreadable, match="not JSON"):
        read_submission(broken)


def test_nbformat_3_is_converted(tmp_path):
    cell = nbformat.v3.new_code_cell(input="def outer_sum(a, b):\n    return a[:, None] + b")
    cell.metadata = {"nbgrader": {"grade_id": "outer_sum", "solution": True}}
    old = nbformat.v3.new_notebook(worksheets=[nbformat.v3.new_worksheet(cells=[cell])])
    path = tmp_path / "old.ipynb"
    path.write_text(nbformat.writes(old, version=3))
    answers, duplicated = answer_sources(read_submission(path))
    assert answers == {"outer_sum": "def outer_sum(a, b):\n    return a[:, None] + b"} and duplicated == []


def test_only_answer_cells_are_taken_and_checks_become_probes():
    answers = {"outer_sum": "def outer_sum(a, b):\n    return 'mine'", "check_outer_sum": "print('hacked')"}
    assembly = assemble("01_tensors", COURSE_01, answers)
    sources = [cell.source for cell in assembly.notebook.cells]
    assert "def outer_sum(a, b):\n    return 'mine'" in sources
    assert "print('hacked')" not in sources
    assert not any(".check(" in s for s in sources)
    assert len(assembly.probes) == 7 and "match_reference" in assembly.missing
    setup = assembly.notebook.cells[0].source
    assert setup.startswith("import course_utils.grading.kernel_probe as ") and ".setup([" in setup
    names = [probe.record_name for probe in assembly.probes]
    assert len(set(names)) == len(names) and all(len(name) == 32 for name in names)  # one per check
    # the first cell knows each check only by its hash: no answer can open a later check
    from course_utils.grading.kernel_guard import record_name_hash

    assert not any(name in setup for name in names)
    assert all(record_name_hash(name) in setup for name in names)


def _record(answer):
    from course_utils.grading.kernel_probe import answer_code

    return {"probe": tensors.outer_sum.probe(answer).to_plain(), "code": answer_code(answer)}


def _source(answer) -> str:
    import inspect
    import textwrap

    return textwrap.dedent(inspect.getsource(answer))


def _score_outer_sum(record, source):
    answers = {"outer_sum": source}
    assembly = assemble("01_tensors", COURSE_01, answers)
    probe = next(p for p in assembly.probes if p.exercise == "outer_sum")
    execution = Execution(records={probe.grade_id: record})
    return next(s for s in scoring.score_notebook("tensors", assembly, execution, answers) if s.exercise == "outer_sum")


def _rewrite(part, change):
    """Apply ``change`` to every dict of a record (what a patched probe in the kernel could do)."""
    if isinstance(part, dict):
        change(part)
        for value in part.values():
            _rewrite(value, change)
    elif isinstance(part, list):
        for value in part:
            _rewrite(value, change)


def test_expected_values_written_into_a_record_in_the_kernel_are_not_used():
    def wrong(a, b):
        return a + 0 * b[:1]

    record = _record(wrong)

    def expect_what_it_got(part):
        if "got" in part:
            part["expected"] = part["got"]

    _rewrite(record["probe"]["data"], expect_what_it_got)
    score = _score_outer_sum(record, _source(wrong))
    assert score.score == 0 and score.mistake == "shape", score


def test_a_record_whose_inputs_were_rewritten_to_pass_is_refused():
    """The inputs and the answer's results made zeros: the judge, which computes the right
    answer from the recorded inputs, would pass it; the inputs are not the check's."""
    import numpy as np

    record = _record(tensors.outer_sum.reference)

    def zeros(part):
        for key in ("given", "got", "again", "a_after", "b_after"):
            facts = part.get(key)
            for fact in (facts.values() if key == "given" and isinstance(facts, dict) else [facts]):
                if isinstance(fact, dict) and isinstance(fact.get("values"), np.ndarray):
                    fact["values"] = np.zeros_like(fact["values"])

    _rewrite(record["probe"]["data"], zeros)
    from course_utils.exercises.core import ProbeResult

    assert tensors.outer_sum.judge(ProbeResult.from_plain(record["probe"])).passed
    score = _score_outer_sum(record, _source(tensors.outer_sum.reference))
    assert score.score == 0 and score.mistake == "record-tampered", score
    assert "record" in score.reason and "changed from inside the notebook" in score.reason


def test_an_honest_record_is_judged_as_in_the_notebook():
    answers = {"outer_sum": _source(tensors.outer_sum.reference), "residuals": "x"}
    assembly = assemble("01_tensors", COURSE_01, answers)
    records = {p.grade_id: _record(tensors.outer_sum.reference) for p in assembly.probes if p.exercise == "outer_sum"}
    scores = {s.exercise: s for s in scoring.score_notebook("tensors", assembly, Execution(records=records), answers)}
    assert scores["outer_sum"].score == 1
    assert scores["residuals"].outcome == "no result"
    assert scores["match_reference"].outcome == "missing"


def test_a_stopped_run_scores_the_rest_zero_with_the_reason():
    assembly = assemble("01_tensors", COURSE_01, {p: "x" for p in ("match_reference", "outer_sum")})
    execution = Execution(stopped="kernel died (it exited, or ran out of memory)")
    scores = scoring.score_notebook("tensors", assembly, execution)
    died = [s for s in scores if s.outcome == "kernel died"]
    assert died and all(s.score == 0 for s in scores)


def test_the_launcher_sets_limits_and_keeps_only_the_given_environment():
    code = ("import os, resource; print(resource.getrlimit(resource.RLIMIT_DATA)[0] // 2**20, "
            "resource.getrlimit(resource.RLIMIT_FSIZE)[0] // 2**20, sorted(os.environ))")
    out = subprocess.run(
        [sys.executable, "-m", "course_utils.grading.limits", "--memory-mb", "2048", "--max-file-mb", "8",
         "--env", "HOME=/nowhere", "--env", "PATH=/usr/bin:/bin", "--", sys.executable, "-c", code],
        capture_output=True, text=True, check=True, env={"SECRET": "x", "PATH": "/usr/bin:/bin"},
    ).stdout.split(" ", 2)
    assert out[0] == "2048" and out[1] == "8"
    assert "SECRET" not in out[2] and "HOME" in out[2]


def test_the_checked_function_must_be_written_in_its_answer_cell():
    from course_utils.grading.kernel_probe import code_fingerprint

    def outer_sum(a, b):
        return a[:, None] + b[None, :]

    mine = "def outer_sum(a, b):\n    return a[:, None] + b[None, :]\n"
    assert scoring.defined_in(code_fingerprint(outer_sum.__code__), mine)
    lam = "outer_sum = lambda a, b: a[:, None] + b[None, :]"
    assert scoring.defined_in(code_fingerprint(eval(lam.split("=", 1)[1]).__code__), lam)
    borrowed = "outer_sum = ex.outer_sum.reference"
    assert not scoring.defined_in(code_fingerprint(tensors.outer_sum.reference.__code__), borrowed)


def test_the_sandbox_is_an_allow_list(tmp_path):
    """The kernel sees the system's programs and libraries, its Python, its run folder and the
    run's copy of the package; /tmp is always an empty one of its own, the course folder and
    anything else are not there, and the rest is read-only."""
    from course_utils.grading import sandbox

    folder = sandbox.RunFolder(tmp_path / "run")
    args = sandbox.bubblewrap_prefix(folder, [tmp_path / "hidden-does-not-exist"])
    pairs = list(zip(args, args[1:]))
    assert ("--tmpfs", "/tmp") in pairs and ("--ro-bind", "/") not in pairs
    bound = [args[i + 2] for i, arg in enumerate(args) if arg in ("--bind", "--ro-bind")]
    assert str(folder.root) in bound and str(folder.package) in bound
    assert not any(Path(path).resolve() == ROOT.resolve() or ROOT.resolve().is_relative_to(Path(path).resolve())
                   for path in bound if path not in ("/usr",) and not path.startswith("/etc"))
    assert all(str(root) in bound or str(root).startswith("/usr") for root in sandbox.python_roots())
    assert args.index("--bind") > args.index("--tmpfs") and "--remount-ro" in args
    chapter = folder.package / "course_utils" / "exercises" / "tensors"
    assert (chapter / "outer_sum.py").exists() and (chapter / "__init__.py").exists()
    folder.forget_exercise_sources()
    assert not chapter.exists(), "every module of the chapter goes, and its folder (or it imports as a namespace)"
    assert (folder.package / "course_utils" / "exercises" / "core.py").exists()


def test_the_package_a_run_copies_is_compiled_once_with_its_chapters_guarded(tmp_path):
    """Every module but the chapters' compiled to bytecode; each chapter's module as guarded code
    beside its source, which a kernel loads as compiled from its own run's copy (the guard tells
    the course's frames by that file name); a stale prepared package of another version goes."""
    import marshal
    import time
    import types

    from course_utils.exercises import CHAPTERS
    from course_utils.grading import package_copy
    from course_utils.grading.guarded_code import GUARDED_SUFFIX, _with_audit

    stale, recent = tmp_path / "package-0ld", tmp_path / "package-n3w"
    for folder in (stale, recent):
        folder.mkdir()
    os.utime(stale, (time.time() - 2 * package_copy.STALE_AFTER_S,) * 2)
    prepared = package_copy.prepared(tmp_path)
    exercises = prepared / "course_utils" / "exercises"
    assert not stale.exists() and recent.exists()
    compiled = {path.name.split(".")[0] for path in (exercises / "__pycache__").glob("*.pyc")}
    assert {"core", "facts", "running"} <= compiled
    assert not [path for chapter in CHAPTERS.values() for path in (exercises / chapter).rglob("*.pyc")]
    assert not (prepared / "course_utils" / "exercises" / "exam_data").exists()

    assert all(path.with_suffix(GUARDED_SUFFIX).exists() for path in (exercises / "tensors").glob("*.py"))
    code = marshal.loads((exercises / "tensors" / f"outer_sum{GUARDED_SUFFIX}").read_bytes())
    run_copy = "/a/run/course/course_utils/exercises/tensors/outer_sum.py"
    code = _with_audit(code, run_copy)

    def codes(c):
        yield c
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                yield from codes(const)

    assert {c.co_filename for c in codes(code)} == {run_copy}
    probe = next(c for c in codes(code) if c.co_name == "_probe_outer_sum")
    assert sys.audit in probe.co_consts  # the guard, first thing in the function


@pytest.mark.parametrize("error, option", [
    ("BlockingIOError: [Errno 11] Resource temporarily unavailable", "--max-processes"),
    ("MemoryError: ", "--memory-mb"),
    ("OSError: [Errno 27] File too large", "--max-file-mb"),
])
def test_an_answer_stopped_by_a_grading_limit_names_the_option(error, option):
    reason = scoring.answer_raised(error)
    assert reason.startswith(f"the answer cell raised {error}") and option in reason


def test_an_answer_that_raised_for_its_own_reasons_is_not_blamed_on_a_limit():
    assert scoring.answer_raised("NameError: name 'x' is not defined") == (
        "the answer cell raised NameError: name 'x' is not defined")


def test_an_answer_cell_that_raised_before_defining_its_function_is_your_code_raised():
    assembly = assemble("01_tensors", COURSE_01, {"outer_sum": "x"})
    probe = next(p for p in assembly.probes if p.exercise == "outer_sum")
    def outer_sum(a, b):  # the release's stub, still in place: the cell stopped before its def
        raise NotImplementedError

    execution = Execution(records={probe.grade_id: _record(outer_sum)},
                          answer_errors={probe.answer_id: "BlockingIOError: [Errno 11] Resource temporarily unavailable"})
    score = {s.exercise: s for s in scoring.score_notebook("tensors", assembly, execution)}["outer_sum"]
    assert (score.score, score.outcome) == (0, "your code raised")
    assert "--max-processes" in score.reason


def _under_memory_cap(megabytes: int, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "course_utils.grading.limits", "--memory-mb", str(megabytes),
         "--env", "PATH=/usr/bin:/bin", "--", sys.executable, "-c", code],
        capture_output=True, text=True)


def test_the_memory_cap_leaves_reserved_address_space_alone():
    """PyPI's CUDA build maps ~3 GB of libraries at import (and reserves far more on a GPU):
    under a cap on address space it failed to import at the grader's default of 3072 MB. Here an
    8 GB read-only reservation stands in for those mappings; it must not count."""
    reserve = ("import mmap; m = mmap.mmap(-1, 8 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, "
               "prot=mmap.PROT_READ); print(len(m) >> 30)")
    run = _under_memory_cap(1024, reserve)
    assert run.returncode == 0 and run.stdout.strip() == "8", run.stderr


def test_the_memory_cap_stops_writable_memory_with_a_memory_error():
    eat = "blocks = [bytearray(100 << 20) for _ in range(30)]"
    run = _under_memory_cap(1024, eat)
    assert run.returncode != 0 and "MemoryError" in run.stderr, run.stderr
    assert _under_memory_cap(1024, "blocks = [bytearray(100 << 20) for _ in range(5)]").returncode == 0


def test_a_course_cell_that_failed_is_named_when_checks_have_no_result():
    """Under a memory cap that PyPI's CUDA build could not import torch in, every check said
    only "its check produced no result"; the cell that failed first says why."""
    assembly = assemble("01_tensors", COURSE_01, {"outer_sum": "x"})
    failed = "cell 2 (the course's own) raised ImportError: libtorch_cpu.so: failed to map segment"
    scores = scoring.score_notebook("tensors", assembly, Execution(first_course_error=failed))
    outer_sum = {s.exercise: s for s in scores}["outer_sum"]
    assert outer_sum.outcome == "no result" and outer_sum.reason.endswith(failed)


def test_the_gradebook_has_a_column_for_each_check_the_graded_course_has():
    """A course given with --course may check fewer exercises than the package defines: an
    unreadable submission and the gradebook both follow the course, not the package."""
    from course_utils.grading.batch import exercise_columns, graded_exercises

    course = COURSE_01
    fewer = nbformat.from_dict(copy.deepcopy(course))
    fewer.cells = [c for c in fewer.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                   != "check_outer_sum"]
    names = graded_exercises("01_tensors", fewer)
    assert "outer_sum" not in names and "match_reference" in names
    assert names == [n for n in graded_exercises("01_tensors", course) if n != "outer_sum"]
    results = [{"notebooks": {"01_tensors": {"exercises": dict.fromkeys(names)}}}]
    assert exercise_columns(results) == [f"01_tensors/{n}" for n in names]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="needs root, to run a process as a user of its own")
def test_the_process_limit_leaves_room_for_every_thread_the_user_already_runs():
    """RLIMIT_NPROC counts threads: a baseline of processes alone left a grader whose user ran
    many threads (torch's, another shard's) too little room to start a kernel at all."""
    from course_utils.grading.limits import _tasks_of

    uid = 54321  # a user of its own, so nothing else runs as it
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import os, sys, threading\n"
         f"os.setgid({uid}); os.setuid({uid})\n"
         "for _ in range(12): threading.Thread(target=sys.stdin.read, daemon=True).start()\n"
         "print('ready', flush=True)\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        assert _tasks_of(uid) == 13, "the main thread and its 12 threads"
    finally:
        child.stdin.close()
        child.wait(timeout=30)


_FORK_LOOP_THEN_A_THREAD = """
import os, resource, sys, threading, time
from course_utils.exercises.core import ProbeResult, Status
from course_utils.grading import kernel_probe
from course_utils.grading.limits import _tasks_of

uid, wait_for_copies = int(sys.argv[1]), sys.argv[2] == "wait"
os.setgid(uid); os.setuid(uid)
own = os.fork()  # a process of the learner's, started before the probe: its status stays theirs
if own == 0:
    time.sleep(0.2); os._exit(7)
resource.setrlimit(resource.RLIMIT_NPROC, (_tasks_of(uid) + 6, _tasks_of(uid) + 6))
before = kernel_probe._children()
try:
    while True:  # the answer: fork until the process limit stops it; each copy ends a bit later
        if os.fork() == 0:
            time.sleep(0.3); os._exit(0)
except BlockingIOError as error:
    result = ProbeResult(Status.RAISED, error={"type": type(error).__name__, "message": str(error)})
assert kernel_probe._hit_the_process_limit(result)
if wait_for_copies:
    kernel_probe._let_forked_copies_end(before)
else:
    time.sleep(1.0)  # the copies have ended, as zombies nobody reaped
try:
    thread = threading.Thread(target=lambda: None); thread.start(); thread.join()
    print("next cell: thread started")
except RuntimeError as error:
    print(f"next cell: {error}")
print("learner's own process:", os.waitstatus_to_exitcode(os.waitpid(own, 0)[1]))
"""


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="needs root, to fork under a process limit as a user of its own")
@pytest.mark.parametrize("wait_for_copies", [True, False], ids=["after the wait", "without it"])
def test_after_a_fork_loop_the_next_cell_has_room_for_a_thread(wait_for_copies):
    """The race a full test run once showed: an answer forks until the process limit stops it;
    its copies end on their own but stay, as zombies, under the limit until reaped, so the next
    answer cell could not start a thread ('can't start new thread'). The kernel now waits for and
    reaps the copies this probe made (and only those). Without that wait the next cell fails
    every time: the control case shows the test reproduces the race."""
    run = subprocess.run(
        [sys.executable, "-c", _FORK_LOOP_THEN_A_THREAD, "54322", "wait" if wait_for_copies else "no"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr
    if wait_for_copies:
        assert "next cell: thread started" in run.stdout, run.stdout
    else:
        assert "next cell: can't start new thread" in run.stdout, run.stdout
    assert "learner's own process: 7" in run.stdout, run.stdout


def test_a_checks_version_follows_what_computes_the_right_answer():
    """A change to an exercise's expect (the judge's half that computes what the reference
    gives) is a change of its check: cached grades of the old check must not be reused."""
    import copy

    from course_utils.grading.versions import check_version

    def another_expect(record):
        return record

    twin = copy.copy(tensors.outer_sum)
    twin._expect = another_expect
    assert check_version(twin) != check_version(tensors.outer_sum)


def test_a_record_whose_inputs_cannot_be_rebuilt_is_a_verdict_not_an_error_of_the_grader():
    """A rewritten record whose facts disagree (a shape that is not its values'): rebuilding the
    input raises torch's RuntimeError on the judge's side; the exercise fails, grading goes on."""
    from course_utils.exercises.core import ProbeResult

    record = _record(tensors.outer_sum.reference)
    record["probe"]["data"]["big"]["given"]["a"]["shape"] = [999]
    verdict = scoring.judge_record("tensors", "outer_sum", ProbeResult.from_plain(record["probe"]))
    assert verdict is not None and not verdict.passed and "could not read the record" in verdict.message


def test_a_cell_that_printed_past_the_cap_is_told_it_printed_whether_time_or_memory_ran_out():
    """A loop of prints fills the kernel's output buffer faster than a busy machine sends it:
    the check then ends in a timeout or in a MemoryError, and either way the printing is why."""
    from course_utils.exercises.core import ProbeResult, Status
    from course_utils.grading.scoring import stopped_while_printing

    timeout = ProbeResult(Status.TIMEOUT, error={"seconds": "5"})
    memory = ProbeResult(Status.RAISED, error={"type": "MemoryError", "message": "", "on": "x"})
    other = ProbeResult(Status.RAISED, error={"type": "RuntimeError", "message": "no", "on": "x"})
    assert "stopped after 5 s while printing" in stopped_while_printing(timeout, True, 512)
    said = stopped_while_printing(memory, True, 512)
    assert "ran out of memory while printing" in said and "--output-cap-kb" in said
    assert stopped_while_printing(other, True, 512) is None
    assert stopped_while_printing(memory, False, 512) is None  # no printing past the cap: memory is why
