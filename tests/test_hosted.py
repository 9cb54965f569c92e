"""Each chapter, opened alone on a hosted Jupyter (Colab, Kaggle, a hub), sets itself up and works.

tests/hosted_machine.py describes the simulation: the platform's packages only, the notebook
copied alone into an empty folder, its set-up cell installing the course's package from a wheel
of this checkout. Every chapter runs with every displayed solution pasted in (each check must
pass) on a fresh machine whose torch is a CUDA build without a GPU, as on Colab's and
Kaggle's CPU runtimes (tests/simulated_machine). Chapter 00 also runs as the learner opens it (each check must say
"not attempted"), on a Colab-like CPU runtime whose torch is a CUDA build, where its health
check must give true verdicts and never send the learner to ``./course setup``. The other
chapters' learner notebooks run this way in tools/hosted_matrix.py (CI's weekly job, on the
oldest and newest torch): here nbval already runs them with every check "not attempted", and
a second hosted run of each would add a minute to every test command and catch nothing new.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import course_utils
from course_utils.authoring.setup_cell import CELL_ID, setup_cell_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hosted_machine as hosted  # noqa: E402

ROOT = hosted.ROOT
CHAPTERS = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
VERSION = course_utils.__version__
# Which platform each chapter's pasted run pretends to be (the set-up cell must not care).
PLATFORMS = ("colab", "kaggle", "hub")
# The torch those runs have: a CUDA build without a GPU, as on Colab's and Kaggle's CPU runtimes
# and on a laptop with PyPI's torch. This is the course's only run of the displayed solutions,
# so it is also the one on a CUDA build (tests/notebook_runs.py runs the worked answers there).
PASTED_RUNS_MACHINE = "cuda-build-no-gpu"


@pytest.fixture(scope="session")
def platform():
    return hosted.platform_python()


@pytest.fixture(scope="session")
def wheel():
    return hosted.build_wheel()


def run_chapter(chapter, variant, platform, wheel, folder, platform_name, machine=""):
    settings = {**hosted.chapter_settings(variant), **hosted.PLATFORM_ENV[platform_name]}
    if machine:
        settings["COURSE_SIMULATED_MACHINE"] = machine
    nb = hosted.chapter_notebook(chapter, variant)
    return hosted.run_alone(nb, chapter, platform=platform, wheel=wheel, folder=folder, settings=settings)


def assert_set_up_alone(run, platform):
    """The set-up cell installed the course's package, and nothing of the platform changed."""
    setup_output = run.outputs[0].strip()
    assert re.fullmatch(
        rf"Installed the course's package \(course_utils {re.escape(VERSION)}\) in \d+ s; "
        r"torch \S+ is as it was\.", setup_output), setup_output
    assert run.installed == [f"pytorch_course-{VERSION}.dist-info"], run.installed
    machine = Path(run.report["purelib"])
    platform_lib = platform.parents[1] / "lib"
    for name in ("torch", "numpy", "matplotlib"):
        assert Path(run.report[name][1]).is_relative_to(platform_lib), (name, run.report[name])
    assert Path(run.report["course_utils"][1]).is_relative_to(machine), run.report["course_utils"]
    assert "./course" not in run.text(), "a hosted learner was told to run ./course"


def _chapter_class(index, chapter):
    platform_name = PLATFORMS[index % len(PLATFORMS)]

    class HostedChapter:
        def test_every_pasted_solution_passes_on_a_fresh_hosted_machine(self, platform, wheel, tmp_path):
            run = run_chapter(chapter, "pasted", platform, wheel, tmp_path, platform_name,
                              machine=PASTED_RUNS_MACHINE)
            assert_set_up_alone(run, platform)
            assert run.report["torch_build"] == {"cuda": "13.0", "hip": None, "gpu": False}, run.report
            assert run.warnings() == [], "a learner reads a red warning as an error"

    HostedChapter.__name__ = HostedChapter.__qualname__ = f"TestChapter{chapter}"
    HostedChapter.__doc__ = f"{chapter}, alone on a {platform_name}-like machine."
    return HostedChapter


for _index, _chapter in enumerate(CHAPTERS):
    globals()[f"TestChapter{_chapter}"] = _chapter_class(_index, _chapter)


# One chapter per platform profile (tests/hosted_profiles.py), the worked answers pasted in: a
# change that breaks torch 2.6, numpy 1.x, an old matplotlib or ipywidgets 7 fails here before
# it lands (every chapter on every profile: tools/hosted_matrix.py --profile, weekly).
PROFILE_RUNS = (("kaggle-like", "kaggle", "06_debugging"), ("colab-like", "colab", "05_speed_and_memory"),
                ("colab-like", "colab", "00_environment"))


class TestChapterOnAPlatformsOwnPackages:
    @pytest.mark.parametrize("profile,platform_name,chapter", PROFILE_RUNS,
                             ids=[f"{run[0]}-{run[2][:2]}" for run in PROFILE_RUNS])
    def test_every_pasted_solution_passes_and_nothing_warns(self, profile, platform_name, chapter, wheel, tmp_path):
        from hosted_profiles import PROFILES

        platform = hosted.platform_python(profile=profile)
        run = run_chapter(chapter, "pasted", platform, wheel, tmp_path, platform_name)
        assert_set_up_alone(run, platform)
        assert run.report["torch"][0].split("+")[0] == PROFILES[profile].packages["torch"]
        assert run.report["numpy"][0] == PROFILES[profile].packages["numpy"]
        assert run.warnings() == [], "a learner reads a red warning as an error"
        if chapter == "00_environment":  # PyPI's torch records 2.9.0 and reports 2.9.0+cu128: one build
            torch_seen = run.report["torch"][0]
            assert f"but import loads {torch_seen}" not in run.text(), run.text()


@pytest.fixture(scope="class")
def learner_run(platform, wheel, tmp_path_factory):
    """Chapter 00 as the learner opens it, on Colab's CPU runtime (whose torch is a CUDA build)."""
    return run_chapter("00_environment", "learner", platform, wheel, tmp_path_factory.mktemp("colab"),
                       "colab", machine="cuda-build-no-gpu")


class TestEnvironmentChapterOnColab:
    """Chapter 00 where most learners meet it first: Colab's CPU runtime, whose torch is a CUDA build."""

    def test_every_check_says_not_attempted_and_the_package_came_from_the_set_up_cell(self, learner_run, platform):
        assert_set_up_alone(learner_run, platform)

    def test_the_health_check_gives_true_verdicts_there(self, learner_run):
        statuses = next(text for text in learner_run.outputs if "('silent CPU fallback'," in text)
        pairs = dict(re.findall(r"\('([^']+)', '(\w+)'\)", statuses))
        assert pairs["silent CPU fallback"] == "ok", statuses
        assert "failed" not in pairs.values() and "warning" not in pairs.values(), statuses
        text = learner_run.text()
        assert "this runtime of Google Colab has no GPU" in text
        assert "Runtime ▸ Change runtime type" in text
        assert "this kernel runs in Google Colab, whose environment the course does not pin" in text
        assert "course setup" not in text and "course lab" not in text

    def test_the_progress_table_says_where_progress_goes(self, learner_run):
        assert "On Google Colab this file lives on the machine you were lent, and goes when it does" in (
            learner_run.text())


# --- the set-up cell itself ------------------------------------------------------------------


def _learner_notebooks():
    return {path.stem: nbformat.read(path, as_version=4) for path in sorted((ROOT / "notebooks").glob("*.ipynb"))}


def test_every_learner_notebook_starts_with_the_set_up_cell_of_this_version():
    for name, nb in _learner_notebooks().items():
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        assert code[0].get("id") == CELL_ID, name
        assert code[0].source == setup_cell_source(), name
        assert f'version="{VERSION}"' in code[0].source, name


def _run_cell(tmp_path, prelude, env=None):
    """The set-up cell's source run in a fresh Python of the course, after ``prelude``."""
    script = tmp_path / "cell.py"
    script.write_text(prelude + "\n" + setup_cell_source() + "\n")
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **(env or {})}, timeout=120)


def test_in_the_course_folder_the_cell_prints_nothing_and_installs_nothing(tmp_path):
    done = _run_cell(tmp_path, "import subprocess\n"
                               "subprocess.run = lambda *a, **k: (_ for _ in ()).throw(AssertionError(a))")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""


# A Python where course_utils cannot be imported, and whose pip calls are recorded, not run.
NO_COURSE = """
import importlib.metadata, subprocess, sys
sys.modules["course_utils"] = None  # import course_utils raises ImportError
calls = []
subprocess.run = lambda command, check: calls.append(command)
real_version = importlib.metadata.version
importlib.metadata.version = lambda name: TORCH if name == "torch" else real_version(name)
import atexit, json
atexit.register(lambda: print("PIP", json.dumps(calls)))
"""


def test_elsewhere_it_installs_only_the_course_package_without_its_dependencies(tmp_path):
    wheel = "/wheels/pytorch_course-9.9.9-py3-none-any.whl"
    done = _run_cell(tmp_path, 'TORCH = "2.6.0+cu124"' + NO_COURSE, env={"COURSE_PACKAGE_SOURCE": wheel})
    assert done.returncode == 0, done.stderr
    calls = json.loads(done.stdout.split("PIP ", 1)[1])
    assert calls == [[calls[0][0], "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", wheel]]
    assert f"torch 2.6.0+cu124 is as it was." in done.stdout


def test_with_a_torch_older_than_2_6_it_says_so_before_installing(tmp_path):
    done = _run_cell(tmp_path, 'TORCH = "2.5.1"' + NO_COURSE, env={"COURSE_PACKAGE_SOURCE": "x.whl"})
    assert "This course needs PyTorch 2.6 or newer; this Python has 2.5.1." in done.stderr
    assert 'PIP []' in done.stdout


def test_without_an_install_source_it_says_whom_to_ask(tmp_path):
    if 'source=""' not in setup_cell_source():
        pytest.skip("this course's publication settings name an install source")
    done = _run_cell(tmp_path, 'TORCH = "2.13.0"' + NO_COURSE)
    assert ("This notebook needs the course's package, course_utils "
            f"{VERSION}, and does not know where it is published") in done.stderr


def test_when_pip_fails_it_says_what_to_check(tmp_path):
    done = _run_cell(tmp_path, 'TORCH = "2.13.0"' + NO_COURSE.replace(
        "subprocess.run = lambda command, check: calls.append(command)",
        "def failing(command, check):\n    calls.append(command)\n    raise subprocess.CalledProcessError(1, command)\n"
        "subprocess.run = failing"), env={"COURSE_PACKAGE_SOURCE": "git+https://example.invalid/course@v9"})
    assert ("pip could not install the course's package from git+https://example.invalid/course@v9"
            in done.stderr), done.stderr
    assert "On Kaggle, turn on Internet" in done.stderr
