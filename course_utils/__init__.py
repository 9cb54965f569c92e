"""The small package that the course's notebooks import.

Importing it stays cheap: matplotlib and ipywidgets are imported only by the helpers that
draw, and torch only by the helpers that compute.
"""

__version__ = "0.1.0"


def progress(path=None):
    """Show which exercises of each chapter you have passed (kept by ``course_utils.progress_store``).

    The one place that brings the two together: the progress store knows exercises only by id,
    and the exercises record passes in the store without the store importing them.
    """
    from course_utils.exercises import all_exercises
    from course_utils.progress_store import show_progress

    return show_progress(path, exercises=all_exercises())
