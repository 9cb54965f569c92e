"""`authoring refresh`: a solutions notebook re-run from scratch keeps only nbval's outputs."""

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from course_utils.authoring import AuthoringError
from course_utils.authoring.refresh import refresh


def write(tmp_path, *sources):
    nb = new_notebook(cells=[new_code_cell(source) for source in sources])
    for index, cell in enumerate(nb.cells):
        cell.id = f"cell-{index}"
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    return path


def test_only_checked_outputs_are_kept_and_a_second_refresh_changes_nothing(tmp_path):
    path = write(tmp_path, "# NBVAL_CHECK_OUTPUT\nprint(6 * 7)", "print('an answer to hide')")
    refresh(path)
    first = path.read_bytes()
    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].outputs[0].text == "42\n" and cells[0].execution_count == 1
    assert cells[1].outputs == [] and cells[1].execution_count is None
    refresh(path)
    assert path.read_bytes() == first


def test_runs_strict_so_an_unsolved_exercise_fails_the_refresh(tmp_path):
    path = write(
        tmp_path,
        "from course_utils.exercises import environment as ex\n"
        "def seeded_draw(seed, n):\n    raise NotImplementedError()",
        "ex.seeded_draw.check(seeded_draw)",
    )
    before = path.read_bytes()
    with pytest.raises(AuthoringError, match="a cell failed"):
        refresh(path)
    assert path.read_bytes() == before
