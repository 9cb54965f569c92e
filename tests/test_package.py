"""The package as notebooks use it: cheap to import, and it shows results in the right form."""

import subprocess
import sys

from course_utils import display


def test_importing_the_course_does_not_pull_in_plotting_or_widgets():
    code = (
        "import sys, course_utils, course_utils.env, course_utils.exercises.environment, "
        "course_utils.demo, course_utils.progress_store\n"
        "heavy = [m for m in ('matplotlib', 'ipywidgets') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


class Shown:
    def __str__(self):
        return "plain text"

    def _repr_html_(self):
        return "<b>html</b>"


def test_outside_a_kernel_show_prints_plain_text(capsys):
    assert not display.in_notebook_kernel()
    display.show(Shown())
    assert capsys.readouterr().out == "plain text\n"


def test_inside_a_kernel_show_sends_html_with_plain_text_beside_it(monkeypatch):
    sent = []
    monkeypatch.setattr(display, "in_notebook_kernel", lambda: True)
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda data, raw: sent.append((data, raw)))
    display.show(Shown())
    assert sent == [({"text/plain": "plain text", "text/html": "<b>html</b>"}, True)]
