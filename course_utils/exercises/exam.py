"""The exercises of an exam release: checked on public cases, with no solution to show.

An exam release (``python -m course_utils.authoring release --exam``) replaces each chapter's
exercise module by a few lines that call ``load_chapter``. What they load was written at
release time into ``exam_data/MODULE/``: each exercise's face (title, the function it expects,
the hints and error notes the instructor released, messages) and the facts the reference gave
on the public cases (``course_utils.exercises.public``). No reference solution, no probe of the
practice course and no code that computes an expected result is in the release; the grader,
which has the whole course, runs the practice checks as hidden cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from course_utils.display import show
from course_utils.exercises import plain
from course_utils.exercises.core import ErrorNote, Exercise, Function, Status, _Note
from course_utils.exercises.public import PublicCases, cases_from_data, inputs_as_data, public_judge, spec_of

EXAM_DATA = Path(__file__).resolve().parent / "exam_data"
HINT_POLICIES = ("none", "first", "all")
NO_SOLUTION = (
    "Not available in this release: this is an exam. Your check runs your code on the public "
    "cases; grading also runs hidden ones (other inputs, shapes and dtypes, repeated calls)."
)
PASSED_PUBLIC = (
    "Right on the public cases. Grading also runs hidden cases (other inputs, shapes and dtypes, "
    "repeated calls), so make sure your code does what the task says for any input it allows."
)


class ExamExercise(Exercise):
    """An exercise whose reference stayed with the instructor."""

    def solution_text(self) -> str:
        return NO_SOLUTION

    def solution(self) -> None:
        show(_Note(f"Solution: {self.title}", NO_SOLUTION))

    def hint(self, level: int | None = None) -> None:
        if not self.hints:
            show(_Note(f"Hints: {self.title}", "No hints in this release."))
            return
        super().hint(level)


class NoWorkedAnswer(RuntimeError):
    """A notebook cell fell back on an exercise's worked answer, which an exam does not ship."""


def _reference_withheld(name: str):
    def withheld(*args, **kwargs):
        raise NoWorkedAnswer(
            f"this cell falls back on the worked answer of {name}, which an exam release does "
            f"not have: solve {name} above (its check passes), then run this cell again.")
    withheld.__name__ = withheld.__qualname__ = name
    return withheld


def released_hints(hints: Sequence[str], policy: str) -> list[str]:
    if policy not in HINT_POLICIES:
        raise ValueError(f"hints must be one of {', '.join(HINT_POLICIES)}, not {policy!r}")
    return {"none": [], "first": list(hints[:1]), "all": list(hints)}[policy]


def released_notes(notes: Sequence[ErrorNote], policy: str) -> list[ErrorNote]:
    """The error notes an exam with hint policy ``policy`` shows: all of them with ``all``,
    none otherwise.

    A note is a worked hint: it names the classic mistake behind an error and, nearly always,
    the step that fixes it ("Put the update inside `with torch.no_grad():`"). With ``first``
    only a note that gives no step of the solution could ship, and no rule tells those apart
    reliably: some steps are code, others plain words ("evaluate in eval mode"). So ``first``
    ships none, like ``none``; a learner whose code raises still reads the error, the input,
    their own line, and the likely cause that the error's text itself shows (``likely_cause``).
    """
    if policy not in HINT_POLICIES:
        raise ValueError(f"hints must be one of {', '.join(HINT_POLICIES)}, not {policy!r}")
    return list(notes) if policy == "all" else []


def face_of(exercise: Exercise, hints: str) -> dict:
    """What an exam with hint policy ``hints`` shows of ``exercise``: plain data, no code; its
    hints and error notes as far as the policy releases them (``released_hints``,
    ``released_notes``)."""
    shown = released_hints(exercise.hints, hints)
    notes = [list(note) for note in released_notes(exercise.error_notes, hints)]
    return {
        "name": exercise.name,
        "chapter": exercise.chapter,
        "title": exercise.title,
        "function": exercise.expects.name,
        "params": list(exercise.expects.params),
        "returns": exercise.expects.returns,
        "hints": shown,
        "error_notes": notes,
        "time_limit_s": exercise.time_limit_s,
    }


def exam_exercise(face: dict, spec: PublicCases, expected: list) -> ExamExercise:
    """The exam's exercise: ``face`` and the reference's public record ``expected``."""
    params = tuple(face["params"])
    return ExamExercise(
        face["name"],
        chapter=face["chapter"],
        title=face["title"],
        expects=Function(face["function"], params, face["returns"]),
        probe=lambda answer, run: spec.probe(answer, run),
        judge=public_judge(expected, params, spec),
        hints=face["hints"],
        reference=_reference_withheld(face["function"]),
        passed_message=PASSED_PUBLIC,
        error_notes=[tuple(note) for note in face["error_notes"]],
        time_limit_s=face["time_limit_s"],
    )


def expected_public_record(exercise: Exercise, spec: PublicCases) -> list:
    """What the reference gives on the public cases, recorded as an answer's would be.

    Run at release time (and by the grader), never in an exam release. Raises when the
    reference does not run: a release with a broken expectation must not be written.
    """
    result = Exercise.probe(_as_exercise(exercise, spec), exercise.reference)
    if result.status is not Status.OK:
        raise RuntimeError(f"{exercise.id}: the reference failed on its public cases: {result.error}")
    return result.data


def _as_exercise(exercise: Exercise, spec: PublicCases, time_limit_s: float = 30.0) -> Exercise:
    """``exercise`` with the public cases as its probe (the limits and checks of a probe).
    The reference gets a generous limit at release time: a slow machine must not fail it."""
    return Exercise(exercise.name, chapter=exercise.chapter, title=exercise.title,
                    expects=exercise.expects, probe=lambda answer, run: spec.probe(answer, run),
                    judge=lambda data: None, hints=exercise.hints, reference=exercise.reference,
                    time_limit_s=time_limit_s)


def public_probe_exercise(exercise: Exercise) -> Exercise | None:
    """``exercise`` probing its public cases (the grader records an exam answer with it)."""
    spec = spec_of(exercise)
    return None if spec is None else _as_exercise(exercise, spec, exercise.time_limit_s)


def public_exercise(exercise: Exercise, expected: list | None = None, hints: str = "all") -> ExamExercise:
    """The exam's check of ``exercise`` as a release with hint policy ``hints`` has it (by
    default every hint and error note shown), its expectations computed here from the reference
    unless given: for tests and the grader, which have the reference. The grader passes the
    release's policy, so that the public verdict shows no note the release withheld."""
    spec = spec_of(exercise)
    if spec is None:
        raise LookupError(f"{exercise.id} has no public cases")
    if expected is None:
        expected = expected_public_record(exercise, spec)
    return exam_exercise(face_of(exercise, hints), spec, expected)


def public_verdict(exercise: Exercise, answer, expected: list | None = None):
    """The verdict an exam's check gives ``answer`` for ``exercise``."""
    return public_exercise(exercise, expected).verdict(answer)


# --------------------------------------------------------------------------------------------
# In an exam release
# --------------------------------------------------------------------------------------------
def write_chapter(module: str, exercises: Sequence[Exercise], hints: str, folder: Path) -> None:
    """Write ``folder/MODULE/``: each exercise's face and expected public record."""
    target = folder / module
    target.mkdir(parents=True, exist_ok=True)
    faces = []
    for exercise in exercises:
        spec = spec_of(exercise)
        if spec is None:
            raise LookupError(f"{exercise.id} has no public cases: it cannot be in an exam")
        faces.append(face_of(exercise, hints))
        plain.save(expected_public_record(exercise, spec), target / f"{exercise.name}.json")
        if isinstance(getattr(exercise, "public", None), PublicCases):
            # the quick path's inputs live in the exercise's module, which the exam does not ship
            plain.save(inputs_as_data(spec), target / f"{exercise.name}.inputs.json")
    plain.save(faces, target / "exercises.json")


def load_chapter(module: str, folder: Path = EXAM_DATA) -> dict[str, ExamExercise]:
    """The exercises of ``module`` in this exam release, by name (what the notebook's ``ex`` holds)."""
    import importlib

    target = folder / module
    if not (target / "exercises.json").exists():
        return {}  # a chapter that is not part of this exam
    from course_utils.exercises.running import set_up_torch_once

    set_up_torch_once()  # torch's one-time set-up here, in the import cell, not in a first check
    specs = importlib.import_module(f"course_utils.exercises.public_cases.{module}")
    loaded = {}
    for face in plain.load(target / "exercises.json"):
        expected = plain.load(target / f"{face['name']}.json")
        inputs = target / f"{face['name']}.inputs.json"
        if inputs.exists():
            spec = cases_from_data(plain.load(inputs))
        else:
            spec = getattr(specs, face["name"])
        loaded[face["name"]] = exam_exercise(face, spec, expected)
    return loaded


__all__ = ["ExamExercise", "exam_exercise", "expected_public_record", "face_of", "load_chapter",
           "public_exercise", "public_verdict", "released_hints", "released_notes", "write_chapter"]
