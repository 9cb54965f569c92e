"""An instructor's own exercise, end to end, as INSTRUCTORS.md's "Your own exercise" tells it.

In a copy of the course: ``new-exercise`` writes the files, the "instructor" (this test) fills
in the TODOs of a quick-path exercise, ``normalize(x)``, in under 40 lines, and every gate the
course's own exercises pass runs on it: the learner release, the catalogue and its minimum
counts, the known answers, the public cases, the notebooks, the mutation check, an exam
release, and grading a submission in the sandbox. The gates it runs are the ones the command
prints (``new_exercise.GATES``), and INSTRUCTORS.md shows the same gates and the same example,
which runs as it is written there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from course_utils.authoring import new_exercise

from course_copies import ROOT, copy_files

PYTHON = sys.executable

# What the instructor writes: (file, TODO text the template holds, what replaces it). The module's
# texts are those of INSTRUCTORS.md's example (test_the_pages_example_is_the_one_filled_in_here).
FILLED_IN = [
    ("module", 'raise NotImplementedError("TODO: the reference solution")',
     "return (x - x.mean(0)) / x.std(0, correction=0)"),
    ("module", '"TODO: the exercise\'s title"', '"Standardise each column"'),
    ("module", '"TODO: what a right answer returns, in a few words"',
     '"x standardised: each column with mean 0 and population std 1"'),
    ("module", "inputs=quick.Inputs(shapes=[(4, 3)], dtypes=(torch.float32, torch.float64)),",
     'inputs=quick.Inputs(shapes=[(6, 3), (4, 2), (5,)], batch_dim=None,\n'
     '                    edge_cases={"a constant column": lambda: (torch.tensor([[1.0, 2.0], [1.0, 4.0]]),)}),'),
    ("module", '["TODO: a first hint", "TODO: a second hint"]',
     '["x.mean(0) and x.std(0, correction=0) hold one number per column.",\n'
     '       "(x - x.mean(0)) / x.std(0, correction=0)"]'),
    ("module", '"Correct: TODO: what a right answer got right"',
     '"Correct: each column now has mean 0 and population std 1."'),
    ("module", "slips=[],", 'slips=[quick.Slip("sample-std", lambda x: (x - x.mean(0)) / x.std(0),\n'
                            '                  "Your result divides by the sample std (by n - 1), not the population std (by n).")],'),
    ("module", "known=[],", "known=[((torch.tensor([[1.0, 2.0], [3.0, 6.0]]),), torch.tensor([[-1.0, -1.0], [1.0, 1.0]]))],"),
    ("catalogue", '        # right("with keepdim", lambda x: ...),',
     '        right("std_mean", lambda x: (lambda s, m: (x - m) / s)(*torch.std_mean(x, 0, correction=0))),\n'
     '        right("keepdim", lambda x: (x - x.mean(0, keepdim=True)) / x.std(0, correction=0, keepdim=True)),\n'
     '        right("var and sqrt", lambda x: (x - x.mean(dim=0)) / x.var(dim=0, unbiased=False).sqrt()),'),
    ("catalogue", '        # wrong("the biased std", lambda x: ..., "biased"),',
     '        wrong("the sample std", lambda x: (x - x.mean(0)) / x.std(0), "sample std"),\n'
     '        wrong("along the last dim", lambda x: (x - x.mean(-1, keepdim=True)) / x.std(-1, correction=0, keepdim=True),\n'
     '              "wrong values"),'),
    ("notebook", "TODO the title", "standardise each column"),
    ("notebook", "TODO the task, with every input it allows (shapes, dtypes, empty inputs).",
     "return `x` with each column shifted to mean 0 and divided by its population std (which\n"
     "divides by n, not torch's default n - 1), for any float dtype; a constant column gives nan."),
    ("notebook", "raise NotImplementedError  # TODO: the worked answer", "return (x - x.mean(0)) / x.std(0, correction=0)"),
]
RIGHT = "def normalize(x):\n    return (x - x.mean(0)) / x.std(0, correction=0)\n"
WRONG = "def normalize(x):\n    return (x - x.mean(0)) / x.std(0)\n"
GATES = new_exercise.gates("tensors", "normalize", "01_tensors")


def run(copy, *args, env=None, timeout=600):
    # PYTHONPATH: the copy's course_utils, also in the kernels nbval starts (the editable
    # install of the course would otherwise give them this checkout's)
    done = subprocess.run([PYTHON, *args], cwd=copy, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COURSE_NO_PROGRESS": "1", "PYTHONPATH": str(copy), **(env or {})})
    assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def course_with_normalize(tmp_path_factory):
    copy = copy_files(tmp_path_factory.mktemp("course") / "course")
    made = run(copy, "-m", "course_utils.authoring", "new-exercise", "tensors", "normalize")
    files = {"module": copy / "course_utils/exercises/tensors/normalize.py",
             "catalogue": copy / "tests/catalogue/tensors/test_normalize.py",
             "notebook": copy / "solutions/01_tensors.ipynb"}
    assert all(str(path.relative_to(copy)) in made.stdout for path in files.values()), made.stdout
    for kind, todo, text in FILLED_IN:
        path = files[kind]
        source = path.read_text(encoding="utf-8")
        if kind == "notebook":  # JSON: the text as the notebook stores it
            todo, text = json.dumps(todo)[1:-1], json.dumps(text)[1:-1]
        assert source.count(todo) == 1, (kind, todo)
        path.write_text(source.replace(todo, text), encoding="utf-8")
    run(copy, "-m", "course_utils.authoring", "release")
    return copy


def test_the_instructor_writes_under_forty_lines():
    written = sum(len(text.splitlines()) for _, _, text in FILLED_IN)
    assert written <= 40, written


def test_every_todo_is_filled_and_the_notebooks_are_in_sync(course_with_normalize):
    copy = course_with_normalize
    run(copy, "-m", "course_utils.authoring", "check")
    for path in ("course_utils/exercises/tensors/normalize.py", "tests/catalogue/tensors/test_normalize.py"):
        assert "TODO: " not in (copy / path).read_text(encoding="utf-8").replace("# TODO", "")
    learner = nbformat.read(copy / "notebooks/01_tensors.ipynb", as_version=4)
    answer = next(cell for cell in learner.cells if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "normalize")
    assert "correction=0" not in answer.source, "the learner's notebook must not show the worked answer"


def test_the_gates_pass_catalogue_known_answers_public_cases_and_notebooks(course_with_normalize):
    """Every gate the command prints but the mutation check (the next test reads its report)."""
    copy = course_with_normalize
    env = {"COURSE_SMOKE": "1", "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0", "OMP_WAIT_POLICY": "PASSIVE"}
    ran = 0
    for _, arguments in GATES:
        if arguments[:2] == ["-m", "pytest"]:
            done = run(copy, *arguments, "-q", "-p", "no:randomly", env=env)
            assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-2000:]
            ran += 1
        elif arguments[0] != "tools/mutate_checks.py":
            run(copy, *arguments, env=env)
            ran += 1
    assert ran == len(GATES) - 1
    assert "normalize" in subprocess.run([PYTHON, "-m", "pytest", "-q", "--collect-only", "-p", "no:randomly",
                                          "tests/test_known_answers.py", "-k", "normalize"],
                                         cwd=copy, capture_output=True, text=True).stdout


def test_the_mutation_check_finds_every_slip_of_the_reference(course_with_normalize):
    copy = course_with_normalize
    report = copy / "mutants.json"
    mutation = next(arguments for _, arguments in GATES if arguments[0] == "tools/mutate_checks.py")
    run(copy, *mutation, "--json", str(report))
    exercises = json.loads(report.read_text())["exercises"]
    assert [e["id"] for e in exercises] == ["tensors.normalize"], exercises
    assert exercises[0]["total"] > 5 and exercises[0]["survived"] == 0, exercises[0]


def test_an_exam_release_checks_it_on_public_cases(course_with_normalize, tmp_path):
    copy, out = course_with_normalize, tmp_path / "exam"
    run(copy, "-m", "course_utils.authoring", "release", "--exam", str(out), "--chapters", "tensors")
    assert "correction=0" not in "".join(p.read_text(errors="ignore") for p in out.rglob("*") if p.is_file())
    probe = textwrap.dedent(f"""
        from course_utils.exercises import tensors as ex
        namespace = {{}}
        exec({RIGHT!r}, namespace); print(ex.normalize.verdict(namespace["normalize"]).outcome.value)
        exec({WRONG!r}, namespace); print(ex.normalize.verdict(namespace["normalize"]).message)
    """)
    said = run(out, "-c", probe, env={"PYTHONPATH": str(out)}).stdout
    assert said.startswith("passed") and "sample std" not in said and "wrong values" in said, said


def test_grading_scores_a_right_and_a_wrong_submission(course_with_normalize, tmp_path):
    from test_grading_options import GRADER_ARGS, clean_env, sandbox_args

    copy = course_with_normalize
    learner = nbformat.read(copy / "notebooks/01_tensors.ipynb", as_version=4)
    for name, answer in (("alice", RIGHT), ("bob", WRONG)):
        for cell in learner.cells:
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "normalize":
                cell.source = answer
        (tmp_path / "submissions" / name).mkdir(parents=True)
        nbformat.write(learner, tmp_path / "submissions" / name / "01_tensors.ipynb")
    out = tmp_path / "results"
    done = subprocess.run([PYTHON, "-m", "course_utils.grading", str(tmp_path / "submissions"), "--out", str(out),
                           "--course", str(copy), *GRADER_ARGS, *sandbox_args()], cwd=copy, env=clean_env(),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    scores = {name: json.loads((out / f"{name}.json").read_text())["notebooks"]["01_tensors"]["exercises"]["normalize"]
              for name in ("alice", "bob")}
    assert scores["alice"]["score"] == 1, scores["alice"]
    assert scores["bob"]["score"] == 0 and scores["bob"]["mistake"] == "normalize.sample-std", scores["bob"]


@pytest.fixture
def small_course(tmp_path):
    """The files new-exercise writes into: chapter 01's package listing and solution notebook."""
    import shutil

    from course_copies import ROOT

    (tmp_path / "course_utils/exercises/tensors").mkdir(parents=True)
    shutil.copy2(ROOT / "course_utils/exercises/tensors/__init__.py", tmp_path / "course_utils/exercises/tensors")
    (tmp_path / "solutions").mkdir()
    shutil.copy2(ROOT / "solutions/01_tensors.ipynb", tmp_path / "solutions")
    return tmp_path


def test_after_puts_the_cells_and_the_listing_right_after_that_exercise(small_course):
    from course_utils.authoring.new_exercise import new_exercise

    new_exercise(small_course, "01", "pairwise_gap", ("a", "b"), after="outer_sum")
    cells = nbformat.read(small_course / "solutions/01_tensors.ipynb", as_version=4).cells
    ids = [cell.get("id") for cell in cells]
    at = ids.index("check_outer_sum")
    assert ids[at + 1: at + 4] == ["pairwise_gap-task", "pairwise_gap", "check_pairwise_gap"]
    assert cells[at + 2].source.startswith("def pairwise_gap(a, b):")
    assert cells[at + 2].metadata.nbgrader == {"grade": False, "grade_id": "pairwise_gap", "locked": False,
                                               "schema_version": 3, "solution": True}
    assert cells[at + 3].metadata.nbgrader["grade"] is True and cells[at + 3].source == "ex.pairwise_gap.check(pairwise_gap)"
    listing = (small_course / "course_utils/exercises/tensors/__init__.py").read_text().splitlines()
    mine = next(i for i, line in enumerate(listing) if "pairwise_gap import" in line)
    assert "outer_sum import outer_sum" in listing[mine - 1]
    module = (small_course / "course_utils/exercises/tensors/pairwise_gap.py").read_text()
    assert "def pairwise_gap(a, b):" in module and "params=('a', 'b')" in module
    compile(module, "pairwise_gap.py", "exec")
    assert "ex.pairwise_gap" in (small_course / "tests/catalogue/tensors/test_pairwise_gap.py").read_text()


def test_a_name_taken_an_unknown_chapter_or_a_bad_name_is_refused_and_nothing_written(small_course):
    from course_utils.authoring.errors import AuthoringError
    from course_utils.authoring.new_exercise import new_exercise

    before = (small_course / "solutions/01_tensors.ipynb").read_bytes()
    for chapter, name, says in (("01", "outer_sum", "exists already"), ("09", "gap", "names no chapter"),
                                ("01", "Gap", "lower-case Python names"), ("02", "gap", "not a package")):
        with pytest.raises(AuthoringError, match=says):
            new_exercise(small_course, chapter, name)
    assert (small_course / "solutions/01_tensors.ipynb").read_bytes() == before
    assert not list((small_course / "course_utils/exercises/tensors").glob("*.py"))[1:]


# --------------------------------------------------------------------------------------------
# INSTRUCTORS.md and the command say the same
# --------------------------------------------------------------------------------------------
def _page_section() -> str:
    page = (ROOT / "INSTRUCTORS.md").read_text(encoding="utf-8")
    start = page.index("### Your own exercise in fifteen minutes")
    return page[start:page.index("\n### ", start + 1)]


def _code_block(section: str, language: str, after: str) -> str:
    """The first ``language`` code block after the words ``after``, dedented."""
    found = re.search(r"^( *)```" + language + r"\n(.*?)^\1```", section[section.index(after):], re.S | re.M)
    assert found, f"no {language} block after {after!r}"
    return textwrap.dedent(found.group(2))


def test_the_page_shows_the_gates_the_command_prints():
    from course_utils.authoring.new_exercise import NewExercise, gates_text, next_steps

    shown = _code_block(_page_section(), "bash", "Then run the gates").rstrip("\n")
    assert shown == gates_text("tensors", "normalize", "01_tensors")
    made = NewExercise(*(Path(p) for p in ("m.py", "c.py", "solutions/01_tensors.ipynb", "i.py")))
    printed = next_steps(made, "tensors", "normalize")
    gate_lines = printed.splitlines()[printed.splitlines().index("Then run the gates, in this order, from the "
                                                                 "course's folder (each names what is still missing):") + 1:]
    assert textwrap.dedent("\n".join(gate_lines)) == shown, printed
    # every command the page shows is a gate, once, in the gates' order
    commands = [line for line in shown.splitlines() if line.startswith(".venv/bin/python")]
    assert [command.split()[1:3] for command in commands] == [arguments[:2] for _, arguments in GATES]


def _page_example() -> tuple[str, dict]:
    import torch

    from course_utils.exercises import quick

    source = _code_block(_page_section(), "python", "Filled in, the example's module reads")
    namespace = {"torch": torch, "quick": quick, "CHAPTER": "tensors", "__name__": "page_example"}
    exec(compile(source, "INSTRUCTORS.md", "exec"), namespace)
    return source, namespace


def test_the_pages_example_runs_its_reference_passes_and_its_slip_is_named():
    import torch

    _, namespace = _page_example()
    exercise = namespace["normalize"]
    verdict = exercise.verdict(exercise.reference)
    assert verdict.passed and verdict.message == "Correct: each column now has mean 0 and population std 1."
    sample = exercise.verdict(lambda x: (x - x.mean(0)) / x.std(0))
    assert sample.mistake == "normalize.sample-std" and "sample std" in sample.message, sample
    assert exercise.verdict(lambda x: x - x.mean(0)).mistake == "values"
    for arguments, expected in exercise.known_answers:
        torch.testing.assert_close(exercise.reference(*arguments), expected)
    # the task the page states: mean 0 and population std 1 in every column
    x = torch.randn(7, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out = exercise.reference(x)
    torch.testing.assert_close(out.mean(0), torch.zeros(3, dtype=torch.float64))
    torch.testing.assert_close(out.std(0, correction=0), torch.ones(3, dtype=torch.float64))


def test_the_pages_example_is_the_one_filled_in_here():
    """The end-to-end tests above walk the page's example: each text they fill in the module
    is the page's (whitespace aside)."""
    source, _ = _page_example()
    flat = " ".join(source.split())
    for kind, _, text in FILLED_IN:
        if kind == "module":
            assert " ".join(text.split()) in flat, text


def test_the_scaffold_asks_for_a_passed_message_that_says_what_was_right():
    from course_utils.authoring.new_exercise import module_text

    text = module_text("tensors", "gap", ("a", "b"))
    assert text.count("passed_message=") == 1 and '"Correct: TODO: ' in text
    namespace = {}
    exec(text, namespace)
    assert namespace["gap"].passed_message.startswith("Correct: ")
    assert namespace["gap"].passed_message != "Correct."
