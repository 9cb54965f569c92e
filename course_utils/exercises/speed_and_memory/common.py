"""Chapter 05's shared check helpers: the chapter's name, torch's one-time set-up, how a
returned value is named and read as a number, the learning rate of the probes' optimizers,
tensors flattened into one array, and where an ``expect`` rebuilds a probe's model."""

from __future__ import annotations

import math

import numpy as np
import torch

from course_utils.exercises.running import set_up_torch_once

CHAPTER = "speed_and_memory"

# The checks build optimizers: torch's one-time set-up for them is paid here, in the notebook's
# import cell, not by the first check.
set_up_torch_once()


def _kind(value) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _number(value):
    """A returned count as a float, or None when it is not a single finite real number."""
    try:
        if isinstance(value, torch.Tensor):
            if value.numel() != 1 or value.is_complex() or value.device.type == "meta":
                return None
            value = torch.Tensor.detach(value).reshape(-1)[0].item()
        if isinstance(value, (bool, np.bool_)):
            return None
        if isinstance(value, (int, float, np.integer, np.floating)):
            number = float(value)
            return number if math.isfinite(number) else None
    except (RuntimeError, OverflowError, ValueError, TypeError):  # a number too big for a float
        return None
    return None


_LR = 0.1


def _flat(tensors) -> np.ndarray:
    return torch.cat([t.detach().reshape(-1) for t in tensors]).numpy().copy()
