"""Chapter 02, A1 — the catalogue of ``new_parameter``: right answers, wrong ones and what their message says."""

import math

import numpy as np
import pytest
import torch

from course_utils.exercises import autograd as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- new_parameter (A1) ------------------------------------------------------------------------
def as_module_parameter(shape):
    return torch.nn.Parameter(torch.randn(*shape) * 0.01)


def in_place_then_track(shape):
    return torch.randn(shape).mul_(0.01).requires_grad_()


def normal_with_flag(shape):
    return torch.normal(0.0, 0.01, size=shape, requires_grad=True)


def detached_copy(shape):
    return (torch.randn(shape, requires_grad=True) * 0.01).detach().requires_grad_()


def init_normal(shape):
    weight = torch.empty(shape)
    torch.nn.init.normal_(weight, mean=0.0, std=0.01)
    weight.requires_grad = True
    return weight


def scaled_after_tracking(shape):
    return torch.randn(shape, requires_grad=True) * 0.01


def never_tracked(shape):
    return torch.randn(shape) * 0.01


def unscaled(shape):
    return torch.randn(shape, requires_grad=True)


def uniform(shape):
    return (torch.rand(shape) * 0.01).requires_grad_()


def in_place_on_leaf(shape):
    return torch.randn(shape, requires_grad=True).mul_(0.01)


def double(shape):
    return (torch.randn(shape, dtype=torch.float64) * 0.01).requires_grad_()


def wrong_shape(shape):
    return (torch.randn(10) * 0.01).requires_grad_()


_made = {}


def cached_per_shape(shape):
    if shape not in _made:  # "no need to draw the same shape twice"
        _made[shape] = (torch.randn(shape) * 0.01).requires_grad_()
    return _made[shape]


def seeded_inside(shape):
    torch.manual_seed(0)  # "so my results are reproducible"
    return (torch.randn(shape) * 0.01).requires_grad_()


def with_numpy(shape):
    values = np.random.normal(0.0, 0.01, size=shape).astype(np.float32)
    return torch.from_numpy(values).requires_grad_()


def constant_small(shape):
    return torch.full(shape, 0.01, requires_grad=True)


# -- round 2: answers outside testers wrote ----------------------------------------------------
def unpacked_shape(shape):
    return (torch.randn(*shape) * 0.01).requires_grad_(True)


@torch.no_grad()
def under_a_no_grad_decorator(shape):
    return (torch.randn(shape) * 0.01).requires_grad_()


def scaled_through_data(shape):
    weight = torch.randn(shape, requires_grad=True)
    weight.data *= 0.01
    return weight


def uniform_with_the_same_spread(shape):
    return ((torch.rand(shape) * 2 - 1) * 0.01 * 3 ** 0.5).requires_grad_()  # std 0.01 too


def grad_mode_switched_off(shape):
    torch.set_grad_enabled(False)  # "nothing here needs recording"
    return (torch.randn(shape) * 0.01).requires_grad_()


_buffers = {}


def refilled_in_place(shape):
    if shape not in _buffers:
        _buffers[shape] = torch.empty(shape).requires_grad_()
    with torch.no_grad():
        _buffers[shape].normal_(0.0, 0.01)  # new numbers, but the same tensor every time
    return _buffers[shape]


def half_precision(shape):
    return (torch.randn(shape) * 0.01).half().requires_grad_()


_own_generator = torch.Generator().manual_seed(1)


def own_generator(shape):
    return (torch.randn(shape, generator=_own_generator) * 0.01).requires_grad_()


# -- round 3 (tester X) ----------------------------------------------------------------------
def empty_then_normal(shape):
    return torch.empty(shape).normal_(0, 0.01).requires_grad_()


def divided_by_100_then_flag(shape):
    w = torch.randn(shape) / 100
    w.requires_grad = True
    return w


def scaled_under_no_grad_after_tracking(shape):
    w = torch.randn(shape, requires_grad=True)
    with torch.no_grad():
        w *= 0.01
    return w


def view_of_the_leaf(shape):
    w = (torch.randn(shape) * 0.01).requires_grad_()
    return w.view(w.shape)


def clone_of_the_leaf(shape):
    return (torch.randn(shape) * 0.01).requires_grad_().clone()


def only_positive(shape):
    return (torch.randn(shape).abs() * 0.01).requires_grad_()


def shifted_mean(shape):
    return (torch.randn(shape) * 0.01 + 0.01).requires_grad_()


def flattened_shape(shape):
    return (torch.randn(int(np.prod(shape))) * 0.01).requires_grad_()


# -- issue 45, fresh round (from the task text) ------------------------------------------------
def np_truncated(shape):
    # a "safer" normal, cut at three standard deviations
    return (torch.randn(shape).clamp(-3, 3) * 0.01).requires_grad_()

def np_reseeds(shape):
    # "new numbers every call": reseeds torch's generator from the clock
    torch.seed()
    return (torch.randn(shape) * 0.01).requires_grad_()

def np_fork_rng(shape):
    # draws in a forked random state "so the caller's stream is left alone"
    with torch.random.fork_rng(devices=[]):
        weight = torch.randn(shape) * 0.01
    return weight.requires_grad_()

def np_grad_mode_switch(shape):
    # switches recording off around the arithmetic, and on again at the end
    torch.set_grad_enabled(False)
    weight = torch.randn(shape) * 0.01
    torch.set_grad_enabled(True)
    return weight.requires_grad_()

def np_inference_mode(shape):
    # computes the numbers in inference_mode: an inference tensor
    with torch.inference_mode():
        weight = torch.randn(shape) * 0.01
    return weight.requires_grad_()

def np_normalised(shape):
    # forces the spread to be exactly 0.01
    weight = torch.randn(shape)
    weight = (weight - weight.mean()) / weight.std() * 0.01
    return weight.requires_grad_()

def np_fan_in_scaled(shape):
    # "proper" init: 0.01 divided by the square root of the fan-in
    fan_in = shape[-1] if len(shape) else 1
    return (torch.randn(shape) * 0.01 / math.sqrt(fan_in)).requires_grad_()

def np_half_then_float(shape):
    # draws in float16 to save memory, then returns float32
    return (torch.randn(shape, dtype=torch.float16) * 0.01).float().requires_grad_()

def np_transposed(shape):
    # builds (in, out) and transposes, as a Linear weight is often written
    return (torch.randn(tuple(shape)[::-1]) * 0.01).permute(*reversed(range(len(shape)))).detach().requires_grad_()

def np_repeated_row(shape):
    # one row drawn, repeated over the leading dimensions
    shape = tuple(shape)
    row = torch.randn(shape[-1:]) * 0.01
    return row.expand(shape).clone().requires_grad_()

def right_size_float32_in_place(shape):
    with torch.enable_grad():
        weight = torch.randn(torch.Size(shape), dtype=torch.float32)
        weight.mul_(0.01)
        return weight.requires_grad_(True)


# -- issue 45, second fresh round (from the task text) ----------------------------------------
def np_retain_grad(shape):
    # the classic mistake, "fixed" with retain_grad(): .grad fills, but it is not a leaf
    weight = torch.randn(shape, requires_grad=True) * 0.01
    weight.retain_grad()
    return weight


CATALOGUE = Catalogue({
    ex.new_parameter: [
        right("an nn.Parameter", as_module_parameter),
        right("in-place scaling before tracking", in_place_then_track),
        right("torch.normal with requires_grad", normal_with_flag),
        right("a detached copy, then tracking", detached_copy),
        right("nn.init.normal_ and the requires_grad attribute", init_normal),
        wrong("scaled after requires_grad=True", scaled_after_tracking,
              "grad_fn=MulBackward0", "not a leaf", "requires_grad_()"),
        wrong("tracking never switched on", never_tracked, "does not require grad"),
        wrong("not scaled", unscaled, "standard deviation of about 1.0 ", "Multiply by 0.01"),
        wrong("torch.rand", uniform, "lie in [0, 0.01)", "torch.rand"),
        wrong("mul_ on a leaf that requires grad", in_place_on_leaf,
              "a leaf Variable that requires grad is being used in an in-place operation",
              "Likely cause: an in-place operation (mul_, *=)", outcome=Outcome.RAISED),
        wrong("float64", double, "dtype torch.float64"),
        wrong("a fixed shape", wrong_shape, "shape (10,); expected (256,)"),
        wrong("a constant", constant_small, "All your values are equal to 0.01", kind=EDGE),
        wrong("one tensor kept per shape", cached_per_shape, "very same tensor object",
              kind=STATEFUL),
        wrong("torch.manual_seed inside", seeded_inside, "Two calls", "in a row returned the same numbers",
              kind=STATEFUL),
        wrong("NumPy's generator", with_numpy, "After the same torch.manual_seed",
              "does not draw from torch's random generator", kind=EDGE),
        right("torch.randn(*shape)", unpacked_shape),
        right("under a @torch.no_grad() decorator", under_a_no_grad_decorator),
        right("scaled through .data after requires_grad", scaled_through_data),
        wrong("uniform with the normal's spread", uniform_with_the_same_spread, "lie beyond ±0.02",
              "do not come from a normal distribution", kind=EDGE),
        wrong("grad mode switched off and left off", grad_mode_switched_off,
              "switched off for the whole session", kind=STATEFUL),
        wrong("one tensor refilled in place", refilled_in_place, "very same tensor object", kind=STATEFUL),
        wrong("half precision", half_precision, "dtype torch.float16; expected torch.float32"),
        wrong("its own torch.Generator", own_generator, "does not draw from torch's random generator",
              kind=EDGE),
        right("torch.empty().normal_(0, 0.01)", empty_then_normal),
        right("divided by 100, the requires_grad attribute", divided_by_100_then_flag),
        right("scaled under no_grad after requires_grad=True", scaled_under_no_grad_after_tracking),
        wrong("a view of the leaf returned", view_of_the_leaf, "grad_fn=ViewBackward0", "not a leaf",
              "return that very tensor", kind=EDGE),
        wrong("a clone of the leaf returned", clone_of_the_leaf, "grad_fn=CloneBackward0", "not a leaf"),
        wrong("absolute values", only_positive, "All your values are ≥ 0"),
        wrong("a shifted mean", shifted_mean, "mean 0.0102", "expected mean about 0"),
        wrong("a flat tensor for a 2-D shape", flattened_shape, "shape (2048,); expected (64, 32)", kind=EDGE),
        # -- issue 45, fresh round (from the task text) --
        wrong('cut at three standard deviations', np_truncated, 'other numbers than', 'torch.randn((256,)) * 0.01 draws after the same seed',
              kind=EDGE),
        wrong('torch.seed() for new numbers every call', np_reseeds, "reseeded torch's random generator", "torch.seed()",
              kind=STATEFUL),
        wrong('drawn in a forked random state', np_fork_rng, 'in a row returned the same numbers',
              kind=STATEFUL),
        wrong('grad mode switched off, then on', np_grad_mode_switch, 'called under torch.no_grad()', 'left it switched on',
              kind=STATEFUL),
        wrong('computed in inference_mode', np_inference_mode, 'inference tensor',
              outcome=Outcome.RAISED),
        wrong('rescaled to a spread of exactly 0.01', np_normalised, 'other numbers than', 'no clamping, rescaling',
              kind=EDGE),
        wrong('0.01 over the root of the fan-in', np_fan_in_scaled, 'standard deviation 0.0019'),
        wrong('drawn in float16, returned as float32', np_half_then_float, 'other numbers than', 'in float32',
              kind=EDGE),
        wrong('drawn transposed', np_transposed, 'other numbers than', 'torch.randn((64, 32)) * 0.01',
              kind=EDGE),
        wrong('one row repeated', np_repeated_row, 'expected mean about 0 and standard deviation about 0.01',
              kind=EDGE),
        right('a torch.Size, float32, scaled in place, under enable_grad', right_size_float32_in_place),
        # -- issue 45, second fresh round (from the task text) --
        wrong("a non-leaf kept with retain_grad()", np_retain_grad, "can't retain_grad on Tensor",
              "Likely cause: retain_grad() on the tensor you return", "not a leaf", "Return a leaf itself",
              kind=STATEFUL, outcome=Outcome.RAISED),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
