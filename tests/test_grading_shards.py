"""Results that lose learners without a word (issue 43), through the grader's command line.

A class of four, graded once as a whole, then as ``--shard 1/2`` and ``--shard 2/2`` (from the
whole run's cache, as test_grading_class does: what is tested here is what the shards record and
what merge makes of it):

* alice: 01_tensors, every answer right;
* bob: 01_tensors, every answer wrong;
* carol: 02_autograd, every answer right;
* dave: both chapters, every answer right.

Under sha256, ``--shard 1/2`` is alice and dave, ``--shard 2/2`` bob and carol.

What must hold: every learner is out of the same maximum (the assignment: both chapters, 11
points), on the console, in the gradebook and on the feedback pages; merge refuses a set of
shards with one missing and says which, and ``--partial`` merges it saying so; a shard graded
into a folder that holds another run's shard is refused; and the console shows the grader's own
lines only: no ``ResourceWarning: Unclosed socket`` from the kernels' clients, even with every
warning switched on.
"""

from __future__ import annotations

import json
import subprocess

import pytest

import grading_fixtures as gf
from grading_fixtures import TENSORS
from test_grading_options import PYTHON, Run, clean_env, gradebook, results, sandbox_args, seed_cache
from slow_machine import scaled

AUTOGRAD = "02_autograd"
LEARNERS = ("alice", "bob", "carol", "dave")
SHARDS = {1: {"alice", "dave"}, 2: {"bob", "carol"}}  # --shard K/2 under sha256
OUT_OF = 7 + 4  # 01_tensors's seven exercises and 02_autograd's four
TOTALS = {"alice": 7, "bob": 0, "carol": 4, "dave": 11}


def grader(*args: str, warnings: bool = False, timeout: float = 600) -> Run:
    """``python -m course_utils.grading ARGS``; ``warnings``: with every warning shown, as
    ``PYTHONWARNINGS=always`` and ``-W always::ResourceWarning`` show them."""
    env = clean_env()
    command = [PYTHON, *(["-W", "always::ResourceWarning"] if warnings else []), "-m", "course_utils.grading", *args]
    if warnings:
        env["PYTHONWARNINGS"] = "always"
    run = subprocess.run(command, cwd=gf.ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return Run(command, run.returncode, run.stdout, run.stderr)


def grade(submissions, out, *extra: str, warnings: bool = False) -> Run:
    return grader(str(submissions), "--out", str(out), "--course", str(gf.GRADING_COURSE), "--workers", "1",
                  "--cell-timeout", f"{scaled(60):g}", "--notebook-timeout", f"{scaled(300):g}",
                  *sandbox_args(), *extra, warnings=warnings, timeout=scaled(900))


def merge(*args: str) -> Run:
    return grader("merge", *args, timeout=120)


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading-shards")
    submissions = base / "submissions"
    gf.write_submission(submissions, "alice", gf.submission())
    gf.write_submission(submissions, "bob", gf.submission(answers=gf.all_wrong()))
    gf.write_submission(submissions, "carol", gf.submission(AUTOGRAD), chapter=AUTOGRAD)
    gf.write_submission(submissions, "dave", gf.submission())
    gf.write_submission(submissions, "dave", gf.submission(AUTOGRAD), chapter=AUTOGRAD)
    whole = grade(submissions, base / "all", warnings=True)
    shards = {}
    for k in SHARDS:
        seed_cache(base / f"shard-{k}", base / "all")
        shards[k] = grade(submissions, base / f"shard-{k}", "--shard", f"{k}/2")
    return {"base": base, "submissions": submissions, "whole": whole, "shards": shards}


def test_the_console_shows_the_grader_s_own_lines_only_every_warning_on(klass):
    run = klass["whole"]
    assert run.returncode == 0, run.log()
    assert "ResourceWarning" not in run.stderr, run.log()
    assert "Unclosed" not in run.stderr and "Unclosed" not in run.stdout, run.log()


def test_every_learner_is_out_of_one_maximum_everywhere(klass):
    run, out = klass["whole"], klass["base"] / "all"
    assert run.returncode == 0, run.log()
    assert run.lines() == {learner: f"{TOTALS[learner]}/{OUT_OF}" for learner in LEARNERS}, run.log()
    with open(out / "gradebook.csv", encoding="utf-8") as file:
        points = file.read().splitlines()[1].split(",")
    assert points[0] == "Points Possible" and points[-1] == str(OUT_OF), points
    for learner, result in results(out).items():
        assert (result["total"], result["out_of"]) == (TOTALS[learner], OUT_OF), result
        assert result["assignment"] == {TENSORS: 7, AUTOGRAD: 4}, result["assignment"]
        page = (out / "feedback" / f"{learner}.html").read_text(encoding="utf-8")
        assert f"<h1>{learner}: {TOTALS[learner]} / {OUT_OF}</h1>" in page, page[:600]
    alice = (out / "feedback" / "alice.html").read_text(encoding="utf-8")
    assert f"<h2>{AUTOGRAD}: 0 / 4</h2>" in alice and "no notebook of this chapter was handed in" in alice
    for k, shard in klass["shards"].items():  # each shard grades out of the whole class's assignment
        assert shard.returncode == 0, shard.log()
        assert shard.lines() == {learner: f"{TOTALS[learner]}/{OUT_OF} (cached)" for learner in SHARDS[k]}, shard.log()


def test_a_shard_records_which_k_of_n_it_is_and_whom_it_graded(klass):
    for k, learners in SHARDS.items():
        out = klass["base"] / f"shard-{k}"
        record = json.loads((out / "shard.txt").read_text(encoding="utf-8"))
        assert record["shard"] == [k, 2] and record["learners"] == sorted(learners), record
        assert record["class"] == list(LEARNERS) and record["finished"] is True, record
        assert set(gradebook(out)) == learners and set(results(out)) == learners


def test_merge_with_a_shard_missing_is_refused_and_names_it(klass):
    base = klass["base"]
    run = merge(str(base / "shard-1"), "--out", str(base / "merged-1"))
    assert run.returncode == 1, run.log()
    assert "incomplete: shard 2 of 2 missing: 2 learners of the class (bob and carol)" in run.stderr, run.log()
    assert "--partial" in run.stderr and "Merged" not in run.stdout, run.log()
    assert not (base / "merged-1" / "gradebook.csv").exists()


def test_merge_partial_says_so_in_its_output_and_the_class_report(klass):
    base = klass["base"]
    run = merge(str(base / "shard-1"), "--out", str(base / "partial"), "--partial")
    assert run.returncode == 0, run.log()
    assert "PARTIAL: shard 2 of 2 missing: 2 learners of the class (bob and carol)" in run.stdout, run.log()
    assert "Merged 1 folder (shard 1 of 2): 2 learners (partial)" in run.stdout, run.log()
    report = json.loads((base / "partial" / "class_report.json").read_text(encoding="utf-8"))
    assert "shard 2 of 2 missing" in report["incomplete"], report.get("incomplete")
    assert "Incomplete: not the whole class." in (base / "partial" / "class_report.html").read_text(encoding="utf-8")


def test_the_complete_set_merges_into_what_one_run_gives(klass):
    base = klass["base"]
    run = merge(str(base / "shard-2"), str(base / "shard-1"), "--out", str(base / "merged"))
    assert run.returncode == 0, run.log()
    assert "Merged 2 folders (shards 1 and 2 of 2): 4 learners;" in run.stdout, run.log()
    assert results(base / "merged") == results(base / "all")
    for name in ("gradebook.csv", "class_report.json"):
        assert (base / "merged" / name).read_bytes() == (base / "all" / name).read_bytes(), name


def test_a_shard_of_another_n_into_a_folder_holding_shards_is_refused(klass):
    """Grading shard 2 of 3 where shard 2 of 2 was graded would have given a gradebook of the
    old shard's learners too."""
    base = klass["base"]
    out = base / "shard-2"
    before = gf.tree_digest(out)
    run = grade(klass["submissions"], out, "--shard", "2/3")
    assert run.returncode == 2, run.log()
    assert f"{out} holds the results of --shard 2/2" in run.stderr, run.log()
    assert "this run is --shard 2/3" in run.stderr, run.log()
    assert "give this run a folder of its own" in run.stderr, run.log()
    assert "Grading" not in run.stdout, run.log()
    assert gf.tree_digest(out) == before, "nothing written"
