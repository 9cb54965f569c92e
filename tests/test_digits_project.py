"""examples/digits_project: the chapter 07 layout runs from the command line, writes its log,
checkpoint and weights to the folder it is given, and resumes exactly."""

import json
import subprocess
import sys
from pathlib import Path

import torch

from course_utils.run_log import read_log
from examples.digits_project import evaluate as evaluate_module
from examples.digits_project import train as train_module

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "digits_project" / "config.json"


def _config(tmp_path, **changes):
    config = json.loads(CONFIG.read_text(encoding="utf-8"))
    config.update(changes)
    path = tmp_path / f"config_{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_the_command_line_run_writes_its_outputs_to_the_folder_given(tmp_path):
    out = tmp_path / "run"
    config = _config(tmp_path, epochs=2)
    done = subprocess.run(
        [sys.executable, "-m", "examples.digits_project.train", "--config", str(config), "--out", str(out)],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=120,
    )
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "config.json", "log.jsonl", "model.pt"]
    rows = read_log(out / "log.jsonl")
    assert [row["epoch"] for row in rows] == [0, 1]
    assert {"train_loss", "val_loss", "lr", "seconds", "peak_memory_bytes"} <= set(rows[0])
    assert rows[1]["val_loss"] < rows[0]["val_loss"]
    assert done.stdout.count("\n") == 2  # one printed line per epoch
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=True)
    assert checkpoint["epoch"] == 1
    metrics = evaluate_module.main(["--config", str(config), "--weights", str(out / "model.pt")])
    assert abs(metrics["loss"] - rows[-1]["val_loss"]) < 1e-6
    assert metrics["accuracy"] > 0.5


def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path):
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    train_module.main(["--config", str(_config(tmp_path, epochs=4)), "--out", str(straight)])
    train_module.main(["--config", str(_config(tmp_path, epochs=2)), "--out", str(interrupted)])
    train_module.main(["--config", str(_config(tmp_path, epochs=4)), "--out", str(interrupted), "--resume"])
    a = torch.load(straight / "model.pt", weights_only=True)
    b = torch.load(interrupted / "model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["epoch"] for r in read_log(interrupted / "log.jsonl")] == [0, 1, 2, 3]
    assert read_log(interrupted / "log.jsonl")[3]["val_loss"] == read_log(straight / "log.jsonl")[3]["val_loss"]
