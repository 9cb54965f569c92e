import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from course_utils import env, nvidia_smi
from course_utils.env import Check, HealthReport, NvidiaSmiInfo, diagnose_build

H200 = NvidiaSmiInfo(gpu_names=("NVIDIA H200",), driver_version="550.54.15", cuda_version="12.4")

NVIDIA_SMI_BANNER = """\
Tue Mar  4 10:00:00 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
"""


# --- device and seeds -------------------------------------------------------------------------


def this_machines_device_type() -> str:
    """What pick_device() should say here, asked of torch directly (CPU, CUDA, MPS or XPU runner)."""
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return "xpu"
    return "cpu"


ON_AN_ACCELERATOR = this_machines_device_type() != "cpu"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA (or ROCm) GPU")
needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")


def test_pick_device_is_this_machines_fastest():
    device = env.pick_device()
    assert isinstance(device, torch.device)
    assert device.type == this_machines_device_type()


@pytest.mark.parametrize(
    "cuda, mps, xpu, expected",
    [(False, False, False, "cpu"), (True, True, True, "cuda"), (False, True, True, "mps"),
     (False, False, True, "xpu")],
)
def test_pick_device_order(monkeypatch, cuda, mps, xpu, expected):
    monkeypatch.setattr(env, "_cuda_available", lambda: cuda)
    monkeypatch.setattr(env, "_mps_available", lambda: mps)
    monkeypatch.setattr(env, "_xpu_available", lambda: xpu)
    assert env.pick_device() == torch.device(expected)


def test_pick_device_survives_a_torch_without_xpu(monkeypatch):
    expected = this_machines_device_type()
    monkeypatch.delattr(torch, "xpu", raising=False)
    assert env.pick_device().type == ("cpu" if expected == "xpu" else expected)


def test_seed_everything_repeats_torch_numpy_and_random():
    def draw():
        return torch.rand(4).tolist(), np.random.rand(4).tolist(), [random.random() for _ in range(4)]

    env.seed_everything(7)
    first = draw()
    env.seed_everything(7)
    assert draw() == first
    env.seed_everything(8)
    assert draw() != first


@pytest.mark.parametrize("seed", [True, 1.5, "42", None])
def test_seed_everything_rejects_what_is_not_an_int(seed):
    with pytest.raises(TypeError, match="seed must be an int"):
        env.seed_everything(seed)


def test_seed_everything_rejects_seeds_numpy_cannot_take():
    with pytest.raises(ValueError, match="between 0 and"):
        env.seed_everything(-1)


# --- the health check on this machine --------------------------------------------------------


def test_health_check_passes_here():
    report = env.health_check(show=False)

    assert isinstance(report, HealthReport)
    assert report.ok
    # A warning is allowed for one thing only: a CUDA build with no GPU to use (PyPI's default
    # torch on a laptop, CI's cuda-build-without-gpu job), which runs the course on the CPU.
    warned = [check.name for check in report.checks if check.status == "warning"]
    assert warned in ([], ["silent CPU fallback"])
    if warned:
        assert torch.version.cuda is not None and not torch.cuda.is_available()
    assert {check.status for check in report.checks} <= {"ok", "skipped", "warning"}
    names = [check.name for check in report.checks]
    accelerators = [f"accelerator {device}" for device in env.available_accelerators()]
    assert names == [
        "versions", "create and compute", "autograd", *(accelerators or ["accelerator"]), "seed",
        "silent CPU fallback",
    ]
    assert report.device == str(env.pick_device())
    if accelerators:  # each accelerator computed for real, and matched the CPU
        assert {c.status for c in report.checks if c.name in accelerators} == {"ok"}
    assert report.versions["torch"] == torch.__version__
    assert report.versions["NumPy"] == np.__version__


def test_health_check_report_is_json_text_and_html():
    report = env.health_check(show=False)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is True
    assert [check["name"] for check in data["checks"]] == [check.name for check in report.checks]

    text, page = str(report), report._repr_html_()
    for check in report.checks:
        assert check.name in text
        assert check.name in page
    assert "Python executable" in text and "Python executable" in page


def test_health_check_shows_a_table(capsys):
    env.health_check(show=True)
    assert "silent CPU fallback" in capsys.readouterr().out


def test_health_check_leaves_random_generators_alone():
    env.seed_everything(3)
    expected = torch.rand(3).tolist(), np.random.rand(), random.random()
    env.seed_everything(3)
    env.health_check(show=False)
    assert (torch.rand(3).tolist(), np.random.rand(), random.random()) == expected


def test_no_accelerator_is_skipped_in_plain_words():
    (check,) = env.check_accelerators([])
    assert check.status == "skipped"
    assert "the course runs on the CPU" in check.detail


# --- accelerators that fail ------------------------------------------------------------------


def test_failing_round_trip_is_reported_and_the_report_completes(monkeypatch):
    def broken(device):
        raise RuntimeError("CUDA error: CUDA driver version is insufficient for CUDA runtime version")

    monkeypatch.setattr(env, "available_accelerators", lambda: [torch.device("cuda", 0)])
    monkeypatch.setattr(env, "round_trip", broken)
    report = env.health_check(show=False)

    failed = [check for check in report.checks if check.status == "failed"]
    assert [check.name for check in failed] == ["accelerator cuda:0"]
    assert "driver version is insufficient" in failed[0].detail
    assert "reinstall torch" in failed[0].fix
    assert report.checks[-1].name == "silent CPU fallback"
    assert not report.ok
    assert "driver version is insufficient" in str(report)


@needs_no_cuda
def test_a_real_failure_carries_the_real_message():
    # Without a CUDA GPU, allocating on a CUDA device raises for real.
    check = env.check_accelerator(torch.device("cuda", 0))
    assert check.status == "failed"
    assert check.detail.startswith("computing on cuda:0 failed: ")
    assert len(check.detail) > len("computing on cuda:0 failed: ") + 10


@needs_cuda
def test_a_real_cuda_gpu_computes_and_matches_the_cpu():
    check = env.check_accelerator(torch.device("cuda", 0))
    assert check.status == "ok", check.detail
    assert env.round_trip(torch.device("cuda", 0)) is None


@needs_cuda
def test_a_cuda_failure_beyond_index_range_is_reported_not_raised():
    check = env.check_accelerator(torch.device("cuda", torch.cuda.device_count()))
    assert check.status == "failed" and check.fix


# --- simulated machines ----------------------------------------------------------------------


def test_gpu_with_a_cpu_only_torch_is_named_with_its_fix():
    check = diagnose_build(None, False, H200, torch_version="2.13.0+cpu")
    assert check.status == "failed"
    assert "NVIDIA H200" in check.detail
    assert "CPU" in check.detail
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu" in check.fix
    assert "12.4" in check.fix
    assert "pytorch.org" in check.fix


def test_driver_older_than_torchs_cuda_fails():
    check = diagnose_build("12.8", False, H200)
    assert check.status == "failed"
    assert "update the NVIDIA driver, or install a torch build for an older CUDA" in check.fix
    assert "12.8" in check.detail and "12.4" in check.detail


def test_driver_older_by_a_minor_version_but_working_warns():
    check = diagnose_build("12.6", True, H200)
    assert check.status == "warning"
    assert "update the NVIDIA driver" in check.fix
    # NVIDIA documents this as minor-version compatibility: no "sometimes", and it names the limit.
    assert "minor-version compatibility" in check.detail
    assert "PTX" in check.detail
    assert "sometimes" not in check.detail and "may" not in check.detail.split()


def test_driver_of_an_older_major_version_names_the_major_version_as_the_cause():
    check = diagnose_build("13.0", False, H200)
    assert check.status == "failed"
    assert "newer major version" in check.detail
    assert "everything runs on the CPU" in check.detail
    assert "update the NVIDIA driver" in check.fix


def test_the_health_check_does_not_blame_an_old_driver_for_a_gpu_that_is_available():
    # A too-old driver makes is_available() False (torch warns "driver ... too old"); the
    # available-but-broken case is a GPU the build has no kernels for.
    fix = env._accelerator_fix(torch.device("cuda"), "CUDA error: no kernel image is available for execution on the device")
    assert "no code for this GPU's architecture" in fix
    ptx = env._accelerator_fix(torch.device("cuda"), "CUDA error: the provided PTX was compiled with an unsupported toolchain.")
    assert "update the NVIDIA driver" in ptx and "PTX" in ptx
    busy = env._accelerator_fix(torch.device("cuda"), "CUDA error: CUDA-capable device(s) is/are busy or unavailable")
    assert "exclusive-process" in busy


def test_cuda_build_without_a_driver_warns():
    check = diagnose_build("12.4", False, None)
    assert check.status == "warning"
    assert "built for CUDA 12.4 but no NVIDIA driver is visible" in check.detail


def test_cuda_build_without_a_driver_says_it_works_on_the_cpu_and_names_the_smaller_build():
    # PyPI's default torch on Linux, on a laptop with no NVIDIA GPU.
    check = diagnose_build("13.0", False, None, torch_version="2.13.0")
    assert check.status == "warning"
    assert "runs on the CPU: every notebook works" in check.detail
    assert "a few GB" in check.detail
    assert "if this machine has an NVIDIA GPU, install its driver" in check.fix
    assert "nothing is broken" in check.fix
    assert "COURSE_TORCH=cpu ./course setup" in check.fix
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in check.fix


ROCM = "7.0.51831"


def test_rocm_build_with_an_amd_gpu_is_ok_and_not_called_cpu_only():
    # ROCm: torch.version.cuda is None, yet the "cuda" device is the AMD GPU and it works.
    check = diagnose_build(None, True, None, torch_hip_version=ROCM)
    assert check.status == "ok"
    assert f"a ROCm build (HIP {ROCM})" in check.detail
    assert "uses the AMD GPU" in check.detail
    assert "CPU-only" not in check.detail and "no CUDA" not in check.detail
    assert check.fix == ""


def test_rocm_build_without_a_gpu_warns_says_it_works_on_the_cpu_and_names_the_smaller_build():
    check = diagnose_build(None, False, None, torch_version="2.13.0+rocm7.0", torch_hip_version=ROCM)
    assert check.status == "warning"
    assert f"a ROCm build (HIP {ROCM})" in check.detail
    assert "no AMD GPU it can use" in check.detail
    assert "runs on the CPU: every notebook works" in check.detail
    assert "CPU-only build" not in check.detail
    assert "rocminfo" in check.fix
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in check.fix


def test_rocm_build_on_an_nvidia_machine_fails_with_the_cuda_fix():
    check = diagnose_build(None, False, H200, torch_version="2.13.0+rocm7.0", torch_hip_version=ROCM)
    assert check.status == "failed"
    assert "NVIDIA H200" in check.detail and "ROCm build" in check.detail
    assert "CPU-only" not in check.detail
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu" in check.fix


def test_health_check_on_a_simulated_rocm_machine_reports_rocm_that_works():
    report = env.run_checks(
        gpu_info=None, accelerators=[], cuda_available=True, torch_cuda_version=None,
        torch_hip_version=ROCM,
    )
    fallback = report.checks[-1]
    assert fallback.name == "silent CPU fallback" and fallback.status == "ok"
    for shown in (str(report), report._repr_html_()):
        assert f"a ROCm build (HIP {ROCM})" in shown
        assert "CPU-only" not in shown


def test_health_check_on_a_simulated_cuda_build_without_a_driver_warns_and_completes():
    report = env.run_checks(gpu_info=None, accelerators=[], cuda_available=False, torch_cuda_version="13.0")
    assert report.ok  # a warning, not a failure: the course runs
    assert [c.status for c in report.checks if c.name == "silent CPU fallback"] == ["warning"]
    assert "download.pytorch.org/whl/cpu" in str(report)


SIMULATOR = Path(__file__).parent / "simulated_machine"


@pytest.mark.skipif(not (SIMULATOR / "sitecustomize.py").exists(), reason="no machine simulator")
@pytest.mark.parametrize(
    "machine, expected",
    [
        ("cuda-build-no-gpu", "this torch was built for CUDA 13.0 but no NVIDIA driver is visible"),
        ("rocm-build-no-gpu", "torch is a ROCm build (HIP 7.0.51831), for AMD GPUs, but it finds no AMD GPU"),
    ],
)
def test_health_check_on_another_build_runs_to_the_end(machine, expected):
    # The real health_check() in a Python whose torch reports and fails like that build.
    code = (
        "import json; from course_utils.env import health_check; "
        "print(json.dumps(health_check(show=False).to_dict()))"
    )
    # PATH without nvidia-smi, so a GPU runner diagnoses the same machine as a laptop.
    environ = {
        **os.environ, "COURSE_SIMULATED_MACHINE": machine, "PYTHONPATH": str(SIMULATOR),
        "PATH": str(Path(sys.executable).parent),
    }
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=120
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    statuses = {check["name"]: check["status"] for check in report["checks"]}
    assert report["ok"], report
    assert statuses["accelerator"] == "skipped"
    assert statuses["silent CPU fallback"] == "warning"
    assert expected in report["checks"][-1]["detail"]
    assert "download.pytorch.org/whl/cpu" in report["checks"][-1]["fix"]
    assert report["device"] == "cpu"


def test_gpu_seen_by_the_driver_but_not_by_torch_fails():
    check = diagnose_build("12.4", False, H200)
    assert check.status == "failed"
    assert "CUDA_VISIBLE_DEVICES" in check.fix


@pytest.mark.parametrize(
    "torch_cuda, available, gpu",
    [("12.4", True, H200), ("11.8", True, H200), (None, False, None), ("12.4", True, None)],
)
def test_matching_setups_are_ok(torch_cuda, available, gpu):
    check = diagnose_build(torch_cuda, available, gpu)
    assert check.status == "ok"
    assert check.fix == ""


def test_health_check_on_a_simulated_gpu_machine_with_a_cpu_build():
    report = env.run_checks(gpu_info=H200, accelerators=[], cuda_available=False, torch_cuda_version=None)
    assert not report.ok
    assert report.versions["NVIDIA GPU"] == "NVIDIA H200"
    assert report.versions["driver's newest CUDA"] == "12.4"
    assert "CPU-only build" in report._repr_html_()


# --- nvidia-smi ------------------------------------------------------------------------------


def test_missing_nvidia_smi_gives_none(monkeypatch):
    monkeypatch.setattr(nvidia_smi.shutil, "which", lambda name: None)
    assert nvidia_smi.query_nvidia_smi() is None


def test_nvidia_smi_timing_out_gives_none(monkeypatch):
    def too_slow(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs.get("timeout"))

    monkeypatch.setattr(nvidia_smi.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(nvidia_smi.subprocess, "run", too_slow)
    assert nvidia_smi.query_nvidia_smi() is None


@pytest.mark.parametrize("error", [FileNotFoundError("gone"), PermissionError("denied")])
def test_nvidia_smi_that_cannot_start_gives_none(monkeypatch, error):
    def cannot_start(command, **kwargs):
        raise error

    monkeypatch.setattr(nvidia_smi.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(nvidia_smi.subprocess, "run", cannot_start)
    assert nvidia_smi.query_nvidia_smi() is None


def test_nvidia_smi_without_a_driver_gives_none(monkeypatch):
    failed = subprocess.CompletedProcess([], 9, stdout="", stderr="NVIDIA-SMI has failed")
    monkeypatch.setattr(nvidia_smi.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(nvidia_smi.subprocess, "run", lambda command, **kwargs: failed)
    assert nvidia_smi.query_nvidia_smi() is None


def test_nvidia_smi_output_is_read(monkeypatch):
    def fake_run(command, **kwargs):
        assert kwargs["timeout"] <= nvidia_smi.NVIDIA_SMI_TIMEOUT_S
        if "--query-gpu=name" in command:
            return subprocess.CompletedProcess(command, 0, stdout="NVIDIA H200\nNVIDIA H200\n", stderr="")
        return subprocess.CompletedProcess(command, 0, stdout=NVIDIA_SMI_BANNER, stderr="")

    monkeypatch.setattr(nvidia_smi.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(nvidia_smi.subprocess, "run", fake_run)
    info = nvidia_smi.query_nvidia_smi()
    assert info == NvidiaSmiInfo(("NVIDIA H200", "NVIDIA H200"), "550.54.15", "12.4")


# --- the report ------------------------------------------------------------------------------


def test_report_escapes_html_and_counts_failures():
    report = HealthReport(
        checks=[Check("a <b>", "failed", "x < y & z", "run <this>"), Check("c", "warning", "w")],
        versions={"torch": "<odd>"},
    )
    page = report._repr_html_()
    assert "a <b>" not in page and "<odd>" not in page
    assert "a &lt;b&gt;" in page and "x &lt; y &amp; z" in page and "run &lt;this&gt;" in page
    assert "&lt;odd&gt;" in page
    assert "❌" in page and "⚠️" in page
    assert "1 check failed, 1 warning" in str(report)
    assert not report.ok


def test_check_rejects_unknown_status():
    with pytest.raises(ValueError):
        Check("x", "fine", "")


@needs_cuda
def test_random_state_preserved_puts_cuda_generators_back():
    from course_utils.env import random_state_preserved

    torch.manual_seed(0)
    torch.rand(1, device="cuda")  # CUDA started and seeded
    expected = torch.cuda.get_rng_state_all()
    with random_state_preserved():
        torch.rand(1000, device="cuda")
    assert all(torch.equal(a, b) for a, b in zip(torch.cuda.get_rng_state_all(), expected))


@needs_cuda
def test_a_check_that_starts_cuda_leaves_the_learners_cuda_numbers_as_they_would_have_been():
    """The learner seeded, never used CUDA yet; a check starts CUDA and draws there."""
    def cuda_draws(inside_check: bool) -> str:
        code = (
            "import torch\n"
            "from course_utils.env import random_state_preserved\n"
            "torch.manual_seed(0)\n"
            + ("with random_state_preserved():\n    torch.rand(50, device='cuda')\n" if inside_check else "")
            + "print(torch.rand(3, device='cuda').tolist())\n"
        )
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        return run.stdout

    assert cuda_draws(inside_check=True) == cuda_draws(inside_check=False)


def test_cuda_started_inside_random_state_preserved_is_reseeded_as_it_would_have_started(monkeypatch):
    """The CPU-side logic of the test above, on any machine: CUDA not started before the block,
    started inside it, gets the seed torch.manual_seed had queued for it."""
    from course_utils.env import random_state_preserved

    torch.manual_seed(1234)
    started = iter([False, True])  # at entry: not started; at exit: started by the block
    seeded = []
    monkeypatch.setattr(env, "_cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: next(started))
    monkeypatch.setattr(torch.cuda, "manual_seed_all", seeded.append)
    with random_state_preserved():
        pass
    assert seeded == [1234]


def test_a_driver_of_an_older_major_version_is_offered_any_build_of_its_own_major():
    """The advice agrees with chapter 00's minor-version compatibility: a cu126 build runs on a
    driver for CUDA 12.4, so "no newer than 12.4" would be stricter than what is true."""
    check = diagnose_build("13.0", False, H200)
    assert check.status == "failed"
    assert "install a torch build for CUDA 12: any 12.x build runs on this driver" in check.fix
    assert "minor-version compatibility" in check.fix and "no newer than 12.4" in check.fix
    cpu = diagnose_build(None, False, H200, torch_version="2.13.0+cpu")
    assert "a CUDA version of major version 12: any 12.x build runs" in cpu.fix
