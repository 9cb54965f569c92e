"""Look at what you have before you reason about it: shape, dtype and device of tensors.

When something fails, print each tensor's shape, dtype and device before anything else. Most
errors in PyTorch code ("mat1 and mat2 shapes cannot be multiplied", "expected all tensors to
be on the same device", "expected scalar type Float but found Double") are answered by those
three facts, and ``describe`` prints them for several tensors at once, aligned so that the one
that differs stands out. ``tensor_summary`` gives the same facts as a dict.

The small formatting helpers here (aligned columns, a non-tensor in a learner's words) are
shared by the other chapter-06 tools: ``shape_trace``, ``grad_norms`` and ``nonfinite``.
"""

from __future__ import annotations

import torch

def tensor_summary(t: torch.Tensor) -> dict:
    """The facts ``describe`` prints, as values that code and tests can compare."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"tensor_summary needs a torch.Tensor, got {_describe_other(t)}")
    return {
        "shape": tuple(t.shape),
        "dtype": _dtype_name(t.dtype),
        "device": str(t.device),
        "contiguous": _is_contiguous(t),
        "requires_grad": t.requires_grad,
        "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None,
        "numel": t.numel(),
        "bytes": t.numel() * t.element_size(),
    }


def describe(*tensors: object, **named_tensors: object) -> None:
    """Print one aligned line per tensor: name, shape, dtype, device, layout, autograd state.

    Positional arguments are named ``#0``, ``#1``…; a single one gets no name at all. Anything
    that is not a tensor gets a line saying what it is, because a list or a NumPy array where a
    tensor was expected is itself a common bug.
    """
    items = [(f"#{i}", value) for i, value in enumerate(tensors)] + list(named_tensors.items())
    named = len(items) > 1 or bool(named_tensors)
    rows = [([name] if named else []) + _columns(value) for name, value in items]
    print(_aligned(rows))


def _columns(value: object) -> list[str]:
    """One line's cells after the name; a non-tensor is a single cell."""
    if not isinstance(value, torch.Tensor):
        return [_describe_other(value)]
    cells = [f"shape {tuple(value.shape)}", _dtype_name(value.dtype), str(value.device)]
    cells.append(_layout(value))
    if value.requires_grad:
        cells.append("requires_grad")
    if value.grad_fn is not None:
        cells.append(f"grad_fn={type(value.grad_fn).__name__}")
    return cells


def _aligned(rows: list[list[str]], right: frozenset[int] = frozenset()) -> str:
    """Pad each column to its widest cell, so equal facts line up under each other.

    A row's last cell needs no padding and sets no width, so one long non-tensor line does not
    push the tensor columns apart. Columns in ``right`` (numbers) are aligned to the right.
    """
    widths: dict[int, int] = {}
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths.get(i, 0), len(cell))

    def pad(i: int, cell: str) -> str:
        width = widths.get(i, 0)
        return cell.rjust(width) if i in right else cell.ljust(width)

    lines = ("  ".join(pad(i, cell) for i, cell in enumerate(row)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _is_contiguous(t: torch.Tensor) -> bool:
    """Sparse and other non-strided tensors have no notion of contiguity; call them not."""
    return t.layout == torch.strided and t.is_contiguous()


def _layout(t: torch.Tensor) -> str:
    if t.layout != torch.strided:
        return str(t.layout).removeprefix("torch.")
    return "contiguous" if t.is_contiguous() else "NOT contiguous"


def _describe_other(value: object) -> str:
    """What a non-tensor is, in the words a learner would use: ``list of 3``, ``float 1.5``."""
    kind = type(value)
    if value is None:
        return "None"
    if hasattr(value, "shape") and hasattr(value, "dtype"):  # NumPy, JAX, CuPy arrays
        return f"{kind.__module__}.{kind.__name__} {tuple(value.shape)} {value.dtype}"
    if isinstance(value, (bool, int, float, complex)):
        return f"{kind.__name__} {value!r}"
    if isinstance(value, str):
        text = value if len(value) <= 30 else value[:27] + "..."
        return f"str {text!r}"
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        elements = value.values() if isinstance(value, dict) else value
        if value and all(isinstance(v, torch.Tensor) for v in elements):
            return f"{kind.__name__} of {len(value)} tensor{'s' if len(value) > 1 else ''}"
        return f"{kind.__name__} of {len(value)}"
    return f"{kind.__module__}.{kind.__name__}" if kind.__module__ != "builtins" else kind.__name__



def _number(x: float) -> str:
    return f"{x:.3g}"


def _grad_values(g: torch.Tensor) -> torch.Tensor:
    """The values a tensor holds: a sparse one (``Embedding(sparse=True)``) keeps them apart."""
    return g.coalesce().values() if g.is_sparse else g
