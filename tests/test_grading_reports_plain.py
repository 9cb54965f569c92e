"""The grader's reports made from plain result dicts (the format of ``batch.grade_learner``):
gradebook, Canvas file, feedback pages, class report, regrade, merge and ``--help``.

Nothing here grades a notebook: each test builds the results it needs, so each runs in well
under a second (tests/test_grading_class.py runs the real grader on a small class).
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from course_utils.grading import class_report, merge, regrade, reports
from course_utils.grading.__main__ import grade_main
from course_utils.grading.batch import exercise_columns
from course_utils.grading.sandbox import Limits

TENSORS, AUTOGRAD = "01_tensors", "02_autograd"
# 01_tensors's exercises in notebook order, which is not alphabetical order.
IN_NOTEBOOK_ORDER = ["match_reference", "independent_copy", "flatten_transposed", "outer_sum", "residuals"]
AUTOGRAD_EXERCISES = ["new_parameter", "fresh_gradient"]
NOT_A_NOTEBOOK = "alice.ipynb is not a valid notebook file (not JSON: Expecting value)"


# --------------------------------------------------------------------------------------------
# Results as batch.grade_learner makes them
# --------------------------------------------------------------------------------------------
def entry(outcome: str = "passed", reason: str = "", mistake: str | None = None) -> dict:
    passed = outcome == "passed"
    return {"score": int(passed), "max": 1, "outcome": outcome, "reason": reason or ("" if passed else outcome),
            "mistake": None if passed else (mistake or outcome.replace(" ", "-"))}


def exam_entry(public: dict, hidden: dict) -> dict:
    return {"score": public["score"] + hidden["score"], "max": 2, "outcome": hidden["outcome"],
            "reason": hidden["reason"], "public": public, "hidden": hidden}


def notebook(entries: dict, problems: tuple = ()) -> dict:
    return {"exercises": dict(entries), "score": sum(e["score"] for e in entries.values()),
            "max": sum(e["max"] for e in entries.values()), "problems": list(problems)}


def stand_in(names: list[str], why: str) -> dict:
    """The notebook the grader writes for a chapter with nothing gradable (batch._nothing_graded)."""
    return notebook({name: entry("missing", why) for name in names}, (why,))


def result(learner: str, notebooks: dict, problems: tuple = (), **extra) -> dict:
    record = {"learner": learner, "sandbox": "bubblewrap", "grader_version": "1", "course_version": "c0ffee",
              "limits": {"cell_timeout_s": 60, "memory_mb": 3072}, "notebooks": notebooks,
              "problems": list(problems), "exam": False, "reveal_hidden": False,
              "total": sum(n["score"] for n in notebooks.values()), "max": sum(n["max"] for n in notebooks.values())}
    record.update(extra)
    return record


def tensors(**outcomes) -> dict:
    """01_tensors in notebook order, every exercise passed unless ``outcomes`` says otherwise."""
    return notebook({name: outcomes.get(name, entry()) for name in IN_NOTEBOOK_ORDER})


def autograd(**outcomes) -> dict:
    return notebook({name: outcomes.get(name, entry()) for name in AUTOGRAD_EXERCISES})


def results_folder(folder: Path, results: list[dict]) -> Path:
    """A results folder as a grading run leaves it (what ``merge`` reads)."""
    for record in results:
        reports.write_learner(folder, record)
    everything = reports.read_results(folder)
    reports.write_gradebook(folder, everything, exercise_columns(everything))
    return folder


def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.reader(file))


# --------------------------------------------------------------------------------------------
# 2. The order of exercises, and the gradebook
# --------------------------------------------------------------------------------------------
def test_results_read_back_keep_the_notebook_order(tmp_path):
    reports.write_learner(tmp_path, result("alice", {TENSORS: tensors()}))
    [read] = reports.read_results(tmp_path)
    assert list(read["notebooks"][TENSORS]["exercises"]) == IN_NOTEBOOK_ORDER


def test_results_written_before_the_order_was_recorded_come_back_in_course_order(tmp_path):
    """A result JSON of an earlier grader: sorted keys, no "order"."""
    old = result("alice", {TENSORS: tensors()})
    (tmp_path / "alice.json").write_text(json.dumps(old, indent=1, sort_keys=True))
    [read] = reports.read_results(tmp_path)
    assert list(read["notebooks"][TENSORS]["exercises"]) == IN_NOTEBOOK_ORDER
    assert read["notebooks"][TENSORS]["exercises"] == old["notebooks"][TENSORS]["exercises"]


def test_gradebook_columns_are_in_notebook_order_when_made_from_results_read_back(tmp_path):
    results_folder(tmp_path, [result("alice", {TENSORS: tensors()})])
    header = read_csv(tmp_path / "gradebook.csv")[0]
    assert header == ["learner", *(f"{TENSORS}/{name}" for name in IN_NOTEBOOK_ORDER), "total"]


def test_gradebook_second_row_gives_the_points_possible(tmp_path):
    results_folder(tmp_path, [result("alice", {TENSORS: tensors()}), result("bob", {AUTOGRAD: autograd()})])
    rows = read_csv(tmp_path / "gradebook.csv")
    assert rows[1] == ["Points Possible", *["1"] * (len(IN_NOTEBOOK_ORDER) + len(AUTOGRAD_EXERCISES)),
                       str(len(IN_NOTEBOOK_ORDER) + len(AUTOGRAD_EXERCISES))]
    assert [row[0] for row in rows[2:]] == ["alice", "bob"]


def test_gradebook_leaves_a_chapter_not_handed_in_blank_and_the_total_a_number(tmp_path):
    results_folder(tmp_path, [
        result("alice", {TENSORS: tensors(outer_sum=entry("failed"))}),  # no 02_autograd
        result("bob", {AUTOGRAD: autograd()}),  # no 01_tensors
        result("carol", {TENSORS: stand_in(IN_NOTEBOOK_ORDER, "no notebook submitted")}, ("no notebook submitted",)),
        result("dan", {TENSORS: stand_in(IN_NOTEBOOK_ORDER, NOT_A_NOTEBOOK)}, (NOT_A_NOTEBOOK,)),
    ])
    book = {row["learner"]: row for row in csv.DictReader(open(tmp_path / "gradebook.csv", newline=""))}
    assert book["alice"][f"{TENSORS}/outer_sum"] == "0", "handed in and failed: a 0"
    assert book["alice"][f"{AUTOGRAD}/new_parameter"] == "", "not handed in: blank"
    assert book["alice"]["total"] == str(len(IN_NOTEBOOK_ORDER) - 1)
    assert book["bob"][f"{TENSORS}/match_reference"] == "" and book["bob"]["total"] == "2"
    for learner in ("carol", "dan"):
        assert all(book[learner][f"{TENSORS}/{name}"] == "" for name in IN_NOTEBOOK_ORDER), learner
        assert book[learner]["total"] == "0"


def test_an_exam_gradebook_counts_public_and_hidden_columns_in_the_points_possible(tmp_path):
    exam = notebook({name: exam_entry(entry(), entry("failed")) for name in IN_NOTEBOOK_ORDER})
    results_folder(tmp_path, [result("alice", {TENSORS: exam}, exam=True)])
    header, points, alice = read_csv(tmp_path / "gradebook.csv")
    assert header[1:3] == [f"{TENSORS}/match_reference public", f"{TENSORS}/match_reference hidden"]
    assert points[-1] == str(2 * len(IN_NOTEBOOK_ORDER)) and alice[1:3] == ["1", "0"]


# --------------------------------------------------------------------------------------------
# 3. Feedback pages
# --------------------------------------------------------------------------------------------
def test_a_merged_feedback_page_is_the_single_run_page_byte_for_byte(tmp_path):
    learners = [result("alice", {TENSORS: tensors(residuals=entry("failed", "Your result has shape (3,)"))}),
                result("bob", {TENSORS: tensors(), AUTOGRAD: autograd()})]
    single = results_folder(tmp_path / "one-run", learners)
    shards = [results_folder(tmp_path / f"shard-{k}", [record]) for k, record in enumerate(learners)]
    merge.merge(shards, tmp_path / "merged")
    for learner in ("alice", "bob"):
        page = (single / "feedback" / f"{learner}.html").read_bytes()
        assert (tmp_path / "merged" / "feedback" / f"{learner}.html").read_bytes() == page, learner
    page = (single / "feedback" / "alice.html").read_text()
    assert [page.index(f"<td>{name}</td>") for name in IN_NOTEBOOK_ORDER] == sorted(
        page.index(f"<td>{name}</td>") for name in IN_NOTEBOOK_ORDER), "notebook order"


# --------------------------------------------------------------------------------------------
# 1. canvas.csv
# --------------------------------------------------------------------------------------------
ROSTER_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Tensors (48213)",
                 "PyTorch course: 02_autograd (48999)", "Current Score"]


def write_roster(path: Path) -> Path:
    """A gradebook as Canvas exports it: a byte-order mark, a Points Possible row (indented, as
    Canvas writes it), a Manual Posting row, then the students and a test student."""
    rows = [ROSTER_HEADER,
            ["    Points Possible", "", "", "", "", "5", "2", "(read only)"],
            ["", "", "", "", "", "Manual Posting", "", ""],
            ["Anders, Alice", "1001", "S-1", "alice", "Section A", "4.00", "2.00", "90"],
            ["Brown, Bob", "1002", "S-2", "bob", "Section B", "", "1.00", "50"],
            ["Chen, Carol", "1003", "S-3", "carol@uni.example", "Section A", "3.00", "", "60"],
            ["Student, Test", "1099", "", "test-student", "Section A", "", "", ""]]
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    path.write_text("\ufeff" + buffer.getvalue(), encoding="utf-8")
    return path


def canvas_class(tmp_path: Path, learners: list[dict], *options: str, capsys=None) -> tuple[int, list[list[str]], str]:
    """``merge`` with ``--lms canvas`` and ``options``: exit status, canvas.csv's rows, output."""
    shard = results_folder(tmp_path / "results", learners)
    status = merge.main([str(shard), "--out", str(tmp_path / "merged"), "--lms", "canvas", *options])
    out = capsys.readouterr() if capsys else None
    canvas = tmp_path / "merged" / "canvas.csv"
    return status, (read_csv(canvas) if canvas.exists() else []), (out.out + out.err if out else "")


def test_canvas_has_the_columns_canvas_s_importer_reads(tmp_path):
    """gradebook_importer.rb: "Student" then "ID" first; "SIS User ID", "SIS Login ID", then
    "Section" as the last of the learner's columns; a second row starting "Points Possible"."""
    _, rows, _ = canvas_class(tmp_path, [result("alice", {TENSORS: tensors()})])
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"PyTorch course: {TENSORS}"]
    assert rows[1] == ["Points Possible", "", "", "", "", str(len(IN_NOTEBOOK_ORDER))]
    assert rows[2] == ["alice", "", "", "alice", "", str(len(IN_NOTEBOOK_ORDER))]


def test_canvas_leaves_a_chapter_not_handed_in_blank(tmp_path):
    _, rows, _ = canvas_class(tmp_path, [
        result("alice", {TENSORS: tensors(outer_sum=entry("failed"))}),
        result("bob", {AUTOGRAD: autograd()}),
        result("carol", {TENSORS: stand_in(IN_NOTEBOOK_ORDER, "no notebook submitted")}, ("no notebook submitted",)),
    ])
    assert rows[0][5:] == [f"PyTorch course: {TENSORS}", f"PyTorch course: {AUTOGRAD}"]
    scores = {row[3]: row[5:] for row in rows[2:]}
    assert scores == {"alice": [str(len(IN_NOTEBOOK_ORDER) - 1), ""], "bob": ["", "2"], "carol": ["", ""]}


def test_canvas_assignment_names_a_chapter_s_column_as_the_canvas_header(tmp_path, capsys):
    status, rows, _ = canvas_class(tmp_path, [result("alice", {TENSORS: tensors(), AUTOGRAD: autograd()})],
                                   "--canvas-assignment", f"{TENSORS}=Tensors (48213)", capsys=capsys)
    assert status == 0
    assert rows[0][5:] == ["Tensors (48213)", f"PyTorch course: {AUTOGRAD}"], "the default where not given"


@pytest.mark.parametrize("value, said", [("99_nothing=Tensors (1)", "not a chapter"), ("01_tensors", "CHAPTER=")])
def test_canvas_assignment_says_what_is_wrong_with_its_value(tmp_path, capsys, value, said):
    shard = results_folder(tmp_path / "results", [result("alice", {TENSORS: tensors()})])
    with pytest.raises(SystemExit):
        merge.main([str(shard), "--out", str(tmp_path / "merged"), "--lms", "canvas", "--canvas-assignment", value])
    assert said in capsys.readouterr().err


def test_a_canvas_roster_gives_each_learner_their_canvas_ids_and_names_who_it_lacks(tmp_path, capsys):
    roster = write_roster(tmp_path / "export.csv")
    status, rows, output = canvas_class(tmp_path, [
        result("alice", {TENSORS: tensors()}),
        result("BOB", {TENSORS: tensors(outer_sum=entry("failed"))}),  # logins compare without case
        result("carol", {TENSORS: tensors()}),  # the login in Canvas is carol@uni.example
        result("zed", {TENSORS: tensors()}),  # not in the course
    ], "--canvas-roster", str(roster), "--canvas-assignment", f"{TENSORS}=Tensors (48213)", capsys=capsys)
    assert status == 0, output
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Tensors (48213)"]
    assert rows[1][0] == "Points Possible"
    assert sorted(rows[2:]) == [["Anders, Alice", "1001", "S-1", "alice", "Section A", "5"],
                        ["Brown, Bob", "1002", "S-2", "bob", "Section B", "4"],
                        ["Chen, Carol", "1003", "S-3", "carol@uni.example", "Section A", "5"]]
    assert re.search(r"1 learner not in the roster .*: zed", output), output


def test_a_canvas_roster_matched_on_sis_user_id(tmp_path, capsys):
    roster = write_roster(tmp_path / "export.csv")
    status, rows, output = canvas_class(tmp_path, [result("S-2", {TENSORS: tensors()})],
                                        "--canvas-roster", str(roster), "--canvas-match", "SIS User ID", capsys=capsys)
    assert status == 0 and rows[2][:5] == ["Brown, Bob", "1002", "S-2", "bob", "Section B"], output


def test_a_chapter_not_handed_in_keeps_the_grade_the_roster_has(tmp_path, capsys):
    """Canvas's review page shows a blank over an existing grade as the grade removed; the
    roster's own value changes nothing. The default title finds the roster's column by itself."""
    roster = write_roster(tmp_path / "export.csv")
    status, rows, output = canvas_class(tmp_path, [result("alice", {TENSORS: tensors()}),
                                                   result("bob", {TENSORS: tensors()})],
                                        "--canvas-roster", str(roster), "--canvas-assignment",
                                        f"{TENSORS}=Tensors (48213)", capsys=capsys)
    assert rows[0][5:] == ["Tensors (48213)"], "02_autograd was graded for nobody: no column"
    _, rows, output = canvas_class(tmp_path / "again", [result("alice", {TENSORS: tensors()}),
                                                        result("bob", {AUTOGRAD: autograd()})],
                                   "--canvas-roster", str(roster), "--canvas-assignment",
                                   f"{TENSORS}=Tensors (48213)", capsys=capsys)
    assert rows[0][5:] == ["Tensors (48213)", "PyTorch course: 02_autograd (48999)"], output
    scores = {row[3]: row[5:] for row in rows[2:]}
    assert scores == {"alice": ["5", "2.00"], "bob": ["", "2"]}, "bob's blank Tensors cell stays blank"


def test_a_chapter_nobody_handed_in_gets_no_canvas_column(tmp_path):
    """The stand-in chapter of a learner who handed in nothing would be a new, empty assignment."""
    _, rows, _ = canvas_class(tmp_path, [
        result("alice", {AUTOGRAD: autograd()}),
        result("bob", {TENSORS: stand_in(IN_NOTEBOOK_ORDER, "no notebook submitted")}, ("no notebook submitted",)),
    ])
    assert rows[0][5:] == [f"PyTorch course: {AUTOGRAD}"]
    assert {row[3]: row[5:] for row in rows[2:]} == {"alice": ["2"], "bob": [""]}


def test_two_learners_that_one_roster_row_would_take_are_both_left_out(tmp_path, capsys):
    roster = write_roster(tmp_path / "export.csv")
    status, rows, output = canvas_class(tmp_path, [result("alice", {TENSORS: tensors()}),
                                                   result("Alice", {TENSORS: tensors(outer_sum=entry("failed"))}),
                                                   result("bob", {TENSORS: tensors()})],
                                        "--canvas-roster", str(roster), capsys=capsys)
    assert status == 0 and [row[3] for row in rows[2:]] == ["bob"]
    assert "Alice and alice (Anders, Alice)" in output, output


@pytest.mark.parametrize("options, said", [
    (["--canvas-match", "Email"], "--canvas-roster"),
    (["--canvas-roster", "missing.csv"], "cannot read the roster"),
])
def test_canvas_options_that_cannot_work_are_refused_before_anything_is_written(tmp_path, capsys, options, said):
    shard = results_folder(tmp_path / "results", [result("alice", {TENSORS: tensors()})])
    with pytest.raises(SystemExit):
        merge.main([str(shard), "--out", str(tmp_path / "merged"), "--lms", "canvas", *options])
    assert said in capsys.readouterr().err and not (tmp_path / "merged").exists()


def test_a_roster_without_the_match_column_is_refused(tmp_path, capsys):
    roster = write_roster(tmp_path / "export.csv")
    shard = results_folder(tmp_path / "results", [result("alice", {TENSORS: tensors()})])
    with pytest.raises(SystemExit):
        merge.main([str(shard), "--out", str(tmp_path / "merged"), "--lms", "canvas",
                    "--canvas-roster", str(roster), "--canvas-match", "Email"])
    assert "has no such column" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# 4. The class report
# --------------------------------------------------------------------------------------------
COURSE_CELL_FAILED = "its check produced no result: cell 2 (the course's own) raised ImportError: libtorch"
GRADER_CRASHED = "the grader failed on this learner: KeyError: 'x'; the instructor's log has the details"


def mixed_class() -> list[dict]:
    return [
        result("alice", {TENSORS: tensors()}),
        result("bob", {TENSORS: tensors(outer_sum=entry("failed", "Your result has shape (3, 4)",
                                                       "outer_sum.transposed"))}),
        result("carol", {TENSORS: tensors(outer_sum=entry("your code raised", "the answer cell raised "
                                                          "RuntimeError: a leaf Variable", "outer_sum.in-place"))}),
        result("dan", {TENSORS: tensors(outer_sum=entry("not attempted", "outer_sum is not written yet"))}),
        result("erin", {TENSORS: stand_in(IN_NOTEBOOK_ORDER, NOT_A_NOTEBOOK)}, (NOT_A_NOTEBOOK,)),
        result("frank", {TENSORS: tensors(outer_sum=entry("no result", COURSE_CELL_FAILED))}),
        result("gina", {}, (GRADER_CRASHED,), total=0, max=0),
    ]


def test_what_went_wrong_lists_only_the_learners_own_mistakes(tmp_path):
    outer_sum = class_report.class_summary(mixed_class())["chapters"][TENSORS]["outer_sum"]
    assert [m["mistake"] for m in outer_sum["mistakes"]] == ["outer_sum.in-place", "outer_sum.transposed"]
    others = class_report.class_summary(mixed_class())["chapters"][TENSORS]["match_reference"]
    assert others["mistakes"] == [], "missing and not attempted have their own columns"


def test_not_handed_in_or_unreadable_is_a_group_apart_from_not_attempted():
    shares = class_report.class_summary(mixed_class())["chapters"][TENSORS]["outer_sum"]["shares"]
    assert shares == {"passed": round(1 / 6, 4), "failed": round(1 / 6, 4), "raised": round(1 / 6, 4),
                      "not attempted": round(1 / 6, 4), "not handed in or unreadable": round(1 / 6, 4),
                      "no result: grading problem": round(1 / 6, 4)}


def test_a_grading_problem_is_not_the_learner_s_failure():
    summary = class_report.class_summary(mixed_class())
    outer_sum = summary["chapters"][TENSORS]["outer_sum"]
    assert outer_sum["shares"]["failed"] == round(1 / 6, 4), "bob only"
    assert outer_sum["grading_problems"] == [{"learners": 1, "message": COURSE_CELL_FAILED}]
    assert summary["grader_failed"] == ["gina"]
    page = class_report.report_html(summary)
    assert "The grader failed on 1 learner (gina)" in page


def test_no_result_after_the_answer_cell_raised_is_the_learner_s_own():
    raised = entry("no result", "the answer cell raised NameError: name 'torch' is not defined")
    summary = class_report.class_summary([result("alice", {TENSORS: tensors(outer_sum=raised)})])
    assert summary["chapters"][TENSORS]["outer_sum"]["shares"]["raised"] == 1.0


def test_a_named_error_note_is_a_mistake():
    """An answer that raises a classic error carries the exercise's id for it, not raised:Kind."""
    noted = entry("your code raised", "the answer cell raised RuntimeError: a leaf Variable that requires grad",
                  "softplus.in-place-on-leaf")
    summary = class_report.class_summary([result("alice", {AUTOGRAD: autograd(new_parameter=noted)})])
    [mistake] = summary["chapters"][AUTOGRAD]["new_parameter"]["mistakes"]
    assert mistake["mistake"] == "softplus.in-place-on-leaf" and mistake["learners"] == 1


def test_a_long_message_is_cut_at_a_word_boundary_with_an_ellipsis():
    reason = "Your result differs from the expected one " + "because of broadcasting " * 30
    summary = class_report.class_summary([result("alice", {TENSORS: tensors(outer_sum=entry("failed", reason))})])
    [mistake] = summary["chapters"][TENSORS]["outer_sum"]["mistakes"]
    message = mistake["message"]
    assert message.endswith("…") and len(message) <= 300
    kept = message[:-1]
    assert reason.startswith(kept) and reason[len(kept)] == " ", "cut between two words"


def test_the_report_says_how_many_learners_each_chapter_has():
    page = class_report.report_html(class_report.class_summary(
        [result("alice", {TENSORS: tensors(), AUTOGRAD: autograd()}), result("bob", {TENSORS: tensors()})]))
    assert "Class report: 2 learners" in page
    assert f"{TENSORS}: 2 learners</h2>" in page and f"{AUTOGRAD}: 1 learner</h2>" in page
    one = class_report.report_html(class_report.class_summary([result("alice", {TENSORS: tensors()})]))
    assert "Class report: 1 learner<" in one


def test_the_report_says_how_many_handed_a_chapter_in():
    summary = class_report.class_summary(mixed_class())
    assert summary["per_chapter"][TENSORS]["learners"] == 6 and summary["per_chapter"][TENSORS]["handed_in"] == 5
    assert f"{TENSORS}: 6 learners, 5 handed it in</h2>" in class_report.report_html(summary)


def test_the_report_lists_exercises_in_notebook_order():
    summary = class_report.class_summary([result("alice", {TENSORS: tensors()})])
    assert list(summary["chapters"][TENSORS]) == IN_NOTEBOOK_ORDER
    assert summary["per_chapter"][TENSORS]["order"] == IN_NOTEBOOK_ORDER


def test_an_exam_report_has_the_public_and_the_hidden_part_each_with_its_shares_and_mistakes():
    memorised = exam_entry(entry(), entry("failed", "Your result has the wrong values", "values"))
    wrong = exam_entry(entry("failed", "For pred of shape (2, 3) your result has shape (3,)", "shape"),
                       entry("failed", "Your result has shape (5,)", "shape"))
    learners = [result(name, {TENSORS: notebook({"outer_sum": e})}, exam=True)
                for name, e in (("alice", exam_entry(entry(), entry())), ("bob", memorised), ("carol", wrong))]
    summary = class_report.class_summary(learners)
    outer_sum = summary["chapters"][TENSORS]["outer_sum"]
    assert outer_sum["public"]["shares"]["passed"] == round(2 / 3, 4)
    assert outer_sum["hidden"]["shares"]["passed"] == round(1 / 3, 4)
    assert [m["mistake"] for m in outer_sum["public"]["mistakes"]] == ["shape"]
    assert {m["mistake"]: m["learners"] for m in outer_sum["hidden"]["mistakes"]} == {"shape": 1, "values": 1}
    assert summary["hardest"][0]["passed"] == round(1 / 3, 4), "the hidden part decides"
    page = class_report.report_html(summary)
    assert "<td>outer_sum: public cases</td>" in page and "<td>outer_sum: hidden cases</td>" in page


# --------------------------------------------------------------------------------------------
# 5. --help
# --------------------------------------------------------------------------------------------
def help_of_each_option(text: str) -> dict[str, str]:
    """``--help``'s options section: each option's help text, on one line (an option's entry
    starts a line with two spaces and ``--``; the lines after it are its text)."""
    described: dict[str, str] = {}
    option = None
    for line in text.split("options:", 1)[1].splitlines():
        if re.match(r"  --[a-z]", line):
            option = line.split()[0]
            described[option] = ""
        if option:
            described[option] += " " + " ".join(line.split())
    return described


def test_help_shows_every_default(capsys):
    with pytest.raises(SystemExit):
        grade_main(["--help"])
    described = help_of_each_option(capsys.readouterr().out)
    limits = Limits()
    defaults = {"--cell-timeout": limits.cell_timeout_s, "--notebook-timeout": limits.notebook_timeout_s,
                "--memory-mb": limits.memory_mb, "--max-processes": limits.max_processes,
                "--max-file-mb": limits.max_file_mb, "--output-cap-kb": limits.output_cap_kb,
                "--canvas-match": "SIS Login ID"}
    for option, default in defaults.items():
        assert f"default: {default}" in described[option], (option, described[option])
    assert re.search(r"number of cores, here \d+", described["--workers"]), described["--workers"]


# --------------------------------------------------------------------------------------------
# 6. Regrade and merge
# --------------------------------------------------------------------------------------------
def a_class(**changed) -> list[dict]:
    return [result(name, {TENSORS: tensors(**changed.get(name, {}))}) for name in ("alice", "bob", "carol")]


def test_a_regrade_of_one_learner_counts_only_that_learner_as_changed():
    before = a_class(bob={"outer_sum": entry("failed", "Your result has shape (3, 4)")})
    after = [result("bob", {TENSORS: tensors()})]
    report = regrade.compare(before, after)
    assert report["moved"] == 1, "alice and carol were not regraded"
    status = {item["learner"]: item["status"] for item in report["learners"]}
    assert status == {"alice": "not regraded", "bob": "changed", "carol": "not regraded"}
    assert regrade.headline(report) == "1 learner changed (of 1 regraded); 2 not regraded"


def test_a_regraded_learner_whose_results_did_not_move_is_unchanged():
    report = regrade.compare(a_class(), a_class())
    assert report["moved"] == 0 and regrade.headline(report) == "0 learners changed (of 3 regraded)"


def test_a_regrade_reads_as_a_person_writes_it():
    before = a_class(bob={"outer_sum": entry("failed", "Your result has shape (3, 4)")})
    report = regrade.compare(before, [result("bob", {TENSORS: tensors()})])
    page = regrade.report_html(report)
    assert f"{TENSORS}/outer_sum: 0/1 failed → 1/1 passed" in page
    assert "<td>4/5</td><td>5/5</td>" in page, "bob's totals"
    assert "<td>alice</td><td>5/5</td><td>—</td><td>not regraded</td>" in page
    assert "{" not in page.split("</style>")[1] and "None" not in page
    bob = next(item for item in report["learners"] if item["learner"] == "bob")
    assert regrade.learner_line(bob) == f"bob: 4/5 → 5/5 ({TENSORS}/outer_sum: 0/1 failed → 1/1 passed)"


def test_the_audit_says_which_exercise_s_check_changed():
    versions = {TENSORS: {name: f"hash-{name}" for name in IN_NOTEBOOK_ORDER}}
    changed = {TENSORS: {**versions[TENSORS], "outer_sum": "hash-new"}}
    before = [result("bob", {TENSORS: tensors()}, check_versions=versions)]
    after = [result("bob", {TENSORS: tensors()}, check_versions=changed, course_version="beef")]
    [bob] = regrade.compare(before, after)["learners"]
    assert bob["graded_by"] == [f"the check of {TENSORS}/outer_sum changed"]


def test_the_audit_falls_back_on_the_course_version_where_a_side_lacks_check_versions():
    versions = {TENSORS: {name: f"hash-{name}" for name in IN_NOTEBOOK_ORDER}}
    before = [result("bob", {TENSORS: tensors()}, limits={"cell_timeout_s": 60, "memory_mb": 3072})]
    after = [result("bob", {TENSORS: tensors()}, check_versions=versions, course_version="beef",
                    limits={"cell_timeout_s": 120, "memory_mb": 3072})]
    [bob] = regrade.compare(before, after)["learners"]
    assert bob["graded_by"] == ["course version c0ffee → beef (these results do not say which checks changed)",
                                "limits: cell_timeout_s 60 → 120"]


def test_merge_update_puts_a_regraded_learner_back_into_the_class(tmp_path, capsys):
    before = results_folder(tmp_path / "results", a_class(bob={"outer_sum": entry("failed")}))
    bob = results_folder(tmp_path / "results-bob", [result("bob", {TENSORS: tensors()})])
    assert merge.main([str(before), str(bob), "--out", str(tmp_path / "final"), "--update"]) == 0
    output = capsys.readouterr().out
    assert f"Replaced bob: 4/5 from {before} replaced by 5/5 from {bob}" in output
    merged = {r["learner"]: r for r in reports.read_results(tmp_path / "final")}
    assert set(merged) == {"alice", "bob", "carol"} and merged["bob"]["total"] == 5


def test_merge_without_update_refuses_two_results_for_one_learner_and_says_what_to_do(tmp_path, capsys):
    before = results_folder(tmp_path / "results", a_class(bob={"outer_sum": entry("failed")}))
    bob = results_folder(tmp_path / "results-bob", [result("bob", {TENSORS: tensors()})])
    assert merge.main([str(before), str(bob), "--out", str(tmp_path / "final")]) == 1
    error = capsys.readouterr().err
    assert "bob is in two results folders" in error and "--update" in error
