"""One way to show a result: rich HTML inside a live Jupyter kernel, plain text elsewhere.

Objects that want to be shown implement ``_repr_html_`` and ``__str__``; ``show`` picks the
one that the place the code runs in can render.
"""

from __future__ import annotations

import sys


def in_notebook_kernel() -> bool:
    """True inside a Jupyter kernel (JupyterLab, nbval, nbclient), False in plain Python."""
    ipython_module = sys.modules.get("IPython")
    if ipython_module is None:
        return False
    shell = ipython_module.get_ipython()
    return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"


def show(obj) -> None:
    """Render ``obj`` as HTML in a notebook, or print its plain text everywhere else."""
    if in_notebook_kernel() and hasattr(obj, "_repr_html_"):
        from IPython.display import display

        # Both forms go out: JupyterLab renders the HTML, nbval compares the plain text.
        display({"text/plain": str(obj), "text/html": obj._repr_html_()}, raw=True)
    else:
        print(str(obj))
