"""resume's training run: the parts the check builds (a model with dropout, Adam, a cosine
schedule, an enabled GradScaler, a loader with its own generator), one epoch of training, and
where every generator and state sits, for the probe and for the judge's side alike."""

from __future__ import annotations

import contextlib
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils.checkpoints import _loader_generators
from course_utils.exercises.facts import tensor_of
from course_utils.exercises.reliable_practice.checkpoint_data import _value_of
from course_utils.exercises.reliable_practice.common import _arrays


@contextlib.contextmanager
def _one_thread():
    """Tiny models run faster on one thread, and much faster on a busy machine; put it back after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


_EPOCHS, _SAVED_EPOCH = 6, 2  # train 0..2, save, resume, train 3..5


def _resume_data():
    generator = torch.Generator().manual_seed(11)
    return torch.randn(48, 6, generator=generator), torch.randint(0, 3, (48,), generator=generator)


def _resume_parts(x, y):
    """Model, optimizer, scheduler, scaler and a loader with its own generator (as chapter 06
    teaches); the model's initial weights come from the global seed, the loader's order from
    its own seed, the same in every process."""
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=_EPOCHS)
    # Enabled on the CPU (torch >= 2.3); a small growth_interval makes its scale move.
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=3)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(7))
    return model, optimizer, scheduler, scaler, loader


def _train_epoch(parts):
    model, optimizer, scheduler, scaler, loader = parts
    model.train()
    for xb, yb in loader:  # the loader's own generator: the batch order depends on it
        loss = F.cross_entropy(model(xb), yb)  # dropout draws its masks from the global generator
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    scheduler.step()


def _lr(optimizer) -> float:
    return float(optimizer.param_groups[0]["lr"])


def _adam_moments(optimizer) -> list:
    return [
        state["exp_avg"].detach().cpu().numpy().copy()
        for state in (optimizer.state.get(p) for g in optimizer.param_groups for p in g["params"])
        if state and "exp_avg" in state
    ]


def _loader_states(loader) -> dict:
    """Where the loader's own generators sit (see checkpoints.rng_state) and their states."""
    return {key: generator.get_state().numpy().copy() for key, generator in _loader_generators(loader)[0].items()}


def _other_streams() -> dict:
    """Python's and NumPy's global random states, as arrays (restore_rng_state puts both back)."""
    numpy_state = np.random.get_state()
    return {
        "Python's random module": np.array(random.getstate()[1], dtype=np.int64),
        "NumPy's global generator": np.append(numpy_state[1].astype(np.int64), numpy_state[2]),
    }


@contextlib.contextmanager
def _past_modes():
    """The check's own work (the run that writes the checkpoint, reading what the answer left,
    training after it) runs past any torch function mode an answer left on, on the CPU, in
    float32: a mode sees none of it and changes none of it (``facts.value_facts`` reads so too),
    and a notebook's default dtype or device does not make the judge's side rebuild another run."""
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        with torch._C.DisableTorchFunction():  # a mode's torch.set_default_device is off too
            yield
    finally:
        torch.set_default_dtype(dtype)


def _rng_after(loader) -> dict:
    """Where every generator the checkpoint holds sits now: torch's global one, Python's and
    NumPy's, and the loader's own (by where they sit in the loader)."""
    return {"torch": torch.get_rng_state().numpy().copy(), "others": _other_streams(),
            "loader": _loader_states(loader)}


def _scheduler_facts(scheduler) -> dict:
    """A scheduler's state_dict as plain data: its numbers, flags and lists of numbers."""
    plain = (int, float, bool, str)
    return {key: list(value) if isinstance(value, (list, tuple)) else value
            for key, value in scheduler.state_dict().items()
            if isinstance(value, plain) or (isinstance(value, (list, tuple)) and all(isinstance(v, plain) for v in value))}


def _reference_run(given_run, reference) -> dict:
    """The reference's resume on the objects the probe gave, rebuilt, then the remaining epochs."""
    x, y = tensor_of(given_run["x"]), tensor_of(given_run["y"])
    fresh = given_run["fresh"]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.pt")
        torch.save(_value_of(given_run["checkpoint"]), path)
        parts = _resume_parts(x, y)
        model, optimizer, scheduler, scaler, loader = parts
        model.load_state_dict(_value_of(fresh["model"]))
        optimizer.load_state_dict(_value_of(fresh["optimizer"]))
        scheduler.load_state_dict(_value_of(fresh["scheduler"]))
        scaler.load_state_dict(_value_of(fresh["scaler"]))
        generators = _loader_generators(loader)[0]
        if generators.keys() != fresh["loader"].keys():
            raise ValueError("the recorded loader's generators are not those of the loader the check builds")
        for key, generator in generators.items():
            generator.set_state(torch.from_numpy(np.array(fresh["loader"][key], dtype=np.uint8)))
        start = reference(path, *parts)
        modes, scheduler_state = [m.training for m in model.modules()], _scheduler_facts(scheduler)
    if type(start) is not int or not 0 <= start <= _EPOCHS:
        raise ValueError(f"the recorded checkpoint's epoch gives {start!r}, not an epoch of the run")
    run = {
        "saved_weights": _arrays(model.state_dict()),
        "saved_moments": _adam_moments(optimizer),
        "saved_scaler": {k: float(v) for k, v in scaler.state_dict().items()},
        "rng": _rng_after(loader),
        "modes": modes,
        "scheduler": scheduler_state,
    }
    lrs = [float(lr) for lr in given_run["lrs_before_save"]][:start]
    for _ in range(start, _EPOCHS):
        lrs.append(_lr(optimizer))
        _train_epoch(parts)
    run.update(lrs_straight=lrs, straight=_arrays(model.state_dict()), scaler_straight=float(scaler.get_scale()))
    return run
