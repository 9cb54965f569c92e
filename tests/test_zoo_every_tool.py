"""Every tool the course teaches, on every model of the zoo, against a figure of our own.

memory_budget against bytes counted by hand and a real step's saved tensors seen by our own
hook; gradient_norms against ``clip_grad_norm_``; peak_memory against the activations the
forward keeps (all alive at once before backward); save/load_checkpoint against the model's
own outputs; RunLog against the loss it was given; time_it and shape_trace must answer, never
raise. A tool that cannot answer must say so plainly, never give a traceback from inside.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from course_utils.bench import memory_budget, peak_memory, time_it
from course_utils.checkpoints import load_checkpoint, save_checkpoint
from course_utils.diagnose import first_non_finite, shape_trace
from course_utils.grad_norms import gradient_norms
from course_utils.run_log import RunLog, read_log
from zoo import ZOO, saved_by_a_real_forward

pytestmark = [
    pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning"),
    pytest.mark.filterwarnings("ignore:Support for mismatched:UserWarning"),
]
CASES = {case[0]: case for case in ZOO}


def floats_in(value) -> list[torch.Tensor]:
    """Every floating-point tensor in a model's result, however it is packed."""
    if isinstance(value, PackedSequence):
        return floats_in(value.data)
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [t for field in dataclasses.fields(value) for t in floats_in(getattr(value, field.name))]
    if isinstance(value, dict):
        return [t for item in value.values() for t in floats_in(item)]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in floats_in(item)]
    return []


def ready(name):
    """The model in train mode, after one forward (a lazy layer then has its shapes)."""
    _, make, args, kwargs = CASES[name]
    torch.manual_seed(0)
    model = make()
    inputs, options = args(), kwargs()
    with torch.no_grad():
        model(*inputs, **options)
    model.train()

    def loss_fn():
        return sum(t.float().square().mean() for t in floats_in(model(*inputs, **options)))

    return model, loss_fn


def distinct_bytes(tensors) -> int:
    seen = {id(t): t for t in tensors if t is not None}
    return sum(t.numel() * t.element_size() for t in seen.values())


@pytest.mark.parametrize("name", CASES)
def test_memory_budget_against_our_own_counts(name):
    model, loss_fn = ready(name)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    budget = memory_budget(model, optimizer, loss_fn)
    params = [p for p in model.parameters()]
    assert budget.parameters == distinct_bytes(params)
    assert budget.buffers == distinct_bytes(model.buffers())
    if "sparse" in name:  # its momentum would be sparse too, as large as the batch makes it
        assert budget.unknown == ("optimizer state",) and "optimizer state unknown" in str(budget)
    else:
        assert budget.optimizer_state == distinct_bytes(p for p in params if p.requires_grad)
    expected, loss = saved_by_a_real_forward(model, loss_fn)
    assert budget.activations == expected, budget.how
    loss.backward()
    grads = [p.grad for p in params]
    by_hand = sum(
        (g._indices().numel() * g._indices().element_size() + g._values().numel() * g._values().element_size())
        if g.is_sparse
        else g.numel() * g.element_size()
        for g in grads
        if g is not None
    )
    assert budget.gradients == by_hand


@pytest.mark.parametrize("name", CASES)
def test_gradient_norms_against_clip_grad_norm(name):
    model, loss_fn = ready(name)
    loss_fn().backward()
    norms = gradient_norms(model)
    grads = [p for p in model.parameters() if p.grad is not None]
    dense = [p.grad.coalesce()._values() if p.grad.is_sparse else p.grad for p in grads]
    expected = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in dense])).item()
    assert norms.total == pytest.approx(expected, rel=1e-5)
    if not any(p.grad.is_sparse for p in grads):  # clip_grad_norm_ takes dense gradients only
        assert norms.total == pytest.approx(nn.utils.clip_grad_norm_(model.parameters(), math.inf).item(), rel=1e-5)


@pytest.mark.parametrize("name", CASES)
def test_peak_memory_holds_at_least_the_activations(name):
    model, loss_fn = ready(name)
    expected, loss = saved_by_a_real_forward(model, loss_fn)
    del loss
    peak = peak_memory(lambda: loss_fn().backward(), device="cpu")
    assert peak.bytes is not None and peak.bytes >= expected, (peak, expected)


@pytest.mark.parametrize("name", CASES)
def test_checkpoint_log_timing_and_tracing_answer_on_every_model(name, tmp_path):
    model, loss_fn = ready(name)
    # Adam refuses sparse gradients; SGD with momentum keeps state for them too.
    make_optimizer = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9) if "sparse" in name else torch.optim.AdamW(ps, lr=1e-3)  # noqa: E731
    optimizer = make_optimizer(model.parameters())
    loss = loss_fn()
    loss.backward()
    optimizer.step()
    save_checkpoint(tmp_path / "run.pt", 0, model, optimizer)
    again, _ = ready(name)
    again_optimizer = make_optimizer(again.parameters())
    assert load_checkpoint(tmp_path / "run.pt", again, again_optimizer) == 1
    for (key, mine), theirs in zip(model.state_dict().items(), again.state_dict().values()):
        assert torch.equal(mine.to_dense() if mine.is_sparse else mine, theirs), key
    log = RunLog(tmp_path / "log.jsonl")
    log.write(step=1, loss=loss.detach())
    assert read_log(tmp_path / "log.jsonl")[0]["loss"] == pytest.approx(loss.item())
    timing = time_it(lambda: loss_fn(), min_run_time=0.01, max_run_time=0.02)
    assert timing.median > 0 and timing.runs >= 1
    _, make, args, kwargs = CASES[name]
    trace = shape_trace(model, *args(), **kwargs())
    assert trace.error is None and trace.output and len(trace.calls) >= 2, str(trace)
    assert not first_non_finite(model, *args(), **kwargs())
