"""Every catalogued answer, checked the way a grading kernel checks it: does the guard hold back
anything a right answer needs?

In a grading kernel the chapters' exercise modules are loaded guarded (their functions run only
inside a probe window, ``course_utils.grading.guarded_code``) and ``kernel_guard``'s audit hook
refuses frames, ``gc``, tracing and the rest to the learner's code. A right answer that touches
something the course hands it (an input model's ``forward``, a loss function, a dataset) must
not be refused. This script loads the exercises that way in a fresh interpreter, opens a
probe window around each catalogued answer's check, and holds every verdict to what the
catalogue says (``Case.assert_holds``).

    .venv/bin/python tests/guarded_catalogue.py [--right-only] [CHAPTER_MODULE ...]

Prints one line per case that does not hold, and exits 1 if any does. ``tests/test_grading_guard.py``
runs it on the right answers of every chapter.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _window(name, exercise, answer, _audit=sys.audit):
    """What ``kernel_probe.record`` does around a check, verdict included."""
    _audit("course.window.open", name)
    try:
        return exercise.judge(exercise.probe(answer))
    finally:
        _audit("course.window.close", name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("chapters", nargs="*", help="exercise modules (tensors, autograd, ...); default all")
    parser.add_argument("--right-only", action="store_true", help="only the right answers")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # the answers' own warnings: not what this looks for
    package = Path(tempfile.mkdtemp(prefix="guarded-catalogue-"))
    try:
        guarded_session(package)
        return _check(args.chapters, args.right_only)
    finally:
        shutil.rmtree(package, ignore_errors=True)


def guarded_session(package: Path):
    """Make this interpreter a grading kernel's, for checks: the package copied into ``package``
    and imported from there, the chapters loaded guarded, the guard installed. Afterwards every
    ``Exercise.verdict`` runs in a probe window, as ``kernel_probe.record`` runs a check. Returns
    the probe-window opener, ``window(exercise, answer) -> Verdict``."""
    shutil.copytree(ROOT / "course_utils", package / "course_utils",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "exam_data"))
    sys.path[:0] = [str(package), str(ROOT / "tests")]

    import course_utils
    from course_utils.exercises import CHAPTERS
    from course_utils.exercises.core import Exercise
    from course_utils.exercises import running
    from course_utils.grading import kernel_guard
    from course_utils.grading.guarded_code import load_chapters

    assert Path(course_utils.__file__).is_relative_to(package), course_utils.__file__
    load_chapters(package, CHAPTERS.values())
    names = [secrets.token_hex(8) for _ in range(20000)]
    kernel_guard.install([kernel_guard.record_name_hash(name) for name in names],
                         str(package / "course_utils"), running.call_learner.__code__, _window.__code__)
    fresh = iter(names)

    def window(exercise, answer=None):
        return _window(next(fresh), exercise, answer)

    Exercise.verdict = window
    return window


def _check(chapters: list[str], right_only: bool) -> int:
    from course_utils.exercises import CHAPTERS
    from exercise_catalogue import Right, chapter_catalogue

    chosen = chapters or list(CHAPTERS.values())

    failed = refused = 0
    for module in chosen:
        catalogue = chapter_catalogue(module)
        cases = [c for c in catalogue.cases if isinstance(c.entry, Right) or not right_only]
        for case in cases:
            try:
                if uses_a_reference(case.entry.answer):
                    # written with the course's worked answer (a shortcut of the catalogue's): a
                    # grading kernel must not let it pass, and a right one fails because it is refused
                    verdict = case.exercise.verdict(case.entry.answer)
                    assert not verdict.passed, f"not refused:\n{verdict}"
                    if isinstance(case.entry, Right):
                        assert "grading: " in verdict.message, f"not refused:\n{verdict}"
                    refused += 1
                else:
                    case.assert_holds()
            except BaseException as error:  # noqa: BLE001 - report every case, go on
                failed += 1
                said = "".join(traceback.format_exception_only(type(error), error)).strip()
                print(f"FAILED {module}: {case}: {said[:1500]}", flush=True)
        print(f"{module}: {len(cases)} cases", flush=True)
    print(f"{refused} answers built on the course's worked answers were refused, as they must be")
    return 1 if failed else 0


def uses_a_reference(answer) -> bool:
    """Whether a catalogued answer is built on an exercise's worked answer (a subclass of a
    reference class, or code that calls ``ex.NAME.reference``)."""
    import inspect

    if isinstance(answer, type) and any(
            base.__module__.startswith("course_utils.exercises.") for base in answer.__mro__[1:]):
        return True
    try:
        return ".reference" in inspect.getsource(answer)
    except (OSError, TypeError):
        return False


if __name__ == "__main__":
    sys.exit(main())
