"""Chapter 04's shared check helpers: the chapter's name, torch's one-time set-up, and what
a function that should return a loss as a Python float gave back (train_step, evaluate)."""

from __future__ import annotations

import torch

from course_utils.exercises.core import Mistake
from course_utils.exercises.running import set_up_torch_once
from course_utils.exercises.facts import same_values

CHAPTER = "training_loop"

# The checks build optimizers: torch's one-time set-up for them is paid here, in the notebook's
# import cell, not by the first check.
set_up_torch_once()


def _returned(value) -> dict:
    """What a function that should return a loss as a Python float gave back."""
    if isinstance(value, torch.Tensor):
        facts = {"kind": "tensor", "numel": int(value.numel()), "requires_grad": bool(value.requires_grad)}
        if value.numel() == 1:
            facts["value"] = float(torch.Tensor.detach(value).reshape(-1)[0].item())
        return facts
    if isinstance(value, float):  # float and its subclasses, such as numpy.float64
        return {"kind": "float", "value": float(value)}
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    return {"kind": name}


def _returned_problem(got: dict, expected: float, *, name: str, on: str) -> str | None:
    if got["kind"] == "NoneType":
        return Mistake("returns-none", f"{name} returned None (on {on}); end it with `return loss.item()`.")
    if got["kind"] == "tensor":
        extra = (
            " that still records a graph (requires_grad=True)" if got.get("requires_grad") else ""
        )
        return Mistake("returns-tensor", (
            f"{name} returned the loss as a tensor{extra} (on {on}); return a Python float "
            "with loss.item(). A float is just a number to log and plot; a loss tensor kept for "
            "logging can keep its whole graph in memory, step after step."
        ))
    if got["kind"] != "float":
        return Mistake("returns-not-a-float", (
            f"{name} returned {got['kind']} (on {on}); return the loss as a Python float: loss.item()."
        ))
    if not same_values(got["value"], expected, rtol=1e-4, atol=1e-6):
        return Mistake("returns-another-loss", (
            f"{name} returned {got['value']:.6g} (on {on}); the loss of this batch is "
            f"{expected:.6g}. Return the loss computed in this call's forward pass, as loss.item()."
        ))
    return None
