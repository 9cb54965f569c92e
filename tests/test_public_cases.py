"""Public cases, the checks an exam release runs (course_utils.exercises.public): for every
exercise, the reference and the catalogue's right answers pass them, an answer that memorises
them passes them and fails the practice check (the exam's hidden cases), and typical wrong
answers fail them with a message."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from course_utils.exercises import all_exercises
from course_utils.exercises.core import Outcome
from course_utils.exercises.exam import expected_public_record, public_verdict
from course_utils.exercises.public import describe, same_facts, spec_of

EXERCISES = [exercise for exercises in all_exercises().values() for exercise in exercises]
IDS = [exercise.id for exercise in EXERCISES]
ROOT = Path(__file__).resolve().parents[1]
def catalogue_of(exercise) -> list:
    """The catalogue's entries for ``exercise`` (tests/exercise_catalogue.py)."""
    from exercise_catalogue import chapter_catalogue

    return chapter_catalogue(exercise.chapter).entries.get(exercise, [])


@pytest.fixture(scope="module")
def expected_records():
    return {}


def expected(exercise, cache):
    if exercise.id not in cache:
        cache[exercise.id] = expected_public_record(exercise, spec_of(exercise))
    return cache[exercise.id]


# -- memorising answers ------------------------------------------------------------------------
def rebuild(facts):
    """A value made from its recorded facts, or raise LookupError when facts cannot make one."""
    kind = facts["kind"]
    if kind == "tensor" and "values" in facts:
        dtype = getattr(torch, facts["dtype"].replace("torch.", ""))
        value = torch.tensor(np.asarray(facts["values"]), dtype=dtype).reshape(facts["shape"])
        return value.to(facts["device"]).requires_grad_(facts["requires_grad"])
    if kind in ("int", "bool", "str", "NoneType"):
        return facts["value"]
    if kind == "float":
        return float(facts["value"])
    if kind in ("list", "tuple"):
        items = [rebuild(item) for item in facts["items"]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {ast.literal_eval(key): rebuild(item) for key, item in zip(facts["keys"], facts["items"])}
    raise LookupError(kind)


def _defaults_of_the_shipped_types(record):
    """kernel_environment ships the keys and the types of its values: a memoriser returns
    exactly that, a value of each type."""
    types = rebuild(record[0]["facts"]["value_types"])
    defaults = {"str": "", "bool": False, "int": 0, "float": 0.0}
    return lambda: {key: defaults.get(kind, None) for key, kind in types.items()}


# Public records that hold what the answer's result looks like rather than the result itself:
# what memorising them gives.
MEMORISED_FROM_FACTS = {"environment.kernel_environment": _defaults_of_the_shipped_types}


def memorising_answer(exercise, spec, record):
    """An answer that knows the public cases by heart and nothing else.

    Given arguments equal to a public case's, it gives what the reference gave there: the
    recorded result rebuilt from the shipped facts when the facts can make one, else the
    reference's own behaviour on exactly those arguments. Any other arguments raise.
    """
    if exercise.id in MEMORISED_FROM_FACTS:
        return MEMORISED_FROM_FACTS[exercise.id](record)
    cases = [[describe(value) for value in case.arguments()] for case in spec.cases]

    def memorised(*arguments):
        facts = [describe(value) for value in arguments]
        for index, known in enumerate(cases):
            if same_facts(facts, known):
                try:
                    return _replay(record[index]["facts"], arguments)
                except LookupError:
                    return exercise.reference(*arguments)
        raise LookupError("these are not the public inputs I memorised")

    return memorised


def _replay(facts, arguments):
    if set(facts) - {"returned", "arguments"}:
        raise LookupError("a use with more than one call")
    for value, after in zip(arguments, facts.get("arguments", [])):
        if isinstance(value, torch.Tensor) and after["kind"] == "tensor":
            with torch.no_grad():
                value.copy_(rebuild(after))
        elif not same_facts(describe(value), after):
            raise LookupError("an argument that changes in a way facts cannot replay")
    return rebuild(facts["returned"])


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_every_exercise_has_public_cases(exercise):
    assert spec_of(exercise) is not None, f"add {exercise.name} to course_utils/exercises/public_cases/{exercise.chapter}.py"


def with_spec(exercise):
    spec = spec_of(exercise)
    if spec is None:
        pytest.skip("no public cases yet (test_every_exercise_has_public_cases fails)")
    return spec


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_the_reference_passes_its_public_cases_and_they_repeat(exercise, expected_records):
    spec = with_spec(exercise)
    record = expected(exercise, expected_records)
    assert same_facts(record, expected_public_record(exercise, spec)), "public expectations must not vary"
    verdict = public_verdict(exercise, exercise.reference, record)
    assert verdict.outcome is Outcome.PASSED, verdict.message


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_a_memorising_answer_passes_the_public_cases_and_fails_the_hidden_ones(exercise, expected_records):
    spec = with_spec(exercise)
    record = expected(exercise, expected_records)
    memorised = memorising_answer(exercise, spec, record)
    public = public_verdict(exercise, memorised, record)
    assert public.outcome is Outcome.PASSED, public.message
    hidden = exercise.verdict(memorised)
    assert hidden.outcome is not Outcome.PASSED, "the practice check (hidden cases) must catch it"


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_right_answers_written_otherwise_pass_the_public_cases(exercise, expected_records):
    from exercise_catalogue import Right

    with_spec(exercise)
    record = expected(exercise, expected_records)
    for entry in catalogue_of(exercise):
        if isinstance(entry, Right):
            verdict = public_verdict(exercise, entry.answer, record)
            assert verdict.outcome is Outcome.PASSED, f"{entry.style}: {verdict.message}"


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_typical_wrong_answers_fail_the_public_cases_and_say_why(exercise, expected_records):
    """The public cases are few, so an edge-case or second-call mistake may pass them (the
    hidden cases catch it); the classic mistakes of the topic must not."""
    from exercise_catalogue import TYPICAL, Wrong

    spec = with_spec(exercise)
    record = expected(exercise, expected_records)
    passed = []
    for entry in catalogue_of(exercise):
        if isinstance(entry, Wrong) and entry.kind == TYPICAL:
            verdict = public_verdict(exercise, entry.answer, record)
            if verdict.outcome is Outcome.PASSED:
                passed.append(entry.mistake)
            else:
                assert verdict.message.strip(), entry.mistake
                assert verdict.mistake != "other", f"{entry.mistake}: no mistake id for {verdict.message!r}"
    assert sorted(passed) == sorted(spec.lets_through), (
        "the typical mistakes these public cases let through must be the ones their lets_through names")
