"""Which mistake ids the checks give the test catalogue's wrong answers: what a class report can count.

    .venv/bin/python tools/mistake_ids.py              # the tally, course-wide
    .venv/bin/python tools/mistake_ids.py --list       # and one line per wrong answer
    .venv/bin/python tools/mistake_ids.py --public     # the same for an exam's public checks

Every wrong answer of the catalogues (``tests/catalogue/<chapter>/test_*.py``) is checked, and its verdict's
``mistake`` is sorted into: *named* (the judge's own name for the mistake,
``exercise.kebab-id``), a generic kind (``shape``, ``values``, ``raised:TypeError``, ...), or
``other``, which tells an instructor nothing (the catalogue's tests allow none). A report, not
a test; the gate is ``tests/exercise_catalogue.py``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def wrong_answers():
    """(exercise, catalogue entry) for every wrong answer of every chapter's catalogue."""
    from course_utils.exercises import CHAPTERS
    from exercise_catalogue import Wrong, chapter_catalogue

    for chapter in CHAPTERS.values():
        for case in chapter_catalogue(chapter).cases:
            if isinstance(case.entry, Wrong):
                yield case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="one line per wrong answer")
    parser.add_argument("--public", action="store_true", help="an exam's public checks instead")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    from course_utils.exercises.exam import public_exercise

    tally: collections.Counter[str] = collections.Counter()
    public_checks = {}
    for case in wrong_answers():
        if args.public:
            check = public_checks.setdefault(case.exercise, public_exercise(case.exercise))
            verdict = check.verdict(case.entry.answer)
        else:
            verdict = case._verdict()
        mistake = verdict.mistake or "(passed)"
        tally["named" if mistake.startswith(f"{case.exercise.name}.") else mistake] += 1
        if args.list:
            print(f"{case.exercise.name}\t{case.entry.kind}\t{case.entry.mistake}\t{mistake}")
    total = sum(tally.values())
    print(f"{total} wrong answers{' (public checks)' if args.public else ''}: "
          + ", ".join(f"{kind} {count}" for kind, count in tally.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
