"""Chapter 01 — Tensors: the three attributes, shared memory, views, masks, dimensions,
broadcasting, matrix products.

Each probe runs the learner's function on several generated inputs (several dtypes, a
non-contiguous layout, an empty or a one-element size where the task allows them), calls it
more than once on the same objects, and records whether the caller's inputs were left as they
were, so an answer that only works for one example, or only on its first call, does not pass.
Each reference solution is what ``.solution()`` shows.

One module per exercise (``outer_sum.py``: its reference, probe, judge and ``Exercise``),
``common.py`` for what they share.
"""

from course_utils.exercises.tensors.common import CHAPTER  # noqa: F401
from course_utils.exercises.tensors.match_reference import match_reference  # noqa: F401
from course_utils.exercises.tensors.independent_copy import independent_copy  # noqa: F401
from course_utils.exercises.tensors.flatten_transposed import flatten_transposed  # noqa: F401
from course_utils.exercises.tensors.zero_negative_rows import zero_negative_rows  # noqa: F401
from course_utils.exercises.tensors.remove_batch_dim import remove_batch_dim  # noqa: F401
from course_utils.exercises.tensors.outer_sum import outer_sum  # noqa: F401
from course_utils.exercises.tensors.residuals import residuals  # noqa: F401
from course_utils.exercises.tensors.best_match import best_match  # noqa: F401
from course_utils.exercises.tensors.checked_mse import checked_mse  # noqa: F401
