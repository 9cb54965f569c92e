"""Chapter 04's shared check helpers: the chapter's name, torch's one-time set-up, and what
a function that should return a loss as a Python float gave back (train_step, evaluate)."""

from __future__ import annotations

import torch

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


# The words of ``_returned_problem``, merged into the table of each exercise that uses it
# (train_step, evaluate): ``{name}`` is the exercise's function.
RETURNED_MESSAGES = {
    "returns-none": "{name} returned None (on {on}); end it with `return loss.item()`.",
    "returns-tensor": (
        "{name} returned the loss as a tensor{graph} (on {on}); return a Python float "
        "with loss.item(). A float is just a number to log and plot; a loss tensor kept for "
        "logging can keep its whole graph in memory, step after step."
    ),
    "clause-still-records-a-graph": " that still records a graph (requires_grad=True)",
    "returns-not-a-float": "{name} returned {kind} (on {on}); return the loss as a Python float: loss.item().",
    "rounds-the-loss": (
        "{name} returned {got!r} (on {on}): the loss of this batch, {expected!r}, rounded to "
        "{decimals} decimals. Return it as it is, with loss.item(): round only where you print it."
    ),
    "returns-another-loss": (
        "{name} returned {got:.6g} (on {on}); the loss of this batch is "
        "{expected:.6g}. Return the loss computed in this call's forward pass, as loss.item()."
    ),
}

# How close a returned loss or a parameter must be to the reference's, by the model's dtype:
# the same computation in the same dtype agrees to a few steps of it (a float32 loss rounded to
# 4 decimals, or a float64 one computed in float32, does not).
TOLERANCE = {"float32": {"rtol": 1e-5, "atol": 1e-7}, "float64": {"rtol": 1e-9, "atol": 1e-12}}


def _rounded_to(got: float, expected: float) -> int | None:
    """The number of decimals ``expected`` was rounded to, if ``got`` is it rounded."""
    if got == expected:
        return None
    return next((decimals for decimals in range(10) if got == round(expected, decimals)), None)


def _returned_problem(got: dict, expected: float, *, name: str, on: str, messages, dtype: str = "float32"):
    if got["kind"] == "NoneType":
        return messages("returns-none", name=name, on=on)
    if got["kind"] == "tensor":
        graph = messages.text("clause-still-records-a-graph") if got.get("requires_grad") else ""
        return messages("returns-tensor", name=name, graph=graph, on=on)
    if got["kind"] != "float":
        return messages("returns-not-a-float", name=name, kind=got["kind"], on=on)
    if not same_values(got["value"], expected, **TOLERANCE.get(dtype, TOLERANCE["float32"])):
        decimals = _rounded_to(got["value"], expected)
        if decimals is not None:
            return messages("rounds-the-loss", name=name, got=got["value"], on=on, expected=expected,
                            decimals=decimals)
        return messages("returns-another-loss", name=name, got=got["value"], on=on, expected=expected)
    return None
