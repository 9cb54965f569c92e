"""The learner's progress: which exercises have passed, kept in one small local file.

Progress is a convenience, never a reason for a check to fail: a file that cannot be read or
written gives a one-line warning and the check goes on. A corrupt file is kept aside (renamed,
not deleted) so nothing a learner did is lost. Tests, strict mode and grading never write it.

This module knows exercises only by their ids: recording a pass imports no exercise. Showing
progress needs the list of exercises, which the caller hands in (``course_utils.progress()``
does), so the exercises, whose ``check`` records passes here, are never imported from here.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Protocol

from course_utils import run_mode

FILE_VERSION = 1


def progress_file() -> Path:
    """``$COURSE_PROGRESS_FILE``, else ``~/.pytorch-course/progress.json``."""
    configured = os.environ.get("COURSE_PROGRESS_FILE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".pytorch-course" / "progress.json"


def recording_enabled() -> bool:
    """False in test runs (``COURSE_NO_PROGRESS=1``) and in runs that require an outcome."""
    return not (
        os.environ.get("COURSE_NO_PROGRESS") == "1" or run_mode.required_outcome_value() is not None
    )


def _warn(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _empty() -> dict:
    return {"version": FILE_VERSION, "passed": {}}


def _is_valid(record) -> bool:
    return (
        type(record) is dict
        and record.get("version") == FILE_VERSION
        and type(record.get("passed")) is dict
        and all(type(v) is dict for v in record["passed"].values())
    )


def load(path: Path | None = None) -> dict:
    """The progress record; an empty one if there is none or it cannot be used."""
    path = path or progress_file()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _empty()
    except OSError as error:
        _warn(f"course progress: cannot read {path} ({error.strerror}); progress not shown.")
        return _empty()
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        record = None
    if not _is_valid(record):
        kept = _set_aside(path)
        _warn(f"course progress: {path} was unreadable; kept it as {kept.name} and started afresh.")
        return _empty()
    return record


def _set_aside(path: Path, label: str = "corrupt") -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    kept = path.with_name(f"{path.name}.{label}-{stamp}")
    try:
        os.replace(path, kept)
    except OSError:
        pass
    return kept


def _write(record: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".progress-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(record, file, indent=1, sort_keys=True)
        os.replace(tmp, path)  # atomic: a reader sees the old file or the new one
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record_pass(exercise_id: str, path: Path | None = None) -> None:
    """Remember that ``exercise_id`` passed. Never raises."""
    if not recording_enabled():
        return
    path = path or progress_file()
    try:
        record = load(path)
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        entry = record["passed"].setdefault(exercise_id, {"first_passed": now})
        entry["last_passed"] = now
        _write(record, path)
    except OSError as error:
        _warn(f"course progress: could not save to {path} ({error.strerror or error}).")
    except Exception as error:  # progress must never break a check
        _warn(f"course progress: not saved ({type(error).__name__}: {error}).")


def reset(path: Path | None = None) -> None:
    """Forget all progress (the file is kept aside, not deleted)."""
    path = path or progress_file()
    if path.exists():
        _set_aside(path, "before-reset")


class ListedExercise(Protocol):
    """What showing progress needs of an exercise (``course_utils.exercises.Exercise`` has it)."""

    name: str
    id: str


@dataclass
class ChapterProgress:
    chapter: str
    done: list[str]
    todo: list[str]


@dataclass
class ProgressReport:
    chapters: list[ChapterProgress]
    path: Path
    note: str = ""  # where the file lives, when that is not a place that lasts (hosting.where)

    @property
    def shown_path(self) -> str:
        """The file as a learner would type it: ``~/...`` under their home folder."""
        try:
            return str(Path("~") / self.path.relative_to(Path.home()))
        except (ValueError, RuntimeError):  # elsewhere, or no home folder
            return str(self.path)

    def __str__(self) -> str:
        lines = [f"Your progress ({self.shown_path})"] + ([self.note] if self.note else [])
        for chapter in self.chapters:
            total = len(chapter.done) + len(chapter.todo)
            lines.append(f"  {chapter.chapter:<24} {len(chapter.done)}/{total}")
            lines += [f"      ✅ {name}" for name in chapter.done]
            lines += [f"      ·  {name}" for name in chapter.todo]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = []
        for chapter in self.chapters:
            total = len(chapter.done) + len(chapter.todo)
            marks = [f"✅ {html.escape(n)}" for n in chapter.done] + [
                f"<span style='color:#888'>· {html.escape(n)}</span>" for n in chapter.todo
            ]
            rows.append(
                f"<tr><td style='text-align:left'><b>{html.escape(chapter.chapter)}</b></td>"
                f"<td>{len(chapter.done)}/{total}</td>"
                f"<td style='text-align:left'>{'<br>'.join(marks)}</td></tr>"
            )
        return (
            f"<div><b>Your progress</b> <small>({html.escape(self.shown_path)})</small>"
            + (f"<p><small>{html.escape(self.note)}</small></p>" if self.note else "")
            + "<table><tr><th>chapter</th><th>done</th><th>exercises</th></tr>"
            f"{''.join(rows)}</table></div>"
        )


def progress_report(
    path: Path | None = None, *, exercises: Mapping[str, Iterable[ListedExercise]]
) -> ProgressReport:
    """Per chapter, which of ``exercises`` (chapter → its exercises, in course order) passed.

    ``course_utils.exercises.all_exercises()`` gives the course's own listing.
    """
    path = path or progress_file()
    passed = load(path)["passed"]
    chapters = []
    for chapter, listed in exercises.items():
        listed = list(listed)
        done = [e.name for e in listed if e.id in passed]
        todo = [e.name for e in listed if e.id not in passed]
        chapters.append(ChapterProgress(chapter, done, todo))
    return ProgressReport(chapters, path, hosted_note())


def hosted_note() -> str:
    """On a hosted machine, the progress file (and the notebook) go when the machine does."""
    from course_utils import hosting

    place = hosting.where()
    if place.kind not in (hosting.COLAB, hosting.KAGGLE):  # a hub's home folder stays
        return ""
    drive = (' To keep your progress too, mount your Drive and set os.environ["COURSE_PROGRESS_FILE"] = '
             '"/content/drive/MyDrive/pytorch-course-progress.json" before your first check.'
             if place.kind == hosting.COLAB else "")
    return (f"On {place.name} this file lives on the machine you were lent, and goes when it does. "
            f"To keep your answers: {place.keep_work}.{drive}")


def show_progress(
    path: Path | None = None, *, exercises: Mapping[str, Iterable[ListedExercise]]
) -> None:
    """Show, per chapter, which exercises are done (``progress_report`` returns the data)."""
    from course_utils.display import show

    show(progress_report(path, exercises=exercises))
