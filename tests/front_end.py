"""Run a notebook in a real kernel the way a front end a person sits at sends its cells.

nbclient runs notebooks headless (it never allows ``input()``), and the course's explorers and
plots then render statically. JupyterLab, Notebook and VS Code allow ``input()``: sending the
cells that way is how tests see the live versions.
"""


def execute_as_front_end(client) -> None:
    """Like ``client.execute()``, with execute requests as JupyterLab sends them."""
    with client.setup_kernel():
        client.kc.allow_stdin = True
        for index, cell in enumerate(client.nb.cells):
            client.execute_cell(cell, index)
        client.set_widgets_metadata()
