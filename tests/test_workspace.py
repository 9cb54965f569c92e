"""my-work/: a course update reaches the learner's copy, and nothing they wrote is ever lost."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_utils import workspace
from course_utils.authoring import render
from course_utils.workspace import META, content_hash, main, sync

REPO_ROOT = Path(__file__).resolve().parent.parent
CHAPTER = "01_demo.ipynb"
STUB = "def {name}(a, b):\n    # YOUR CODE HERE\n    raise NotImplementedError()"


def answer(name: str) -> nbformat.NotebookNode:
    meta = {"solution": True, "grade": False, "locked": False, "grade_id": name, "schema_version": 3}
    return new_code_cell(STUB.format(name=name), id=name, metadata={"nbgrader": meta})


def check(name: str, source: str | None = None) -> nbformat.NotebookNode:
    meta = {"solution": False, "grade": True, "locked": True, "points": 1,
            "grade_id": f"check_{name}", "schema_version": 3}
    return new_code_cell(source or f"ex.{name}.check({name})", id=f"check_{name}",
                         metadata={"nbgrader": meta})


def old_course() -> nbformat.NotebookNode:
    return new_notebook(cells=[
        new_markdown_cell("# 01 · Demo\n\nOld introduction.", id="intro-md"),
        new_code_cell("from course_utils.exercises import demo as ex", id="setup-code"),
        new_markdown_cell("### ✎ Exercise: add", id="add-md"),
        answer("add"),
        check("add"),
        new_markdown_cell("Notes on adding.", id="notes-md"),
        answer("mul"),
        check("mul"),
        new_markdown_cell("## Checklist", id="end-md"),
    ])


def new_course() -> nbformat.NotebookNode:
    """The next version: new prose, a stricter check, exercise `sub` added, `mul` removed."""
    return new_notebook(cells=[
        new_markdown_cell("# 01 · Demo\n\nA clearer introduction.", id="intro-md"),
        new_code_cell("from course_utils.exercises import demo as ex", id="setup-code"),
        new_markdown_cell("### ✎ Exercise: add", id="add-md"),
        answer("add"),
        check("add", "ex.add.check(add)  # now also on float16"),
        new_markdown_cell("Notes on adding.", id="notes-md"),
        new_markdown_cell("### ✎ Exercise: subtract", id="sub-md"),
        answer("sub"),
        check("sub"),
        new_markdown_cell("## Checklist", id="end-md"),
    ])


def write_course(root: Path, nb, name: str = CHAPTER) -> None:
    (root / "notebooks").mkdir(parents=True, exist_ok=True)
    (root / "notebooks" / name).write_bytes(render(nb))


def load(path: Path) -> nbformat.NotebookNode:
    return nbformat.v4.to_notebook_json(json.loads(path.read_text(encoding="utf-8")))


def save(path: Path, nb) -> None:
    """As JupyterLab saves: the learner's edits, every cell id and metadata kept."""
    path.write_text(nbformat.writes(nb), encoding="utf-8")


def by_id(nb, cell_id: str):
    return next(c for c in nb.cells if c.get("id") == cell_id)


def learner_works(root: Path) -> bytes:
    """The learner answers both exercises, adds a cell, edits two markdown cells."""
    path = root / "my-work" / CHAPTER
    nb = load(path)
    by_id(nb, "add").source = "def add(a, b):\n    return a + b"
    by_id(nb, "mul").source = "def mul(a, b):\n    return a * b"
    by_id(nb, "intro-md").source += "\n\nMY NOTE: read twice."
    by_id(nb, "notes-md").source = "Notes on adding. MINE: + is elementwise."
    mine = new_code_cell("print(add(1, 2))", id="my-try", execution_count=3,
                         outputs=[new_output("stream", name="stdout", text="3\n")])
    nb.cells.insert(nb.cells.index(by_id(nb, "check_add")) + 1, mine)
    save(path, nb)
    return path.read_bytes()


@pytest.fixture
def updated(tmp_path):
    """A learner who worked on version 1, then synced to version 2."""
    write_course(tmp_path, old_course())
    sync(tmp_path)
    before = learner_works(tmp_path)
    write_course(tmp_path, new_course())
    course_bytes = (tmp_path / "notebooks" / CHAPTER).read_bytes()
    outcomes = sync(tmp_path)
    return tmp_path, before, course_bytes, outcomes


def test_a_new_chapter_is_copied_with_the_version_it_came_from(tmp_path):
    write_course(tmp_path, old_course())
    [outcome] = sync(tmp_path)
    assert outcome.state == "new" and outcome.lines == [f"my-work/{CHAPTER}: new chapter"]
    copy = load(tmp_path / "my-work" / CHAPTER)
    record = copy.metadata[META]
    assert record["origin"] == content_hash((tmp_path / "notebooks" / CHAPTER).read_bytes())
    assert set(record["origin_cells"]) == {c.id for c in old_course().cells}
    assert [c.source for c in copy.cells] == [c.source for c in old_course().cells]
    write_course(tmp_path, new_course(), "02_more.ipynb")  # a chapter added later
    assert [o.state for o in sync(tmp_path)] == ["same", "new"]
    assert (tmp_path / "my-work" / "02_more.ipynb").exists()


def test_answers_are_carried_into_the_new_version_by_grade_id(updated):
    root, _, _, outcomes = updated
    nb = load(root / "my-work" / CHAPTER)
    assert by_id(nb, "add").source == "def add(a, b):\n    return a + b"
    assert by_id(nb, "add").metadata["nbgrader"]["grade_id"] == "add"
    assert outcomes[0].state == "updated"
    assert "kept your 1 answer, 1 cell of your own, 1 edit to a course cell, 1 answer to a " \
           "removed exercise (at the end); 1 new exercise" in outcomes[0].lines[0]


def test_new_prose_checks_and_exercises_appear(updated):
    root = updated[0]
    nb = load(root / "my-work" / CHAPTER)
    assert by_id(nb, "intro-md").source == "# 01 · Demo\n\nA clearer introduction."
    assert by_id(nb, "check_add").source == "ex.add.check(add)  # now also on float16"
    assert by_id(nb, "sub").source == STUB.format(name="sub")  # a new exercise starts blank
    assert by_id(nb, "check_sub").metadata["nbgrader"]["grade"] is True
    assert nb.metadata[META]["origin"] == content_hash(render(new_course()))
    course_ids = [c.id for c in new_course().cells]
    assert [c.id for c in nb.cells if c.id in course_ids] == course_ids  # the course's order


def test_the_learners_own_cell_follows_the_cell_it_followed(updated):
    nb = load(updated[0] / "my-work" / CHAPTER)
    ids = [c.id for c in nb.cells]
    assert ids[ids.index("check_add") + 1] == "my-try"
    assert by_id(nb, "my-try").outputs[0]["text"] == "3\n"  # the learner's own cell, whole


def test_an_edit_is_kept_where_the_course_left_the_cell_alone_and_reported_where_not(updated):
    root, _, _, outcomes = updated
    nb = load(root / "my-work" / CHAPTER)
    assert by_id(nb, "notes-md").source == "Notes on adding. MINE: + is elementwise."
    assert "MY NOTE" not in by_id(nb, "intro-md").source
    assert len(outcomes[0].lines) == 2
    assert outcomes[0].lines[1].startswith("  the course changed 1 cell(s) you had edited")
    assert outcomes[0].lines[1].endswith('"01 · Demo"')


def test_an_answer_to_a_removed_exercise_is_kept_at_the_end_with_a_note(updated):
    nb = load(updated[0] / "my-work" / CHAPTER)
    note, kept = nb.cells[-2:]
    assert note.cell_type == "markdown" and "`mul` is no longer in the course" in note.source
    assert kept.source == "def mul(a, b):\n    return a * b"
    assert "nbgrader" not in kept.metadata  # no longer an answer cell a grader would look for
    assert nbformat.validate(nb) is None and len({c.id for c in nb.cells}) == len(nb.cells)


def test_the_backup_is_the_learners_old_file_byte_for_byte(updated):
    root, before, _, outcomes = updated
    [saved] = (root / "my-work" / "backups").iterdir()
    assert saved.read_bytes() == before
    assert saved.name.startswith("01_demo.") and saved == outcomes[0].backup
    assert f"your previous file is my-work/backups/{saved.name}" in outcomes[0].lines[0]


def test_a_second_sync_changes_nothing_and_notebooks_is_never_written(updated):
    root, _, course_bytes, _ = updated
    mine = (root / "my-work" / CHAPTER).read_bytes()
    assert [(o.state, o.lines) for o in sync(root)] == [("same", [])]
    assert (root / "my-work" / CHAPTER).read_bytes() == mine
    assert len(list((root / "my-work" / "backups").iterdir())) == 1
    assert (root / "notebooks" / CHAPTER).read_bytes() == course_bytes


def test_the_merge_is_deterministic(updated, tmp_path_factory):
    root, before, _, _ = updated
    again = tmp_path_factory.mktemp("again")
    write_course(again, new_course())
    (again / "my-work").mkdir()
    (again / "my-work" / CHAPTER).write_bytes(before)
    sync(again)
    assert (again / "my-work" / CHAPTER).read_bytes() == (root / "my-work" / CHAPTER).read_bytes()


def test_the_learners_next_work_survives_the_next_update(updated):
    """The kept note, the kept answer and the learner's cell all ride along a second update."""
    root = updated[0]
    third = new_course()
    third.cells[0].source = "# 01 · Demo\n\nThe third introduction."
    write_course(root, third)
    sync(root)
    nb = load(root / "my-work" / CHAPTER)
    assert [c.id for c in nb.cells[-2:]] == ["kept-note-mul", "mul"]
    assert by_id(nb, "my-try").source == "print(add(1, 2))"
    assert by_id(nb, "add").source == "def add(a, b):\n    return a + b"
    assert len(list((root / "my-work" / "backups").iterdir())) == 2


def test_untouched_answers_take_the_new_stub_and_removed_stubs_go(tmp_path):
    write_course(tmp_path, old_course())
    sync(tmp_path)
    course = new_course()
    course.cells[3].source = "def add(a, b, c):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    write_course(tmp_path, course)
    [outcome] = sync(tmp_path)
    nb = load(tmp_path / "my-work" / CHAPTER)
    assert by_id(nb, "add").source.startswith("def add(a, b, c):")
    assert "mul" not in {c.id for c in nb.cells} and "kept your" not in outcome.lines[0]


def test_a_cell_whose_anchor_is_gone_goes_to_the_end_and_clashing_ids_give_way(tmp_path):
    write_course(tmp_path, old_course())
    sync(tmp_path)
    path = tmp_path / "my-work" / CHAPTER
    nb = load(path)
    nb.cells.insert(nb.cells.index(by_id(nb, "check_mul")) + 1, new_code_cell("x = 1", id="sub-md"))
    save(path, nb)
    write_course(tmp_path, new_course())
    sync(tmp_path)
    nb = load(path)
    assert nb.cells[-1].source == "x = 1" and nb.cells[-1].id.startswith("mine-")
    assert by_id(nb, "sub-md").source == "### ✎ Exercise: subtract"


def test_a_workspace_file_without_a_record_keeps_everything_it_can(tmp_path):
    """A notebook put in my-work/ by hand: its origin is unknown, so nothing is assumed."""
    write_course(tmp_path, new_course())
    (tmp_path / "my-work").mkdir()
    old = old_course()
    old.cells[3].source = "def add(a, b):\n    return a + b"
    old.cells.append(new_markdown_cell("my own summary", id="mine-1"))
    save(tmp_path / "my-work" / CHAPTER, old)
    [outcome] = sync(tmp_path)
    nb = load(tmp_path / "my-work" / CHAPTER)
    assert outcome.state == "updated" and by_id(nb, "add").source.endswith("return a + b")
    assert by_id(nb, "mine-1").source == "my own summary"
    assert "kept-note-mul" in {c.id for c in nb.cells}  # unknown origin: even a stub is kept


def test_a_duplicated_answer_cell_hides_nothing(tmp_path):
    write_course(tmp_path, old_course())
    sync(tmp_path)
    path = tmp_path / "my-work" / CHAPTER
    nb = load(path)
    by_id(nb, "add").source = "def add(a, b):\n    return a + b"
    copy = nbformat.from_dict(json.loads(json.dumps(by_id(nb, "add"))))
    copy.id, copy.source = "add-copy", "def add(a, b):\n    return b + a  # try"
    nb.cells.insert(nb.cells.index(by_id(nb, "add")) + 1, copy)
    save(path, nb)
    write_course(tmp_path, new_course())
    sync(tmp_path)
    nb = load(path)
    assert by_id(nb, "add").source.endswith("return a + b")
    assert by_id(nb, "add-copy").source.endswith("# try")


def test_invalid_json_is_backed_up_and_left_alone(tmp_path, capsys):
    write_course(tmp_path, old_course())
    sync(tmp_path)
    path = tmp_path / "my-work" / CHAPTER
    broken = path.read_bytes()[:-40]  # cut short, as by a full disk
    path.write_bytes(broken)
    write_course(tmp_path, new_course())
    assert main(["sync", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "is not valid JSON" in err and "sync leaves it as it is" in err and "my-work/backups/01_demo." in err
    assert path.read_bytes() == broken
    [saved] = (tmp_path / "my-work" / "backups").iterdir()
    assert saved.read_bytes() == broken
    assert main(["sync", "--root", str(tmp_path)]) == 1  # again: still one copy
    assert len(list((tmp_path / "my-work" / "backups").iterdir())) == 1


def test_a_backup_never_overwrites_another(tmp_path, monkeypatch):
    class Frozen(workspace.datetime):
        @classmethod
        def now(cls, tz=None):
            return workspace.datetime(2030, 1, 2, 3, 4, 5, tzinfo=tz)

    monkeypatch.setattr(workspace, "datetime", Frozen)
    first, created = workspace.backup(tmp_path, CHAPTER, b"one")
    second, _ = workspace.backup(tmp_path, CHAPTER, b"two")
    assert created and first.name == "01_demo.20300102T030405Z.ipynb"
    assert second.name == "01_demo.20300102T030405Z-2.ipynb"
    assert (first.read_bytes(), second.read_bytes()) == (b"one", b"two")
    assert workspace.backup(tmp_path, CHAPTER, b"one") == (first, False)


def test_the_cli_says_one_line_per_changed_chapter_and_nothing_otherwise(tmp_path, capsys):
    write_course(tmp_path, old_course())
    write_course(tmp_path, new_course(), "02_more.ipynb")
    assert main(["status", "--root", str(tmp_path)]) == 3
    assert capsys.readouterr().out.count("to be copied") == 2
    assert main(["sync", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"my-work/{CHAPTER}: new chapter", "my-work/02_more.ipynb: new chapter"]
    assert main(["sync", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["status", "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "my-work/ is up to date (2 chapters)\n"
    write_course(tmp_path, new_course())
    assert main(["status", "--root", str(tmp_path)]) == 3
    assert "sync will update it" in capsys.readouterr().out
    assert main(["sync", "--root", str(tmp_path / "nowhere")]) == 2
    assert "no notebooks/ folder" in capsys.readouterr().err


def test_a_course_notebook_in_conflict_is_reported_and_nothing_is_written(tmp_path, capsys):
    write_course(tmp_path, old_course())
    (tmp_path / "notebooks" / CHAPTER).write_text("<<<<<<< HEAD\n{}\n=======\n")
    assert main(["sync", "--root", str(tmp_path)]) == 1
    assert "git status" in capsys.readouterr().err and not (tmp_path / "my-work").exists()


def git(root: Path, *args: str) -> str:
    config = ["-c", "user.name=Learner", "-c", "user.email=l@example.org", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *config, *args], cwd=root, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def repo(tmp_path):
    """A clone in the old layout: the learner typed an answer into tracked notebooks/."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git(tmp_path, "init", "-q")
    write_course(tmp_path, old_course())
    write_course(tmp_path, new_course(), "02_more.ipynb")
    git(tmp_path, "add", "notebooks")
    git(tmp_path, "commit", "-q", "-m", "course v1")
    path = tmp_path / "notebooks" / CHAPTER
    nb = load(path)
    by_id(nb, "add").source = "def add(a, b):\n    return a + b"
    save(path, nb)
    return tmp_path


def test_adopt_saves_edits_in_tracked_notebooks_then_the_update_merges_them(repo, capsys):
    edited = (repo / "notebooks" / CHAPTER).read_bytes()
    assert main(["adopt", "--root", str(repo)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith(f"notebooks/{CHAPTER} had your edits: moved to my-work/")
    adopted = load(repo / "my-work" / CHAPTER)
    head = subprocess.run(["git", "show", f"HEAD:notebooks/{CHAPTER}"], cwd=repo,
                          capture_output=True, check=True).stdout
    assert adopted.metadata[META]["origin"] == content_hash(head)
    assert by_id(adopted, "add").source.endswith("return a + b")
    [saved] = (repo / "my-work" / "backups").iterdir()
    assert saved.read_bytes() == edited and not (repo / "my-work" / "02_more.ipynb").exists()
    assert main(["adopt", "--root", str(repo)]) == 0 and capsys.readouterr().out == ""
    git(repo, "checkout", "--", "notebooks/")  # now safe: what ./course update does next
    write_course(repo, new_course())  # stands in for the pull
    git(repo, "commit", "-q", "-am", "course v2")
    assert main(["sync", "--root", str(repo)]) == 0
    nb = load(repo / "my-work" / CHAPTER)
    assert by_id(nb, "add").source.endswith("return a + b") and by_id(nb, "sub")


def test_a_first_sync_in_the_old_layout_brings_the_answers_typed_into_notebooks(repo, capsys):
    """`./course lab` before `./course update`: my-work/ starts from what the learner typed,
    and notebooks/, still edited, is not taken for a new course version at every later start."""
    edited = (repo / "notebooks" / CHAPTER).read_bytes()
    assert main(["sync", "--root", str(repo)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"my-work/{CHAPTER}: new chapter, with the edits you made in notebooks/{CHAPTER}",
        "my-work/02_more.ipynb: new chapter"]
    nb = load(repo / "my-work" / CHAPTER)
    assert by_id(nb, "add").source.endswith("return a + b")
    assert nb.metadata[META]["origin"] == content_hash(render(old_course()))
    assert main(["sync", "--root", str(repo)]) == 0 and capsys.readouterr() == ("", "")
    assert (repo / "notebooks" / CHAPTER).read_bytes() == edited
    assert main(["adopt", "--root", str(repo)]) == 0  # ./course update: save, reset, pull, sync
    assert "was kept" in capsys.readouterr().out
    git(repo, "checkout", "--", "notebooks/")
    write_course(repo, new_course())
    git(repo, "commit", "-q", "-am", "course v2")
    assert main(["sync", "--root", str(repo)]) == 0
    assert by_id(load(repo / "my-work" / CHAPTER), "add").source.endswith("return a + b")


def test_a_chapter_left_in_conflict_by_git_does_not_stop_sync(repo, capsys):
    git(repo, "checkout", "--", "notebooks/")
    assert main(["sync", "--root", str(repo)]) == 0
    capsys.readouterr()
    (repo / "notebooks" / CHAPTER).write_text("<<<<<<< HEAD\n{}\n=======\n")
    assert main(["sync", "--root", str(repo)]) == 0 and capsys.readouterr() == ("", "")


def test_adopt_keeps_an_existing_workspace_file_and_saves_the_edits_as_a_backup(repo, capsys):
    (repo / "my-work").mkdir()
    (repo / "my-work" / CHAPTER).write_bytes(b"the learner's own")
    assert main(["adopt", "--root", str(repo)]) == 0
    assert f"(my-work/{CHAPTER} was kept)" in capsys.readouterr().out
    assert (repo / "my-work" / CHAPTER).read_bytes() == b"the learner's own"
    [saved] = (repo / "my-work" / "backups").iterdir()
    assert saved.read_bytes() == (repo / "notebooks" / CHAPTER).read_bytes()


def test_adopt_outside_a_git_repository_does_nothing(tmp_path, capsys):
    write_course(tmp_path, old_course())
    assert main(["adopt", "--root", str(tmp_path)]) == 0
    assert "not a git repository" in capsys.readouterr().out
    assert not (tmp_path / "my-work").exists()


def test_the_real_chapters_carry_an_answer_through_a_course_change(tmp_path):
    shutil.copytree(REPO_ROOT / "notebooks", tmp_path / "notebooks")
    assert {o.state for o in sync(tmp_path)} == {"new"}
    chapter = "00_environment.ipynb"
    path = tmp_path / "my-work" / chapter
    nb = load(path)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    mine = "def kernel_environment():\n    return {}  # mine"
    grade_id, cell.source = cell.metadata["nbgrader"]["grade_id"], mine
    save(path, nb)
    course = load(tmp_path / "notebooks" / chapter)
    prose = next(c for c in course.cells if c.cell_type == "markdown")
    prose.source += "\n\nA sentence added by the course."
    (tmp_path / "notebooks" / chapter).write_text(nbformat.writes(course), encoding="utf-8")
    outcomes = {o.chapter: o for o in sync(tmp_path)}
    assert outcomes[chapter].state == "updated" and {o.state for o in outcomes.values()} == {"same", "updated"}
    merged = load(path)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in merged.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    assert answers[grade_id] == mine
    assert by_id(merged, prose.id).source.endswith("A sentence added by the course.")
    assert [c.id for c in merged.cells] == [c.id for c in course.cells]


def test_a_merge_runs_without_torch(tmp_path):
    write_course(tmp_path, old_course())
    sync(tmp_path)
    learner_works(tmp_path)
    write_course(tmp_path, new_course())
    code = ("import sys; from course_utils.workspace import main; "
            f"rc = main(['sync', '--root', {str(tmp_path)!r}]); "
            "sys.exit(rc or 10 * ('torch' in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "updated to the new course version" in done.stdout


def test_a_sync_with_nothing_to_do_does_not_even_import_nbformat(tmp_path):
    """It runs before every JupyterLab start; importing nbformat alone takes about a second."""
    write_course(tmp_path, old_course())
    sync(tmp_path)
    code = ("import sys; from course_utils.workspace import main; "
            f"rc = main(['sync', '--root', {str(tmp_path)!r}]); "
            "sys.exit(rc or 10 * ('nbformat' in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_status_changes_nothing_even_for_a_broken_file(tmp_path, capsys):
    write_course(tmp_path, old_course())
    (tmp_path / "my-work").mkdir()
    (tmp_path / "my-work" / CHAPTER).write_text("{")
    assert main(["status", "--root", str(tmp_path)]) == 1
    assert "is not valid JSON" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "my-work").iterdir()] == [CHAPTER]


def test_a_mangled_record_or_a_cell_without_an_id_loses_nothing(tmp_path):
    write_course(tmp_path, old_course())
    sync(tmp_path)
    path = tmp_path / "my-work" / CHAPTER
    raw = json.loads(path.read_text())
    raw["metadata"][META] = "edited by hand"
    raw["cells"][3]["source"] = ["def add(a, b):\n", "    return a + b"]  # as lists of lines
    raw["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "no id here"})
    path.write_text(json.dumps(raw))
    write_course(tmp_path, new_course())
    [outcome] = sync(tmp_path)
    nb = load(path)
    assert outcome.state == "updated" and by_id(nb, "add").source == "def add(a, b):\n    return a + b"
    [own] = [c for c in nb.cells if c.source == "no id here"]
    assert own.id.startswith("mine-") and nbformat.validate(nb) is None
    assert [(o.state, o.lines) for o in sync(tmp_path)] == [("same", [])]


def test_one_chapter_that_cannot_be_merged_does_not_stop_the_others(tmp_path, monkeypatch, capsys):
    write_course(tmp_path, old_course())
    write_course(tmp_path, old_course(), "02_more.ipynb")
    sync(tmp_path)
    before = (tmp_path / "my-work" / CHAPTER).read_bytes()
    write_course(tmp_path, new_course())
    write_course(tmp_path, new_course(), "02_more.ipynb")
    real_merge, calls = workspace.merge, []

    def failing_first(*args):  # chapters go in name order: 01_demo first
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return real_merge(*args)

    monkeypatch.setattr(workspace, "merge", failing_first)
    assert main(["sync", "--root", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert f"my-work/{CHAPTER}: not updated, it is as it was (RuntimeError: a bug)" in captured.err
    assert "my-work/02_more.ipynb: updated" in captured.out
    assert (tmp_path / "my-work" / CHAPTER).read_bytes() == before


def test_the_report_says_what_the_learner_would_not_notice(tmp_path):
    """A deleted answer cell that comes back, a new starting code under a kept answer, and the
    outputs of the course's cells that an update clears: each is said, once."""
    write_course(tmp_path, old_course())
    sync(tmp_path)
    path = tmp_path / "my-work" / CHAPTER
    nb = load(path)
    by_id(nb, "add").source = "def add(a, b):\n    return a + b"
    nb.cells.remove(by_id(nb, "mul"))  # deleted by the learner
    setup = by_id(nb, "setup-code")
    setup.outputs = [new_output("stream", name="stdout", text="ready\n")]
    by_id(nb, "check_add").outputs = [new_output("stream", name="stdout", text="✅ add: passed\n")]
    save(path, nb)
    course = old_course()
    course.cells[3].source = "def add(a, b):\n    # YOUR CODE HERE: a + b, elementwise\n    raise NotImplementedError()"
    course.cells[0].source += "\n\nNew words."
    write_course(tmp_path, course)
    [outcome] = sync(tmp_path)
    said = "\n".join(outcome.lines)
    assert "answer cells you had deleted are back, with the course's starting code: mul" in said
    assert "changed the starting code of add; your answer is kept" in said
    assert "the outputs of 2 of the course's cells were cleared" in said
    assert "1 of them was a check: the exercises you passed are still recorded" in said
    merged = load(path)
    assert by_id(merged, "add").source == "def add(a, b):\n    return a + b"
    assert "raise NotImplementedError()" in by_id(merged, "mul").source
