"""The grader's parts: reading submissions, assembling what runs, judging records, limits."""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.exercises import tensors
from course_utils.grading import scoring
from course_utils.grading.assemble import assemble
from course_utils.grading.execute import Execution
from course_utils.grading.submissions import Unreadable, answer_sources, discover, read_submission

ROOT = Path(__file__).resolve().parents[1]
COURSE_01 = nbformat.read(ROOT / "notebooks" / "01_tensors.ipynb", as_version=4)


def test_learners_are_folders_or_files(tmp_path):
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "01_tensors.ipynb").write_text("{}")
    (tmp_path / "bob.ipynb").write_text("{}")
    (tmp_path / "notes.txt").write_text("not a notebook")
    learners = discover(tmp_path)
    assert [(l.id, [f.name for f in l.files]) for l in learners] == [
        ("alice", ["01_tensors.ipynb"]), ("bob", ["bob.ipynb"])]


def test_unreadable_files_say_why(tmp_path):
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [')
    with pytest.raises(Unreadable, match="not JSON"):
        read_submission(broken)


def test_nbformat_3_is_converted(tmp_path):
    cell = nbformat.v3.new_code_cell(input="def outer_sum(a, b):\n    return a[:, None] + b")
    cell.metadata = {"nbgrader": {"grade_id": "outer_sum", "solution": True}}
    old = nbformat.v3.new_notebook(worksheets=[nbformat.v3.new_worksheet(cells=[cell])])
    path = tmp_path / "old.ipynb"
    path.write_text(nbformat.writes(old, version=3))
    answers, duplicated = answer_sources(read_submission(path))
    assert answers == {"outer_sum": "def outer_sum(a, b):\n    return a[:, None] + b"} and duplicated == []


def test_only_answer_cells_are_taken_and_checks_become_probes():
    answers = {"outer_sum": "def outer_sum(a, b):\n    return 'mine'", "check_outer_sum": "print('hacked')"}
    assembly = assemble("01_tensors", COURSE_01, answers)
    sources = [cell.source for cell in assembly.notebook.cells]
    assert "def outer_sum(a, b):\n    return 'mine'" in sources
    assert "print('hacked')" not in sources
    assert not any(".check(" in s for s in sources)
    assert len(assembly.probes) == 7 and "match_reference" in assembly.missing
    assert assembly.notebook.cells[0].source == "import course_utils.grading.kernel_probe"
    tokens = {probe.record_name.split("-")[0] for probe in assembly.probes}
    assert len(tokens) == 1 and len(tokens.pop()) == 32  # unguessable, one per run


def _record(answer):
    return {"probe": tensors.outer_sum.probe(answer).to_plain(), "code": None}


def test_a_record_with_rewritten_expectations_is_refused():
    def wrong(a, b):
        return a + 0 * b[:1]

    record = _record(wrong)

    def rewrite(part):  # what a patched probe inside the kernel could write
        if isinstance(part, dict):
            if "expected" in part and "got" in part:
                part["expected"] = part["got"]
            for value in part.values():
                rewrite(value)
        elif isinstance(part, list):
            for value in part:
                rewrite(value)

    rewrite(record["probe"]["data"])
    assembly = assemble("01_tensors", COURSE_01, {"outer_sum": "x"})
    probe = next(p for p in assembly.probes if p.exercise == "outer_sum")
    execution = Execution(records={probe.grade_id: record})
    score = next(s for s in scoring.score_notebook("tensors", assembly, execution) if s.exercise == "outer_sum")
    assert score.score == 0 and "expected values were changed" in score.reason


def test_an_honest_record_is_judged_as_in_the_notebook():
    assembly = assemble("01_tensors", COURSE_01, {"outer_sum": "x", "residuals": "x"})
    records = {p.grade_id: _record(tensors.outer_sum.reference) for p in assembly.probes if p.exercise == "outer_sum"}
    scores = {s.exercise: s for s in scoring.score_notebook("tensors", assembly, Execution(records=records))}
    assert scores["outer_sum"].score == 1
    assert scores["residuals"].outcome == "no result"
    assert scores["match_reference"].outcome == "missing"


def test_a_stopped_run_scores_the_rest_zero_with_the_reason():
    assembly = assemble("01_tensors", COURSE_01, {p: "x" for p in ("match_reference", "outer_sum")})
    execution = Execution(stopped="kernel died (it exited, or ran out of memory)")
    scores = scoring.score_notebook("tensors", assembly, execution)
    died = [s for s in scores if s.outcome == "kernel died"]
    assert died and all(s.score == 0 for s in scores)


def test_the_launcher_sets_limits_and_keeps_only_the_given_environment():
    code = ("import os, resource; print(resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20, "
            "resource.getrlimit(resource.RLIMIT_FSIZE)[0] // 2**20, sorted(os.environ))")
    out = subprocess.run(
        [sys.executable, "-m", "course_utils.grading.limits", "--memory-mb", "2048", "--max-file-mb", "8",
         "--env", "HOME=/nowhere", "--env", "PATH=/usr/bin:/bin", "--", sys.executable, "-c", code],
        capture_output=True, text=True, check=True, env={"SECRET": "x", "PATH": "/usr/bin:/bin"},
    ).stdout.split(" ", 2)
    assert out[0] == "2048" and out[1] == "8"
    assert "SECRET" not in out[2] and "HOME" in out[2]


def test_the_checked_function_must_be_written_in_its_answer_cell():
    from course_utils.grading.kernel_probe import code_fingerprint

    def outer_sum(a, b):
        return a[:, None] + b[None, :]

    mine = "def outer_sum(a, b):\n    return a[:, None] + b[None, :]\n"
    assert scoring.defined_in(code_fingerprint(outer_sum.__code__), mine)
    lam = "outer_sum = lambda a, b: a[:, None] + b[None, :]"
    assert scoring.defined_in(code_fingerprint(eval(lam.split("=", 1)[1]).__code__), lam)
    borrowed = "outer_sum = ex.outer_sum.reference"
    assert not scoring.defined_in(code_fingerprint(tensors.outer_sum.reference.__code__), borrowed)


def test_the_sandbox_keeps_tmp_only_when_the_course_lives_there(tmp_path, monkeypatch):
    import tempfile

    from course_utils.grading import sandbox

    folder = sandbox.RunFolder(tmp_path / "run")
    tmp = str(Path(tempfile.gettempdir()).resolve())
    monkeypatch.setattr(sandbox, "_needed_inside", lambda: [Path("/usr"), ROOT])
    args = sandbox.bubblewrap_prefix(folder, [tmp_path / "hidden-does-not-exist"])
    in_tmp = Path(ROOT).resolve().is_relative_to(tmp)
    assert (["--tmpfs", tmp] == args[8:10]) is (not in_tmp)
    monkeypatch.setattr(sandbox, "_needed_inside", lambda: [Path(tmp) / "a-clone"])
    args = sandbox.bubblewrap_prefix(folder, [])
    assert ["--tmpfs", tmp] != args[8:10]
    assert args[args.index("--bind") + 1] == str(folder.root) and "--unshare-all" in args
