"""The simulated torch builds behave like the real ones, and each notebook run gets its settings."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _root_conftest():
    """The course's conftest.py, by path: "conftest" is tests/conftest.py in this process."""
    spec = importlib.util.spec_from_file_location("course_root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


notebook_run_env = _root_conftest().notebook_run_env

PROBE = """
import torch
from course_utils.env import pick_device
print(torch.version.cuda, torch.version.hip, torch.cuda.is_available(), pick_device())
try:
    torch.zeros(1, device="cuda")
except Exception as error:
    print(type(error).__name__, error)
"""


def run_on(machine):
    env = {**os.environ, "COURSE_SIMULATED_MACHINE": machine,
           "PYTHONPATH": str(ROOT / "tests" / "simulated_machine")}
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                          cwd="/", timeout=120)


def test_a_cuda_build_without_a_gpu_reports_cuda_and_fails_on_first_use():
    out = run_on("cuda-build-no-gpu")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "13.0 None False cpu"
    assert lines[1].startswith("RuntimeError Found no NVIDIA driver on your system")


def test_a_rocm_build_without_a_gpu_reports_hip_and_fails_on_first_use():
    out = run_on("rocm-build-no-gpu")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("None 7.") and lines[0].endswith("False cpu")
    assert lines[1] == "RuntimeError No HIP GPUs are available"


def test_an_unknown_machine_is_refused():
    out = run_on("tpu")
    assert out.returncode != 0 and "expected one of" in out.stderr


@pytest.mark.parametrize("folder, settings", [
    ("notebooks", {"COURSE_EXPECT": "not_attempted"}),
    ("solutions", {"COURSE_STRICT": "1"}),
])
def test_the_course_folders_run_with_their_settings(folder, settings):
    # and with this checkout's course_utils first, whatever checkout the Python has installed
    assert notebook_run_env(ROOT / folder / "00_environment.ipynb") == {**settings, "PYTHONPATH": str(ROOT)}


def test_a_prepared_run_reads_its_settings_with_the_simulator_path_made_absolute(tmp_path):
    (tmp_path / "run-env.json").write_text(json.dumps({
        "LABEL": "a run", "COURSE_STRICT": "1", "COURSE_SIMULATED_MACHINE": "cuda-build-no-gpu",
        "PYTHONPATH": "tests/simulated_machine",
    }))
    assert notebook_run_env(tmp_path / "x.ipynb") == {
        "COURSE_STRICT": "1", "COURSE_SIMULATED_MACHINE": "cuda-build-no-gpu",
        "PYTHONPATH": str(ROOT / "tests" / "simulated_machine"),
    }


def test_the_runs_hold_every_chapter_they_name(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    import notebook_runs

    written = notebook_runs.write_runs(tmp_path / "runs")
    chapters = sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb"))
    for run in notebook_runs.RUNS:
        expected = list(run.chapters) or chapters
        assert sorted(p.stem for p in written[run.name]) == expected
        settings = json.loads((tmp_path / "runs" / run.name / "run-env.json").read_text())
        assert settings["COURSE_STRICT"] == "1"


def _solutions_with(tmp_path, answers: dict[str, str]) -> Path:
    """A solutions/ folder of one-answer notebooks: chapter → the worked answer's source."""
    import nbformat

    folder = tmp_path / "solutions"
    folder.mkdir()
    for chapter, source in answers.items():
        cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"solution": True, "grade_id": "x"}})
        other = nbformat.v4.new_code_cell("x = torch.ones(1, device='cuda')")  # not an answer: ignored
        nbformat.write(nbformat.v4.new_notebook(cells=[other, cell]), folder / f"{chapter}.ipynb")
    return folder


def test_solutions_run_on_a_cuda_build_where_a_worked_answer_touches_the_device(tmp_path):
    """The displayed solutions and every other cell run on a CUDA build in test_hosted.py; the
    worked answers of solutions/ run there too where one could behave differently on it."""
    sys.path.insert(0, str(ROOT / "tests"))
    import notebook_runs

    folder = _solutions_with(tmp_path, {
        "00_environment": "def f():\n    return 1\n",
        "01_tensors": "def f(x):\n    return x.sum()\n",
        "02_autograd": "def f(x):\n    with torch.autocast('cpu'):\n        return x @ x\n",
        "03_models": "def f(x):\n    return x.to(pick_device())\n",
        "04_training_loop": "loader = DataLoader(data, pin_memory=True)\n",
    })
    assert notebook_runs.chapters_for_every_build(folder) == ("00_environment", "02_autograd", "03_models",
                                                             "04_training_loop")
    # today's course: chapter 00, and chapter 05, whose scaled_clipped_step uses autocast
    assert notebook_runs.chapters_for_every_build() == ("00_environment", "05_speed_and_memory")
    (run,) = [run for run in notebook_runs.RUNS if run.name == "solutions-cuda-build-no-gpu"]
    assert run.chapters == notebook_runs.chapters_for_every_build()
