"""The batch grader on exam submissions (``--exam``): every exercise scored on its public cases
(the check the learner saw in the exam release) and on hidden ones (the practice check), a
gradebook column for each, and feedback pages that keep the hidden inputs to themselves unless
``--reveal-hidden``."""

from __future__ import annotations

import shutil

import pytest

import grading_fixtures as gf
from grading_fixtures import TENSOR_EXERCISES, TENSORS
from test_grading_options import gradebook, grade, results

from course_utils.exercises import tensors
from course_utils.exercises.exam import expected_public_record
from course_utils.exercises.public import spec_of


def memorised_outer_sum() -> str:
    """An outer_sum that knows the public cases by heart: the shipped results for exactly those
    inputs, as literals in its source, and an error for anything else."""
    spec = spec_of(tensors.outer_sum)
    record = expected_public_record(tensors.outer_sum, spec)
    known = []
    for case, expected in zip(spec.cases, record):
        a, b = case.arguments()
        returned = expected["facts"]["returned"]
        known.append((a.tolist(), b.tolist(), returned["values"].tolist(), returned["dtype"]))
    return (
        "def outer_sum(a, b):\n"
        f"    known = {known!r}\n"
        "    for a_values, b_values, result, dtype in known:\n"
        "        if a.tolist() == a_values and b.tolist() == b_values:\n"
        "            return torch.tensor(result, dtype=getattr(torch, dtype.split('.')[-1]))\n"
        "    raise LookupError('not one of the public inputs')\n"
    )


# An outer_sum that adds a and b as they are: on the first public case (sizes 3 and 5) it raises
# the error that one of the exercise's error notes explains, with the whole answer in it.
ADDS_WITHOUT_A_NEW_DIMENSION = "def outer_sum(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def exam_grading(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading-exam")
    course = base / "course"
    (course / "notebooks").mkdir(parents=True)
    shutil.copy2(gf.NOTEBOOKS / f"{TENSORS}.ipynb", course / "notebooks" / f"{TENSORS}.ipynb")
    submissions = base / "submissions"
    gf.write_submission(submissions, "alice", gf.submission())
    gf.write_submission(submissions, "dan", gf.submission(answers={"outer_sum": memorised_outer_sum()}))
    gf.write_submission(submissions, "erin", gf.submission(answers=gf.all_wrong()))
    gf.write_submission(submissions, "gina", gf.submission(answers={"outer_sum": ADDS_WITHOUT_A_NEW_DIMENSION}))
    # issue 25: the worked answer, called from inside the answer, scored public 1 and hidden 1
    gf.write_submission(submissions, "hal", gf.submission(answers={
        name: gf.REACH_FOR_CODE[name] for name in ("match_reference", "independent_copy")}))
    out = base / "results"
    run = grade(submissions, out, course, "--exam")
    revealed = base / "revealed"
    shutil.copytree(out / ".cache", revealed / ".cache")
    reveal_run = grade(submissions, revealed, course, "--exam", "--reveal-hidden")
    return run, out, reveal_run, revealed


def test_right_answers_score_full_marks_on_public_and_hidden_cases(exam_grading):
    run, out, _, _ = exam_grading
    assert run.returncode == 0, run.log()
    row = gradebook(out)["alice"]
    for name in TENSOR_EXERCISES:
        assert row[f"{TENSORS}/{name} public"] == "1" and row[f"{TENSORS}/{name} hidden"] == "1", name
    assert row["total"] == str(2 * len(TENSOR_EXERCISES))
    entry = results(out)["alice"]["notebooks"][TENSORS]["exercises"]["outer_sum"]
    assert entry["public"]["outcome"] == entry["hidden"]["outcome"] == "passed"


def test_an_answer_that_memorised_the_public_cases_scores_0_on_the_hidden_ones(exam_grading):
    _, out, _, _ = exam_grading
    row = gradebook(out)["dan"]
    assert row[f"{TENSORS}/outer_sum public"] == "1", "it returns the shipped results for the public inputs"
    assert row[f"{TENSORS}/outer_sum hidden"] == "0"
    hidden = results(out)["dan"]["notebooks"][TENSORS]["exercises"]["outer_sum"]["hidden"]
    assert hidden["outcome"] == "your code raised" and "not one of the public inputs" in hidden["reason"]


def test_an_answer_that_calls_the_worked_answer_scores_0_on_both_parts_and_says_why(exam_grading):
    """Through the notebook's ``ex`` and through an import of the exercise module."""
    _, out, _, _ = exam_grading
    exercises = results(out)["hal"]["notebooks"][TENSORS]["exercises"]
    for name in ("match_reference", "independent_copy"):
        for part in ("public", "hidden"):
            entry = exercises[name][part]
            assert entry["score"] == 0 and entry["mistake"] == "reached-for-the-grader", (name, part, entry)
            assert f"grading: the worked answer of {name} is not available" in entry["reason"], entry
    assert exercises["outer_sum"]["public"]["score"] == exercises["outer_sum"]["hidden"]["score"] == 1


def test_wrong_answers_fail_the_public_cases_with_the_message_the_learner_saw(exam_grading):
    _, out, _, _ = exam_grading
    exercises = results(out)["erin"]["notebooks"][TENSORS]["exercises"]
    for name in TENSOR_EXERCISES:
        assert exercises[name]["hidden"]["score"] == 0, name
    failed_public = [name for name in TENSOR_EXERCISES if exercises[name]["public"]["score"] == 0]
    assert len(failed_public) >= len(TENSOR_EXERCISES) - 2, failed_public
    for name in failed_public:
        assert exercises[name]["public"]["reason"].strip(), name


def test_feedback_shows_hidden_results_as_pass_or_fail_unless_revealed(exam_grading):
    _, out, reveal_run, revealed = exam_grading
    page = (out / "feedback" / "dan.html").read_text()
    hidden_reason = results(out)["dan"]["notebooks"][TENSORS]["exercises"]["outer_sum"]["hidden"]["reason"]
    assert "outer_sum: public cases" in page and "outer_sum: hidden cases" in page
    assert "not one of the public inputs" not in page and "inputs are not shown" in page
    assert reveal_run.returncode == 0, reveal_run.log()
    assert reveal_run.counts() == (0, 5), "revealing is a choice about the page: the grades come from the cache"
    shown = (revealed / "feedback" / "dan.html").read_text()
    assert "not one of the public inputs" in shown and hidden_reason.split("\n")[0][:40] in shown.replace("&#x27;", "'")


@pytest.fixture(scope="module")
def hints_grading(tmp_path_factory, exam_grading):
    """gina, whose outer_sum raises, graded as the submission of an exam released with --hints
    none (the grader's default: exam_grading's run) and of one released with --hints all."""
    _, out, _, _ = exam_grading
    base = tmp_path_factory.mktemp("grading-exam-hints")
    course = base / "course"
    (course / "notebooks").mkdir(parents=True)
    shutil.copy2(gf.NOTEBOOKS / f"{TENSORS}.ipynb", course / "notebooks" / f"{TENSORS}.ipynb")
    submissions = base / "submissions"
    shutil.copytree(out.parent / "submissions" / "gina", submissions / "gina")
    return {"none": (exam_grading[0], out),
            "all": (grade(submissions, base / "all", course, "--exam", "--hints", "all"), base / "all")}


def test_the_public_reason_shows_an_error_note_only_where_the_release_shipped_it(hints_grading):
    note = next(note for note in tensors.outer_sum.error_notes if note.id == "added-without-new-dimension")
    entries = {}
    for policy, (run, out) in hints_grading.items():
        assert run.returncode == 0, run.log()
        entries[policy] = results(out)["gina"]["notebooks"][TENSORS]["exercises"]["outer_sum"]
    withheld, shown = entries["none"]["public"], entries["all"]["public"]
    assert withheld["outcome"] == shown["outcome"] == "your code raised"
    assert "must match the size of tensor b" in withheld["reason"] and "Likely cause:" in withheld["reason"]
    assert note.text not in withheld["reason"] and withheld["mistake"] == "raised:RuntimeError"
    assert note.text in shown["reason"] and shown["mistake"] == "outer_sum.added-without-new-dimension"
    page = (hints_grading["none"][1] / "feedback" / "gina.html").read_text()
    assert "must match the size of tensor b" in page and note.text not in page
    # The hidden check is the practice course's, which the grader has whole: the class report
    # counts the classic mistake whatever the release showed.
    assert entries["none"]["hidden"]["mistake"] == "outer_sum.added-without-new-dimension"


def test_hints_go_with_exam(tmp_path):
    run = grade(tmp_path, tmp_path / "out", gf.GRADING_COURSE, "--hints", "all")
    assert run.returncode == 2 and "--hints goes with --exam" in run.stderr, run.log()
