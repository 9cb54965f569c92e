"""tools/gpu_figures.py runs on any machine and reports what it measured, in the units it says."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_quick_run_reports_every_precision_and_the_share_of_the_measured_peak(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_figures.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=True,
    )
    assert "Mixed precision" in done.stdout and "Matrix-multiply throughput" in done.stdout
    figures = json.loads(out.read_text())
    rows = {row["precision"]: row for row in figures["mixed_precision"]}
    assert rows["float32"]["median_s"] > 0
    assert all("median_s" in row or "error" in row for row in rows.values())
    shares = [row["share_of_measured_peak"] for row in figures["matmul"] if "share_of_measured_peak" in row]
    assert shares, "no layer-sized product was compared with the measured peak"
    assert all(0 < share < 5 for share in shares)  # a small product can beat a noisy "peak"
