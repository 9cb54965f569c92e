"""Chapter 06 — Debugging: find a flatten size, fix a forward that ignores the device, drop bad
examples, clip gradients, and shuffle reproducibly.

One module per exercise, named like it (``flat_features.py``, ``PositionWeights.py``, ...), and
``common.py`` for what they share. Each reference solution is what ``.solution()`` shows, so it
is written the way a learner would write it. Every probe builds its own small, seeded models and
data on the CPU (or on the ``meta`` device, which has shapes and devices but no values, so a
device mistake raises for real on any machine), runs the learner's code on them, and records
only plain data: the inputs it gave and what the learner's code did, never what a right answer
gives (each exercise's ``expect`` rebuilds the inputs and runs the reference, on the judge's side).
"""

from __future__ import annotations

from course_utils.exercises.debugging.common import CHAPTER  # noqa: F401
from course_utils.exercises.debugging.flat_features import flat_features  # noqa: F401
from course_utils.exercises.debugging.PositionWeights import PositionWeights  # noqa: F401
from course_utils.exercises.debugging.drop_non_finite import drop_non_finite  # noqa: F401
from course_utils.exercises.debugging.clipped_step import clipped_step  # noqa: F401
from course_utils.exercises.debugging.seeded_loader import seeded_loader  # noqa: F401
from course_utils.exercises.debugging.layer_output_shapes import layer_output_shapes  # noqa: F401
