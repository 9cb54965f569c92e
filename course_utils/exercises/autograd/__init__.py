"""Chapter 02 — Autograd: leaves, accumulated gradients, in-place updates and the version counter.

One module per exercise (``new_parameter.py``: its reference, probe, judge and texts), in the
order the chapter teaches them, and ``common.py`` for what they share.

Each reference solution is what ``.solution()`` shows, so it is written the way a learner
would write it. Every probe runs on the CPU with small tensors: autograd's rules are the same on
every device, and a check must finish in well under a second.
"""

from course_utils.exercises.autograd.new_parameter import new_parameter
from course_utils.exercises.autograd.fresh_gradient import fresh_gradient
from course_utils.exercises.autograd.sgd_update import sgd_update
from course_utils.exercises.autograd.softplus import softplus
from course_utils.exercises.autograd.input_gradient import input_gradient
from course_utils.exercises.autograd.common import CHAPTER  # noqa: F401
