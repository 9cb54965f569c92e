"""Choose and install the torch build that fits this machine, for ``./course setup``.

PyPI serves one torch per platform: on Linux a CUDA build of several GB, which also needs a
driver new enough for its CUDA version. Most learners on Linux have no NVIDIA GPU at all and
want the small CPU build; those with one want a CUDA build their driver can run; AMD GPUs need
a ROCm build. PyTorch publishes each of those on its own package index, so set-up looks at the
hardware, picks the index, checks that it really serves the pinned version for this Python and
platform, and falls back to PyPI (saying so) when it cannot be reached.

Standard library only: it runs in the new virtual environment before anything is installed.

    python -m course_utils.torch_build key              # what the choice depends on (set-up's stamp)
    python -m course_utils.torch_build install torch==2.13.0

The learner overrides the choice with ``COURSE_TORCH`` (``cpu``, ``cuda``, ``rocm`` or ``pypi``)
or with ``TORCH_INDEX_URL`` (an index of their choosing).
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Callable

from course_utils.nvidia_smi import NvidiaSmiInfo, query_nvidia_smi

PYTORCH_INDEX = "https://download.pytorch.org/whl"
# Builds PyTorch has published for recent releases, newest first; set-up asks the index which of
# them the pinned release really has, so an entry a release lacks costs one look-up, no error.
CUDA_BUILDS = ("cu132", "cu130", "cu129", "cu128", "cu126", "cu124", "cu121", "cu118")
ROCM_BUILDS = ("rocm7.1", "rocm7.0", "rocm6.4", "rocm6.3", "rocm6.2")
CHOICES = ("cpu", "cuda", "rocm", "pypi")
FETCH_TIMEOUT_S = 15.0
KIND_NAMES = {"cpu": "CPU", "cuda": "CUDA", "rocm": "ROCm", "pypi": "PyPI", "index": "chosen"}
OVERRIDE_HINT = "Override: COURSE_TORCH=cpu|cuda|rocm|pypi or TORCH_INDEX_URL=URL ./course setup"


@dataclass(frozen=True)
class Machine:
    """What decides the build: the platform, and which GPU driver answers."""

    system: str  # platform.system(): Linux, Darwin, Windows
    arch: str  # platform.machine(): x86_64, aarch64, arm64
    python_tag: str  # cp311
    nvidia: NvidiaSmiInfo | None = None
    amd_gpu: bool = False


@dataclass
class Plan:
    """The build to install: candidate indexes in order of preference, and why."""

    kind: str  # cpu, cuda, rocm, pypi or index
    reason: str
    indexes: list[str] = field(default_factory=list)  # empty: PyPI, the default index


def detect() -> Machine:
    """This machine, as far as choosing a torch build goes."""
    system, arch = platform.system(), platform.machine()
    nvidia = query_nvidia_smi() if system in ("Linux", "Windows") else None
    amd = system == "Linux" and os.path.exists("/dev/kfd")  # the ROCm kernel driver's device
    return Machine(system, arch, f"cp{sys.version_info[0]}{sys.version_info[1]}", nvidia, amd)


def _version_tuple(text: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text or ""))[:2]


def _cuda_tag_version(tag: str) -> tuple[int, int]:
    digits = tag[2:]
    return int(digits[:-1]), int(digits[-1])


def plan(machine: Machine, choice: str = "", index_url: str = "") -> Plan:
    """Which build to install: the learner's override, else what the hardware calls for."""
    if index_url:
        return Plan("index", f"TORCH_INDEX_URL is set to {index_url}", [index_url])
    choice = choice.strip().lower()
    if choice and choice not in CHOICES:
        raise ValueError(f"COURSE_TORCH={choice!r}: expected one of {', '.join(CHOICES)}")
    if choice == "pypi" or (not choice and machine.system != "Linux"):
        where = {"Darwin": "on a Mac it uses the Apple GPU through MPS"}.get(
            machine.system, "PyPI's default build for this platform"
        )
        reason = "COURSE_TORCH=pypi" if choice else where
        return Plan("pypi", reason)
    if choice == "cpu" or (not choice and machine.nvidia is None and not machine.amd_gpu):
        reason = "COURSE_TORCH=cpu" if choice else "nvidia-smi finds no NVIDIA driver, and there is no AMD GPU"
        return Plan("cpu", reason, [f"{PYTORCH_INDEX}/cpu"])
    if choice == "rocm" or (not choice and machine.nvidia is None):
        reason = "COURSE_TORCH=rocm" if choice else "an AMD GPU driver found (/dev/kfd)"
        return Plan("rocm", reason, [f"{PYTORCH_INDEX}/{tag}" for tag in ROCM_BUILDS])
    driver_cuda = _version_tuple(machine.nvidia.cuda_version if machine.nvidia else None)
    if driver_cuda:
        tags = [tag for tag in CUDA_BUILDS if _cuda_tag_version(tag) <= driver_cuda]
        reason = (
            f"{machine.nvidia.gpus} with a driver for CUDA up to {machine.nvidia.cuda_version}"
            + (" (COURSE_TORCH=cuda)" if choice else "")
        )
    else:
        tags = list(CUDA_BUILDS)
        reason = "COURSE_TORCH=cuda (no driver answered, so any CUDA version)"
    return Plan("cuda", reason, [f"{PYTORCH_INDEX}/{tag}" for tag in tags])


def wheel_pattern(version: str, machine: Machine) -> re.Pattern:
    """A wheel of torch ``version`` (any local build tag) for this Python and platform."""
    platform_tag = {
        "Linux": rf"manylinux[^\s\"'<>]*_{re.escape(machine.arch)}",
        "Darwin": r"macosx[^\s\"'<>]*",
        "Windows": r"win_amd64",
    }.get(machine.system, r"[^\s\"'<>]+")
    return re.compile(
        rf"torch-{re.escape(version)}(\+[A-Za-z0-9.]+)?-{machine.python_tag}-"
        rf"{machine.python_tag}-{platform_tag}\.whl"
    )


def fetch_page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as response:  # noqa: S310
        return response.read().decode("utf-8", "replace")


@dataclass
class Resolution:
    index: str | None  # None: install from PyPI
    message: str


def resolve(
    the_plan: Plan, version: str, machine: Machine, fetch: Callable[[str], str] | None = None
) -> Resolution:
    """The first candidate index that serves ``version`` for this machine, or PyPI and why."""
    fetch = fetch or fetch_page
    if not the_plan.indexes:
        return Resolution(None, f"torch {version} from PyPI: {the_plan.reason}.")
    if the_plan.kind == "index":
        return Resolution(the_plan.indexes[0], f"torch {version} from {the_plan.indexes[0]}: {the_plan.reason}.")
    pattern = wheel_pattern(version, machine)
    unreachable = []
    for index in the_plan.indexes:
        try:
            page = urllib.parse.unquote(fetch(f"{index}/torch/"))
        except urllib.error.HTTPError:
            continue  # the server answered: this build does not exist; try the next one
        except (urllib.error.URLError, OSError, ValueError) as error:
            unreachable.append(f"{index} cannot be reached ({getattr(error, 'reason', error)})")
            break  # the host does not answer, and every candidate index lives there
        if pattern.search(page):
            label = {"cpu": "the CPU-only build", "cuda": f"the {index.rsplit('/', 1)[1]} build",
                     "rocm": f"the {index.rsplit('/', 1)[1]} build"}[the_plan.kind]
            return Resolution(index, f"torch {version}, {label}: {the_plan.reason}. From {index}.")
    pypi_note = (
        " On Linux PyPI's torch is a CUDA build of a few GB; it also runs on the CPU."
        if machine.system == "Linux" else ""
    )
    if unreachable:
        why = unreachable[0]
    else:
        why = f"no {KIND_NAMES[the_plan.kind]} build of torch {version} for {machine.python_tag} on {machine.arch} was found there"
    return Resolution(
        None,
        f"torch {version}: this machine wants the {KIND_NAMES[the_plan.kind]} build ({the_plan.reason}), "
        f"but {why}; installing from the default index (PyPI) instead.{pypi_note}",
    )


def installed_build() -> str | None:
    """The installed torch's build (cpu, cuda, rocm), read without importing torch; None if absent."""
    from importlib import metadata

    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None
    local = version.partition("+")[2]
    if local.startswith("cu"):
        return "cuda"
    if local.startswith("rocm"):
        return "rocm"
    if local == "cpu":
        return "cpu"
    return "pypi"


LAST_INTEL_MAC_TORCH = (2, 2)
"""PyTorch stopped building for Intel Macs (macOS on x86_64) after 2.2.2."""


def intel_mac_problem(machine: Machine, version: str) -> str | None:
    """Why ``version`` cannot be installed on this Mac, or None: pip would only say "no match"."""
    if machine.system != "Darwin" or machine.arch != "x86_64":
        return None
    if _version_tuple(version) <= LAST_INTEL_MAC_TORCH:
        return None
    return (
        f"torch {version} (the version this course pins) has no build for Intel Macs: PyTorch's "
        "last one for macOS on x86_64 was 2.2.2, and the course needs 2.6 or newer. On an Apple-"
        "silicon Mac this means your Python is an Intel build running under Rosetta: install an "
        "arm64 Python (python.org's installer, or Homebrew in /opt/homebrew) and run ./course "
        "setup with it. On an Intel Mac, conda-forge builds PyTorch itself (CPU only): install "
        "the course with conda (README, \"With conda\"); if conda finds no pytorch of the pinned "
        "version, take the course on Colab or Kaggle (README, \"Colab, Kaggle, or your class's "
        "JupyterHub\"), or in a Linux machine or container."
    )


def install(pin: str, env: dict | None = None) -> int:
    """Install ``pin`` (torch==X) from the chosen index; print one line on what and why."""
    env = os.environ if env is None else env
    version = pin.split("==", 1)[1]
    machine = detect()
    problem = None if env.get("TORCH_INDEX_URL") else intel_mac_problem(machine, version)
    if problem:
        print(f"course: {problem}", file=sys.stderr)
        return 2
    try:
        the_plan = plan(machine, env.get("COURSE_TORCH", ""), env.get("TORCH_INDEX_URL", ""))
    except ValueError as error:
        print(f"course: {error}", file=sys.stderr)
        return 2
    have = installed_build()
    if have is not None and (have == the_plan.kind or not (env.get("COURSE_TORCH") or env.get("TORCH_INDEX_URL"))):
        return 0  # keep a working torch; only an explicit override replaces it
    resolution = resolve(the_plan, version, machine)
    print(resolution.message)
    print(OVERRIDE_HINT)
    pip = [sys.executable, "-m", "pip"]
    if have is not None:
        subprocess.run(pip + ["uninstall", "--yes", "--quiet", "torch"], check=False)
    command = pip + ["install", pin]
    if resolution.index:
        command += ["--index-url", resolution.index]
    return subprocess.run(command, check=False).returncode


def key(env: dict | None = None) -> str:
    """What the set-up stamp records of the choice: only the learner's overrides.

    The hardware is not part of it, so a driver update does not reinstall a torch that works.
    """
    env = os.environ if env is None else env
    return f"COURSE_TORCH={env.get('COURSE_TORCH', '')} TORCH_INDEX_URL={env.get('TORCH_INDEX_URL', '')}"


def main(argv: list[str]) -> int:
    if len(argv) == 1 and argv[0] == "key":
        print(key())
        return 0
    if len(argv) == 2 and argv[0] == "install" and argv[1].startswith("torch=="):
        return install(argv[1])
    print(__doc__.strip().split("\n\n")[-2], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
