"""What the grader runs: the course's learner notebook with only the learner's answers in it.

Every cell but the answer cells comes from the course, so edited or deleted check cells, pasted
outputs and rewritten metadata in a submission change nothing. A first cell, before all of the
learner's code, sets the kernel up (``kernel_probe.setup``). Each check cell becomes a probe
cell that records the exercise's plain data under a name of its own: random, different for
every cell, known to the set-up cell only by its hash, so no code of the learner's can open a
check in its place or guess a later one.
"""

from __future__ import annotations

import copy
import re
import secrets
from dataclasses import dataclass, field

import nbformat

from course_utils.exercises import CHAPTERS
from course_utils.grading.submissions import answer_sources

CHECK_CALL = re.compile(r"^\s*ex\.(\w+)\.check\((\w+)\)\s*$")


@dataclass
class Probe:
    """One graded exercise: which check cell, which exercise, where its record will be."""

    grade_id: str
    exercise: str
    variable: str
    answer_id: str
    record_name: str
    check_source: str = ""  # the course's check cell it replaces: what a message names it by


@dataclass
class Assembly:
    notebook: nbformat.NotebookNode
    probes: list[Probe]
    missing: set[str] = field(default_factory=set)  # answer grade_ids the submission lacks
    cell_of_probe: dict[int, Probe] = field(default_factory=dict)
    answer_cells: dict[int, str] = field(default_factory=dict)  # cell index → answer grade_id


def course_answer_ids(course_nb) -> set[str]:
    return {
        cell.metadata["nbgrader"]["grade_id"]
        for cell in course_nb.cells
        if cell.metadata.get("nbgrader", {}).get("solution")
    }


def setup_source(probes: list[Probe], alias: str, module: str) -> str:
    from course_utils.grading.kernel_guard import record_name_hash

    hashes = [record_name_hash(probe.record_name) for probe in probes]
    return f"import course_utils.grading.kernel_probe as {alias}\n{alias}.setup({hashes!r}, ({module!r},))"


def probe_source(module: str, probe: Probe, alias: str, exam: bool = False) -> str:
    # An import statement, not a name lookup: an answer cell cannot rebind what it finds.
    public = ", public=True" if exam else ""
    return (
        f"import course_utils.grading.kernel_probe as {alias}\n"
        f"{alias}.record({module!r}, {probe.exercise!r}, {probe.variable!r}, {probe.record_name!r}{public})"
    )


def assemble(chapter: str, course_nb, answers: dict[str, str], exam: bool = False) -> Assembly:
    """The notebook to run for ``chapter``, given the learner's answer sources by grade_id.

    ``exam``: each probe cell also records the answer on the exercise's public cases, which an
    exam release checks in the learner's notebook (the practice probe is then the hidden part).
    """
    module = CHAPTERS[chapter]
    nb = copy.deepcopy(course_nb)
    token = secrets.token_hex(16)
    probes, missing = [], set()
    result = Assembly(nb, probes)
    for index, cell in enumerate(nb.cells):
        cell.outputs = [] if cell.cell_type == "code" else cell.get("outputs", [])
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            grade_id = meta["grade_id"]
            result.answer_cells[index] = grade_id
            if grade_id in answers:
                cell.source = answers[grade_id]
            else:
                missing.add(grade_id)
        elif meta.get("grade") and cell.cell_type == "code":
            match = CHECK_CALL.match(cell.source)
            if match is None:
                raise ValueError(f"{chapter}: check cell {meta['grade_id']} is not `ex.NAME.check(NAME)`")
            exercise, variable = match.groups()
            probe = Probe(meta["grade_id"], exercise, variable, variable, secrets.token_hex(16), cell.source)
            probes.append(probe)
            result.cell_of_probe[index] = probe
            cell.source = probe_source(module, probe, f"_probe_{token[:12]}", exam)
    # First of all, before any of the learner's code: the probe's copies are taken then.
    setup = nbformat.v4.new_code_cell(setup_source(probes, f"_grader_{token[:12]}", module))
    setup.id = f"grader-setup-{token[:8]}"
    nb.cells.insert(0, setup)
    result.cell_of_probe = {index + 1: probe for index, probe in result.cell_of_probe.items()}
    result.answer_cells = {index + 1: grade_id for index, grade_id in result.answer_cells.items()}
    result.missing = missing
    return result


def chapter_of(path, nb, courses: dict) -> str | None:
    """The chapter whose answer cells the notebook holds; its file name only breaks a tie (a
    notebook of chapter 02 saved as 01_tensors.ipynb is chapter 02's)."""
    ids = set(answer_sources(nb)[0])
    overlap = {chapter: len(ids & course_answer_ids(course_nb)) for chapter, course_nb in courses.items()}
    best = max(overlap, key=lambda chapter: (overlap[chapter], chapter == path.stem), default=None)
    if best is not None and overlap[best] > 0:
        return best
    return path.stem if path.stem in courses else None
