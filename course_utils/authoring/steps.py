"""The transformation from a solution notebook to a learner notebook, as a list of steps.

Like nbgrader's preprocessors, each step is a small function that does one thing. A
notebook step is ``step(nb, name) -> nb``; a cell step is ``step(cell, where) -> cell or
None`` (None drops the cell) and runs inside ``each_cell``. Steps may change what they are
given: ``release_notebook`` hands them a copy. Checks come before the cuts they protect, so
a malformed source fails with an AuthoringError instead of producing a wrong notebook.
"""

from __future__ import annotations

import ast
import copy
import math
import re
from collections.abc import Callable

from nbformat import NotebookNode

from course_utils.authoring.errors import Where, first_nonblank_line
from course_utils.authoring.markers import (
    HIDDEN_TESTS,
    SOLUTION,
    find_regions,
    mentions_marker,
)

CellStep = Callable[[NotebookNode, Where], "NotebookNode | None"]
NotebookStep = Callable[[NotebookNode, str], NotebookNode]

CODE_STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
SOLUTION_ONLY_TAG = "solution-only"
NBVAL_CHECK_TAG = "nbval-check-output"
NBVAL_CHECK_COMMENT = "NBVAL_CHECK_OUTPUT"
GRADE_ID = re.compile(r"[A-Za-z0-9_-]+")
# Per-run noise that would make every re-run of a solution a diff in notebooks/.
VOLATILE_CELL_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")

SOLUTION_METADATA_HINT = (
    '{"solution": true, "grade": false, "locked": false, "grade_id": "...", "schema_version": 3}'
)
TESTS_METADATA_HINT = (
    '{"solution": false, "grade": true, "locked": true, "points": 1, "grade_id": "...", '
    '"schema_version": 3}'
)


def nbgrader_metadata(cell: NotebookNode) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def tags(cell: NotebookNode) -> list:
    found = cell.get("metadata", {}).get("tags", [])
    return found if isinstance(found, list) else []


def has_code(source: str) -> bool:
    """Whether any line would do something when run (blank lines and comments do not)."""
    return any(line.strip() and not line.strip().startswith("#") for line in source.split("\n"))


# --- notebook steps -------------------------------------------------------------------


def check_grade_ids_unique(nb: NotebookNode, name: str) -> NotebookNode:
    """nbgrader keys grades by grade_id, so two cells sharing one would share a grade.

    Runs over every cell, solution-only ones included: nbgrader sees those too.
    """
    first_seen: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        grade_id = nbgrader_metadata(cell).get("grade_id")
        if not isinstance(grade_id, str):
            continue
        if grade_id in first_seen:
            raise Where.of(name, index, cell).error(
                f"grade_id {grade_id!r} is already used by cell {first_seen[grade_id]}; "
                f"grade_ids must be unique within the notebook."
            )
        first_seen[grade_id] = index
    return nb


def each_cell(*cell_steps: CellStep) -> NotebookStep:
    """Run cell steps over every cell, in one pass, so error messages keep source indexes.

    It also holds the one rule no step may break: a cell that had code is never left
    without any (learners would get an empty cell and no hint why).
    """

    def run(nb: NotebookNode, name: str) -> NotebookNode:
        kept = []
        for index, cell in enumerate(nb.cells):
            where = Where.of(name, index, cell)
            had_code = cell.cell_type == "code" and has_code(cell.source)
            for step in cell_steps:
                cell = step(cell, where)
                if cell is None:
                    break
            else:
                if had_code and not has_code(cell.source):
                    raise where.error(
                        "the learner version of this cell would have no code left (everything "
                        "in it is hidden tests or solution). Keep a visible line, such as one "
                        f"visible assert, or tag the cell {SOLUTION_ONLY_TAG!r} to drop it."
                    )
                kept.append(cell)
        nb.cells = kept
        return nb

    run.__name__ = "each_cell(" + ", ".join(step.__name__ for step in cell_steps) + ")"
    return run


def drop_widget_state(nb: NotebookNode, name: str) -> NotebookNode:
    """Saved widget state is large, changes on every run, and is stale for the learner."""
    nb.metadata.pop("widgets", None)
    return nb


# --- cell steps -----------------------------------------------------------------------


def check_nbgrader_metadata(cell: NotebookNode, where: Where) -> NotebookNode:
    """nbgrader rejects or mis-grades cells with inconsistent metadata; catch it at the source.

    Also runs on solution-only cells, which nbgrader (unlike this tool) would still see.
    """
    if "nbgrader" not in cell.get("metadata", {}):
        return cell
    meta = cell.metadata.nbgrader
    if not isinstance(meta, dict):
        raise where.error(f"metadata.nbgrader must be an object, not {meta!r}.")
    if not meta:
        return cell
    problems = []
    if meta.get("schema_version") != 3:
        problems.append(f"schema_version is {meta.get('schema_version')!r}, expected 3")
    for key in ("solution", "grade", "locked", "task"):
        if key in meta and not isinstance(meta[key], bool):
            problems.append(f"{key} must be true or false, not {meta[key]!r}")
    if meta.get("solution") is True:
        if meta.get("grade") is not False:
            problems.append("a solution cell needs grade: false")
        if meta.get("locked") is not False:
            problems.append("a solution cell needs locked: false (learners must edit it)")
    if meta.get("grade") is True:
        if meta.get("solution") is not False:
            problems.append("a grade cell needs solution: false")
        if meta.get("locked") is not True:
            problems.append("a grade cell needs locked: true (learners must not edit the tests)")
        points = meta.get("points")
        if (
            isinstance(points, bool)
            or not isinstance(points, (int, float))
            or not math.isfinite(points)
            or points < 0
        ):
            problems.append(f"a grade cell needs points: a number >= 0, not {points!r}")
    grade_id = meta.get("grade_id")
    if grade_id is None:
        if any(meta.get(key) is True for key in ("solution", "grade", "locked", "task")):
            problems.append("grade_id is missing")
    elif not isinstance(grade_id, str) or not GRADE_ID.fullmatch(grade_id):
        problems.append(f"grade_id {grade_id!r} may only use letters, digits, '_' and '-'")
    if problems:
        raise where.error("invalid nbgrader metadata: " + "; ".join(problems) + ".")
    return cell


def drop_solution_only_cells(cell: NotebookNode, where: Where) -> NotebookNode | None:
    """Cells for the author only (reference runs, grading helpers) never reach learners."""
    return None if SOLUTION_ONLY_TAG in tags(cell) else cell


def reject_markers_outside_code(cell: NotebookNode, where: Where) -> NotebookNode:
    """Regions are cut from code cells only; in text they would reach learners verbatim."""
    if cell.cell_type == "code":
        return cell
    for number, line in enumerate(cell.source.split("\n")):
        if mentions_marker(line):
            raise where.error(
                f"line {number + 1} of this {cell.cell_type} cell is a solution or hidden-tests "
                f"marker ({line.strip()!r}); markers only work in code cells, so the text "
                f"would reach learners as it is."
            )
    return cell


def check_regions(cell: NotebookNode, where: Where) -> NotebookNode:
    """Markers must pair up, and each region must sit in the kind of cell nbgrader expects.

    nbgrader refuses solution regions outside solution cells and hidden tests outside grade
    cells; and it blanks a solution cell without a region whole, putting its stub at top
    level, where it would stop "Run All".
    """
    regions = find_regions(cell.source, where) if cell.cell_type == "code" else []
    kinds = {region.kind for region in regions}
    meta = nbgrader_metadata(cell)
    if SOLUTION in kinds and meta.get("solution") is not True:
        raise where.error(
            "this cell has a ### BEGIN SOLUTION region but is not an nbgrader solution cell, "
            "and nbgrader refuses solution regions outside solution cells. Give it the cell "
            "metadata "
            f'"nbgrader": {SOLUTION_METADATA_HINT}.'
        )
    if HIDDEN_TESTS in kinds and meta.get("grade") is not True:
        raise where.error(
            "this cell has a ### BEGIN HIDDEN TESTS region but is not an nbgrader grade cell, "
            "and nbgrader refuses hidden tests outside grade cells (it could not score them). "
            "Give it the cell metadata "
            f'"nbgrader": {TESTS_METADATA_HINT}.'
        )
    if meta.get("solution") is True and SOLUTION not in kinds:
        if cell.cell_type != "code":
            raise where.error(
                "written answers (text solution cells) are not supported: nbgrader would "
                "replace the whole text with a stub. Use a code cell with a solution region."
            )
        raise where.error(
            "this is an nbgrader solution cell without a ### BEGIN SOLUTION region; nbgrader "
            "would replace the whole cell with a stub. Mark the part learners write with "
            "### BEGIN SOLUTION / ### END SOLUTION inside a function body."
        )
    return cell


def clear_solutions(cell: NotebookNode, where: Where) -> NotebookNode:
    """Replace each solution region with nbgrader's stub, at the BEGIN marker's indentation.

    The stub must only run when the learner's function is called: a stub that runs when
    the cell runs would raise NotImplementedError and stop "Run All" at that cell.
    """
    if cell.cell_type != "code":
        return cell
    regions = [r for r in find_regions(cell.source, where) if r.kind == SOLUTION]
    if not regions:
        return cell
    lines = cell.source.split("\n")
    out: list[str] = []
    stubs = []  # (0-based line of the stub's raise in the new source, the BEGIN marker)
    start = 0
    for region in regions:
        out.extend(lines[start : region.begin.line])
        out.append(region.begin.indent + CODE_STUB[0])
        stubs.append((len(out), region.begin))
        out.append(region.begin.indent + CODE_STUB[1])
        start = region.end.line + 1
    out.extend(lines[start:])
    source = "\n".join(out)

    in_functions = lines_inside_functions(source)
    for raise_line, begin in stubs:
        if begin.indent == "":
            problem = "is at indentation 0"
        elif in_functions is not None and raise_line + 1 not in in_functions:
            problem = "is not inside a function body"
        else:
            continue
        raise where.error(
            f"the solution region opened by {begin} {problem}: in the learner notebook the "
            f'cell itself would raise NotImplementedError when run, and "Run All" would stop '
            f"there. Put the region inside a function body."
        )
    cell.source = source
    return cell


def clear_hidden_tests(cell: NotebookNode, where: Where) -> NotebookNode:
    """Hidden tests are graded by nbgrader only; learners must not see (or tune to) them."""
    if cell.cell_type != "code":
        return cell
    regions = [r for r in find_regions(cell.source, where) if r.kind == HIDDEN_TESTS]
    if not regions:
        return cell
    lines = cell.source.split("\n")
    hidden = set()
    for region in regions:
        hidden.update(range(region.begin.line, region.end.line + 1))
    cell.source = "\n".join(line for number, line in enumerate(lines) if number not in hidden)
    return cell


def clear_outputs(cell: NotebookNode, where: Where) -> NotebookNode:
    """Outputs of the solution would give answers away and churn on every run.

    Cells whose output nbval compares keep it exactly, since it is the expected result.
    """
    if cell.cell_type != "code" or nbval_checks_output(cell):
        return cell
    cell.outputs = []
    cell.execution_count = None
    return cell


def clean_cell_metadata(cell: NotebookNode, where: Where) -> NotebookNode:
    """Timing and view state change on every run; everything else (nbgrader, tags) stays."""
    for key in VOLATILE_CELL_METADATA:
        cell.metadata.pop(key, None)
    return cell


def nbval_checks_output(cell: NotebookNode) -> bool:
    """Whether nbval in lax mode (--nbval-lax) compares this cell's output.

    Accepts the course's convention (first non-blank line is a comment mentioning the
    marker) and nbval's own rule (any comment line that is exactly the marker).
    """
    if NBVAL_CHECK_TAG in tags(cell):
        return True
    first = first_nonblank_line(cell.source)
    if first.startswith("#") and NBVAL_CHECK_COMMENT in first:
        return True
    return any(
        line.strip().startswith("#") and line.strip().lstrip("#").strip() == NBVAL_CHECK_COMMENT
        for line in cell.source.split("\n")
    )


def lines_inside_functions(source: str) -> set[int] | None:
    """1-based numbers of the lines inside function bodies, or None if it is not Python.

    IPython line magics (``%...``, ``!...``) are read as ``pass`` so that they do not hide
    the rest of the cell; anything else that does not parse leaves only the indentation rule.
    """
    lines = []
    for line in source.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")) and not stripped.startswith("%%"):
            line = line[: len(line) - len(stripped)] + "pass"
        lines.append(line)
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return None
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for statement in node.body:
                inside.update(range(statement.lineno, statement.end_lineno + 1))
    return inside


# --- the pipeline ---------------------------------------------------------------------

STEPS: list[NotebookStep] = [
    check_grade_ids_unique,
    each_cell(
        check_nbgrader_metadata,
        drop_solution_only_cells,
        reject_markers_outside_code,
        check_regions,
        clear_solutions,
        clear_hidden_tests,
        clear_outputs,
        clean_cell_metadata,
    ),
    drop_widget_state,
]


def release_notebook(nb: NotebookNode, name: str) -> NotebookNode:
    """The learner version of solution notebook ``nb``; ``nb`` itself is left unchanged.

    ``name`` is how error messages refer to the notebook (e.g. "solutions/01_tensors.ipynb").
    Raises AuthoringError, naming the notebook and cell, when the source is malformed.
    """
    learner = copy.deepcopy(nb)
    for cell in learner.cells:
        if isinstance(cell.get("source"), list):  # a dict loaded without nbformat's reader
            cell.source = "".join(cell.source)
    for step in STEPS:
        learner = step(learner, name)
    return learner
