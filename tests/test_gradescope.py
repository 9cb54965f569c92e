"""The Gradescope autograder (course_utils/grading/gradescope.py): results.json, the zip, and
``run_autograder`` run end to end against a folder laid out as Gradescope lays out /autograder.

The end-to-end runs grade with the real grader, against the frozen grading course
(``tests/grading_course``, through ``GRADESCOPE_COURSE``), with this Python (``COURSE_PYTHON``),
two at once:

* right: ``solutions/01_tensors.ipynb`` handed in as ``homework1.ipynb`` (a notebook is known by
  its answer cells, not its name); sandboxed wherever bubblewrap works here, as on Gradescope
  run_autograder decides that itself;
* another chapter: ``solutions/02_autograd.ipynb`` handed in as ``homework1.ipynb`` to the
  01_tensors assignment: not graded, every 01_tensors exercise 0 and the reason given;
* tampering: an exam autograder (``--exam --chapters 01``), ``GRADESCOPE_NO_SANDBOX=1`` and no
  pids cgroup (what Gradescope's containers usually give), every answer right, but one answer cell also changes a file of the
  autograder's course and leaves a detached process behind: the grade is 0, the file is named,
  and no process survives.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

import grading_fixtures as gf
from course_utils.grading import gradescope
from course_utils.grading.gradescope import BuildError, build_autograder, results_json
from grading_fixtures import TENSOR_EXERCISES, TENSORS
from slow_machine import scaled

ROOT = gf.ROOT
RUN_TIMEOUT_S = 600


# --------------------------------------------------------------------------------------------
# results.json, from hand-written results
# --------------------------------------------------------------------------------------------
def part(score, outcome, reason):
    return {"score": score, "max": 1, "outcome": outcome, "reason": reason, "mistake": None}


PRACTICE = {
    "learner": "student", "sandbox": "bubblewrap", "exam": False, "reveal_hidden": False,
    "problems": ["02_autograd.ipynb: a second notebook for 01_tensors; only the first counts"],
    "notebooks": {"01_tensors": {
        "exercises": {"outer_sum": part(1, "passed", "Correct: broadcasting made every pair."),
                      "residuals": part(0, "failed", "residuals returned shape (4, 1), expected (4,).")},
        "score": 1, "max": 2, "problems": ["timeout: a cell ran past 60 s"]}},
    "total": 1, "max": 2,
}


def exam_entry(public, hidden):
    return {"score": public["score"] + hidden["score"], "max": 2, "outcome": hidden["outcome"],
            "reason": hidden["reason"], "public": public, "hidden": hidden}


EXAM = {
    "learner": "student", "sandbox": "none: switched off with --no-sandbox (bwrap is not installed)",
    "exam": True, "reveal_hidden": False, "problems": [],
    "notebooks": {"01_tensors": {
        "exercises": {
            "outer_sum": exam_entry(part(1, "passed", "Right on the public cases."),
                                    part(0, "failed", "On a (3,) and a (0,) input: shape (0, 3), expected (3, 0).")),
            "residuals": exam_entry(part(1, "passed", "Right on the public cases."),
                                    part(1, "passed", "Correct: one error per sample.")),
        },
        "score": 3, "max": 4, "problems": []}},
    "total": 3, "max": 4,
}


def test_results_json_practice():
    assert results_json(PRACTICE) == {
        "score": 1,
        "tests": [
            {"name": "01_tensors / outer_sum", "score": 1, "max_score": 1, "status": "passed",
             "output": "Correct: broadcasting made every pair.", "visibility": "visible"},
            {"name": "01_tensors / residuals", "score": 0, "max_score": 1, "status": "failed",
             "output": "residuals returned shape (4, 1), expected (4,).", "visibility": "visible"},
        ],
        "stdout_visibility": "hidden",
        "output": "02_autograd.ipynb: a second notebook for 01_tensors; only the first counts\n"
                  "01_tensors: timeout: a cell ran past 60 s",
    }


def test_results_json_exam_hides_what_the_hidden_cases_found():
    assert results_json(EXAM) == {
        "score": 3,
        "tests": [
            {"name": "01_tensors / outer_sum: public cases", "score": 1, "max_score": 1, "status": "passed",
             "output": "Right on the public cases.", "visibility": "visible"},
            {"name": "01_tensors / outer_sum: hidden cases", "score": 0, "max_score": 1, "status": "failed",
             "output": "failed", "visibility": "after_published"},
            {"name": "01_tensors / residuals: public cases", "score": 1, "max_score": 1, "status": "passed",
             "output": "Right on the public cases.", "visibility": "visible"},
            {"name": "01_tensors / residuals: hidden cases", "score": 1, "max_score": 1, "status": "passed",
             "output": "passed", "visibility": "after_published"},
        ],
        "stdout_visibility": "hidden",
        "output": "Graded without the bubblewrap sandbox: switched off with --no-sandbox (bwrap is not "
                  "installed). Gradescope runs each submission in a container of its own.",
    }
    revealed = results_json({**EXAM, "reveal_hidden": True})
    assert [t["output"] for t in revealed["tests"]][1::2] == [
        "On a (3,) and a (0,) input: shape (0, 3), expected (3, 0).", "Correct: one error per sample."]
    assert {t["visibility"] for t in revealed["tests"][1::2]} == {"after_published"}


def test_results_json_orders_by_the_course_and_scores_chapters_not_handed_in():
    chapters = {"01_tensors": ["residuals", "outer_sum", "checked_mse"], "02_autograd": ["softplus"]}
    practice = results_json(PRACTICE, chapters)
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in practice["tests"]] == [
        ("01_tensors / residuals", 0, 1, "failed"),
        ("01_tensors / outer_sum", 1, 1, "passed"),
        ("01_tensors / checked_mse", 0, 1, "failed"),
        ("02_autograd / softplus", 0, 1, "failed"),
    ]
    assert practice["score"] == 1
    assert practice["tests"][3]["output"] == "missing: no notebook for 02_autograd was graded"
    exam = results_json(EXAM, {"01_tensors": ["outer_sum", "residuals"], "02_autograd": ["softplus"]})
    assert [(t["name"], t["max_score"], t["visibility"]) for t in exam["tests"][4:]] == [
        ("02_autograd / softplus: public cases", 1, "visible"),
        ("02_autograd / softplus: hidden cases", 1, "after_published")]
    assert exam["score"] == 3 and sum(t["max_score"] for t in exam["tests"]) == 6


def test_results_json_reports_the_assignments_chapters_only():
    """A chapter the assignment does not expect is no test; the expected one, absent, scores 0
    with the reason given."""
    autograd = {"learner": "student", "sandbox": "bubblewrap", "exam": False, "problems": [],
                "notebooks": {"02_autograd": {"exercises": {"softplus": part(1, "passed", "Correct.")},
                                              "score": 1, "max": 1, "problems": []}}}
    why = "not graded: homework1.ipynb is chapter 02_autograd's notebook; this assignment is 01_tensors"
    results = results_json(autograd, {"01_tensors": ["outer_sum", "residuals"]}, why)
    assert [(t["name"], t["score"], t["max_score"], t["status"], t["output"]) for t in results["tests"]] == [
        ("01_tensors / outer_sum", 0, 1, "failed", why), ("01_tensors / residuals", 0, 1, "failed", why)]
    assert results["score"] == 0


def test_results_json_of_a_result_with_nothing_graded():
    broken = {"learner": "student", "sandbox": "bubblewrap", "notebooks": {}, "problems": ["no notebook submitted"]}
    assert results_json(broken) == {"score": 0, "tests": [], "stdout_visibility": "hidden",
                                    "output": "no notebook submitted"}


# --------------------------------------------------------------------------------------------
# Which notebooks of a submission are graded; what counts as a change to the course
# --------------------------------------------------------------------------------------------
def test_submitted_notebooks(tmp_path):
    submission = tmp_path / "submission"
    for name in ("01_tensors.ipynb", "notes/02_autograd.ipynb", ".ipynb_checkpoints/01_tensors-checkpoint.ipynb",
                 "backups/01_tensors.2026.ipynb", ".hidden/x.ipynb", "notes/readme.txt"):
        (submission / name).parent.mkdir(parents=True, exist_ok=True)
        (submission / name).write_text("{}")
    (submission / "linked.ipynb").symlink_to(submission / "01_tensors.ipynb")
    found = [p.relative_to(submission).as_posix() for p in gradescope.submitted_notebooks(submission)]
    assert found == ["01_tensors.ipynb", "notes/02_autograd.ipynb"]
    # A whole course folder handed in: my-work/ holds the learner's notebooks, notebooks/ the blank ones.
    for name in ("course/notebooks/01_tensors.ipynb", "course/my-work/01_tensors.ipynb",
                 "course/my-work/backups/01_tensors.old.ipynb"):
        (submission / name).parent.mkdir(parents=True, exist_ok=True)
        (submission / name).write_text("{}")
    found = [p.relative_to(submission).as_posix() for p in gradescope.submitted_notebooks(submission)]
    assert found == ["course/my-work/01_tensors.ipynb"]
    assert gradescope.submitted_notebooks(tmp_path / "nothing") == []


def answer_notebook(path: Path, ids: list[str]) -> Path:
    """A notebook whose answer cells have these grade ids."""
    nb = nbformat.v4.new_notebook()
    for grade_id in ids:
        cell = nbformat.v4.new_code_cell("pass")
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": True}
        nb.cells.append(cell)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_notebooks_are_sorted_by_the_chapter_their_answer_cells_belong_to(tmp_path):
    answer_cells = {"01_tensors": ["outer_sum", "residuals"], "02_autograd": ["softplus", "sgd_update"],
                    "03_models": ["tiny_mlp"]}
    right = answer_notebook(tmp_path / "homework1.ipynb", ["outer_sum", "residuals"])
    misnamed = answer_notebook(tmp_path / "01_tensors.ipynb", ["softplus", "sgd_update"])
    other = answer_notebook(tmp_path / "notes" / "week2.ipynb", ["softplus", "outer_sum", "sgd_update"])
    no_answers = answer_notebook(tmp_path / "scratch.ipynb", [])
    named_other = answer_notebook(tmp_path / "03_models.ipynb", [])
    broken = tmp_path / "broken.ipynb"
    broken.write_text("not json")
    found = [right, misnamed, other, no_answers, named_other, broken]
    to_grade, elsewhere = gradescope.sort_by_chapter(found, answer_cells, ["01_tensors"])
    # What is not recognisably another chapter's goes to the grader, which says what it finds.
    assert to_grade == [right, no_answers, broken]
    assert elsewhere == [(misnamed, "02_autograd"), (other, "02_autograd"), (named_other, "03_models")]
    assert gradescope.another_chapter_notes(elsewhere, ["01_tensors"]) == [
        "01_tensors.ipynb: this is chapter 02_autograd's notebook; this assignment is 01_tensors. Not graded.",
        "week2.ipynb: this is chapter 02_autograd's notebook; this assignment is 01_tensors. Not graded.",
        "03_models.ipynb: this is chapter 03_models's notebook; this assignment is 01_tensors. Not graded.",
    ]
    assert gradescope.another_chapter_reason(elsewhere[:1], ["01_tensors", "03_models"]) == (
        "not graded: 01_tensors.ipynb is chapter 02_autograd's notebook; this assignment is "
        "01_tensors and 03_models")


def test_grader_command_passes_the_exam_hint_policy(tmp_path):
    """run_autograder gives the grader the hint policy the exam was released with, so that the
    public checks' feedback shows no more hints than the release did."""
    def command(config, problem=None):
        return gradescope.grader_command(config, tmp_path / "subs", tmp_path / "out", tmp_path / "course", problem)

    base = {"exam": False, "reveal_hidden": False, "hints": None, "chapters": ["01_tensors"],
            "grader_options": ["--cell-timeout", "30"]}
    practice = command(base)
    assert practice[1:5] == ["-m", "course_utils.grading.gradescope", "grade", str(tmp_path / "subs")]
    assert "--exam" not in practice and "--hints" not in practice and "--no-sandbox" not in practice
    assert practice[practice.index("--cell-timeout") + 1] == "30"
    exam = command({**base, "exam": True, "hints": "first", "reveal_hidden": True}, "bwrap is not installed")
    assert exam[exam.index("--exam"):] == ["--exam", "--hints", "first", "--reveal-hidden", "--no-sandbox"]


def test_changed_files(tmp_path):
    package = tmp_path / "pkg"
    (package / "__pycache__").mkdir(parents=True)
    for name in ("a.py", "b.py", "c.py", "f.py", "__pycache__/a.cpython-311.pyc"):
        (package / name).write_text("x = 1\n")
    (tmp_path / "other.py").write_text("y = 1\n")
    before = gradescope.file_states([tmp_path], [package])
    assert gradescope.changed_files(before, gradescope.file_states([tmp_path], [package])) == []
    (package / "a.py").write_text("x = 2\n")  # same size, new contents
    (package / "b.py").unlink()
    (package / "d.py").write_text("")
    (package / "__pycache__" / "c.cpython-311.pyc").write_bytes(b"")  # compiled: allowed
    (package / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"forged")  # rewritten: not
    (package / "e.pyc").write_bytes(b"")  # a .pyc outside __pycache__: not
    times = (package / "f.py").stat()
    (package / "f.py").write_text("x = 3\n")  # new contents, its times put back: the contents tell
    os.utime(package / "f.py", ns=(times.st_atime_ns, times.st_mtime_ns))
    os.link(tmp_path / "other.py", tmp_path / "elsewhere")  # a hard link made to it: not a change
    (tmp_path / "elsewhere").unlink()
    after = gradescope.file_states([tmp_path], [package])
    assert gradescope.changed_files(before, after) == sorted(
        str(package / name) for name in ("a.py", "b.py", "d.py", "e.pyc", "f.py", "__pycache__/a.cpython-311.pyc"))


# --------------------------------------------------------------------------------------------
# The zip
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    return build_autograder(ROOT, tmp_path_factory.mktemp("gradescope-zip") / "autograder.zip", chapters=["01"])


def extract(zip_path: Path, root: Path) -> Path:
    """Lay the zip out as Gradescope does: /autograder/source/, run_autograder copied to /autograder/."""
    source = root / "autograder" / "source"
    with zipfile.ZipFile(zip_path) as archive:
        for info in archive.infolist():
            path = archive.extract(info, source)
            os.chmod(path, (info.external_attr >> 16) & 0o777 or 0o644)
    shutil.copy2(source / "run_autograder", root / "autograder" / "run_autograder")
    (root / "autograder" / "submission").mkdir()
    return root / "autograder"


def test_zip_holds_what_the_grader_needs_and_nothing_else(autograder_zip, tmp_path):
    with zipfile.ZipFile(autograder_zip) as archive:
        infos = {info.filename: info for info in archive.infolist()}
        config = json.loads(archive.read("gradescope.json"))
    names = set(infos)
    for name in ("setup.sh", "run_autograder", "gradescope.json", "course", "README.md", "requirements.txt",
                 "pyproject.toml", "course_utils/grading/__main__.py", "course_utils/grading/gradescope.py",
                 "course_utils/exercises/tensors/outer_sum.py", "notebooks/01_tensors.ipynb", "course_utils/files/data/digits.csv.gz"):
        assert name in names, name
    for prefix in ("solutions/", ".venv/", ".git/", "my-work/", ".course/", "tests/", "_site/", "book/"):
        assert not any(name.startswith(prefix) for name in names), prefix
    assert not any("__pycache__" in name or name.endswith(".pyc") or ".ipynb_checkpoints" in name for name in names)
    for name in ("setup.sh", "run_autograder", "course"):
        assert stat.S_IMODE(infos[name].external_attr >> 16) == 0o755, name
    answer_cells = config.pop("answer_cells")
    assert config == {"exam": False, "reveal_hidden": False, "hints": None, "chapters": ["01_tensors"],
                      "grader_options": []}
    # Every chapter's answer cells, to recognise a notebook of another chapter than the assignment's.
    assert list(answer_cells) == sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
    assert set(TENSOR_EXERCISES) <= set(answer_cells["01_tensors"]) and "softplus" in answer_cells["02_autograd"]

    source = extract(autograder_zip, tmp_path) / "source"
    for script in ("setup.sh", "run_autograder"):
        check = subprocess.run(["bash", "-n", str(source / script)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    assert os.access(tmp_path / "autograder" / "run_autograder", os.X_OK)
    setup = (source / "setup.sh").read_text()
    assert "apt-get install" in setup and "python3-venv" in setup and "bubblewrap" in setup
    assert "./course setup" in setup


def test_zip_for_an_exam_of_some_chapters(tmp_path):
    out = build_autograder(ROOT, tmp_path / "exam.zip", exam=True, chapters=["autograd", "01"],
                           hints="first", grader_options=["--cell-timeout", "30"])
    with zipfile.ZipFile(out) as archive:
        notebooks = sorted(n for n in archive.namelist() if n.startswith("notebooks/") and n.endswith(".ipynb"))
        config = json.loads(archive.read("gradescope.json"))
    assert notebooks == ["notebooks/01_tensors.ipynb", "notebooks/02_autograd.ipynb"]
    del config["answer_cells"]
    assert config == {"exam": True, "reveal_hidden": False, "hints": "first",
                      "chapters": ["01_tensors", "02_autograd"], "grader_options": ["--cell-timeout", "30"]}
    with pytest.raises(BuildError, match="names no chapter"):
        build_autograder(ROOT, tmp_path / "x.zip", chapters=["99"])
    with pytest.raises(BuildError, match="goes with --exam"):
        build_autograder(ROOT, tmp_path / "x.zip", chapters=["01"], reveal_hidden=True)
    with pytest.raises(BuildError, match="goes with --exam"):
        build_autograder(ROOT, tmp_path / "x.zip", chapters=["01"], hints="all")
    with pytest.raises(BuildError, match="no course"):
        build_autograder(tmp_path, tmp_path / "x.zip", chapters=["01"])
    assert not (tmp_path / "x.zip").exists()


def test_building_needs_the_assignments_chapters(tmp_path, capsys):
    """A Gradescope assignment is one assignment: without its chapters, the autograder would
    grade whatever chapter was handed in as if it were the assignment."""
    for chapters in (None, []):
        with pytest.raises(BuildError, match="--chapters"):
            build_autograder(ROOT, tmp_path / "x.zip", chapters=chapters)
    with pytest.raises(SystemExit) as refused:
        gradescope.main(["--out", str(tmp_path / "x.zip"), "--course", str(ROOT)])
    assert refused.value.code == 2 and "--chapters" in capsys.readouterr().err
    assert not (tmp_path / "x.zip").exists()


def test_zip_is_the_same_bytes_each_time(tmp_path):
    first = build_autograder(ROOT, tmp_path / "a.zip", chapters=["01"])
    second = build_autograder(ROOT, tmp_path / "b.zip", chapters=["01"])
    assert first.read_bytes() == second.read_bytes()


# --------------------------------------------------------------------------------------------
# setup.sh on an image faked in a folder: which Python it hands the course
# --------------------------------------------------------------------------------------------
def fake_program(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def fake_python(path: Path, version: str, installed_when: Path | None = None) -> None:
    """A python that prints ``version`` for -V and answers the course's version check as that
    version would (3.10 to 3.14 pass); with ``installed_when``, only once that file exists."""
    minor = int(version.split(".")[1])
    installed = f'[ -e "{installed_when}" ] || exit 127\n' if installed_when else ""
    fake_program(path, f'{installed}[ "$1" = -V ] && echo "Python {version}"\nexit {0 if 10 <= minor <= 14 else 1}\n')


def run_setup(tmp_path: Path, python3: str, apt_has: tuple[int, ...] = (), apt: bool = True):
    """setup.sh on a faked image: a python3 of version ``python3``; apt-get and apt-cache that
    know the packages python3.X and python3.X-venv for X in ``apt_has`` (installing one puts that
    python3.X on PATH); on PATH nothing else but bash and sed. The course's ``./course setup``
    only notes the Python it was handed."""
    root, bin_dir, log = tmp_path / "autograder", tmp_path / "bin", tmp_path / "log"
    source = root / "source"
    (source / ".venv" / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    for tool in ("bash", "sed"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    with zipfile.ZipFile(build_autograder(ROOT, tmp_path / "ag.zip", chapters=["01"])) as archive:
        (source / "setup.sh").write_bytes(archive.read("setup.sh"))
    bounds = re.findall(r"(?m)^PY_M(?:IN|AX)=\d+$", (ROOT / "course").read_text())
    (source / "course").write_text("\n".join(bounds) + f'\necho "course $* with PYTHON=$PYTHON" >> {log}\n')
    fake_program(source / ".venv" / "bin" / "python", "exit 0\n")
    fake_python(bin_dir / "python3", python3)
    if apt:
        for minor in apt_has:
            fake_python(bin_dir / f"python3.{minor}", f"3.{minor}.1", installed_when=bin_dir / f"installed-python3.{minor}")
        known = " ".join(f"python3.{minor} python3.{minor}-venv" for minor in apt_has)
        fake_program(bin_dir / "apt-cache", f'for p in {known}; do [ "$2" = "$p" ] && exit 0; done\nexit 100\n')
        fake_program(bin_dir / "apt-get", f'echo "apt-get $*" >> {log}\nfor arg; do : > "{bin_dir}/installed-$arg"; done\n')
    done = subprocess.run([shutil.which("bash"), str(source / "setup.sh")], capture_output=True, text=True,
                          env={"PATH": str(bin_dir), "GRADESCOPE_ROOT": str(root), "HOME": str(tmp_path)})
    return done, (log.read_text() if log.exists() else "")


IMAGE_ADVICE = "Base Image OS: Ubuntu, Base Image Version: 22.04, Base Image Variant: Base"


def test_setup_sh_uses_the_images_python_when_the_course_supports_it(tmp_path):
    done, log = run_setup(tmp_path, "3.10.12")  # Ubuntu 22.04's
    assert done.returncode == 0, done.stderr
    assert log.splitlines() == ["apt-get update",
                                "apt-get install -y --no-install-recommends python3 python3-venv bubblewrap",
                                "course setup with PYTHON=python3"]


def test_setup_sh_installs_a_supported_python_beside_an_older_one(tmp_path):
    done, log = run_setup(tmp_path, "3.8.10", apt_has=(11, 12))  # Ubuntu 20.04's python3, a newer one in apt
    assert done.returncode == 0, done.stderr
    assert log.splitlines()[2:] == ["apt-get install -y --no-install-recommends python3.12 python3.12-venv",
                                    "course setup with PYTHON=python3.12"]
    assert "3.8.10" in (tmp_path / "bin" / "python3").read_text()  # python3 itself left as it was


def test_setup_sh_says_which_image_to_pick_when_no_python_fits(tmp_path):
    done, log = run_setup(tmp_path, "3.8.10")
    assert done.returncode != 0 and "course setup" not in log
    said = " ".join(done.stderr.split())
    assert "Python 3.8.10" in said and "3.10 to 3.14" in said and IMAGE_ADVICE in said, said
    done, log = run_setup(tmp_path / "fedora", "3.12.1", apt=False)  # no apt-get: not an Ubuntu image
    assert done.returncode != 0 and log == ""
    assert IMAGE_ADVICE in " ".join(done.stderr.split()), done.stderr


def test_command_line(tmp_path, capsys):
    assert gradescope.main(["--out", str(tmp_path / "ag.zip"), "--course", str(ROOT), "--exam",
                            "--chapters", "01", "02", "--notebook-timeout", "300"]) == 0
    advice = " ".join(capsys.readouterr().out.split())
    assert "ag.zip" in advice
    # What Gradescope's Configure Autograder page offers (see the module's docstring), exactly.
    assert "Base Image OS: Ubuntu, Base Image Version: 22.04, Base Image Variant: Base" in advice
    assert "or newer" not in advice and "Python 3.10" in advice
    assert "above 600 s" in advice  # two chapters of 300 s
    with zipfile.ZipFile(tmp_path / "ag.zip") as archive:
        config = json.loads(archive.read("gradescope.json"))
    assert config["exam"] is True and config["chapters"] == ["01_tensors", "02_autograd"]
    assert config["hints"] == "none"  # the release's default, unless told
    assert config["grader_options"][config["grader_options"].index("--notebook-timeout") + 1] == "300"
    assert gradescope.main(["--out", str(tmp_path / "hints.zip"), "--course", str(ROOT), "--exam",
                            "--hints", "first", "--chapters", "01"]) == 0
    with zipfile.ZipFile(tmp_path / "hints.zip") as archive:
        assert json.loads(archive.read("gradescope.json"))["hints"] == "first"
    for wrong in (["--chapters", "nonsense"], ["--chapters", "01", "--hints", "all"],
                  ["--chapters", "01", "--exam", "--hints", "some"]):
        with pytest.raises(SystemExit) as refused:
            gradescope.main(["--out", str(tmp_path / "no.zip"), *wrong])
        assert refused.value.code == 2, wrong


# --------------------------------------------------------------------------------------------
# run_autograder, end to end
# --------------------------------------------------------------------------------------------
def clean_env(root: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in {"COURSE_STRICT", "COURSE_EXPECT", "NBGRADER_EXECUTION", "COURSE_GRADING_NO_SANDBOX",
                        "COURSE_SIMULATED_MACHINE", "PYTHONPATH", "GRADESCOPE_NO_SANDBOX"}}
    env.update(COURSE_NO_PROGRESS="1", GRADESCOPE_ROOT=str(root), COURSE_PYTHON=sys.executable,
               GRADESCOPE_COURSE=str(gf.GRADING_COURSE), **extra)
    return env


@dataclass
class Run:
    root: Path
    returncode: int
    log: str

    def results(self) -> dict:
        path = self.root / "results" / "results.json"
        assert path.exists(), self.log
        return json.loads(path.read_text(encoding="utf-8"))


def assert_valid_results(results: dict) -> None:
    """results.json as Gradescope's specification has it (gradescope-autograders.readthedocs.io,
    "Autograder Specifications"): the fields it names, of the types it gives."""
    visibilities = {"hidden", "after_due_date", "after_published", "visible"}
    assert set(results) <= {"score", "execution_time", "output", "output_format", "visibility",
                            "stdout_visibility", "extra_data", "tests"}, set(results)
    assert isinstance(results["score"], (int, float)) and results["stdout_visibility"] in visibilities
    assert isinstance(results.get("output", ""), str) and isinstance(results.get("execution_time", 0), int)
    for test in results["tests"]:
        assert set(test) <= {"score", "max_score", "status", "name", "output", "visibility"}, test
        assert isinstance(test["score"], (int, float)) and isinstance(test["max_score"], (int, float))
        assert test["status"] in {"passed", "failed"} and test["visibility"] in visibilities
        assert isinstance(test["name"], str) and isinstance(test["output"], str)


def grader_takes_hints() -> bool:
    """Whether the course's grader has the exam hint policy option (``--hints``) yet."""
    from course_utils.grading.__main__ import grade_main

    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.suppress(SystemExit):
        grade_main(["--help"])
    return "--hints" in shown.getvalue()


def tamper_code(target: Path, marker: str) -> str:
    """Append a line to ``target`` and leave a process in a session of its own, with an
    environment of its own (so neither the kernel's process group nor its HOME finds it)."""
    return (
        "import subprocess as _sp\n"
        f"with open({str(target)!r}, 'a') as _f:\n"
        "    _f.write('\\n# changed by a submission\\n')\n"
        f"_sp.Popen(['sh', '-c', \"(exec env -i /bin/sh -c 'sleep 300; : {marker}' &)\"], start_new_session=True,\n"
        "          stdin=_sp.DEVNULL, stdout=_sp.DEVNULL, stderr=_sp.DEVNULL)\n"
    )


@pytest.fixture(scope="module")
def runs(autograder_zip, tmp_path_factory):
    right = extract(autograder_zip, tmp_path_factory.mktemp("gradescope-right"))
    shutil.copy2(gf.GRADING_COURSE / "solutions" / f"{TENSORS}.ipynb", right / "submission" / "homework1.ipynb")
    another = extract(autograder_zip, tmp_path_factory.mktemp("gradescope-another"))
    shutil.copy2(gf.GRADING_COURSE / "solutions" / "02_autograd.ipynb", another / "submission" / "homework1.ipynb")

    exam_zip = build_autograder(ROOT, tmp_path_factory.mktemp("gradescope-exam-zip") / "exam.zip",
                                exam=True, chapters=["01"])
    tampering = extract(exam_zip, tmp_path_factory.mktemp("gradescope-tampering"))
    marker = gf.new_marker("gradescope")
    target = tampering / "source" / "course_utils" / "exercises" / "tensors.py"
    (tampering / "submission" / "my-work").mkdir()
    nbformat.write(gf.submission(prepend={"outer_sum": tamper_code(target, marker)}),
                   tampering / "submission" / "my-work" / f"{TENSORS}.ipynb")
    # As in Gradescope's container (Docker mounts /sys/fs/cgroup read-only): no pids cgroup, so
    # the grader itself finds a detached process only by its process group and its HOME.
    processes = tampering / "source" / "course_utils" / "grading" / "processes.py"
    code = processes.read_text(encoding="utf-8")
    assert code.count("\n_CANDIDATES = ") == 1
    processes.write_text(re.sub(r"\n_CANDIDATES = .*", "\n_CANDIDATES = ()", code), encoding="utf-8")
    if not grader_takes_hints():
        # Until the grader has --hints, this run's autograder leaves it out;
        # test_grader_command_passes_the_exam_hint_policy checks that run_autograder passes it.
        config_file = tampering / "source" / "gradescope.json"
        config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "hints": None}))

    started = {}
    for name, root, extra in (("right", right, {}), ("another", another, {}),
                              ("tampering", tampering, {"GRADESCOPE_NO_SANDBOX": "1"})):
        log = open(root / "run.log", "w+")
        process = subprocess.Popen([str(root / "run_autograder")], cwd=root, env=clean_env(root, **extra),
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        started[name] = (root, process, log)
    done = {}
    try:
        for name, (root, process, log) in started.items():
            process.wait(timeout=scaled(RUN_TIMEOUT_S))
            log.seek(0)
            done[name] = Run(root, process.returncode, log.read())
    finally:
        for root, process, log in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()
    done["marker"] = marker
    done["target"] = target
    yield done
    gf.kill_pids(gf.processes_with_marker(marker))


def test_run_autograder_grades_a_right_submission(runs):
    from course_utils.grading.sandbox import bubblewrap_problem

    run = runs["right"]
    assert run.returncode == 0, run.log
    results = run.results()
    assert [t["name"] for t in results["tests"]] == [f"{TENSORS} / {name}" for name in TENSOR_EXERCISES]
    assert all(t["status"] == "passed" and t["visibility"] == "visible" for t in results["tests"]), results
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) == len(TENSOR_EXERCISES)
    assert results["output"].startswith("Notebooks found: homework1.ipynb")
    assert_valid_results(results)
    unsandboxed = "Graded without the bubblewrap sandbox" in results["output"]
    assert unsandboxed == (bubblewrap_problem() is not None), results["output"]
    assert isinstance(results["execution_time"], int)


def test_run_autograder_scores_another_chapters_notebook_0(runs):
    """The 01_tensors assignment, handed chapter 02's notebook: not graded as if it were the
    assignment; each 01_tensors exercise 0, saying why."""
    run = runs["another"]
    assert run.returncode == 0, run.log
    results = run.results()
    assert_valid_results(results)
    assert [t["name"] for t in results["tests"]] == [f"{TENSORS} / {name}" for name in TENSOR_EXERCISES]
    assert results["score"] == 0
    why = "not graded: homework1.ipynb is chapter 02_autograd's notebook; this assignment is 01_tensors"
    assert [(t["score"], t["max_score"], t["status"], t["output"]) for t in results["tests"]] == [
        (0, 1, "failed", why)] * len(TENSOR_EXERCISES)
    assert results["output"].splitlines()[:2] == [
        "Notebooks found: homework1.ipynb",
        "homework1.ipynb: this is chapter 02_autograd's notebook; this assignment is 01_tensors. Not graded."]
    assert "Grading 1 learners" not in run.log  # nothing of it ran


def test_run_autograder_unsandboxed_catches_a_changed_course(runs):
    run = runs["tampering"]
    assert run.returncode == 0, run.log
    results = run.results()
    assert_valid_results(results)
    # An exam: public and hidden cases of each exercise. The grading itself was right (the
    # grader had imported its checks before the answer ran) ...
    assert [t["name"] for t in results["tests"]] == [
        f"{TENSORS} / {name}: {part} cases" for name in TENSOR_EXERCISES for part in ("public", "hidden")]
    assert all(t["status"] == "passed" for t in results["tests"]), results
    assert [t["visibility"] for t in results["tests"]] == ["visible", "after_published"] * len(TENSOR_EXERCISES)
    assert [t["output"] for t in results["tests"]][1::2] == ["passed"] * len(TENSOR_EXERCISES)
    # ... but the submission changed the autograder's course: 0, and the file named.
    assert results["score"] == 0
    assert str(runs["target"].resolve()) in results["extra_data"]["changed_files"]
    assert "changed files of the grader" in results["output"]
    assert "Graded without the bubblewrap sandbox" in results["output"]
    assert "sandbox: none (GRADESCOPE_NO_SANDBOX is set)" in run.log
    # Nothing the submission started outlives run_autograder: the process it left behind in a
    # session and an environment of its own was ended by the grading worker, the subreaper of its
    # kernels, right after the run (run_autograder, the subreaper of the whole grader, then finds
    # nothing left to end).
    assert gf.processes_with_marker(runs["marker"]) == {}
    assert not re.search(r"Ended \d+ processes left behind after grading", run.log), run.log
