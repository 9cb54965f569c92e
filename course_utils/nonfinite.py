"""``first_non_finite(model, *inputs)``: where the first nan or inf of a forward pass appears.

In a parameter or buffer, in the input data, or in the output of which module (or in the code
between its layers). The pass runs in the caller's grad mode and leaves the model, the grad
mode and the random generators as they were. ``-inf`` in an additive attention mask is there
by design and is passed over (and listed). The result prints as plain lines and renders as
HTML in a notebook; it is falsy when all is finite.
"""

from __future__ import annotations

import dataclasses
import html
import math
from dataclasses import dataclass

import torch

from course_utils.describe import _dtype_name, _grad_values, _number
from course_utils.forward_hooks import (
    _arguments,
    _Call,
    _error_text,
    _labelled,
    _tensor_shape,
    _Tracer,
    _uninitialized,
    _who,
)

# Modules that take -inf on purpose: softmax turns it into a probability of 0.
_TAKES_MINUS_INF = (torch.nn.Softmax, torch.nn.LogSoftmax)

def _values(t: torch.Tensor) -> torch.Tensor:
    """The values a tensor holds, flat for a nested one (its components differ in shape)."""
    if t.is_nested:
        parts = [c.reshape(-1) for c in t.unbind()]
        return torch.cat(parts) if parts else t.new_zeros(0)
    return _grad_values(t)


def _non_finite_facts(t: torch.Tensor) -> tuple[int, int, tuple[int, ...] | None] | None:
    """(nan count, inf count, index of the first one) when ``t`` holds a nan or an inf."""
    if _uninitialized(t) or t.is_meta or not (t.is_floating_point() or t.is_complex()):
        return None  # integers and booleans are always finite; a meta tensor has no values
    values = _values(t.detach())
    finite = torch.isfinite(values)
    if bool(finite.all()):
        return None
    nan = int(torch.isnan(values).sum().item())
    inf = int(torch.isinf(values).sum().item())
    first = None
    if t.is_nested:
        for i, c in enumerate(t.detach().unbind()):
            bad = (~torch.isfinite(c)).nonzero()
            if len(bad):
                first = (i, *(int(j) for j in bad[0].tolist()))
                break
    elif not t.is_sparse:
        first = tuple(int(i) for i in (~finite).nonzero()[0].tolist())
    return nan, inf, first


def _mask_by_design(label: str, t: torch.Tensor, module: torch.nn.Module | None = None) -> bool:
    """An additive mask's -inf is there on purpose: nothing to report.

    A float tensor with -inf but no nan and no +inf that is an argument named like a mask
    (``src_key_padding_mask``, ``attn_mask``) or given to ``nn.MultiheadAttention`` after its
    query, key and value, holds only 0 and -inf (``generate_square_subsequent_mask``), or goes
    into a softmax.
    """
    if t.is_sparse or not t.is_floating_point():
        return False
    values = _values(t.detach())
    if bool(torch.isnan(values).any()) or bool((values == float("inf")).any()):
        return False
    name = label.rsplit(" ", 1)[-1].rsplit(".", 1)[-1].lower()
    if "mask" in name or isinstance(module, _TAKES_MINUS_INF):
        return True
    if isinstance(module, torch.nn.MultiheadAttention) and label not in (
        "input #0", "input #1", "input #2"
    ):
        return True
    return bool(((values == 0) | (values == float("-inf"))).all())


def _range_text(label: str, t: torch.Tensor) -> str:
    """``input #0 (8, 16) in [-2.31, 4.07]``: the range often says why a function gave nan."""
    text = f"{label} {_tensor_shape(t)}"
    if t.is_meta or t.is_sparse or not t.is_floating_point():
        return text + f" {_dtype_name(t.dtype)}"
    values = _values(t.detach())
    if values.numel() == 0:
        return text + f" {_dtype_name(t.dtype)}"
    low, high = float(values.min().item()), float(values.max().item())
    return text + f" in [{_number(low)}, {_number(high)}]"


@dataclass(frozen=True)
class NonFinite:
    """Where the first nan or inf is: in a parameter, in the data, or made by a module.

    ``where`` is "parameter", "buffer", "input", "module", or None when everything was finite
    (then the result is falsy: ``if first_non_finite(model, x): ...``).
    """

    where: str | None
    tensor: str | None = None  # "output", "output[0]", "input #0", a parameter's name...
    shape: tuple[int, ...] | None = None
    nan: int = 0
    inf: int = 0
    first_index: tuple[int, ...] | None = None
    module: str | None = None  # the module whose code made it ("(model)" for the model)
    module_type: str | None = None
    own_code: bool = False  # made by the module's own forward code, not by one of its layers
    context: str | None = None  # where in that code: "after fc1 returned"
    inputs: tuple[str, ...] = ()  # the module's (finite) inputs and their ranges, as it started
    masks: tuple[str, ...] = ()  # tensors whose -inf was taken as an attention mask's, on purpose
    others: tuple[str, ...] = ()  # further parameters and buffers that are not finite either
    calls: int = 0  # module calls the forward pass ran
    error: Exception | None = None  # what the forward raised, if it did

    @property
    def found(self) -> bool:
        return self.where is not None

    def __bool__(self) -> bool:
        return self.found

    def _lines(self) -> list[str]:
        lines = self._main_lines()
        if self.masks:
            shown = ", ".join(self.masks[:3]) + (f", … {len(self.masks)} in all" if len(self.masks) > 3 else "")
            lines.append(f"-inf taken as a mask's, on purpose: {shown}")
        return lines

    def _main_lines(self) -> list[str]:
        error = [f"the forward then raised {_error_text(self.error)}"] if self.error else []
        if not self.found:
            if self.error is not None:
                return [
                    f"no nan or inf before the forward raised {_error_text(self.error)}",
                    "shape_trace(model, ...) shows where it failed",
                ]
            return [
                "all finite: the parameters, buffers, inputs and the outputs of "
                f"{self.calls} module calls"
            ]
        count = ", ".join(
            [f"{n} {kind}" for n, kind in ((self.nan, "nan"), (self.inf, "inf")) if n]
        )
        numel = math.prod(self.shape) if self.shape is not None else 0
        facts = f"{self.tensor} {self.shape}: {count} of {numel} values"
        if self.first_index is not None:
            facts += f", the first at index {self.first_index}"
        if self.where in ("parameter", "buffer"):
            lines = [
                f"a {self.where} is not finite before anything runs: {facts}",
                "the weights are broken already (often by a step taken with a nan or inf loss, "
                "or too high a learning rate): reload or re-initialise them",
            ]
            if self.others:
                lines.append("not finite either: " + ", ".join(self.others))
            return lines
        if self.where == "input":
            return [
                f"the input data is not finite: {facts}",
                "the model is not to blame: look at the data (dataset, transforms, scaling)",
            ]
        where = _who(self.module, self.module_type)
        if self.own_code:
            headline = f"first nan/inf made by the forward code of {where} itself, {self.context}"
        else:
            headline = f"first nan/inf made by {where}"
        lines = [headline, facts]
        if self.inputs:
            lines.append("its inputs were finite: " + "; ".join(self.inputs))
        return lines + error

    def __str__(self) -> str:
        return "\n".join(self._lines())

    def _repr_html_(self) -> str:
        colour = "#c00" if self.found else "#070"
        first, *rest = self._lines()
        return (
            f"<div><b style='color:{colour}'>{html.escape(first)}</b>"
            + "".join(f"<br>{html.escape(line)}" for line in rest)
            + "</div>"
        )


class _NonFiniteTracer(_Tracer):
    """Checks each module's inputs as it starts and its outputs as it returns; keeps the first."""

    found: NonFinite | None = None

    def __init__(self, model):
        super().__init__(model)
        self.masks: list[str] = []
        self._mask_tensors: list[torch.Tensor] = []

    def _mask(self, label: str, t: torch.Tensor, module=None, where: str | None = None) -> bool:
        """Whether ``t`` is a mask's -inf (listed then, as ``label of where``)."""
        if not _mask_by_design(label, t, module):
            return False
        if not any(t is seen for seen in self._mask_tensors):  # a mask passed on is listed once
            self._mask_tensors.append(t)
            self.masks.append(f"{label} of {where}" if where else label)
        return True

    def enter(self, call, args, kwargs):
        if self.found is not None:
            return
        arguments = _arguments(args, kwargs)
        for label, t in arguments:
            facts = _non_finite_facts(t)
            if facts is None or self._mask(label, t, call.module, call.label):
                continue
            parent = call.parent
            if parent is None:  # the model's own inputs: checked before the pass, but be sure
                self.found = _found("input", label, t, facts)
            else:  # the finite outputs so far went in; the code between layers made it
                self.found = _found(
                    "module", f"{label} of {call.label}", t, facts, parent, own_code=True,
                    context=_between(parent, before=call.label),
                )
            return
        # The ranges as the module starts: its forward may change its inputs in place.
        call.facts["ranges"] = tuple(_range_text(lab, a) for lab, a in arguments)

    def exit(self, call, output):
        ranges = call.facts.pop("ranges", ())
        if self.found is not None:
            return
        for label, t in _labelled(output, "output"):
            facts = _non_finite_facts(t)
            if facts is None or self._mask(label, t, where=call.label):
                continue
            own = call.children > 0
            self.found = _found(
                "module", label, t, facts, call, own_code=own,
                context=_between(call, before=None) if own else None,
                inputs=ranges,
            )
            return


def _between(call: _Call, before: str | None) -> str:
    after = call.last_child.label if call.last_child is not None else None
    if after and before:
        return f"between {after} and {before}"
    if after:
        return f"after {after} returned"
    if before:
        return f"before {before}"
    return "before any of its layers ran"


def _found(where, label, t, facts, call=None, **more) -> NonFinite:
    nan, inf, first = facts
    return NonFinite(
        where=where, tensor=label, shape=_tensor_shape(t), nan=nan, inf=inf, first_index=first,
        module=call.label if call is not None else None,
        module_type=call.type if call is not None else None,
        **more,
    )


def first_non_finite(model: torch.nn.Module, *inputs: object, **kwargs: object) -> NonFinite:
    """Find the first nan or inf of a forward pass: which module made it, in which tensor.

    In order: the parameters and buffers (a nan weight left by a bad step poisons every
    output), then the inputs (nan in the data is no bug of the model's), then one forward pass
    ``model(*inputs, **kwargs)`` with each module's inputs and outputs checked in the order
    they run. The module reported is the first whose output holds a nan or inf while its inputs
    were finite (their ranges as the module started); when the code between layers made it
    (``torch.log(x)`` in a ``forward``), the module whose ``forward`` holds that code, and where
    in it. Tensors are looked for inside tuples, lists, dicts, namedtuples and dataclasses.

    ``-inf`` without nan or +inf in an additive attention mask is by design and passed over (the
    result lists where): in an argument or buffer named like a mask (``src_key_padding_mask``,
    ``attn_mask``), in a float tensor of only 0 and -inf (``generate_square_subsequent_mask``),
    and going into a softmax or ``nn.MultiheadAttention``.

    The pass runs in the caller's grad mode (``torch.no_grad()`` would change the path some
    models take) and leaves the model as it was (mode, hooks, buffers), and the grad mode and
    random generators too; a lazy module gets its weights in the pass, as in its first forward.
    An exception in the forward is kept in ``.error``, not raised.
    """
    tracer = _NonFiniteTracer(model)
    if any(
        t.is_meta for t in (*model.parameters(), *model.buffers()) if not _uninitialized(t)
    ) or any(t.is_meta for _, t in _arguments(inputs, kwargs)):
        raise ValueError("tensors on the meta device have shapes but no values: nothing to check")
    broken = []
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, t in named:
            facts = _non_finite_facts(t)
            if facts is None or (kind == "buffer" and tracer._mask(name, t)):
                continue
            broken.append((kind, name, t, facts))
    if broken:
        kind, name, t, facts = broken[0]
        return dataclasses.replace(
            _found(kind, name, t, facts), others=tuple(name for _, name, _, _ in broken[1:])
        )
    for label, t in _arguments(inputs, kwargs):
        facts = _non_finite_facts(t)
        if facts is not None and not tracer._mask(label, t):
            return _found("input", label, t, facts)
    tracer.run(inputs, kwargs)
    result = tracer.found or NonFinite(where=None)
    return dataclasses.replace(
        result, calls=len(tracer.calls), error=tracer.error, masks=tuple(tracer.masks)
    )
