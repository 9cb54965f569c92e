"""Chapter 04 — Training loop: the six steps, evaluation that leaves no trace, early stopping.

Each reference solution is what ``.solution()`` shows, so it is written the way a learner
would write it. Every probe builds its own small, seeded model on the CPU, runs the learner's
code on it and records only plain data: what the code did, and what it was given (the model's
parameters, the optimizer's settings and state, the batches). What the reference gives is
computed by each exercise's ``expect``, from a model and optimizer rebuilt from that record, on
the judge's side: the learner's kernel computes no right answer.

The chapter is a package, one module per exercise (``train_step.py``, ``evaluate.py``,
``EarlyStopping.py``) and ``common.py`` for what they share; this module names each
``Exercise`` in the order the chapter teaches them.
"""

from course_utils.exercises.training_loop.common import CHAPTER  # noqa: F401
from course_utils.exercises.training_loop.train_step import _train_step, train_step  # noqa: F401
from course_utils.exercises.training_loop.evaluate import evaluate  # noqa: F401
from course_utils.exercises.training_loop.EarlyStopping import _EarlyStopping, EarlyStopping  # noqa: F401
