"""No mutant of a reference solution passes its check, unless reviewed as equivalent.

tools/mutate_checks.py mutates every reference at the AST level and runs each mutant through
the exercise's verdict(). A surviving mutant is either a missing probe case, to be fixed in the
probe, or computes exactly what the task asks: then it is listed, with the reason, in
tests/equivalent_mutants/<chapter>.json.
"""

import contextlib
import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.exercises import CHAPTERS

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "tests" / "equivalent_mutants"


def _mutate_checks():
    """The tool's module, loaded once per process (a case per chapter asks for it)."""
    if "mutate_checks" not in sys.modules:
        spec = importlib.util.spec_from_file_location("mutate_checks", ROOT / "tools" / "mutate_checks.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["mutate_checks"] = module
        spec.loader.exec_module(module)
    return sys.modules["mutate_checks"]


@pytest.fixture(scope="module", params=list(CHAPTERS.values()))
def mutation_run(request, tmp_path_factory):
    """One chapter's mutants (a case per chapter: ./course test CHAPTER runs its own, and the
    full command spreads them over the cores). In this process, not a new one: the tool puts
    back whatever a mutant changes in the session (``session_preserved``, and each check's own
    restoring), and a fresh interpreter for each of eight chapters cost about 3 s each."""
    chapter = request.param
    report = tmp_path_factory.mktemp("mutants") / f"{chapter}.json"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        returncode = _mutate_checks().main([chapter, "--equivalent", str(EQUIVALENTS), "--json", str(report)])
    run = subprocess.CompletedProcess([], returncode, out.getvalue(), err.getvalue())
    return chapter, run, json.loads(report.read_text())


def test_every_mutant_of_every_reference_is_killed_or_reviewed(mutation_run):
    chapter, run, report = mutation_run
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert {r["id"].split(".")[0] for r in report["exercises"]} == {chapter}
    # every chapter had 20 or more on 2026-12-01 (reliable_practice 20, speed_and_memory 52)
    assert report["totals"]["total"] >= 15, f"the mutation operators stopped producing mutants in {chapter}"


def test_every_reviewed_equivalent_still_names_a_surviving_mutant(mutation_run):
    """A stale entry (the mutant is now killed, or no longer made) is removed, not kept."""
    chapter, _, report = mutation_run
    survivors = {s["id"] for r in report["exercises"] for s in r["survivors"]}
    listed = EQUIVALENTS / f"{chapter}.json"
    stale = sorted(set(json.loads(listed.read_text())) - survivors) if listed.exists() else []
    assert not stale, f"{listed.name} lists mutants that no longer survive: {stale}"


def test_every_file_of_reviewed_equivalents_names_a_chapter():
    assert {path.stem for path in EQUIVALENTS.glob("*.json")} <= set(CHAPTERS.values())
