"""Debugging habits, as functions: look at what you have before you reason about it.

The first habit: when something fails, print each tensor's shape, dtype and device before
anything else. Most errors in PyTorch code ("mat1 and mat2 shapes cannot be multiplied",
"expected all tensors to be on the same device", "expected scalar type Float but found Double")
are answered by those three facts, and ``describe`` prints them for several tensors at once,
aligned so that the one that differs stands out.

The habits of chapter 06, for any model a learner brings (nothing is moved to another device,
and the model is left as it was found: its mode, its hooks, its buffers, its gradients):

- ``shape_trace(model, *inputs)``: each layer's input and output shapes, in the order they ran,
  stopping at the layer that failed, with its error (shown, not raised).
- ``gradient_norms(model)``: after ``backward()``, each parameter's gradient norm, the ones that
  got none, and the total that ``clip_grad_norm_`` would measure.
- ``first_non_finite(model, *inputs)``: where the first nan or inf appears: in a parameter, in
  the data, or in the output of which layer.

Each returns a result that prints as an aligned table (``str``) and renders as HTML in a
notebook (``_repr_html_``), so ``show(result)`` or ending a cell with it both work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import math
import sys
from dataclasses import dataclass
from typing import Iterator

import torch

# --- shape, dtype, device -------------------------------------------------------------------


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


# --- shared: what a value holds, and one forward pass watched by hooks ---------------------

MODEL = "(model)"  # the name the model itself goes by; its submodules keep their dotted names
_MAX_ITEMS = 4  # a tuple or list with more elements shows the first few and a count
_MAX_DEPTH = 4  # nesting deeper than this is summarised, not walked


def _shape_text(value: object, depth: int = 0) -> str:
    """A value as its shapes: ``(8, 3, 32, 32)``; tuples, lists and dicts keep their brackets."""
    if isinstance(value, torch.Tensor):
        return str(tuple(value.shape))
    if depth >= _MAX_DEPTH and isinstance(value, (tuple, list, dict)):
        return _describe_other(value)
    if isinstance(value, dict):
        items = [f"{k}: {_shape_text(v, depth + 1)}" for k, v in list(value.items())[:_MAX_ITEMS]]
        more = [f"… {len(value)} items"] if len(value) > _MAX_ITEMS else []
        return "{" + ", ".join(items + more) + "}"
    if isinstance(value, (tuple, list)):
        shown = value if len(value) <= _MAX_ITEMS else value[: _MAX_ITEMS - 1]
        items = [_shape_text(v, depth + 1) for v in shown]
        if len(value) > _MAX_ITEMS:
            items.append(f"… {len(value)} items")
        if isinstance(value, list):
            return "[" + ", ".join(items) + "]"
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)  # a flag or a scale among the arguments reads best as itself
    return _describe_other(value)


def _arguments_text(args: tuple, kwargs: dict) -> str:
    """A call's arguments, without the brackets of the argument tuple: ``(8, 16), mask=(8,)``."""
    parts = [_shape_text(a) for a in args] + [f"{k}={_shape_text(v)}" for k, v in kwargs.items()]
    return ", ".join(parts) if parts else "(no arguments)"


def _labelled(value: object, label: str, depth: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor in ``value`` with where it sits: ``output``, ``output[0]``, ``output['x']``."""
    if isinstance(value, torch.Tensor):
        yield label, value
    elif depth < _MAX_DEPTH and isinstance(value, dict):
        for k, v in value.items():
            yield from _labelled(v, f"{label}[{k!r}]", depth + 1)
    elif depth < _MAX_DEPTH and isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from _labelled(v, f"{label}[{i}]", depth + 1)


def _arguments(args: tuple, kwargs: dict) -> list[tuple[str, torch.Tensor]]:
    found = [pair for i, a in enumerate(args) for pair in _labelled(a, f"input #{i}")]
    return found + [pair for k, v in kwargs.items() for pair in _labelled(v, f"argument {k}=")]


def _error_text(error: BaseException) -> str:
    """``Type: first line of the message``, the line a table has room for."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _error_rest(error: BaseException) -> list[str]:
    """The message's lines after the first, for below the table."""
    return [line for line in str(error).strip().splitlines()[1:] if line.strip()]


def _who(name: str, type_name: str) -> str:
    """``fc1 (Linear)``; the model itself as ``Net (the model)``."""
    return f"{type_name} (the model)" if name == MODEL else f"{name} ({type_name})"


@contextlib.contextmanager
def _buffers_kept(model: torch.nn.Module):
    """Put every buffer back as it was: a forward in train mode updates BatchNorm's statistics."""
    saved = [
        (module, name, buffer, buffer.detach().clone())
        for module in model.modules()
        for name, buffer in module._buffers.items()
        if buffer is not None
    ]
    try:
        yield
    finally:
        with torch.no_grad():
            for module, name, buffer, copy in saved:
                if module._buffers.get(name) is not buffer:
                    module._buffers[name] = buffer
                buffer.copy_(copy)


class _Call:
    """One module call in progress or done, while the hooks watch a forward pass."""

    def __init__(self, module, name, parent, index, call):
        self.module = module
        self.name = name
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.index = index  # position among all calls, in the order they started
        self.call = call  # 1 for a module's first call in this pass, 2 for its second...
        self.children = 0  # submodule calls that started inside this one
        self.last_child: _Call | None = None  # the last of them that returned
        self.returned = False
        self.raised: BaseException | None = None  # what its forward raised, if it did
        self.caught = False  # raised, and the model caught the exception itself
        self.facts: dict = {}  # what the helper using the tracer records

    @property
    def label(self) -> str:
        return self.name if self.call == 1 else f"{self.name} (call {self.call})"

    @property
    def type(self) -> str:
        return type(self.module).__name__


class _Tracer:
    """Hooks on every module of a model for one forward pass; always removed afterwards.

    A pre-hook opens a call and a forward hook closes it. The forward hook is registered with
    ``always_call=True``, so it also runs when the forward raises (then with no output, while
    the exception is being handled): the deepest call closed by the exception the whole pass
    raised is where it happened; a call closed by another exception raised one that the model
    caught itself.

    Modules reached through ``named_modules`` are watched (a shared module once, under its first
    name); a module kept in a plain list, or called as ``module.forward(x)``, is invisible, and
    its work shows up as part of the module that called it.
    """

    def __init__(self, model: torch.nn.Module):
        if not isinstance(model, torch.nn.Module):
            got = _describe_other(model)
            raise TypeError(f"a diagnose helper needs a torch.nn.Module, got {got}")
        self.model = model
        self.calls: list[_Call] = []
        self.open: list[_Call] = []
        self.error: Exception | None = None
        self._counts: dict[str, int] = {}

    def enter(self, call: _Call, args: tuple, kwargs: dict) -> None:
        """Override: called as a module's forward is about to run."""

    def exit(self, call: _Call, output: object) -> None:
        """Override: called as a module's forward has returned."""

    def run(self, args: tuple, kwargs: dict) -> None:
        handles = []
        try:
            for name, module in self.model.named_modules():
                name = name or MODEL
                handles.append(
                    module.register_forward_pre_hook(self._pre_hook(name), with_kwargs=True)
                )
                handles.append(module.register_forward_hook(self._post_hook, always_call=True))
            with torch.no_grad(), _buffers_kept(self.model):
                try:
                    self.model(*args, **kwargs)
                except Exception as error:  # shown in the result, not raised: a cell shows it
                    self.error = error
        finally:
            for handle in handles:
                handle.remove()
        self._finish()

    def _pre_hook(self, name: str):
        def hook(module, args, kwargs):
            parent = self.open[-1] if self.open else None
            self._counts[name] = self._counts.get(name, 0) + 1
            call = _Call(module, name, parent, len(self.calls), self._counts[name])
            if parent is not None:
                parent.children += 1
            self.calls.append(call)
            self.open.append(call)
            self.enter(call, args, kwargs)

        return hook

    def _post_hook(self, module, args, output):
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i].module is module:
                break
        else:  # not opened by us: cannot happen, but a hook must never break the model
            return
        call = self.open[i]
        del self.open[i:]
        # Called for an exception: no output, and the exception is the one being handled.
        raised = sys.exc_info()[1] if output is None else None
        if raised is not None:
            call.raised = raised
            return
        call.returned = True
        if call.parent is not None:
            call.parent.last_child = call
        self.exit(call, output)

    def _finish(self) -> None:
        """Tell the call where the pass failed from calls whose exception the model caught."""
        for call in self.calls:
            if call.raised is not None and call.raised is not self.error:
                call.caught = True

    @property
    def failed(self) -> _Call | None:
        """The innermost call that raised the exception the whole forward pass raised."""
        if self.error is None:
            return None
        raised = [c for c in self.calls if c.raised is self.error]
        if raised:  # the innermost is the deepest; an outer call only passed it on
            return max(raised, key=lambda c: c.depth)
        return self.open[-1] if self.open else None


# --- per-layer shape trace ------------------------------------------------------------------


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
        weights = list(call.module.parameters(recurse=False))
        call.facts.update(
            inputs=_arguments_text(args, kwargs),
            input_shapes=tuple(tuple(t.shape) for t in tensors),
            dtype=_kinds_cell(tensors, weights, "dtype"),
            device=_kinds_cell(tensors, weights, "device"),
        )

    def exit(self, call, output):
        call.facts.update(
            output=_shape_text(output),
            output_shapes=tuple(tuple(t.shape) for _, t in _labelled(output, "output")),
        )


def shape_trace(model: torch.nn.Module, *inputs: object, **kwargs: object) -> ShapeTrace:
    """Run ``model(*inputs, **kwargs)`` once and record each module call's input and output shapes.

    When the forward raises, the trace stops there, and its last row is the module that failed,
    with the shapes it was given and the error; nothing is raised, so a cell shows the table
    (``trace.raise_error()`` raises it again, ``trace.error`` is the exception). An error in
    code between layers (``torch.flatten``, ``torch.cat``... in a ``forward``) belongs to the
    module whose ``forward`` holds that code, after the layer that ran last.

    The pass runs under ``torch.no_grad()`` in whatever mode the model is in (``train()`` or
    ``eval()`` is left as it is); buffers such as BatchNorm's running statistics are put back
    afterwards, and the hooks are removed whatever happens. Nothing is moved to another device.
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
        inputs=f["inputs"],
        output=f.get("output") if c.returned else None,
        input_shapes=f["input_shapes"],
        output_shapes=f.get("output_shapes", ()) if c.returned else (),
        dtype=f["dtype"],
        device=f["device"],
        leaf=c.children == 0,
        error=_error_text(error) if c is failed and error is not None else None,
        caught=c.caught,
    )


# --- gradient norms -------------------------------------------------------------------------


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

    @property
    def note(self) -> str:
        """What a learner should notice about this gradient, or "" when nothing stands out."""
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


_GRAD_HEADER = ("parameter", "shape", "grad norm", "weight norm", "note")


@dataclass(frozen=True)
class GradientNorms:
    """Every parameter's gradient norm after ``backward()``, and their total."""

    model_type: str
    parameters: tuple[ParameterGradient, ...]
    total: float  # what clip_grad_norm_ measures: the L2 norm of all gradients together

    @property
    def without_grad(self) -> list[str]:
        return [p.name for p in self.parameters if p.grad_norm is None]

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
                "no grad" if p.grad_norm is None else _number(p.grad_norm),
                _number(p.weight_norm),
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


def _number(x: float) -> str:
    return f"{x:.3g}"


def _grad_values(g: torch.Tensor) -> torch.Tensor:
    """The values a gradient holds: a sparse one (``Embedding(sparse=True)``) keeps them apart."""
    return g.coalesce().values() if g.is_sparse else g


def gradient_norms(model: torch.nn.Module) -> GradientNorms:
    """Each parameter's gradient norm, read from ``.grad`` after ``loss.backward()``.

    Nothing is changed and nothing is computed anew: this reads what the last backward pass
    left. A parameter whose ``.grad`` is None is listed as such, which is a finding in itself:
    it is frozen, or the forward never used it (a layer defined but not called, or used through
    a detached tensor). ``total`` is the norm ``torch.nn.utils.clip_grad_norm_`` would measure
    (and clip to), over the parameters that have a gradient; a tied parameter counts once.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"gradient_norms needs a torch.nn.Module, got {_describe_other(model)}")
    found = []
    grads = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            g = p.grad
            weight_norm = float(torch.linalg.vector_norm(_grad_values(p)).item())
            if g is None:
                found.append(
                    ParameterGradient(name, tuple(p.shape), None, weight_norm, p.requires_grad)
                )
                continue
            grads.append(g)
            values = _grad_values(g)
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


def _total_norm(grads: list[torch.Tensor]) -> float:
    if not grads:
        return 0.0
    if hasattr(torch.nn.utils, "get_total_norm"):  # torch >= 2.6: what clip_grad_norm_ calls
        return float(torch.nn.utils.get_total_norm(grads, 2.0).item())
    norms = [torch.linalg.vector_norm(_grad_values(g)) for g in grads]
    device = norms[0].device
    return float(torch.linalg.vector_norm(torch.stack([n.to(device) for n in norms])).item())


# --- the first nan or inf -------------------------------------------------------------------


def _non_finite_facts(t: torch.Tensor) -> tuple[int, int, tuple[int, ...] | None] | None:
    """(nan count, inf count, index of the first one) when ``t`` holds a nan or an inf."""
    if t.is_meta or not (t.is_floating_point() or t.is_complex()):
        return None  # integers and booleans are always finite; a meta tensor has no values
    values = _grad_values(t)
    finite = torch.isfinite(values)
    if bool(finite.all()):
        return None
    nan = int(torch.isnan(values).sum().item())
    inf = int(torch.isinf(values).sum().item())
    first = None if t.is_sparse else tuple(int(i) for i in (~finite).nonzero()[0].tolist())
    return nan, inf, first


def _range_text(label: str, t: torch.Tensor) -> str:
    """``input #0 (8, 16) in [-2.31, 4.07]``: the range often says why a function gave nan."""
    text = f"{label} {tuple(t.shape)}"
    if t.is_meta or t.is_sparse or t.numel() == 0 or not t.is_floating_point():
        return text + f" {_dtype_name(t.dtype)}"
    return text + f" in [{_number(float(t.min().item()))}, {_number(float(t.max().item()))}]"


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
    inputs: tuple[str, ...] = ()  # the module's (finite) inputs and their ranges
    others: tuple[str, ...] = ()  # further parameters and buffers that are not finite either
    calls: int = 0  # module calls the forward pass ran
    error: Exception | None = None  # what the forward raised, if it did

    @property
    def found(self) -> bool:
        return self.where is not None

    def __bool__(self) -> bool:
        return self.found

    def _lines(self) -> list[str]:
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

    def enter(self, call, args, kwargs):
        if self.found is not None:
            return
        arguments = _arguments(args, kwargs)
        for label, t in arguments:
            facts = _non_finite_facts(t)
            if facts is None:
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
        call.facts["arguments"] = arguments  # alive during the call anyway; dropped on return

    def exit(self, call, output):
        arguments = call.facts.pop("arguments", [])
        if self.found is not None:
            return
        for label, t in _labelled(output, "output"):
            facts = _non_finite_facts(t)
            if facts is None:
                continue
            own = call.children > 0
            self.found = _found(
                "module", label, t, facts, call, own_code=own,
                context=_between(call, before=None) if own else None,
                inputs=tuple(_range_text(lab, a) for lab, a in arguments),
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
        where=where, tensor=label, shape=tuple(t.shape), nan=nan, inf=inf, first_index=first,
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
    were finite; when the code between layers made it (``torch.log(x)`` in a ``forward``), the
    module whose ``forward`` holds that code, and where in it. A value that is inf on purpose
    (a ``-inf`` attention mask) is reported too: judge it yourself.

    The pass runs under ``torch.no_grad()`` and leaves the model as it was (mode, hooks,
    buffers); an exception in the forward is kept in ``.error``, not raised.
    """
    tracer = _NonFiniteTracer(model)
    if any(t.is_meta for t in (*model.parameters(), *model.buffers())) or any(
        t.is_meta for _, t in _arguments(inputs, kwargs)
    ):
        raise ValueError("tensors on the meta device have shapes but no values: nothing to check")
    broken = []
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, t in named:
            facts = _non_finite_facts(t.detach())
            if facts is not None:
                broken.append((kind, name, t, facts))
    if broken:
        kind, name, t, facts = broken[0]
        return dataclasses.replace(
            _found(kind, name, t, facts), others=tuple(name for _, name, _, _ in broken[1:])
        )
    for label, t in _arguments(inputs, kwargs):
        facts = _non_finite_facts(t)
        if facts is not None:
            return _found("input", label, t, facts)
    tracer.run(inputs, kwargs)
    result = tracer.found or NonFinite(where=None)
    return dataclasses.replace(result, calls=len(tracer.calls), error=tracer.error)
