"""save_checkpoint / load_checkpoint and RunLog on the zoo's real architectures.

Tied weights (GPT, an LSTM language model), BatchNorm buffers (a ResNet), lazy layers: a run
stopped after two steps and resumed from its checkpoint must end with exactly the weights,
buffers and optimizer state of a run that never stopped, and the losses logged by RunLog (a
float, a NumPy mean) read back as the numbers they were.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils.checkpoints import load_checkpoint, save_checkpoint
from course_utils.run_log import RunLog, read_log
from zoo import LazyNet, LSTMLanguageModel, TinyGPT, TinyResNet


def _gpt_batch(g):
    tokens = torch.randint(0, 40, (3, 8), generator=g)
    return (tokens,), lambda out: F.cross_entropy(out.reshape(-1, 40), tokens.roll(-1, 1).reshape(-1))


def _resnet_batch(g):
    x, y = torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 5, (4,), generator=g)
    return (x,), lambda out: F.cross_entropy(out, y)


def _lstm_batch(g):
    tokens, lengths = torch.randint(0, 30, (3, 6), generator=g), torch.tensor([6, 4, 2])
    return (tokens, lengths), lambda out: F.cross_entropy(out.reshape(-1, 30), tokens[:, :out.shape[1]].reshape(-1))


def _lazy_batch(g):
    x, y = torch.randn(5, 7, generator=g), torch.randint(0, 3, (5,), generator=g)
    return (x,), lambda out: F.cross_entropy(out, y)


ZOO = {"gpt (tied)": (TinyGPT, _gpt_batch), "resnet (batchnorm)": (TinyResNet, _resnet_batch),
       "lstm lm (tied, packed)": (LSTMLanguageModel, _lstm_batch), "lazy layers": (LazyNet, _lazy_batch)}


def _build(kind):
    torch.manual_seed(0)
    model = ZOO[kind][0]()
    inputs, _ = ZOO[kind][1](torch.Generator().manual_seed(99))
    with torch.no_grad():
        model(*inputs)  # a lazy layer gets its shapes; the others just run once
    torch.manual_seed(1)
    model = ZOO[kind][0]()
    with torch.no_grad():
        model(*inputs)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _steps(kind, model, optimizer, start, stop, log=None):
    for step in range(start, stop):
        inputs, loss_of = ZOO[kind][1](torch.Generator().manual_seed(step))
        model.train()
        torch.manual_seed(1000 + step)  # dropout draws the same masks in both runs
        loss = loss_of(model(*inputs))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log is not None:
            log.write(epoch=step, train_loss=np.mean([loss.item()]), val_loss=np.float32(loss.item()))


@pytest.mark.parametrize("kind", ZOO)
def test_a_resumed_zoo_run_ends_exactly_where_an_uninterrupted_one_does(kind, tmp_path):
    straight, straight_opt = _build(kind)
    _steps(kind, straight, straight_opt, 0, 4)

    model, optimizer = _build(kind)
    with RunLog(tmp_path / "log.jsonl") as log:
        _steps(kind, model, optimizer, 0, 2, log)
    path = save_checkpoint(tmp_path / "ckpt.pt", 1, model, optimizer)
    resumed, resumed_opt = _build(kind)
    assert load_checkpoint(path, resumed, resumed_opt) == 2
    if hasattr(resumed, "head"):
        assert resumed.head.weight is resumed.tok.weight, "loading untied the tied weights"
    with RunLog(tmp_path / "log.jsonl") as log:
        _steps(kind, resumed, resumed_opt, 2, 4, log)

    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), f"{kind}: {name} differs after resuming"
    for a, b in zip(straight_opt.state_dict()["state"].values(), resumed_opt.state_dict()["state"].values()):
        assert all(torch.equal(a[k], b[k]) for k in a), f"{kind}: optimizer state differs"
    rows = read_log(tmp_path / "log.jsonl")
    assert [row["epoch"] for row in rows] == [0, 1, 2, 3]
    assert all(isinstance(row["train_loss"], float) and row["train_loss"] > 0 for row in rows)
