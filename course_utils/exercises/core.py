"""The exercise framework: ``check`` / ``hint`` / ``solution`` / ``verdict``.

Every exercise is split in two halves that share nothing but plain data:

* the **probe** runs the learner's code on chosen inputs and records what came out
  (shapes, dtypes, numbers) with ``course_utils.exercises.plain``;
* the **judge** reads only that record and decides: passed, or what exactly is wrong.

In a notebook both halves run in the learner's kernel. The instructor's grader runs the probe
in the kernel and the judge in its own process, so code that patches ``torch.allclose`` or
returns an object whose ``__eq__`` is always true gains nothing.

``check`` never raises on a wrong answer (an unsolved notebook still runs to the end), except in
strict mode (``COURSE_STRICT=1``, or nbgrader's autograde), where anything but *passed* raises.
"""

from __future__ import annotations

import copy
import enum
import html
import inspect
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

from course_utils import progress_store, run_mode
from course_utils.display import show
from course_utils.exercises import plain
from course_utils.exercises.answer_source import recording_switched_off
from course_utils.exercises.warnings_once import warnings_said_once
from course_utils.exercises.likely_cause import likely_cause
from course_utils.exercises.solution_text import solution_source
from course_utils.exercises.placeholder import ____, _PlaceholderUsed, holds_placeholder  # noqa: F401
from course_utils.exercises.running import (
    CheckTimeout,
    LearnerRaised,
    Runner,
    learner_state_preserved,
    time_limit,
)

DEFAULT_TIME_LIMIT_S = 5.0


# --------------------------------------------------------------------------------------------
# Outcomes and verdicts
# --------------------------------------------------------------------------------------------
class Outcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_ATTEMPTED = "not attempted"
    RAISED = "your code raised"


_SYMBOL = {
    Outcome.PASSED: "✅",
    Outcome.FAILED: "❌",
    Outcome.NOT_ATTEMPTED: "⏳",
    Outcome.RAISED: "💥",
}
_COLOUR = {  # background, border
    Outcome.PASSED: ("#e9f7ef", "#2e7d32"),
    Outcome.FAILED: ("#fdecea", "#c62828"),
    Outcome.NOT_ATTEMPTED: ("#f4f4f4", "#757575"),
    Outcome.RAISED: ("#fff4e5", "#ef6c00"),
}


_NOTHING_RECORDED = "does not require grad and does not have a grad_fn"


class PassNote(str):
    """A judge's word on an answer that is correct but could be better (``float(loss)``, which
    makes torch warn): the verdict passes, and the note follows the passed message."""


class Mistake(str):
    """A judge's message that names a classic mistake, with a stable id beside it.

    A judge returns ``Mistake("broadcast-every-pair", "Your result has shape ...")`` where it
    recognises the mistake, and a plain ``str`` otherwise: the id, prefixed with the exercise's
    name (``residuals.broadcast-every-pair``), is what a class report counts
    (``Verdict.mistake``); the text is what the learner reads.
    """

    id: str

    def __new__(cls, id: str, message: str) -> "Mistake":
        named = super().__new__(cls, message)
        named.id = id
        return named

    def __add__(self, more: str) -> "Mistake":
        """More words after a named message (advice a judge appends) leave it the same mistake."""
        return Mistake(self.id, str.__add__(self, more))


class Raised:
    """A judge's word that the verdict is "your code raised": the learner's code raised on an
    input the probe tried after others (``error_record``), and those before it show no mistake.

    A probe that meets an error on a later input records it and stops, instead of asking the
    judge there whether an earlier input already showed a mistake: the judge needs what the
    right answer gives, which only the judge's side computes (``Exercise(expect=...)``)."""

    def __init__(self, error: dict):
        self.error = error


class ErrorNote(NamedTuple):
    """One of an exercise's ``error_notes``: a clue found in an error's message, the classic
    mistake that usually causes that error, and the mistake's stable id.

    An exercise writes a note as ``(clue, text, id)``, or ``(clue, text)``, which gets an id
    made of the clue's words (``note_id``). The id names the verdict of an answer whose error the
    note explains (``softplus.in-place-change``), so a class report counts the classic mistake
    instead of ``raised:RuntimeError``. A written id is the better one: a clue follows the wording
    of torch's or Python's message, which a new version may change, and names the error, not the
    mistake.
    """

    clue: str
    text: str
    id: str


def note_id(clue: str) -> str:
    """The id a note written without one gets: the clue's words, lower-case, joined by hyphens."""
    return "-".join(re.findall(r"[a-z0-9]+", clue.lower())) or "error-note"


def error_note(entry: Sequence[str]) -> ErrorNote:
    """An ``error_notes`` entry as written, ``(clue, text)`` or ``(clue, text, id)``."""
    if len(entry) == 2:
        clue, text = entry
        return ErrorNote(clue, text, note_id(clue))
    clue, text, id = entry
    return ErrorNote(clue, text, id)


def error_notes_of(entries: Sequence[Sequence[str]], exercise: str) -> tuple[ErrorNote, ...]:
    """``entries`` as ErrorNotes; a class report could not tell two notes with one id apart,
    so an exercise whose notes share one is refused where it is defined."""
    notes = tuple(error_note(entry) for entry in entries)
    ids = [note.id for note in notes]
    repeated = sorted({id for id in ids if ids.count(id) > 1})
    if repeated:
        raise ValueError(f"{exercise}: error notes share the id {', '.join(repeated)}; give each its own")
    return notes


# Failures no judge named, by what their message says differs (facts.tensor_problem's words).
_GENERIC_MISTAKES = (
    ("has shape", "shape"), ("has dtype", "dtype"), (" is on ", "device"),
    ("wrong values", "values"), ("changed its input", "changed-input"), ("changed the caller", "changed-input"),
    ("was stopped after", "timeout"), ("check() got", "not-a-function"),
    ("check() needs a function that takes", "wrong-signature"), ("could not handle", "unusable-result"),
)


def mistake_of(outcome: "Outcome", message: str, named: str | None = None) -> str | None:
    """The stable id of what went wrong: the judge's own name for it, else a generic kind."""
    if outcome is Outcome.PASSED:
        return None
    if named:
        return named
    if outcome is Outcome.NOT_ATTEMPTED:
        return "not-attempted"
    if outcome is Outcome.RAISED:
        return "raised:" + message.split(":", 1)[0].strip() if ":" in message else "raised"
    for sign, kind in _GENERIC_MISTAKES:
        if sign in message:
            return kind
    return "other"


@dataclass
class Verdict:
    """What a check decided, and the one message a learner needs to act on it."""

    exercise: str
    title: str
    outcome: Outcome
    message: str
    _shown: bool = field(default=False, repr=False, compare=False)
    # The stable id of the mistake (``mistake_of``); None when passed.
    mistake: str | None = field(default=None, compare=False)

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASSED

    def heading(self) -> str:
        return f"{_SYMBOL[self.outcome]} {self.title}: {self.outcome.value}"

    def __str__(self) -> str:
        return f"{self.heading()}\n{textwrap.indent(self.message, '   ')}"

    def _repr_html_(self) -> str:
        background, border = _COLOUR[self.outcome]
        body = html.escape(self.message).replace("\n", "<br>")
        return (
            f'<div style="background:{background};border-left:4px solid {border};'
            f'padding:6px 10px;margin:4px 0;color:#222;font-family:sans-serif">'
            f"<b>{html.escape(self.heading())}</b><br>{body}</div>"
        )

    def _ipython_display_(self):
        # check() has shown this verdict already; as a cell's last value it would show twice.
        if not self._shown:
            show(self)

    def to_dict(self) -> dict:
        return {
            "exercise": self.exercise,
            "title": self.title,
            "outcome": self.outcome.value,
            "message": self.message,
            "mistake": self.mistake,
        }


class ExerciseNotPassed(AssertionError):
    """Raised by ``check`` when a run requires another outcome, so CI and nbgrader see it."""


# Read once, when the notebook's first cell imports the exercises and before any answer cell
# runs: an answer cell that deletes the variable must not turn grading off.
_NBGRADER_GRADING_AT_IMPORT = run_mode.nbgrader_grading()


def required_outcome() -> "Outcome | None":
    """The outcome every check must have in this run, or None for a learner's own session.

    ``COURSE_STRICT=1`` (CI on solutions/) and nbgrader's autograde require *passed*: a check
    cell must error when the exercise is not solved. ``COURSE_EXPECT=not_attempted`` (CI on the
    generated learner notebooks) requires *not attempted*: a blank exercise that reports
    anything else would confuse every learner who opens it.
    """
    value = run_mode.required_outcome_value(_NBGRADER_GRADING_AT_IMPORT)
    return None if value is None else Outcome(value)


def strict_mode() -> bool:
    return required_outcome() is not None


# --------------------------------------------------------------------------------------------
# What a probe returns
# --------------------------------------------------------------------------------------------
class Status(str, enum.Enum):
    OK = "ok"
    NOT_ATTEMPTED = "not_attempted"
    RAISED = "raised"
    TIMEOUT = "timeout"
    BAD_ANSWER = "bad_answer"  # check() was given the wrong kind of thing


@dataclass
class ProbeResult:
    """Plain data only: safe to write to disk and to judge in another process."""

    status: Status
    data: Any = None
    error: dict | None = None

    def to_plain(self) -> dict:
        return plain.to_plain({"status": self.status.value, "data": self.data, "error": self.error})

    @classmethod
    def from_plain(cls, record) -> "ProbeResult":
        record = plain.to_plain(record)
        if type(record) is not dict or set(record) != {"status", "data", "error"}:
            raise ValueError("not a probe result")
        error = record["error"]
        if error is not None and not (
            type(error) is dict and all(type(v) is str for v in error.values())
        ):
            raise ValueError("a probe result's error must map str to str")
        return cls(Status(record["status"]), record["data"], error)


# --------------------------------------------------------------------------------------------
# What check() accepts
# --------------------------------------------------------------------------------------------
def _kind_of(value) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__name__
    return f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"


def a_or_an(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeio' else 'a'} {word}"


@dataclass(frozen=True)
class Function:
    """check() expects a function called like ``name(params...)``."""

    name: str
    params: tuple[str, ...]
    # What a right answer returns, in a few words ("a tensor shaped like x"): named when the
    # check cannot use what the learner's function returned.
    returns: str | None = None

    def call_text(self) -> str:
        return f"{self.name}({', '.join(self.params)})"

    def problem_with(self, answer) -> str | None:
        """One sentence saying what was expected, when ``answer`` is not such a function."""
        how = f"pass the function itself, without calling it: .check({self.name})"
        if answer is None:
            return (
                f"check() got None; it needs your function {self.call_text()} — {how}. "
                "(A function that forgets `return` also gives None when called.)"
            )
        if not callable(answer):
            return (
                f"check() got {a_or_an(_kind_of(answer))}; it needs your function "
                f"{self.call_text()}, not its result — {how}."
            )
        try:
            signature = inspect.signature(answer)
        except (TypeError, ValueError):
            return None  # a builtin without a signature: let the call decide
        try:
            signature.bind(*self.params)
        except TypeError:
            shown = ", ".join(signature.parameters) or "no arguments"
            count = len(self.params)
            return (
                f"check() needs a function that takes {count} argument"
                f"{'s' if count != 1 else ''}, like {self.call_text()}; yours takes ({shown})."
            )
        return None


# --------------------------------------------------------------------------------------------
# The exercise
# --------------------------------------------------------------------------------------------
Probe = Callable[[Any, Runner], Any]
Judge = Callable[[Any], "str | None"]


class Exercise:
    """A declarative exercise: what the answer is, how to probe it, how to judge the record.

    ``probe(answer, run)`` calls the learner's code through ``run(fn, *args, on=...)`` and
    returns plain data. ``judge(data)`` returns ``None`` when the answer is right, else the
    message that says what is wrong (and, where a classic mistake explains it, names it).
    ``error_notes`` pairs a clue found in an exception's message with the classic mistake
    that usually causes it, and names that mistake (``ErrorNote``).

    ``expect(data)``, where given, adds to the probe's record what the right answer gives on the
    inputs the record holds (``given`` entries; ``facts.tensor_of`` rebuilds them), before the
    judge reads it. It is half of the judge: the grader runs it in its own process, so the
    learner's kernel, where the probe runs, computes no right answer that its code could read.

    ``messages``, where given, is the exercise's table of templates by mistake id
    (``messages.Messages``) that its judge words its verdicts from.
    """

    def __init__(
        self,
        name: str,
        *,
        chapter: str,
        title: str,
        expects: Function,
        probe: Probe,
        judge: Judge,
        hints: Sequence[str],
        reference: Callable,
        passed_message: str = "Correct.",
        error_notes: Sequence[tuple[str, str] | tuple[str, str, str]] = (),
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
        expect: Callable[[Any], Any] | None = None,
        messages: Any = None,
    ):
        self.name = name
        self.chapter = chapter
        self.id = f"{chapter}.{name}"
        self.title = title
        self.expects = expects
        self._probe = probe
        self._judge = judge
        self._expect = expect
        self.hints = tuple(hints)
        self.reference = reference
        self.passed_message = passed_message
        self.error_notes = error_notes_of(error_notes, self.id)
        self.time_limit_s = time_limit_s
        # The exercise's table of messages by mistake id (``messages.Messages``): its wording.
        self.messages = messages
        self._next_hint = 0

    def __repr__(self):
        return f"<Exercise {self.id}: {self.title}>"

    # -- the two halves ------------------------------------------------------------------
    def probe(self, answer) -> ProbeResult:
        """Run the learner's answer and record what happened, as plain data."""
        if answer is ____ or holds_placeholder(answer):
            return ProbeResult(Status.NOT_ATTEMPTED)
        problem = self.expects.problem_with(answer)
        if problem is not None:
            return ProbeResult(Status.BAD_ANSWER, error={"message": problem})
        runner = Runner()
        try:
            with learner_state_preserved(), time_limit(self.time_limit_s), warnings_said_once():
                data = self._probe(answer, runner)
        except CheckTimeout:
            return ProbeResult(Status.TIMEOUT, error={"seconds": f"{self.time_limit_s:g}"})
        except LearnerRaised as raised:
            record = error_record(raised, answer)
            if record is None:
                return ProbeResult(Status.NOT_ATTEMPTED)
            return ProbeResult(Status.RAISED, error=record)
        except Exception as error:  # the probe tripped over what the answer returned
            if answer is not self.reference and self._trips_on_the_reference():
                return ProbeResult(Status.BAD_ANSWER, error={"message": _check_cannot_run(error)})
            return ProbeResult(
                Status.BAD_ANSWER, error={"message": self._unusable(runner, error)}
            )
        return ProbeResult(Status.OK, plain.to_plain(data))

    def _trips_on_the_reference(self) -> bool:
        """Whether the probe trips over the worked answer too, here: then what failed is the
        check on this machine (a torch it was not written for), not the learner's answer.
        False where the worked answer cannot run (grading withholds it)."""
        try:
            with learner_state_preserved(), time_limit(self.time_limit_s), warnings_said_once():
                self._probe(self.reference, Runner())
        except (CheckTimeout, LearnerRaised):
            return False
        except Exception:
            return True
        return False

    def _unusable(self, runner: Runner, error: Exception) -> str:
        """The check's own failure on an odd returned value: what came back, what was expected.

        Not "your code raised": the learner's code ran; the check could not use its result.
        """
        expected = self.expects.returns or "what the exercise asks for (see .hint())"
        stopped = f"({type(error).__name__}: {_first_lines(str(error), 200)})"
        if runner.last_returned is None:
            return (
                f"The check could not handle your answer {stopped}. It expects "
                f"{self.expects.call_text()} to return {expected}."
            )
        on = f" on {runner.last_on}" if runner.last_on else ""
        return (
            f"The check could not handle what your function returned{on}: "
            f"{runner.last_returned}. It expects {expected}. {stopped}"
        )

    def judge(self, result: ProbeResult) -> Verdict:
        """Decide from the record alone. Pure: no learner code runs here."""
        if result.status is Status.NOT_ATTEMPTED:
            return self._verdict(
                Outcome.NOT_ATTEMPTED,
                f"Not attempted yet: write {self.expects.call_text()} in the cell above "
                "(replace the `raise NotImplementedError()` line), run it, then run this check.",
            )
        if result.status is Status.BAD_ANSWER:
            return self._verdict(Outcome.FAILED, result.error["message"])
        if result.status is Status.TIMEOUT:
            return self._verdict(
                Outcome.FAILED,
                f"Your code was stopped after {result.error['seconds']} s. Look for a loop that "
                "never ends, or work far bigger than the task needs.",
            )
        if result.status is Status.RAISED:
            return self._raised_verdict(result.error)
        try:
            data = self._expect(copy.deepcopy(result.data)) if self._expect is not None else result.data
            problem = self._judge(data)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError) as error:
            # a record the check cannot read (torch's own RuntimeError where rebuilding an input
            # from a record whose facts disagree fails): a verdict, never an error of the grader
            return self._verdict(
                Outcome.FAILED,
                f"The check could not read the record of your answer ({error}). It expects "
                f"{self.expects.call_text()} to return "
                f"{self.expects.returns or 'what the exercise asks for (see .hint())'}.",
            )
        if isinstance(problem, Raised):
            return self._raised_verdict(problem.error)
        if problem is None:
            return self._verdict(Outcome.PASSED, self.passed_message)
        if isinstance(problem, PassNote):
            return self._verdict(Outcome.PASSED, f"{self.passed_message}\nNote: {problem}")
        return self._verdict(Outcome.FAILED, str(problem), getattr(problem, "id", None))

    def _raised_verdict(self, error: dict) -> Verdict:
        message = self._raised_message(error)
        return self._verdict(Outcome.RAISED, str(message), getattr(message, "id", None))

    def _raised_message(self, error: dict) -> str:
        """The learner's error, the input and line it came from, and what to look at.

        The exercise's own notes (a clue in the error → the classic mistake of its topic) come
        first, and the message is then that ``Mistake``, named by the note's id; any other
        error gets what its own text shows (``likely_cause``).
        """
        message = f"{error['type']}: {error['message']}\n(on {error['on']})"
        if error.get("line"):
            message += f"\nRaised at: {error['line']}"
        if error.get("recording_off"):
            # The answer made a leaf that requires grad (or not); what stopped the recording is
            # the block it computed in, which the exercise's usual note would not name.
            ways = " / ".join(error["recording_off"])
            return Mistake("computed-without-recording", message + (
                f"\nLikely cause: your function computes under {ways}: nothing inside it is "
                "recorded, not even from a tensor that requires grad, so backward() has no graph "
                "to follow. Compute the output (and the loss) outside that block."
            ))
        # A clue is looked for in the message, then in the line that raised (`reference.copy_(`).
        seen = error["message"] + "\n" + error.get("line", "")
        notes = [note for note in self.error_notes if note.clue in seen]
        if notes:
            return Mistake(notes[0].id, message + "\nLikely cause: " + notes[0].text)
        return message + "\nLikely cause: " + likely_cause(error["type"], error["message"], error.get("line"))

    def _verdict(self, outcome: Outcome, message: str, named: str | None = None) -> Verdict:
        return Verdict(self.id, self.title, outcome, message,
                       mistake=mistake_of(outcome, message, named and f"{self.name}.{named}"))

    # -- what learners call ----------------------------------------------------------------
    def verdict(self, answer=____) -> Verdict:
        """The outcome, without showing anything or recording progress (tests, grading)."""
        return self.judge(self.probe(answer))

    def check(self, answer=____) -> Verdict:
        """Check ``answer``, show the verdict and return it.

        Raises only in a run that requires an outcome (see ``required_outcome``).
        """
        verdict = self.verdict(answer)
        verdict._shown = True
        show(verdict)
        required = required_outcome()
        if required is not None and verdict.outcome is not required:
            raise ExerciseNotPassed(f"this run requires '{required.value}'; got:\n{verdict}")
        if verdict.passed and required is None:  # a run that requires an outcome never records
            progress_store.record_pass(self.id)
        return verdict

    def hint(self, level: int | None = None) -> None:
        """Show the next hint (each call goes one further), or hint number ``level``."""
        if level is None:
            if self._next_hint >= len(self.hints):
                # Said once more after the last one, the last hint looks like a new one: say so.
                print(
                    f"That was the last hint ({len(self.hints)} of {len(self.hints)}). "
                    f"ex.{self.name}.hint({len(self.hints)}) shows it again; "
                    f"ex.{self.name}.solution() shows a worked answer."
                )
                return
            index = self._next_hint
            self._next_hint = index + 1
        else:
            if not 1 <= level <= len(self.hints):
                print(f"{self.title} has hints 1 to {len(self.hints)}.")
                return
            index = level - 1
        show(_Note(f"Hint {index + 1} of {len(self.hints)}", self.hints[index]))

    def solution_text(self) -> str:
        """The code ``solution()`` shows, which a learner may paste into the answer cell.

        The reference's source, preceded by the imports of its module that it uses, so that
        it runs as it is wherever it is pasted (the notebook may not have imported ``math``).
        """
        return solution_source(self.reference)

    def solution(self) -> None:
        """Show the reference solution as code."""
        show(_Note(f"Solution: {self.title}", self.solution_text(), code=True))


def _check_cannot_run(error: Exception) -> str:
    """The message when the check itself fails here, on every answer (``_trips_on_the_reference``)."""
    import platform

    import torch

    return (f"This check cannot run on this machine (torch {torch.__version__}, Python "
            f"{platform.python_version()}): it fails on the worked answer too, so it says nothing "
            f"about yours ({type(error).__name__}: {_first_lines(str(error), 200)}). The course "
            "supports torch 2.6 and later: please report this, with the torch version.")


def error_record(raised: LearnerRaised, answer) -> dict | None:
    """What a probe records of an error the learner's code raised (plain data: its type, its
    message, the input and the line); None when it is the stub's own error (not attempted)."""
    error = raised.error
    if isinstance(error, _PlaceholderUsed) or (type(error) is NotImplementedError and not str(error)):
        return None
    record = {"type": type(error).__name__, "message": _first_lines(str(error)), "on": raised.on}
    if raised.line is not None:
        record["line"] = raised.line
    if _NOTHING_RECORDED in record["message"]:
        record["recording_off"] = recording_switched_off(answer)
    return record


def later_error(raised: LearnerRaised, answer, earlier=True) -> dict:
    """What a probe records of an error on a later input, for the judge to weigh against the
    earlier inputs (``Raised``). With nothing ``earlier`` to weigh, or for the stub's own error
    (not attempted), the error is the verdict: it is raised again, as if the probe had not
    caught it."""
    error = error_record(raised, answer) if earlier else None
    if error is None:
        raise raised
    return error


def _first_lines(text: str, limit: int = 600) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class _Note:
    """A hint or a solution, shown like a verdict."""

    heading: str
    body: str
    code: bool = False

    def __str__(self) -> str:
        return f"{self.heading}\n{textwrap.indent(self.body, '   ')}"

    def _repr_html_(self) -> str:
        body = html.escape(self.body)
        body = f"<pre style='margin:4px 0'>{body}</pre>" if self.code else body
        return (
            '<div style="background:#eef4fb;border-left:4px solid #1565c0;padding:6px 10px;'
            f'margin:4px 0;color:#222;font-family:sans-serif"><b>{html.escape(self.heading)}'
            f"</b><br>{body}</div>"
        )
