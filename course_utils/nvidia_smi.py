"""What the NVIDIA driver says about the machine, read from ``nvidia-smi``.

Standard library only: ``./course setup`` reads it to choose a torch build before torch (or
anything else) is installed, and the health check reads it to compare the driver with the build.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass

NVIDIA_SMI_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class NvidiaSmiInfo:
    """What the NVIDIA driver says about the machine, independent of how torch was built."""

    gpu_names: tuple[str, ...]
    driver_version: str | None
    cuda_version: str | None  # the newest CUDA runtime this driver supports

    @property
    def gpus(self) -> str:
        return ", ".join(self.gpu_names) or "an NVIDIA GPU"


def query_nvidia_smi(timeout: float = NVIDIA_SMI_TIMEOUT_S) -> NvidiaSmiInfo | None:
    """Ask the NVIDIA driver which GPUs it has; None when there is no answer, never an error.

    No answer covers: no ``nvidia-smi`` on PATH, a driver that does not respond, no GPU, and a
    call that outlasts ``timeout`` seconds (all calls together).
    """
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return None
    deadline = time.monotonic() + timeout
    summary = _run_for_output([executable], deadline)
    names = _run_for_output([executable, "--query-gpu=name", "--format=csv,noheader"], deadline)
    if summary is None or names is None:
        return None
    gpu_names = tuple(line.strip() for line in names.splitlines() if line.strip())
    if not gpu_names:
        return None
    return NvidiaSmiInfo(
        gpu_names=gpu_names,
        driver_version=_field_after("Driver Version:", summary),
        cuda_version=_field_after("CUDA Version:", summary),
    )


def _run_for_output(command: list[str], deadline: float) -> str | None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, errors="replace", timeout=remaining
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def _field_after(label: str, text: str) -> str | None:
    # nvidia-smi's banner reads e.g. "Driver Version: 550.54.15      CUDA Version: 12.4".
    match = re.search(re.escape(label) + r"\s*([0-9][0-9.]*)", text)
    return match.group(1) if match else None
