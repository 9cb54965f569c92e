"""Every exercise words what it says from one table (``messages.Messages``): its hints, its
passed message, its error notes and the messages its judge returns, by id, with named fields.
A translator reads the tables and nothing else; these tests hold each exercise to that, and the
catalogue (``exercise_catalogue.Case``) holds each named verdict to its table's words."""

import pytest

from course_utils.exercises import all_exercises
from course_utils.exercises.messages import Messages

EXERCISES = [exercise for exercises in all_exercises().values() for exercise in exercises]


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_each_exercise_has_one_table_of_its_own(exercise):
    assert isinstance(exercise.messages, Messages), f"{exercise.id} has no table of messages"
    assert exercise.messages.owner == exercise.name


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_the_hints_the_passed_message_and_the_notes_come_from_the_table(exercise):
    table = exercise.messages
    assert list(exercise.hints) == table.hints() and exercise.hints, f"{exercise.id}: hints not from its table"
    assert exercise.passed_message == table.text("passed")
    for note in exercise.error_notes:
        assert note.id in table and table.text(note.id) == note.text, (
            f"{exercise.id}: error note {note.id!r} is not worded from its table")


def test_a_mistake_id_is_one_thing_in_every_table_it_appears_in():
    """Ids are per exercise; a table's ids must be what the catalogue's MISTAKE_ID allows."""
    from exercise_catalogue import MISTAKE_ID

    for exercise in EXERCISES:
        for id in exercise.messages:
            assert MISTAKE_ID.fullmatch(id), f"{exercise.id}: message id {id!r} is not lower-case-with-hyphens"
