"""memory_budget, peak_memory and gradient_norms on real kinds of model, against figures counted
by hand here (numel × element_size, per distinct storage), never against the tool itself."""

from __future__ import annotations

import torch
import pytest
from torch import nn

from course_utils.bench import MemoryBudget, memory_budget, optimizer_state_tensors, peak_memory
from course_utils.grad_norms import gradient_norms
from zoo import saved_by_a_real_forward


def nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def hand_bytes(tensors) -> int:
    """Each distinct tensor object once (a tied Parameter is one object)."""
    seen = {id(t): t for t in tensors}
    return sum(nbytes(t) for t in seen.values())


# --- models of the zoo ----------------------------------------------------------------------


class TinyGPT(nn.Module):
    """A GPT-2-shaped stack: token + position embeddings, blocks, and a head tied to the tokens."""

    def __init__(self, vocab=50257, context=1024, width=1600, layers=48):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(
                {
                    "ln1": nn.LayerNorm(width),
                    "qkv": nn.Linear(width, 3 * width),
                    "proj": nn.Linear(width, width),
                    "ln2": nn.LayerNorm(width),
                    "fc": nn.Linear(width, 4 * width),
                    "out": nn.Linear(4 * width, width),
                }
            )
            for _ in range(layers)
        )
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied: one Parameter in two modules

    def forward(self, idx):
        h = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            h = h + b["proj"](b["qkv"](b["ln1"](h))[..., : h.shape[-1]])
            h = h + b["out"](torch.relu(b["fc"](b["ln2"](h))))
        return self.head(self.ln_f(h))


def mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


# --- 1. models on the meta device -----------------------------------------------------------


def test_meta_parameters_count_per_storage_not_as_one():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4096, 4096), nn.Linear(4096, 4096))
    expected = hand_bytes(model.parameters())
    assert expected == 134_250_496
    budget = memory_budget(model)
    assert budget.parameters == expected  # was 67,108,864: every meta data_ptr() is 0
    assert budget.gradients == expected and budget.not_yet == ("gradients",)


def test_a_gpt2_xl_sized_model_on_meta_with_adamw_is_estimated_without_allocating():
    with torch.device("meta"):
        model = TinyGPT()
    params = list(model.parameters())
    assert model.head.weight is model.wte.weight
    optimizer = torch.optim.AdamW(model.parameters())
    found = {}
    peak = peak_memory(lambda: found.setdefault("b", memory_budget(model, optimizer)), device="cpu")
    budget = found["b"]
    weights = hand_bytes(params)  # the tied weight once
    assert budget.parameters == weights == 4 * sum(p.numel() for p in set(params))
    assert budget.gradients == weights
    # AdamW: exp_avg and exp_avg_sq the size of each parameter, and a 4-byte step per tensor
    assert budget.optimizer_state == 2 * weights + 4 * len(params)
    assert 22 * 2**30 < budget.total < 24 * 2**30  # ~23 GB (was ~920 MB)
    assert budget.not_yet == ("gradients", "optimizer state")
    assert peak.bytes < 2**20, f"an estimate on meta allocated {peak}"


def test_meta_activations_are_counted_by_shape_and_match_a_real_run():
    batch = 32
    x = torch.randn(batch, 64)
    # Linear keeps its input, ReLU its output (the second Linear's input, the same tensor).
    expected = nbytes(x) + batch * 128 * 4
    torch.manual_seed(0)
    real_model = mlp()
    real = memory_budget(real_model, None, lambda: real_model(x).sum())
    with torch.device("meta"):
        meta_model = mlp()
    x_meta = torch.empty(batch, 64, device="meta")
    optimizer = torch.optim.Adam(meta_model.parameters())
    meta = memory_budget(meta_model, optimizer, lambda: meta_model(x_meta).sum())
    assert real.activations == meta.activations == expected  # was 0 on meta
    assert meta.gradients == hand_bytes(meta_model.parameters())
    assert meta.optimizer_state == 2 * hand_bytes(meta_model.parameters()) + 4 * 4


def test_tied_weights_count_once_on_meta_and_on_cpu():
    for device in ("meta", "cpu"):
        with torch.device(device):
            model = TinyGPT(vocab=100, context=8, width=16, layers=1)
        untied = sum(nbytes(p) for _, p in model.named_parameters(remove_duplicate=False))
        expected = untied - nbytes(model.head.weight)  # the head's weight is the embedding's
        assert memory_budget(model).parameters == hand_bytes(model.parameters()) == expected


# --- 2. optimizer state ---------------------------------------------------------------------


def test_lbfgs_state_lists_are_walked():
    torch.manual_seed(0)
    model = nn.Linear(100, 1)
    x, y = torch.randn(50, 100), torch.randn(50, 1)
    optimizer = torch.optim.LBFGS(model.parameters(), history_size=10, max_iter=20)

    def closure():
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss

    for _ in range(3):
        optimizer.step(closure)
    state = optimizer.state[next(iter(optimizer.state))]
    distinct = {}
    for value in state.values():
        for t in value if isinstance(value, list) else [value]:
            if isinstance(t, torch.Tensor):
                distinct[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    expected = sum(distinct.values())
    assert len(state["old_dirs"]) > 1
    budget = memory_budget(model, optimizer)
    assert budget.optimizer_state == expected
    assert expected > 2 * nbytes(*[t for t in state.values() if isinstance(t, torch.Tensor)])
    assert len(optimizer_state_tensors(optimizer)) >= len(state["old_dirs"])


class NeedsMode(torch.optim.SGD):
    def __init__(self, params, mode, lr=0.1):
        super().__init__(params, lr=lr, momentum=0.9)
        self.mode = mode


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.LBFGS(ps),
        lambda ps: NeedsMode(ps, mode="fast"),
        lambda ps: torch.optim.SparseAdam(ps),
    ],
    ids=["LBFGS", "required-argument", "SparseAdam"],
)
def test_state_a_twin_cannot_make_says_unknown_not_zero(make):
    model = nn.Embedding(10, 4)
    budget = memory_budget(model, make(list(model.parameters())))
    assert budget.unknown == ("optimizer state",)
    assert "optimizer state" not in budget.not_yet
    text = str(budget)
    assert "optimizer state (unknown)" in text and "unknown" in text.splitlines()[3]
    assert "not 0 B" in text and "total (without unknown parts)" in text
    assert "unknown" in budget._repr_html_()


# --- 3. sparse gradients --------------------------------------------------------------------


def test_sparse_embedding_gradient_counts_indices_and_values():
    torch.manual_seed(0)
    model = nn.Embedding(100_000, 64, sparse=True)
    idx = torch.randint(0, 100_000, (33,))
    model(idx).sum().backward()
    grad = model.weight.grad
    assert grad.is_sparse
    # one row of 64 float32 values and one int64 index per looked-up row
    expected = 33 * 8 + 33 * 64 * 4
    assert nbytes(grad._indices(), grad._values()) == expected == 8_712
    budget = memory_budget(model)
    assert budget.gradients == expected  # was 25,600,000: the dense size


def test_gradient_norms_of_a_sparse_gradient():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(1000, 8, sparse=True), nn.Linear(8, 1))
    idx = torch.tensor([3, 3, 7, 999])  # a repeated row: coalescing sums it first
    model(idx).pow(2).sum().backward()
    grad = model[0].weight.grad
    norms = gradient_norms(model)  # crashed inside clip_grad.py
    dense = grad.to_dense().norm().item()
    assert norms["0.weight"].grad_norm == pytest.approx(dense, rel=1e-6)
    coalesced = grad.coalesce()._values().norm().item()
    assert norms["0.weight"].grad_norm == pytest.approx(coalesced, rel=1e-6)
    others = [model[1].weight.grad.norm().item(), model[1].bias.grad.norm().item()]
    assert norms.total == pytest.approx((dense**2 + sum(n**2 for n in others)) ** 0.5, rel=1e-6)


def test_gradient_norms_on_meta_say_unknown():
    with torch.device("meta"):
        model = mlp()
    model(torch.empty(2, 64, device="meta")).sum().backward()
    norms = gradient_norms(model)  # called .item() on meta
    assert norms.unknown == [name for name, _ in model.named_parameters()]
    assert norms.without_grad == []
    assert norms.total != norms.total  # nan
    assert "unknown (meta tensors have no values)" in str(norms)


# --- 4. peak_memory on the CPU --------------------------------------------------------------


def test_cpu_peak_of_replacing_an_older_tensor():
    holder = [torch.ones(1000, 1000)]

    def replace_after_freeing():
        holder[0] = None
        holder[0] = torch.zeros(1000, 1000)

    # the old 4,000,000 B go first, the new ones take their place: nothing extra at any time
    assert peak_memory(replace_after_freeing, device="cpu").bytes == 0  # was 4,000,000

    def replace_while_alive():
        holder[0] = torch.full((1000, 1000), 2.0)  # both exist until the assignment

    assert peak_memory(replace_while_alive, device="cpu").bytes == 4_000_000


def test_cpu_peak_of_a_training_step_with_older_gradients():
    def setup():
        torch.manual_seed(0)
        model = nn.Linear(1000, 1000)
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    x = torch.randn(8, 1000)

    def step(model, optimizer):
        optimizer.zero_grad(set_to_none=True)
        model(x).sum().backward()
        optimizer.step()

    fresh_model, fresh_opt = setup()
    fresh = peak_memory(lambda: step(fresh_model, fresh_opt), device="cpu").bytes
    old_model, old_opt = setup()
    old_model(x).sum().backward()  # gradients that predate the measured call
    grads = nbytes(*(p.grad for p in old_model.parameters()))
    assert grads == 4_004_000
    older = peak_memory(lambda: step(old_model, old_opt), device="cpu").bytes
    assert fresh >= grads  # the fresh step allocates its gradients
    assert older == fresh - grads  # was == fresh: the freed old gradients went unseen


# --- 5. buffers, plain errors, estimates that allocate nothing ------------------------------


def test_batchnorm_running_stats_are_buffers_not_activations():
    def run(batch):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32))
        x = torch.randn(batch, 16)
        return model, memory_budget(model, None, lambda: model(x).sum())

    model, small = run(8)
    _, large = run(80)
    assert small.buffers == hand_bytes(model.buffers()) == 2 * 32 * 4 + 8
    # Linear keeps its input; BatchNorm its input, and the batch mean and 1/std (32 floats each)
    assert small.activations == 8 * 16 * 4 + 8 * 32 * 4 + 2 * 32 * 4
    assert large.activations == 80 * 16 * 4 + 80 * 32 * 4 + 2 * 32 * 4
    assert small.parts()["buffers"] == small.buffers and "buffers" in str(small)
    assert small.fixed == small.parameters + small.buffers + small.gradients
    assert "buffers" not in MemoryBudget(1, 1, 0, 0).parts()


def saved_by_a_real_step(model, loss_fn) -> int:
    """Our own count of a real step's saved activations (tests/zoo.py), backward included."""
    saved, loss = saved_by_a_real_forward(model, loss_fn)
    loss.backward()
    return saved


class ConvNet(nn.Module):
    """A ResNet-style stem and block: convolution, BatchNorm, dropout, a residual add."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16))
        self.head = nn.Sequential(nn.Dropout(0.3), nn.Flatten(), nn.Linear(16 * 16 * 16, 10))

    def forward(self, x):
        h = self.stem(x)
        return self.head(torch.relu(h + self.block(h)))


class ReadsAValue(ConvNet):
    """A forward that reads a number out of a tensor: shapes alone cannot follow it."""

    def forward(self, x):
        h = self.stem(x)
        if h.mean().item() > -1e9:  # always true, but only a real value can say so
            h = torch.relu(h + self.block(h))
        return self.head(h)


def snapshot(model):
    return {name: t.detach().clone() for name, t in [*model.named_parameters(), *model.named_buffers()]}


@pytest.mark.parametrize("make", [ConvNet, ReadsAValue])
def test_a_step_is_worked_out_without_touching_the_model(make):
    torch.manual_seed(0)
    model = make().train()
    optimizer = torch.optim.Adam(model.parameters())
    x, y = torch.randn(32, 3, 16, 16), torch.randint(0, 10, (32,))
    before = snapshot(model)
    random_state = torch.get_rng_state()
    budget = memory_budget(model, optimizer, lambda: nn.functional.cross_entropy(model(x), y))
    # Nothing it observed has changed: weights, BatchNorm statistics and their counters, the
    # gradients (none), the optimizer (no state), the random generator (dropout draws).
    after = snapshot(model)
    assert all(torch.equal(before[name], after[name]) for name in before)
    assert all(p.grad is None for p in model.parameters()) and not optimizer.state
    assert torch.equal(torch.get_rng_state(), random_state)
    assert budget.not_yet == ("gradients", "optimizer state")
    assert budget.gradients == hand_bytes(model.parameters())
    assert budget.optimizer_state == 2 * hand_bytes(model.parameters()) + 4 * len(list(model.parameters()))
    # ... and the activations are what a real step saves, counted here by our own hook.
    torch.manual_seed(1)
    assert budget.activations == saved_by_a_real_step(model, lambda: nn.functional.cross_entropy(model(x), y))
    on_shapes = "shapes alone" in budget.how
    assert on_shapes == (make is ConvNet), budget.how
    if not on_shapes:
        assert "reads values" in budget.how and "reads values" in str(budget)


def test_working_out_a_step_allocates_next_to_nothing():
    torch.manual_seed(0)
    model = ConvNet()
    optimizer = torch.optim.Adam(model.parameters())
    x, y = torch.randn(256, 3, 16, 16), torch.randint(0, 10, (256,))
    loss_fn = lambda: nn.functional.cross_entropy(model(x), y)  # noqa: E731
    budget = memory_budget(model, optimizer, loss_fn)
    worked_out = peak_memory(lambda: memory_budget(model, optimizer, loss_fn), device="cpu").bytes
    assert budget.activations > 10_000_000
    # What stays real: copies of the buffers (to put them back) and the random generator's state.
    assert worked_out < hand_bytes(model.buffers()) + 100_000, worked_out


def test_a_sparse_embeddings_coming_gradient_is_counted_sparse():
    embedding = nn.Embedding(100_000, 64, sparse=True)
    ids = torch.randint(0, 100_000, (4, 33))
    budget = memory_budget(embedding, None, lambda: embedding(ids).sum())
    embedding(ids).sum().backward()
    grad = embedding.weight.grad
    assert budget.gradients == nbytes(grad._indices(), grad._values()) == 132 * 8 + 132 * 64 * 4


def test_a_sparse_gradient_before_any_backward_is_unknown_not_dense():
    model = nn.Sequential(nn.Embedding(100_000, 64, sparse=True), nn.Linear(64, 2))
    budget = memory_budget(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    assert budget.unknown == ("gradients", "optimizer state")
    assert budget.gradients == nbytes(*model[1].parameters())  # the dense part alone
    assert "gradients (unknown)" in str(budget) and "a loss_fn" in str(budget)


def test_a_lazy_model_before_its_first_forward_is_a_plain_error():
    model = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.Linear(8, 2))
    with pytest.raises(ValueError, match=r"0 \(LazyLinear\).*first forward"):
        memory_budget(model)
    model(torch.randn(3, 5))
    assert memory_budget(model).parameters == (5 * 8 + 8 + 8 * 2 + 2) * 4


def test_a_loss_that_does_not_require_gradients_is_a_plain_error():
    model = mlp()
    x = torch.randn(2, 64)
    with torch.no_grad(), pytest.raises(ValueError, match="no_grad"):
        memory_budget(model, None, lambda: model(x).sum())


def test_plain_errors_for_wrong_arguments():
    model = mlp()
    with pytest.raises(TypeError, match="torch.nn.Module"):
        memory_budget([model])
    with pytest.raises(TypeError, match="Optimizer"):
        memory_budget(model, "adam")
    x = torch.randn(2, 64)
    with pytest.raises(TypeError, match="one tensor"):
        memory_budget(model, None, lambda: (model(x).sum(), 0))
    with pytest.raises(ValueError, match="single-value"):
        memory_budget(model, None, lambda: model(x))


def test_predicting_adam_state_allocates_nothing_real():
    model = nn.Linear(2048, 2048)
    optimizer = torch.optim.Adam(model.parameters())
    found = {}
    peak = peak_memory(lambda: found.setdefault("b", memory_budget(model, optimizer)), device="cpu")
    weights = hand_bytes(model.parameters())
    assert found["b"].optimizer_state == 2 * weights + 4 * 2
    assert peak.bytes < weights // 10, peak  # the twin used to allocate 3 × the weights


def test_two_timed_measurements_have_no_known_spread():
    from course_utils.bench import Comparison, Timing

    two = Timing("", 0.6036, 0.0035, 2, 2)  # was printed as steady: "603.6 ms (IQR 3.5 ms, 2 runs)"
    assert not two.steady and not two.spread_known
    assert str(two) == (
        "603.6 ms (2 runs in 2 timed measurements: too few to know the spread, "
        "so neither steady nor noisy)"
    )
    table = str(Comparison({"slow": two, "fast": Timing("fast", 0.3, 0.003, 12, 12)}))
    assert table.splitlines()[1].split()[5] == "unknown" and "noisy" not in table
