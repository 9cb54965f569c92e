"""CI runs what the course promises: the oldest and newest Python, and PyPI's CUDA build without a GPU."""

import re
from pathlib import Path

import yaml  # comes with jupyter_events; only read here

ROOT = Path(__file__).resolve().parents[1]


def course_setting(name):
    return int(re.search(rf"^{name}=(\d+)$", (ROOT / "course").read_text(), re.M).group(1))


def jobs():
    return yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())["jobs"]


def test_the_cpu_job_covers_the_oldest_and_the_newest_python_the_course_accepts():
    versions = jobs()["cpu"]["strategy"]["matrix"]["python-version"]
    assert versions == [f"3.{course_setting('PY_MIN')}", f"3.{course_setting('PY_MAX')}"]


def test_a_job_runs_every_notebook_on_pypis_cuda_build_without_a_gpu():
    job = jobs()["cuda-build-without-gpu"]
    assert "gpu" not in str(job["runs-on"])
    test_step = next(step for step in job["steps"] if step.get("name") == "Test")
    assert test_step["env"]["COURSE_TORCH"] == "pypi"
    assert "./course test" in test_step["run"]
    assert "torch.version.cuda and not torch.cuda.is_available()" in test_step["run"]


def test_every_job_runs_the_readme_test_command():
    for name, job in jobs().items():
        assert any("./course test" in step.get("run", "") for step in job["steps"]), name
