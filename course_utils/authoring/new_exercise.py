"""``python -m course_utils.authoring new-exercise CHAPTER NAME``: every file a new exercise needs.

An exercise touches four places: its module (probe, judge, texts, reference, public cases,
known answers), its catalogue of right and wrong answers, its three notebook cells (task,
answer, check, with nbgrader's metadata) and the chapter package that lists it. Found one
failing test at a time, that cost instructors most of an afternoon. This writes all four from
templates on the quick path (``course_utils.exercises.quick``), each TODO saying what to fill
in, so that the gates (``GATES``: the learner release, the catalogue, known answers, public
cases, the notebooks, the mutation check) are the only thing left to satisfy, and each says
what it still misses. ``GATES`` is the one list of them: the command prints it, INSTRUCTORS.md
shows it for its example (a test compares the two) and tests/test_new_exercise.py runs it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from course_utils.authoring.errors import AuthoringError
from course_utils.authoring.project import SOLUTIONS

NAME = re.compile(r"[a-z_][a-z0-9_]*")
PACKAGE = Path("course_utils") / "exercises"
CHECKLIST_HEADING = "## Checklist"

# The gates a new exercise must pass, in the order to run them: what each checks, and its
# command after the course's Python, run from the course's folder ({chapter}: the exercise
# module's chapter, {name}: the exercise, {notebook}: the chapter's notebook, without .ipynb).
GATES = (
    ("the learner notebook, generated from the solution notebook",
     "-m course_utils.authoring release"),
    ("the catalogue and its minimum counts, known answers, public cases, the notebook's structure",
     "-m pytest tests/catalogue/{chapter}/test_{name}.py tests/test_catalogue_gate.py "
     "tests/test_known_answers.py tests/test_public_cases.py tests/test_notebook_structure.py "
     "-k '{name} or {chapter} or every_exercise'"),
    ("the worked answer passes; the learner notebook runs to the end, the exercise not attempted",
     "-m pytest --nbval-lax --nbval-current-env solutions/{notebook}.ipynb notebooks/{notebook}.ipynb"),
    ("slips of the reference that the check misses (each mutant must fail)",
     "tools/mutate_checks.py {chapter}.{name}"),
)
PYTHON = ".venv/bin/python"
_WIDTH = 100


def gates(chapter: str, name: str, notebook: str) -> list[tuple[str, list[str]]]:
    """``GATES`` for one exercise: (what it checks, its arguments after the Python)."""
    return [(checks, shlex.split(command.format(chapter=chapter, name=name, notebook=notebook)))
            for checks, command in GATES]


def gates_text(chapter: str, name: str, notebook: str, python: str = PYTHON) -> str:
    """The gates as shell lines to paste: each command under a comment saying what it checks,
    long ones continued with a backslash."""
    lines = []
    for checks, arguments in gates(chapter, name, notebook):
        lines.append(f"# {checks}")
        words, line = [], python
        for argument in arguments:  # an option that takes a value stays on one line with it
            if words and words[-1] in ("-m", "-k"):
                words[-1] += " " + shlex.quote(argument)
            else:
                words.append(shlex.quote(argument))
        for word in words:
            if len(line) + 1 + len(word) + 2 > _WIDTH:
                lines.append(line + " \\")
                line = "    " + word
            else:
                line += " " + word
        lines.append(line)
    return "\n".join(lines)


@dataclass(frozen=True)
class NewExercise:
    module: Path
    catalogue: Path
    notebook: Path
    package_init: Path


def chapter_of(name: str) -> tuple[str, str]:
    """(notebook stem, exercise module) of the chapter named ``01``, ``01_tensors`` or ``tensors``."""
    from course_utils.exercises import CHAPTERS, chapter_named

    try:
        stem = chapter_named(name)
    except ValueError as error:
        raise AuthoringError(str(error)) from None
    return stem, CHAPTERS[stem]


def module_text(chapter: str, name: str, params: tuple[str, ...]) -> str:
    signature = ", ".join(params)
    return f'''"""{chapter}.{name}: TODO one line on what the exercise trains.

Written by ``python -m course_utils.authoring new-exercise``, on the quick path
(``course_utils/exercises/quick.py``): the reference, the texts, the inputs the task allows
and answers worked out by hand; the probe, the judge and the public cases are derived.
"""

import torch

from course_utils.exercises import quick

CHAPTER = "{chapter}"


def {name}({signature}):
    raise NotImplementedError("TODO: the reference solution")


{name} = quick.tensor_function(
    "{name}",
    chapter=CHAPTER,
    title="TODO: the exercise's title",
    reference={name},
    params={params!r},
    returns="TODO: what a right answer returns, in a few words",
    # Every shape and dtype the task allows (a tuple of shapes per entry with several
    # arguments); batch_dim=None when the task fixes the first dimension's size.
    inputs=quick.Inputs(shapes=[{"(" + ", ".join(["(4, 3)"] * len(params)) + ")" if len(params) > 1 else "(4, 3)"}], dtypes=(torch.float32, torch.float64)),
    hints=["TODO: a first hint", "TODO: a second hint"],
    # What a learner reads when the answer is right: what it got right, as the course's own
    # exercises say it ("Correct: one error per sample, shape (N,).").
    passed_message="Correct: TODO: what a right answer got right",
    # Named mistakes, beside the generic messages: quick.Slip(id, wrong_function, message).
    slips=[],
    # ((arguments...), expected) pairs worked out by hand, not by calling the reference.
    known=[],
)
'''


def catalogue_text(chapter: str, name: str) -> str:
    return f'''"""The catalogue of {chapter}.{name}: answers as learners write them (tests/exercise_catalogue.py)."""

import pytest
import torch  # noqa: F401  (the answers below use it)

from course_utils.exercises import {chapter} as ex
from exercise_catalogue import Catalogue, derived_wrong_answers, right, wrong  # noqa: F401

CATALOGUE = Catalogue({{
    ex.{name}: [
        # TODO: three right answers written otherwise than the reference, e.g.
        # right("with keepdim", lambda x: ...),
        # The slips every function of tensors can make, which the derived check must catch:
        *derived_wrong_answers(ex.{name}),
        # The topic's own mistakes, with words their message must contain, e.g.
        # wrong("the biased std", lambda x: ..., "biased"),
    ],
}})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
'''


def notebook_cells(name: str, params: tuple[str, ...]) -> list[dict]:
    signature = ", ".join(params)
    return [
        {"cell_type": "markdown", "id": f"{name}-task", "metadata": {},
         "source": f"### ✎ Exercise: TODO the title\n\nWrite `{name}({signature})`: TODO the task, "
                   "with every input it allows (shapes, dtypes, empty inputs)."},
        {"cell_type": "code", "id": name, "execution_count": None, "outputs": [],
         "metadata": {"nbgrader": {"grade": False, "grade_id": name, "locked": False,
                                   "schema_version": 3, "solution": True}},
         "source": f"def {name}({signature}):\n    ### BEGIN SOLUTION\n"
                   "    raise NotImplementedError  # TODO: the worked answer\n    ### END SOLUTION"},
        {"cell_type": "code", "id": f"check_{name}", "execution_count": None, "outputs": [],
         "metadata": {"nbgrader": {"grade": True, "grade_id": f"check_{name}", "locked": True,
                                   "points": 1, "schema_version": 3, "solution": False}},
         "source": f"ex.{name}.check({name})"},
    ]


def _insert_cells(notebook: Path, cells: list[dict], after: str | None) -> None:
    import nbformat

    data = nbformat.read(notebook, as_version=4)
    ids = [cell.get("id") for cell in data["cells"]]
    if after is not None:
        if f"check_{after}" not in ids:
            raise AuthoringError(f"{notebook.name} has no check cell of {after!r} to put the exercise after")
        at = ids.index(f"check_{after}") + 1
    else:
        headings = [i for i, cell in enumerate(data["cells"]) if cell["cell_type"] == "markdown"
                    and "".join(cell["source"]).startswith(CHECKLIST_HEADING)]
        at = headings[0] if headings else len(data["cells"])
    data["cells"][at:at] = [nbformat.from_dict(cell) for cell in cells]
    nbformat.write(data, notebook)


def _list_in_package(init: Path, chapter: str, name: str, after: str | None) -> None:
    lines = init.read_text(encoding="utf-8").splitlines(keepends=True)
    line = f"from course_utils.exercises.{chapter}.{name} import {name}  # noqa: F401\n"
    at = len(lines)
    if after is not None:
        anchor = f"from course_utils.exercises.{chapter}.{after} import {after}"
        found = [i for i, text in enumerate(lines) if text.startswith(anchor)]
        if not found:
            raise AuthoringError(f"{init} does not list {after!r}")
        at = found[0] + 1
    lines.insert(at, line)
    init.write_text("".join(lines), encoding="utf-8")


def new_exercise(root: Path, chapter_name: str, name: str, params: tuple[str, ...] = ("x",),
                 after: str | None = None) -> NewExercise:
    """Write the exercise ``name`` of chapter ``chapter_name`` into the course at ``root``."""
    stem, chapter = chapter_of(chapter_name)
    if not NAME.fullmatch(name) or not all(NAME.fullmatch(p) for p in params):
        raise AuthoringError(f"{name!r} and its parameters {params!r} must be lower-case Python names")
    package = root / PACKAGE / chapter
    made = NewExercise(module=package / f"{name}.py",
                       catalogue=root / "tests" / "catalogue" / chapter / f"test_{name}.py",
                       notebook=root / SOLUTIONS / f"{stem}.ipynb",
                       package_init=package / "__init__.py")
    if not made.package_init.exists():
        raise AuthoringError(f"{package} is not a package of one module per exercise")
    taken = [path for path in (made.module, made.catalogue) if path.exists()]
    if taken or f'"grade_id": "{name}"' in made.notebook.read_text(encoding="utf-8"):
        raise AuthoringError(f"{chapter}.{name} exists already ({', '.join(map(str, taken)) or made.notebook})")
    made.module.write_text(module_text(chapter, name, params), encoding="utf-8")
    made.catalogue.parent.mkdir(parents=True, exist_ok=True)
    for init in (made.catalogue.parent.parent / "__init__.py", made.catalogue.parent / "__init__.py"):
        init.touch()
    made.catalogue.write_text(catalogue_text(chapter, name), encoding="utf-8")
    _list_in_package(made.package_init, chapter, name, after)
    _insert_cells(made.notebook, notebook_cells(name, params), after)
    return made


def next_steps(made: NewExercise, chapter: str, name: str) -> str:
    shown = "\n".join("  " + line for line in gates_text(chapter, name, made.notebook.stem).splitlines())
    return f"""Written:
  {made.module}   the reference, texts, inputs, known answers (every TODO)
  {made.catalogue}   three right answers, and the topic's own wrong ones
  {made.notebook}   the task, the worked answer (three cells, nbgrader metadata set)
  {made.package_init}   lists the exercise
Then run the gates, in this order, from the course's folder (each names what is still missing):
{shown}"""
