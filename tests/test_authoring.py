"""solutions/ → notebooks/: what a course author would notice if the release went wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_utils.authoring import (
    AuthoringError,
    check,
    release,
    release_notebook,
)
from course_utils.authoring.__main__ import main

REPO_ROOT = Path(__file__).resolve().parent.parent
NAME = "solutions/01_demo.ipynb"


def solution_meta(grade_id: str) -> dict:
    return {
        "nbgrader": {
            "solution": True,
            "grade": False,
            "locked": False,
            "grade_id": grade_id,
            "schema_version": 3,
        }
    }


def grade_meta(grade_id: str, points=1) -> dict:
    return {
        "nbgrader": {
            "solution": False,
            "grade": True,
            "locked": True,
            "points": points,
            "grade_id": grade_id,
            "schema_version": 3,
        }
    }


def solution_cell(source: str, grade_id: str = "add-impl", **kwargs):
    return new_code_cell(source, metadata=solution_meta(grade_id), **kwargs)


def grade_cell(source: str, grade_id: str = "add-tests", **kwargs):
    return new_code_cell(source, metadata=grade_meta(grade_id), **kwargs)


ADD_SOLUTION = """\
import math

def add(a, b):
    \"\"\"Add two tensors.\"\"\"
    ### BEGIN SOLUTION
    return a + b
    ### END SOLUTION"""

ADD_TESTS = """\
assert add(1, 2) == 3
### BEGIN HIDDEN TESTS
assert add(-1, 1) == 0
### END HIDDEN TESTS"""


def demo_notebook():
    """A small but complete exercise notebook, as an author would write it."""
    return new_notebook(
        cells=[
            new_markdown_cell("# Adding tensors"),
            solution_cell(ADD_SOLUTION),
            grade_cell(ADD_TESTS),
            new_code_cell("print(add(1, 2))", metadata={"tags": ["solution-only"]}),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )


def write_source(root: Path, nb, filename: str = "01_demo.ipynb") -> Path:
    path = root / "solutions" / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# --- the transformation ---------------------------------------------------------------


def test_solution_becomes_stub_at_the_markers_indentation_and_raises():
    learner = release_notebook(demo_notebook(), NAME)
    source = learner.cells[1].source
    assert "return a + b" not in source
    assert "BEGIN SOLUTION" not in source and "END SOLUTION" not in source
    assert source == (
        "import math\n\n"
        "def add(a, b):\n"
        '    """Add two tensors."""\n'
        "    # YOUR CODE HERE\n"
        "    raise NotImplementedError()"
    )
    namespace: dict = {}
    exec(source, namespace)  # the cell itself runs fine: "Run All" gets past it
    with pytest.raises(NotImplementedError):
        namespace["add"](1, 2)


def test_markers_in_other_case_are_refused_as_nbgrader_would_not_see_them():
    source = "def f():\n    ### begin solution\n    return 1\n    ### end solution\n"
    with pytest.raises(AuthoringError, match="wrong case"):
        release_notebook(new_notebook(cells=[solution_cell(source)]), NAME)


def test_several_regions_in_one_cell():
    source = (
        "class Net:\n"
        "    def __init__(self):\n"
        "        ### BEGIN SOLUTION\n"
        "        self.w = 1\n"
        "        ### END SOLUTION\n"
        "\n"
        "    def forward(self, x):\n"
        "\t\t### BEGIN SOLUTION\n"
        "\t\treturn x * self.w\n"
        "\t\t### END SOLUTION\n"
    )
    learner = release_notebook(new_notebook(cells=[solution_cell(source)]), NAME)
    assert learner.cells[0].source == (
        "class Net:\n"
        "    def __init__(self):\n"
        "        # YOUR CODE HERE\n"
        "        raise NotImplementedError()\n"
        "\n"
        "    def forward(self, x):\n"
        "\t\t# YOUR CODE HERE\n"
        "\t\traise NotImplementedError()\n"
    )


def test_hidden_tests_and_solution_only_cells_are_gone():
    learner = release_notebook(demo_notebook(), NAME)
    assert [cell.source.splitlines()[0] for cell in learner.cells] == [
        "# Adding tensors",
        "import math",
        "assert add(1, 2) == 3",
    ]
    assert learner.cells[2].source == "assert add(1, 2) == 3"
    assert all("print(add(1, 2))" not in cell.source for cell in learner.cells)


def test_release_notebook_leaves_its_input_alone():
    nb = demo_notebook()
    before = nbformat.writes(nb)
    release_notebook(nb, NAME)
    assert nbformat.writes(nb) == before


def test_outputs_cleared_except_where_nbval_checks_them():
    def ran(cell, text):
        cell.outputs = [new_output("stream", name="stdout", text=text)]
        cell.execution_count = 7
        return cell

    nb = new_notebook(
        cells=[
            ran(new_code_cell("print('plain')"), "plain\n"),
            ran(new_code_cell("\n# NBVAL_CHECK_OUTPUT: the shape\nprint(3)"), "3\n"),
            ran(new_code_cell("print(4)", metadata={"tags": ["nbval-check-output"]}), "4\n"),
            ran(new_code_cell("x = 5\n# NBVAL_CHECK_OUTPUT\nprint(x)"), "5\n"),
            ran(new_code_cell("print(6)  # NBVAL_CHECK_OUTPUT is mentioned, not a marker"), "6\n"),
        ]
    )
    cells = release_notebook(nb, NAME).cells
    assert (cells[0].outputs, cells[0].execution_count) == ([], None)
    for kept, text in ((cells[1], "3\n"), (cells[2], "4\n"), (cells[3], "5\n")):
        assert kept.execution_count == 7
        assert kept.outputs == [new_output("stream", name="stdout", text=text)]
    assert (cells[4].outputs, cells[4].execution_count) == ([], None)


def test_metadata_noise_dropped_and_the_rest_kept():
    nb = demo_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb.metadata["celltoolbar"] = "Create Assignment"
    cell = nb.cells[1]
    cell.metadata.update(
        collapsed=False,
        scrolled=True,
        execution={"iopub.execute_input": "2024-01-01T00:00:00Z"},
        tags=["exercise"],
    )
    learner = release_notebook(nb, NAME)
    assert "widgets" not in learner.metadata
    assert learner.metadata["celltoolbar"] == "Create Assignment"
    assert learner.metadata["kernelspec"]["name"] == "python3"
    kept = learner.cells[1].metadata
    assert set(kept) == {"nbgrader", "tags"}
    assert kept["nbgrader"] == solution_meta("add-impl")["nbgrader"]
    assert [c.id for c in learner.cells] == [c.id for c in nb.cells[:3]]


# --- errors ---------------------------------------------------------------------------


BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def fn(*body: str) -> str:
    """A function whose body is the given lines, indented."""
    return "def f(x):\n" + "\n".join("    " + line for line in body)


BAD_CELLS = {
    "unclosed BEGIN": (
        [solution_cell(fn(BEGIN, "return x"))],
        "never closed",
    ),
    "END without BEGIN": (
        [solution_cell(fn(BEGIN, "return x", END, END))],
        "no matching ### BEGIN SOLUTION",
    ),
    "END of the other kind": (
        [grade_cell("assert 1\n### BEGIN HIDDEN TESTS\nassert 2\n### END SOLUTION")],
        "no matching ### BEGIN SOLUTION",
    ),
    "solution nested in solution": (
        [solution_cell(fn(BEGIN, BEGIN, "return x", END, END))],
        "cannot be nested",
    ),
    "hidden tests nested in solution": (
        [solution_cell(fn(BEGIN, BEGIN_HIDDEN, END_HIDDEN, END))],
        "cannot be nested",
    ),
    "solution at indentation 0": (
        [solution_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION")],
        "Run All",
    ),
    "solution in a class body": (
        [solution_cell("class Net:\n    ### BEGIN SOLUTION\n    w = 1\n    ### END SOLUTION")],
        "not inside a function body",
    ),
    "marker in markdown": (
        [new_markdown_cell("Some text\n### BEGIN SOLUTION\nthe answer\n### END SOLUTION")],
        "markdown cell",
    ),
    "cell left without code": (
        [grade_cell("# hidden checks\n### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS")],
        "no code left",
    ),
    "solution region without nbgrader metadata": (
        [new_code_cell(fn(BEGIN, "return x", END))],
        "not an nbgrader solution cell",
    ),
    "hidden tests outside a grade cell": (
        [new_code_cell("assert 1\n### BEGIN HIDDEN TESTS\nassert 2\n### END HIDDEN TESTS")],
        "not an nbgrader grade cell",
    ),
    "solution cell without a region": (
        [solution_cell(fn("return x"))],
        "without a ### BEGIN SOLUTION region",
    ),
    "marker text that is not a marker line": (
        [solution_cell(fn("# BEGIN SOLUTION here", "return x"))],
        "not a marker line",
    ),
}


def bad_metadata(**changes):
    meta = grade_meta("add-tests")
    meta["nbgrader"].update(changes)
    meta["nbgrader"] = {k: v for k, v in meta["nbgrader"].items() if v is not None}
    return new_code_cell("assert True", metadata=meta)


BAD_METADATA = {
    "grade cell without points": (bad_metadata(points=None), "points"),
    "negative points": (bad_metadata(points=-1), "points"),
    "unlocked grade cell": (bad_metadata(locked=False), "locked: true"),
    "grade cell that is also a solution": (bad_metadata(solution=True), "solution: false"),
    "old schema": (bad_metadata(schema_version=2), "schema_version"),
    "grade_id with spaces": (bad_metadata(grade_id="add tests"), "grade_id"),
    "missing grade_id": (bad_metadata(grade_id=None), "grade_id is missing"),
}


@pytest.mark.parametrize(
    "cells, expected",
    list(BAD_CELLS.values()) + [([cell], text) for cell, text in BAD_METADATA.values()],
    ids=list(BAD_CELLS) + list(BAD_METADATA),
)
def test_malformed_sources_name_the_notebook_and_cell(cells, expected):
    nb = new_notebook(cells=[new_markdown_cell("# Intro"), *cells])
    with pytest.raises(AuthoringError) as raised:
        release_notebook(nb, NAME)
    message = str(raised.value)
    assert NAME in message
    assert "cell 1 " in message
    assert repr(cells[0].source.splitlines()[0].strip()) in message
    assert expected in message
    grade_id = cells[0].metadata.get("nbgrader", {}).get("grade_id")
    if grade_id and "grade_id" not in expected:
        assert repr(grade_id) in message


def test_duplicate_grade_ids_are_refused():
    nb = new_notebook(cells=[solution_cell(ADD_SOLUTION, "same"), grade_cell(ADD_TESTS, "same")])
    with pytest.raises(AuthoringError, match=r"cell 1 .*'same'.*already used by cell 0"):
        release_notebook(nb, NAME)


# --- the course folder ----------------------------------------------------------------


def test_release_writes_learner_notebooks_with_the_same_bytes_every_time(tmp_path):
    write_source(tmp_path, demo_notebook())
    (tmp_path / "solutions" / "data.csv").write_text("a,b\n")
    (tmp_path / "solutions" / "drafts").mkdir()
    write_source(tmp_path, demo_notebook(), "drafts/02_draft.ipynb")

    written = release(tmp_path)
    learner = tmp_path / "notebooks" / "01_demo.ipynb"
    assert written == [learner]
    first = learner.read_bytes()
    assert first.endswith(b"}\n")
    assert b"return a + b" not in first and b"# YOUR CODE HERE" in first
    assert sorted(p.name for p in (tmp_path / "notebooks").iterdir()) == ["01_demo.ipynb"]

    release(tmp_path)
    assert learner.read_bytes() == first
    assert not list((tmp_path / "notebooks").glob(".*"))  # no temp files left behind


def test_check_follows_the_sources(tmp_path):
    source = write_source(tmp_path, demo_notebook())
    (problem,) = check(tmp_path)
    assert "notebooks/01_demo.ipynb is missing" in problem

    release(tmp_path)
    assert check(tmp_path) == []

    nb = nbformat.read(source, as_version=4)
    nb.cells[0].source = "# Adding tensors, revised"
    nbformat.write(nb, source)
    (problem,) = check(tmp_path)
    assert "notebooks/01_demo.ipynb" in problem and "out of date" in problem

    release(tmp_path)
    orphan = tmp_path / "notebooks" / "99_old.ipynb"
    nbformat.write(new_notebook(), orphan)
    (tmp_path / "notebooks" / "README.md").write_text("not a notebook\n")
    (problem,) = check(tmp_path)
    assert "notebooks/99_old.ipynb" in problem and "orphan" in problem

    release(tmp_path)
    assert not orphan.exists()
    assert (tmp_path / "notebooks" / "README.md").read_text() == "not a notebook\n"
    assert check(tmp_path) == []


def test_bad_source_is_reported_and_blocks_the_whole_release(tmp_path):
    write_source(tmp_path, demo_notebook())
    bad = new_notebook(cells=[solution_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION")])
    write_source(tmp_path, bad, "02_bad.ipynb")
    (problem,) = [p for p in check(tmp_path) if "02_bad" in p]
    assert "solutions/02_bad.ipynb, cell 0" in problem
    with pytest.raises(AuthoringError, match="02_bad"):
        release(tmp_path)
    assert not (tmp_path / "notebooks" / "01_demo.ipynb").exists()


def test_sources_that_would_not_release_deterministically_are_refused(tmp_path):
    nb = json.loads(nbformat.writes(demo_notebook()))
    del nb["cells"][2]["id"]  # nbformat.write would fill it in with a random one
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "01_demo.ipynb").write_text(json.dumps(nb))
    (problem,) = check(tmp_path)
    assert "solutions/01_demo.ipynb, cell 2" in problem and "no id" in problem

    (tmp_path / "solutions" / "01_demo.ipynb").write_text("{not json")
    (problem,) = check(tmp_path)
    assert "solutions/01_demo.ipynb" in problem and "cannot be read" in problem


def test_a_wrong_root_does_not_wipe_notebooks(tmp_path):
    nbformat.write(new_notebook(), tmp_path / "notebooks.ipynb")
    (tmp_path / "notebooks").mkdir()
    nbformat.write(new_notebook(), tmp_path / "notebooks" / "01.ipynb")
    with pytest.raises(AuthoringError, match="no solutions/"):
        release(tmp_path)
    assert (tmp_path / "notebooks" / "01.ipynb").exists()


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "course_utils.authoring", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
    )


def test_cli_exit_codes(tmp_path, capsys):
    write_source(tmp_path, demo_notebook())
    stale = run_cli("check", "--root", str(tmp_path))
    assert stale.returncode == 1
    assert "notebooks/01_demo.ipynb" in stale.stderr
    assert "python -m course_utils.authoring release" in stale.stderr

    # In-process (each subprocess pays about a second for importing nbformat).
    assert main(["release", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == ["wrote notebooks/01_demo.ipynb"]

    fresh = run_cli("check", "--root", str(tmp_path))
    assert fresh.returncode == 0, fresh.stderr


def test_the_repository_is_in_sync():
    """notebooks/ in this repository is exactly what release makes of solutions/."""
    problems = check(REPO_ROOT)
    assert problems == [], (
        "\n".join(problems)
        + "\nRun `python -m course_utils.authoring release` and commit notebooks/."
    )
