"""The instructor's view of a class: a class of six graded in one run, and again in two shards
merged; the same gradebook, feedback pages, class report and Canvas file either way; a class
report that counts the named classic mistakes right; a regrade that says what changed and why,
of the whole class and of one learner, merged back into the class's results with --update."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess

import pytest

import grading_fixtures as gf
from grading_fixtures import TENSOR_EXERCISES, TENSORS
from test_grading_options import PYTHON, clean_env, finish, grade, gradebook, results, seed_cache, start_grader

# dan makes a classic mistake that the checks name, in three exercises.
NAMED = {
    "residuals": ("def residuals(pred, target):\n    return pred - target\n", "residuals.broadcast-every-pair"),
    "outer_sum": ("def outer_sum(a, b):\n    return a[None, :] + b[:, None]\n", "outer_sum.transposed"),
    "checked_mse": ("def checked_mse(pred, target):\n    return ((pred - target) ** 2).mean()\n",
                    "checked_mse.no-shape-check"),
}
CAROL_WRONG = ("match_reference", "independent_copy", "flatten_transposed")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading-class")
    course = base / "course"
    (course / "notebooks").mkdir(parents=True)
    shutil.copy2(gf.NOTEBOOKS / f"{TENSORS}.ipynb", course / "notebooks" / f"{TENSORS}.ipynb")
    submissions = base / "submissions"
    gf.write_submission(submissions, "alice", gf.submission())
    gf.write_submission(submissions, "bob", gf.course_notebook(TENSORS, "notebooks"))
    gf.write_submission(submissions, "carol", gf.submission(answers={n: gf.WRONG[n] for n in CAROL_WRONG}))
    gf.write_submission(submissions, "dan", gf.submission(answers={n: src for n, (src, _) in NAMED.items()}))
    gf.write_submission(submissions, "erin", gf.submission())
    gf.write_submission(submissions, "frank", gf.submission(answers={"remove_batch_dim": gf.WRONG["remove_batch_dim"]}))
    one_run = base / "one-run"
    run = grade(submissions, one_run, course, "--lms", "canvas")
    # The shards take their grades from the one run's cache: what is compared is how merge puts
    # shards together (test_grading_options grades shards afresh and compares with a full run).
    for k in (1, 2):
        seed_cache(base / f"shard-{k}", one_run)
    shards = {k: start_grader(submissions, base / f"shard-{k}", course, "--shard", f"{k}/2") for k in (1, 2)}
    shard_runs = {k: finish(started) for k, started in shards.items()}
    merged = base / "merged"
    merge = subprocess.run([PYTHON, "-m", "course_utils.grading", "merge", str(base / "shard-1"),
                            str(base / "shard-2"), "--out", str(merged), "--lms", "canvas"],
                           capture_output=True, text=True, env=clean_env(), cwd=gf.ROOT, timeout=120)
    # carol fixes one answer; the instructor regrades into a new folder
    gf.write_submission(submissions, "carol", gf.submission(answers={n: gf.WRONG[n] for n in CAROL_WRONG[1:]}))
    shutil.copytree(one_run / ".cache", base / "regraded" / ".cache")
    regrade = grade(submissions, base / "regraded", course, "--regrade", str(one_run))
    # then carol alone, as an instructor regrades one learner, and back into the class's results
    carol_only = base / "submissions-carol"
    shutil.copytree(submissions / "carol", carol_only / "carol")
    shutil.copytree(base / "regraded" / ".cache", base / "regraded-carol" / ".cache")
    regrade_carol = grade(carol_only, base / "regraded-carol", course, "--regrade", str(one_run))
    update = subprocess.run([PYTHON, "-m", "course_utils.grading", "merge", str(one_run), str(base / "regraded-carol"),
                             "--out", str(base / "final"), "--update"],
                            capture_output=True, text=True, env=clean_env(), cwd=gf.ROOT, timeout=120)
    return {"base": base, "run": run, "shard_runs": shard_runs, "merge": merge, "one_run": one_run,
            "merged": merged, "regrade": regrade, "regrade_carol": regrade_carol, "update": update}


def test_two_shards_merged_equal_one_run(graded):
    assert graded["run"].returncode == 0, graded["run"].log()
    for run in graded["shard_runs"].values():
        assert run.returncode == 0, run.log()
    assert graded["merge"].returncode == 0, graded["merge"].stderr
    one, merged = graded["one_run"], graded["merged"]
    for name in ("gradebook.csv", "class_report.json", "class_report.html", "canvas.csv"):
        assert (merged / name).read_bytes() == (one / name).read_bytes(), name
    assert results(merged) == results(one)
    pages = sorted(p.name for p in (one / "feedback").iterdir())
    assert sorted(p.name for p in (merged / "feedback").iterdir()) == pages
    for page in pages:  # a merged page is read back from JSON; one run's is written from memory
        assert (merged / "feedback" / page).read_bytes() == (one / "feedback" / page).read_bytes(), page
    assert set(results(one)) == {"alice", "bob", "carol", "dan", "erin", "frank"}


def test_the_gradebook_and_the_pages_follow_the_notebook_s_order(graded):
    with open(graded["merged"] / "gradebook.csv", newline="") as file:
        header, points = list(csv.reader(file))[:2]
    assert header == ["learner", *(f"{TENSORS}/{name}" for name in TENSOR_EXERCISES), "total"]
    assert points == ["Points Possible", *["1"] * len(TENSOR_EXERCISES), str(len(TENSOR_EXERCISES))]
    page = (graded["merged"] / "feedback" / "carol.html").read_text()
    places = [page.index(f"<td>{name}</td>") for name in TENSOR_EXERCISES]
    assert places == sorted(places), "the exercises in the notebook's order"


def test_the_class_report_counts_the_named_mistakes(graded):
    report = json.loads((graded["one_run"] / "class_report.json").read_text())
    assert report["learners"] == 6
    exercises = report["chapters"][TENSORS]
    for name, (_, mistake) in NAMED.items():
        named = {m["mistake"]: m for m in exercises[name]["mistakes"]}
        assert named[mistake]["learners"] == 1, (name, exercises[name]["mistakes"])
        assert named[mistake]["message"].startswith(("Your result", "For pred")), "the message a learner saw"
        assert exercises[name]["shares"] == {"passed": round(4 / 6, 4), "failed": round(1 / 6, 4), "raised": 0.0,
                                             "not attempted": round(1 / 6, 4), "not handed in or unreadable": 0.0,
                                             "no result: grading problem": 0.0}
    for name in TENSOR_EXERCISES:
        assert exercises[name]["shares"]["not attempted"] == round(1 / 6, 4), name  # bob
        counted = {m["mistake"]: m["learners"] for m in exercises[name]["mistakes"]}
        assert "not-attempted" not in counted and "missing" not in counted, (name, counted)
    assert report["per_chapter"][TENSORS]["learners"] == 6
    hardest = [item["exercise"] for item in report["hardest"]]
    assert set(hardest[:3]) <= set(CAROL_WRONG) | set(NAMED) | {"remove_batch_dim"}
    page = (graded["one_run"] / "class_report.html").read_text()
    assert page.count("<img") == 1 and "residuals.broadcast-every-pair" in page
    assert f"<h2>{TENSORS}: 6 learners</h2>" in page


def test_a_canvas_csv_has_the_columns_canvas_imports(graded):
    with open(graded["one_run"] / "canvas.csv", newline="") as file:
        rows = list(csv.reader(file))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"PyTorch course: {TENSORS}"]
    assert rows[1][0] == "Points Possible" and rows[1][-1] == str(len(TENSOR_EXERCISES))
    scores = {row[3]: int(row[-1]) for row in rows[2:]}
    book = gradebook(graded["one_run"])
    assert scores == {learner: int(row["total"]) for learner, row in book.items() if learner != "Points Possible"}
    assert scores["alice"] == len(TENSOR_EXERCISES) and scores["bob"] == 0


def test_a_regrade_says_who_changed_by_how_much_and_why_and_keeps_the_old_results(graded):
    run = graded["regrade"]
    assert run.returncode == 0, run.log()
    assert "Regrade: 1 learner changed (of 6 regraded) since" in run.stdout, run.log()
    assert f"carol: 4/7 → 5/7 ({TENSORS}/match_reference: 0/1 failed → 1/1 passed" in run.stdout, run.log()
    report = json.loads((graded["base"] / "regraded" / "regrade.json").read_text())
    moved = {item["learner"]: item for item in report["learners"] if item["changes"]}
    assert list(moved) == ["carol"]
    assert {item["status"] for item in report["learners"] if item["learner"] != "carol"} == {"unchanged"}
    carol = moved["carol"]
    assert carol["new_total"] == carol["old_total"] + 1
    [change] = carol["changes"]
    assert change["exercise"] == "match_reference" and change["old"]["outcome"] == "failed"
    assert change["new"]["outcome"] == "passed" and change["why"]
    old = results(graded["one_run"])["carol"]
    assert old["notebooks"][TENSORS]["exercises"]["match_reference"]["outcome"] == "failed", "kept as it was"
    for key in ("course_version", "grader_version", "limits"):
        assert key in old, f"every result records its {key}"


def test_a_regrade_of_one_learner_changes_one_and_goes_back_into_the_class_with_update(graded):
    run = graded["regrade_carol"]
    assert run.returncode == 0, run.log()
    assert "Regrade: 1 learner changed (of 1 regraded); 5 not regraded since" in run.stdout, run.log()
    page = (graded["base"] / "regraded-carol" / "regrade.html").read_text()
    assert "<td>alice</td><td>7/7</td><td>—</td><td>not regraded</td>" in page
    assert f"{TENSORS}/match_reference: 0/1 failed → 1/1 passed" in page and "None" not in page
    update = graded["update"]
    assert update.returncode == 0, update.stderr
    assert f"Replaced carol: 4/7 from {graded['one_run']} replaced by 5/7" in update.stdout, update.stdout
    final = results(graded["base"] / "final")
    assert set(final) == set(results(graded["one_run"])) and final["carol"]["total"] == 5
    assert gradebook(graded["base"] / "final")["carol"]["total"] == "5"
