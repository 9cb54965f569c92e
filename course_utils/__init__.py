"""The small package that the course's notebooks import.

Importing it stays cheap: matplotlib and ipywidgets are imported only by the helpers that
draw, and torch only by the helpers that compute.
"""

__version__ = "0.1.0"


def progress(**kwargs):
    """Show which exercises of each chapter you have passed (kept by ``course_utils.progress_store``)."""
    from course_utils.progress_store import show_progress

    return show_progress(**kwargs)
