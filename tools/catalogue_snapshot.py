"""A snapshot of every catalogue answer's verdict, to show that a refactor changed none.

    .venv/bin/python tools/catalogue_snapshot.py record before.json [--module tensors ...]
    .venv/bin/python tools/catalogue_snapshot.py compare before.json after.json

A change that should not change what learners read (moving the exercises into one module per
exercise, a refactor of a judge's helpers) must change no verdict. The catalogue's own tests
only ask that a message *contain* some words; this records the whole verdict of every right
and wrong answer (outcome, mistake id, message) by case name, so that two snapshots, one before
and one after, can be compared exactly.

``record`` finds the catalogues in the layout of today (``tests/catalogue/<chapter>/test_*.py``)
and the one before it (``tests/test_exercises_<chapter>.py``), runs each
file's cases in their catalogue order (as pytest does; stateful answers keep module state), and
writes one entry per case, sorted by name. ``--module`` keeps the exercises of some chapters
(``Exercise.chapter``), whichever file holds them. ``compare`` prints every case whose outcome,
mistake, message (or exercise id) differs, and every case found in one snapshot only; exit 1 if
there is any. course_utils is imported from the checkout the script lies in, so the same
``.venv`` (whose editable install points at one checkout) can record another checkout's copy.

Messages are normalised (``normalise``) only where they legitimately change from run to run or
with where the files lie; see ``NORMALISATION``. Cases listed in ``VARIES_BETWEEN_RUNS`` are
recorded but only reported by ``compare``, never counted as a difference.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# Where catalogues live: one file per exercise, or (before the move) one file per chapter.
CATALOGUE_GLOBS = ("test_exercises_*.py", "catalogue/**/test_*.py")
NOT_CATALOGUES = {TESTS / "test_exercises_core.py"}

# The settings the course's test command runs under. PYTHONHASHSEED only counts from the
# interpreter's start, so a run without these settings starts itself again with them.
SETTINGS = {"COURSE_SMOKE": "1", "COURSE_NO_PROGRESS": "1", "MPLBACKEND": "Agg",
            "PYTHONHASHSEED": "0", "OMP_WAIT_POLICY": "PASSIVE"}
# What tests/conftest.py removes before every test: a test command's own choices.
DROPPED_SETTINGS = ("COURSE_STRICT", "COURSE_EXPECT", "NBGRADER_EXECUTION", "COURSE_STATIC_WIDGETS")

# (pattern, replacement, why), applied in this order to every message. Nothing else is touched:
# a message that differs in anything but these differs.
TEMP_FOLDERS = sorted({"/tmp", "/var/tmp", tempfile.gettempdir()})
NORMALISATION = (
    # A place in a file of the tests (`File ".../tests/test_x.py", line 12`, `tests/x.py:12`): it
    # moves whenever a catalogue is split up. Places in course_utils/ are kept.
    (re.compile(r'(File "|)(?:[^\s"\'(]*/)?tests/[^\s"\'()]*\.py("?, line |:)\d+'),
     r"\1<a file of tests/>\2<n>", "a file and line of the tests"),
    # Where the Python environment and the checkout lie (sys.executable, a file of the course):
    # another worktree, another path. The environment first: it is often <root>/.venv.
    (re.compile(re.escape(sys.prefix) + r"\b"), "<venv>", "the Python environment's folder"),
    (re.compile(re.escape(str(ROOT)) + r"\b"), "<root>", "the checkout's folder"),
    # A temporary folder's random name (/tmp/kernel-check-x8f2q1ab/project -> <tmp>/project).
    (re.compile(r"(?:" + "|".join(map(re.escape, TEMP_FOLDERS)) + r")/[^/\s'\"(),;:]+"), "<tmp>",
     "a temporary folder's name"),
    # An object's address in its repr: <function f at 0x7f3a2c1d5e40>.
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x<address>", "a memory address"),
    # A time measured while the answer ran, always shown with decimals ("52.6 ms", "0.013 s");
    # the settings a message states are whole numbers ("8 ms a batch", "stopped after 60 s").
    (re.compile(r"\b\d+\.\d+(?:e-?\d+)? ?(?:s|ms|µs|us|ns|seconds)\b"), "<time>", "a measured time"),
    # A seed torch.seed() drew from the system's entropy ("its seed was 6949867437079901259").
    (re.compile(r"\bseed was \d{6,}\b"), "seed was <random seed>", "a seed drawn from the system"),
)

# Cases whose verdict is random from one run to the next; recorded as they came, listed apart
# by compare. None now: zero_negative_rows' answer that cached a mask by id(x) varied (a later
# input could get a freed input's id, about 1 run in 7) until the catalogue kept x alive too.
VARIES_BETWEEN_RUNS: frozenset[str] = frozenset()


# -- finding and running the catalogues ----------------------------------------------------------
def pinned_environment() -> None:
    """Run under the test command's settings; start again with them if they are not set."""
    for name in DROPPED_SETTINGS:
        os.environ.pop(name, None)
    if any(os.environ.get(name) != value for name, value in SETTINGS.items()):
        os.environ.update(SETTINGS)
        os.execv(sys.executable, [sys.executable, *sys.argv])


def catalogue_files() -> list[Path]:
    found = {path for pattern in CATALOGUE_GLOBS for path in TESTS.glob(pattern)}
    return sorted(found - NOT_CATALOGUES)


def import_test_file(path: Path):
    """Import a test file as pytest's default import mode does: its first folder upwards without
    an ``__init__.py`` goes on sys.path, and the module is named from there."""
    base, parts = path.parent, [path.stem]
    while (base / "__init__.py").exists():
        base, parts = base.parent, [base.name, *parts]
    if str(base) not in sys.path:
        sys.path.insert(0, str(base))
    return importlib.import_module(".".join(parts))


def catalogue_cases(chapters: list[str] | None) -> tuple[list, int]:
    """Every case of every catalogue file, in each file's order (a name found twice is an error),
    and how many files held a catalogue."""
    sys.path[:0] = [str(ROOT), str(TESTS)]
    import course_utils

    if not Path(course_utils.__file__).resolve().is_relative_to(ROOT):  # .venv's editable install
        raise SystemExit(f"course_utils comes from {course_utils.__file__}, not from {ROOT}")
    cases, where, files = [], {}, 0
    for path in catalogue_files():
        catalogue = getattr(import_test_file(path), "CATALOGUE", None)
        files += catalogue is not None
        for case in catalogue.cases if catalogue is not None else ():
            name, here = str(case), path.relative_to(ROOT)
            if name in where:
                raise SystemExit(f"case {name!r} is in both {where[name]} and {here}")
            where[name] = here
            if not chapters or case.exercise.chapter in chapters:
                cases.append(case)
    missing = set(chapters or ()) - {case.exercise.chapter for case in cases}
    if missing:
        raise SystemExit(f"no catalogue has an exercise of {sorted(missing)}")
    return cases, files


def normalise(message: str) -> str:
    for pattern, replacement, _why in NORMALISATION:
        message = pattern.sub(replacement, message)
    return message


def case_record(case) -> dict:
    """The case's verdict, its output (warnings the check repeats) kept off the terminal."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            verdict = case._verdict()
        except Exception as error:  # noqa: BLE001 - a case that breaks the check is a result too
            return {"exercise": case.exercise.id, "outcome": "check-raised", "mistake": None,
                    "message": normalise(f"{type(error).__name__}: {error}")}
    return {"exercise": case.exercise.id, "outcome": verdict.outcome.value,
            "mistake": verdict.mistake, "message": normalise(verdict.message)}


def record(out: Path, chapters: list[str] | None) -> int:
    started = time.perf_counter()
    cases, files = catalogue_cases(chapters)
    records = {str(case): case_record(case) for case in cases}
    out.write_text(json.dumps(dict(sorted(records.items())), indent=1, ensure_ascii=False) + "\n")
    print(f"{len(records)} cases of {files} catalogue files recorded in {out} "
          f"({time.perf_counter() - started:.0f} s)")
    return 0


# -- comparing two snapshots -----------------------------------------------------------------
def differences(before: dict, after: dict) -> list[str]:
    return [f"  {field}: {before.get(field)!r}\n    -> {after.get(field)!r}"
            for field in ("exercise", "outcome", "mistake", "message")
            if before.get(field) != after.get(field)]


def compare(a: Path, b: Path) -> int:
    first, second = json.loads(a.read_text()), json.loads(b.read_text())
    changed = varies = 0
    for name in sorted(first.keys() | second.keys()):
        if name not in second or name not in first:
            print(f"only in {a if name in first else b}: {name}")
            changed += 1
            continue
        found = differences(first[name], second[name])
        if name in VARIES_BETWEEN_RUNS:
            varies += 1
            print(f"varies between runs, not counted ({'differs' if found else 'the same'} this time): "
                  + "\n".join([name, *found]))
        elif found:
            print("differs: " + "\n".join([name, *found]))
            changed += 1
    if changed:
        print(f"{changed} of {len(first.keys() | second.keys())} cases differ")
        return 1
    print(f"{len(first)} cases, all the same" + (f" ({varies} listed as varying between runs, not compared)"
                                                if varies else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    recording = commands.add_parser("record", help="write every case's verdict to OUT")
    recording.add_argument("out", type=Path)
    recording.add_argument("--module", nargs="+", action="extend", metavar="CHAPTER",
                           help="only these chapters' exercises (tensors, autograd, ...)")
    comparing = commands.add_parser("compare", help="print the cases whose verdicts differ")
    comparing.add_argument("a", type=Path)
    comparing.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "compare":
        return compare(args.a, args.b)
    pinned_environment()
    return record(args.out, args.module)


if __name__ == "__main__":
    sys.exit(main())
