"""Learner notebooks with every answer cell replaced by what ``.solution()`` shows.

A learner who is stuck calls ``ex.NAME.solution()`` and pastes what it shows into the answer
cell. That has to work: the shown code must run in the notebook as it stands at that point,
and pass the check below it. This module writes, for each ``notebooks/*.ipynb``, a copy in
which each answer cell holds exactly that text; the test command then runs the copies strict
(``COURSE_STRICT=1``: every check must pass)::

    python tests/pasted_solutions.py .course/pasted
    COURSE_STRICT=1 pytest --nbval-lax --nbval-current-env .course/pasted

How an answer cell is tied to its exercises: the notebook imports a chapter's exercises under
an alias (``from course_utils.exercises import tensors as ex``); the check cells that follow
an answer cell, up to the next answer cell, call ``ex.NAME.check(ANSWER)``; each ``ANSWER``
must be a name the answer cell defines. One answer cell may be checked by several exercises:
it is replaced by their solutions in the order of the checks, separated by two blank lines.
Anything that does not fit (no check after an answer cell, a check of a name the cell does not
define, a solution that does not define the name checked, an exercise the module lacks, a
definition no check covers, which pasting would lose) raises ``PastedSolutionError`` naming
the notebook and the grade_id.

Where the copies go: nbval starts each notebook's kernel in the copy's folder. The notebooks
find the course's files through ``course_utils.__file__``, never relative to their own folder,
so the copies run from anywhere; a code cell that mentions ``../`` is refused unless the
copies are written next to notebooks/ (a folder with the same parent), where such paths still
lead to the same place. A folder inside the repository (``.course/...``, git-ignored) also
keeps the repository's pytest configuration and conftest.py in force.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path

from nbformat import NotebookNode

from course_utils.authoring.project import read_source, render, write_atomically
from course_utils.exercises.core import Exercise

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
EXERCISES_PACKAGE = "course_utils.exercises"
SEPARATOR = "\n\n\n"  # between the solutions of one answer cell: two blank lines, as PEP 8


class PastedSolutionError(Exception):
    """An answer cell that cannot be mapped to the exercises that check it."""


@dataclass(frozen=True)
class AnswerCell:
    """One answer cell and the exercises its check cells call, in the order they call them."""

    index: int
    grade_id: str
    exercises: tuple[Exercise, ...]

    def pasted_text(self) -> str:
        return SEPARATOR.join(exercise.solution_text() for exercise in self.exercises)


def _nbgrader(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def _is_answer(cell) -> bool:
    return cell.get("cell_type") == "code" and _nbgrader(cell).get("solution") is True


def _is_check(cell) -> bool:
    meta = _nbgrader(cell)
    return cell.get("cell_type") == "code" and meta.get("grade") is True and not meta.get(
        "solution"
    )


def _python_of(source: str) -> str:
    """A cell's source as Python: IPython's ``%magic`` and ``!shell`` lines transformed."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def _parse(source: str, where: str) -> ast.Module:
    try:
        return ast.parse(_python_of(source))
    except SyntaxError as error:
        raise PastedSolutionError(f"{where}: cannot be parsed as Python ({error})") from None


def _defined_names(tree: ast.Module) -> list[str]:
    """Names a cell binds at its top level, in order (functions, classes, assignments)."""
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.extend(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return list(dict.fromkeys(names))


def exercise_aliases(nb: NotebookNode, name: str) -> dict[str, str]:
    """Alias → chapter module, from the notebook's ``import`` of its exercises."""
    aliases: dict[str, str] = {}
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code" or EXERCISES_PACKAGE not in cell.source:
            continue
        for node in ast.walk(_parse(cell.source, f"{name}: cell {index}")):
            if isinstance(node, ast.ImportFrom) and node.module == EXERCISES_PACKAGE:
                for alias in node.names:
                    aliases[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(EXERCISES_PACKAGE + ".") and alias.asname:
                        aliases[alias.asname] = alias.name[len(EXERCISES_PACKAGE) + 1 :]
    return aliases


def _checks_in(tree: ast.Module, aliases: dict[str, str]) -> list[tuple[str, str, ast.expr]]:
    """(module, exercise name, the argument) for each ``ALIAS.NAME.check(ARG)`` call, in the
    order they appear; the argument is None unless the call passes exactly one."""
    found = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "check"
            and isinstance(node.func.value, ast.Attribute)
            and isinstance(node.func.value.value, ast.Name)
            and node.func.value.value.id in aliases
        ):
            continue
        argument = node.args[0] if len(node.args) == 1 and not node.keywords else None
        position = (node.lineno, node.col_offset)
        found.append((position, aliases[node.func.value.value.id], node.func.value.attr, argument))
    return [check[1:] for check in sorted(found, key=lambda check: check[0])]


def answer_cells(nb: NotebookNode, name: str) -> list[AnswerCell]:
    """Every answer cell of notebook ``nb`` with the exercises that check it.

    Raises PastedSolutionError, naming the notebook and the grade_id, for a cell that cannot
    be mapped.
    """
    aliases = exercise_aliases(nb, name)
    answers = [i for i, cell in enumerate(nb.cells) if _is_answer(cell)]
    found = []
    for position, index in enumerate(answers):
        cell = nb.cells[index]
        grade_id = _nbgrader(cell).get("grade_id")
        where = f"{name}: answer cell {index} (grade_id {grade_id!r})"
        if not isinstance(grade_id, str) or not grade_id:
            raise PastedSolutionError(f"{where}: has no grade_id")
        if not aliases:
            raise PastedSolutionError(
                f"{where}: the notebook never imports {EXERCISES_PACKAGE} (e.g. "
                f"`from {EXERCISES_PACKAGE} import tensors as ex`), so its checks cannot be read"
            )
        defined = _defined_names(_parse(cell.source, where))
        end = answers[position + 1] if position + 1 < len(answers) else len(nb.cells)
        checks = []
        for later in range(index + 1, end):
            if _is_check(nb.cells[later]):
                tree = _parse(nb.cells[later].source, f"{name}: check cell {later}")
                checks.extend(_checks_in(tree, aliases))
        if not checks:
            raise PastedSolutionError(
                f"{where}: no check cell after it calls "
                f"{'/'.join(sorted(aliases))}.NAME.check(...) before the next answer cell"
            )
        exercises = []
        for module_name, exercise_name, argument in checks:
            module = importlib.import_module(f"{EXERCISES_PACKAGE}.{module_name}")
            exercise = getattr(module, exercise_name, None)
            if not isinstance(exercise, Exercise):
                raise PastedSolutionError(
                    f"{where}: its check calls {module_name}.{exercise_name}, which is not an "
                    f"exercise of {module.__name__}"
                )
            if not isinstance(argument, ast.Name) or argument.id not in defined:
                shown = ast.unparse(argument) if argument is not None else "(no single argument)"
                raise PastedSolutionError(
                    f"{where}: {exercise_name}.check({shown}) does not check a name this cell "
                    f"defines ({', '.join(defined) or 'none'})"
                )
            solved = _defined_names(_parse(exercise.solution_text(), f"{where}: solution"))
            if argument.id not in solved:
                raise PastedSolutionError(
                    f"{where}: the solution of {exercise.id} does not define {argument.id!r} "
                    f"(it defines {', '.join(solved) or 'nothing'}), so pasting it cannot work"
                )
            if exercise not in exercises:
                exercises.append(exercise)
        covered = {
            name_
            for exercise in exercises
            for name_ in _defined_names(_parse(exercise.solution_text(), where))
        }
        lost = [name_ for name_ in defined if name_ not in covered]
        if lost:
            raise PastedSolutionError(
                f"{where}: defines {', '.join(lost)}, which no solution checked after it "
                f"defines; pasting the solutions would lose {'them' if len(lost) > 1 else 'it'}"
            )
        found.append(AnswerCell(index, grade_id, tuple(exercises)))
    return found


def _climbs_out(nb: NotebookNode) -> int | None:
    """The index of the first code cell that names a path relative to the notebook's parent."""
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") == "code" and ("../" in cell.source or "..\\" in cell.source):
            return index
    return None


def pasted_notebook(nb: NotebookNode, name: str) -> NotebookNode:
    """A copy of ``nb`` whose answer cells hold the solutions; ``nb`` itself is unchanged."""
    pasted = copy.deepcopy(nb)
    for answer in answer_cells(nb, name):
        pasted.cells[answer.index].source = answer.pasted_text()
    return pasted


def write_pasted(out_dir: str | Path, notebooks: str | Path = NOTEBOOKS) -> list[Path]:
    """Write the pasted copy of every ``notebooks/*.ipynb`` into ``out_dir``; their paths.

    Every notebook is mapped before anything is written, so an error leaves ``out_dir`` as it
    was.
    """
    out_dir, notebooks = Path(out_dir), Path(notebooks)
    if out_dir.resolve() in (notebooks.resolve(), ROOT / "notebooks", ROOT / "solutions"):
        raise PastedSolutionError(f"{out_dir}: is a course folder; write the copies elsewhere")
    sources = sorted(notebooks.glob("*.ipynb"))
    if not sources:
        raise PastedSolutionError(f"{notebooks}: holds no notebooks")
    next_to_notebooks = out_dir.resolve().parent == notebooks.resolve().parent
    planned = {}
    for path in sources:
        name = f"{notebooks.name}/{path.name}"
        nb = read_source(path, name)
        climbing = _climbs_out(nb)
        if climbing is not None and not next_to_notebooks:
            raise PastedSolutionError(
                f"{name}: code cell {climbing} names a path with '../', relative to the "
                f"notebook's folder; write the copies next to {notebooks.name}/ (e.g. "
                f"{notebooks.parent / 'pasted'}) so that it still leads to the same place"
            )
        planned[out_dir / path.name] = render(pasted_notebook(nb, name))
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.ipynb"):
        if stale not in planned:
            stale.unlink()
    for target, data in planned.items():
        write_atomically(target, data)
    return list(planned)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write each learner notebook with its answer cells replaced by the "
        "solutions that .solution() shows."
    )
    parser.add_argument("out_dir", help="where to write the notebooks, e.g. .course/pasted")
    parser.add_argument("--notebooks", default=str(NOTEBOOKS), help="default: %(default)s")
    args = parser.parse_args(argv)
    try:
        written = write_pasted(args.out_dir, args.notebooks)
    except PastedSolutionError as error:
        print(f"pasted_solutions: {error}", file=sys.stderr)
        return 1
    print(f"pasted_solutions: wrote {len(written)} notebooks to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
