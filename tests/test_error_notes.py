"""Error notes as named mistakes: an answer whose error one of the exercise's notes explains gets
that note's id as its mistake id (``softplus.in-place-change``), so the class report counts the
classic mistake instead of ``raised:RuntimeError``; an exam shows the notes only with ``--hints
all``."""

from __future__ import annotations

import pytest
import torch

from exercise_catalogue import MISTAKE_ID

from course_utils.exercises import all_exercises
from course_utils.exercises.autograd import sgd_update, softplus
from course_utils.exercises.core import ErrorNote, Exercise, Outcome, error_note, note_id
from course_utils.exercises.exam import face_of, public_exercise, released_notes

EXERCISES = [exercise for exercises in all_exercises().values() for exercise in exercises]


def in_place_softplus(x):
    e = torch.exp(x)
    e += 1  # changes the output exp() saved for backward
    return torch.log(e)


def test_every_error_note_of_every_exercise_has_its_own_readable_id():
    assert sum(len(exercise.error_notes) for exercise in EXERCISES) > 100
    for exercise in EXERCISES:
        ids = [note.id for note in exercise.error_notes]
        assert len(set(ids)) == len(ids), f"{exercise.id}: two notes share an id: {ids}"
        for note in exercise.error_notes:
            assert isinstance(note, ErrorNote) and note.clue and note.text, (exercise.id, note)
            assert MISTAKE_ID.fullmatch(note.id), f"{exercise.id}: {note.id!r} is not lower-case-with-hyphens"


def test_every_course_note_names_its_mistake_where_it_is_written():
    """A clue is torch's or Python's wording, which a new version may change: an id made from it
    would change too. So the course's notes are written with an id of their own."""
    derived = [f"{exercise.id}: {note.clue!r}" for exercise in EXERCISES for note in exercise.error_notes
               if note.id == note_id(note.clue)]
    assert derived == [], "write the mistake's id as the note's third element: " + ", ".join(derived)


def test_an_error_a_note_explains_is_named_by_that_note():
    verdict = softplus.verdict(in_place_softplus)
    assert verdict.outcome is Outcome.RAISED
    note = next(note for note in softplus.error_notes if note.id == "in-place-change")
    assert verdict.mistake == "softplus.in-place-change"
    assert verdict.message.endswith("\nLikely cause: " + note.text)
    assert type(verdict.message) is str and verdict.to_dict()["mistake"] == "softplus.in-place-change"


def test_an_error_no_note_explains_keeps_its_kind():
    def raises_its_own(x):
        raise KeyError("nothing any note names")

    verdict = softplus.verdict(raises_its_own)
    assert verdict.outcome is Outcome.RAISED and verdict.mistake == "raised:KeyError"


def test_a_note_written_without_an_id_gets_one_from_its_clue_and_two_alike_are_refused():
    assert error_note(("view size is not compatible", "use reshape")) == ErrorNote(
        "view size is not compatible", "use reshape", "view-size-is-not-compatible")
    assert error_note(("'NoneType'", "w.grad is None", "missing-grad")).id == "missing-grad"
    settings = dict(chapter="testing", title="t", expects=softplus.expects, probe=lambda answer, run: None,
                    judge=lambda data: None, hints=["h"], reference=softplus.reference)
    with pytest.raises(ValueError, match="share the id same"):
        Exercise("twice", error_notes=[("a", "one", "same"), ("b", "two", "same")], **settings)


@pytest.mark.parametrize("policy", ["none", "first", "all"])
def test_an_exam_shows_error_notes_with_hints_all_only(policy):
    shown = released_notes(sgd_update.error_notes, policy)
    face = face_of(sgd_update, policy)
    if policy == "all":
        assert shown == list(sgd_update.error_notes)
        assert face["error_notes"] == [list(note) for note in sgd_update.error_notes]
    else:
        assert shown == [] and face["error_notes"] == []
        assert "no_grad" not in repr(face), "a note's step of the solution is in the face"


def test_the_public_check_names_the_note_only_where_the_release_shows_it():
    shown = public_exercise(softplus, hints="all").verdict(in_place_softplus)
    withheld = public_exercise(softplus, hints="none").verdict(in_place_softplus)
    note = next(note for note in softplus.error_notes if note.id == "in-place-change")
    assert shown.mistake == "softplus.in-place-change" and note.text in shown.message
    assert withheld.mistake == "raised:RuntimeError" and note.text not in withheld.message
    assert "Likely cause:" in withheld.message
