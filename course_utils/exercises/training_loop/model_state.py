"""A model's parameters and gradients, and an optimizer, as plain data: what train_step's probe
records of the state it hands the learner's code, and what its expect rebuilds the optimizer
from, on the judge's side."""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.facts import given, tensor_of


def _flat_parameters(model) -> np.ndarray:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().copy()


def _gradient_state(model):
    """'none' when no parameter holds a gradient, 'zero' when all are zero, else the values."""
    grads = [p.grad for p in model.parameters()]
    if all(g is None for g in grads):
        return "none"
    flat = torch.cat(
        [
            (torch.zeros_like(p) if g is None else g.detach()).reshape(-1)
            for p, g in zip(model.parameters(), grads)
        ]
    )
    if not bool(flat.any()):
        return "zero"
    return flat.numpy().copy()


# The settings of each kind of optimizer that the probe records and ``expect`` rebuilds it with.
_OPTIMIZER_SETTINGS = {
    "sgd": ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"),
    "adam": ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"),
}


def _optimizer_facts(kind, optimizer, model) -> dict:
    """An optimizer as plain data: its kind, its settings (of the first param group, and of every
    group with the positions of its parameters in ``model.parameters()``), and its state (per
    parameter index)."""
    group = optimizer.param_groups[0]
    position = {id(p): index for index, p in enumerate(model.parameters())}
    return {
        "kind": kind,
        "settings": {name: group[name] for name in _OPTIMIZER_SETTINGS[kind]},
        "groups": [{"params": [position[id(p)] for p in each["params"]],
                    "settings": {name: each[name] for name in _OPTIMIZER_SETTINGS[kind]}}
                   for each in optimizer.param_groups],
        "state": {str(index): {name: given(value) if isinstance(value, torch.Tensor) else value
                               for name, value in state.items()}
                  for index, state in optimizer.state_dict()["state"].items()},
    }


def _settings_of(settings):
    settings = dict(settings)
    if "betas" in settings:
        settings["betas"] = tuple(settings["betas"])
    return settings


def _optimizer_of(facts, parameters):
    """The optimizer ``_optimizer_facts`` recorded, rebuilt on ``parameters`` (in the order of
    ``model.parameters()``), with its param groups."""
    parameters = list(parameters)
    settings = _settings_of(facts["settings"])
    groups = [{"params": [parameters[index] for index in group["params"]], **_settings_of(group["settings"])}
              for group in facts.get("groups", [])] or parameters
    made = (torch.optim.SGD if facts["kind"] == "sgd" else torch.optim.Adam)(groups, **settings)
    if facts["state"]:
        state = made.state_dict()
        state["state"] = {int(index): {name: tensor_of(value) if isinstance(value, dict) else value
                                       for name, value in entries.items()}
                          for index, entries in facts["state"].items()}
        made.load_state_dict(state)
    return made
