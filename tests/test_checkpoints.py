"""course_utils.checkpoints: atomic saves, RNG states that load with weights_only, checkpoints."""

import random

import numpy as np
import pytest
import torch
from torch import nn

from course_utils import checkpoints


def test_save_atomically_writes_a_loadable_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "weights.pt"
    checkpoints.save_atomically({"w": torch.arange(3.0)}, path)
    checkpoints.save_atomically({"w": torch.arange(4.0)}, path)  # replaces the first
    assert torch.equal(torch.load(path, weights_only=True)["w"], torch.arange(4.0))
    assert [p.name for p in tmp_path.iterdir()] == ["weights.pt"]


def test_an_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    checkpoints.save_atomically({"epoch": 1}, path)
    real_save = torch.save

    def half_then_crash(obj, file):
        real_save(obj, file)
        file.seek(0)
        file.truncate(10)
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(torch, "save", half_then_crash)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.save_atomically({"epoch": 2}, path)
    monkeypatch.setattr(torch, "save", real_save)
    assert torch.load(path, weights_only=True) == {"epoch": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_rng_state_loads_with_weights_only_and_restores_every_generator(tmp_path):
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    np.random.standard_normal()  # leaves a cached gauss in NumPy's state
    path = tmp_path / "rng.pt"
    checkpoints.save_atomically(checkpoints.rng_state(), path)
    expected = (random.random(), np.random.standard_normal(), np.random.rand(), torch.rand(2))
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    checkpoints.restore_rng_state(torch.load(path, weights_only=True))
    got = (random.random(), np.random.standard_normal(), np.random.rand(), torch.rand(2))
    assert got[:3] == expected[:3]
    assert torch.equal(got[3], expected[3])


def test_save_checkpoint_holds_everything_and_loads_with_weights_only(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    scheduler.step()
    path = checkpoints.save_checkpoint(tmp_path / "c.pt", 3, model, optimizer, scheduler, scaler)
    loaded = torch.load(path, weights_only=True)
    assert set(loaded) == {"epoch", "model", "optimizer", "scheduler", "scaler", "rng"}
    assert loaded["epoch"] == 3
    assert loaded["scaler"] == {}
    assert loaded["scheduler"]["last_epoch"] == 1
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    fresh.load_state_dict(loaded["model"])
    for a, b in zip(fresh.state_dict().values(), model.state_dict().values()):
        assert torch.equal(a, b)
