"""The catalogue of answers every exercise is tried against, written as learners write them.

Each chapter's test module declares, per exercise, right answers in other styles than the
reference and wrong answers with the words their message must contain:

    CATALOGUE = Catalogue({
        ex.remove_batch_dim: [
            right("indexing", lambda x: x[0]),
            wrong("squeeze() drops every size-1 dim", lambda x: x.squeeze(), "squeeze(0)"),
            wrong("squeezes the caller's x in place", lambda x: x.squeeze_(0),
                  "changed its input x in place", kind=STATEFUL),
        ],
    })

    @pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
    def test_catalogue(case):
        case.assert_holds()

``tests/test_catalogue_gate.py`` holds every exercise of the course to the minimum counts, so an
exercise cannot be added (or a case removed) without its catalogue.
"""

from __future__ import annotations

import importlib
import inspect
import textwrap
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable

from course_utils.exercises.core import Exercise, Outcome
from course_utils.exercises.facts import COMPARISON
from course_utils.exercises.messages import advice_already_followed
from course_utils.exercises.tensors.common import COMMON as TENSORS_COMMON
from slow_machine import scaled

# Seconds a catalogue answer may take (scaled by COURSE_TEST_TIME_SCALE); the course's own
# limit for a learner's code is 5 s, which a right answer overran on a 2-core machine running
# the test command beside four other heavy processes.
CATALOGUE_TIME_LIMIT_S = 60

# Kinds of wrong answer. TYPICAL: the classic mistake of the topic. STATEFUL: right on the first
# call, wrong on a later one (stale .grad, optimizer state recreated, a cache, a switch not put
# back, an input mutated). EDGE: right on the notebook's example, wrong somewhere else the task
# allows (another dtype, a non-contiguous or empty input, another device, a shortcut that only
# coincides on easy inputs, a chained or overlapping mapping).
TYPICAL, STATEFUL, EDGE = "typical", "stateful", "edge"
KINDS = (TYPICAL, STATEFUL, EDGE)

# Every failing verdict carries a mistake id (core.mistake_of) that a class report counts: a
# typical mistake gets the judge's own name for it (``exercise.kebab-case-id``), unless its
# message is one of the generic comparisons below, which name no mistake of the topic; no
# wrong answer may end as "other", the id of a message nobody named.
NAMED_OR_GENERIC_COMPARISON = frozenset({"shape", "dtype", "device", "values", "changed-input", "wrong-signature"})
MISTAKE_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")

# What the course promises per exercise (issue 13).
MIN_WRONG = 8
MIN_WRONG_STATEFUL_OR_EDGE = 3
MIN_RIGHT = 3

# Mistakes worded outside an exercise's own table: the generic comparisons (facts.COMPARISON),
# a chapter's shared helpers (tensors.common.COMMON), and what the exercise machinery itself
# says (core: the signature, an error from a tensor that records nothing; an exam's refusal of
# the course's worked answer). An error's own words ("raised:...") are Python's or torch's.
SHARED_WORDING = frozenset(COMPARISON) | frozenset(TENSORS_COMMON) | {
    "wrong-signature", "computed-without-recording", "calls-load-checkpoint"}


@dataclass(frozen=True)
class Right:
    """A correct answer written differently from the reference: it must pass."""

    style: str
    answer: Callable


@dataclass(frozen=True)
class Wrong:
    """A wrong answer: it must not pass, and its message must say what is wrong."""

    mistake: str
    answer: Callable
    says: tuple[str, ...]
    kind: str = TYPICAL
    outcome: Outcome = Outcome.FAILED


def right(style: str, answer: Callable) -> Right:
    return Right(style, answer)


def wrong(mistake: str, answer: Callable, *says: str, kind: str = TYPICAL,
          outcome: Outcome = Outcome.FAILED) -> Wrong:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if not says:
        raise ValueError(f"wrong answer {mistake!r}: name at least one fragment its message must contain")
    return Wrong(mistake, answer, tuple(says), kind, outcome)


@dataclass(frozen=True)
class Case:
    exercise: Exercise
    entry: Right | Wrong

    def __str__(self) -> str:
        entry = self.entry
        label = entry.style if isinstance(entry, Right) else f"{entry.kind}: {entry.mistake}"
        verb = "right" if isinstance(entry, Right) else "wrong"
        return f"{self.exercise.name}-{verb}-{label}"

    def assert_holds(self) -> None:
        verdict = self._verdict()
        if isinstance(self.entry, Right):
            assert verdict.outcome is Outcome.PASSED, f"a right answer ({self.entry.style}) failed:\n{verdict}"
            return
        assert verdict.outcome is self.entry.outcome, (
            f"{self.entry.mistake}: expected outcome {self.entry.outcome.value!r}, got:\n{verdict}"
        )
        missing = [fragment for fragment in self.entry.says if fragment not in verdict.message]
        assert not missing, f"{self.entry.mistake}: message lacks {missing}:\n{verdict.message}"
        assert verdict.mistake != "other", (
            f"{self.entry.mistake}: its verdict has no mistake id (\"other\"): wrap the judge's message in "
            f"core.Mistake(id, message) where it is written:\n{verdict.message}"
        )
        if self.entry.kind == TYPICAL and verdict.outcome is Outcome.FAILED:
            assert verdict.mistake in NAMED_OR_GENERIC_COMPARISON or verdict.mistake.startswith(
                f"{self.exercise.name}."), (
                f"{self.entry.mistake}: a typical mistake whose verdict does not name it (mistake id "
                f"{verdict.mistake!r}): wrap the judge's message in core.Mistake(id, message)\n{verdict.message}"
            )
        if verdict.mistake and verdict.mistake.startswith(f"{self.exercise.name}."):
            named = verdict.mistake.split(".", 1)[1]
            assert MISTAKE_ID.fullmatch(named), f"mistake id {named!r} is not lower-case-with-hyphens"
        self._assert_worded_from_its_table(verdict)
        if verdict.outcome is Outcome.RAISED:
            assert "Likely cause:" in verdict.message, (
                f"{self.entry.mistake}: an error from learner code without a likely cause:\n"
                f"{verdict.message}"
            )

    def _assert_worded_from_its_table(self, verdict) -> None:
        """A named verdict's words come from the exercise's table (or a shared one), so they can
        be translated; and a message that tells the learner to write a call the answer already
        makes blames the wrong thing (``messages.Message.advises``): where the table says what a
        message advises, the answer it judged must not already hold all of it."""
        table = self.exercise.messages
        if table is None or not verdict.mistake:
            return
        named = verdict.mistake.split(".", 1)[-1]
        if named not in table:
            assert named in SHARED_WORDING or named.startswith("raised:"), (
                f"{self.entry.mistake}: its verdict's mistake {named!r} is worded outside the exercise's table "
                f"of messages and outside the shared ones:\n{verdict.message}")
            return
        try:
            source = textwrap.dedent(inspect.getsource(self.entry.answer))
        except (OSError, TypeError):
            return
        assert not advice_already_followed(table[named], source), (
            f"{self.entry.mistake}: the message advises {table[named].advises}, which the answer already "
            f"does: it blames the wrong thing.\n{verdict.message}")

    def _verdict(self):
        """The verdict, with the check's time limit raised to CATALOGUE_TIME_LIMIT_S: no entry
        here runs away (a timeout is tested on its own, in test_exercises_core), and a right
        answer must not fail because a busy machine ran it slowly."""
        limit = self.exercise.time_limit_s
        self.exercise.time_limit_s = max(limit, scaled(CATALOGUE_TIME_LIMIT_S))
        try:
            return self.exercise.verdict(self.entry.answer)
        finally:
            self.exercise.time_limit_s = limit


@dataclass
class Catalogue:
    entries: dict[Exercise, list[Right | Wrong]]
    cases: list[Case] = field(init=False)

    def __post_init__(self):
        self.cases = [Case(exercise, entry) for exercise, entries in self.entries.items()
                      for entry in entries]
        names = [str(case) for case in self.cases]
        repeated = {name for name in names if names.count(name) > 1}
        if repeated:
            raise ValueError(f"catalogue entries need distinct descriptions: {sorted(repeated)}")

    def counts(self, exercise: Exercise) -> dict[str, int]:
        entries = self.entries.get(exercise, [])
        wrongs = [entry for entry in entries if isinstance(entry, Wrong)]
        return {
            "right": sum(isinstance(entry, Right) for entry in entries),
            "wrong": len(wrongs),
            "stateful_or_edge": sum(entry.kind in (STATEFUL, EDGE) for entry in wrongs),
        }


TESTS = Path(__file__).resolve().parent


def catalogue_modules(chapter: str) -> list[ModuleType]:
    """The test modules that hold chapter ``chapter``'s catalogue: one per exercise,
    ``tests/catalogue/<chapter>/test_<exercise>.py``, or the whole chapter's in one file,
    ``tests/test_exercises_<chapter>.py``."""
    folder = TESTS / "catalogue" / chapter
    if folder.is_dir():
        return [importlib.import_module(f"catalogue.{chapter}.{path.stem}")
                for path in sorted(folder.glob("test_*.py"))]
    return [importlib.import_module(f"test_exercises_{chapter}")]


def chapter_catalogue(chapter: str) -> Catalogue:
    """Every catalogue entry of chapter ``chapter``, whichever files hold them."""
    entries: dict[Exercise, list[Right | Wrong]] = {}
    for module in catalogue_modules(chapter):
        catalogue = getattr(module, "CATALOGUE", None)
        for exercise, cases in (catalogue.entries.items() if catalogue is not None else ()):
            if exercise in entries:
                raise ValueError(f"{exercise.id} is catalogued in two files (one is {module.__name__})")
            entries[exercise] = cases
    return Catalogue(entries)


def derived_wrong_answers(exercise: Exercise) -> list[Wrong]:
    """The slips any function of tensors can make, built from a quick-path exercise's reference
    and inputs (``course_utils.exercises.quick``): what its derived probe must catch, whatever
    the task. An instructor adds the topic's own mistakes beside them."""
    import torch

    reference, inputs = exercise.reference, exercise.inputs
    calls = []

    def keeps_state(*a):
        calls.append(1)
        out = reference(*a)
        return out + 1 if len(calls) % 2 == 0 and out.numel() else out

    def changes_input(*a):
        out = reference(*a).clone()
        a[0].zero_()
        return out

    def seeds_the_global_generator(*a):
        torch.manual_seed(0)
        return reference(*a)

    answers = [
        wrong("forgets to return", lambda *a: None, "expected a torch.Tensor"),
        wrong("returns a NumPy array", lambda *a: reference(*a).numpy(), "expected a torch.Tensor"),
        wrong("an extra leading dimension", lambda *a: reference(*a).unsqueeze(0), "has shape"),
        wrong("every value off by one", lambda *a: reference(*a) + 1, "wrong values"),
        wrong("changes its first argument in place", changes_input, "changed its input", kind=STATEFUL),
        wrong("keeps state between calls", keeps_state, "second call", kind=STATEFUL),
        wrong("seeds the global generator", seeds_the_global_generator, "global random state", kind=STATEFUL),
    ]
    if any(dtype.is_floating_point and dtype != torch.float32 for dtype in inputs.dtypes):
        answers.append(wrong("computes in float32 whatever the input", lambda *a: reference(
            *[t.float() if t.is_floating_point() else t for t in a]), "has dtype", kind=EDGE))
    answers.append(wrong("needs a contiguous input (view)", lambda *a: reference(
        *[t.view(-1).view(t.shape) for t in a]), "view", kind=EDGE, outcome=Outcome.RAISED))
    return answers
