"""An answer that watches its own check: what a learner's code could see of a right answer.

A probe runs in the learner's kernel. A ``TorchFunctionMode`` the answer leaves on, a tracer,
a signal handler reading frames: each sees the tensors the probe computes after the answer
returns. So the probe must compute no right answer there (``Exercise(expect=...)`` computes it
on the judge's side). ``seen_right_answers`` checks that: it checks an exercise with a spy
answer that, on every call, runs the reference quietly, keeps what the right answer gives (the
result, and every tensor of its arguments the call changed: a model's parameters after a step),
then spoils it (so that copies the probe makes of the answer's own result are no right answer),
while a mode on for the whole check records every tensor the check computes outside the
answer's calls. It returns the right answers found among those.
"""

from __future__ import annotations

import copy

import torch
from torch.overrides import TorchFunctionMode


def tensors_in(value, depth: int = 0) -> list[torch.Tensor]:
    """The tensors a value holds: itself, a module's parameters and buffers, an optimizer's
    state, what a list, tuple or dict holds."""
    if depth > 4:
        return []
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, torch.nn.Module):
        return list(value.parameters()) + list(value.buffers())
    if isinstance(value, torch.optim.Optimizer):
        return [t for state in value.state.values() for t in tensors_in(state, depth + 1)]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item, depth + 1)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors_in(item, depth + 1)]
    return []


def _snapshot(tensors):
    with torch._C.DisableTorchFunction():
        return [t.detach().clone() if t.device.type != "meta" else None for t in tensors]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    with torch._C.DisableTorchFunction():
        return (a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
                and a.device.type != "meta" and bool(torch.equal(a, b)))


def _telling(tensor: torch.Tensor) -> bool:
    with torch._C.DisableTorchFunction():
        if tensor.numel() == 0:
            return False
        values = tensor.detach().to("cpu")
        if values.dtype == torch.bool:
            return False
        return not bool(((values == 0) | (values == 1)).all())


def _spoil(value):
    """The answer's result made wrong: a float tensor plus one, an integer one plus one, a bool
    one negated (in place where the reference changed a tensor in place)."""
    with torch._C.DisableTorchFunction(), torch.no_grad():
        if value.dtype == torch.bool:
            value.logical_not_()
        elif value.is_floating_point() or value.is_complex():
            value.add_(0.5)
        else:
            value.add_(1)


class _Watch(TorchFunctionMode):
    def __init__(self, spy):
        super().__init__()
        self.spy = spy

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if not self.spy.inside:
            name = getattr(func, "__name__", "")
            changed = args[:1] if name == "__setitem__" or name.startswith("__i") or (
                name.endswith("_") and not name.startswith("_")) else ()
            for tensor in tensors_in(result) + tensors_in(list(changed)):
                if tensor.device.type != "meta" and tensor.numel() > 0:
                    self.spy.seen.append(tensor.detach().clone())
        return result


class Spy:
    """The watching answer: call it as the answer; ``rights`` are what the right answer gave."""

    def __init__(self, reference):
        self.reference = reference
        self.inside = False
        self.seen: list[torch.Tensor] = []
        self.rights: list[torch.Tensor] = []
        self.numbers: list[float] = []

    def __call__(self, *args, **kwargs):
        before_tensors = tensors_in((args, kwargs))
        before = _snapshot(before_tensors)
        self.inside = True
        try:
            result = self.reference(*args, **kwargs)
        finally:
            self.inside = False
        changed = [t for t, old in zip(before_tensors, before) if old is not None and not _same(t, old)]
        returned = [t for t in tensors_in(result) if t.device.type != "meta"]
        if type(result) in (int, float):  # a number: the check may compute it as a tensor
            self.numbers.append(float(result))
            result = result + 1
        for tensor in returned + changed:
            right = _snapshot([tensor])[0]
            # a right answer equal to an input (x.to() of an x already right), or made only of
            # zeros and ones, shows nothing: the check may well compute such a tensor otherwise
            if _telling(right) and not any(old is not None and _same(right, old) for old in before):
                self.rights.append(right)
        fresh = {id(t) for t in returned} - {id(t) for t in before_tensors}
        for tensor in changed + [t for t in returned if id(t) in fresh]:
            _spoil(tensor)
        return result


def seen_right_answers(exercise) -> tuple[int, int]:
    """(right answers the check computed outside the answer's calls, right answers in all)."""
    spy = Spy(copy.copy(exercise.reference))
    with _Watch(spy):
        exercise.probe(spy)
    leaked = sum(1 for right in spy.rights if any(_same(seen, right) for seen in spy.seen))
    leaked += sum(1 for number in spy.numbers if _seen_number(number, spy.seen))
    return leaked, len(spy.rights) + len(spy.numbers)


def _seen_number(number: float, seen) -> bool:
    if number in (0.0, 1.0) or number != number:
        return False
    with torch._C.DisableTorchFunction():
        return any(tensor.numel() == 1 and not tensor.dtype.is_complex and tensor.dtype != torch.bool
                   and abs(float(tensor.reshape(())) - number) <= 1e-6 * max(1.0, abs(number)) for tensor in seen)
