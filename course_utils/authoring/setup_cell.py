"""The first code cell of every learner notebook: the chapter sets itself up wherever it is opened.

A learner on Colab, Kaggle or a class's hub has the notebook and a Python with torch, not the
course folder. This cell makes ``import course_utils`` work there: when the package is missing,
or older than the course version the notebook was released with, it installs exactly that
version with ``pip install --no-deps``, so the platform's torch, numpy and matplotlib (a CUDA
build that took the platform minutes to set up) are never touched. In the course folder, or a
hub folder that holds ``course_utils/``, the import already works and the cell prints nothing.

``release`` writes the cell (``add_setup_cell``); nobody edits it by hand. The version is
``course_utils.__version__``; where the package comes from is ``course_utils.publication``
(``COURSE_PACKAGE_SOURCE`` overrides it, which is how the tests point it at a wheel they built).
"""

from __future__ import annotations

import nbformat
from nbformat import NotebookNode

import course_utils
from course_utils import publication

CELL_ID = "course-setup"
SOURCE_ENV = publication.PACKAGE_SOURCE_ENV

TEMPLATE = '''\
# @title Course set-up {{ display-mode: "form" }}
# Opened in the course folder, this cell does nothing. Opened anywhere else (Colab, Kaggle, a hub),
# it installs the course's helper package, version {version}, without touching torch or numpy.
def _set_up_course(version="{version}", source="{source}"):
    import importlib, importlib.metadata, importlib.util, os, subprocess, sys, time

    def number(text):
        return tuple(int(part) for part in text.split("+")[0].split(".")[:3] if part.isdigit())

    try:
        import course_utils
        if number(course_utils.__version__) >= number(version):
            return  # the course folder, a hub folder with course_utils/, or already installed
    except ImportError:
        pass
    source = os.environ.get("{source_env}") or source
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    if torch_version == "none" or number(torch_version) < (2, 6):
        raise RuntimeError(f"This course needs PyTorch 2.6 or newer; this Python has {{torch_version}}. "
                           "Install one first: https://pytorch.org/get-started/locally/")
    if not source:
        raise RuntimeError(f"This notebook needs the course's package, course_utils {{version}}, and does not "
                           "know where it is published: ask your course's maintainers, or set "
                           "{source_env} to a wheel or a git URL of it.")
    missing = [name for name in ("numpy", "matplotlib") if importlib.util.find_spec(name) is None]
    started = time.perf_counter()
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    try:
        subprocess.run(pip + ["--no-deps", "--force-reinstall", source], check=True)
    except subprocess.CalledProcessError:
        raise RuntimeError(f"pip could not install the course's package from {{source}} (its message is "
                           "above). On Kaggle, turn on Internet in the notebook's settings; elsewhere, "
                           "check the network. Then run this cell again.") from None
    if missing:  # only what is absent: what the platform has stays as it is
        subprocess.run(pip + missing, check=True)
    for name in [name for name in sys.modules if name.split(".")[0] == "course_utils"]:
        del sys.modules[name]
    importlib.invalidate_caches()
    import course_utils
    print(f"Installed the course's package (course_utils {{course_utils.__version__}}) in "
          f"{{time.perf_counter() - started:.0f}} s; torch {{torch_version}} is as it was"
          + (f"; also installed {{' and '.join(missing)}}" if missing else "") + ".")


_set_up_course()
del _set_up_course
'''


def setup_cell_source(version: str | None = None, source: str | None = None) -> str:
    version = version or course_utils.__version__
    source = publication.package_source(version, from_environment=False) if source is None else source
    if '"' in source or "\\" in source or "\n" in source:
        raise ValueError(f"the package source {source!r} cannot be written into a notebook cell")
    return TEMPLATE.format(version=version, source=source, source_env=SOURCE_ENV).rstrip("\n")


def setup_cell() -> NotebookNode:
    cell = nbformat.v4.new_code_cell(setup_cell_source())
    cell["id"] = CELL_ID
    # Colab shows a cell with cellView "form" folded to its title; JupyterLab shows it as code.
    cell.metadata["cellView"] = "form"
    return cell


def add_setup_cell(nb: NotebookNode, name: str) -> NotebookNode:
    """A release step: the set-up cell, just before the notebook's first code cell."""
    nb.cells = [cell for cell in nb.cells if cell.get("id") != CELL_ID]
    first_code = next((i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"), len(nb.cells))
    nb.cells.insert(first_code, setup_cell())
    return nb
