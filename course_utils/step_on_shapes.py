"""One forward and backward pass, counted without being taken, for ``memory_budget``.

Counting what a training step holds used to mean taking one: that allocated the step's whole
memory (on a GPU, there), and changed the weights it was asked only to look at. PyTorch's
``FakeTensorMode`` (what ``torch.compile`` traces with) runs every operation on shapes alone:
its results have shapes, dtypes and devices but no memory, and the model's real tensors are read,
never written. A forward that needs a value (``.item()``, ``nonzero``, an ``if`` on a tensor)
cannot run on shapes; then the pass runs for real, and says so. Either way the gradients come
from ``torch.autograd.grad`` (no ``.grad`` is touched, no optimizer steps), and the buffers
(BatchNorm's statistics) and random generators (dropout) are put back afterwards.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch

from course_utils.env import random_state_preserved
from course_utils.forward_hooks import buffers_kept

ON_SHAPES = "worked out on shapes alone (FakeTensorMode): nothing allocated, the model unchanged"


@dataclass
class CountedStep:
    """What one forward (with its loss) and backward would hold, and how it was found."""

    saved: dict  # storage key -> (tensor, bytes): what autograd saved, parameters excluded
    gradients: list  # per trained parameter: the gradient backward makes (None: not reached)
    how: str


class LossFnError(Exception):
    """``loss_fn`` returned something that is not a loss: the caller's mistake, never retried."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def is_fake(t: object) -> bool:
    """A FakeTensor has a storage without an address; asking for one is deprecated."""
    try:
        from torch._subclasses.fake_tensor import FakeTensor
    except ImportError:  # pragma: no cover - every supported torch has it
        return False
    return isinstance(t, FakeTensor)


def count_step(
    model: torch.nn.Module,
    loss_fn: Callable[[], torch.Tensor],
    trained: list[torch.Tensor],
    key_and_bytes: Callable[[torch.Tensor], tuple[object, int]],
    exclude: set,
) -> CountedStep:
    """Run ``loss_fn()`` and its backward on shapes alone, or for real when shapes cannot do."""
    with buffers_kept(model), random_state_preserved():
        try:
            return _on_shapes_or_for_real(model, loss_fn, trained, key_and_bytes, exclude)
        except LossFnError as problem:
            raise problem.error from None


def _on_shapes_or_for_real(model, loss_fn, trained, key_and_bytes, exclude) -> CountedStep:
    try:
        with _shapes_only(model) as fixed:
            # The model's tensors as the pass sees them: fake twins; a view of one (the
            # transposed weight a matrix product saves) shares its storage.
            exclude_fakes = exclude | {key_and_bytes(t)[0] for t in fixed}
            return _step(loss_fn, trained, key_and_bytes, exclude_fakes, ON_SHAPES)
    except LossFnError:
        raise
    except Exception as error:  # noqa: BLE001 - any op fake tensors cannot run: go real
        reason = _why_not_on_shapes(error)
    how = (
        f"counted on a real forward and backward, because {reason}; no .grad was touched and no "
        "optimizer stepped, but the pass allocated what a real one does"
    )
    return _step(loss_fn, trained, key_and_bytes, exclude, how)


@contextlib.contextmanager
def _shapes_only(model: torch.nn.Module):
    """Fake mode, and the fake twins of the model's parameters and buffers it will use."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        real = [*model.parameters(), *model.buffers()]
        yield [mode.from_tensor(t) for t in real]


def _why_not_on_shapes(error: Exception) -> str:
    name = type(error).__name__
    if "DataDependent" in name or "DynamicOutputShape" in name:
        return "the forward reads values from tensors (.item(), nonzero, an if on a tensor)"
    first_line = (str(error).strip().splitlines() or [""])[0][:120]
    return f"the forward cannot run on shapes alone ({name}: {first_line})"


def _step(loss_fn, trained, key_and_bytes, exclude, how) -> CountedStep:
    saved: dict[object, tuple[torch.Tensor, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key, nbytes = key_and_bytes(t)
        if key not in exclude:
            saved.setdefault(key, (t, nbytes))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn()
    _check_loss(loss)
    gradients: list = [None] * len(trained)
    if trained:
        gradients = list(torch.autograd.grad(loss, trained, allow_unused=True))
    return CountedStep(saved, gradients, how)


def _check_loss(loss: object) -> None:
    if not isinstance(loss, torch.Tensor):
        hint = ""
        if isinstance(loss, (tuple, list)):
            hint = f" of {len(loss)} (return only the loss, e.g. lambda: fn()[0])"
        raise LossFnError(
            TypeError(
                "memory_budget's loss_fn must return the loss as one tensor, got "
                f"{type(loss).__name__}{hint}"
            )
        )
    if loss.numel() != 1:
        raise LossFnError(
            ValueError(
                "memory_budget's loss_fn must return a single-value loss, got shape "
                f"{tuple(loss.shape)} (reduce it, e.g. .mean(), before returning it)"
            )
        )
    if not loss.requires_grad:
        raise LossFnError(
            ValueError(
                "memory_budget's loss_fn returned a loss that does not require gradients: was "
                "it computed under torch.no_grad(), or does no parameter require grad?"
            )
        )
