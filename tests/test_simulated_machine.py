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
