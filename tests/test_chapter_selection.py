"""./course test CHAPTER and ./course test --changed (tests/chapter_selection.py): what a chapter's
run selects is everything that concerns the chapter, and nothing that concerns another."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import chapter_selection as selection

ROOT = Path(__file__).resolve().parents[1]
STEMS = list(selection.CHAPTERS)


@pytest.fixture(scope="module")
def every_test_id():
    """The node ids of the whole test command (tests/, notebooks/, solutions/), collected once."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly",
                           "tests", "notebooks", "solutions", "--nbval-lax", "--nbval-current-env"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COURSE_NO_PROGRESS": "1"})
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert len(ids) > 1000, done.stdout[-2000:] + done.stderr[-2000:]
    return ids


def _names_another_chapter(nodeid: str, stem: str) -> bool:
    path, _, rest = nodeid.partition("::")
    for other, module in selection.CHAPTERS.items():
        if other == stem:
            continue
        if Path(path).name == f"{other}.ipynb" or path.startswith(f"tests/catalogue/{module}/") \
                or f"[{module}." in rest or other in rest or f"chapter_{other[:2]}" in rest:
            return True
    return False


@pytest.mark.parametrize("stem", STEMS)
def test_a_chapter_selects_its_notebooks_catalogues_and_cases_and_nothing_of_another(every_test_id, stem):
    module = selection.CHAPTERS[stem]
    chosen = [nodeid for nodeid in every_test_id if selection.concerns(nodeid, stem)]
    files = {nodeid.split("::")[0] for nodeid in chosen}
    assert {f"notebooks/{stem}.ipynb", f"solutions/{stem}.ipynb"} <= files
    catalogues = {f for f in (p.split("::")[0] for p in every_test_id) if f.startswith(f"tests/catalogue/{module}/")}
    assert catalogues and catalogues <= files
    assert {f"tests/{name}" for name in selection.CHAPTER_FILES[stem]} <= files
    assert any(nodeid.startswith("tests/test_known_answers.py::") for nodeid in chosen)
    assert any(nodeid.startswith(f"tests/test_hosted.py::TestChapter{stem}") for nodeid in chosen)
    strangers = [nodeid for nodeid in chosen if _names_another_chapter(nodeid, stem)]
    assert not strangers, strangers[:10]
    assert len(chosen) < len(every_test_id) / 3
    # what ./course test CHAPTER hands pytest to collect holds every selected test
    collected = selection.paths_to_collect({stem})
    outside = [nodeid for nodeid in chosen
               if not any(nodeid.split("::")[0] == path or nodeid.startswith(path + "/") for path in collected)]
    assert not outside, outside[:10]


def test_a_chapter_collects_its_notebooks_in_every_prepared_run(tmp_path):
    for run in ("solutions-cuda-build-no-gpu", "environment-rocm-build-no-gpu"):
        for stem in ("00_environment", "05_speed_and_memory"):
            (tmp_path / run).mkdir(exist_ok=True)
            (tmp_path / run / f"{stem}.ipynb").write_text("{}")
    paths = selection.paths_to_collect({"00_environment"}, runs=tmp_path)
    assert {str(tmp_path / run / "00_environment.ipynb")
            for run in ("solutions-cuda-build-no-gpu", "environment-rocm-build-no-gpu")} <= set(paths)
    assert not [path for path in paths if "05_speed" in path]
    assert selection.paths_to_collect(set(), {"tests/test_quick.py"}) == ["tests/test_quick.py"]


def test_every_prepared_run_of_a_chapter_is_selected():
    for run in ("solutions-cuda-build-no-gpu", "environment-rocm-build-no-gpu"):
        assert selection.concerns(f".course/test-runs/{run}/03_models.ipynb::Cell 4", "03_models")
        assert not selection.concerns(f".course/test-runs/{run}/04_training_loop.ipynb::Cell 4", "03_models")


@pytest.mark.parametrize("name", ["03", "03_models", "models", "03_models.ipynb"])
def test_a_chapter_is_named_as_the_other_commands_name_it(name):
    assert selection.chapter_named(name) == "03_models"


def test_an_unknown_chapter_is_refused_with_the_names_there_are():
    with pytest.raises(ValueError, match="names no chapter.*03_models"):
        selection.chapter_named("08")


def test_changed_files_map_to_their_chapter_their_test_or_everything():
    assert selection.what_changed_concerns(["solutions/03_models.ipynb", "notebooks/01_tensors.ipynb"]) == (
        {"03_models", "01_tensors"}, set(), False)
    assert selection.what_changed_concerns([
        "course_utils/exercises/models/SkipBlock.py", "course_utils/exercises/public_cases/tensors.py",
        "tests/catalogue/debugging/test_clipped_step.py"]) == (
        {"03_models", "01_tensors", "06_debugging"}, set(), False)
    assert selection.what_changed_concerns(["tests/test_bench.py"]) == (set(), {"tests/test_bench.py"}, False)
    assert selection.what_changed_concerns(["tests/e2e_passed.json"]) == (
        set(), {"tests/test_e2e_groups.py"}, False)
    for shared in ("course_utils/exercises/core.py", "course_utils/bench.py", "conftest.py",
                   "tests/exercise_catalogue.py", "README.md", "course"):
        assert selection.what_changed_concerns([shared])[2], shared


def test_changed_files_are_the_edited_staged_and_new_ones(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})

    git("init", "-q")
    for name in ("kept.txt", "edited.txt", "staged.txt"):
        (tmp_path / name).write_text("one")
    (tmp_path / ".gitignore").write_text("ignored.txt\n")
    git("add", "-A")
    git("commit", "-q", "-m", "first")
    (tmp_path / "edited.txt").write_text("two")
    (tmp_path / "staged.txt").write_text("two")
    git("add", "staged.txt")
    (tmp_path / "new.txt").write_text("new")
    (tmp_path / "ignored.txt").write_text("ignored")
    assert selection.changed_files(tmp_path) == ["edited.txt", "new.txt", "staged.txt"]
