"""A class on a JupyterHub: the learner branch (``hub-branch``), the link (``hub-link``), and
what nbgitpuller itself does with them (course_utils/authoring/hub.py).

The nbgitpuller test runs the real ``gitpuller`` (the pull a hub's link does) from
``.course/venvs/nbgitpuller``, made once from requirements-nbgitpuller.txt by
course_utils/tool_env.py, never in .venv. It is skipped, with the reason, only when that
environment cannot be made (no network to PyPI). Every git repository here is a copy in a tmp
folder: the course's own checkout and its branches are never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils import publication, tool_env
from course_utils.authoring.__main__ import main
from course_utils.authoring.exam import INSTRUCTOR_ONLY

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb"))
REPOSITORY = "https://github.com/ORG/pytorch-course"
LINE = re.compile(r"^learner: ([0-9a-f]{40}), (\d+) chapters( \(nothing changed: no new commit\))?\n$")


@pytest.fixture
def git_env(tmp_path, monkeypatch):
    """git as on a fresh machine: no one's global settings, a known identity."""
    empty = tmp_path / "gitconfig"
    empty.write_text("")
    for name, value in {"GIT_CONFIG_GLOBAL": str(empty), "GIT_CONFIG_NOSYSTEM": "1",
                        "GIT_AUTHOR_NAME": "Instructor", "GIT_AUTHOR_EMAIL": "instructor@example.edu",
                        "GIT_COMMITTER_NAME": "Instructor",
                        "GIT_COMMITTER_EMAIL": "instructor@example.edu"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PYTHONPATH", raising=False)


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


def course_copy(tmp_path: Path) -> Path:
    """A throwaway clone-alike of the course: its notebooks/ and course_utils/, committed on main."""
    course = tmp_path / "course"
    course.mkdir()
    for name in ("notebooks", "course_utils"):
        shutil.copytree(ROOT / name, course / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git(course, "init", "-q", "-b", "main")
    git(course, "add", "-A")
    git(course, "commit", "-q", "-m", "the course")
    return course


def hub_branch(course: Path, capsys, *args: str) -> tuple[str, bool]:
    """Run ``hub-branch`` on ``course``; (the commit, whether a new one was made)."""
    assert main(["hub-branch", "--root", str(course), *args]) == 0
    match = LINE.match(capsys.readouterr().out)
    assert match, "hub-branch prints one line: the branch, the commit, the number of chapters"
    assert int(match.group(2)) == len(sorted((course / "notebooks").glob("*.ipynb")))
    return match.group(1), match.group(3) is None


def checkout_state(course: Path) -> tuple:
    index = (course / ".git" / "index").read_bytes()
    return (git(course, "symbolic-ref", "HEAD"), git(course, "rev-parse", "HEAD"),
            git(course, "status", "--porcelain"), index)


def edit_notebook(path: Path, change) -> None:
    """Change a notebook as Jupyter saves it: nbformat's own layout."""
    notebook = nbformat.read(path, as_version=4)
    change(notebook)
    nbformat.write(notebook, path)


def cell(notebook, cell_id: str):
    return next(c for c in notebook.cells if c.get("id") == cell_id)


def add_line_to_first_cell(notebook, text: str) -> None:
    first = notebook.cells[0]
    assert first.cell_type == "markdown"
    first.source = first.source.replace("\n", f"\n{text}\n", 1)


# -- hub-branch -------------------------------------------------------------------------------
def test_hub_branch_commits_the_learner_tree_without_touching_the_checkout(tmp_path, git_env, capsys):
    course = course_copy(tmp_path)
    # Uncommitted work in the checkout: the branch takes the files as they are.
    edit_notebook(course / "notebooks" / CHAPTERS[1], lambda nb: add_line_to_first_cell(nb, "UNCOMMITTED"))
    (course / "course_utils" / "__pycache__").mkdir(exist_ok=True)
    (course / "course_utils" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    before = checkout_state(course)

    first, made = hub_branch(course, capsys)
    assert made and checkout_state(course) == before
    assert git(course, "rev-parse", "learner") == first
    assert git(course, "rev-list", "--count", "learner") == "1"
    files = git(course, "ls-tree", "-r", "--name-only", "learner").splitlines()
    assert sorted(f for f in files if "/" not in f) == sorted(CHAPTERS + ["README.md"])
    assert {f.split("/")[0] for f in files} == set(CHAPTERS) | {"README.md", "course_utils"}
    package = sorted(f for f in files if f.startswith("course_utils/"))
    for relative in INSTRUCTOR_ONLY:
        assert not [f for f in package if f.startswith(f"course_utils/{relative}/")], relative
    assert not [f for f in package if "__pycache__" in f or f.endswith(".pyc")]
    expected = sorted(
        path.relative_to(course).as_posix() for path in (course / "course_utils").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
        and not any(path.relative_to(course / "course_utils").as_posix().startswith(f"{r}/")
                    for r in INSTRUCTOR_ONLY))
    assert package == expected
    assert "UNCOMMITTED" in git(course, "show", f"learner:{CHAPTERS[1]}")
    readme = git(course, "show", "learner:README.md")
    assert "progress.json" in readme and CHAPTERS[0] in readme

    # The same files again: no commit. A change: a new commit on top of the last one.
    again, made = hub_branch(course, capsys)
    assert (again, made) == (first, False)
    (course / "course_utils" / "syllabus.py").write_text("# changed\n", encoding="utf-8")
    second, made = hub_branch(course, capsys)
    assert made and second != first
    assert git(course, "rev-parse", f"{second}^") == first
    assert checkout_state(course)[:2] == before[:2]


def test_hub_branch_refuses_the_checked_out_branch_and_a_folder_outside_git(tmp_path, git_env, capsys):
    course = course_copy(tmp_path)
    assert main(["hub-branch", "--root", str(course), "--branch", "main"]) == 1
    assert "checked out" in capsys.readouterr().err
    shutil.rmtree(course / ".git")
    assert main(["hub-branch", "--root", str(course)]) == 1
    assert "not in a git repository" in capsys.readouterr().err


# -- hub-link ---------------------------------------------------------------------------------
@pytest.mark.parametrize("args, link", [
    ([], "repo=https%3A%2F%2Fgithub.com%2FORG%2Fpytorch-course"
         "&branch=learner&urlpath=lab%2Ftree%2Fpytorch-course%2F00_environment.ipynb"),
    (["--chapter", "01", "--interface", "notebook", "--branch", "class/2026 spring"],
     "repo=https%3A%2F%2Fgithub.com%2FORG%2Fpytorch-course"
     "&branch=class%2F2026%20spring&urlpath=tree%2Fpytorch-course%2F01_tensors.ipynb"),
    # Another folder than nbgitpuller's own (the repository's name): targetPath says it.
    (["--folder", "torch course", "--chapter", "tensors.ipynb"],
     "repo=https%3A%2F%2Fgithub.com%2FORG%2Fpytorch-course"
     "&branch=learner&urlpath=lab%2Ftree%2Ftorch%20course%2F01_tensors.ipynb&targetPath=torch%20course"),
    (["--repository", "https://git.example.edu/a&b/course.git?x=1", "--chapter", ""],
     "repo=https%3A%2F%2Fgit.example.edu%2Fa%26b%2Fcourse.git%3Fx%3D1"
     "&branch=learner&urlpath=lab%2Ftree%2Fpytorch-course&targetPath=pytorch-course"),
], ids=["defaults", "classic-notebook", "folder", "quoted-repository"])
@pytest.mark.parametrize("hub", ["https://hub.example.edu", "https://hub.example.edu/", "https://hub.example.edu/hub/"])
def test_hub_link_prints_nbgitpullers_link(hub, args, link, capsys, monkeypatch):
    monkeypatch.setenv(publication.REPOSITORY_ENV, REPOSITORY + ".git")  # .git: dropped
    assert main(["hub-link", hub, "--root", str(ROOT), *args]) == 0
    assert capsys.readouterr().out == f"https://hub.example.edu/hub/user-redirect/git-pull?{link}\n"


def test_hub_link_without_a_repository_says_how_to_give_one(capsys, monkeypatch):
    monkeypatch.delenv(publication.REPOSITORY_ENV, raising=False)
    monkeypatch.setattr(publication, "REPOSITORY_URL", "")
    assert main(["hub-link", "https://hub.example.edu", "--root", str(ROOT)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "--repository" in captured.err and publication.REPOSITORY_ENV in captured.err


def test_hub_link_refuses_an_unknown_chapter_and_an_address_that_is_no_hub(capsys):
    assert main(["hub-link", "https://hub.example.edu", "--root", str(ROOT), "--repository", REPOSITORY,
                 "--chapter", "99_nothing"]) == 2
    assert "names no chapter" in capsys.readouterr().err
    assert main(["hub-link", "hub.example.edu", "--root", str(ROOT), "--repository", REPOSITORY]) == 2
    assert "not a hub's address" in capsys.readouterr().err


# -- nbgitpuller itself -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def gitpuller() -> Path:
    """nbgitpuller's command line, from its own tool environment (made once, then cached)."""
    try:
        python = tool_env.ensure(ROOT, "nbgitpuller", ROOT / "requirements-nbgitpuller.txt")
    except tool_env.ToolEnvFailed as error:
        pytest.skip(f"nbgitpuller could not be installed into .course/venvs/nbgitpuller "
                    f"(no network to PyPI?): {error}")
    return python.parent / "gitpuller"


def pull(gitpuller: Path, remote: str, folder: Path) -> str:
    result = subprocess.run([str(gitpuller), remote, "learner", str(folder)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_nbgitpuller_pulls_the_learner_branch_and_keeps_the_learners_work(tmp_path, git_env, capsys, gitpuller):
    course = course_copy(tmp_path)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    # file://, as a hub's clone is: nbgitpuller clones with --depth 1, which a local path ignores.
    url = remote.as_uri()

    hub_branch(course, capsys)
    git(course, "push", "-q", str(remote), "learner")
    learner = tmp_path / "home" / "pytorch-course"
    pull(gitpuller, url, learner)
    assert git(learner, "rev-parse", "--is-shallow-repository") == "true"
    for chapter in CHAPTERS:
        assert (learner / chapter).read_bytes() == (course / "notebooks" / chapter).read_bytes()
    assert (learner / "course_utils" / "__init__.py").is_file()
    assert not (learner / "solutions").exists() and not (learner / "tests").exists()
    for relative in INSTRUCTOR_ONLY:
        assert not (learner / "course_utils" / relative).exists()

    # A kernel starts in the notebook's folder: the package imports from there, without the
    # instructor's parts, every module of it.
    imports = ("import importlib, pkgutil, course_utils, course_utils.exercises.tensors\n"
               "for module in pkgutil.walk_packages(course_utils.__path__, 'course_utils.'):\n"
               "    importlib.import_module(module.name)\n"
               "print(course_utils.__file__)\n")
    result = subprocess.run([sys.executable, "-c", imports], cwd=learner, capture_output=True, text=True,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"})
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == learner / "course_utils" / "__init__.py"

    # The learner works: writes an answer into chapter 1, deletes chapter 3, adds a file of their own.
    answer = "def match_reference(x, reference):\n    return x.to(dtype=reference.dtype, device=reference.device)"
    tensors, autograd, models = CHAPTERS[1], CHAPTERS[2], CHAPTERS[3]
    edit_notebook(learner / tensors, lambda nb: setattr(cell(nb, "match_reference"), "source", answer))
    (learner / models).unlink()
    (learner / "notes.txt").write_text("my notes\n")

    # The course publishes a new version: new text in chapters 1 (its first cell, far from the
    # answer, and the answer cell's placeholder, the very lines the learner replaced), 2 and 3,
    # a changed and a new file in the package, a new chapter.
    def course_change(nb):
        add_line_to_first_cell(nb, "NEW IN 01")
        answer_cell = cell(nb, "match_reference")
        answer_cell.source = answer_cell.source.replace("# YOUR CODE HERE", "# YOUR CODE HERE (new placeholder)")
    edit_notebook(course / "notebooks" / tensors, course_change)
    edit_notebook(course / "notebooks" / autograd, lambda nb: add_line_to_first_cell(nb, "NEW IN 02"))
    edit_notebook(course / "notebooks" / models, lambda nb: add_line_to_first_cell(nb, "NEW IN 03"))
    with open(course / "course_utils" / "syllabus.py", "a", encoding="utf-8") as handle:
        handle.write("\nNEW_IN_THE_PACKAGE = True\n")
    (course / "course_utils" / "hub_new_module.py").write_text("NEW = 1\n")
    shutil.copyfile(course / "notebooks" / CHAPTERS[0], course / "notebooks" / "99_new_chapter.ipynb")
    hub_branch(course, capsys)
    git(course, "push", "-q", str(remote), "learner")

    log = pull(gitpuller, url, learner)
    assert "Merge made by" in log

    # The chapter the learner changed: their answer stays, where the course changed the same
    # lines the learner's version wins; the course's new text elsewhere in it comes in (git
    # merges the file's lines, -Xours). The result is still a valid notebook.
    merged = nbformat.read(learner / tensors, as_version=4)
    nbformat.validate(merged)
    assert cell(merged, "match_reference").source == answer
    assert "new placeholder" not in (learner / tensors).read_text(encoding="utf-8")
    assert "NEW IN 01" in merged.cells[0].source
    # A chapter the learner did not touch: the new version, byte for byte.
    assert (learner / autograd).read_bytes() == (course / "notebooks" / autograd).read_bytes()
    # A chapter the learner deleted: back, in its new version.
    assert (learner / models).read_bytes() == (course / "notebooks" / models).read_bytes()
    # New chapter, new and changed package files: there. The learner's own file: kept.
    assert (learner / "99_new_chapter.ipynb").is_file()
    assert (learner / "course_utils" / "hub_new_module.py").read_text() == "NEW = 1\n"
    assert "NEW_IN_THE_PACKAGE" in (learner / "course_utils" / "syllabus.py").read_text(encoding="utf-8")
    assert (learner / "notes.txt").read_text() == "my notes\n"
    assert git(learner, "status", "--porcelain") == "?? notes.txt"
