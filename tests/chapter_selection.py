"""Which tests concern one chapter, or the files changed since the last commit.

``./course test 03`` (or ``03_models``, ``models``) runs everything that concerns chapter 03:
its notebooks in every run (notebooks/, solutions/ and each prepared run of
``tests/notebook_runs.py``), its exercises' catalogues (``tests/catalogue/models/``), the unit
tests written for it (``CHAPTER_FILES``), and the cases of the course-wide test files that name
it (a known answer of ``models.SkipBlock``, the public cases of ``models.Tower``, a claim of
chapter 03). ``./course test --changed`` runs what concerns the files changed since the last
commit: a chapter's notebooks, exercises, public cases or catalogue select that chapter, a
changed test file runs itself, and a change to anything else (the exercise framework, a helper
of the tests, conftest.py, the README that tests read) runs everything. conftest.py applies the selection (``--chapter``, ``--changed``) after collection,
so the same test ids run as in the full command.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from course_utils.exercises import CHAPTERS, chapter_named

ROOT = Path(__file__).resolve().parents[1]

# Unit test files written for one or two chapters (their pictures, their tools).
CHAPTER_FILES = {
    "00_environment": ("test_env.py", "test_torch_build.py", "test_diagnose.py"),
    "01_tensors": ("test_pictures_tensors_autograd.py", "test_widgets.py"),
    "02_autograd": ("test_pictures_tensors_autograd.py", "test_widgets.py"),
    "03_models": ("test_pictures_models_loop.py", "test_plots_layers.py"),
    "04_training_loop": ("test_pictures_models_loop.py", "test_plots.py", "test_plots_bars.py", "test_data.py"),
    "05_speed_and_memory": ("test_pictures_speed_memory.py", "test_bench.py", "test_out_of_memory.py"),
    "06_debugging": ("test_pictures_debug_practice.py", "test_zoo_tracing.py"),
    "07_reliable_practice": ("test_pictures_debug_practice.py", "test_checkpoints.py", "test_run_log.py",
                             "test_zoo_checkpoints.py"),
}

# Course-wide test files whose cases are parametrized by chapter or exercise: a case belongs to
# a chapter when its id names the chapter's notebook or exercise package.
NAMED_IN_IDS = ("test_known_answers.py", "test_public_cases.py", "test_catalogue_gate.py",
                "test_notebook_structure.py", "test_pasted_solutions.py", "test_every_exercise.py",
                "test_claims.py", "test_hosted.py", "test_mutation_gate.py")


def concerns(nodeid: str, stem: str) -> bool:
    """Whether the test ``nodeid`` (relative to the course) concerns chapter ``stem``."""
    module = CHAPTERS[stem]
    path, _, rest = nodeid.partition("::")
    name = Path(path).name
    if name == f"{stem}.ipynb":
        return True
    if path.startswith(f"tests/catalogue/{module}/"):
        return True
    if path.startswith("tests/") and name in CHAPTER_FILES[stem]:
        return True
    if path.startswith("tests/") and name in NAMED_IN_IDS:
        number = stem[:2]
        return (stem in rest or f"[{module}." in rest or f"[{module}]" in rest
                or f"chapter_{number}" in rest or f"[{number}]" in rest)
    return False


def changed_files(root: Path = ROOT) -> list[str]:
    """Files changed since the last commit (staged, unstaged, or new and not ignored)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.split("\n")

    found = git("diff", "--name-only", "HEAD") + git("ls-files", "--others", "--exclude-standard")
    return sorted({line for line in found if line})


def what_changed_concerns(files: list[str]) -> tuple[set[str], set[str], bool]:
    """(chapters, test files, everything): what the changed ``files`` concern."""
    chapters, tests, everything = set(), set(), False
    for path in files:
        parts = Path(path).parts
        if path.endswith(".ipynb") and parts[0] in ("notebooks", "solutions"):
            chapters.add(chapter_named(Path(path).stem))
        elif path.startswith("course_utils/exercises/") and len(parts) > 3 and parts[2] in CHAPTERS.values():
            chapters.add(chapter_named(parts[2]))
        elif path.startswith("course_utils/exercises/public_cases/") and Path(path).stem in CHAPTERS.values():
            chapters.add(chapter_named(Path(path).stem))
        elif path.startswith("tests/catalogue/") and len(parts) > 3:
            chapters.add(chapter_named(parts[2]))
        elif path.startswith("tests/") and path.endswith(".py") and Path(path).name.startswith("test_") \
                and len(parts) == 2:
            tests.add(path)
        elif path == "tests/e2e_passed.json":  # the end-to-end groups' record: what reads it
            tests.add("tests/test_e2e_groups.py")
        else:  # the framework, a helper of the tests, the README the tests read, the command...
            everything = True
    return chapters, tests, everything


def paths_to_collect(stems: set[str], tests: set[str] = frozenset(), runs: Path | None = None) -> list[str]:
    """The files and folders pytest needs to collect for ``stems`` (and the changed ``tests``).

    Collecting the whole course takes a quarter of a minute on two cores; a chapter's run hands
    pytest only these, and conftest.py then keeps, of the course-wide files, the cases that
    name the chapter. The test ids are those of the full command.
    """
    paths: set[str] = set(tests)
    for stem in stems:
        module = CHAPTERS[stem]
        paths |= {f"notebooks/{stem}.ipynb", f"solutions/{stem}.ipynb", f"tests/catalogue/{module}"}
        paths |= {f"tests/{name}" for name in (*CHAPTER_FILES[stem], *NAMED_IN_IDS)}
        if runs is not None:
            paths |= {str(path) for path in sorted(runs.glob(f"*/{stem}.ipynb"))}
    return sorted(path for path in paths if (ROOT / path).exists() or Path(path).exists())


def main(argv: list[str]) -> int:
    """``python tests/chapter_selection.py RUNS_DIR [--changed] [[--chapter] CHAPTER...]``: print
    the paths to collect, one per line; nothing at all when the whole course is to be collected."""
    import sys

    runs, rest = Path(argv[0]), argv[1:]
    try:
        stems = {chapter_named(name) for name in rest if name not in ("--changed", "--chapter")}
    except ValueError as error:
        print(f"course test: {error}", file=sys.stderr)
        return 2
    tests: set[str] = set()
    if "--changed" in rest:
        more, tests, everything = what_changed_concerns(changed_files(ROOT))
        if everything:
            return 0
        stems |= more
        if not stems and not tests:
            return 0  # nothing changed: the full collection, from which conftest.py keeps nothing
    print("\n".join(paths_to_collect(stems, tests, runs)))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
