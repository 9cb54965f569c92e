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


def runs(job, command):
    """Whether a step of ``job`` runs ``command`` (``./course test`` is not ``./course test-browser``)."""
    pattern = re.compile(rf"(^|\s){re.escape(command)}(\s|$)", re.M)
    return any(pattern.search(step.get("run", "")) for step in job["steps"])


def test_every_job_runs_the_readme_test_command_or_the_browser_tests():
    for name, job in jobs().items():
        if name in ("hosted-torch-versions", "planted-bugs"):
            continue  # the hosted simulation on other torch versions; the planted bugs, below
        assert runs(job, "./course test") or runs(job, "./course test-browser") or runs(job, "./course test-e2e"), name
    assert runs(jobs()["browser"], "./course book") and runs(jobs()["browser"], "./course test-browser")


def test_the_website_is_built_tested_and_published_from_main():
    workflow = yaml.safe_load((ROOT / ".github/workflows/pages.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))
    assert triggers["push"]["branches"] == ["main"]
    build = workflow["jobs"]["build"]
    order = [step.get("run") or step.get("uses", "") for step in build["steps"]]
    book, browser = order.index("./course book"), order.index("./course test-browser")
    upload = next(i for i, step in enumerate(order) if step.startswith("actions/upload-pages-artifact"))
    assert book < browser < upload, "published only once the browser tests pass"
    assert build["steps"][upload]["with"]["path"] == "_site"
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["steps"][0]["uses"].startswith("actions/deploy-pages")
    assert workflow["permissions"]["pages"] == "write" and workflow["permissions"]["id-token"] == "write"


def test_ci_run_runs_the_test_command_the_changed_end_to_end_groups_then_the_browser_tests():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert (lines.index('./course test "$@"') < lines.index("./course test-e2e --if-changed")
            < lines.index("./course book") < lines.index("./course test-browser"))


def test_every_push_runs_every_end_to_end_group():
    workflow = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    job = jobs()["end-to-end"]
    assert "if" not in job, "the end-to-end groups run on every push and pull request"
    assert runs(job, "./course test-e2e") and not runs(job, "./course test-e2e --if-changed")
    assert any("bubblewrap" in step.get("run", "") for step in job["steps"])
    triggers = workflow.get("on", workflow.get(True))
    assert "push" in triggers and "pull_request" in triggers


def test_a_weekly_job_runs_the_notebooks_at_full_length():
    workflow = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert triggers["schedule"], "no scheduled run"
    job = jobs()["full-length"]
    assert "schedule" in job["if"]
    test_step = next(step for step in job["steps"] if step.get("name") == "Test")
    assert test_step["env"]["COURSE_FULL_LENGTH"] == "1" and "./course test" in test_step["run"]


def test_a_weekly_job_plants_the_bugs_the_test_runs_were_built_to_catch():
    job = jobs()["planted-bugs"]
    assert "schedule" in job["if"]
    assert runs(job, ".venv/bin/python tools/planted_bugs.py --json planted-bugs.json")


def test_full_length_turns_the_test_commands_smoke_setting_off():
    """The lines of test_settings (cmd_test's and cmd_test_e2e's) that decide COURSE_SMOKE, run by
    bash as they are written."""
    import os
    import subprocess

    script = (ROOT / "course").read_text()
    body = script[script.index("test_settings() {"):]
    assert "    test_settings\n" in script[script.index("cmd_test() {"):] and "    test_settings\n" in (
        script[script.index("cmd_test_e2e() {"):])
    lines = body[: body.index("\n}\n")].splitlines()
    start = next(i for i, line in enumerate(lines) if "local smoke=" in line)
    decide = "\n".join(lines[start:start + 3])
    assert "export COURSE_SMOKE=" in decide
    probe = f'f() {{\n{decide}\necho "$COURSE_SMOKE"\n}}\nf'

    def smoke(**extra):
        env = {k: v for k, v in os.environ.items() if k not in ("COURSE_FULL_LENGTH", "COURSE_SMOKE")}
        return subprocess.run(["bash", "-c", probe], env={**env, **extra}, capture_output=True,
                              text=True, check=True).stdout.strip()

    assert smoke() == "1"
    assert smoke(COURSE_FULL_LENGTH="1") == "0"
    assert smoke(COURSE_FULL_LENGTH="0") == "1"


def test_a_weekly_job_runs_every_chapter_alone_on_the_oldest_torch_claimed_and_the_newest():
    job = jobs()["hosted-torch-versions"]
    assert "schedule" in job["if"]
    runs = job["strategy"]["matrix"]["include"]
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    oldest = re.search(r'"torch>=([\d.]+)"', pyproject).group(1)
    assert runs[0]["args"].startswith(oldest + ".")
    assert any("tools/hosted_matrix.py ${{ matrix.args }}" in step.get("run", "") for step in job["steps"])


def test_the_weekly_job_runs_every_chapter_on_every_platform_profile():
    from hosted_profiles import PROFILES

    runs = jobs()["hosted-torch-versions"]["strategy"]["matrix"]["include"]
    assert {run["args"] for run in runs} >= {f"--profile {name}" for name in PROFILES}
    assert len({run["name"] for run in runs}) == len(runs)
