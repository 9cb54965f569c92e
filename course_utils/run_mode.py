"""What this run requires of every check, read from the environment. Imports nothing of the course.

Both the exercises (``check`` raises unless it has the required outcome) and the progress store
(a run that requires an outcome never records progress) ask it, so neither imports the other
to find out.
"""

from __future__ import annotations

import os


def nbgrader_grading() -> bool:
    """Whether nbgrader is running this notebook to grade or validate it."""
    return os.environ.get("NBGRADER_EXECUTION") in ("autograde", "validate")


def required_outcome_value(nbgrader_grading_at_import: bool = False) -> str | None:
    """The outcome's value every check must have in this run; None in a learner's own session.

    ``COURSE_STRICT=1`` (CI on solutions/) and nbgrader's autograde require ``"passed"``;
    ``COURSE_EXPECT=not_attempted`` (CI on the generated learner notebooks) requires
    ``"not attempted"``. ``nbgrader_grading_at_import`` is what ``nbgrader_grading()`` said
    when the caller was imported, so that an answer cell deleting the variable changes nothing.
    """
    if os.environ.get("COURSE_STRICT") == "1":
        return "passed"
    if nbgrader_grading_at_import or nbgrader_grading():
        return "passed"
    expected = os.environ.get("COURSE_EXPECT", "")
    if expected:
        return expected.replace("_", " ")
    return None
