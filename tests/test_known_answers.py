"""Known answers: every exercise's reference solution against numbers typed in by hand.

The probes compute what they expect with the same formula as the reference, so a formula that
both share would be wrong unnoticed. Here each exercise gets at least one small input whose
right output is written out literally: worked out by hand or from first principles (d/dx x**3
at 2 is 12, softplus(0) = log 2, a 3x4 Linear layer has 16 parameters, ...), or a documented
constant of torch's CPU generator (after torch.manual_seed(0), torch.rand(3) is
[0.4963, 0.7682, 0.0885] and torch.randn(4) is [1.5410, -0.2934, -2.1788, 0.5684]; after
torch.manual_seed(1), torch.randn(3) is [0.6614, 0.2669, 0.0617]). Nothing here is computed by
calling a reference or a probe's helpers.

Each case is a function ``case(f, tmp_path)`` registered with ``@known(exercise_id)``; it calls
``f``, the exercise's reference (or, to try the case itself, a deliberately broken copy of it),
and asserts the literal answer. ``test_every_exercise_has_a_known_answer`` makes sure a new
exercise cannot be added without one.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
import pytest
import torch
from torch import nn
from torch.testing import assert_close
from torch.utils.data import DataLoader

from course_utils.checkpoints import save_checkpoint
from course_utils.exercises import all_exercises

EXERCISES = {exercise.id: exercise for chapter in all_exercises().values() for exercise in chapter}

# exercise id -> the known-answer cases for it
KNOWN: dict[str, list] = {}


def known(exercise_id):
    def register(case):
        KNOWN.setdefault(exercise_id, []).append(case)
        return case

    return register


# torch's CPU generator: documented first draws
RAND_SEED0 = [0.4963, 0.7682, 0.0885]  # torch.manual_seed(0); torch.rand(3)
RANDN_SEED0 = [1.5410, -0.2934, -2.1788, 0.5684]  # torch.manual_seed(0); torch.randn(4)
RANDN_SEED1 = [0.6614, 0.2669, 0.0617]  # torch.manual_seed(1); torch.randn(3)
PRINTED = dict(rtol=0.0, atol=1e-4)  # the constants above are printed to 4 decimals

LOG2 = 0.6931471805599453


def tensor_equal(actual, expected):
    """Same values, same dtype, same shape (exactly)."""
    assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual).__name__}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype}, expected {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    assert torch.equal(actual, expected), f"{actual} != {expected}"


def linear(in_features, out_features, weight, bias=None):
    """An nn.Linear whose parameters are set by hand."""
    layer = nn.Linear(in_features, out_features, bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        if bias is not None:
            layer.bias.copy_(torch.tensor(bias))
    return layer


# --- 00 environment ---------------------------------------------------------------------------


@known("environment.kernel_environment")
def kernel_environment_reads_this_interpreter(f, tmp_path):
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(sys, "executable", "/envs/course/bin/python")
        mp.setattr(sys, "prefix", "/envs/course")
        mp.setattr(sys, "base_prefix", "/usr")
        mp.setattr(torch, "__file__", "/envs/course/lib/site-packages/torch/__init__.py")
        in_venv = f()
        mp.setattr(sys, "base_prefix", "/envs/course")  # prefix == base_prefix: no venv
        not_venv = f()
    finally:
        mp.undo()
    assert in_venv == {
        "python": "/envs/course/bin/python",
        "prefix": "/envs/course",
        "in_virtualenv": True,
        "torch_dir": "/envs/course/lib/site-packages/torch",
    }
    assert not_venv["in_virtualenv"] is False


@known("environment.known_gradient")
def known_gradient_is_3x_squared(f, tmp_path):
    assert_close(f(torch.tensor(2.0)), torch.tensor(12.0), rtol=0, atol=1e-6)  # 3 * 2**2
    x = torch.tensor([[1.0, -1.0], [0.0, 3.0]], dtype=torch.float64)
    grad = f(x)
    assert_close(grad, torch.tensor([[3.0, 3.0], [0.0, 27.0]], dtype=torch.float64), rtol=0, atol=1e-12)
    # the caller's x is left as it was
    tensor_equal(x, torch.tensor([[1.0, -1.0], [0.0, 3.0]], dtype=torch.float64))
    assert x.grad is None and not x.requires_grad


@known("environment.device_smoke_test")
def device_smoke_test_squares_1_to_9(f, tmp_path):
    # [[1,2,3],[4,5,6],[7,8,9]] @ itself, row by column, by hand
    expected = torch.tensor([[30.0, 36.0, 42.0], [66.0, 81.0, 96.0], [102.0, 126.0, 150.0]])
    for device in ("cpu", torch.device("cpu")):
        out = f(device)
        assert out.device.type == "cpu"
        tensor_equal(out, expected)


@known("environment.seeded_draw")
def seeded_draw_gives_the_generators_first_numbers(f, tmp_path):
    assert_close(f(0, 4), torch.tensor(RANDN_SEED0), **PRINTED)
    torch.rand(10)  # whatever ran in between
    assert_close(f(0, 3), torch.tensor(RANDN_SEED0[:3]), **PRINTED)
    assert_close(f(1, 3), torch.tensor(RANDN_SEED1), **PRINTED)
    assert f(1, 3).dtype == torch.float32


@known("environment.seed_check")
def seed_check_tells_reproducible_draws(f, tmp_path):
    def reproducible(seed):
        return torch.randn(3, generator=torch.Generator().manual_seed(seed))

    def unseeded(seed):  # the same seed gives other numbers
        return torch.randn(3)

    def constant(seed):  # another seed gives the same numbers
        return torch.zeros(3)

    calls = []

    def counting(seed):  # depends on how often it was called
        calls.append(seed)
        return torch.tensor([float(seed), float(len(calls))])

    assert f(reproducible) is True
    assert f(unseeded) is False
    assert f(constant) is False
    assert f(counting) is False


# --- 01 tensors -------------------------------------------------------------------------------


@known("tensors.match_reference")
def match_reference_takes_dtype_and_device(f, tmp_path):
    x = torch.tensor([1, 2, 3])
    tensor_equal(f(x, torch.zeros(1, dtype=torch.float64)), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    # float -> int truncates towards zero
    tensor_equal(f(torch.tensor([1.7, -2.5]), torch.zeros(2, 2, dtype=torch.int32)), torch.tensor([1, -2], dtype=torch.int32))
    on_meta = f(torch.tensor([1.0, 2.0]), torch.zeros(1, dtype=torch.float16, device="meta"))
    assert on_meta.device.type == "meta" and on_meta.dtype == torch.float16 and on_meta.shape == (2,)
    tensor_equal(x, torch.tensor([1, 2, 3]))


@known("tensors.independent_copy")
def independent_copy_keeps_values_and_dtype_in_own_memory(f, tmp_path):
    array = np.arange(6, dtype=np.int32).reshape(2, 3).T  # non-contiguous [[0,3],[1,4],[2,5]]
    copy = f(array)
    tensor_equal(copy, torch.tensor([[0, 3], [1, 4], [2, 5]], dtype=torch.int32))
    array[0, 0] = 100
    assert copy[0, 0].item() == 0
    copy[1, 1] = -7
    assert array[1, 1] == 4
    half = f(np.array([0.5, 1.5], dtype=np.float16))
    tensor_equal(half, torch.tensor([0.5, 1.5], dtype=torch.float16))


@known("tensors.flatten_transposed")
def flatten_transposed_of_0_to_5(f, tmp_path):
    x = torch.tensor([[0, 1, 2], [3, 4, 5]])
    tensor_equal(f(x), torch.tensor([0, 3, 1, 4, 2, 5]))
    tensor_equal(f(torch.tensor([[1.5, 2.5]])), torch.tensor([1.5, 2.5]))  # (1, 2) -> T is (2, 1)
    tensor_equal(x, torch.tensor([[0, 1, 2], [3, 4, 5]]))


@known("tensors.remove_batch_dim")
def remove_batch_dim_only_the_first(f, tmp_path):
    tensor_equal(f(torch.tensor([[[7], [8]]])), torch.tensor([[7], [8]]))  # (1, 2, 1) -> (2, 1)
    tensor_equal(f(torch.tensor([[[4.0]]], dtype=torch.float64)), torch.tensor([[4.0]], dtype=torch.float64))
    tensor_equal(f(torch.tensor([5])), torch.tensor(5))  # (1,) -> ()


@known("tensors.outer_sum")
def outer_sum_of_small_vectors(f, tmp_path):
    a = torch.tensor([1, 2])
    b = torch.tensor([10.5, 20.0, 30.0])
    tensor_equal(f(a, b), torch.tensor([[11.5, 21.0, 31.0], [12.5, 22.0, 32.0]]))  # int + float32 -> float32
    tensor_equal(f(torch.tensor([1, 2, 3]), torch.tensor([0, 10])), torch.tensor([[1, 11], [2, 12], [3, 13]]))
    assert f(torch.zeros(0), b).shape == (0, 3)


@known("tensors.residuals")
def residuals_per_sample(f, tmp_path):
    pred = torch.tensor([[3.0], [5.0]])
    target = torch.tensor([1.0, 2.0])
    tensor_equal(f(pred, target), torch.tensor([2.0, 3.0]))  # not the (2, 2) table
    tensor_equal(f(torch.tensor([[4.0]]), torch.tensor([1.5])), torch.tensor([2.5]))
    assert f(torch.zeros(0, 1), torch.zeros(0)).shape == (0,)


@known("tensors.checked_mse")
def checked_mse_value_and_shape_error(f, tmp_path):
    # ((1-1)**2 + (2-0)**2 + (3-0)**2) / 3 = 13 / 3
    loss = f(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 0.0, 0.0]))
    assert loss.shape == ()
    assert_close(loss, torch.tensor(13.0 / 3.0), rtol=0, atol=1e-6)
    with pytest.raises((AssertionError, ValueError)) as error:
        f(torch.zeros(3), torch.zeros(3, 1))
    message = str(error.value)
    assert "(3,)" in message or "[3]" in message, message
    assert "(3, 1)" in message or "[3, 1]" in message, message


@known("tensors.zero_negative_rows")
def zero_negative_rows_zeroes_and_counts_in_place(f, tmp_path):
    # row sums -1.5, 3, 0, -0.5: rows 0 and 3 are negative; row 2 sums to exactly 0 and stays
    x = torch.tensor([[1.0, -3.0, 0.5], [2.0, 1.0, 0.0], [1.0, -1.0, 0.0], [-0.5, -0.25, 0.25]])
    assert int(f(x)) == 2
    tensor_equal(x, torch.tensor([[0.0, 0.0, 0.0], [2.0, 1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 0.0, 0.0]]))
    assert int(f(x)) == 0  # nothing negative is left
    base = torch.tensor([[1.0, 4.0], [-3.0, 1.0]])
    assert int(f(base.T)) == 1  # base.T = [[1, -3], [4, 1]]: row 0 sums to -2
    tensor_equal(base, torch.tensor([[0.0, 4.0], [0.0, 1.0]]))  # written through the view


@known("tensors.best_match")
def best_match_of_small_dot_products(f, tmp_path):
    q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # (1, 2, 2)
    k = torch.tensor([[[2.0, 1.0], [0.0, 3.0], [-1.0, -1.0]]])  # (1, 3, 2)
    # query [1, 0] scores 2, 0, -1; query [0, 1] scores 1, 3, -1
    tensor_equal(f(q, k), torch.tensor([[0, 1]]))
    # the same (3, 2) keys for a batch of two single queries: [1, 1] scores 1, 2, -2; [-1, 0] scores -1, 0, 2
    shared = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-2.0, 0.0]])
    tensor_equal(f(torch.tensor([[[1.0, 1.0]], [[-1.0, 0.0]]]), shared), torch.tensor([[1], [2]]))


# --- 02 autograd ------------------------------------------------------------------------------


@known("autograd.new_parameter")
def new_parameter_is_randn_times_001(f, tmp_path):
    torch.manual_seed(0)
    w = f((2, 2))
    expected = torch.tensor([[RANDN_SEED0[0], RANDN_SEED0[1]], [RANDN_SEED0[2], RANDN_SEED0[3]]]) * 0.01
    assert_close(w.detach(), expected, rtol=0, atol=1e-6)
    assert w.dtype == torch.float32 and w.requires_grad and w.is_leaf and w.grad_fn is None
    torch.manual_seed(1)
    assert_close(f((3,)).detach(), torch.tensor([0.006614, 0.002669, 0.000617]), rtol=0, atol=1e-6)


@known("autograd.fresh_gradient")
def fresh_gradient_of_w_times_x_is_x(f, tmp_path):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    first = f(w, torch.tensor([3.0, -4.0]))
    assert_close(first, torch.tensor([3.0, -4.0]), rtol=0, atol=0)
    again = f(w, torch.tensor([3.0, -4.0]))  # not [6, -8]
    assert_close(again, torch.tensor([3.0, -4.0]), rtol=0, atol=0)
    other = f(w, torch.tensor([0.5, 0.5]))
    assert_close(other, torch.tensor([0.5, 0.5]), rtol=0, atol=0)
    assert_close(first, torch.tensor([3.0, -4.0]), rtol=0, atol=0)  # what it returned stays
    w64 = torch.tensor([[1.0]], dtype=torch.float64, requires_grad=True)
    assert_close(f(w64, torch.tensor([[2.5]], dtype=torch.float64)), torch.tensor([[2.5]], dtype=torch.float64), rtol=0, atol=0)


@known("autograd.sgd_update")
def sgd_update_moves_by_lr_times_grad(f, tmp_path):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    w.grad = torch.tensor([0.5, -1.0])
    same = w
    assert f(w, 0.1) is None
    assert_close(w.detach(), torch.tensor([0.95, 2.1]), rtol=0, atol=1e-6)  # 1 - 0.05, 2 + 0.1
    f(w, 0.1)
    assert_close(w.detach(), torch.tensor([0.9, 2.2]), rtol=0, atol=1e-6)
    assert w is same and w.is_leaf and w.requires_grad and w.grad_fn is None
    p = nn.Parameter(torch.tensor([3.0], dtype=torch.float64))
    p.grad = torch.tensor([2.0], dtype=torch.float64)
    f(p, 0.25)
    assert_close(p.detach(), torch.tensor([2.5], dtype=torch.float64), rtol=0, atol=1e-12)


@known("autograd.softplus")
def softplus_values_and_sigmoid_gradient(f, tmp_path):
    x = torch.tensor([0.0, 1.0, -1.0, 30.0], dtype=torch.float64, requires_grad=True)
    y = f(x)
    assert y.requires_grad
    # log 2, log(1 + e), log(1 + 1/e) = log(1 + e) - 1, and about 30
    expected = torch.tensor([LOG2, 1.3132616875182228, 0.3132616875182228, 30.0], dtype=torch.float64)
    assert_close(y.detach(), expected, rtol=0, atol=1e-9)
    y.sum().backward()
    # sigmoid: 1/2, 1/(1 + 1/e), 1/(1 + e), about 1
    sigmoid = torch.tensor([0.5, 0.7310585786300049, 0.2689414213699951, 1.0], dtype=torch.float64)
    assert_close(x.grad, sigmoid, rtol=0, atol=1e-9)
    x32 = torch.tensor([0.0], requires_grad=True)
    assert_close(f(x32).detach(), torch.tensor([LOG2]), rtol=0, atol=1e-6)


@known("autograd.input_gradient")
def input_gradient_of_a_linear_layer_is_its_column_sums(f, tmp_path):
    layer = linear(3, 2, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [0.5, -0.5])
    x = torch.tensor([[1.0, 0.0, -1.0], [2.0, 2.0, 2.0]])
    # d/dx of the sum of x @ W.T + b: every row is W's column sums, [1 + 4, 2 + 5, 3 + 6]
    assert_close(f(layer, x), torch.tensor([[5.0, 7.0, 9.0], [5.0, 7.0, 9.0]]), rtol=0, atol=1e-6)
    assert layer.weight.grad is None and layer.bias.grad is None
    assert not x.requires_grad and x.grad is None
    tensor_equal(x, torch.tensor([[1.0, 0.0, -1.0], [2.0, 2.0, 2.0]]))
    # d(t**3)/dt = 3 t**2: [12, 3]; an old gradient in t.grad stays as it was
    t = torch.tensor([2.0, -1.0], dtype=torch.float64, requires_grad=True)
    t.grad = torch.tensor([7.0, 7.0], dtype=torch.float64)
    tensor_equal(f(lambda v: v**3, t), torch.tensor([12.0, 3.0], dtype=torch.float64))
    tensor_equal(t.grad, torch.tensor([7.0, 7.0], dtype=torch.float64))
    assert t.requires_grad
    # a single number: d mean(t**2) / dt = 2t / 2 = t
    assert_close(f(lambda v: (v * v).mean(), torch.tensor([1.0, 3.0])), torch.tensor([1.0, 3.0]), rtol=0, atol=1e-6)


# --- 03 models --------------------------------------------------------------------------------


def _linears(module):
    return [m for m in module.modules() if isinstance(m, nn.Linear)]


@known("models.SkipBlock")
def skip_block_counts_and_adds_its_input(f, tmp_path):
    assert sum(p.numel() for p in f(3, 4).parameters()) == 31  # (3*4 + 4) + (4*3 + 3)
    block = f(1, 2)
    assert sum(p.numel() for p in block.parameters()) == 7  # (1*2 + 2) + (2*1 + 1)
    by_shape = {tuple(layer.weight.shape): layer for layer in _linears(block)}
    expand, project = by_shape[(2, 1)], by_shape[(1, 2)]
    with torch.no_grad():
        expand.weight.copy_(torch.tensor([[1.0], [-1.0]]))
        expand.bias.zero_()
        project.weight.copy_(torch.tensor([[2.0, 3.0]]))
        project.bias.fill_(0.5)
    # x + 2 relu(x) + 3 relu(-x) + 0.5
    x = torch.tensor([[1.0], [-2.0], [0.0]])
    assert_close(block(x), torch.tensor([[3.5], [4.5], [0.5]]), rtol=0, atol=1e-6)
    tensor_equal(x, torch.tensor([[1.0], [-2.0], [0.0]]))


@known("models.Tower")
def tower_counts_and_relus_every_layer(f, tmp_path):
    assert sum(p.numel() for p in f(2, 3).parameters()) == 18  # 3 * (2*2 + 2)
    assert sum(p.numel() for p in f(4, 2).parameters()) == 40  # 2 * (4*4 + 4)
    tower = f(2, 3)
    layers = _linears(tower)
    assert len(layers) == 3
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(torch.eye(2))
            layer.bias.copy_(torch.tensor([1.0, -1.0]))
    # [2, 0.5] -> [3, 0] -> [4, 0] -> [5, 0]: the second feature is cut by each ReLU, the last too
    assert_close(tower(torch.tensor([[2.0, 0.5]])), torch.tensor([[5.0, 0.0]]), rtol=0, atol=1e-6)


@known("models.cross_entropy_from_logits")
def cross_entropy_of_even_logits_is_log_classes(f, tmp_path):
    logits = torch.tensor([[0.0, 0.0]], requires_grad=True)
    loss = f(logits, torch.tensor([0]))
    assert loss.shape == ()
    assert_close(loss.detach(), torch.tensor(LOG2), rtol=0, atol=1e-6)
    loss.backward()
    assert_close(logits.grad, torch.tensor([[-0.5, 0.5]]), rtol=0, atol=1e-6)  # softmax - one-hot
    assert_close(f(torch.zeros(1, 4), torch.tensor([2])), torch.tensor(math.log(4)), rtol=0, atol=1e-6)
    # per example: [0, log 2] -> mean log(2)/2
    batch = torch.tensor([[1000.0, 0.0], [0.0, 0.0]])
    assert_close(f(batch, torch.tensor([0, 1])), torch.tensor(LOG2 / 2), rtol=0, atol=1e-6)
    # the wrong class at +1000: log(e**1000 + 1) = 1000
    assert_close(f(torch.tensor([[1000.0, 0.0]]), torch.tensor([1])), torch.tensor(1000.0), rtol=0, atol=1e-3)


@known("models.multilabel_loss")
def multilabel_loss_of_even_logits_is_log_two(f, tmp_path):
    logits = torch.tensor([[0.0, 0.0]], requires_grad=True)
    loss = f(logits, torch.tensor([[1.0, 0.0]]))
    assert loss.shape == ()
    assert_close(loss.detach(), torch.tensor(LOG2), rtol=0, atol=1e-6)  # -log(1/2) per entry
    loss.backward()
    assert_close(logits.grad, torch.tensor([[-0.25, 0.25]]), rtol=0, atol=1e-6)  # (sigmoid - t) / 2
    # integer and bool targets count as 0 and 1; a float64 loss for float64 logits
    assert_close(f(torch.zeros(2, 3), torch.tensor([[1, 0, 1], [0, 0, 1]])), torch.tensor(LOG2), rtol=0, atol=1e-6)
    tensor_equal(f(torch.zeros(1, 1, dtype=torch.float64), torch.tensor([[True]])),
                 torch.tensor(LOG2, dtype=torch.float64))
    # a wrong label at logit +1000 costs log(1 + e**1000) = 1000; a right one at -1000 costs 0
    assert_close(f(torch.tensor([[1000.0, -1000.0]]), torch.tensor([[0.0, 0.0]])), torch.tensor(500.0),
                 rtol=0, atol=1e-3)


@known("models.decay_groups")
def decay_groups_split_weights_from_the_rest(f, tmp_path):
    first, norm, last = nn.Linear(2, 3), nn.LayerNorm(3), nn.Linear(3, 1, bias=False)
    model = nn.Sequential(first, norm, last)
    groups = f(model, 0.1)
    assert len(groups) == 2
    by_decay = {group["weight_decay"]: group["params"] for group in groups}
    assert set(by_decay) == {0.1, 0.0}
    assert {id(p) for p in by_decay[0.1]} == {id(first.weight), id(last.weight)}
    assert len(by_decay[0.1]) == 2
    assert {id(p) for p in by_decay[0.0]} == {id(first.bias), id(norm.weight), id(norm.bias)}
    assert len(by_decay[0.0]) == 3
    # one SGD step with zero gradients, lr 1: decayed tensors shrink by 1 - 0.1, the others stay
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(1.0)
            p.grad = torch.zeros_like(p)
    torch.optim.SGD(groups, lr=1.0).step()
    for p in (first.weight, last.weight):
        assert_close(p.detach(), torch.full_like(p, 0.9), rtol=0, atol=1e-6)
    for p in (first.bias, norm.weight, norm.bias):
        assert_close(p.detach(), torch.full_like(p, 1.0), rtol=0, atol=0)
    shared = nn.Linear(2, 2)
    twice = {group["weight_decay"]: group["params"] for group in f(nn.Sequential(shared, nn.ReLU(), shared), 0.5)}
    assert len(twice[0.5]) == 1 and len(twice[0.0]) == 1  # each parameter once


# --- 04 training loop -------------------------------------------------------------------------


@known("training_loop.train_step")
def train_step_on_w_times_x(f, tmp_path):
    model = linear(1, 1, [[1.0]])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.tensor([[2.0]]), torch.tensor([[0.0]])
    # loss (2w)**2 = 4, gradient 8w = 8, w = 1 - 0.1 * 8 = 0.2
    loss = f(model, optimizer, nn.MSELoss(), x, y)
    assert type(loss) is float
    assert loss == pytest.approx(4.0, abs=1e-6)
    assert_close(model.weight.detach(), torch.tensor([[0.2]]), rtol=0, atol=1e-6)
    # loss (0.4)**2 = 0.16, gradient 8 * 0.2 = 1.6, w = 0.2 - 0.16 = 0.04 (no leftover gradient)
    assert f(model, optimizer, nn.MSELoss(), x, y) == pytest.approx(0.16, abs=1e-6)
    assert_close(model.weight.detach(), torch.tensor([[0.04]]), rtol=0, atol=1e-6)


@known("training_loop.evaluate")
def evaluate_in_eval_mode_without_a_graph(f, tmp_path):
    layer = linear(1, 1, [[1.0]])
    model = nn.Sequential(nn.Dropout(0.5), layer)
    x, y = torch.tensor([[2.0]]), torch.tensor([[0.0]])
    model.train()
    torch.manual_seed(0)
    # eval mode: dropout passes x as it is, prediction 2, loss 4 (train mode gives 0 or 16)
    loss = f(model, x, y, nn.MSELoss())
    assert type(loss) is float
    assert loss == 4.0
    assert model.training is True and model[0].training is True
    assert layer.weight.grad is None
    model.eval()
    assert f(model, x, y, nn.MSELoss()) == 4.0
    assert model.training is False
    # batch norm with its initial running statistics (mean 0, variance 1): x / sqrt(1 + 1e-5);
    # ((1**2 + 3**2) / 2) / (1 + 1e-5); in train mode it would be about 1 and move the statistics
    norm = nn.BatchNorm1d(1)
    loss = f(norm, torch.tensor([[1.0], [3.0]]), torch.tensor([[0.0], [0.0]]), nn.MSELoss())
    assert loss == pytest.approx(5.0 / (1 + 1e-5), rel=1e-5)
    tensor_equal(norm.running_mean, torch.tensor([0.0]))
    assert norm.num_batches_tracked.item() == 0 and norm.training is True


@known("training_loop.EarlyStopping")
def early_stopping_on_written_out_losses(f, tmp_path):
    def run(patience, losses):
        stopper = f(patience)
        return stopper, [stopper.step(loss) for loss in losses]

    stopper, says = run(2, [1.0, 0.8, 0.9, 0.85])  # the task's example
    assert says == [False, False, False, True]
    assert stopper.best_epoch == 2 and stopper.best_loss == 0.8
    stopper, says = run(2, [3.0, 2.0, 2.5, 2.6])
    assert says == [False, False, False, True]
    assert stopper.best_epoch == 2 and stopper.best_loss == 2.0
    stopper, says = run(1, [1.0, 1.0])  # an equal loss is no progress
    assert says == [False, True] and stopper.best_epoch == 1
    _, says = run(2, [1.0, 2.0, 3.0, 4.0])  # keeps saying stop
    assert says == [False, False, True, True]
    stopper, says = run(2, [0.5, 0.0, 0.0, 0.0])  # a loss of exactly 0.0 is an improvement
    assert says == [False, False, False, True]
    assert stopper.best_loss == 0.0 and stopper.best_epoch == 2
    _, says = run(2, [math.inf, math.inf, math.inf])
    assert says == [False, True, True]
    stopper, says = run(3, [5.0, 6.0, 4.0, 4.5, 4.2, 3.9])  # improvement resets the count
    assert says == [False, False, False, False, False, False] and stopper.best_epoch == 6


# --- 05 speed and memory ----------------------------------------------------------------------


@known("speed_and_memory.training_memory_bytes")
def training_memory_bytes_of_a_3x4_linear(f, tmp_path):
    model = nn.Linear(3, 4)  # 12 + 4 = 16 float32 numbers = 64 bytes
    assert f(model, "sgd") == 128  # parameters + gradients
    assert f(model, "momentum") == 192  # + one buffer
    assert f(model, "adam") == 256  # + two moments
    assert f(nn.Linear(3, 4).to(torch.float64), "sgd") == 256  # 16 * 8 * 2
    assert f(nn.Linear(3, 4).to(torch.bfloat16), "adam") == 128  # 16 * 2 * 4
    frozen = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 1))
    frozen[0].requires_grad_(False)
    assert f(frozen, "adam") == 64 + 5 * 4 * 4  # frozen: the weights only
    assert frozen[0].weight.requires_grad is False
    shared = nn.Linear(2, 2)
    assert f(nn.Sequential(shared, shared), "sgd") == 6 * 4 * 2  # counted once


@known("speed_and_memory.accumulation_step")
def accumulation_step_averages_the_micro_batches(f, tmp_path):
    model = linear(1, 1, [[1.0]])
    model.weight.grad = torch.tensor([[100.0]])  # an old gradient, to be cleared
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = [(torch.tensor([[1.0]]), torch.tensor([[0.0]])), (torch.tensor([[3.0]]), torch.tensor([[0.0]]))]
    # big batch loss ((w)**2 + (3w)**2) / 2 = 5 w**2, gradient 10 w = 10, w = 1 - 0.05 * 10 = 0.5
    assert f(model, optimizer, nn.MSELoss(), batches) is None
    assert_close(model.weight.detach(), torch.tensor([[0.5]]), rtol=0, atol=1e-6)
    f(model, optimizer, nn.MSELoss(), batches)  # gradient 5, w = 0.5 - 0.25
    assert_close(model.weight.detach(), torch.tensor([[0.25]]), rtol=0, atol=1e-6)


@known("speed_and_memory.scaled_clipped_step")
def scaled_clipped_step_unscales_clips_and_skips(f, tmp_path):
    model = linear(1, 1, [[0.0]])
    model.weight.grad = torch.tensor([[math.inf]])  # left by a skipped step, to be cleared
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    x = torch.tensor([[1.0]])
    # loss (w - 2)**2 at w = 0: gradient -4 (scaled: -16, unscaled: -4), norm 4 clipped to 1:
    # w = 0 + 1 * 1 = 1 (clipping the scaled -16 instead would give w = 1/4)
    assert f(model, optimizer, scaler, nn.MSELoss(), (x, torch.tensor([[2.0]])), 1.0) is None
    assert_close(model.weight.detach(), torch.tensor([[1.0]]), rtol=0, atol=1e-5)
    assert scaler.get_scale() == 4.0
    # at w = 1: gradient -2, clipped to -1: w = 2
    f(model, optimizer, scaler, nn.MSELoss(), (x, torch.tensor([[2.0]])), 1.0)
    assert_close(model.weight.detach(), torch.tensor([[2.0]]), rtol=0, atol=1e-5)
    # target 1e5: gradient 2 * (2 - 1e5) * 4 is beyond float16's 65504: inf, step skipped, scale halved
    f(model, optimizer, scaler, nn.MSELoss(), (x, torch.tensor([[1e5]])), 1.0)
    assert_close(model.weight.detach(), torch.tensor([[2.0]]), rtol=0, atol=1e-5)
    assert scaler.get_scale() == 2.0
    # at w = 2, target 3: gradient -2, clipped to -1: w = 3 (the inf of the skipped step is gone)
    f(model, optimizer, scaler, nn.MSELoss(), (x, torch.tensor([[3.0]])), 1.0)
    assert_close(model.weight.detach(), torch.tensor([[3.0]]), rtol=0, atol=1e-5)
    assert scaler.get_scale() == 2.0


@known("speed_and_memory.split_step_time")
def split_step_time_with_timed_sleeps(f, tmp_path):
    seen = []

    def loader():  # no len(); the first batch is the slowest
        for batch, wait in zip((0, 1, 2), (0.2, 0.02, 0.02)):
            time.sleep(wait)
            yield batch

    def step(batch):
        seen.append(batch)
        time.sleep(0.05)

    slack = 1e-3  # clock granularity; lower bounds only
    data, compute = f(loader(), step)
    assert seen == [0, 1, 2]
    assert data >= 0.24 - slack  # 0.2 + 0.02 + 0.02
    assert compute >= 0.15 - slack  # 3 * 0.05
    shapes = []
    data, compute = f(DataLoader(list(range(6)), batch_size=2), lambda batch: shapes.append(batch.tolist()))
    assert shapes == [[0, 1], [2, 3], [4, 5]]
    assert data >= 0 and compute >= 0
    called = []
    data, compute = f(iter(()), called.append)  # an empty loader: no step, no compute time
    assert called == [] and compute == 0 and data >= 0


# --- 06 debugging -----------------------------------------------------------------------------


@known("debugging.flat_features")
def flat_features_of_conv_stacks(f, tmp_path):
    stack = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.MaxPool2d(2))
    # 10x10 -> conv 3x3 -> 8x8 -> pool -> 4x4, 8 channels: 8 * 4 * 4
    out = f(stack, (3, 10, 10))
    assert type(out) is int and out == 128
    with_norm = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Dropout(0.5), nn.MaxPool2d(2))
    with_norm.train()
    with torch.no_grad():
        assert f(with_norm, (1, 6, 6)) == 36  # 4 * 3 * 3
        assert torch.is_grad_enabled() is False
    assert torch.is_grad_enabled() is True
    assert with_norm.training is True and with_norm[1].training is True
    tensor_equal(with_norm[1].running_mean, torch.zeros(4))
    tensor_equal(with_norm[1].running_var, torch.ones(4))
    assert with_norm[1].num_batches_tracked.item() == 0


@known("debugging.PositionWeights")
def position_weights_t_plus_1_over_length(f, tmp_path):
    module = f(16)
    # length 4: weights 1/4, 2/4, 3/4, 4/4
    out = module(torch.ones(1, 4, 2))
    assert_close(out, torch.tensor([[[0.25, 0.25], [0.5, 0.5], [0.75, 0.75], [1.0, 1.0]]]), rtol=0, atol=1e-7)
    x = torch.tensor([[[2.0, 4.0], [2.0, 4.0]]], dtype=torch.float64, requires_grad=True)
    out = module(x)  # length 2: weights 1/2, 1
    assert out.dtype == torch.float64
    assert_close(out.detach(), torch.tensor([[[1.0, 2.0], [2.0, 4.0]]], dtype=torch.float64), rtol=0, atol=0)
    out.sum().backward()
    assert_close(x.grad, torch.tensor([[[0.5, 0.5], [1.0, 1.0]]], dtype=torch.float64), rtol=0, atol=0)
    half = f(16).to(torch.bfloat16)(torch.ones(1, 2, 1, dtype=torch.bfloat16))
    tensor_equal(half, torch.tensor([[[0.5], [1.0]]], dtype=torch.bfloat16))
    meta = f(16).to("meta")(torch.ones(1, 3, 2, device="meta"))
    assert meta.device.type == "meta" and meta.shape == (1, 3, 2)


@known("debugging.layer_output_shapes")
def layer_output_shapes_by_hand(f, tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)))
    got = f(model, torch.ones(5, 3))
    assert [(str(name), tuple(shape)) for name, shape in got] == [("0", (5, 4)), ("1", (5, 4)), ("2.0", (5, 2))]
    assert not any(m._forward_hooks for m in model.modules())
    broken = nn.Sequential(nn.Linear(3, 4), nn.Linear(5, 1))
    with pytest.raises(RuntimeError):
        f(broken, torch.ones(2, 3))
    assert not any(m._forward_hooks for m in broken.modules())


@known("debugging.drop_non_finite")
def drop_non_finite_keeps_clean_rows(f, tmp_path):
    nan, inf = math.nan, math.inf
    x = torch.tensor([[1.0, 2.0], [nan, 0.0], [3.0, inf], [4.0, 5.0], [-inf, 6.0]])
    y = torch.tensor([10, 11, 12, 13, 14])
    kept_x, kept_y = f(x, y)
    tensor_equal(kept_x, torch.tensor([[1.0, 2.0], [4.0, 5.0]]))
    tensor_equal(kept_y, torch.tensor([10, 13]))
    assert torch.isnan(x[1, 0])  # left unchanged
    images = torch.zeros(3, 1, 2, 2)
    images[1, 0, 1, 1] = nan
    kept_x, kept_y = f(images, torch.tensor([0, 1, 2]))
    assert kept_x.shape == (2, 1, 2, 2)
    tensor_equal(kept_y, torch.tensor([0, 2]))
    kept_x, kept_y = f(torch.tensor([[1, 2], [3, 4]]), torch.tensor([7, 8]))  # integers: all finite
    tensor_equal(kept_x, torch.tensor([[1, 2], [3, 4]]))
    tensor_equal(kept_y, torch.tensor([7, 8]))
    kept_x, kept_y = f(torch.tensor([[nan]], dtype=torch.float64), torch.tensor([1]))
    assert kept_x.shape == (0, 1) and kept_x.dtype == torch.float64 and kept_y.shape == (0,)


@known("debugging.clipped_step")
def clipped_step_scales_a_3_4_5_gradient(f, tmp_path):
    x = torch.tensor([[3.0, 4.0]])
    model = linear(2, 1, [[0.0, 0.0]])
    model.weight.grad = torch.tensor([[100.0, 100.0]])  # old gradient, to be cleared
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    # gradient of w . x is x = [3, 4], norm 5; clipped to norm 1: [0.6, 0.8]
    norm = f(model, optimizer, model(x).sum(), 1.0)
    assert float(norm) == pytest.approx(5.0, abs=1e-5)
    assert_close(model.weight.detach(), torch.tensor([[-0.6, -0.8]]), rtol=0, atol=1e-5)
    # below max_norm: the full gradient
    model = linear(2, 1, [[0.0, 0.0]])
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    norm = f(model, optimizer, model(x).sum(), 10.0)
    assert float(norm) == pytest.approx(5.0, abs=1e-5)
    assert_close(model.weight.detach(), torch.tensor([[-3.0, -4.0]]), rtol=0, atol=1e-5)


@known("debugging.seeded_loader")
def seeded_loader_order_depends_on_seed_alone(f, tmp_path):
    loader = f(list(range(5)), 2, 0)
    assert isinstance(loader, DataLoader)
    batches = [batch.tolist() for batch in loader]
    assert [len(batch) for batch in batches] == [2, 2, 1]
    assert sorted(sum(batches, [])) == [0, 1, 2, 3, 4]
    data = list(range(20))

    def order(loader):
        return sum((batch.tolist() for batch in loader), [])

    torch.manual_seed(0)
    a, b = f(data, 3, 7), f(data, 3, 7)  # both made before either is used
    torch.manual_seed(99)
    torch.rand(5)
    c = f(data, 3, 7)
    first = order(a)
    assert first != data  # shuffled
    assert order(b) == first and order(c) == first
    assert order(a) != first  # the next epoch is another order
    assert order(f(data, 3, 8)) != first
    torch.manual_seed(0)
    d = f(data, 3, 7)
    order(d)
    order(d)
    assert_close(torch.rand(3), torch.tensor(RAND_SEED0), **PRINTED)  # the global generator untouched


# --- 07 reliable practice ---------------------------------------------------------------------


@known("reliable_practice.save_weights")
def save_weights_writes_the_state_dict(f, tmp_path):
    model = nn.Sequential(linear(2, 1, [[1.0, 2.0]], [3.0]), nn.BatchNorm1d(1))
    with torch.no_grad():
        model[1].running_mean.fill_(0.5)
        model[1].running_var.fill_(2.0)
        model[1].num_batches_tracked.fill_(7)
    model.eval()
    path = tmp_path / "weights.pt"
    assert f(model, path) is None
    assert model.training is False
    saved = torch.load(path, weights_only=True)
    assert set(saved) == {
        "0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var", "1.num_batches_tracked",
    }
    tensor_equal(saved["0.weight"], torch.tensor([[1.0, 2.0]]))
    tensor_equal(saved["0.bias"], torch.tensor([3.0]))
    tensor_equal(saved["1.running_mean"], torch.tensor([0.5]))
    tensor_equal(saved["1.num_batches_tracked"], torch.tensor(7))
    fresh = nn.Sequential(nn.Linear(2, 1), nn.BatchNorm1d(1))
    fresh.load_state_dict(saved, strict=True)
    fresh.eval()
    # linear: 1 + 2 + 3 = 6; batch norm: (6 - 0.5) / sqrt(2 + 1e-5) = 3.88908...
    assert_close(fresh(torch.tensor([[1.0, 1.0]])), torch.tensor([[5.5 / math.sqrt(2.00001)]]), rtol=1e-6, atol=0)
    with torch.no_grad():
        model[0].weight.zero_()
    f(model, path)  # the same path again
    tensor_equal(torch.load(path, weights_only=True)["0.weight"], torch.tensor([[0.0, 0.0]]))


@known("reliable_practice.resume")
def resume_puts_every_state_back(f, tmp_path):
    def parts(weight, loader_seed, init_scale):
        model = linear(1, 1, [[weight]])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
        loader = DataLoader(list(range(4)), batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(loader_seed))
        return model, optimizer, scheduler, scaler, loader

    model, optimizer, scheduler, scaler, loader = parts(0.5, 0, 8.0)
    model.weight.grad = torch.tensor([[2.0]])
    optimizer.step()  # momentum buffer 2, w = 0.5 - 0.1 * 2 = 0.3
    scheduler.step()
    scheduler.step()  # lr 0.1 * 0.5 * 0.5 = 0.025
    path = tmp_path / "checkpoint.pt"
    torch.manual_seed(0)
    save_checkpoint(path, 4, model, optimizer, scheduler, scaler, loader)  # epoch 4 finished

    torch.manual_seed(123)
    model, optimizer, scheduler, scaler, loader = parts(9.0, 5, 1024.0)
    start = f(path, model, optimizer, scheduler, scaler, loader)
    assert start == 5
    assert_close(model.weight.detach(), torch.tensor([[0.3]]), rtol=0, atol=1e-6)
    assert_close(optimizer.state[model.weight]["momentum_buffer"], torch.tensor([[2.0]]), rtol=0, atol=0)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.025)
    assert scheduler.last_epoch == 2
    assert scaler.get_scale() == 8.0
    assert_close(torch.rand(3), torch.tensor(RAND_SEED0), **PRINTED)
    assert_close(torch.rand(3, generator=loader.generator), torch.tensor(RAND_SEED0), **PRINTED)


@known("reliable_practice.remap_keys")
def remap_keys_renames_prefixes_only(f, tmp_path):
    t = [torch.tensor([float(i)]) for i in range(5)]
    given = {"hidden.weight": t[0], "hidden.bias": t[1], "block.hidden.weight": t[2], "out.weight": t[3], "other": t[4]}
    out = f(given, {"hidden.": "encoder.", "out.": "head."})
    assert list(out) == ["encoder.weight", "encoder.bias", "block.hidden.weight", "head.weight", "other"]
    for key, tensor in zip(out, t):
        assert out[key] is tensor  # the same tensors, not copies
    assert list(given) == ["hidden.weight", "hidden.bias", "block.hidden.weight", "out.weight", "other"]
    levels = f({"layers.0.weight": t[0], "layers.10.weight": t[1]}, {"layers.0.": "first."})
    assert list(levels) == ["first.weight", "layers.10.weight"]
    shifted = f({"0.weight": t[0], "1.weight": t[1]}, {"0.": "1.", "1.": "2."})
    assert list(shifted) == ["1.weight", "2.weight"]  # renamed once, not again
    assert shifted["1.weight"] is t[0] and shifted["2.weight"] is t[1]
    same = f(given, {})
    assert same == given and same is not given


# --- exercises that declare their known answers (the quick path: course_utils.exercises.quick) ---


def _declared(pairs):
    def known_answers_declared_with_the_exercise(f, tmp_path):
        for arguments, expected in pairs:
            got = f(*arguments)
            if isinstance(expected, torch.Tensor):
                assert_close(got, expected, rtol=1e-6, atol=1e-6, equal_nan=True)
            else:
                assert got == expected, f"{got!r} != {expected!r}"

    return known_answers_declared_with_the_exercise


for _id, _exercise in EXERCISES.items():
    if getattr(_exercise, "known_answers", ()):
        known(_id)(_declared(_exercise.known_answers))


# --- the tests --------------------------------------------------------------------------------

CASES = [(exercise_id, case) for exercise_id, cases in KNOWN.items() for case in cases]


@pytest.mark.parametrize(
    "exercise_id, case", CASES, ids=[f"{exercise_id}:{case.__name__}" for exercise_id, case in CASES]
)
def test_reference_gives_the_known_answer(exercise_id, case, tmp_path):
    case(EXERCISES[exercise_id].reference, tmp_path)


def test_every_exercise_has_a_known_answer():
    missing = sorted(set(EXERCISES) - set(KNOWN))
    unknown = sorted(set(KNOWN) - set(EXERCISES))
    assert not missing, f"exercises without a known-answer case in {__name__}: {missing}"
    assert not unknown, f"known-answer cases for exercises that do not exist: {unknown}"
    assert EXERCISES, "all_exercises() found no exercise"
