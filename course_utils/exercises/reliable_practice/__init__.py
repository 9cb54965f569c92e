"""Chapter 07 — Reliable practice: weights that load safely, checkpoints that resume exactly,
and old weights mapped onto renamed layers.

One module per exercise, named like it (``save_weights.py``, ``resume.py``, ``remap_keys.py``),
and ``common.py`` for what they share. Each reference solution is what ``.solution()`` shows, so
it is written the way a learner would write it. Every probe works in its own temporary folder,
on the CPU, with its own seeds; the framework puts the learner's random streams back afterwards.
"""

from __future__ import annotations

from course_utils.exercises.reliable_practice.common import CHAPTER  # noqa: F401
from course_utils.exercises.reliable_practice.save_weights import save_weights  # noqa: F401
from course_utils.exercises.reliable_practice.resume import resume  # noqa: F401
from course_utils.exercises.reliable_practice.remap_keys import remap_keys  # noqa: F401
