"""Grading a batch: one learner per task, in parallel, each from a clean run folder.

A learner's failure, of any kind, becomes that learner's result with a reason; the batch goes
on. Results are cached by a hash of the submission, the course and the grader, so a re-run
grades only what changed (a result made without a sandbox never stands in for a sandboxed
one). Nothing runs without a sandbox unless the batch says ``no_sandbox``. ``--shard K/N``
takes the learners whose id hashes to K of N, so a batch splits across machines the same way
every time.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import importlib
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat

from course_utils.exercises import CHAPTERS
from course_utils.grading import GRADER_VERSION
from course_utils.grading.assemble import assemble, chapter_of
from course_utils.grading.sandbox import (RUNS_ROOT, SANDBOXED, Limits, RunFolder, SandboxUnavailable,
                                          check_sandbox, choose_sandbox)
from course_utils.grading.schedule import longest_first
from course_utils.grading.submissions import Learner, Unreadable, answer_sources, read_submission
from course_utils.grading.versions import (chapter_version, check_versions, course_version, notebook_chapter,
                                           shared_version)


@dataclass
class Batch:
    course: Path
    submissions: Path
    out: Path
    limits: Limits
    use_cache: bool = True
    no_sandbox: bool = False  # grade without a sandbox: only ever an explicit choice
    exam: bool = False  # score public and hidden cases (submissions of an exam release)
    reveal_hidden: bool = False  # feedback pages say what the hidden cases found, not only pass/fail
    # More folders the sandbox empties, besides the course's solutions/ and .git, the submissions
    # and ``out`` (--hide): on a shared file system, the other shards' results.
    hide: tuple[Path, ...] = ()
    # With ``exam``: the --hints the release was made with; the public verdicts show no hint or
    # error note that release withheld.
    hints: str = "none"
    # The assignment every learner is graded out of (``assignment_of``: chapter → its maximum,
    # the chapters the whole class handed in); None: each result is out of its own chapters.
    assignment: dict | None = None


def course_notebooks(course: Path) -> dict[str, nbformat.NotebookNode]:
    notebooks = {}
    for chapter in CHAPTERS:
        path = course / "notebooks" / f"{chapter}.ipynb"
        if path.exists():
            notebooks[chapter] = nbformat.read(path, as_version=4)
    return notebooks


def exercise_columns(results: list[dict]) -> list[str]:
    """The gradebook's exercise columns: the exercises the graded course's notebooks check, in
    course order (a course given with ``--course`` may check fewer than the package defines).
    An exam's exercise has two: ``chapter/name public`` and ``chapter/name hidden``."""
    names: dict[str, list[str]] = {}
    exam = any(result.get("exam") for result in results)
    for result in results:
        for chapter, notebook in result["notebooks"].items():
            names.setdefault(chapter, list(notebook["exercises"]))
    columns = [f"{c}/{name}" for c in CHAPTERS if c in names for name in names[c]]
    return [f"{column} {part}" for column in columns for part in ("public", "hidden")] if exam else columns


def graded_exercises(chapter: str, course_notebook: nbformat.NotebookNode) -> list[str]:
    """The exercises the course's notebook for ``chapter`` has a check cell for, in order."""
    return [probe.exercise for probe in assemble(chapter, course_notebook, {}).probes]




def chapters_graded(learner: Learner, courses: dict) -> set[str]:
    """The chapters ``grade_learner`` gives ``learner``'s result, found without grading: each
    readable notebook's chapter (by its answer cells), an unreadable file's where its name is a
    chapter's, and for a learner with nothing gradable the course's first chapter."""
    found = set()
    for path in learner.files:
        try:
            nb = read_submission(path)
        except Unreadable:
            if path.stem in courses:
                found.add(path.stem)
            continue
        chapter = chapter_of(path, nb, courses)
        if chapter is not None:
            found.add(chapter)
    if not found and courses:
        found.add(next(iter(courses)))
    return found


def chapter_max(chapter: str, course_notebook: nbformat.NotebookNode, exam: bool = False) -> int:
    """The most ``chapter`` can score: one point per exercise checked (two in an exam)."""
    return _nothing_graded(chapter, course_notebook, "", exam)["max"]


def assignment_of(learners: list[Learner], courses: dict, exam: bool = False) -> dict[str, int]:
    """The assignment a class is graded out of: every chapter one of ``learners`` handed in
    (``chapters_graded``), with its maximum, in course order. Given the whole class (every
    shard's learners), every shard grades out of the same maximum."""
    chapters = set()
    for learner in learners:
        chapters |= chapters_graded(learner, courses)
    return {chapter: chapter_max(chapter, notebook, exam) for chapter, notebook in courses.items()
            if chapter in chapters}


def in_shard(learner_id: str, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    k, n = shard
    return int(hashlib.sha256(learner_id.encode()).hexdigest(), 16) % n == k - 1


def cache_key(learner: Learner, batch: Batch, courses: dict, sandbox: str = SANDBOXED) -> str:
    """What a learner's result depends on: their files, and for each the version of the chapter it
    is graded as (``versions.chapter_version``), the grader's and the limits. A change to another
    chapter's checks leaves it as it is."""
    sandboxed = sandbox == SANDBOXED
    digest = hashlib.sha256(f"{GRADER_VERSION}\0{json.dumps(asdict(batch.limits))}\0{sandboxed}\0"
                            f"{batch.exam}\0{batch.hints}\0{shared_version()}".encode())
    for path in learner.files:
        chapter = notebook_chapter(path, courses)
        version = chapter_version(batch.course, chapter) if chapter else ""
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0" + version.encode() + b"\0")
    return digest.hexdigest()


# A notebook that stops (a cell ran past its limit, the kernel died) is run again without the
# answer it stopped in, so that the exercises after it are graded all the same; at most this often.
MAX_RERUNS = 3


def _grade_notebook(chapter: str, course_nb, answers: dict[str, str], batch: Batch, sandbox: str,
                    hidden: list[Path]) -> tuple[dict, list[str], str, bool]:
    """One chapter's exercises scored: ``({exercise: entry}, problems, process_limit, busy)``;
    ``busy``: a time limit stopped a run while the kernel waited for a core (``Execution.starved``).

    When the run stops in an answer cell or a check (a loop that never ends, the memory or
    process limit, a kernel that exits), that exercise gets the reason and the notebook runs
    again without that answer, as if it were missing; the others keep the score of the first
    run that got that far. A stop in a cell of the course's own takes the rest with it."""
    from course_utils.grading.execute import execute
    from course_utils.grading.scoring import score_notebook

    module = CHAPTERS[chapter]
    final: dict[str, dict] = {}
    problems: list[str] = []
    left_out: dict[str, str] = {}  # answer grade_id -> why it was left out of the reruns
    process_limit, busy = "", False
    for attempt in range(MAX_RERUNS + 1):
        kept = {grade_id: source for grade_id, source in answers.items() if grade_id not in left_out}
        assembly = assemble(chapter, course_nb, kept, batch.exam)
        RUNS_ROOT.mkdir(mode=0o700, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="run-", dir=RUNS_ROOT) as root:
            execution = execute(assembly, RunFolder(Path(root)), batch.limits, sandbox, hidden)
        process_limit = execution.process_limit
        busy = busy or execution.starved
        scores = score_notebook(module, assembly, execution, kept, batch.exam, batch.hints, batch.limits)
        culprit = _stopped_in(assembly, execution)
        for probe, score in zip(assembly.probes, scores):
            if probe.exercise in final:
                continue
            if probe.answer_id in left_out:
                continue  # its entry came from the run it stopped
            stopped_here = probe.answer_id == culprit
            stopped_before = execution.stopped and score.outcome in ("timeout", "kernel died", "no result") \
                and score.reason == execution.stopped and not stopped_here
            if not stopped_before or culprit is None or attempt == MAX_RERUNS:
                final[probe.exercise] = score.to_dict()
        if execution.stopped:
            problems.append(execution.stopped + (f" (run {attempt + 1})" if attempt else ""))
        if execution.truncated_outputs:
            problems.append(f"output was cut off {execution.truncated_outputs} times (over "
                            f"{batch.limits.output_cap_kb} KB in a cell, --output-cap-kb)")
        if culprit is None or len(final) == len(assembly.probes):
            break
        left_out[culprit] = execution.stopped
        problems.append(f"graded again without the answer for {culprit}, so that the exercises after it count")
    order = [probe.exercise for probe in assemble(chapter, course_nb, {}, batch.exam).probes]
    return {name: final[name] for name in order if name in final}, problems, process_limit, busy


def _stopped_in(assembly, execution) -> str | None:
    """The answer (grade_id) whose cell, or whose check, the run stopped in; None when it ran to
    the end or stopped in a cell of the course's own."""
    index = execution.stopped_at
    if not execution.stopped or index is None:
        return None
    if index in assembly.answer_cells:
        return assembly.answer_cells[index]
    probe = assembly.cell_of_probe.get(index)
    return probe.answer_id if probe is not None else None


def _allowed(sandbox: str, batch: Batch) -> str:
    """``sandbox``, if this batch may grade with it: no sandbox only when ``batch.no_sandbox``."""
    if check_sandbox(sandbox) != SANDBOXED and not batch.no_sandbox:
        raise SandboxUnavailable(f"sandbox {sandbox!r} given, but the batch does not say no_sandbox")
    return sandbox


def grade_learner(learner: Learner, batch: Batch, sandbox: str) -> dict:
    """Everything about one learner, as plain JSON-able data."""
    _allowed(sandbox, batch)
    courses = course_notebooks(batch.course)
    # The audit trail: what graded this result, so a regrade can say why a score moved.
    result = {"learner": learner.id, "sandbox": sandbox, "grader_version": GRADER_VERSION,
              "course_version": course_version(batch.course), "limits": asdict(batch.limits),
              "notebooks": {}, "problems": [], "exam": batch.exam, "reveal_hidden": batch.reveal_hidden}
    if not learner.files:
        result["problems"].append("no notebook submitted")
    hidden = [batch.course / "solutions", batch.course / ".git", batch.submissions, batch.out, *batch.hide]
    for path in learner.files:
        try:
            nb = read_submission(path)
        except Unreadable as error:
            result["problems"].append(str(error))
            if path.stem in courses and path.stem not in result["notebooks"]:
                result["notebooks"][path.stem] = _nothing_graded(path.stem, courses[path.stem], str(error), batch.exam)
            continue
        chapter = chapter_of(path, nb, courses)
        named = path.stem
        if chapter is None:
            result["problems"].append(f"{path.name}: no answer cell of this course's notebooks in it")
            continue
        if chapter in result["notebooks"]:
            result["problems"].append(f"{path.name}: a second notebook for {chapter}; only the first counts")
            continue
        answers, duplicated = answer_sources(nb)
        problems = [f"answer cell {d} appears more than once; the last one was graded" for d in duplicated]
        if named != chapter and named in courses:  # alice.ipynb (one file per learner) names no chapter
            problems.append(f"{path.name} holds the answers of {chapter}, not of {named}: graded as {chapter}")
        scores, run_problems, result["process_limit"], busy = _grade_notebook(chapter, courses[chapter], answers,
                                                                               batch, sandbox, hidden)
        result["notebooks"][chapter] = {
            "exercises": scores,
            "score": sum(entry["score"] for entry in scores.values()),
            "max": sum(entry["max"] for entry in scores.values()),
            "problems": problems + run_problems,
        }
        if busy:  # a time limit hit while other work starved the kernel: run_batch grades it again
            result["notebooks"][chapter]["busy_machine"] = True
        result.setdefault("check_versions", {})[chapter] = check_versions(CHAPTERS[chapter], list(scores))
    _add_unsubmitted(result, courses, batch.exam)
    result["total"] = sum(n["score"] for n in result["notebooks"].values())
    result["max"] = sum(n["max"] for n in result["notebooks"].values())
    return result


def _nothing_graded(chapter: str, course_notebook: nbformat.NotebookNode, why: str, exam: bool = False) -> dict:
    from course_utils.grading.scoring import ExerciseScore

    exercises = graded_exercises(chapter, course_notebook)
    entries = {}
    for name in exercises:
        score = ExerciseScore(name, 0, 1, "missing", why)
        if exam:
            score.public = ExerciseScore(name, 0, 1, "missing", why)
        entries[name] = score.to_dict()
    return {"exercises": entries, "score": 0, "max": sum(e["max"] for e in entries.values()), "problems": [why]}


def _add_unsubmitted(result: dict, courses: dict, exam: bool = False) -> None:
    """A learner with nothing gradable still gets a row: the first chapter, every exercise 0."""
    if result["notebooks"] or not courses:
        return
    why = "; ".join(result["problems"]) or "nothing graded"
    first = next(iter(courses))
    result["notebooks"][first] = _nothing_graded(first, courses[first], why, exam)


GRADER_ERRORS = "grader-errors.log"  # in the results folder: the grader's own failures, in full


def load_judges(exam: bool = False) -> None:
    """Import every chapter's exercises (an exam's public cases too) into this process.

    Called before the process grades anything: a judge is then the course's code as grading
    found it, even if a submission later writes into the course folder, since Python does not
    read a module twice. The grading process calls it first, before any worker exists, and
    forked workers (Linux) inherit what it loaded: loaded once, not once per worker (two
    seconds of a core each, mostly importing torch), and in the same time, since the workers
    would load side by side. Where workers are spawned (macOS, Windows), each calls it as it
    starts. Judges run no probe, so torch's one-time set-up for probes
    (``running.set_up_torch_once``) is left out.
    """
    from course_utils.exercises import running

    running.WARM_UP["on"] = False
    for module in CHAPTERS.values():
        importlib.import_module(f"course_utils.exercises.{module}")
        if exam:
            importlib.import_module(f"course_utils.exercises.public_cases.{module}")
    importlib.import_module("course_utils.grading.scoring")
    if exam:
        importlib.import_module("course_utils.exercises.exam")


def _grade_safely(learner: Learner, batch: Batch, sandbox: str) -> dict:
    """``grade_learner``, or a result that says the grader failed on this learner.

    The learner's problems (shown on their feedback page) say so in one line; the traceback,
    which shows the grader's code and paths, goes to the instructor only: to stderr and to
    ``GRADER_ERRORS`` in the results folder (appended, one entry per failure, with the learner).
    """
    try:
        return grade_learner(learner, batch, sandbox)
    except Exception as error:  # a grader bug must not lose the batch either
        said = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        entry = f"--- the grader failed on {learner.id}\n{traceback.format_exc()}\n"
        print(entry, file=sys.stderr, end="", flush=True)
        try:  # one unbuffered append: entries of workers writing at once do not interleave
            with open(batch.out / GRADER_ERRORS, "ab", buffering=0) as log:
                log.write(entry.encode("utf-8", "replace"))
        except OSError:
            pass  # stderr has it
        return {"learner": learner.id, "sandbox": sandbox, "grader_version": GRADER_VERSION,
                "notebooks": {}, "total": 0, "max": 0,
                "problems": [f"the grader failed on this learner: {said}; the instructor's log has the details"]}


def _end_with_parent() -> None:
    """Linux: this process gets SIGKILL when the process that started it ends, however it ends (a
    grader stopped with SIGKILL leaves no worker grading on). Elsewhere: nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _start_worker(exam: bool, parent: int) -> None:
    """A grading worker: ends with the grader, leaves Ctrl-C to the grader, loads the judges."""
    import signal

    _end_with_parent()
    if os.getppid() != parent:  # the grader ended before this worker could ask to end with it
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    load_judges(exam)


class GradingStopped(KeyboardInterrupt):
    """The grader was asked to stop (Ctrl-C, SIGTERM): every worker and kernel is ended."""


def _stop_on_sigterm() -> None:
    import signal

    def stop(signum, frame):
        raise GradingStopped(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


def _starved(result: dict) -> bool:
    """Whether a time limit stopped one of the learner's notebooks while other work on the machine
    starved its kernel (it waited for a core, ``execute.KernelTime.starved``): worth grading
    again, alone. A cell that computed, or slept, all along would have run past it anyway."""
    return any(notebook.get("busy_machine") for notebook in result.get("notebooks", {}).values())


def _cacheable(result: dict) -> bool:
    """Whether a result may stand for the same submission later: not when the grader failed, and
    not when a time or memory limit ended a run (a busy machine may have caused it)."""
    if any("the grader failed" in p or "worker died" in p for p in result.get("problems", [])):
        return False
    notebooks = result.get("notebooks", {}).values()
    stops = ("timeout", "kernel died")
    return not any(entry.get("outcome") in stops for notebook in notebooks for entry in notebook["exercises"].values()) \
        and not any(problem.startswith(stops) for notebook in notebooks for problem in notebook.get("problems", []))


AGAIN_ALONE = ("graded a second time, alone, after a time limit was hit while other notebooks graded beside "
               "it kept its kernel from a whole core: this is that second run's result")


def _start_method() -> str:
    return "fork" if "fork" in multiprocessing.get_all_start_methods() and sys.platform.startswith("linux") else "spawn"


def _grade_in_pool(todo: list, batch: Batch, sandbox: str, workers: int):
    """Yield ``(learner, cached, result)`` as each learner of ``todo`` is graded."""
    context = multiprocessing.get_context(_start_method())
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=max(1, workers), mp_context=context,
                                                  initializer=_start_worker, initargs=(batch.exam, os.getpid()))
    try:
        futures = {pool.submit(_grade_safely, learner, batch, sandbox): (learner, cached) for learner, cached in todo}
        for future in concurrent.futures.as_completed(futures):
            learner, cached = futures[future]
            try:
                result = future.result()
            except Exception as error:  # the worker process itself died
                result = {"learner": learner.id, "sandbox": sandbox, "grader_version": GRADER_VERSION,
                          "notebooks": {}, "total": 0, "max": 0,
                          "problems": [f"the grading worker died: {type(error).__name__}: {error}"]}
            yield learner, cached, result
    except BaseException:
        # Stopped (Ctrl-C, SIGTERM) or failed: end every worker now; their kernels end with them.
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def run_batch(
    batch: Batch, learners: list[Learner], workers: int, report, sandbox: str | None = None
) -> tuple[list[dict], int]:
    """Grade ``learners`` with ``workers`` processes; ``report(line)`` is told each outcome.

    ``sandbox`` is what ``choose_sandbox(batch.no_sandbox)`` gave, when the caller already
    asked; without it, it is asked here. Either way, before anything is written or run:
    ``SandboxUnavailable`` when bubblewrap cannot sandbox here and ``batch.no_sandbox`` is not
    set. Returns the results and how many of them came from the cache.

    A learner whose notebook hit a time limit while other notebooks, graded beside it, starved
    its kernel (``_starved``) is graded once more when the others are done, alone; a result in
    which a time or memory limit ended a run is never cached. Every result is out of
    ``batch.assignment`` where it is given (``reports.out_of_assignment``). Without
    ``batch.use_cache`` the learners' cache entries are removed as the run starts and written
    again as each is graded. Stopped with Ctrl-C or SIGTERM, it ends every worker and kernel
    and raises ``GradingStopped``; what was graded until then stays written.
    """
    from course_utils.grading.reports import out_of, out_of_assignment, write_atomically, write_learner

    sandbox = choose_sandbox(batch.no_sandbox) if sandbox is None else _allowed(sandbox, batch)
    _stop_on_sigterm()
    courses = course_notebooks(batch.course)
    cache_dir = batch.out / ".cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    results, todo = {}, []
    for learner in learners:
        key = cache_key(learner, batch, courses, sandbox)
        cached = cache_dir / f"{key}.json"
        if batch.use_cache and cached.exists():
            result = json.loads(cached.read_text(encoding="utf-8"))
            result["learner"] = learner.id  # the same bytes may come from another learner
            result["reveal_hidden"] = batch.reveal_hidden  # a choice about the page, not the grade
            out_of_assignment(result, batch.assignment)
            write_learner(batch.out, result)
            results[learner.id] = result
            report(f"{learner.id}: {result['total']}/{out_of(result)} (cached)")
        else:
            if not batch.use_cache:
                # --no-cache: what the cache held for this learner goes now, so that, if this run
                # is stopped, the cache holds only what this run graded (see __main__).
                cached.unlink(missing_ok=True)
            todo.append((learner, cached))
    todo = longest_first(todo, lambda item: item[0])
    if sandbox != SANDBOXED or (todo and _start_method() == "fork"):
        load_judges(batch.exam)  # here, before any worker: see load_judges

    def keep(learner, cached, result, note=""):
        out_of_assignment(result, batch.assignment)
        write_learner(batch.out, result)
        if _cacheable(result):
            write_atomically(cached, json.dumps(result))
        results[learner.id] = result
        report(f"{learner.id}: {result['total']}/{out_of(result)}{note}")

    # fork (Linux): every worker starts with the judges this process loaded above, at once;
    # spawn (elsewhere): each worker loads them as it starts.
    timed_out = []
    for learner, cached, result in _grade_in_pool(todo, batch, sandbox, workers):
        keep(learner, cached, result)
        if _starved(result) and workers > 1 and len(todo) > 1:
            timed_out.append((learner, cached))
    for learner, cached, result in (item for pair in timed_out for item in _grade_in_pool([pair], batch, sandbox, 1)):
        result["problems"].insert(0, AGAIN_ALONE)
        keep(learner, cached, result, " (graded again, alone, after a time limit)")
    return [results[learner.id] for learner in learners if learner.id in results], len(learners) - len(todo)
