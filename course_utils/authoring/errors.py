"""The one error an author sees, and how it points at the cell to fix."""

from __future__ import annotations

from dataclasses import dataclass

from nbformat import NotebookNode


class AuthoringError(Exception):
    """A source notebook in solutions/ that cannot be turned into a learner notebook.

    The message always names the notebook file, and the cell when one cell is at fault,
    because the author has to find it in Jupyter, where cells have no visible numbers.
    ``problems`` holds one line per problem when several notebooks failed at once.
    """

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


@dataclass(frozen=True)
class Where:
    """A cell of a source notebook, described the way an author can find it again.

    ``index`` counts from 0 over the cells of the source notebook (solutions/), so it
    stays right even after solution-only cells are dropped from the learner notebook.
    """

    notebook: str
    index: int
    grade_id: str | None
    first_line: str

    @classmethod
    def of(cls, notebook: str, index: int, cell: NotebookNode) -> Where:
        nbgrader = cell.get("metadata", {}).get("nbgrader")
        grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
        return cls(
            notebook=notebook,
            index=index,
            grade_id=grade_id if isinstance(grade_id, str) else None,
            first_line=first_nonblank_line(cell.get("source", "")),
        )

    def __str__(self) -> str:
        parts = [f"cell {self.index} (counting from 0)"]
        if self.grade_id:
            parts.append(f"grade_id {self.grade_id!r}")
        if self.first_line:
            shown = self.first_line if len(self.first_line) <= 60 else self.first_line[:57] + "..."
            parts.append(f"starting {shown!r}")
        else:
            parts.append("empty")
        return f"{self.notebook}, " + ", ".join(parts)

    def error(self, reason: str) -> AuthoringError:
        return AuthoringError(f"{self}: {reason}")


def first_nonblank_line(source: str) -> str:
    for line in source.splitlines():
        if line.strip():
            return line.strip()
    return ""
