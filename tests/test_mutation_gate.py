"""No mutant of a reference solution passes its check, unless reviewed as equivalent.

tools/mutate_checks.py mutates every reference at the AST level and runs each mutant through
the exercise's verdict(). A surviving mutant is either a missing probe case, to be fixed in the
probe, or computes exactly what the task asks: then it is listed, with the reason, in
tests/equivalent_mutants/<chapter>.json.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "tests" / "equivalent_mutants"


@pytest.fixture(scope="module")
def mutation_run(tmp_path_factory):
    report = tmp_path_factory.mktemp("mutants") / "mutants.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "mutate_checks.py"),
         "--equivalent", str(EQUIVALENTS), "--json", str(report)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    return run, json.loads(report.read_text())


def test_every_mutant_of_every_reference_is_killed_or_reviewed(mutation_run):
    run, report = mutation_run
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert report["totals"]["total"] >= 200, "the mutation operators stopped producing mutants"


def test_every_reviewed_equivalent_still_names_a_surviving_mutant(mutation_run):
    """A stale entry (the mutant is now killed, or no longer made) is removed, not kept."""
    _, report = mutation_run
    survivors = {s["id"] for r in report["exercises"] for s in r["survivors"]}
    for file in sorted(EQUIVALENTS.glob("*.json")):
        stale = sorted(set(json.loads(file.read_text())) - survivors)
        assert not stale, f"{file.name} lists mutants that no longer survive: {stale}"
