"""The job templates in deploy/ grade every shard once, with the sandbox's needs spelled out.

deploy/README.md describes them: a Slurm job array (deploy/slurm-grade.sh), a Kubernetes Indexed
Job and its merge Job (deploy/k8s-*.yaml), and the grader's container image (deploy/Containerfile,
with /.dockerignore). These tests read them with a parser (YAML; `bash -n` / `sh -n` for the
shell), and run their shard arithmetic with a stand-in Python that records what the grader would
have been given, so no scheduler, cluster or grading is needed. The image (about 1 GB, minutes
to build) is built only when asked, with COURSE_IMAGE_BUILD=1, where a container engine answers;
otherwise that test alone is skipped, saying why.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml  # comes with jupyter_events; only read here

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
SLURM = DEPLOY / "slurm-grade.sh"
CONTAINERFILE = DEPLOY / "Containerfile"
IMAGE_PYTHON = "/course/.venv/bin/python"

# Records its arguments, one a line, in $STUB_OUT, and what the grader's temporary folder was.
STUB = """#!/bin/sh
printf '%s\\n' "$@" > "$STUB_OUT"
if [ -n "${TMPDIR:-}" ] && [ -d "$TMPDIR" ]; then printf '%s\\n' "$TMPDIR" > "$STUB_OUT.tmpdir"; fi
"""


@pytest.fixture
def stub(tmp_path):
    path = tmp_path / "python"
    path.write_text(STUB)
    path.chmod(0o755)
    return path


def recorded(out: Path) -> list[str]:
    return out.read_text().splitlines()


def pairs(args: list[str]) -> dict[str, str]:
    return {flag: args[i + 1] for i, flag in enumerate(args[:-1]) if flag.startswith("--")}


# --- Kubernetes --------------------------------------------------------------------------------

def load(name):
    return yaml.safe_load((DEPLOY / name).read_text())


def grade_job():
    return load("k8s-grade-job.yaml")


def container(pod_spec, name):
    return next(c for c in pod_spec["containers"] if c["name"] == name)


def env_of(c):
    return {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


def run_pod_script(c, stub, tmp_path, index, replace=None):
    """Runs the container's `sh -c` script as Kubernetes would, the image's Python swapped for the stub."""
    assert c["command"] == ["/bin/sh", "-c"] and len(c["args"]) == 1
    script = c["args"][0]
    assert script.count(IMAGE_PYTHON) == 1
    script = script.replace(IMAGE_PYTHON, str(stub))
    for old, new in (replace or {}).items():
        script = script.replace(old, new)
    out = tmp_path / f"args-{index}"
    env = {"PATH": os.environ["PATH"], "STUB_OUT": str(out), "JOB_COMPLETION_INDEX": str(index),
           **env_of(c)}
    run = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return recorded(out)


def test_the_grading_job_is_an_indexed_job_of_n_shards():
    job = grade_job()
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    n = spec["completions"]
    assert isinstance(n, int) and n >= 2
    assert 1 <= spec["parallelism"] <= n
    grader = container(spec["template"]["spec"], "grader")
    assert int(env_of(grader)["SHARDS"]) == n, "SHARDS must be spec.completions"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    # A refusal (no sandbox, exit 2) is not retried; other failures are, once per shard.
    rule = spec["podFailurePolicy"]["rules"][0]
    assert rule["action"] == "FailIndex" and rule["onExitCodes"]["values"] == [2]
    assert rule["onExitCodes"]["containerName"] == "grader" and spec["backoffLimitPerIndex"] >= 1


def test_pod_i_grades_shard_i_plus_1_of_n_from_job_completion_index(stub, tmp_path):
    spec = grade_job()["spec"]
    n = spec["completions"]
    grader = container(spec["template"]["spec"], "grader")
    assert "JOB_COMPLETION_INDEX" in grader["args"][0]
    subprocess.run(["/bin/sh", "-n", "-c", grader["args"][0]], check=True, timeout=30)
    shards = []
    for index in range(n):
        args = run_pod_script(grader, stub, tmp_path, index)
        assert args[:3] == ["-m", "course_utils.grading", "/submissions"]
        flags = pairs(args)
        assert flags["--out"] == "/results" and flags["--hide"] == "/results"
        assert flags["--workers"] == env_of(grader)["WORKERS"]
        shards.append(flags["--shard"])
    assert shards == [f"{k}/{n}" for k in range(1, n + 1)]


def test_the_grading_pod_mounts_the_submissions_read_only_and_only_its_own_results_folder(stub, tmp_path):
    pod = grade_job()["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    grader = container(pod, "grader")
    mounts = {m["mountPath"]: m for m in grader["volumeMounts"]}
    assert mounts["/submissions"]["readOnly"] is True
    assert volumes[mounts["/submissions"]["name"]]["persistentVolumeClaim"]["readOnly"] is True
    results = mounts["/results"]
    assert volumes[results["name"]]["persistentVolumeClaim"]["claimName"]
    assert "$(JOB_COMPLETION_INDEX)" in results["subPathExpr"] and not results.get("readOnly")
    for c in pod["containers"] + pod["initContainers"]:
        assert {m["name"] for m in c["volumeMounts"]} <= set(volumes), c["name"]
    # The init container makes the very folder the grader's subPathExpr names, for every index.
    init = pod["initContainers"][0]
    assert [m["name"] for m in init["volumeMounts"]] == [results["name"]]
    mount = init["volumeMounts"][0]["mountPath"]
    assert init["command"][:2] == ["/bin/sh", "-c"]
    volume = tmp_path / "volume"
    volume.mkdir()
    for index in (0, 3):
        script = init["command"][2].replace(mount, str(volume))
        subprocess.run(["/bin/sh", "-c", script], check=True, timeout=30,
                       env={"PATH": os.environ["PATH"], "JOB_COMPLETION_INDEX": str(index)})
        assert (volume / results["subPathExpr"].replace("$(JOB_COMPLETION_INDEX)", str(index))).is_dir()


def test_the_grading_pod_has_what_bubblewrap_needs_and_nothing_more():
    pod = grade_job()["spec"]["template"]["spec"]
    assert pod["hostUsers"] is False
    security = pod["securityContext"]
    assert security["seccompProfile"]["type"] == "Unconfined"
    assert security["appArmorProfile"]["type"] == "Unconfined"
    assert security["runAsNonRoot"] is True and security["runAsUser"] == image_user()
    for c in pod["containers"] + pod["initContainers"]:
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert not c["securityContext"].get("privileged")
    assert container(pod, "grader")["securityContext"]["procMount"] == "Unmasked"
    assert "--no-sandbox" not in container(pod, "grader")["args"][0]


def test_the_merge_job_joins_every_index_folder_into_all(stub, tmp_path):
    job = load("k8s-merge-job.yaml")
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    pod = job["spec"]["template"]["spec"]
    merge = container(pod, "merge")
    claim = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
    grade_pod = grade_job()["spec"]["template"]["spec"]
    grade_claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in grade_pod["volumes"]}
    (mount,) = merge["volumeMounts"]
    assert claim[mount["name"]] == grade_claims["results"]
    results = tmp_path / "results"
    for index in range(4):
        (results / f"index-{index}").mkdir(parents=True)
    args = run_pod_script(merge, stub, tmp_path, 0, {mount["mountPath"]: str(results)})
    assert args[:3] == ["-m", "course_utils.grading", "merge"]
    assert args[3:] == [str(results / f"index-{i}") for i in range(4)] + ["--out", str(results / "all")]
    # Merging runs no submission: no sandbox, so none of the grading pod's exceptions.
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert "hostUsers" not in pod and "procMount" not in merge["securityContext"]


def test_every_pod_runs_the_same_image_as_the_image_s_own_user():
    grade_pod = grade_job()["spec"]["template"]["spec"]
    merge_pod = load("k8s-merge-job.yaml")["spec"]["template"]["spec"]
    images = {c["image"] for pod in (grade_pod, merge_pod)
              for c in pod["containers"] + pod.get("initContainers", [])}
    assert len(images) == 1 and re.fullmatch(r"\S+:\S+", images.pop())
    assert merge_pod["securityContext"]["runAsUser"] == image_user()


# --- Slurm -------------------------------------------------------------------------------------

def sbatch_options():
    """The #SBATCH lines sbatch reads: those before the script's first command."""
    options = []
    for line in SLURM.read_text().splitlines()[1:]:
        if line.startswith("#SBATCH"):
            options.append(line.split(None, 1)[1])
        elif line.strip() and not line.startswith("#"):
            break
    return options


def slurm_shards():
    (array,) = [o for o in sbatch_options() if o.startswith("--array=")]
    match = re.fullmatch(r"--array=0-(\d+)", array)
    assert match, array
    return int(match.group(1)) + 1


def run_slurm(stub, tmp_path, task, *args, **env):
    out = tmp_path / f"slurm-args-{task}"
    environment = {"PATH": os.environ["PATH"], "GRADER_PYTHON": str(stub), "STUB_OUT": str(out),
                   "SLURM_SUBMIT_DIR": str(tmp_path), "SLURM_JOB_ID": "77", "TMPDIR": str(tmp_path),
                   **env}
    if task is not None:
        environment["SLURM_ARRAY_TASK_ID"] = str(task)
    run = subprocess.run(["bash", str(SLURM), *args], env=environment, cwd=tmp_path,
                         capture_output=True, text=True, timeout=30)
    return run, out


def test_the_slurm_script_parses_and_asks_for_an_array_of_n_tasks():
    subprocess.run(["bash", "-n", str(SLURM)], check=True, timeout=30)
    n = slurm_shards()
    assert re.search(rf'^SHARDS="\$\{{SHARDS:-{n}\}}"$', SLURM.read_text(), re.M), "SHARDS defaults to N"
    names = {o.split("=")[0] for o in sbatch_options()}
    assert {"--cpus-per-task", "--mem", "--time"} <= names
    assert "course_utils.grading merge results/shard-* --out results/all" in SLURM.read_text()
    assert "--dependency=afterok:" in SLURM.read_text()


def test_array_task_i_grades_shard_i_plus_1_of_n_into_its_own_folder(stub, tmp_path):
    n = slurm_shards()
    for task in range(n):
        run, out = run_slurm(stub, tmp_path, task, SLURM_CPUS_PER_TASK="6")
        assert run.returncode == 0, run.stderr
        args = recorded(out)
        assert args[:3] == ["-m", "course_utils.grading", "submissions"]
        assert pairs(args) == {"--out": f"results/shard-{task + 1}", "--shard": f"{task + 1}/{n}",
                               "--workers": "6", "--hide": "results"}
        # The grader's run folders go in a folder of the task's own, gone when the task ends.
        tmpdir = Path(recorded(Path(f"{out}.tmpdir"))[0])
        assert tmpdir.parent == tmp_path and "77" in tmpdir.name and not tmpdir.exists()


def test_the_slurm_script_passes_folders_and_grader_options_on(stub, tmp_path):
    run, out = run_slurm(stub, tmp_path, 7, "subs", "out", "--exam", "--cell-timeout", "120", SHARDS="8")
    assert run.returncode == 0, run.stderr
    args = recorded(out)
    assert args[2] == "subs" and args[-3:] == ["--exam", "--cell-timeout", "120"]
    assert pairs(args)["--out"] == "out/shard-8" and pairs(args)["--shard"] == "8/8"
    # every shard's results lie in "out", on the shared file system: all of it is hidden
    assert pairs(args)["--hide"] == "out"


@pytest.mark.parametrize("task, env", [(None, {}), (4, {"SHARDS": "4"}), (0, {"SHARDS": "x"})])
def test_a_task_without_a_shard_stops_before_grading(stub, tmp_path, task, env):
    run, out = run_slurm(stub, tmp_path, task, **env)
    assert run.returncode == 2 and "slurm-grade.sh:" in run.stderr
    assert not out.exists(), "the grader never started"


# --- The image ---------------------------------------------------------------------------------

def instructions():
    """The Containerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", CONTAINERFILE.read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def instruction(name):
    return [line.split(None, 1)[1] for line in instructions() if line.split(None, 1)[0].upper() == name]


def image_user():
    (user,) = instruction("USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric uid that is not root (runAsNonRoot can check it)"
    return int(uid)


def test_the_image_starts_from_a_pinned_python_and_installs_bubblewrap():
    (base,) = instruction("FROM")
    name, _, tag = base.partition("@")[0].rpartition(":")
    assert "@sha256:" in base or re.search(r"\d+\.\d+\.\d+", tag), f"FROM {base}: pin the version"
    assert "latest" not in tag and "python" in name
    runs = " ".join(instruction("RUN"))
    assert re.search(r"apt-get install -y --no-install-recommends bubblewrap", runs)


def test_the_image_sets_the_course_up_and_runs_the_grader_not_as_root():
    runs = instruction("RUN")
    assert any("./course setup" in run for run in runs)
    assert instruction("ARG") == ["COURSE_TORCH=cpu"]
    assert image_user() == 10001
    (entrypoint,) = instruction("ENTRYPOINT")
    assert yaml.safe_load(entrypoint) == [IMAGE_PYTHON, "-m", "course_utils.grading"]
    assert instruction("COPY") == [". /course"]


def test_the_build_context_leaves_local_state_out_and_keeps_what_grading_needs():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]

    def ignored(path):
        return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p.replace("**/", "")) for p in patterns)

    for local in (".venv", ".git", "my-work", ".course", ".nbgrader-venv", "_site", "submissions", "results",
                  "pytorch_course.egg-info"):
        assert ignored(local), local
    for needed in ("course", "course_utils", "notebooks", "solutions", "pyproject.toml",
                   "requirements.txt", "README.md", "deploy"):
        assert (ROOT / needed).exists() and not ignored(needed), needed


def engine():
    """A container tool that can build here: (name, None), or (None, why not)."""
    if os.environ.get("COURSE_IMAGE_BUILD") != "1":
        return None, "building the image takes minutes: set COURSE_IMAGE_BUILD=1 to build it"
    tried = []
    for tool in ("docker", "podman", "buildah"):
        if shutil.which(tool) is None:
            continue
        try:
            info = subprocess.run([tool, "info"], capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            tried.append(f"`{tool} info` did not answer in 20 s")
            continue
        if info.returncode == 0:
            return tool, None
        said = " ".join((info.stderr or info.stdout).split())[-160:]
        tried.append(f"`{tool} info` failed: {said}")
    return None, "no container engine to build with: " + ("; ".join(tried) or "none of docker, podman, buildah")


def test_the_image_builds_and_its_grader_runs(tmp_path):
    tool, why_not = engine()
    if tool is None:
        pytest.skip(why_not)
    tag = "localhost/course-grader:test"
    build = [tool, "build"] if tool != "buildah" else [tool, "bud"]
    run = subprocess.run([*build, "-f", str(CONTAINERFILE), "-t", tag, str(ROOT)],
                         capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    if tool == "buildah":
        return  # buildah builds; running is docker's or podman's
    helped = subprocess.run([tool, "run", "--rm", tag, "--help"], capture_output=True, text=True, timeout=300)
    assert helped.returncode == 0 and "merge" in helped.stdout, helped.stderr
    # The README's options for a local run, and the grader's own trial sandbox inside the image.
    unmask = "systempaths=unconfined" if tool == "docker" else "unmask=ALL"
    trial = subprocess.run(
        [tool, "run", "--rm", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
         "--security-opt", unmask, "--entrypoint", IMAGE_PYTHON, tag, "-c",
         "from course_utils.grading.sandbox import bubblewrap_problem; print(bubblewrap_problem())"],
        capture_output=True, text=True, timeout=300)
    assert trial.returncode == 0, trial.stderr
    restricted = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    if restricted.exists() and restricted.read_text().strip() == "1":
        pytest.skip("this host sets kernel.apparmor_restrict_unprivileged_userns=1 (deploy/README.md, "
                    f"point 1): the trial in the image said {trial.stdout.strip()}")
    assert trial.stdout.strip() == "None", trial.stdout
