"""Pictures drawn by code: the course's diagrams and the figures a learner would rather look at.

Each module draws one family of pictures from data the notebook computed (or from fixed facts,
for diagrams), returns a matplotlib ``Figure`` closed in pyplot, and never displays it itself:
``show(fig)`` displays it as a PNG whatever backend the kernel uses, so a notebook, nbval and a
website build all see the same image. matplotlib is imported inside the functions: importing
the course stays cheap.
"""

from __future__ import annotations


def show(fig) -> None:
    """Display ``fig`` once, as a PNG (see ``course_utils.widgets._display_figure``)."""
    from course_utils.widgets import _display_figure

    _display_figure(fig)
