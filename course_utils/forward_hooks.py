"""One forward pass watched by hooks: the machinery ``shape_trace`` and ``nonfinite`` share.

``_Tracer`` puts a pre-hook and a forward hook on every module of a model, runs one forward
pass in the grad mode the caller is in (``torch.no_grad()`` would change what is observed:
``nn.TransformerEncoder`` takes its nested-tensor fast path only without autograd), and puts
back afterwards what the pass changed: buffers, train/eval modes, grad mode and the random
number generators (dropout, ``randn_like``). It records each module call (``_Call``) in the
order they started; subclasses say what to record on entry and exit. The helpers above it
turn a call's arguments and results into shapes and labelled tensors: nested tensors,
``PackedSequence``, dataclasses, namedtuples, dicts, tuples and lists included.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from typing import Iterator

import torch

from course_utils.describe import _describe_other
from course_utils.env import random_state_preserved

MODEL = "(model)"  # the name the model itself goes by; its submodules keep their dotted names
_MAX_ITEMS = 4  # a tuple or list with more elements shows the first few and a count
_MAX_DEPTH = 4  # nesting deeper than this is summarised, not walked


def _uninitialized(t: torch.Tensor) -> bool:
    """A lazy module's parameter or buffer before its first forward: it has no shape or values."""
    return isinstance(t, torch.nn.parameter.UninitializedTensorMixin)


def _nested_sizes(t: torch.Tensor) -> list[tuple[int, ...]] | None:
    """The shapes of a nested tensor's components, or None when they cannot be read."""
    try:
        return [tuple(c.shape) for c in t.unbind()]
    except Exception:
        return None


def _nested_text(t: torch.Tensor) -> str:
    """``nested [(5, 16), (3, 16)]``: a nested tensor's components, which differ in shape."""
    sizes = _nested_sizes(t)
    if sizes is None:
        return "nested tensor"
    shown = [str(s) for s in sizes[:_MAX_ITEMS]]
    if len(sizes) > _MAX_ITEMS:
        shown[-1:] = [f"… {len(sizes)} tensors"]
    return "nested [" + ", ".join(shown) + "]"


def _tensor_shape(t: torch.Tensor) -> tuple[int, ...]:
    """A tensor's shape; for a nested tensor, -1 where its components differ."""
    if not t.is_nested:
        return tuple(t.shape)
    sizes = _nested_sizes(t)
    if not sizes:
        return ()
    dims = zip(*sizes) if len({len(s) for s in sizes}) == 1 else []
    return (len(sizes), *(d[0] if len(set(d)) == 1 else -1 for d in dims))


def _is_packed(value: object) -> bool:
    return isinstance(value, torch.nn.utils.rnn.PackedSequence)


def _is_dataclass(value: object) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _shape_text(value: object, depth: int = 0) -> str:
    """A value as its shapes: ``(8, 3, 32, 32)``; tuples, lists and dicts keep their brackets."""
    if isinstance(value, torch.Tensor):
        if _uninitialized(value):
            return "uninitialized"
        return _nested_text(value) if value.is_nested else str(tuple(value.shape))
    if _is_packed(value):
        sizes = value.batch_sizes.tolist()
        shown = ", ".join(map(str, sizes[:8])) + (f", … {len(sizes)} steps" if len(sizes) > 8 else "")
        return f"PackedSequence(data={_shape_text(value.data)}, batch_sizes=[{shown}])"
    nested = isinstance(value, (tuple, list, dict)) or _is_dataclass(value)
    if depth >= _MAX_DEPTH and nested:
        return _describe_other(value)
    if isinstance(value, dict):
        items = [f"{k}: {_shape_text(v, depth + 1)}" for k, v in list(value.items())[:_MAX_ITEMS]]
        more = [f"… {len(value)} items"] if len(value) > _MAX_ITEMS else []
        return "{" + ", ".join(items + more) + "}"
    if _is_dataclass(value) or (isinstance(value, tuple) and hasattr(value, "_fields")):
        names = (
            [f.name for f in dataclasses.fields(value)]
            if _is_dataclass(value) else list(value._fields)
        )
        items = [f"{n}={_shape_text(getattr(value, n), depth + 1)}" for n in names[:_MAX_ITEMS]]
        more = [f"… {len(names)} fields"] if len(names) > _MAX_ITEMS else []
        return f"{type(value).__name__}(" + ", ".join(items + more) + ")"
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
    """Every tensor in ``value`` with where it sits: ``output``, ``output[0]``, ``output['x']``.

    A dataclass's or namedtuple's fields go by name (``output.logits``); a ``PackedSequence``
    by its data (``output.data``), its batch sizes being bookkeeping, not values.
    """
    if isinstance(value, torch.Tensor):
        if not _uninitialized(value):
            yield label, value
    elif _is_packed(value):
        yield f"{label}.data", value.data
    elif depth >= _MAX_DEPTH:
        return
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _labelled(v, f"{label}[{k!r}]", depth + 1)
    elif _is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from _labelled(getattr(value, f.name, None), f"{label}.{f.name}", depth + 1)
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        for name in value._fields:
            yield from _labelled(getattr(value, name), f"{label}.{name}", depth + 1)
    elif isinstance(value, (tuple, list)):
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
def buffers_kept(model: torch.nn.Module):
    """Put every buffer back as it was: a forward in train mode updates BatchNorm's statistics."""
    saved = [
        (module, name, buffer, buffer.detach().clone())
        for module in model.modules()
        for name, buffer in module._buffers.items()
        if buffer is not None and not _uninitialized(buffer)
    ]
    # A lazy module's buffers (LazyBatchNorm's statistics) get their first values in the pass;
    # statistics are then started afresh, as the first real forward would find them.
    lazy = [
        module
        for module in model.modules()
        if any(b is not None and _uninitialized(b) for b in module._buffers.values())
    ]
    try:
        yield
    finally:
        with torch.no_grad():
            for module, name, buffer, copy in saved:
                if module._buffers.get(name) is not buffer:
                    module._buffers[name] = buffer
                buffer.copy_(copy)
            for module in lazy:
                reset = getattr(module, "reset_running_stats", None)
                if callable(reset) and not any(
                    b is not None and _uninitialized(b) for b in module._buffers.values()
                ):
                    reset()


@contextlib.contextmanager
def _state_kept(model: torch.nn.Module):
    """Put back the modes (train/eval, grad) and random generators a forward may change."""
    modes = [(module, module.training) for module in model.modules()]
    grad = torch.is_grad_enabled()
    try:
        with random_state_preserved():
            yield
    finally:
        torch.set_grad_enabled(grad)
        for module, training in modes:
            module.training = training


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
            # No torch.no_grad(): it would send nn.TransformerEncoder down its fast path.
            with _state_kept(self.model), buffers_kept(self.model):
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
            self._watch(self.enter, call, args, kwargs)

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
        self._watch(self.exit, call, output)

    @staticmethod
    def _watch(record, call: _Call, *args) -> None:
        """Record what a hook sees, off the autograd graph; a tool's failure never breaks the model."""
        try:
            with torch.no_grad():
                record(call, *args)
        except Exception as error:  # noqa: BLE001 - shown as the tool's own, not the model's
            call.facts.setdefault("hook_error", error)

    def _finish(self) -> None:
        """Tell the call where the pass failed from calls whose exception the model caught."""
        for call in self.calls:
            if call.raised is not None and call.raised is not self.error:
                call.caught = True
        failed = [c for c in self.calls if "hook_error" in c.facts]
        if failed:  # the tool's own failure: said, not hidden, and not blamed on the model
            first = failed[0]
            warnings.warn(
                f"could not record {len(failed)} module call(s), the first "
                f"{_who(first.label, first.type)}: {_error_text(first.facts['hook_error'])}",
                RuntimeWarning,
                stacklevel=3,
            )

    @property
    def failed(self) -> _Call | None:
        """The innermost call that raised the exception the whole forward pass raised."""
        if self.error is None:
            return None
        raised = [c for c in self.calls if c.raised is self.error]
        if raised:  # the innermost is the deepest; an outer call only passed it on
            return max(raised, key=lambda c: c.depth)
        return self.open[-1] if self.open else None
