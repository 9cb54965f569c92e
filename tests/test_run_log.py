"""course_utils.run_log: one JSON line per epoch, read back even after a crash."""

import math
import sys
from pathlib import Path

import pytest
import torch

from course_utils import run_log
from course_utils.run_log import RunLog, read_log
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
    if sys.platform == "win32":  # no counter for the process's peak there
        assert timer.peak_memory_bytes is None
        return
    # A Python that has imported torch holds well over 50 MB: a figure in kilobytes (Linux's
    # unit) taken for bytes would be a thousand times smaller.
    assert 50 * 2**20 < timer.peak_memory_bytes < 2**40


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux's /proc only")
def test_cpu_peak_memory_agrees_with_the_kernels_own_figure():
    with run_log.EpochTimer("cpu") as timer:
        pass
    status = Path("/proc/self/status").read_text()
    high_water_kb = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
    assert abs(timer.peak_memory_bytes - high_water_kb * 1024) <= 0.1 * high_water_kb * 1024


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_peak_memory_is_this_epochs_own():
    device = torch.device("cuda")
    big = torch.empty(256 * 2**20, dtype=torch.uint8, device=device)  # before the epoch
    del big
    with run_log.EpochTimer(device) as timer:
        block = torch.empty(16 * 2**20, dtype=torch.uint8, device=device)
        del block
    # the peak was reset at the start: the epoch's 16 MB, not the 256 MB before it
    assert 16 * 2**20 <= timer.peak_memory_bytes < 256 * 2**20
    assert timer.seconds >= 0


def test_numpy_scalars_are_written_as_plain_numbers_and_nan_reads_back(tmp_path):
    import numpy as np

    path = tmp_path / "log.jsonl"
    with RunLog(path) as log:
        log.write(epoch=np.int64(0), train_loss=np.mean([np.nan]), val_loss=np.float32(0.5),
                  lr=np.float64(0.1), done=np.bool_(True), accuracy=torch.tensor(0.25))
    line = path.read_text().strip()
    assert "np." not in line, line
    (row,) = read_log(path)
    assert row["epoch"] == 0 and type(row["epoch"]) is int
    assert math.isnan(row["train_loss"]) and row["val_loss"] == 0.5 and row["lr"] == 0.1
    assert row["done"] is True and row["accuracy"] == 0.25


def test_a_value_that_is_not_one_number_is_refused_before_the_line_is_written(tmp_path):
    import numpy as np

    path = tmp_path / "log.jsonl"
    with RunLog(path) as log:
        for bad, says in ((np.array([1.0, 2.0]), "holds 2 numbers"), (torch.ones(3), "holds 3 numbers"),
                          ({"a": 1}, "is a dict")):
            with pytest.raises(TypeError, match=says):
                log.write(epoch=0, loss=bad)
    assert path.read_text() == ""
