"""The small package that the course's notebooks import.

Importing it stays cheap: matplotlib and ipywidgets are imported only by the helpers that
draw, and torch only by the helpers that compute.
"""

__version__ = "0.1.0"


def progress(**kwargs):
    """Show which exercises of each chapter you have passed (see ``course_utils.progress``)."""
    from course_utils.progress import show_progress

    return show_progress(**kwargs)
