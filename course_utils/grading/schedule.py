"""The order a batch grades its learners in: the longest expected first.

A batch ends when its last learner does. Graded in the order the folder lists them, a long
notebook that comes last runs alone while every other worker waits: four learners with chapters
00, 01, 02, 00 on two workers left one worker idle for 5 of the batch's 17 seconds, because
chapter 02 (the longest of the four) started third. Starting the longest first (the classic
"longest processing time first" rule) lets the short ones fill the gaps at the end.

What a learner will cost is estimated from ``chapter_seconds.json``: the seconds the grader took
for each chapter's reference solution, measured with ``tools/bench_grading.py --chapter-seconds``.
Only the order matters, so an estimate from another machine serves as well as one from this one.
"""

from __future__ import annotations

import json
import statistics
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from course_utils.grading.submissions import Learner

SECONDS_FILE = Path(__file__).with_name("chapter_seconds.json")

T = TypeVar("T")


@lru_cache(maxsize=None)
def chapter_seconds() -> dict[str, float]:
    """Chapter → the seconds its reference solution took to grade (``SECONDS_FILE``)."""
    return json.loads(SECONDS_FILE.read_text(encoding="utf-8"))["seconds"]


def expected_seconds(learner: Learner) -> float:
    """About how long grading ``learner`` takes: the sum over their notebooks. A notebook whose
    name is not a chapter's (the grader then finds its chapter from its answer cells) counts
    as a chapter of middling length."""
    seconds = chapter_seconds()
    middling = statistics.median(seconds.values())
    return sum(seconds.get(path.stem, middling) for path in learner.files)


def longest_first(items: Sequence[T], learner_of: Callable[[T], Learner]) -> list[T]:
    """``items`` with the longest expected learner first; equal ones keep their order."""
    return sorted(items, key=lambda item: -expected_seconds(learner_of(item)))
