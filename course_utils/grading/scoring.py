"""Verdicts, decided in the grading process from plain records alone.

A record is judged by the exercise's own judge, as in a notebook. Before that, its expected
values are compared with those of a run of the reference solution in this process: the
expected half of a record is computed from seeded inputs, so it must match exactly, and a
record whose expectations were rewritten in the kernel is refused.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

import numpy as np

from course_utils.exercises.core import ProbeResult
from course_utils.grading.assemble import Assembly
from course_utils.grading.execute import Execution
from course_utils.grading.answer_cell import defined_in, written_in_cell  # noqa: F401


@dataclass
class ExerciseScore:
    exercise: str
    score: int
    max: int
    outcome: str
    reason: str
    # An exam's exercise scores twice: its public cases (the check the learner saw) and the
    # hidden ones (the practice check); then score, max, outcome and reason are the hidden part's.
    public: "ExerciseScore | None" = None
    # What went wrong, as a stable id (core.mistake_of): the judge's name for a classic mistake,
    # else a kind; also for what the grader itself decided (missing, timeout, no result).
    mistake: str | None = None

    def __post_init__(self):
        if self.mistake is None and self.outcome != "passed":
            self.mistake = self.outcome.replace(" ", "-")

    def part(self) -> dict:
        return {"score": self.score, "max": self.max, "outcome": self.outcome, "reason": self.reason,
                "mistake": self.mistake}

    def to_dict(self) -> dict:
        if self.public is None:
            return self.part()
        return {"score": self.score + self.public.score, "max": self.max + self.public.max,
                "outcome": self.outcome, "reason": self.reason,
                "public": self.public.part(), "hidden": self.part()}


# Errors that an answer cell meets when it reaches one of the grader's limits, and the option
# that sets that limit: a learner reading "BlockingIOError" alone cannot tell that it was the
# grader, not their code's logic, that said no.
_LIMIT_ERRORS = (
    (("BlockingIOError", "Resource temporarily unavailable"),
     "it started more processes or threads than grading allows (--max-processes)"),
    (("MemoryError", "Cannot allocate memory", "can't allocate memory"),
     "it used more memory than grading allows (--memory-mb)"),
    (("File too large",), "it wrote a file larger than grading allows (--max-file-mb)"),
)


def limit_hit(error: str) -> str | None:
    """Which of the grader's limits an error shows was hit (with the option that sets it), if any."""
    for signs, why in _LIMIT_ERRORS:
        if any(sign in error for sign in signs):
            return why
    return None


def answer_raised(error: str) -> str:
    """The reason for an answer cell that raised, naming the grader's limit where one was hit."""
    reason = f"the answer cell raised {error}"
    why = limit_hit(error)
    return f"{reason}; {why}" if why else reason


def printed_too_much(seconds: str | None, cap_kb: int) -> str:
    """What an answer that printed past the cap is told: it ran out of time, or (``seconds``
    None) of memory, while printing: what it printed waits in the kernel's memory until it is
    sent, and a loop of prints fills it faster than a busy machine sends it."""
    stopped = f"stopped after {seconds} s" if seconds is not None else "stopped when it ran out of memory"
    took = "took longer than the check allows" if seconds is not None else "filled the memory grading allows"
    return (f"Your code was {stopped} while printing: it printed more than grading keeps of a cell "
            f"({cap_kb} KB, --output-cap-kb), and printing that much {took}. Print less, or nothing, in "
            "the function.")


def stopped_while_printing(result: ProbeResult, capped: bool, cap_kb: int) -> str | None:
    """Why a check whose cell printed past the cap stopped, when the printing stopped it: it ran
    out of time, or out of memory (a ``MemoryError`` from the printing's own buffer), which of
    the two depending on how fast a busy machine sent what was printed."""
    if not capped or result.error is None:
        return None
    if result.status.value == "timeout":
        return printed_too_much(result.error.get("seconds", "?"), cap_kb)
    if result.status.value == "raised" and result.error.get("type") == "MemoryError":
        return printed_too_much(None, cap_kb)
    return None


@functools.lru_cache(maxsize=None)
def _exercise(module: str, name: str):
    return getattr(importlib.import_module(f"course_utils.exercises.{module}"), name)


@functools.lru_cache(maxsize=None)
def _trusted_record(module: str, name: str):
    exercise = _exercise(module, name)
    return exercise.probe(exercise.reference).data


# Entries of a record that the probe computes from its seeded inputs alone, never from what the
# learner's code did: the inputs it gave ("given") and, where a probe still computes it in the
# kernel, what the right answer gives ("expected"). A run of the probe here on the reference has
# the same ones, at the same places.
_TRUSTED_KEYS = ("expected", "given")


def _trusted_parts(record, path=()):
    """(path, value) of every entry under one of ``_TRUSTED_KEYS`` in a record."""
    if isinstance(record, dict):
        for key, value in record.items():
            if key in _TRUSTED_KEYS:
                yield path + (key,), value
            else:
                yield from _trusted_parts(value, path + (key,))
    elif isinstance(record, list):
        for index, value in enumerate(record):
            yield from _trusted_parts(value, path + (index,))


def _at(record, path):
    for step in path:
        record = record[step]
    return record


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
            and bool(np.allclose(a, b, rtol=1e-6, atol=1e-7, equal_nan=True))
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def tampered(module: str, name: str, data) -> bool:
    """Whether a record differs from the grader's own run of the probe on the reference in an
    entry that depends on the seeds alone (``_TRUSTED_KEYS``), or lacks one.

    Asked only of a record whose verdict passed: a probe stops early on a wrong answer, so an
    honest wrong answer's record lacks entries, and its verdict (with the mistake it names) is
    the one the learner saw in the notebook. A record that passes only because entries were
    rewritten or left out was changed inside the kernel."""
    for path, value in _trusted_parts(_trusted_record(module, name)):
        try:
            if not _same(_at(data, path), value):
                return True
        except (KeyError, IndexError, TypeError):
            return True
    return False


TAMPERED = ("the check's own record (the inputs it gave your code, or what it expected) was changed from "
            "inside the notebook")


def judge_record(module: str, name: str, result: ProbeResult):
    """The verdict the notebook's check gives this record, judged here; None when it passes only
    because the record was changed inside the kernel (``tampered``)."""
    verdict = _exercise(module, name).judge(result)
    if verdict.passed and result.data is not None and tampered(module, name, result.data):
        return None
    return verdict


@functools.lru_cache(maxsize=None)
def _public_judge(module: str, name: str, hints: str = "none"):
    """The exam's public check of an exercise, its expectations computed here from the reference,
    as the release made with ``--hints hints`` has it: its verdict, which the learner sees at once,
    shows no hint or error note that release withheld."""
    from course_utils.exercises.exam import public_exercise

    return public_exercise(_exercise(module, name), hints=hints)


def public_score(module: str, name: str, record, hidden: ExerciseScore, hints: str = "none") -> ExerciseScore:
    """The public half of an exam exercise, judged as the release with hint policy ``hints``
    judged it. Where the hidden half never got a verdict (no answer, the notebook stopped, a
    function not from the answer cell), the public half shares its fate."""
    if record is None or "public" not in record or hidden.outcome in ("missing", "timeout", "kernel died") or (
            hidden.reason.startswith("the ") and "not a function written in your answer cell" in hidden.reason):
        return ExerciseScore(name, 0, 1, hidden.outcome, hidden.reason, mistake=hidden.mistake)
    try:
        result = ProbeResult.from_plain(record["public"])
    except (ValueError, TypeError, KeyError) as error:
        return ExerciseScore(name, 0, 1, "no result", f"unreadable public check result ({error})")
    verdict = _public_judge(module, name, hints).judge(result)
    reason, mistake = verdict.message, verdict.mistake
    if verdict.outcome.value == "your code raised":
        reason, mistake = _raised(reason, mistake)
    return ExerciseScore(name, int(verdict.passed), 1, verdict.outcome.value, reason, mistake=mistake)


def _raised(reason: str, mistake: str | None) -> tuple[str, str | None]:
    """A "your code raised" verdict's reason and mistake, with what grading adds: the limit the
    error shows was hit, and ``reached-for-the-grader`` for a refusal of the grader's guard."""
    first = reason.split("\n", 1)[0]
    why = limit_hit(first)
    if why:
        reason = f"{reason}\n{why[0].upper()}{why[1:]}: a limit of grading, not of the exercise."
    if "grading: " in first:
        mistake = "reached-for-the-grader"
    return reason, mistake


def score_notebook(
    module: str, assembly: Assembly, execution: Execution, answers: dict[str, str] | None = None,
    exam: bool = False, hints: str = "none", limits=None,
) -> list[ExerciseScore]:
    """Score every exercise; ``answers`` (grade_id → source) enables the code check; ``exam``
    scores the public cases too (``ExerciseScore.public``), as the release made with ``--hints
    hints`` checks them."""
    scores = _score_hidden(module, assembly, execution, answers or {}, limits)
    if exam:
        for probe, score in zip(assembly.probes, scores):
            score.public = public_score(module, probe.exercise, execution.records.get(probe.grade_id), score,
                                        hints)
    return scores


def _score_hidden(module: str, assembly: Assembly, execution: Execution, answers: dict[str, str],
                  limits=None) -> list[ExerciseScore]:
    from course_utils.grading.sandbox import Limits

    limits = limits or Limits()
    cells = {probe.grade_id: index for index, probe in assembly.cell_of_probe.items()}
    scores = []
    for probe in assembly.probes:
        name = probe.exercise
        if probe.answer_id in assembly.missing:
            scores.append(ExerciseScore(name, 0, 1, "missing", "missing: the submission has no answer cell for it"))
            continue
        record = execution.records.get(probe.grade_id)
        if record is None:
            if probe.grade_id in execution.record_problems:
                scores.append(ExerciseScore(name, 0, 1, "no result", execution.record_problems[probe.grade_id],
                                            mistake="record-tampered"))
            elif execution.stopped:
                outcome = "timeout" if execution.stopped.startswith("timeout") else (
                    "kernel died" if execution.stopped.startswith("kernel died") else "no result")
                scores.append(ExerciseScore(name, 0, 1, outcome, execution.stopped))
            else:
                error = execution.answer_errors.get(probe.answer_id)
                if error:
                    why = answer_raised(error)
                elif execution.first_course_error:
                    why = f"its check produced no result: {execution.first_course_error}"
                else:
                    why = "its check produced no result"
                scores.append(ExerciseScore(name, 0, 1, "no result", why))
            continue
        try:
            result = ProbeResult.from_plain(record["probe"])
            code = record["code"]
        except (ValueError, TypeError, KeyError) as error:
            scores.append(ExerciseScore(name, 0, 1, "no result", f"unreadable check result ({error})"))
            continue
        if result.status.value != "not_attempted" and not written_in_cell(code, answers.get(probe.answer_id, "")):
            scores.append(ExerciseScore(
                name, 0, 1, "failed",
                f"the {probe.variable} that was checked is not a function written in your answer cell",
                mistake="not-written-in-the-answer-cell"))
            continue
        verdict = judge_record(module, name, result)
        if verdict is None:
            scores.append(ExerciseScore(name, 0, 1, "failed", TAMPERED, mistake="record-tampered"))
            continue
        reason = verdict.message
        error = execution.answer_errors.get(probe.answer_id)
        outcome = verdict.outcome.value
        mistake = verdict.mistake
        printing = stopped_while_printing(result, cells.get(probe.grade_id) in execution.capped_cells,
                                          limits.output_cap_kb)
        if printing:
            reason, mistake = printing, "printed-too-much"
        elif verdict.outcome.value == "your code raised":
            reason, mistake = _raised(reason, mistake)
        if not verdict.passed and error and result.status.value == "not_attempted":
            # The stub was still in place because the answer cell stopped before defining it.
            reason, outcome = answer_raised(error), "your code raised"
            mistake = "raised:" + error.split(":", 1)[0].strip()
        scores.append(ExerciseScore(name, int(verdict.passed), 1, outcome, reason, mistake=mistake))
    return scores
