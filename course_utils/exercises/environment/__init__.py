"""Chapter 00 — Environment: know which Python runs, prove the install works, prove seeding works.

One module per exercise (``kernel_environment.py``: its reference, probe, judge and
``Exercise``), ``common.py`` for what they share. Each reference solution is what
``.solution()`` shows, so it is written the way a learner would write it.
"""

from course_utils.exercises.environment.common import CHAPTER  # noqa: F401
from course_utils.exercises.environment.kernel_environment import kernel_environment  # noqa: F401
from course_utils.exercises.environment.known_gradient import known_gradient  # noqa: F401
from course_utils.exercises.environment.device_smoke_test import device_smoke_test  # noqa: F401
from course_utils.exercises.environment.seeded_draw import seeded_draw  # noqa: F401
from course_utils.exercises.environment.seed_check import seed_check  # noqa: F401
