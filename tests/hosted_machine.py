"""A simulated hosted Jupyter (Colab, Kaggle, a class's hub), for running one chapter notebook alone.

What such a machine has: a Python with torch, numpy, matplotlib, ipykernel and ipywidgets
(``requirements-hosted.txt``), and a notebook someone opened, in a folder with nothing else in
it. No course folder, no ``course_utils``, no ``.venv``. Here:

- the *platform* is ``.course/venvs/hosted[-torch-X]``, made once from that file (cached);
- each run gets a *fresh machine*: a new, empty virtual environment that sees the platform's
  packages through a ``.pth`` file, so what the notebook's set-up cell installs lands in the
  fresh environment and the platform's own packages stay as they are (the tests check that);
- the notebook is copied alone into an empty folder and run there with nbclient, on a kernel
  of the fresh machine, with ``COURSE_PACKAGE_SOURCE`` pointing the set-up cell at a wheel
  built from this checkout, and pip kept off the network.

Used by tests/test_hosted.py (every chapter, on every ``./course test``) and by
tools/hosted_matrix.py (every chapter on other torch versions).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from course_utils import tool_env  # noqa: E402

REQUIREMENTS = ROOT / "requirements-hosted.txt"
SIMULATOR = ROOT / "tests" / "simulated_machine"
PLATFORM_PTH = "_hosted_platform.pth"
# What the last cell added to each run prints, for the test to read back.
REPORT_MARK = "HOSTED-REPORT "
REPORT_CELL = f"""
import json, sys, sysconfig
import torch, numpy, matplotlib, course_utils
print({REPORT_MARK!r} + json.dumps({{
    "prefix": sys.prefix,
    "purelib": sysconfig.get_paths()["purelib"],
    "torch": [torch.__version__, torch.__file__],
    "numpy": [numpy.__version__, numpy.__file__],
    "matplotlib": [matplotlib.__version__, matplotlib.__file__],
    "course_utils": [course_utils.__version__, course_utils.__file__],
    "torch_build": {{"cuda": torch.version.cuda, "hip": torch.version.hip, "gpu": torch.cuda.is_available()}},
}}))
"""
# Hosted platforms, as the set-up cell and chapter 00 can tell them apart.
PLATFORM_ENV = {
    "colab": {"COLAB_RELEASE_TAG": "release-colab-simulated", "COLAB_GPU": ""},
    "kaggle": {"KAGGLE_KERNEL_RUN_TYPE": "Interactive", "KAGGLE_URL_BASE": "https://www.kaggle.com"},
    "hub": {"JUPYTERHUB_USER": "learner", "JUPYTERHUB_API_URL": "http://127.0.0.1:1/hub/api"},
}


def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "w")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def platform_python(torch_version: str | None = None, profile: str | None = None) -> Path:
    """The platform's Python, made on first use (the test workers share it, one makes it): our
    pins (requirements-hosted.txt), with another torch, or a platform's own package set
    (``hosted_profiles.PROFILES``)."""
    name, requirements = "hosted", REQUIREMENTS
    text = None
    if profile:
        from hosted_profiles import PROFILES

        name, text = f"hosted-{profile}", PROFILES[profile].requirements()
    elif torch_version:
        name = f"hosted-torch-{torch_version}"
        text = re.sub(r"^torch==.*$", f"torch=={torch_version}", REQUIREMENTS.read_text(), flags=re.M)
    if text is not None:
        requirements = ROOT / ".course" / f"requirements-{name}.txt"
        requirements.parent.mkdir(parents=True, exist_ok=True)
        if not requirements.exists() or requirements.read_text() != text:
            requirements.write_text(text)
    with _locked(ROOT / ".course" / f"{name}.lock"):
        return tool_env.ensure(ROOT, name, requirements)


def build_wheel(out: Path | None = None) -> Path:
    """The course's package as a wheel, from this checkout (what a release would publish).

    Built once per content of the package (test workers share it, under a lock), from a copy
    of the sources: setuptools writes build/ and *.egg-info next to what it builds, and two
    workers building in the checkout at once would trip over each other's files.
    """
    import hashlib
    import shutil
    import tempfile

    digest = hashlib.sha256()
    sources = [ROOT / "pyproject.toml", ROOT / "README.md"] + sorted(
        path for path in (ROOT / "course_utils").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc")
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    folder = out or ROOT / ".course" / "hosted-wheels" / digest.hexdigest()[:16]
    with _locked(ROOT / ".course" / "hosted-wheel.lock"):
        built = sorted(folder.glob("pytorch_course-*.whl"))
        if built:
            return built[0]
        with tempfile.TemporaryDirectory(prefix="course-wheel-") as scratch:
            source = Path(scratch) / "course"
            source.mkdir()
            for name in ("pyproject.toml", "README.md"):
                shutil.copy2(ROOT / name, source / name)
            shutil.copytree(ROOT / "course_utils", source / "course_utils",
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            folder.mkdir(parents=True, exist_ok=True)
            # With setuptools at hand, build offline; without it (a venv of Python 3.12 and
            # newer has none), let pip fetch the build backend that pyproject.toml names.
            import importlib.util

            offline = ["--no-build-isolation", "--no-index"] if importlib.util.find_spec("setuptools") else []
            done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *offline,
                                   "-w", str(folder), str(source)], capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"could not build the course's wheel:\n{done.stdout}\n{done.stderr}")
        (wheel,) = folder.glob("pytorch_course-*.whl")
        return wheel


def _purelib(python: Path) -> Path:
    return Path(json.loads(subprocess.run(
        [str(python), "-c", "import json, sysconfig; print(json.dumps(sysconfig.get_paths()['purelib']))"],
        check=True, capture_output=True, text=True).stdout))


def fresh_machine(platform: Path, folder: Path) -> Path:
    """A new, empty virtual environment over the platform's packages; its Python."""
    subprocess.run([str(platform), "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = _purelib(python)
    site.mkdir(parents=True, exist_ok=True)
    (site / PLATFORM_PTH).write_text(f"{_purelib(platform)}\n")
    return python


def installed_here(python: Path) -> list[str]:
    """The distributions installed in the fresh machine itself (not the platform's)."""
    out = subprocess.run([str(python), "-c", (
        "import json, sysconfig, pathlib; p = pathlib.Path(sysconfig.get_paths()['purelib']); "
        "print(json.dumps(sorted(d.name for d in p.glob('*.dist-info'))))")],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


@dataclass
class HostedRun:
    notebook: nbformat.NotebookNode  # executed, with outputs
    seconds: float
    setup_seconds: float
    report: dict
    installed: list[str]
    folder: Path
    outputs: list[str] = field(default_factory=list)  # every cell's text output, in order

    def text(self) -> str:
        return "\n".join(self.outputs)

    def warnings(self) -> list[str]:
        """The warnings a learner would see in red: each cell's stderr output that names one
        (``UserWarning: ...``), as "cell ID: first line"."""
        found = []
        for cell in self.notebook.cells:
            for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
                text = output.get("text", "") if output.get("name") == "stderr" else ""
                lines = [line for line in text.splitlines() if re.search(r"\w*Warning:", line)]
                found += [f"{cell.get('id')}: {line.strip()[:200]}" for line in lines[:1]]
        return found


def _cell_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif output.get("output_type") in ("execute_result", "display_data"):
            data = output.get("data", {})
            parts.append(data.get("text/plain", "") + data.get("text/html", ""))
        elif output.get("output_type") == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}")
    return "".join(parts)


def kernel_env(folder: Path, wheel: Path, settings: dict[str, str]) -> dict[str, str]:
    """The kernel's whole environment: what a hosted machine has, and this run's settings."""
    venv_bin = str(Path(sys.prefix) / "bin")
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    home = folder / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": path, "HOME": str(home), "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        # The test command's usual run settings: no widgets (headless), short trainings.
        "MPLBACKEND": "Agg", "COURSE_SMOKE": os.environ.get("COURSE_SMOKE", "1"),
        "COURSE_STATIC_WIDGETS": "1", "PYTHONHASHSEED": "0",
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
        # The set-up cell installs the wheel of this checkout; pip stays off the network.
        "COURSE_PACKAGE_SOURCE": str(wheel), "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(settings)
    return env


def run_alone(nb: nbformat.NotebookNode, name: str, *, platform: Path, wheel: Path, folder: Path,
              settings: dict[str, str], timeout: int = 900) -> HostedRun:
    """Run ``nb`` as ``name``.ipynb, alone in an empty folder, on a fresh hosted machine."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    python = fresh_machine(platform, folder / "machine")
    work = folder / "work"
    work.mkdir()
    nb = nbformat.from_dict(nb)
    nb.cells.append(nbformat.v4.new_code_cell(REPORT_CELL))
    nbformat.write(nb, work / f"{name}.ipynb")  # what the learner opened, alone in its folder
    kernels = folder / "kernels"
    (kernels / "hosted").mkdir(parents=True)
    (kernels / "hosted" / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "hosted", "language": "python"}))
    env = kernel_env(folder, wheel, settings)
    if env.get("COURSE_SIMULATED_MACHINE"):
        env["PYTHONPATH"] = str(SIMULATOR)
    km = KernelManager(kernel_name="hosted", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    km.start_kernel(cwd=str(work), env=env)
    client = NotebookClient(nb, km=km, timeout=timeout, allow_errors=False,
                            resources={"metadata": {"path": str(work)}})
    started = time.perf_counter()
    timings: dict[int, float] = {}

    def on_cell_executed(cell, cell_index, execute_reply):
        timings[cell_index] = time.perf_counter()

    client.on_cell_executed = on_cell_executed
    try:
        client.execute()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        nbformat.write(nb, work / f"{name}.executed.ipynb")  # to read when a run fails
    seconds = time.perf_counter() - started
    setup_index = next(i for i, cell in enumerate(nb.cells) if cell.get("id") == "course-setup")
    first_code = next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code")
    assert setup_index == first_code, "the set-up cell is not the first code cell"
    outputs = [_cell_text(cell) for cell in nb.cells if cell.cell_type == "code"]
    last = outputs[-1]
    report = json.loads(last.split(REPORT_MARK, 1)[1].splitlines()[0])
    return HostedRun(notebook=nb, seconds=seconds, setup_seconds=timings[setup_index] - started,
                     report=report, installed=installed_here(python), folder=folder, outputs=outputs)


def chapter_settings(variant: str) -> dict[str, str]:
    """``learner``: every check must say not attempted; ``pasted``: every check must pass."""
    return {"COURSE_EXPECT": "not_attempted"} if variant == "learner" else {"COURSE_STRICT": "1"}


def chapter_notebook(chapter: str, variant: str) -> nbformat.NotebookNode:
    nb = nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)
    if variant == "pasted":
        import pasted_solutions

        nb = pasted_solutions.pasted_notebook(nb, f"notebooks/{chapter}.ipynb")
    return nb
