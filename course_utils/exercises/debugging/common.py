"""What the exercises of chapter 06 share: the chapter's name, torch's one-time set-up, a value's
kind as a message names it, seeded generators, the note on .view() of a non-contiguous input, and
where an ``expect`` rebuilds a probe's model."""

from __future__ import annotations

import contextlib

import torch

from course_utils.exercises.running import set_up_torch_once


CHAPTER = "debugging"

# The checks use meta and optimizers: torch's one-time set-up for them is paid here, in the notebook's
# import cell, not by the first check.
set_up_torch_once()


def _kind(value) -> str:
    if value is None:
        return "None (a function without `return` gives None)"
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


_VIEW_NOTE = (
    "the check's input is non-contiguous (a transposed tensor, as x.transpose(1, 2) or "
    "permute() give): .view() needs a contiguous memory layout; use .reshape(), which copies "
    "only when it must."
)


@contextlib.contextmanager
def judge_side():
    """Where an ``expect`` rebuilds a probe's model and runs the reference on it: on the CPU, in
    float32, with autograd on; every random stream, the grad mode and the defaults are put back
    afterwards (in a learner's notebook ``expect`` runs in their session)."""
    from course_utils.exercises.running import learner_state_preserved

    with learner_state_preserved(), torch.device("cpu"), torch.enable_grad():
        torch.set_default_dtype(torch.float32)
        yield


def load_given(model, parameters):
    """``model`` with the parameters a probe recorded with ``given``, in order."""
    from course_utils.exercises.facts import tensor_of

    with torch.no_grad():
        for p, facts in zip(model.parameters(), parameters, strict=True):
            p.copy_(tensor_of(facts))
    return model
