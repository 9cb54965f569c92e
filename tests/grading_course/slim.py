"""Cut a chapter notebook down to what the grader's tests need, in place.

The grader runs the course's blank notebook with a learner's answers in it, lesson cells and
all. Its tests grade a few hundred notebooks per run, and what they test (the answers and
checks, the limits, the sandbox, the records) needs no lesson: the lesson cells only cost
time (chapter 02's benchmarks and graph; chapter 01's meta-device demo and progress cell load
torch's compiler, two seconds a notebook). Kept: every markdown cell, the first code cell (the
imports), every nbgrader cell (answers and checks), and the first two lesson cells whose output
is checked (``# NBVAL_CHECK_OUTPUT``), which ``test_grading_options``' refresh test edits.

    python tests/grading_course/slim.py tests/grading_course/*/*.ipynb
"""

from __future__ import annotations

import sys

import nbformat

CHECKED_OUTPUTS_KEPT = 2


def slim(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    kept, checked, first_code = [], 0, True
    for cell in nb.cells:
        if cell.cell_type != "code" or cell.metadata.get("nbgrader"):
            kept.append(cell)
        elif first_code:
            kept.append(cell)
        elif cell.source.lstrip().startswith("# NBVAL_CHECK_OUTPUT") and checked < CHECKED_OUTPUTS_KEPT:
            kept.append(cell)
            checked += 1
        if cell.cell_type == "code":
            first_code = False
    nb.cells = kept
    return nb


if __name__ == "__main__":
    for path in sys.argv[1:]:
        nb = nbformat.read(path, as_version=4)
        before = len(nb.cells)
        nbformat.write(slim(nb), path)
        print(f"{path}: {before} → {len(nb.cells)} cells")
