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


def results_folder(folder: Path, results: list[dict], shard: tuple[int, int] | None = None,
                   whole_class: list[str] | None = None, finished: bool = True, record: bool = False) -> Path:
    """A results folder as a grading run leaves it (what ``merge`` reads): every result out of
    the assignment of ``results``; with ``shard`` or ``record``, the run's shard.txt too
    (``whole_class``: the learners of every shard)."""
    assignment = reports.assignment_of(results)
    for result in results:
        reports.write_learner(folder, reports.out_of_assignment(dict(result), assignment))
    everything = reports.read_results(folder)
    reports.write_gradebook(folder, everything, exercise_columns(everything))
    if shard is not None or record:
        learners = [r["learner"] for r in results]
        merge.write_shard_record(folder, merge.shard_record(shard, learners, whole_class or learners, assignment,
                                                            finished=finished))
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


def test_a_regrade_shows_totals_out_of_the_assignment():
    """A learner who handed in one chapter of two is out of both, in a regrade's lines too."""
    before = reports.out_of_assignment(result("bob", {TENSORS: tensors()}), {TENSORS: 5, "02_autograd": 4})
    after = reports.out_of_assignment(result("bob", {TENSORS: tensors(outer_sum=entry("failed", "no"))}),
                                      {TENSORS: 5, "02_autograd": 4})
    [bob] = regrade.compare([before], [after])["learners"]
    assert regrade.learner_line(bob).startswith("bob: 5/9 → 4/9"), regrade.learner_line(bob)


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


def test_merge_update_of_runs_that_record_no_shard_still_puts_a_regrade_back(tmp_path, capsys):
    """A whole-class run and a regrade of one learner, each with its shard.txt (no shard)."""
    before = results_folder(tmp_path / "results", a_class(bob={"outer_sum": entry("failed")}), record=True)
    bob = results_folder(tmp_path / "results-bob", [result("bob", {TENSORS: tensors()})], record=True)
    assert merge.main([str(before), str(bob), "--out", str(tmp_path / "final"), "--update"]) == 0
    assert f"Replaced bob: 4/5 from {before} replaced by 5/5 from {bob}" in capsys.readouterr().out
    merged = {r["learner"]: r for r in reports.read_results(tmp_path / "final")}
    assert set(merged) == {"alice", "bob", "carol"} and merged["bob"]["total"] == 5


# --------------------------------------------------------------------------------------------
# 7. Shards that would lose learners without a word (issue 43)
# --------------------------------------------------------------------------------------------
CLASS = ["alice", "bob", "carol"]


def shard_folders(tmp_path: Path, n: int, ks, *, copy_of: int | None = None) -> list[Path]:
    """Shard K of N for each K in ``ks``: learner ``CLASS[i]`` is in shard ``i % n + 1``."""
    folders = []
    for k in ks:
        learners = [result(name, {TENSORS: tensors()}) for i, name in enumerate(CLASS) if i % n + 1 == k]
        folder = tmp_path / f"n{n}-shard-{k}" if copy_of is None else tmp_path / f"n{n}-shard-{k}-copy"
        folders.append(results_folder(folder, learners, shard=(k, n), whole_class=CLASS))
    return folders


def test_merge_refuses_an_incomplete_set_of_shards_and_names_what_is_missing(tmp_path, capsys):
    folders = shard_folders(tmp_path, 3, [1, 3])  # shard 2 of 3 (bob) was not copied back
    assert merge.main([*map(str, folders), "--out", str(tmp_path / "all")]) == 1
    error = capsys.readouterr().err
    assert "incomplete: shard 2 of 3 missing: 1 learner of the class (bob)" in error, error
    assert "--partial" in error, error
    assert not (tmp_path / "all" / "gradebook.csv").exists(), "nothing is written"


def test_merge_partial_merges_and_the_output_and_class_report_say_so(tmp_path, capsys):
    folders = shard_folders(tmp_path, 3, [1, 3])
    assert merge.main([*map(str, folders), "--out", str(tmp_path / "all"), "--partial"]) == 0
    output = capsys.readouterr().out
    assert "PARTIAL: shard 2 of 3 missing: 1 learner of the class (bob)" in output, output
    assert "Merged 2 folders (shards 1 and 3 of 3): 2 learners (partial)" in output, output
    report = json.loads((tmp_path / "all" / "class_report.json").read_text())
    assert report["incomplete"] == "shard 2 of 3 missing: 1 learner of the class (bob)", report
    page = (tmp_path / "all" / "class_report.html").read_text()
    assert "Incomplete: not the whole class." in page and "(bob)" in page
    record = merge.read_shard_record(tmp_path / "all")
    assert record["partial"] and record["shard"] is None and record["learners"] == ["alice", "carol"]
    # merging that partial merge again is partial too, and needs --partial again
    assert merge.main([str(tmp_path / "all"), "--out", str(tmp_path / "again")]) == 1
    assert "is a partial merge" in capsys.readouterr().err


def test_a_complete_set_of_shards_merges_and_says_which(tmp_path, capsys):
    folders = shard_folders(tmp_path, 3, [3, 1, 2])
    assert merge.main([*map(str, folders), "--out", str(tmp_path / "all")]) == 0
    output = capsys.readouterr().out
    assert "Merged 3 folders (shards 1, 2 and 3 of 3): 3 learners;" in output, output
    assert "PARTIAL" not in output
    assert "incomplete" not in json.loads((tmp_path / "all" / "class_report.json").read_text())


def test_merge_refuses_shards_of_different_n(tmp_path, capsys):
    folders = shard_folders(tmp_path, 2, [1]) + shard_folders(tmp_path, 3, [2, 3])
    assert merge.main([*map(str, folders), "--out", str(tmp_path / "all"), "--partial"]) == 1
    error = capsys.readouterr().err
    assert "shards of different runs" in error and "is shard 1 of 2" in error and "is shard 2 of 3" in error, error


def test_merge_refuses_two_copies_of_one_shard(tmp_path, capsys):
    folders = shard_folders(tmp_path, 2, [1, 2]) + shard_folders(tmp_path, 2, [1], copy_of=1)
    assert merge.main([*map(str, folders), "--out", str(tmp_path / "all"), "--partial"]) == 1
    error = capsys.readouterr().err
    assert f"{folders[0]} and {folders[2]} are both shard 1 of 2" in error, error


def test_merge_refuses_a_shard_that_lacks_a_learner_it_graded(tmp_path, capsys):
    folders = shard_folders(tmp_path, 2, [1, 2])
    (folders[0] / "alice.json").unlink()  # a copy that missed a file, or a run stopped part-way
    assert merge.main([*map(str, folders), "--out", str(tmp_path / "all")]) == 1
    error = capsys.readouterr().err
    assert f"{folders[0]} (shard 1 of 2) has no result for 1 learner it grades (alice)" in error, error


def test_merge_refuses_a_shard_whose_run_did_not_finish(tmp_path, capsys):
    folders = shard_folders(tmp_path, 2, [1, 2])
    record = merge.read_shard_record(folders[1])
    merge.write_shard_record(folders[1], {**record, "finished": False})
    assert merge.main([*map(str, folders), "--out", str(tmp_path / "all")]) == 1
    assert "its run did not finish" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# 8. One maximum per assignment (issue 43)
# --------------------------------------------------------------------------------------------
def test_every_learner_is_out_of_the_assignment_s_maximum(tmp_path):
    """alice handed in 01_tensors alone, bob both chapters: both are out of 7 (5 + 2) on their
    page, in the gradebook and in canvas.csv; a chapter not handed in counts 0 of its maximum."""
    learners = [result("alice", {TENSORS: tensors()}), result("bob", {TENSORS: tensors(), AUTOGRAD: autograd()})]
    shards = [results_folder(tmp_path / f"shard-{k}", [record]) for k, record in enumerate(learners)]
    merge.merge(shards, tmp_path / "all", lms="canvas")
    merged = {r["learner"]: r for r in reports.read_results(tmp_path / "all")}
    assert {learner: reports.out_of(r) for learner, r in merged.items()} == {"alice": 7, "bob": 7}
    assert merged["alice"]["assignment"] == {TENSORS: 5, AUTOGRAD: 2}
    page = (tmp_path / "all" / "feedback" / "alice.html").read_text()
    assert "<h1>alice: 5 / 7</h1>" in page, page
    assert f"<h2>{AUTOGRAD}: 0 / 2</h2>" in page and "no notebook of this chapter was handed in" in page
    assert page.index(f"<h2>{TENSORS}") < page.index(f"<h2>{AUTOGRAD}"), "course order"
    assert "<h1>bob: 7 / 7</h1>" in (tmp_path / "all" / "feedback" / "bob.html").read_text()
    assert read_csv(tmp_path / "all" / "gradebook.csv")[1][-1] == "7"
    assert read_csv(tmp_path / "all" / "canvas.csv")[1][-2:] == ["5", "2"]


def test_a_learner_the_grader_failed_on_is_out_of_the_same_maximum(tmp_path):
    failed = {"learner": "dave", "sandbox": "bubblewrap", "grader_version": "1", "notebooks": {}, "total": 0,
              "max": 0, "problems": ["the grader failed on this learner: TypeError: x; the instructor's log has "
                                     "the details"]}
    folder = results_folder(tmp_path / "results", [result("alice", {TENSORS: tensors()}), failed])
    dave = reports.read_results(folder, ["dave"])[0]
    assert reports.out_of(dave) == 5
    page = (folder / "feedback" / "dave.html").read_text()
    assert "<h1>dave: 0 / 5</h1>" in page and "the grader failed on your submission" in page


def test_results_without_an_assignment_are_out_of_their_own_maximum():
    """Results of a grader before the assignment was recorded, and results of run_batch without
    one (``Batch.assignment`` None)."""
    record = result("alice", {TENSORS: tensors()})
    assert reports.out_of(record) == 5
    assert reports.out_of(reports.out_of_assignment(dict(record), {TENSORS: 5, AUTOGRAD: 2})) == 7
    assert "out_of" not in reports.out_of_assignment(dict(record, out_of=7), None)


# --------------------------------------------------------------------------------------------
# 9. The command line: a results folder of another run, a stop under --no-cache (issue 43)
# --------------------------------------------------------------------------------------------
@pytest.fixture
def no_grading(tmp_path, monkeypatch):
    """The grader's command line with run_batch replaced: it writes each learner a result of
    01_tensors (``calls`` says whom) and, where ``stop_after`` says, stops as Ctrl-C does."""
    from course_utils.grading import __main__ as cli

    calls, settings = [], {"stop_after": None}

    def run_batch(batch, learners, workers, report, sandbox):
        calls.append([learner.id for learner in learners])
        results = []
        for learner in learners:
            if settings["stop_after"] is not None and len(results) == settings["stop_after"]:
                raise KeyboardInterrupt
            record = result(learner.id, {TENSORS: tensors()})
            reports.write_learner(batch.out, record)
            report(f"{learner.id}: {record['total']}/{record['max']}")
            results.append(record)
        return results, 0

    monkeypatch.setattr(cli, "run_batch", run_batch)
    monkeypatch.setattr(cli, "choose_sandbox", lambda no_sandbox: "bubblewrap")
    submissions = tmp_path / "submissions"
    for name in ("alice", "bob", "carol"):
        folder = submissions / name
        folder.mkdir(parents=True)
        (folder / f"{TENSORS}.ipynb").write_text("{}")  # never read: the stand-in grades nothing

    def grade(*args: str) -> int:
        return cli.main([str(submissions), "--course", str(Path(__file__).parent / "grading_course"), *args])

    return grade, calls, settings


def test_a_shard_s_gradebook_lists_its_own_learners_only(tmp_path, no_grading):
    grade, calls, _ = no_grading
    out = tmp_path / "results"
    reports.write_learner(out, result("zed", {TENSORS: tensors()}))  # an earlier run's learner, in the folder
    assert grade("--out", str(out)) == 0
    book = [row[0] for row in read_csv(out / "gradebook.csv")[2:]]
    assert book == ["alice", "bob", "carol"], book
    record = merge.read_shard_record(out)
    assert record["shard"] is None and record["learners"] == CLASS and record["finished"]


def test_a_run_into_a_folder_of_another_shard_run_is_refused_and_says_what_to_do(tmp_path, no_grading, capsys):
    grade, calls, _ = no_grading
    out = tmp_path / "shard-2"
    assert grade("--out", str(out), "--shard", "2/2") == 0
    graded = calls[-1]
    before = (out / "gradebook.csv").read_bytes()
    assert grade("--out", str(out), "--shard", "2/3") == 2
    error = capsys.readouterr().err
    assert f"{out} holds the results of --shard 2/2" in error and "this run is --shard 2/3" in error, error
    assert "give this run a folder of its own" in error and str(tmp_path / "shard-2-of-3") in error, error
    assert len(calls) == 1 and (out / "gradebook.csv").read_bytes() == before, "nothing graded, nothing written"
    for other in (["--shard", "1/2"], []):  # another K, or the whole class
        assert grade("--out", str(out), *other) == 2
    assert grade("--out", str(out), "--shard", "2/2") == 0 and calls[-1] == graded, "the same shard again"
    assert merge.read_shard_record(out)["shard"] == [2, 2]


def test_every_shard_grades_out_of_the_whole_class_s_assignment(tmp_path, no_grading):
    grade, calls, _ = no_grading
    assert grade("--out", str(tmp_path / "shard-1"), "--shard", "1/2") == 0
    record = merge.read_shard_record(tmp_path / "shard-1")
    assert record["class"] == CLASS and record["learners"] == calls[-1] and record["shard"] == [1, 2]
    assert record["assignment"] == {TENSORS: 7}, record  # tests/grading_course's 01_tensors checks 7


@pytest.mark.parametrize("no_cache", [False, True])
def test_a_stopped_run_says_truly_how_to_grade_the_rest(tmp_path, no_grading, capsys, no_cache):
    grade, _, settings = no_grading
    settings["stop_after"] = 1
    assert grade("--out", str(tmp_path / "results"), *(["--no-cache"] if no_cache else [])) == 130
    output = capsys.readouterr().out
    if no_cache:  # the same command, --no-cache, would grade them all again
        assert "run the same command without --no-cache" in output, output
        assert "run the same command again" not in output.lower() and "come from the cache" not in output, output
    else:
        assert "Run the same command again to grade the rest (the learners graded come from the cache" in output
    assert "Grading stopped: every worker and kernel ended. 1 of 3 learners graded" in output, output
    record = merge.read_shard_record(tmp_path / "results")
    assert record["finished"] is False and record["learners"] == CLASS


def test_no_cache_removes_its_learners_cache_entries_so_a_rerun_grades_only_the_rest(tmp_path, monkeypatch):
    """A --no-cache run stopped after one learner: run again without --no-cache, it grades only
    the others (the old entries it was told not to use are gone; the new one stands)."""
    import grading_fixtures as gf

    from course_utils.grading import batch as batch_module

    submissions, out = tmp_path / "submissions", tmp_path / "results"
    for name in ("alice", "bob"):
        gf.write_submission(submissions, name, gf.submission(append={"outer_sum": f"# {name}\n"}))
    from course_utils.grading.submissions import discover

    learners = discover(submissions)
    sandbox = "none: a test"

    def batch(use_cache: bool):
        return batch_module.Batch(gf.GRADING_COURSE, submissions, out, Limits(), use_cache=use_cache, no_sandbox=True)

    courses = batch_module.course_notebooks(gf.GRADING_COURSE)
    entries = {l.id: out / ".cache" / f"{batch_module.cache_key(l, batch(True), courses, sandbox)}.json"
               for l in learners}
    for name, path in entries.items():  # what an earlier run left: not to be used
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result(name, {TENSORS: tensors(outer_sum=entry("failed", "old"))})))
    graded = []

    def pool(todo, batch, sandbox, workers, stop_after=None):
        for learner, cached in todo:
            if stop_after is not None and len(graded) == stop_after:
                raise batch_module.GradingStopped("signal 15")
            graded.append(learner.id)
            yield learner, cached, result(learner.id, {TENSORS: tensors()})

    monkeypatch.setattr(batch_module, "load_judges", lambda exam=False: None)
    monkeypatch.setattr(batch_module, "_grade_in_pool", lambda *args: pool(*args, stop_after=1))
    with pytest.raises(KeyboardInterrupt):
        batch_module.run_batch(batch(False), learners, 1, lambda line: None, sandbox)
    [first] = graded
    [other] = {"alice", "bob"} - {first}
    assert json.loads(entries[first].read_text())["total"] == 5, "this run's result is cached"
    assert not entries[other].exists(), "the entry --no-cache was told not to use is gone"
    monkeypatch.setattr(batch_module, "_grade_in_pool", pool)
    graded.clear()
    results, cached = batch_module.run_batch(batch(True), learners, 1, lambda line: None, sandbox)
    assert graded == [other] and cached == 1, (graded, cached)
    assert all(r["total"] == 5 for r in results), "no old result came back"


def test_merge_leaves_out_a_result_its_folder_s_run_did_not_grade(tmp_path, capsys):
    """A shard's folder that still holds an older run's learner: not in that shard's record."""
    folders = shard_folders(tmp_path, 2, [1, 2])
    reports.write_learner(folders[0], result("zed", {TENSORS: tensors()}))
    assert merge.main([*map(str, folders), "--out", str(tmp_path / "all")]) == 0
    output = capsys.readouterr().out
    assert f"Left out {folders[0] / 'zed.json'}: its folder's run did not grade that learner" in output, output
    assert [r["learner"] for r in reports.read_results(tmp_path / "all")] == CLASS
