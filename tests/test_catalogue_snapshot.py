"""tools/catalogue_snapshot.py: a snapshot of every catalogue verdict, and a comparison that
names each case whose outcome, mistake or message changed."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = [sys.executable, str(ROOT / "tools" / "catalogue_snapshot.py")]


def test_a_snapshot_compares_equal_to_itself_and_names_a_changed_message(tmp_path):
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    done = subprocess.run([*TOOL, "record", str(before), "--module", "reliable_practice"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    cases = json.loads(before.read_text())
    assert len(cases) >= 3 * 8 and all(case["exercise"].startswith("reliable_practice.") for case in cases.values())
    same = subprocess.run([*TOOL, "compare", str(before), str(before)], capture_output=True, text=True)
    assert same.returncode == 0 and f"{len(cases)} cases, all the same" in same.stdout
    name = sorted(cases)[0]
    cases[name]["message"] += " (changed)"
    del cases[sorted(cases)[-1]]
    after.write_text(json.dumps(cases))
    differ = subprocess.run([*TOOL, "compare", str(before), str(after)], capture_output=True, text=True)
    assert differ.returncode == 1 and name in differ.stdout and sorted(json.loads(before.read_text()))[-1] in differ.stdout
