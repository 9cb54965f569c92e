"""solutions/ → notebooks/ for a whole course folder: reading, writing, and comparing.

Every source is transformed before anything is written, so a malformed source leaves
notebooks/ exactly as it was instead of half-released.
"""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbformat.reader import reads as read_without_repairs

from course_utils.authoring.errors import AuthoringError, Where
from course_utils.authoring.setup_cell import add_setup_cell
from course_utils.authoring.steps import release_notebook

SOLUTIONS = "solutions"
NOTEBOOKS = "notebooks"
RELEASE_COMMAND = "python -m course_utils.authoring release"


def read_source(path: Path, name: str) -> NotebookNode:
    """Read a solution notebook without letting nbformat "repair" it.

    nbformat.read fills missing or duplicate cell ids with random ones, which would make
    the learner notebook differ on every release; such notebooks are refused instead.
    """
    try:
        nb = read_without_repairs(path.read_text(encoding="utf-8"))
    except Exception as error:  # not UTF-8, not JSON, not a notebook at all, ...
        raise AuthoringError(f"{name}: cannot be read as a notebook: {error}") from None
    if nb.get("nbformat") != 4:
        raise AuthoringError(
            f"{name}: is nbformat {nb.get('nbformat')}; save it as nbformat 4 (open and save it "
            f"in JupyterLab)."
        )
    if nb.get("nbformat_minor", 0) >= 5:
        seen: set[str] = set()
        for index, cell in enumerate(nb.get("cells", [])):
            cell_id = cell.get("id")
            if not isinstance(cell_id, str) or cell_id in seen:
                problem = "has no id" if not isinstance(cell_id, str) else f"repeats id {cell_id!r}"
                raise Where.of(name, index, cell).error(
                    f"this cell {problem}; nbformat 4.5 needs unique cell ids (open and save the "
                    f"notebook in JupyterLab, or run nbformat.validator.normalize on it)."
                )
            seen.add(cell_id)
    try:
        nbformat.validate(copy.deepcopy(nb))  # validate() may normalise what it is given
    except nbformat.ValidationError as error:
        raise AuthoringError(f"{name}: not a valid notebook: {error.message}") from None
    return nb


def render(nb: NotebookNode) -> bytes:
    """The exact bytes of a notebook file: nbformat's own layout, UTF-8, final newline."""
    text = nbformat.writes(nb)
    if not text.endswith("\n"):
        text += "\n"
    return text.encode("utf-8")


def write_atomically(path: Path, data: bytes) -> None:
    """Readers (Jupyter, nbval, git) never see a half-written notebook."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        # mkstemp makes the file private (0600); give it the mode a normal write would.
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _mode_for(path: Path) -> int:
    with contextlib.suppress(FileNotFoundError):
        return path.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@dataclass
class Plan:
    """What release would do for a course folder, and what stands in the way."""

    root: Path
    learner: dict[Path, bytes] = field(default_factory=dict)  # path in notebooks/ → bytes
    orphans: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def show(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def plan(root: str | os.PathLike = ".") -> Plan:
    root = Path(root)
    result = Plan(root)
    solutions, notebooks = root / SOLUTIONS, root / NOTEBOOKS
    if not root.is_dir():
        result.errors.append(f"{root} is not a folder (use --root to name the course folder).")
        return result
    sources = sorted(p for p in solutions.glob("*.ipynb") if p.is_file())
    existing = sorted(p for p in notebooks.glob("*.ipynb") if p.is_file())
    if not solutions.is_dir() and existing:
        # Most likely a wrong --root: refuse rather than delete every learner notebook.
        result.errors.append(
            f"{root} has {NOTEBOOKS}/ but no {SOLUTIONS}/ folder; is the root right?"
        )
        return result
    for source in sources:
        name = f"{SOLUTIONS}/{source.name}"
        try:
            # The set-up cell makes a learner notebook work alone (Colab, Kaggle, a hub).
            learner = add_setup_cell(release_notebook(read_source(source, name), name), name)
        except AuthoringError as error:
            result.errors.extend(error.problems)
            continue
        result.learner[notebooks / source.name] = render(learner)
    source_names = {source.name for source in sources}
    result.orphans = [path for path in existing if path.name not in source_names]
    return result


def release(root: str | os.PathLike = ".") -> list[Path]:
    """Regenerate notebooks/ from solutions/ and return the learner notebooks written.

    Learner notebooks without a source are removed (see ``release_changes`` for the list).
    Raises AuthoringError, listing every problem, and writes nothing, if a source is bad.
    """
    return release_changes(root)[0]


def release_changes(root: str | os.PathLike = ".") -> tuple[list[Path], list[Path]]:
    """Like ``release``, returning (notebooks written, orphan notebooks removed)."""
    result = plan(root)
    if result.errors:
        raise AuthoringError("\n".join(result.errors), problems=result.errors)
    if result.learner:
        (result.root / NOTEBOOKS).mkdir(exist_ok=True)
    for path, data in result.learner.items():
        write_atomically(path, data)
    for orphan in result.orphans:
        orphan.unlink()
    return list(result.learner), result.orphans


def check_details(root: str | os.PathLike = ".") -> tuple[list[str], list[str]]:
    """(errors in sources, ways notebooks/ differs from a release); both empty when in sync."""
    result = plan(root)
    out_of_sync = []
    for path, data in result.learner.items():
        source = f"{SOLUTIONS}/{path.name}"
        if not path.is_file():
            out_of_sync.append(f"{result.show(path)} is missing ({source} was never released).")
        elif path.read_bytes() != data:
            out_of_sync.append(
                f"{result.show(path)} is out of date: it differs from what release makes of "
                f"{source}."
            )
    for orphan in result.orphans:
        out_of_sync.append(
            f"{result.show(orphan)} is orphaned: there is no {SOLUTIONS}/{orphan.name}."
        )
    return result.errors, out_of_sync


def check(root: str | os.PathLike = ".") -> list[str]:
    """Every problem that keeps notebooks/ from being exactly what release would write.

    An empty list means in sync. Source errors come first; a notebook whose source has an
    error is not compared (there is nothing to compare it with).
    """
    errors, out_of_sync = check_details(root)
    return errors + out_of_sync
