"""course_utils.run_log: one JSON line per epoch, read back even after a crash."""

import math

import torch

from course_utils import run_log
from course_utils.plots import plot_curves


def test_rows_are_written_at_once_and_read_back(tmp_path):
    path = tmp_path / "log.jsonl"
    with run_log.RunLog(path) as log:
        log.write(epoch=0, train_loss=torch.tensor(1.5), val_loss=1.25, lr=0.1)
        assert len(run_log.read_log(path)) == 1  # flushed: readable while the run goes on
        log.write(epoch=1, train_loss=float("nan"), val_loss=1.0, lr=0.05)
    with run_log.RunLog(path) as log:  # a resumed run appends
        log.write(epoch=2, train_loss=0.5, val_loss=0.75, lr=0.025)
    rows = run_log.read_log(path)
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    assert rows[0]["train_loss"] == 1.5
    assert math.isnan(rows[1]["train_loss"])
    assert run_log.curves(rows, "val_loss") == {"val_loss": [(0, 1.25), (1, 1.0), (2, 0.75)]}
    plot_curves(run_log.curves(rows, "train_loss", "val_loss"), title="test")


def test_a_line_cut_off_by_a_crash_is_skipped(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"epoch": 0, "val_loss": 1.0}\n{"epoch": 1, "val_lo', encoding="utf-8")
    assert run_log.read_log(path) == [{"epoch": 0, "val_loss": 1.0}]


def test_epoch_timer_measures_time_and_memory_on_the_cpu():
    with run_log.EpochTimer("cpu") as timer:
        torch.ones(1000).sum()
    assert timer.seconds >= 0
    assert timer.peak_memory_bytes is None or timer.peak_memory_bytes > 0
