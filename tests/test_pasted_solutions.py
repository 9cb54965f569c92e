"""tests/pasted_solutions.py: each answer cell becomes exactly what ``.solution()`` shows.

Fast checks of the generator only. Running the pasted notebooks (strict: every check must pass
with the pasted solutions) is a separate pass of the test command:
``python tests/pasted_solutions.py .course/pasted`` then nbval on ``.course/pasted``.
"""

from __future__ import annotations

import builtins
import copy
import html
import re
import symtable
import textwrap

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from pasted_solutions import (
    NOTEBOOKS,
    SEPARATOR,
    PastedSolutionError,
    answer_cells,
    main,
    pasted_notebook,
    write_pasted,
)

from course_utils.authoring.project import read_source, render
from course_utils.exercises import all_exercises, core, solution_text
from course_utils.exercises import environment, tensors, training_loop

PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
EXERCISES = [exercise for chapter in all_exercises().values() for exercise in chapter]
IMPORT = re.compile(r"from course_utils\.exercises import (\w+) as (\w+)")


def _read(path):
    return read_source(path, f"notebooks/{path.name}")


def _is_answer(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("solution") is True


def _expected_texts(nb):
    """answer cell index → the solutions of the exercises checked below it, found by regex."""
    (module_name, alias), = {m.groups() for c in nb.cells for m in IMPORT.finditer(c.source)}
    module = getattr(__import__("course_utils.exercises", fromlist=[module_name]), module_name)
    check = re.compile(rf"\b{alias}\.(\w+)\.check\(")
    expected, current = {}, None
    for index, cell in enumerate(nb.cells):
        if _is_answer(cell):
            current = index
            expected[index] = []
        elif current is not None and cell.metadata.get("nbgrader", {}).get("grade"):
            expected[current] += check.findall(cell.source)
    return {
        index: SEPARATOR.join(getattr(module, name).solution_text() for name in names)
        for index, names in expected.items()
    }


def test_there_are_learner_notebooks():
    assert len(PATHS) >= 8, PATHS


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_every_answer_cell_holds_the_solutions_of_its_checks(path):
    nb = _read(path)
    pasted = pasted_notebook(nb, path.name)
    expected = _expected_texts(nb)
    assert expected and all(expected.values()), f"{path.name}: an answer cell without a check"
    for index, cell in enumerate(pasted.cells):
        if index in expected:
            assert cell.source == expected[index], f"{path.name}: cell {index}"
            assert "NotImplementedError" not in cell.source and "YOUR CODE HERE" not in cell.source
    assert [a.index for a in answer_cells(nb, path.name)] == sorted(expected)


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_nothing_but_the_answer_cells_changes(path):
    nb = _read(path)
    before = copy.deepcopy(nb)
    pasted = pasted_notebook(nb, path.name)
    assert nb == before, "the source notebook was modified"
    assert {k: v for k, v in pasted.items() if k != "cells"} == {
        k: v for k, v in nb.items() if k != "cells"
    }
    assert len(pasted.cells) == len(nb.cells)
    for index, (new, old) in enumerate(zip(pasted.cells, nb.cells)):
        if _is_answer(old):
            assert new.source != old.source
            new, old = dict(new, source=None), dict(old, source=None)
        assert new == old, f"{path.name}: cell {index} changed"
    nbformat.validate(pasted)


def test_written_notebooks_are_the_pasted_ones(tmp_path):
    out = tmp_path / "pasted"
    out.mkdir()
    (out / "renamed_long_ago.ipynb").write_text("{}")  # a stale copy is not run again
    assert main([str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [p.name for p in PATHS]
    for path in PATHS:
        expected = render(pasted_notebook(_read(path), f"notebooks/{path.name}"))
        assert (out / path.name).read_bytes() == expected


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.id for e in EXERCISES])
def test_solution_shows_the_solution_text(exercise, monkeypatch):
    shown = []
    monkeypatch.setattr(core, "show", shown.append)
    exercise.solution()
    (note,) = shown
    text = exercise.solution_text()
    assert note.code and note.body == text
    assert str(note) == f"Solution: {exercise.title}\n" + textwrap.indent(text, "   ")
    assert f"<pre style='margin:4px 0'>{html.escape(text)}</pre>" in note._repr_html_()


def _unbound_names(source):
    top = symtable.symtable(source, "<solution>", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    used, tables = set(), [top]
    while tables:
        table = tables.pop()
        used |= {s.get_name() for s in table.get_symbols() if s.is_referenced() and s.is_global()}
        tables.extend(table.get_children())
    return used - bound - set(dir(builtins))


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.id for e in EXERCISES])
def test_every_solution_is_self_contained(exercise):
    text = exercise.solution_text()
    assert not _unbound_names(text), f"{exercise.id} uses names its solution never imports"
    namespace = {}
    exec(compile(text, f"<solution of {exercise.id}>", "exec"), namespace)
    assert exercise.expects.name in namespace


def test_the_imports_a_solution_needs_come_first():
    assert environment.kernel_environment.solution_text().startswith(
        "import sys\nfrom pathlib import Path\n\nimport torch\n\n\ndef kernel_environment():\n"
    )
    assert training_loop.EarlyStopping.solution_text().startswith(
        "import math\n\n\nclass EarlyStopping:\n"
    )
    # nothing from outside: the source alone, as before
    assert tensors.outer_sum.solution_text() == solution_text._source_of(tensors.outer_sum.reference)


# -- synthetic notebooks: what cannot be mapped fails, naming the notebook and grade_id --------
SETUP = "import torch\nfrom course_utils.exercises import tensors as ex"


def answer(source, grade_id="g"):
    meta = {"solution": True, "grade": False, "locked": False, "grade_id": grade_id,
            "schema_version": 3}
    return new_code_cell(source, metadata={"nbgrader": meta})


def checks(source, grade_id="check_g"):
    meta = {"solution": False, "grade": True, "locked": True, "grade_id": grade_id, "points": 1,
            "schema_version": 3}
    return new_code_cell(source, metadata={"nbgrader": meta})


def notebook(*cells):
    return new_notebook(cells=[new_code_cell(SETUP), *cells])


STUB_OUTER = "def outer_sum(a, b):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
STUB_RESIDUALS = "def residuals(pred, target):\n    raise NotImplementedError()"


def test_one_answer_cell_can_hold_several_exercises():
    nb = notebook(
        answer(STUB_OUTER + "\n\n\n" + STUB_RESIDUALS),
        new_markdown_cell("Now check both."),
        checks("ex.residuals.check(residuals)", "c1"),
        checks("print('between')\nex.outer_sum.check(outer_sum)", "c2"),
    )
    pasted = pasted_notebook(nb, "two.ipynb")
    assert pasted.cells[1].source == (
        tensors.residuals.solution_text() + "\n\n\n" + tensors.outer_sum.solution_text()
    )
    assert pasted.cells[2:] == nb.cells[2:]


def test_the_alias_is_read_from_the_notebook():
    nb = new_notebook(cells=[
        new_code_cell("from course_utils.exercises import tensors as chapter"),
        answer(STUB_OUTER),
        checks("chapter.outer_sum.check(outer_sum)"),
    ])
    assert pasted_notebook(nb, "alias.ipynb").cells[1].source == tensors.outer_sum.solution_text()


@pytest.mark.parametrize(
    "cells, words",
    [
        ([answer(STUB_OUTER, "lonely")], "no check cell"),
        ([answer(STUB_OUTER, "lonely"), answer(STUB_RESIDUALS, "g2"),
          checks("ex.residuals.check(residuals)")], "no check cell"),
        ([answer(STUB_OUTER, "lonely"), checks("ex.outer_sum.check(other_name)")],
         "does not check a name this cell defines"),
        ([answer(STUB_OUTER, "lonely"), checks("ex.outer_sum.check(lambda a, b: a)")],
         "does not check a name this cell defines"),
        ([answer(STUB_OUTER, "lonely"), checks("ex.no_such_exercise.check(outer_sum)")],
         "not an exercise"),
        ([answer("def residuals(pred, target):\n    ...", "lonely"),
          checks("ex.outer_sum.check(residuals)")], "does not define 'residuals'"),
        ([answer(STUB_OUTER + "\n\ndef helper():\n    pass", "lonely"),
          checks("ex.outer_sum.check(outer_sum)")], "would lose it"),
    ],
    ids=["no check", "check after the next answer", "other name", "not a name",
         "no such exercise", "solution defines another name", "a helper would be lost"],
)
def test_an_answer_cell_that_cannot_be_mapped_fails_loudly(cells, words):
    with pytest.raises(PastedSolutionError) as raised:
        pasted_notebook(notebook(*cells), "broken.ipynb")
    message = str(raised.value)
    assert "broken.ipynb" in message and "'lonely'" in message and words in message, message


def test_a_notebook_without_the_exercise_import_fails_loudly():
    nb = new_notebook(cells=[answer(STUB_OUTER, "lonely"), checks("ex.outer_sum.check(outer_sum)")])
    with pytest.raises(PastedSolutionError, match="noimport.ipynb.*'lonely'.*never imports"):
        pasted_notebook(nb, "noimport.ipynb")


def test_paths_relative_to_the_notebook_need_a_copy_next_to_it(tmp_path):
    course = tmp_path / "course"
    (course / "notebooks").mkdir(parents=True)
    nb = notebook(new_code_cell("open('../data/x.csv')"), answer(STUB_OUTER),
                  checks("ex.outer_sum.check(outer_sum)"))
    nbformat.write(nb, course / "notebooks" / "n.ipynb")
    with pytest.raises(PastedSolutionError, match="n.ipynb: code cell 1 .*'../'"):
        write_pasted(tmp_path / "elsewhere" / "pasted", course / "notebooks")
    assert not (tmp_path / "elsewhere").exists()
    assert write_pasted(course / "pasted", course / "notebooks") == [course / "pasted" / "n.ipynb"]
    with pytest.raises(PastedSolutionError, match="course folder"):
        write_pasted(NOTEBOOKS, NOTEBOOKS)
    assert main([str(tmp_path / "elsewhere"), "--notebooks", str(course / "notebooks")]) == 1
