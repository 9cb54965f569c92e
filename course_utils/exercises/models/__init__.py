"""Chapter 03 — Models: modules with skips, registered layers, losses from logits (softmax and
multi-label), decay groups.

One module per exercise (``SkipBlock.py``: its reference, probe, judge and texts), in the order
the chapter teaches them, and ``common.py`` for what they share.

Each reference solution is what ``.solution()`` shows, so it is written the way a learner
would write it. Probes build small models on the CPU with their own seeded generators, so a
check is deterministic, fast, and leaves the learner's random streams alone.
"""

from course_utils.exercises.models.SkipBlock import SkipBlock
from course_utils.exercises.models.Tower import Tower
from course_utils.exercises.models.cross_entropy_from_logits import cross_entropy_from_logits
from course_utils.exercises.models.multilabel_loss import multilabel_loss
from course_utils.exercises.models.decay_groups import decay_groups
from course_utils.exercises.models.common import CHAPTER  # noqa: F401
