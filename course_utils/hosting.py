"""Where this notebook runs: the course folder, or a hosted Jupyter (Colab, Kaggle, a class's hub).

Advice must fit the machine. In the course folder, "run ``./course setup``" fixes a wrong
torch build; on Colab the learner did not choose the build, cannot keep a reinstall past the
session, and picks a GPU in a menu instead. The progress file lives in the home folder, which
on a hosted machine goes when the machine does. Standard library only, and cheap: the health
check and the progress table ask it every time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

COURSE_FOLDER, COLAB, KAGGLE, HUB, INSTALLED = "course folder", "colab", "kaggle", "hub", "installed"


@dataclass(frozen=True)
class Place:
    kind: str  # one of the names above
    name: str  # how a sentence names it
    gpu_advice: str  # how to get a GPU here
    keep_work: str  # how to keep answers and progress beyond this machine

    @property
    def hosted(self) -> bool:
        """A platform's machine: its Python and torch are the platform's, not the course's."""
        return self.kind in (COLAB, KAGGLE, HUB)


def _course_folder() -> Path | None:
    """The course's git checkout this package was imported from, if it was (``./course`` there)."""
    root = Path(__file__).resolve().parents[1]  # this module lies in course_utils/
    return root if (root / "course").is_file() and (root / "notebooks").is_dir() else None


def where(environ: dict[str, str] | None = None, course_folder: Path | None | bool = True) -> Place:
    """This machine, from the platforms' own environment variables.

    ``environ`` and ``course_folder`` (None: there is none; True: look) let tests describe any
    machine.
    """
    env = os.environ if environ is None else environ
    folder = _course_folder() if course_folder is True else course_folder
    if "COLAB_RELEASE_TAG" in env or "COLAB_GPU" in env:
        return Place(COLAB, "Google Colab",
                     "Runtime ▸ Change runtime type ▸ a GPU, then run the notebook again",
                     "File ▸ Download .ipynb, or File ▸ Save a copy in Drive")
    if "KAGGLE_KERNEL_RUN_TYPE" in env or "KAGGLE_URL_BASE" in env:
        return Place(KAGGLE, "Kaggle",
                     "Settings ▸ Accelerator ▸ a GPU (phone verification needed), then run again",
                     "File ▸ Download notebook, or Save Version to keep it in your Kaggle account")
    if folder is not None:
        return Place(COURSE_FOLDER, "the course folder",
                     "install the build for your GPU: COURSE_TORCH=cuda ./course setup (README)",
                     "my-work/ keeps your notebooks; ~/.pytorch-course/progress.json your progress")
    if "JUPYTERHUB_USER" in env or "JUPYTERHUB_API_URL" in env:
        return Place(HUB, "your class's JupyterHub",
                     "ask your hub's administrators for a GPU server, if they offer one",
                     "your hub home folder keeps your notebooks; download them to keep a copy")
    return Place(INSTALLED, "a Jupyter with the course's package installed",
                 "install a torch build for your GPU from https://pytorch.org/get-started/locally/",
                 "save your notebook where you keep your work")
