"""./course update on a learner's clone: the new course arrives, and every answer survives.

A simulated new version of the course is committed upstream (changed prose, a changed check,
a new exercise); the learner has answers in my-work/ and, from before my-work/ existed, in a
tracked notebook too, which would make a plain `git pull` refuse.
"""

import json
import os
import subprocess

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell

from course_copies import copy_files, copy_venv, course, needs_set_up_course

GIT = ["git", "-c", "user.name=Course", "-c", "user.email=course@example.invalid",
       "-c", "init.defaultBranch=main", "-c", "advice.detachedHead=false"]


def git(folder, *args):
    return subprocess.run([*GIT, "-C", str(folder), *args], check=True, capture_output=True,
                          text=True).stdout


def first_answer(nb):
    return next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution"))


def type_answer(path, text):
    nb = nbformat.read(path, as_version=4)
    cell = first_answer(nb)
    cell.source = text
    nbformat.write(nb, path)
    return cell.metadata["nbgrader"]["grade_id"]


def new_course_version(upstream):
    """Changed prose and a changed check in 01, a new exercise in 01, changed prose in 02."""
    path = upstream / "notebooks" / "01_tensors.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += "\n\nNEW PROSE IN THIS VERSION."
    check = next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade"))
    check.source += "  # NEW CHECK"
    nb.cells += [
        new_markdown_cell("### ✎ A new exercise", id="new-exercise-md"),
        new_code_cell("def new_exercise():\n    # YOUR CODE HERE\n    raise NotImplementedError()",
                      id="new-exercise", metadata={"nbgrader": {
                          "solution": True, "grade": False, "locked": False,
                          "grade_id": "new_exercise", "schema_version": 3}}),
    ]
    nbformat.write(nb, path)
    path = upstream / "notebooks" / "02_autograd.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source += "\n\nNEW PROSE IN CHAPTER 02."
    nbformat.write(nb, path)
    git(upstream, "commit", "-qam", "A new version of the course")


@needs_set_up_course
def test_an_update_brings_the_new_version_and_keeps_every_answer(tmp_path):
    upstream = copy_files(tmp_path / "upstream")
    git(upstream, "init", "-q")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "The course")
    learner = tmp_path / "learner"
    subprocess.run([*GIT, "clone", "-q", str(upstream), str(learner)], check=True)
    copy_venv(learner)
    assert course(learner, "setup").returncode == 0
    python = str(learner / ".venv" / "bin" / "python")
    subprocess.run([python, "-m", "course_utils.workspace", "sync", "--root", str(learner)],
                   check=True, capture_output=True)  # what ./course lab does first

    work = learner / "my-work"
    answered_01 = type_answer(work / "01_tensors.ipynb", "# MY ANSWER IN MY-WORK")
    before_01 = (work / "01_tensors.ipynb").read_bytes()
    (work / "02_autograd.ipynb").unlink()  # chapter 02 was done the old way, in notebooks/
    answered_02 = type_answer(learner / "notebooks" / "02_autograd.ipynb", "# MY ANSWER IN NOTEBOOKS")
    new_course_version(upstream)

    # A JupyterLab serving the course, as its runtime file says (this test's own process, alive).
    runtime = tmp_path / "jupyter-runtime"
    runtime.mkdir()
    (runtime / f"jpserver-{os.getpid()}.json").write_text(json.dumps(
        {"pid": os.getpid(), "root_dir": str(learner), "url": "http://localhost:8888/"}))
    result = course(learner, "update", JUPYTER_RUNTIME_DIR=str(runtime))
    assert result.returncode == 0, result.stdout + result.stderr
    said = result.stdout + result.stderr
    assert "JupyterLab is running on this course: http://localhost:8888/" in said
    assert said.index("JupyterLab is running on this course") < said.index("Pulling the new version")
    assert "choose Revert, not Overwrite" in said and "Reminder: JupyterLab is still running" in said
    assert git(learner, "status", "--porcelain") == "", "notebooks/ is the course's again"
    assert "NEW PROSE" in (learner / "notebooks" / "01_tensors.ipynb").read_text()

    mine = nbformat.read(work / "01_tensors.ipynb", as_version=4)
    text = "\n".join(cell.source for cell in mine.cells)
    assert "NEW PROSE IN THIS VERSION." in text and "# NEW CHECK" in text
    assert any(c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "new_exercise"
               for c in mine.cells), "the new exercise appears"
    answer = next(c for c in mine.cells
                  if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == answered_01)
    assert answer.source == "# MY ANSWER IN MY-WORK"
    backups = list((work / "backups").glob("01_tensors.*.ipynb"))
    assert [b.read_bytes() for b in backups] == [before_01], "the old file is kept as it was"

    mine_02 = nbformat.read(work / "02_autograd.ipynb", as_version=4)
    assert "NEW PROSE IN CHAPTER 02." in mine_02.cells[0].source
    answer = next(c for c in mine_02.cells
                  if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == answered_02)
    assert answer.source == "# MY ANSWER IN NOTEBOOKS"

    again = course(learner, "update")
    assert again.returncode == 0, again.stdout + again.stderr
    assert nbformat.read(work / "01_tensors.ipynb", as_version=4) == mine, "nothing more changes"



def test_no_warning_without_a_live_server_on_this_course(tmp_path, monkeypatch):
    from course_utils import running_labs

    runtime = tmp_path / "runtime"
    runtime.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    here = tmp_path / "course"
    here.mkdir()
    assert running_labs.warning(here, "before") == ""
    dead = 2 ** 22 + 12345  # beyond any pid this machine hands out
    (runtime / "jpserver-1.json").write_text(json.dumps({"pid": dead, "root_dir": str(here)}))
    (runtime / "jpserver-2.json").write_text(json.dumps({"pid": os.getpid(), "root_dir": str(tmp_path / "other")}))
    (runtime / "jpserver-3.json").write_text("not json")
    assert running_labs.warning(here, "before") == ""
    (runtime / "jpserver-4.json").write_text(json.dumps({"pid": os.getpid(), "root_dir": str(tmp_path)}))
    assert "JupyterLab is running on this course" in running_labs.warning(here, "before")  # a parent folder
