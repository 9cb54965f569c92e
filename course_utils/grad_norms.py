"""``gradient_norms(model)``: after ``backward()``, each parameter's gradient norm.

It lists the parameters that got no gradient (frozen, or unused by the forward), the ones whose
gradient is zero or not finite, and the total that ``clip_grad_norm_`` would measure. It reads
``.grad`` only: nothing is computed anew and nothing is changed. The result prints as an aligned
table and renders as HTML in a notebook; ``.plot()`` draws the norms on a log scale.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import torch

from course_utils.describe import _aligned, _describe_other, _grad_values, _number

@dataclass(frozen=True)
class ParameterGradient:
    """One parameter's gradient, as ``gradient_norms`` found it."""

    name: str
    shape: tuple[int, ...]
    grad_norm: float | None  # L2 norm of ``.grad``; None when ``.grad`` is None
    weight_norm: float  # L2 norm of the parameter itself, for scale
    requires_grad: bool
    nan: int = 0  # values of ``.grad`` that are nan
    inf: int = 0  # values of ``.grad`` that are ±inf
    # True for a ``meta`` parameter or gradient: shapes without values, so no norm can be known
    # (grad_norm is then None and weight_norm nan, and ``has_grad`` says whether .grad exists).
    meta: bool = False
    has_grad: bool | None = None  # whether .grad exists; None: read it from grad_norm

    @property
    def gradient_exists(self) -> bool:
        return self.has_grad if self.has_grad is not None else self.grad_norm is not None

    @property
    def note(self) -> str:
        """What a learner should notice about this gradient, or "" when nothing stands out."""
        if self.meta:
            return UNKNOWN_ON_META
        if self.grad_norm is None:
            if not self.requires_grad:
                return "frozen (requires_grad=False)"
            return "no grad: not used in the forward, or backward() not called yet"
        if self.nan or self.inf:
            found = [f"{n} {kind}" for n, kind in ((self.nan, "nan"), (self.inf, "inf")) if n]
            return "NOT FINITE: " + ", ".join(found)
        if self.grad_norm == 0:
            return "all zero: the loss does not depend on it (dead unit? detached?)"
        return ""


UNKNOWN_ON_META = "unknown (meta tensors have no values)"

_GRAD_HEADER = ("parameter", "shape", "grad norm", "weight norm", "note")


@dataclass(frozen=True)
class GradientNorms:
    """Every parameter's gradient norm after ``backward()``, and their total."""

    model_type: str
    parameters: tuple[ParameterGradient, ...]
    total: float  # what clip_grad_norm_ measures: the L2 norm of all gradients; nan on meta

    @property
    def without_grad(self) -> list[str]:
        return [p.name for p in self.parameters if not p.gradient_exists]

    @property
    def unknown(self) -> list[str]:
        """Parameters on the ``meta`` device: their norms cannot be known."""
        return [p.name for p in self.parameters if p.meta]

    @property
    def not_finite(self) -> list[str]:
        return [p.name for p in self.parameters if p.nan or p.inf]

    @property
    def zero(self) -> list[str]:
        return [p.name for p in self.parameters if p.grad_norm == 0]

    def __getitem__(self, name: str) -> ParameterGradient:
        for p in self.parameters:
            if p.name == name:
                return p
        names = [p.name for p in self.parameters]
        raise KeyError(f"no parameter named {name!r}; there are: {names}")

    def _rows(self) -> list[list[str]]:
        return [
            [
                p.name,
                str(p.shape),
                "unknown" if p.meta and p.gradient_exists
                else "no grad" if p.grad_norm is None
                else _number(p.grad_norm),
                "unknown" if p.meta else _number(p.weight_norm),
                p.note,
            ]
            for p in self.parameters
        ]

    def _summary(self) -> str:
        with_grad = len(self.parameters) - len(self.without_grad)
        if not self.parameters:
            return f"{self.model_type} has no parameters"
        if with_grad == 0:
            return "no parameter has a gradient: call loss.backward() first"
        if self.unknown:
            return (
                f"total grad norm {UNKNOWN_ON_META} over {with_grad} of {len(self.parameters)} "
                f"parameters: {len(self.unknown)} are on the meta device"
            )
        return (
            f"total grad norm {_number(self.total)} over {with_grad} of {len(self.parameters)} "
            "parameters (what clip_grad_norm_ measures)"
        )

    def __str__(self) -> str:
        rows = [list(_GRAD_HEADER), *self._rows()]
        return _aligned(rows, right=frozenset({2, 3})) + "\n" + self._summary()

    def _repr_html_(self) -> str:
        head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in _GRAD_HEADER)
        body = []
        for p, row in zip(self.parameters, self._rows()):
            style = " style='background:#fdd'" if p.nan or p.inf else ""
            style = style or (" style='background:#ffd'" if p.note else "")
            tds = "".join(
                f"<td style='text-align:{'right' if i in (2, 3) else 'left'}'>"
                f"{html.escape(cell)}</td>"
                for i, cell in enumerate(row)
            )
            body.append(f"<tr{style}>{tds}</tr>")
        return (
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"<p>{html.escape(self._summary())}</p>"
        )

    def plot(self):
        """The norms as bars on a log scale; a missing, zero or non-finite one is named."""
        from course_utils.plots import plot_gradient_norms

        return plot_gradient_norms(
            [p.name for p in self.parameters],
            [p.grad_norm for p in self.parameters],
            title=f"gradient norms of {self.model_type}",
        )


def gradient_norms(model: torch.nn.Module) -> GradientNorms:
    """Each parameter's gradient norm, read from ``.grad`` after ``loss.backward()``.

    Nothing is changed and nothing is computed anew: this reads what the last backward pass
    left. A parameter whose ``.grad`` is None is listed as such, which is a finding in itself:
    it is frozen, or the forward never used it (a layer defined but not called, or used through
    a detached tensor). ``total`` is the norm ``torch.nn.utils.clip_grad_norm_`` would measure
    (and clip to), over the parameters that have a gradient; a tied parameter counts once.

    A sparse gradient (``nn.Embedding(..., sparse=True)``) is measured from its coalesced values
    (duplicates of one row summed first), which is the norm of the dense gradient it stands
    for. Parameters on the ``meta`` device have shapes but no values: their norms, and the
    total, are reported as unknown (``nan``), not computed.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"gradient_norms needs a torch.nn.Module, got {_describe_other(model)}")
    found = []
    grads = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            g = p.grad
            if p.is_meta or (g is not None and g.is_meta):
                found.append(
                    ParameterGradient(
                        name, tuple(p.shape), None, float("nan"), p.requires_grad,
                        meta=True, has_grad=g is not None,
                    )
                )
                if g is not None:
                    grads.append(g)
                continue
            weight_norm = float(torch.linalg.vector_norm(_grad_values(p)).item())
            if g is None:
                found.append(
                    ParameterGradient(name, tuple(p.shape), None, weight_norm, p.requires_grad)
                )
                continue
            grads.append(g)
            values = _values(g)
            nan = int(torch.isnan(values).sum().item()) if values.is_floating_point() else 0
            inf = int(torch.isinf(values).sum().item()) if values.is_floating_point() else 0
            norm = float(torch.linalg.vector_norm(values).item())
            found.append(
                ParameterGradient(
                    name, tuple(p.shape), norm, weight_norm, p.requires_grad, nan=nan, inf=inf
                )
            )
        total = _total_norm(grads)
    return GradientNorms(type(model).__name__, tuple(found), total)


def _values(g: torch.Tensor) -> torch.Tensor:
    """The values a gradient holds: a sparse COO one coalesced first (duplicate rows summed),
    a compressed sparse one (CSR, CSC, BSR, BSC) its stored values; a dense one itself."""
    if g.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
        return g.values()
    return _grad_values(g)


def _total_norm(grads: list[torch.Tensor]) -> float:
    if not grads:
        return 0.0
    if any(g.is_meta for g in grads):
        return float("nan")  # meta tensors have no values
    dense = all(g.layout == torch.strided for g in grads)
    # torch >= 2.6: get_total_norm is what clip_grad_norm_ calls
    if dense and hasattr(torch.nn.utils, "get_total_norm"):
        return float(torch.nn.utils.get_total_norm(grads, 2.0).item())
    # get_total_norm cannot read sparse tensors: each norm from its (coalesced) values.
    norms = [torch.linalg.vector_norm(_values(g)) for g in grads]
    device = norms[0].device
    return float(torch.linalg.vector_norm(torch.stack([n.to(device) for n in norms])).item())
