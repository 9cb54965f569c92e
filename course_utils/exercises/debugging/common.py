"""What the exercises of chapter 06 share: the chapter's name, torch's one-time set-up, a value's
kind as a message names it, seeded generators."""

from __future__ import annotations


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
