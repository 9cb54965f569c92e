"""Session-wide pytest hooks for tests/, notebooks/ and solutions/.

- The report header names the device the tests run on.
- REQUIRE_GPU=1 (the GPU CI job) stops the session at once when torch sees no accelerator,
  instead of quietly testing on the CPU.
- COURSE_SUMMARY_FILE=PATH (set by ./course test) receives the counts of passed, failed and
  skipped tests, which ./course adds up over its two pytest runs.

torch is imported only inside the hooks, on the controlling process, so that collecting tests
on pytest-xdist workers stays cheap.
"""

from __future__ import annotations

import os

import pytest


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _gpu_required() -> bool:
    return os.environ.get("REQUIRE_GPU", "").strip().lower() in {"1", "true", "yes"}


def _device():
    """(torch module, torch.device); (None, None) when torch is not installed."""
    try:
        import torch
    except ImportError:
        return None, None
    from course_utils.env import pick_device

    return torch, pick_device()


def _describe(torch, device) -> str:
    if torch is None:
        return "torch is not installed"
    name = str(device)
    if device.type == "cuda":
        name += f" ({torch.cuda.get_device_name(device)})"
    cuda = torch.version.cuda
    build = f"built for CUDA {cuda}" if cuda else "a build without CUDA"
    return f"{name}, torch {torch.__version__}, {build}"


def pytest_report_header(config: pytest.Config) -> str:
    torch, device = _device()
    return f"course device: {_describe(torch, device)}"


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _gpu_required() or _is_xdist_worker(session.config):
        return
    torch, device = _device()
    if torch is None:
        pytest.exit("REQUIRE_GPU=1 but torch is not installed.", returncode=3)
    if device.type == "cpu":
        cuda = torch.version.cuda
        pytest.exit(
            f"REQUIRE_GPU=1 but torch sees no accelerator ({_describe(torch, device)}): "
            + (
                "check the NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES."
                if cuda
                else "this torch is a CPU-only build; install a GPU build "
                "(TORCH_INDEX_URL=https://download.pytorch.org/whl/cuXYZ ./course setup, see ./course -h)."
            ),
            returncode=3,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("COURSE_SUMMARY_FILE")
    if not path or _is_xdist_worker(session.config):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = getattr(reporter, "stats", {})

    def count(*keys: str) -> int:
        return sum(
            1
            for key in keys
            for report in stats.get(key, [])
            if getattr(report, "count_towards_summary", True)
        )

    with open(path, "w", encoding="utf-8") as f:
        f.write(
            f"passed={count('passed')} failed={count('failed', 'error')} "
            f"skipped={count('skipped')}\n"
        )
