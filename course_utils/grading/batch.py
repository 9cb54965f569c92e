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
import sys
import tempfile
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat

from course_utils.exercises import CHAPTERS
from course_utils.grading import GRADER_VERSION
from course_utils.grading.assemble import assemble, course_answer_ids
from course_utils.grading.sandbox import (RUNS_ROOT, SANDBOXED, Limits, RunFolder, SandboxUnavailable,
                                          check_sandbox, choose_sandbox)
from course_utils.grading.schedule import longest_first
from course_utils.grading.submissions import Learner, Unreadable, answer_sources, read_submission


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


def course_version(course: Path) -> str:
    digest = hashlib.sha256()
    files = sorted((course / "notebooks").glob("*.ipynb"))
    files += sorted((Path(__file__).resolve().parents[1]).rglob("*.py"))
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def in_shard(learner_id: str, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    k, n = shard
    return int(hashlib.sha256(learner_id.encode()).hexdigest(), 16) % n == k - 1


def cache_key(learner: Learner, batch: Batch, version: str, sandbox: str = SANDBOXED) -> str:
    sandboxed = sandbox == SANDBOXED
    digest = hashlib.sha256(
        f"{GRADER_VERSION}\0{version}\0{json.dumps(asdict(batch.limits))}\0{sandboxed}\0{batch.exam}".encode())
    for path in learner.files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _chapter_of(path: Path, nb, courses: dict) -> str | None:
    if path.stem in courses:
        return path.stem
    ids = set(answer_sources(nb)[0])
    overlap = {chapter: len(ids & course_answer_ids(course_nb)) for chapter, course_nb in courses.items()}
    best = max(overlap, key=overlap.get, default=None)
    return best if best is not None and overlap[best] > 0 else None


def _allowed(sandbox: str, batch: Batch) -> str:
    """``sandbox``, if this batch may grade with it: no sandbox only when ``batch.no_sandbox``."""
    if check_sandbox(sandbox) != SANDBOXED and not batch.no_sandbox:
        raise SandboxUnavailable(f"sandbox {sandbox!r} given, but the batch does not say no_sandbox")
    return sandbox


def grade_learner(learner: Learner, batch: Batch, sandbox: str) -> dict:
    """Everything about one learner, as plain JSON-able data."""
    _allowed(sandbox, batch)
    from course_utils.grading.execute import execute
    from course_utils.grading.scoring import score_notebook

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
        chapter = _chapter_of(path, nb, courses)
        if chapter is None:
            result["problems"].append(f"{path.name}: no answer cell of this course's notebooks in it")
            continue
        if chapter in result["notebooks"]:
            result["problems"].append(f"{path.name}: a second notebook for {chapter}; only the first counts")
            continue
        answers, duplicated = answer_sources(nb)
        assembly = assemble(chapter, courses[chapter], answers, batch.exam)
        problems = [f"answer cell {d} appears more than once; the last one was graded" for d in duplicated]
        RUNS_ROOT.mkdir(mode=0o700, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="run-", dir=RUNS_ROOT) as root:
            folder = RunFolder(Path(root))
            execution = execute(assembly, folder, batch.limits, sandbox, hidden)
        result["process_limit"] = execution.process_limit
        if execution.stopped:
            problems.append(execution.stopped)
        if execution.truncated_outputs:
            problems.append(f"output was cut off {execution.truncated_outputs} times (over "
                            f"{batch.limits.output_cap_kb} KB in a cell)")
        scores = [s.to_dict() for s in score_notebook(CHAPTERS[chapter], assembly, execution, answers, batch.exam)]
        result["notebooks"][chapter] = {
            "exercises": {name: entry for name, entry in zip((p.exercise for p in assembly.probes), scores)},
            "score": sum(entry["score"] for entry in scores),
            "max": sum(entry["max"] for entry in scores),
            "problems": problems,
        }
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
    read a module twice. Each worker calls it as it starts; without a sandbox (where nothing
    keeps a submission from writing the course) the grading process calls it first, before
    any worker exists, and the forked workers inherit what it loaded.
    """
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


def run_batch(
    batch: Batch, learners: list[Learner], workers: int, report, sandbox: str | None = None
) -> tuple[list[dict], int]:
    """Grade ``learners`` with ``workers`` processes; ``report(line)`` is told each outcome.

    ``sandbox`` is what ``choose_sandbox(batch.no_sandbox)`` gave, when the caller already
    asked; without it, it is asked here. Either way, before anything is written or run:
    ``SandboxUnavailable`` when bubblewrap cannot sandbox here and ``batch.no_sandbox`` is not
    set. Returns the results and how many of them came from the cache.
    """
    from course_utils.grading.reports import write_learner

    sandbox = choose_sandbox(batch.no_sandbox) if sandbox is None else _allowed(sandbox, batch)
    version = course_version(batch.course)
    cache_dir = batch.out / ".cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    results, todo = [], []
    for learner in learners:
        key = cache_key(learner, batch, version, sandbox)
        cached = cache_dir / f"{key}.json"
        if batch.use_cache and cached.exists():
            result = json.loads(cached.read_text(encoding="utf-8"))
            result["learner"] = learner.id  # the same bytes may come from another learner
            result["reveal_hidden"] = batch.reveal_hidden  # a choice about the page, not the grade
            write_learner(batch.out, result)
            results.append(result)
            report(f"{learner.id}: {result['total']}/{result['max']} (cached)")
        else:
            todo.append((learner, cached))
    todo = longest_first(todo, lambda item: item[0])
    if sandbox != SANDBOXED:
        load_judges(batch.exam)  # here, before any worker: see load_judges
    # fork (Linux) starts every worker at once, each loading the judges before its first
    # learner, side by side (in this process first, they would cost a core's time while the
    # others wait); spawn elsewhere.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() and sys.platform.startswith("linux") else "spawn"
    context = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, workers), mp_context=context,
                                                initializer=load_judges, initargs=(batch.exam,)) as pool:
        futures = {pool.submit(_grade_safely, learner, batch, sandbox): (learner, cached) for learner, cached in todo}
        for future in concurrent.futures.as_completed(futures):
            learner, cached = futures[future]
            try:
                result = future.result()
            except Exception as error:  # the worker process itself died
                result = {"learner": learner.id, "sandbox": sandbox, "grader_version": GRADER_VERSION,
                          "notebooks": {}, "total": 0, "max": 0,
                          "problems": [f"the grading worker died: {type(error).__name__}: {error}"]}
            write_learner(batch.out, result)
            if not any("the grader failed" in p or "worker died" in p for p in result["problems"]):
                from course_utils.grading.reports import write_atomically

                write_atomically(cached, json.dumps(result))
            results.append(result)
            report(f"{learner.id}: {result['total']}/{result['max']}")
    return results, len(learners) - len(todo)
