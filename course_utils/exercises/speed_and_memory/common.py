"""Chapter 05's shared check helpers: the chapter's name, torch's one-time set-up, how a
returned value is named and read as a number, the learning rate of the probes' optimizers,
tensors flattened into one array, and where an ``expect`` rebuilds a probe's model."""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def judge_side():
    """Where an ``expect`` rebuilds a probe's model and replays the reference on it: on the CPU,
    in float32, with autograd on; every random stream, the grad mode and the defaults are put
    back afterwards (in a learner's notebook ``expect`` runs in their session)."""
    from course_utils.exercises.running import learner_state_preserved

    with learner_state_preserved(), torch.device("cpu"), torch.enable_grad():
        torch.set_default_dtype(torch.float32)
        yield


def load_given(model, parameters, grads=None):
    """``model`` with the parameters (and ``.grad``) a probe recorded with ``given``, in order."""
    from course_utils.exercises.facts import tensor_of

    with torch.no_grad():
        for index, (p, facts) in enumerate(zip(model.parameters(), parameters, strict=True)):
            p.copy_(tensor_of(facts))
            if grads is not None:
                p.grad = None if grads[index] is None else tensor_of(grads[index])
    return model
