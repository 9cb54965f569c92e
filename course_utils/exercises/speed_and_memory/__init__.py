"""Chapter 05 — Speed and memory: the fixed memory of training, gradient accumulation, and
finding out whether the data loader is what you wait for.

Each reference solution is what ``.solution()`` shows, so it is written the way a learner
would write it. Probes build their own small, seeded models on the CPU and record plain data
only: the state a step started from and what the learner's code did, never what a right answer
gives (each exercise's ``expect`` rebuilds the model from that state and replays the reference,
on the judge's side). The timing exercise is checked against what its fake loader measured of
its own waits, with wide margins: a busy machine makes every sleep a little longer, never a
wrong answer right.

The chapter is a package, one module per exercise (``training_memory_bytes.py``,
``accumulation_step.py``, ``split_step_time.py``, ``scaled_clipped_step.py``) and ``common.py``
for what they share; this module names each ``Exercise`` in the order the chapter teaches them.
"""

from course_utils.exercises.speed_and_memory.common import CHAPTER  # noqa: F401
from course_utils.exercises.speed_and_memory.training_memory_bytes import training_memory_bytes  # noqa: F401
from course_utils.exercises.speed_and_memory.accumulation_step import accumulation_step  # noqa: F401
from course_utils.exercises.speed_and_memory.split_step_time import split_step_time  # noqa: F401
from course_utils.exercises.speed_and_memory.scaled_clipped_step import scaled_clipped_step  # noqa: F401
