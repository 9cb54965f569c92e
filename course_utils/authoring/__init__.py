"""Learner notebooks (notebooks/) generated from solution notebooks (solutions/).

solutions/*.ipynb are the course's source of truth, written with nbgrader's conventions so
that nbgrader can grade from them too. The learner version of each is derived by the list
of small steps in ``course_utils.authoring.steps.STEPS``: solution regions become a stub,
hidden tests and solution-only cells disappear, outputs are cleared (except those nbval
compares), and per-run noise is dropped. Never edit notebooks/ by hand:

    python -m course_utils.authoring release   # regenerate notebooks/
    python -m course_utils.authoring check     # fail if notebooks/ is stale (for CI)
"""

from course_utils.authoring.errors import AuthoringError
from course_utils.authoring.project import (
    RELEASE_COMMAND,
    check,
    check_details,
    read_source,
    release,
    release_changes,
    render,
)
from course_utils.authoring.steps import STEPS, nbval_checks_output, release_notebook

__all__ = [
    "AuthoringError",
    "RELEASE_COMMAND",
    "STEPS",
    "check",
    "check_details",
    "nbval_checks_output",
    "read_source",
    "release",
    "release_changes",
    "release_notebook",
    "render",
]
