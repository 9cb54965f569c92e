"""A per-epoch log of a training run: one JSON object per line, in a file (chapter 07).

Printed numbers scroll away and die with the kernel; a file stays. JSON lines (``.jsonl``) are
written one complete line per epoch and flushed at once, so a run that crashes keeps every
epoch it finished, another process can read the file while the run is going, and each line is
readable by eye, by ``json``, or by pandas (``pd.read_json(path, lines=True)``).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import torch

FIELDS = ("epoch", "train_loss", "val_loss", "lr", "seconds", "peak_memory_bytes")


class RunLog:
    """Append one row per epoch to ``path``; ``with RunLog(path) as log: log.write(epoch=0, ...)``.

    An existing file is appended to, so a resumed run continues the same log.
    """

    def __init__(self, path):
        self.path = Path(path)
        self._file = open(self.path, "a", encoding="utf-8")

    def write(self, **row) -> dict:
        """Write one epoch's numbers: plain ints, floats, bools, strings and None; one-number
        tensors and NumPy scalars (``np.mean(losses)``, ``np.float32``, ``np.int64``) are
        turned into plain numbers. Anything else is refused, naming the key, before a line is
        written: a log that stops mid-training, or a row that reads back as text, is worse."""
        clean = {key: _plain(key, value) for key, value in row.items()}
        self._file.write(json.dumps(clean) + "\n")
        self._file.flush()  # the line is in the file now, not in a buffer that a crash loses
        return clean

    def close(self) -> None:
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False


def _plain(key: str, value):
    if isinstance(value, torch.Tensor) or type(value).__module__ == "numpy":
        # A NumPy scalar (np.float64 is a float subclass, but json would write np.float32 as
        # an error and repr(np.float64(nan)) as "np.float64(nan)") or a one-number array/tensor.
        size = getattr(value, "numel", None)
        count = size() if callable(size) else getattr(value, "size", 1)
        if count != 1:
            raise TypeError(f"RunLog.write: {key}= holds {count} numbers; log one number per key "
                            f"(e.g. {key}=values.mean().item())")
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        # JSON has no nan or inf; "nan" stays readable and visible, and read_log turns it back.
        return repr(float(value)) if not math.isfinite(value) else float(value)
    raise TypeError(f"RunLog.write: {key}= is a {type(value).__name__}; log plain numbers, strings "
                    "or bools (one per key)")


def read_log(path) -> list[dict]:
    """Every row of a log, in order; a last line cut off by a crash is skipped."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written when the run stopped
        rows.append({key: _float_back(value) for key, value in row.items()})
    return rows


def _float_back(value):
    if value in ("nan", "inf", "-inf"):
        return float(value)
    return value


def curves(rows: list[dict], *names: str) -> dict:
    """``{name: [(epoch, value), ...]}`` for ``course_utils.plots.plot_curves``."""
    return {name: [(row["epoch"], row[name]) for row in rows if name in row] for name in names}


class EpochTimer:
    """Seconds and peak memory of one epoch: ``with EpochTimer(device) as t: ...``, then
    ``t.seconds`` and ``t.peak_memory_bytes``.

    Peak memory means different things per device, and the log should say which:

    * CUDA: the allocator's peak during the epoch (``max_memory_allocated``, reset at the start).
    * MPS: memory allocated at the end of the epoch (MPS keeps no peak).
    * CPU: the process's highest resident memory so far (``ru_maxrss``), which only grows: it
      shows a leak or a jump, not one epoch's own need. ``None`` where the OS has no such
      counter (Windows).
    """

    def __init__(self, device):
        self.device = torch.device(device)
        self.seconds = None
        self.peak_memory_bytes = None

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_memory_bytes = int(torch.cuda.max_memory_allocated(self.device))
        elif self.device.type == "mps":
            torch.mps.synchronize()
            self.peak_memory_bytes = int(torch.mps.current_allocated_memory())
        else:
            self.peak_memory_bytes = process_peak_rss_bytes()
        self.seconds = time.perf_counter() - self._start
        return False


def process_peak_rss_bytes() -> int | None:
    """The highest resident memory of this process so far, in bytes (None on Windows)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kilobytes, macOS bytes.
    return int(peak) if os.uname().sysname == "Darwin" else int(peak) * 1024
