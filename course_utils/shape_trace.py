"""``shape_trace(model, *inputs)``: each layer's input and output shapes, in the order they ran.

The trace stops at the layer that failed and shows its error (shown, not raised). The model is
left as it was found: its mode, its hooks, its buffers. The result prints as an aligned table
(``str``) and renders as HTML in a notebook (``_repr_html_``).
"""

from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass

import torch

from course_utils.describe import _aligned, _dtype_name
from course_utils.forward_hooks import (
    _arguments,
    _arguments_text,
    _Call,
    _error_rest,
    _error_text,
    _labelled,
    _shape_text,
    _tensor_shape,
    _Tracer,
    _uninitialized,
    _who,
)

@dataclass(frozen=True)
class LayerCall:
    """One module call in a shape trace."""

    name: str  # dotted name, as in ``model.named_modules()``; the model itself is "(model)"
    type: str  # the module's class name
    depth: int  # 0 for the model, 1 for its children...
    call: int  # 1, or 2, 3... when the same module ran again (a shared layer)
    inputs: str  # the arguments as shapes: "(8, 400)", "(8, 16), mask=(8,)"
    output: str | None  # the result as shapes; None when it did not return
    input_shapes: tuple[tuple[int, ...], ...]  # every tensor among the arguments, in order
    output_shapes: tuple[tuple[int, ...], ...]  # every tensor in the result, in order
    dtype: str  # the arguments' dtypes; "float64 (weights float32)" when they differ
    device: str  # the arguments' devices; "cuda:0 (weights cpu)" when they differ
    leaf: bool  # no watched submodule ran inside it: it did its work itself
    error: str | None = None  # "RuntimeError: ..." on the call where the forward failed
    caught: bool = False  # it raised, and the model caught that exception itself

    @property
    def label(self) -> str:
        return self.name if self.call == 1 else f"{self.name} (call {self.call})"


_TRACE_HEADER = ("#", "layer", "type", "dtype", "device", "input", "output")


@dataclass(frozen=True)
class ShapeTrace:
    """Each module call of one forward pass with its shapes; where it failed, if it did.

    ``calls`` holds every module call, containers included, in the order they started; the
    table shows the layers that did work themselves (``leaf``) and the one that failed. For the
    whole tree, show ``trace.with_containers()``.
    """

    model_type: str
    calls: tuple[LayerCall, ...]
    output: str | None  # the model's result as shapes; None when it failed
    error: Exception | None  # the exception the forward raised, kept with its traceback
    failed_at: str | None  # name of the module whose forward raised; None when it ran through
    failed_after: str | None  # the failing module's last submodule call that returned, if any
    show_containers: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def failed(self) -> LayerCall | None:
        """The row of the call that raised."""
        return next((c for c in self.calls if c.error is not None), None)

    @property
    def rows(self) -> list[LayerCall]:
        """The calls the table shows."""
        if self.show_containers:
            return list(self.calls)
        failed = self.failed
        done = [c for c in self.calls if c.leaf and c is not failed]
        return done + ([failed] if failed is not None else [])

    def with_containers(self) -> ShapeTrace:
        """The same trace, showing every module call as a tree (containers indented above)."""
        return dataclasses.replace(self, show_containers=True)

    def raise_error(self) -> None:
        """Raise the forward's exception again, with its traceback; nothing if it ran through."""
        if self.error is not None:
            raise self.error

    def _table(self) -> tuple[list[str], list[list[str]], list[str]]:
        rows = self.rows
        cells = []
        for i, c in enumerate(rows, 1):
            indent = "  " * c.depth if self.show_containers else ""
            cells.append(
                [str(i), indent + c.label, c.type, c.dtype, c.device, c.inputs, _output_cell(c)]
            )
        keep = [0, 1, 2, 5, 6]
        footer = []
        constant = []
        for column in (3, 4):
            values = {row[column] for row in cells} - {"-"}
            if len(values) > 1 or any("weights" in v for v in values):
                keep.append(column)
            elif values:
                constant.append(values.pop())
        keep.sort()
        header = [_TRACE_HEADER[k] for k in keep]
        cells = [[row[k] for k in keep] for row in cells]
        footer.extend(self._summary())
        if constant:
            footer.append("tensors: " + " on ".join(constant))
        return header, cells, footer

    def _summary(self) -> list[str]:
        if self.error is None:
            return [f"{self.model_type} ran through: output {self.output}"]
        failed = self.failed
        if failed is None:
            return [f"the forward raised before any module ran: {_error_text(self.error)}"]
        where = _who(failed.label, failed.type)
        if self.failed_after is not None:
            line = (
                f"failed in the forward code of {where} itself (between layers, after "
                f"{self.failed_after} returned)"
            )
        else:
            line = f"failed at {where}"
        return [f"{line}: {_error_text(self.error)}"] + [
            "  " + rest for rest in _error_rest(self.error)
        ]

    def __str__(self) -> str:
        header, cells, footer = self._table()
        return "\n".join([_aligned([header, *cells], right=frozenset({0}))] + footer)

    def _repr_html_(self) -> str:
        header, cells, footer = self._table()
        failed_row = self.rows.index(self.failed) if self.failed is not None else None
        head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in header)
        body = []
        for i, row in enumerate(cells):
            style = " style='background:#fdd'" if i == failed_row else ""
            tds = "".join(
                f"<td style='text-align:left;white-space:pre'>{html.escape(cell)}</td>"
                for cell in row
            )
            body.append(f"<tr{style}>{tds}</tr>")
        notes = "<br>".join(html.escape(line) for line in footer)
        return (
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            f"<p style='font-family:monospace'>{notes}</p>"
        )


def _output_cell(c: LayerCall) -> str:
    if c.error is not None:
        return f"✗ {c.error}"
    if c.caught:
        return "✗ raised (the model caught the exception)"
    if c.output is None:
        return "(did not return)"
    return c.output


def _kinds_cell(arguments: list[torch.Tensor], weights: list[torch.Tensor], what: str) -> str:
    """The arguments' dtypes (or devices), and the weights' when they differ from them."""

    def names(tensors):
        if what == "dtype":
            found = (_dtype_name(t.dtype) for t in tensors)
        else:
            found = (str(t.device) for t in tensors)
        return list(dict.fromkeys(found))

    given, own = names(arguments), names(weights)
    if not given:
        return "-"
    cell = "/".join(given)
    if what == "dtype":
        # Integer indices into float weights (an Embedding) are no mismatch; float32 into a
        # float64 layer is one.
        floating = {t for t in given if t.startswith(("float", "bfloat", "complex"))}
        differ = bool(floating) and any(w not in floating for w in own)
    else:
        differ = any(w not in given for w in own)
    return f"{cell} (weights {'/'.join(own)})" if differ else cell


class _ShapeTracer(_Tracer):
    def enter(self, call, args, kwargs):
        tensors = [t for _, t in _arguments(args, kwargs)]
        weights = [w for w in call.module.parameters(recurse=False) if not _uninitialized(w)]
        call.facts.update(
            inputs=_arguments_text(args, kwargs),
            input_shapes=tuple(_tensor_shape(t) for t in tensors),
            dtype=_kinds_cell(tensors, weights, "dtype"),
            device=_kinds_cell(tensors, weights, "device"),
        )

    def exit(self, call, output):
        call.facts.update(
            output=_shape_text(output),
            output_shapes=tuple(_tensor_shape(t) for _, t in _labelled(output, "output")),
        )


def shape_trace(model: torch.nn.Module, *inputs: object, **kwargs: object) -> ShapeTrace:
    """Run ``model(*inputs, **kwargs)`` once and record each module call's input and output shapes.

    When the forward raises, the trace stops there, and its last row is the module that failed,
    with the shapes it was given and the error; nothing is raised, so a cell shows the table
    (``trace.raise_error()`` raises it again, ``trace.error`` is the exception). An error in
    code between layers (``torch.flatten``, ``torch.cat``... in a ``forward``) belongs to the
    module whose ``forward`` holds that code, after the layer that ran last.

    The pass runs in whatever mode the model is in (``train()`` or ``eval()``) and the grad
    mode the caller is in (under ``torch.no_grad()``, ``nn.TransformerEncoder`` in eval mode
    takes its fast path, and its layers then get nested tensors, shown as ``nested [...]``;
    torch runs a ``TransformerEncoderLayer`` with hooks on it layer by layer, not as one fused
    kernel, so its submodules show up: the same computation).
    Afterwards the modes, the random generators (dropout draws numbers) and buffers such as
    BatchNorm's running statistics are put back, and the hooks are removed whatever happens.
    A lazy module (``nn.LazyLinear``) gets its weights in the pass, as it would in the first
    forward. Nothing is moved to another device.
    """
    tracer = _ShapeTracer(model)
    tracer.run(inputs, kwargs)
    failed = tracer.failed
    rows = tuple(_layer_call(c, failed, tracer.error) for c in tracer.calls)
    root = tracer.calls[0] if tracer.calls else None
    failed_after = None
    if failed is not None and failed.last_child is not None:
        failed_after = failed.last_child.label
    return ShapeTrace(
        model_type=type(model).__name__,
        calls=rows,
        output=root.facts.get("output") if root is not None and root.returned else None,
        error=tracer.error,
        failed_at=failed.name if failed is not None else None,
        failed_after=failed_after,
    )


def _layer_call(c: _Call, failed: _Call | None, error: Exception | None) -> LayerCall:
    f = c.facts
    return LayerCall(
        name=c.name,
        type=c.type,
        depth=c.depth,
        call=c.call,
        inputs=f.get("inputs", "?"),
        output=f.get("output", "?") if c.returned else None,
        input_shapes=f.get("input_shapes", ()),
        output_shapes=f.get("output_shapes", ()) if c.returned else (),
        dtype=f.get("dtype", "-"),
        device=f.get("device", "-"),
        leaf=c.children == 0,
        error=_error_text(error) if c is failed and error is not None else None,
        caught=c.caught,
    )
