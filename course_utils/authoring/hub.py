"""A class on a JupyterHub: the learner branch nbgitpuller pulls, and the link that pulls it.

``python -m course_utils.authoring hub-branch [--branch learner]`` commits, to a branch of the
course's own git repository, what a learner on a hub needs and nothing else:

- the learner notebooks, ``notebooks/*.ipynb`` as they are in the checkout, at the top level
  (a kernel starts in its notebook's folder, so ``import course_utils`` works there without
  installing anything);
- the package ``course_utils/``, without ``__pycache__`` and without what only the instructor
  has (``INSTRUCTOR_ONLY``, the same parts an exam release leaves out: the grader, the authoring
  and book tools, exam data). Nothing left in the package imports them when it is imported;
  the two that use them do so inside a function (``course_utils.workspace`` and
  ``workspace_merge``: ``./course update``'s merge, which a hub does not run);
- ``README.md``: how to open a chapter, where progress is kept, what a pull keeps.

No solutions, no tests. It is written with git plumbing only: a temporary index
(``GIT_INDEX_FILE``) filled from a temporary folder (``--work-tree``), ``write-tree``,
``commit-tree`` with the branch's previous tip as parent, ``update-ref``. The checkout, its
index and the current branch are never touched. Each publication is a new commit on top of the
last one, so a learner's clone (nbgitpuller clones with ``--depth 1``) always has a merge base
with it; a publication whose tree is the previous one's makes no commit ("nothing changed").

``python -m course_utils.authoring hub-link HUB_URL`` prints the nbgitpuller link
(``nbgitpuller_link``) that clones or updates the branch in the learner's hub home and opens a
chapter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from course_utils.authoring.errors import AuthoringError
from course_utils.authoring.exam import INSTRUCTOR_ONLY, PACKAGE
from course_utils.authoring.project import NOTEBOOKS

DEFAULT_BRANCH = "learner"
DEFAULT_CHAPTER = "00_environment"
DEFAULT_FOLDER = "pytorch-course"
# The page of the hub's server that opens a file: JupyterLab, or the classic Notebook (and
# Notebook 7), whose /tree/FILE opens the notebook.
INTERFACES = {"lab": "lab/tree", "notebook": "tree"}
# Never published: byte code, and what editors and Jupyter leave beside the files.
SKIPPED_NAMES = ("__pycache__", "*.pyc", "*.pyo", ".ipynb_checkpoints", ".DS_Store")
COMMITTER = {"GIT_AUTHOR_NAME": "course hub-branch", "GIT_AUTHOR_EMAIL": "hub-branch@course.invalid"}

README = """# {title}

These are the chapters of the course, as your class's JupyterHub pulled them into this folder.

**Open a chapter.** Click the link your instructor gave you: it brings the newest version of the
course into this folder and opens a chapter. Any other chapter: double-click its notebook in
the file browser on the left ({first}, …, {last}). Work in the notebook itself and save it
(Ctrl+S / Cmd+S). The folder `course_utils/` is the course's helper package: the notebooks
import it from here, nothing needs installing.

**Your progress** (which exercises you passed, `course_utils.progress()`) is kept in your hub
home, in `~/.pytorch-course/progress.json`, outside this folder: updates never touch it.

**What an update keeps.** Clicking the link again pulls the course's new version:

- a notebook you changed keeps your changes. The course's changes to other parts of it come in
  beside yours; where the course changed the same lines as you, your lines win;
- a file you deleted comes back, as the course has it now. To get a chapter exactly as the
  course ships it, rename your notebook (your work stays in it), then click the link;
- new chapters and the new `course_utils/` arrive;
- files you made yourself stay. If the course adds a file with the same name, yours is renamed
  (a date is added to its name).
"""


@dataclass
class Publication:
    branch: str
    commit: str
    chapters: int
    changed: bool


def _git(git_dir: Path, *args: str, env: dict | None = None, work_tree: Path | None = None,
         check: bool = True) -> str:
    command = ["git", f"--git-dir={git_dir}"]
    if work_tree is not None:
        command.append(f"--work-tree={work_tree}")
    result = subprocess.run(command + list(args), capture_output=True, text=True,
                            env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        raise AuthoringError(f"`git {' '.join(args)}` failed: {result.stderr.strip()}")
    return result.stdout.strip()


def git_dir_of(root: Path) -> Path:
    result = subprocess.run(["git", "-C", str(root), "rev-parse", "--absolute-git-dir"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise AuthoringError(f"{root} is not in a git repository: the learner branch is a branch of "
                             "the course's own repository (git init, or clone it first)")
    return Path(result.stdout.strip())


def learner_notebooks(root: Path) -> list[Path]:
    notebooks = sorted((root / NOTEBOOKS).glob("*.ipynb"))
    if not notebooks:
        raise AuthoringError(f"no learner notebooks in {root / NOTEBOOKS}: run "
                             "`python -m course_utils.authoring release` first")
    return notebooks


def assemble(root: Path, out: Path) -> int:
    """Write the learner branch's files into ``out``; the number of chapters."""
    notebooks = learner_notebooks(root)
    for path in notebooks:
        shutil.copyfile(path, out / path.name)
    target = out / PACKAGE
    shutil.copytree(root / PACKAGE, target, ignore=shutil.ignore_patterns(*SKIPPED_NAMES))
    for relative in INSTRUCTOR_ONLY:
        shutil.rmtree(target / relative, ignore_errors=True)
    (out / "README.md").write_text(README.format(
        title="PyTorch course", first=notebooks[0].name, last=notebooks[-1].name), encoding="utf-8")
    return len(notebooks)


def _source_description(git_dir: Path, root: Path) -> str:
    head = _git(git_dir, "rev-parse", "--verify", "-q", "HEAD", check=False)
    if not head:
        return "a checkout with no commit yet"
    dirty = _git(git_dir, "status", "--porcelain", "--", NOTEBOOKS, PACKAGE, work_tree=root, check=False)
    return f"{head[:12]}{' with uncommitted changes' if dirty else ''}"


def publish(root: Path, branch: str = DEFAULT_BRANCH) -> Publication:
    """Commit the learner tree of the checkout ``root`` on top of ``branch`` (made if missing)."""
    root = root.resolve()
    git_dir = git_dir_of(root)
    if subprocess.run(["git", "check-ref-format", "--branch", branch], capture_output=True).returncode:
        raise AuthoringError(f"{branch!r} is not a valid branch name")
    ref = f"refs/heads/{branch}"
    if _git(git_dir, "symbolic-ref", "-q", "HEAD", check=False) == ref:
        raise AuthoringError(f"{branch!r} is the branch checked out in {root}: the learner branch "
                             "must be another one (--branch NAME)")
    parent = _git(git_dir, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False)
    with tempfile.TemporaryDirectory(prefix="course-hub-") as temporary:
        files, index = Path(temporary) / "tree", Path(temporary) / "index"
        files.mkdir()
        chapters = assemble(root, files)
        env = {"GIT_INDEX_FILE": str(index)}
        # -f: the course's and the user's ignore rules must not drop a file of the package.
        _git(git_dir, "add", "-A", "-f", ".", env=env, work_tree=files)
        tree = _git(git_dir, "write-tree", env=env)
    if parent and _git(git_dir, "rev-parse", f"{parent}^{{tree}}") == tree:
        return Publication(branch, parent, chapters, changed=False)
    message = (f"Learner branch: {chapters} chapters and {PACKAGE}/ from "
               f"{_source_description(git_dir, root)}\n\nWritten by "
               "`python -m course_utils.authoring hub-branch`; pulled by nbgitpuller.\n")
    # Whoever publishes is the author when git knows them; else a name that says what made it.
    identity = {} if _git(git_dir, "var", "GIT_AUTHOR_IDENT", check=False) else COMMITTER
    if identity:
        identity = {**identity, "GIT_COMMITTER_NAME": identity["GIT_AUTHOR_NAME"],
                    "GIT_COMMITTER_EMAIL": identity["GIT_AUTHOR_EMAIL"]}
    commit = _git(git_dir, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message,
                  env=identity)
    # The old value makes the update atomic: another publication in between is not overwritten.
    _git(git_dir, "update-ref", "-m", "hub-branch: publish the learner branch", ref, commit, parent)
    return Publication(branch, commit, chapters, changed=True)


def chapter_stem(root: Path, name: str) -> str:
    """The notebook stem named (``00_environment``, ``00``, ``environment``, with or without
    ``.ipynb``); "" opens the course's folder. Unchecked when the checkout has no notebooks."""
    name = name.removesuffix(".ipynb")
    stems = [path.stem for path in sorted((root / NOTEBOOKS).glob("*.ipynb"))]
    if not name or not stems:
        return name
    matches = [stem for stem in stems if name in (stem, stem[:2], stem[3:])]
    if len(matches) != 1:
        raise AuthoringError(f"--chapter: {name!r} names no chapter (one of {', '.join(stems)})")
    return matches[0]


def nbgitpuller_link(hub_url: str, repository: str, branch: str = DEFAULT_BRANCH,
                     chapter: str = DEFAULT_CHAPTER, folder: str = DEFAULT_FOLDER,
                     interface: str = "lab") -> str:
    """nbgitpuller's link: ``HUB/hub/user-redirect/git-pull?repo=…&branch=…&urlpath=…``.

    nbgitpuller clones into the repository's last path segment; ``targetPath`` is added only
    when ``folder`` is another name, so that the page the link opens is where the files are.
    """
    hub = hub_url.strip().rstrip("/")
    hub = hub.removesuffix("/hub") if hub.endswith("/hub") else hub
    if not hub.startswith(("https://", "http://")):
        raise AuthoringError(f"{hub_url!r} is not a hub's address (https://…)")
    folder = folder.strip("/")
    if not folder:
        raise AuthoringError("--folder must name a folder")
    path = f"{INTERFACES[interface]}/{folder}" + (f"/{chapter}.ipynb" if chapter else "")
    link = (f"{hub}/hub/user-redirect/git-pull?repo={quote(repository, safe='')}"
            f"&branch={quote(branch, safe='')}&urlpath={quote(path, safe='')}")
    if folder != repository.rstrip("/").split("/")[-1]:
        link += f"&targetPath={quote(folder, safe='')}"
    return link
