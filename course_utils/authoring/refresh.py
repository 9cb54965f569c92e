"""Re-run a solutions notebook and store only the outputs that nbval compares.

An author edits a solution in JupyterLab and saves it with every output in it. nbval needs the
outputs of ``# NBVAL_CHECK_OUTPUT`` cells stored, as they come out of a clean run, and nothing
else (other outputs give answers away and churn on every run). This runs the notebook from a
fresh kernel of the current Python, in strict mode (every exercise must pass), and writes it
back with only those outputs.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import nbclient

from course_utils.authoring.errors import AuthoringError, Where
from course_utils.authoring.project import read_source, render, write_atomically
from course_utils.authoring.steps import clean_cell_metadata, clear_outputs

REFRESH_TIMEOUT_S = 600


def refresh(path: str | os.PathLike, *, kernel_name: str = "python3") -> Path:
    """Execute ``path`` top to bottom and rewrite it with only nbval-checked outputs."""
    path = Path(path)
    nb = read_source(path, str(path))
    environment = {"COURSE_STRICT": "1", "COURSE_NO_PROGRESS": "1", "MPLBACKEND": "Agg"}
    client = nbclient.NotebookClient(
        nb,
        timeout=REFRESH_TIMEOUT_S,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    try:
        with mock.patch.dict(os.environ, environment):  # the kernel inherits them; restored after
            client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        raise AuthoringError(f"{path}: a cell failed while refreshing:\n{error}") from None
    for index, cell in enumerate(nb.cells):
        where = Where.of(str(path), index, cell)
        clean_cell_metadata(clear_outputs(cell, where), where)
    nb.metadata.pop("widgets", None)
    write_atomically(path, render(nb))
    return path
