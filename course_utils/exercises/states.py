"""The states an answer meets besides its inputs, and what it leaves changed: one catalogue.

A function that takes a module passes on the fresh model its check built and fails on the one a
learner holds: in eval mode, with a frozen layer, with a ``.grad`` left from the last step, with
grad mode off, called a second time. So the states are listed once, here, and a check that takes
a module runs the answer (and, on the judge's side, the reference) on each state its task allows,
then compares what each left behind (``snapshot`` and ``differences``): the mode of every
submodule, which parameters require grad, their values and ``.grad``, the buffers, and the
session's settings (random state, default dtype, grad mode).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

LARGE_GRAD = 1e8  # an old .grad that a subtraction or an addition cannot hide


@dataclass(frozen=True)
class ModuleState:
    """A state a module may be in when the answer gets it: ``put(module)`` puts it there and
    returns the context the call runs in (grad mode off, or nothing)."""

    on: str
    put: Callable[[nn.Module], contextlib.AbstractContextManager]


def _nothing(module):
    return contextlib.nullcontext()


def _eval(module):
    module.eval()
    return contextlib.nullcontext()


def _freeze_first(module):
    next(iter(module.parameters())).requires_grad_(False)
    return contextlib.nullcontext()


def _freeze_all(module):
    module.requires_grad_(False)
    return contextlib.nullcontext()


def _grads(fill: float | None):
    def put(module):
        for parameter in module.parameters():
            parameter.grad = None if fill is None else torch.full_like(parameter, fill)
        return contextlib.nullcontext()

    return put


def _no_grad(module):
    return torch.no_grad()


# Every state, by name; a check names the ones its task allows (``module_states``).
MODULE_STATES = {
    "train": ModuleState("the module in train mode", _nothing),
    "eval": ModuleState("the module in eval mode", _eval),
    "first-frozen": ModuleState("the module's first parameter frozen (requires_grad=False)", _freeze_first),
    "all-frozen": ModuleState("every parameter of the module frozen", _freeze_all),
    "grad-zero": ModuleState("every .grad already zero", _grads(0.0)),
    "grad-large": ModuleState(f"every .grad already {LARGE_GRAD:g}", _grads(LARGE_GRAD)),
    "grad-none": ModuleState("every .grad None", _grads(None)),
    "no-grad": ModuleState("called under torch.no_grad()", _no_grad),
}


def module_states(*names: str) -> list[ModuleState]:
    """The states named (all of them when none is), in the catalogue's order."""
    unknown = set(names) - set(MODULE_STATES)
    if unknown:
        raise ValueError(f"no module state named {sorted(unknown)}; known: {sorted(MODULE_STATES)}")
    return [state for name, state in MODULE_STATES.items() if not names or name in names]


# --------------------------------------------------------------------------------------------
# What is left behind
# --------------------------------------------------------------------------------------------
def _numbers(tensor: torch.Tensor | None):
    if tensor is None:
        return None
    return tensor.detach().to("cpu", torch.float64).numpy().copy()


def snapshot(module: nn.Module) -> dict:
    """What a module is, as plain comparable data: each submodule's mode, each parameter's
    ``requires_grad``, value and ``.grad``, each buffer."""
    return {
        "modes": {name or "(the module)": sub.training for name, sub in module.named_modules()},
        "requires_grad": {name: p.requires_grad for name, p in module.named_parameters()},
        "values": {name: _numbers(p) for name, p in module.named_parameters()},
        "grads": {name: _numbers(p.grad) for name, p in module.named_parameters()},
        "buffers": {name: _numbers(b) for name, b in module.named_buffers()},
    }


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-5, atol=1e-7, equal_nan=True))


def _grad_text(grad) -> str:
    if grad is None:
        return "None"
    finite = grad[np.isfinite(grad)]
    size = float(np.abs(finite).max()) if finite.size else float("nan")
    return f"a tensor (largest magnitude {size:.3g})"


def differences(got: dict, expected: dict) -> list[str]:
    """How the state ``got`` an answer left differs from the one the reference left, first
    the most telling: modes, frozen parameters, ``.grad``, values, buffers."""
    found = []
    for name, training in got["modes"].items():
        if expected["modes"].get(name, training) != training:
            found.append(f"{name} is left in {'train' if training else 'eval'} mode; the task leaves it in "
                         f"{'train' if expected['modes'][name] else 'eval'} mode")
    for name, wants in got["requires_grad"].items():
        if expected["requires_grad"].get(name, wants) != wants:
            found.append(f"parameter {name} is left with requires_grad={wants}; the task leaves "
                         f"requires_grad={expected['requires_grad'][name]}")
    for name, grad in got["grads"].items():
        if name in expected["grads"] and not _same(grad, expected["grads"][name]):
            found.append(f"{name}.grad is left as {_grad_text(grad)}; the task leaves "
                         f"{_grad_text(expected['grads'][name])}")
    for name, value in got["values"].items():
        if name in expected["values"] and not _same(value, expected["values"][name]):
            found.append(f"parameter {name} is left with other values than the task's")
    for name, value in got["buffers"].items():
        if name in expected["buffers"] and not _same(value, expected["buffers"][name]):
            found.append(f"buffer {name} is left with other values than the task's")
    return found


# --------------------------------------------------------------------------------------------
# The session's settings
# --------------------------------------------------------------------------------------------
def session_settings() -> dict:
    """The global settings an answer must leave alone, as plain data."""
    return {"the global random state (torch.manual_seed or a draw)": torch.random.get_rng_state().numpy().copy(),
            "the default dtype (torch.set_default_dtype)": str(torch.get_default_dtype()),
            "gradient mode (torch.set_grad_enabled)": torch.is_grad_enabled(),
            "deterministic algorithms (torch.use_deterministic_algorithms)":
                torch.are_deterministic_algorithms_enabled()}


def changed_settings(before: dict, after: dict) -> list[str]:
    return [name for name in before if not np.array_equal(np.asarray(before[name]), np.asarray(after[name]))]


def run_in_states(call: Callable[[nn.Module], object], build: Callable[[], nn.Module],
                  states: Sequence[ModuleState]) -> list[dict]:
    """``call(module)`` on a module ``build()`` makes, put in each state, and what it left: the
    same for the answer and for the reference, so the two lists compare state by state."""
    found = []
    for state in states:
        module = build()
        with state.put(module):
            result = call(module)
        found.append({"on": state.on, "result": result, "left": snapshot(module)})
    return found
