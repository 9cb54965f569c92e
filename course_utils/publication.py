"""Where this course is published: the settings a fork's maintainers set once, and the links built from them.

Three things outside the repository need its public address: the "Open in Colab / Kaggle"
buttons (README and website), the first cell of every chapter, which installs the course's
package on a machine that has only the notebook, and the nbgitpuller link a class's hub uses.
They all read it here, so a fork sets the lines below and nothing else.

``COURSE_REPOSITORY_URL`` (the website's build sets it from the CI's own repository),
``COURSE_BRANCH`` and ``COURSE_PACKAGE_SOURCE`` override the settings for one run. With no
repository set, nothing is linked: no button is better than one that opens someone else's course.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote

# --- the settings ----------------------------------------------------------------------------

# The public git repository of the course, e.g. "https://github.com/ORG/pytorch-course".
REPOSITORY_URL = ""
# The branch whose notebooks the buttons open.
BRANCH = "main"
# Where the set-up cell installs this course version's package from. {repository} and
# {version} are filled in; the default is the git tag v<version> (tag every release that
# changes course_utils: `git tag v0.2.0 && git push --tags`). A release wheel works too:
# "{repository}/releases/download/v{version}/pytorch_course-{version}-py3-none-any.whl".
PACKAGE_SOURCE = "pytorch-course @ git+{repository}@v{version}"

# Where the learner notebooks lie in the repository, relative to its root.
NOTEBOOKS_FOLDER = "notebooks"

REPOSITORY_ENV, BRANCH_ENV, PACKAGE_SOURCE_ENV = (
    "COURSE_REPOSITORY_URL", "COURSE_BRANCH", "COURSE_PACKAGE_SOURCE")


def repository_url(*, from_environment: bool = True) -> str:
    """The repository's address without a trailing slash or ``.git``; "" when none is set.

    ``from_environment=False`` reads only REPOSITORY_URL above, not COURSE_REPOSITORY_URL.
    """
    override = os.environ.get(REPOSITORY_ENV, "").strip() if from_environment else ""
    url = override or REPOSITORY_URL.strip()
    return re.sub(r"(\.git)?/*$", "", url)


def branch(*, from_environment: bool = True) -> str:
    """The published branch; ``from_environment=False`` reads only BRANCH, not COURSE_BRANCH."""
    override = os.environ.get(BRANCH_ENV, "").strip() if from_environment else ""
    return override or BRANCH


def package_source(version: str, *, from_environment: bool = True) -> str:
    """What ``pip install`` is given for this course version; "" when nothing says where.

    ``from_environment=False`` reads only the settings above: what a release writes into the
    notebooks must not depend on the shell of whoever ran it.
    """
    override = os.environ.get(PACKAGE_SOURCE_ENV, "").strip() if from_environment else ""
    if override:
        return override
    repository = repository_url(from_environment=from_environment)
    if not repository:
        return ""
    return PACKAGE_SOURCE.format(repository=repository, version=version)


def _github_path(url: str) -> str | None:
    """``ORG/REPO`` of a github.com address; None for any other host (Colab opens only GitHub)."""
    match = re.fullmatch(r"https?://(?:www\.)?github\.com/([^/\s]+/[^/\s]+)", url)
    return match.group(1) if match else None


def _notebook_path(chapter_file: str, from_environment: bool) -> str | None:
    """``ORG/REPO/blob/BRANCH/notebooks/FILE``, the part GitHub's and Colab's addresses share."""
    path = _github_path(repository_url(from_environment=from_environment))
    if path is None:
        return None
    return f"{path}/blob/{quote(branch(from_environment=from_environment))}/{NOTEBOOKS_FOLDER}/{quote(chapter_file)}"


def notebook_on_github(chapter_file: str, *, from_environment: bool = True) -> str | None:
    """The notebook's page on GitHub, on the published branch; None without a GitHub repository."""
    path = _notebook_path(chapter_file, from_environment)
    return None if path is None else f"https://github.com/{path}"


def colab_url(chapter_file: str, *, from_environment: bool = True) -> str | None:
    """Google Colab's address for the chapter, e.g. ``colab_url("01_tensors.ipynb")``."""
    path = _notebook_path(chapter_file, from_environment)
    return None if path is None else f"https://colab.research.google.com/github/{path}"


def kaggle_url(chapter_file: str, *, from_environment: bool = True) -> str | None:
    """Kaggle's "import a notebook from GitHub" address for the chapter."""
    page = notebook_on_github(chapter_file, from_environment=from_environment)
    if page is None:
        return None
    return f"https://kaggle.com/kernels/welcome?src={page}"
