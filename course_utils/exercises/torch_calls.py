"""Watching which torch functions a learner's code calls, without changing what they do.

Shared by the practice checks and the public cases (it ships in exam releases: it records
behaviour, it computes no answer).
"""

from __future__ import annotations

import torch


class TorchCallCounter(torch.overrides.TorchFunctionMode):
    """Counts the torch functions and tensor methods called inside it."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


class TorchCallRecorder(torch.overrides.TorchFunctionMode):
    """Notes which torch functions the learner's code calls (by name), and changes nothing."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.add(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))
