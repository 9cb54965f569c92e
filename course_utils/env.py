"""Where the course's code runs: which device to use, reproducible randomness, and a health check.

The health check exists because the most common setup problem is silent: torch installs fine,
every notebook runs, and the GPU sits unused because the wheel was a CPU-only build or the
driver is too old for it (``torch.cuda.is_available()`` is then False). The opposite case is
as real: a GPU that torch finds but that its build has no kernels for is "available" and fails
at its first computation. The check runs real computations and names such problems in plain
words, with the command that fixes them.

Everything that reads the outside world (``nvidia-smi``, which accelerators torch sees) sits
in small functions, and the diagnosis is a pure function of those facts, so tests can
simulate machines they are not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import platform
import random
import re
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from course_utils import display, hosting
from course_utils.nvidia_smi import NVIDIA_SMI_TIMEOUT_S, NvidiaSmiInfo, query_nvidia_smi  # noqa: F401

STATUSES = ("ok", "warning", "failed", "skipped")
SYMBOLS = {"ok": "✅", "warning": "⚠️", "failed": "❌", "skipped": "⏭️"}

INSTALL_SELECTOR = "https://pytorch.org/get-started/locally/"
MINIMUM_TORCH = (2, 6)
LARGEST_SEED = 2**32 - 1  # NumPy's limit; torch and random accept more.

NO_ACCELERATOR = (
    "no accelerator found: the course runs on the CPU, every notebook works, only timings differ"
)


# --- choosing a device ----------------------------------------------------------------------


def _answers_true(question: Callable[[], object]) -> bool:
    """Ask a backend whether it is usable; a build without that backend just answers no."""
    try:
        return bool(question())
    except Exception:  # AttributeError in builds without the backend, driver errors elsewhere
        return False


def _cuda_available() -> bool:
    return _answers_true(lambda: torch.cuda.is_available())


def _mps_available() -> bool:
    return _answers_true(lambda: torch.backends.mps.is_available())


def _xpu_available() -> bool:
    return _answers_true(lambda: torch.xpu.is_available())


def pick_device() -> torch.device:
    """The fastest device this machine offers, so notebooks can say ``device = pick_device()``.

    Order: CUDA (NVIDIA, and AMD through ROCm), then Apple's MPS, then Intel's XPU, then the CPU.
    It never raises: a broken or missing backend counts as absent.
    """
    if _cuda_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    if _xpu_available():
        return torch.device("xpu")
    return torch.device("cpu")


def available_accelerators() -> list[torch.device]:
    """Every accelerator device torch reports, so the health check can try each one for real."""
    devices: list[torch.device] = []
    if _cuda_available():
        devices += _indexed_devices("cuda", torch.cuda.device_count)
    if _mps_available():
        devices.append(torch.device("mps"))
    if _xpu_available():
        devices += _indexed_devices("xpu", lambda: torch.xpu.device_count())
    return devices


def _indexed_devices(kind: str, count: Callable[[], int]) -> list[torch.device]:
    try:
        return [torch.device(kind, index) for index in range(count())]
    except Exception:
        # Counting failed, but the backend said it is available: try its default device, so
        # the health check shows the real error instead of hiding the backend.
        return [torch.device(kind, 0)]


# --- reproducible randomness ----------------------------------------------------------------


def _require_seed(seed: object) -> None:
    # bool is a subclass of int, but seed_everything(True) is always a mistake.
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int such as 0 or 42, not {type(seed).__name__} {seed!r}.")
    if not 0 <= seed <= LARGEST_SEED:
        raise ValueError(f"seed must be between 0 and {LARGEST_SEED} (what NumPy accepts), not {seed}.")


def seed_everything(seed: int) -> None:
    """Make a notebook's random numbers repeat from run to run, whichever library draws them."""
    _require_seed(seed)
    random.seed(seed)
    numpy = _numpy_or_none()
    if numpy is not None:
        numpy.random.seed(seed)
    torch.manual_seed(seed)
    # torch.manual_seed already seeds the accelerators; saying so explicitly keeps that true
    # whatever a future torch changes, and costs nothing.
    if _cuda_available():
        torch.cuda.manual_seed_all(seed)
    if _mps_available():
        torch.mps.manual_seed(seed)
    if _xpu_available():
        torch.xpu.manual_seed_all(seed)


def _numpy_or_none():
    try:
        import numpy
    except ImportError:
        return None
    return numpy


# --- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One thing the health check tried, and what to do when it did not work."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, not {self.status!r}.")


@dataclass
class HealthReport:
    """The health check's results, as data for code and as a table for people."""

    checks: list[Check]
    versions: dict[str, str] = field(default_factory=dict)
    device: str = "cpu"

    @property
    def ok(self) -> bool:
        return all(check.status != "failed" for check in self.checks)

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "device": self.device,
            "checks": [dataclasses.asdict(check) for check in self.checks],
            "versions": dict(self.versions),
        }

    def headline(self) -> str:
        counts = {status: sum(c.status == status for c in self.checks) for status in STATUSES}
        problems = [
            _plural(counts["failed"], "check failed", "checks failed"),
            _plural(counts["warning"], "warning", "warnings"),
        ]
        problems = [problem for problem in problems if problem]
        verdict = ", ".join(problems) if problems else "everything works"
        return f"PyTorch health check: {verdict} (device: {self.device})"

    def __str__(self) -> str:
        lines = [self.headline(), "", *_text_table(self.checks)]
        if self.versions:
            lines += ["", *_text_versions(self.versions)]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(_html_check_row(check) for check in self.checks)
        header = "".join(f"<th {_LEFT}>{title}</th>" for title in ("", "check", "result"))
        page = (
            f"<div><p><b>{html.escape(self.headline())}</b></p>"
            f"<table><thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>"
        )
        if self.versions:
            page += f"<p><b>versions</b></p><table><tbody>{_html_version_rows(self.versions)}</tbody></table>"
        return page + "</div>"


def _plural(count: int, one: str, many: str) -> str:
    if count == 0:
        return ""
    return f"1 {one}" if count == 1 else f"{count} {many}"


# JupyterLab right-aligns table cells; prose reads better left-aligned.
_LEFT = 'style="text-align:left; vertical-align:top"'


def _html_check_row(check: Check) -> str:
    result = html.escape(check.detail)
    if check.fix:
        result += f"<br><b>Fix:</b> {html.escape(check.fix)}"
    symbol = f'<span title="{check.status}">{SYMBOLS[check.status]}</span>'
    cells = (symbol, html.escape(check.name), result)
    return "<tr>" + "".join(f"<td {_LEFT}>{cell}</td>" for cell in cells) + "</tr>"


def _html_version_rows(versions: dict[str, str]) -> str:
    return "".join(
        f"<tr><th {_LEFT}>{html.escape(key)}</th><td {_LEFT}><code>{html.escape(value)}</code></td></tr>"
        for key, value in versions.items()
    )


def _text_table(checks: list[Check]) -> list[str]:
    # Status words, not symbols: emoji widths differ between terminals and break alignment.
    status_width = max([len("status"), *(len(check.status) for check in checks)])
    name_width = max([len("check"), *(len(check.name) for check in checks)])
    indent = " " * (status_width + name_width + 4)
    lines = [
        f"{'status':<{status_width}}  {'check':<{name_width}}  result",
        f"{'-' * status_width}  {'-' * name_width}  ------",
    ]
    for check in checks:
        lines.append(f"{check.status:<{status_width}}  {check.name:<{name_width}}  {check.detail}")
        if check.fix:
            lines.append(f"{indent}fix: {check.fix}")
    return lines


def _text_versions(versions: dict[str, str]) -> list[str]:
    width = max(len(key) for key in versions)
    return ["versions", *(f"  {key:<{width}}  {value}" for key, value in versions.items())]


# --- the checks -----------------------------------------------------------------------------


def collect_versions(gpu_info: NvidiaSmiInfo | None) -> dict[str, str]:
    """The versions people ask for first when something does not work, in one place."""
    numpy = _numpy_or_none()
    versions = {
        "Python": platform.python_version(),
        "Python executable": sys.executable,
        "OS": platform.platform(),
        "torch": str(torch.__version__),
        "NumPy": numpy.__version__ if numpy is not None else "not installed",
    }
    if torch.version.cuda:
        versions["torch CUDA"] = torch.version.cuda
    hip = getattr(torch.version, "hip", None)
    cudnn = _cudnn_version()
    if cudnn:
        # A ROCm build answers torch.backends.cudnn with AMD's MIOpen.
        versions["MIOpen" if hip else "cuDNN"] = cudnn
    if hip:
        versions["torch HIP (ROCm)"] = hip
    if gpu_info is not None:
        versions["NVIDIA GPU"] = gpu_info.gpus
        versions["NVIDIA driver"] = gpu_info.driver_version or "unknown"
        versions["driver's newest CUDA"] = gpu_info.cuda_version or "unknown"
    return versions


def _cudnn_version() -> str | None:
    try:
        version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:
        return None
    return str(version) if version else None


def check_versions(versions: dict[str, str]) -> Check:
    name = "versions"
    detail = f"Python {versions['Python']}, torch {versions['torch']}, NumPy {versions['NumPy']}"
    torch_version = _version_tuple(versions["torch"])
    if torch_version is not None and torch_version[:2] < MINIMUM_TORCH:
        wanted = ".".join(map(str, MINIMUM_TORCH))
        return Check(
            name, "warning", f"{detail}: the course needs torch {wanted} or newer",
            f"install a newer torch with the command from {INSTALL_SELECTOR}",
        )
    if versions["NumPy"] == "not installed":
        return Check(name, "warning", f"{detail}: some notebooks use NumPy", "pip install numpy")
    return Check(name, "ok", detail)


def check_create_and_compute() -> Check:
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = torch.tensor([[5.0, 6.0], [7.0, 8.0]])
    torch.testing.assert_close(a @ b, torch.tensor([[19.0, 22.0], [43.0, 50.0]]))
    return Check(
        "create and compute", "ok", "made tensors on the CPU; a matrix product gave the known result"
    )


def check_autograd() -> Check:
    x = torch.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    (x**3).sum().backward()
    torch.testing.assert_close(x.grad, 3 * x.detach() ** 2)
    return Check("autograd", "ok", "the gradient of sum(x³) came out as 3x²")


def check_accelerators(devices: list[torch.device]) -> list[Check]:
    if not devices:
        return [Check("accelerator", "skipped", NO_ACCELERATOR)]
    return [check_accelerator(device) for device in devices]


def check_accelerator(device: torch.device) -> Check:
    """Compute on ``device`` for real: being listed as available does not mean it works."""
    name = f"accelerator {device}"
    try:
        round_trip(device)
    except Exception as error:
        message = f"{type(error).__name__}: {error}".strip()
        detail = f"computing on {device} failed: {message}"
        return Check(name, "failed", detail, _accelerator_fix(device, message))
    detail = f"allocated, multiplied and copied back from {_describe(device)}: matches the CPU"
    return Check(name, "ok", detail)


def round_trip(device: torch.device) -> None:
    """Allocate on ``device``, multiply there, copy back, and compare with the CPU's answer."""
    # Small integers keep every product exact, even under TF32 or half-precision matmuls.
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    b = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    on_device = (a.to(device) @ b.to(device)).cpu()
    torch.testing.assert_close(on_device, a @ b)


def _describe(device: torch.device) -> str:
    if device.type == "cuda":
        with contextlib.suppress(Exception):
            return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def _accelerator_fix(device: torch.device, message: str) -> str:
    if "no kernel image" in message:
        return (
            "this torch build has no code for this GPU's architecture: install the build that "
            f"{INSTALL_SELECTOR} suggests (usually a newer CUDA); until then use device='cpu'"
        )
    if device.type == "cuda" and getattr(torch.version, "hip", None):
        return (
            "this torch is a ROCm build, for AMD GPUs: check that `rocminfo` lists the GPU and that "
            "this ROCm version supports it, or reinstall torch with the ROCm build from "
            f"{INSTALL_SELECTOR}; until then use device='cpu'"
        )
    if device.type == "cuda" and ("PTX" in message or "unsupported toolchain" in message):
        return (
            "the driver is older than this torch's CUDA, and too old to compile the build's PTX for "
            "this GPU (minor-version compatibility does not cover that): update the NVIDIA driver, "
            f"or install a build for an older CUDA from {INSTALL_SELECTOR}; until then use device='cpu'"
        )
    if device.type == "cuda" and "busy or unavailable" in message:
        return (
            "the GPU is reserved by another process (exclusive-process mode) or hidden from this "
            "one: `nvidia-smi` shows its compute mode and processes; until then use device='cpu'"
        )
    if device.type == "cuda":
        return (
            "`nvidia-smi` shows the GPU's state, its processes and the driver; if the driver is "
            "older than torch's CUDA runtime, update it, or reinstall torch with the matching build "
            f"from {INSTALL_SELECTOR}; until then use device='cpu'"
        )
    if device.type == "mps":
        return "update macOS and reinstall torch; until then use device='cpu'"
    if device.type == "xpu":
        return (
            "install or update the Intel GPU driver, then reinstall torch with the XPU build from "
            f"{INSTALL_SELECTOR}; until then use device='cpu'"
        )
    return f"reinstall torch with the build from {INSTALL_SELECTOR}; until then use device='cpu'"


def check_seeding() -> Check:
    name = "seed"
    with random_state_preserved():
        first, again, other = _draws_after_seed(1234), _draws_after_seed(1234), _draws_after_seed(4321)
    if first != again:
        return Check(name, "failed", "the same seed gave different random numbers", _REPORT_BUG)
    if first == other:
        return Check(name, "failed", "different seeds gave the same random numbers", _REPORT_BUG)
    return Check(name, "ok", "the same seed repeats the random numbers; a different seed changes them")


_REPORT_BUG = "unexpected: please report it to the course's authors with this table"


def _draws_after_seed(seed: int) -> list[float]:
    seed_everything(seed)
    numpy = _numpy_or_none()
    numpy_draw = [float(numpy.random.rand())] if numpy is not None else []
    return [random.random(), *numpy_draw, *torch.rand(3).tolist()]


@contextlib.contextmanager
def random_state_preserved() -> Iterator[None]:
    """Run code without changing the random numbers a notebook that seeded earlier gets next.

    Python's, NumPy's and torch's generators on the CPU and every accelerator are put back.
    """
    numpy = _numpy_or_none()
    python_state = random.getstate()
    numpy_state = numpy.random.get_state() if numpy is not None else None
    torch_state = torch.get_rng_state()
    cuda_states = _optional(lambda: torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None)
    # Not started yet: CUDA's generators will start from the seed torch.manual_seed queued for
    # them (torch.initial_seed()), or the default one, which initial_seed() also reports.
    cuda_seed = _optional(lambda: torch.initial_seed() if cuda_states is None and _cuda_available() else None)
    mps_state = _optional(lambda: torch.mps.get_rng_state() if _mps_available() else None)
    xpu_states = _optional(lambda: torch.xpu.get_rng_state_all() if _xpu_available() else None)
    try:
        yield
    finally:
        random.setstate(python_state)
        if numpy_state is not None:
            numpy.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
        elif cuda_seed is not None and _optional(torch.cuda.is_initialized):
            torch.cuda.manual_seed_all(cuda_seed)  # started inside: as it would have started
        if mps_state is not None:
            torch.mps.set_rng_state(mps_state)
        if xpu_states is not None:
            torch.xpu.set_rng_state_all(xpu_states)


def _optional(get: Callable[[], object]) -> object:
    try:
        return get()
    except Exception:
        return None


# --- the silent CPU fallback ----------------------------------------------------------------

FALLBACK_CHECK = "silent CPU fallback"


def diagnose_build(
    torch_cuda_version: str | None,
    cuda_available: bool,
    gpu_info: NvidiaSmiInfo | None,
    *,
    torch_version: str | None = None,
    torch_hip_version: str | None = None,
    place: hosting.Place | None = None,
) -> Check:
    """Compare how torch was built with what the NVIDIA driver reports, and name any mismatch.

    A pure function of those facts, so tests can describe any machine. ``torch_version``
    defaults to the installed torch; it only appears in the suggested install commands.
    ``torch_hip_version`` is ``torch.version.hip``: set in a ROCm build (AMD GPUs), whose
    ``torch.version.cuda`` is None although its GPU is the "cuda" device. ``place`` (default:
    this machine, ``hosting.where()``) decides the advice: on Colab or Kaggle the platform chose
    the build, and a GPU is a menu away, not a reinstall.
    """
    torch_version = torch_version or torch.__version__
    place = place or hosting.where()
    if torch_hip_version:
        return _diagnose_rocm_build(torch_hip_version, cuda_available, gpu_info, torch_version, place)
    if torch_cuda_version is None:
        if gpu_info is None:
            detail = "no NVIDIA GPU found and this torch has no CUDA: nothing is left unused"
            return Check(FALLBACK_CHECK, "ok", detail)
        return _cpu_build_on_gpu_machine(gpu_info, torch_version)
    if gpu_info is None:
        if cuda_available:
            return Check(
                FALLBACK_CHECK, "ok",
                f"torch uses CUDA {torch_cuda_version}; "
                "nvidia-smi was not found, so the driver was not compared",
            )
        if place.kind in (hosting.COLAB, hosting.KAGGLE):
            # The platform ships one CUDA build for its CPU and GPU runtimes alike: nothing to fix.
            return Check(
                FALLBACK_CHECK, "ok",
                f"this runtime of {place.name} has no GPU, so its torch (built for CUDA "
                f"{torch_cuda_version}) runs on the CPU, as it should: every notebook works. "
                f"For a GPU: {place.gpu_advice}",
            )
        return Check(
            FALLBACK_CHECK, "warning",
            f"this torch was built for CUDA {torch_cuda_version} but no NVIDIA driver is visible, "
            "so it runs on the CPU: every notebook works, but the GPU part of this build (a few GB) "
            "is never used",
            "if this machine has an NVIDIA GPU, install its driver (nvidia-smi should then work); "
            f"if it has none, nothing is broken, but {_smaller_cpu_build(torch_version, place)}",
        )
    if _newer(torch_cuda_version, gpu_info.cuda_version):
        return _runtime_newer_than_driver(torch_cuda_version, cuda_available, gpu_info)
    if not cuda_available:
        return Check(
            FALLBACK_CHECK, "failed",
            f"nvidia-smi sees {gpu_info.gpus}, but torch (CUDA {torch_cuda_version}) cannot use it: "
            "everything runs on the CPU",
            "check that CUDA_VISIBLE_DEVICES does not hide the GPU, and run "
            "`import torch; torch.cuda.init()` to see the error behind it",
        )
    return Check(
        FALLBACK_CHECK, "ok",
        f"torch (CUDA {torch_cuda_version}) uses {gpu_info.gpus}; "
        f"the driver supports CUDA up to {gpu_info.cuda_version or 'an unknown version'}",
    )


def _diagnose_rocm_build(
    hip_version: str, gpu_available: bool, gpu_info: NvidiaSmiInfo | None, torch_version: str,
    place: hosting.Place,
) -> Check:
    build = f"a ROCm build (HIP {hip_version}), for AMD GPUs"
    if gpu_available:
        return Check(
            FALLBACK_CHECK, "ok",
            f"torch is {build}, and it uses the AMD GPU; ROCm's GPU is called \"cuda\" in torch, "
            "so the course's code runs on it unchanged",
        )
    if gpu_info is not None:
        return _cpu_build_on_gpu_machine(gpu_info, torch_version, build=build)
    return Check(
        FALLBACK_CHECK, "warning",
        f"torch is {build}, but it finds no AMD GPU it can use, so it runs on the CPU: every "
        "notebook works, but the GPU part of this build (a few GB) is never used",
        "if this machine has an AMD GPU, check that `rocminfo` lists it and that this ROCm "
        "version supports it (your user usually needs the groups render and video); if it has "
        f"none, nothing is broken, but {_smaller_cpu_build(torch_version, place)}",
    )


def _smaller_cpu_build(torch_version: str, place: hosting.Place) -> str:
    pip = f"pip install torch=={_release(torch_version)} --index-url https://download.pytorch.org/whl/cpu"
    if place.kind != hosting.COURSE_FOLDER:  # the platform's own Python: no ./course there
        return f"the CPU-only build is a much smaller download: {pip}"
    return f"the CPU-only build is a much smaller download: COURSE_TORCH=cpu ./course setup (or {pip})"


def _cpu_build_on_gpu_machine(
    gpu_info: NvidiaSmiInfo, torch_version: str, build: str = "a CPU-only build"
) -> Check:
    newest = gpu_info.cuda_version
    if newest:
        limit = f"of major version {_major_note(newest)}"
    else:
        limit = "of the same major version as the CUDA Version that nvidia-smi prints"
    example = f" (CUDA {newest} is written cu{newest.replace('.', '')})" if newest else ""
    return Check(
        FALLBACK_CHECK, "failed",
        f"this machine has {gpu_info.gpus} (driver {gpu_info.driver_version or 'unknown'}), but torch "
        f"{torch_version} is {build}: the GPU will not be used and everything runs on the CPU",
        f"reinstall torch with a CUDA build: pip install torch=={_release(torch_version)} "
        "--index-url https://download.pytorch.org/whl/cuXXX, "
        f"where cuXXX is a CUDA version {limit}{example}; "
        f"pick the exact command from the selector at {INSTALL_SELECTOR}",
    )


def _runtime_newer_than_driver(
    torch_cuda_version: str, cuda_available: bool, gpu_info: NvidiaSmiInfo
) -> Check:
    mismatch = (
        f"this torch is built for CUDA {torch_cuda_version}, but the NVIDIA driver "
        f"({gpu_info.driver_version or 'unknown version'}) was released for CUDA {gpu_info.cuda_version}"
    )
    runtime, driver = _version_tuple(torch_cuda_version), _version_tuple(gpu_info.cuda_version)
    same_major = bool(runtime and driver and runtime[0] == driver[0])
    if runtime and driver and not same_major:
        # Another major version: any build of the driver's major runs (minor-version compatibility).
        build = f"CUDA {_major_note(gpu_info.cuda_version)}"
    else:
        # The same major, and still trouble: only a build no newer than the driver has it all.
        build = f"an older CUDA (no newer than {gpu_info.cuda_version})"
    fix = f"update the NVIDIA driver, or install a torch build for {build} (the command is at {INSTALL_SELECTOR})"
    if cuda_available:
        if same_major:
            # NVIDIA's documented minor-version compatibility: a newer runtime of the same major
            # version runs on this driver, with a limited feature set (no PTX JIT compilation).
            how = (
                "CUDA's minor-version compatibility lets a newer runtime of the same major version "
                f"run on this driver, so torch can use {gpu_info.gpus}; what needs the newer driver "
                "fails, such as compiling PTX at run time for a GPU the build has no kernels for"
            )
        else:
            how = f"torch can use {gpu_info.gpus}, but what needs the newer driver can fail"
        return Check(FALLBACK_CHECK, "warning", f"{mismatch}; {how}", fix)
    if runtime and driver and not same_major:
        detail = (
            f"{mismatch}: a driver does not serve a newer major version of CUDA, so torch cannot "
            f"use {gpu_info.gpus} and everything runs on the CPU"
        )
    else:
        detail = f"{mismatch}, and torch cannot use {gpu_info.gpus}: everything runs on the CPU"
    return Check(FALLBACK_CHECK, "failed", detail, fix)


def _major_note(driver_cuda: str | None) -> str:
    """Which CUDA builds a driver serves: its major version, by minor-version compatibility."""
    version = _version_tuple(driver_cuda)
    if not version:
        return "no newer than the driver's (the CUDA Version that nvidia-smi prints)"
    major = version[0]
    return (
        f"{major}: any {major}.x build runs on this driver through CUDA's minor-version "
        f"compatibility, and one no newer than {driver_cuda} can also compile PTX at run time"
    )


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    match = re.match(r"(\d+(?:\.\d+)*)", version or "")
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def _newer(version: str, than: str | None) -> bool:
    """True when ``version`` is a newer release than ``than``; False when either is unknown."""
    mine, theirs = _version_tuple(version), _version_tuple(than)
    if mine is None or theirs is None:
        return False
    return mine[:2] > theirs[:2]


def _release(torch_version: str) -> str:
    # "2.13.0+cpu" -> "2.13.0": the local label names the build the reader is replacing.
    return torch_version.split("+")[0]


# --- the health check -----------------------------------------------------------------------


def health_check(show: bool = True) -> HealthReport:
    """Check, by running real code, that this machine is ready for the course.

    Shows a table (HTML in a notebook, text elsewhere) when ``show`` is true and returns the
    results either way. Random generators are left as they were.
    """
    gpu_info = query_nvidia_smi()
    report = run_checks(
        gpu_info=gpu_info,
        accelerators=_optional(available_accelerators) or [],
        cuda_available=_cuda_available(),
        torch_cuda_version=torch.version.cuda,
        torch_hip_version=getattr(torch.version, "hip", None),
    )
    if show:
        display.show(report)
    return report


def run_checks(
    *,
    gpu_info: NvidiaSmiInfo | None,
    accelerators: list[torch.device],
    cuda_available: bool,
    torch_cuda_version: str | None,
    torch_hip_version: str | None = None,
) -> HealthReport:
    """The health check on given facts about the machine, so tests can supply other machines.

    ``cuda_available`` means the "cuda" device works: an NVIDIA GPU, or an AMD one in a ROCm
    build (``torch_hip_version`` set).
    """
    versions = _optional(lambda: collect_versions(gpu_info)) or {}
    checks = [
        _guarded("versions", lambda: check_versions(versions)),
        _guarded("create and compute", check_create_and_compute),
        _guarded("autograd", check_autograd),
        *_guarded_many("accelerator", lambda: check_accelerators(accelerators)),
        _guarded("seed", check_seeding),
        _guarded(
            FALLBACK_CHECK,
            lambda: diagnose_build(
                torch_cuda_version, cuda_available, gpu_info, torch_hip_version=torch_hip_version
            ),
        ),
    ]
    return HealthReport(checks=checks, versions=versions, device=str(pick_device()))


def _guarded(name: str, run: Callable[[], Check]) -> Check:
    """Turn an unexpected error into a failed check, so one problem never hides the others."""
    return _guarded_many(name, lambda: [run()])[0]


def _guarded_many(name: str, run: Callable[[], list[Check]]) -> list[Check]:
    try:
        return run()
    except Exception as error:
        return [Check(name, "failed", f"{type(error).__name__}: {error}".strip(), _REPORT_BUG)]
