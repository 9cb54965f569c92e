"""What hosted Jupyter platforms really ship: the package sets the hosted simulation runs on.

The course claims every chapter runs, opened alone, on Colab, on Kaggle and on a hub, with the
torch and the packages they have, from torch 2.6 on. Our own pins (requirements-hosted.txt) are
newer than any of them. Each profile here is one platform's set, with where its versions came
from; ``tests/hosted_machine.platform_python(profile=...)`` makes a platform of it, and
``tools/hosted_matrix.py --profile NAME`` runs every chapter on it (the weekly CI job does).

To refresh a profile: open a new notebook on the platform, run
``!pip list 2>/dev/null | grep -iE "^(torch|numpy|matplotlib|ipywidgets|ipykernel|ipython) "``, and
change the versions and the date here (a platform's Python is not simulated: the profile runs on
the Python of the machine that tests it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    # package -> version, pinned with ==. IPython too: left free, pip takes the newest, which an
    # old matplotlib cannot use (matplotlib 3.7 imports IPython's backend2gui, gone in IPython 9).
    packages: dict[str, str]
    source: str  # where these versions came from, and when

    def requirements(self) -> str:
        lines = [f"# {self.name}: {self.source}"]
        lines += [f"{package}=={version}" for package, version in self.packages.items()]
        return "\n".join(lines) + "\n"


PROFILES = {
    profile.name: profile for profile in (
        Profile(
            "colab-like",
            {"torch": "2.9.0", "numpy": "2.0.2", "matplotlib": "3.10.0", "ipywidgets": "7.7.1",
             "ipykernel": "6.17.1", "ipython": "7.34.0"},
            "a new Colab notebook's pip list, early 2026 (reported in issue 44); Colab runs Python "
            "3.12 and its own front end, which renders ipywidgets 7",
        ),
        Profile(
            "kaggle-like",
            {"torch": "2.6.0", "numpy": "1.26.4", "matplotlib": "3.7.5", "ipywidgets": "8.1.5",
             "ipykernel": "6.17.1", "ipython": "7.34.0"},
            "a new Kaggle notebook's pip list through 2025 (reported in issue 44); also the oldest "
            "torch the course supports (2.6), and numpy 1.x",
        ),
    )
}
