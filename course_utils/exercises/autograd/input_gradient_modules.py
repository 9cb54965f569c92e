"""Chapter 02, A7 — the layers ``input_gradient``'s check hands in besides its Linear layer: a
batch norm in train mode (whose output, and gradient, depend on the mode) and a model with a
sub-module in another mode than the model itself (a Dropout switched off while the rest trains).
The probe builds them and records their numbers and modes; the judge's side (``expect``)
rebuilds them from that record and runs the reference on them."""

from __future__ import annotations

import contextlib

import torch
from torch import nn

BATCH_NORM = "batch_norm_tanh"  # nn.Sequential(nn.BatchNorm1d(3), nn.Tanh()), handed in in train mode
DROPOUT_OFF = "linear_dropout_off"  # nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)), the Dropout in eval mode


def _batch_norm_tanh() -> nn.Module:
    net = nn.Sequential(nn.BatchNorm1d(3), nn.Tanh())
    with torch.no_grad():  # away from the defaults, so that train and eval mode differ in every column
        net[0].weight.copy_(torch.tensor([0.5, -2.0, 1.5]))
        net[0].bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
        net[0].running_mean.copy_(torch.tensor([0.2, -0.1, 0.3]))
        net[0].running_var.copy_(torch.tensor([0.5, 2.0, 1.5]))
    return net


def _linear_dropout_off() -> nn.Module:
    net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[0.5, -2.0, 1.5], [1.25, 0.75, -3.0], [-0.5, 2.5, 0.25]]))
        net[0].bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
    net[1].eval()  # switched off while the model trains
    return net


_BUILDERS = {BATCH_NORM: _batch_norm_tanh, DROPOUT_OFF: _linear_dropout_off}
KINDS = tuple(_BUILDERS)


def build(kind: str) -> nn.Module:
    """A new module of ``kind``, made without drawing from the caller's random stream."""
    with torch.random.fork_rng(devices=[]):
        return _BUILDERS[kind]()


def modes(module: nn.Module) -> dict:
    """Each sub-module's mode, by name ("" for the module itself)."""
    return {name: sub.training for name, sub in module.named_modules()}


def put_modes(module: nn.Module, wanted: dict) -> None:
    for name, sub in module.named_modules():
        sub.training = wanted[name]


def numbers(module: nn.Module) -> dict:
    """The module's parameters and buffers, as NumPy arrays (plain data)."""
    return {name: t.detach().cpu().numpy().copy() for name, t in module.state_dict().items()}


def rebuild(kind: str, state: dict, wanted_modes: dict) -> nn.Module:
    """A module of ``kind`` holding the recorded numbers, in the recorded modes (judge's side)."""
    module = build(kind)
    module.load_state_dict({name: torch.from_numpy(value) for name, value in state.items()})
    put_modes(module, wanted_modes)
    return module


def changed_submodules(module: nn.Module, before: dict) -> list:
    """The sub-modules (not the module itself) whose mode is no longer the one in ``before``."""
    return [{"name": name, "was": before[name], "now": sub.training}
            for name, sub in module.named_modules() if name and sub.training != before[name]]


@contextlib.contextmanager
def one_thread():
    """torch on one CPU thread for a moment, then as it was: a batch norm over a dozen numbers
    starts its OpenMP threads on every call, which costs tens of milliseconds on a busy machine
    and nothing the answer could tell."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
