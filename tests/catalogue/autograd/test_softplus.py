"""Chapter 02, A5 — the catalogue of ``softplus``: right answers, wrong ones and what their message says."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils.exercises import autograd as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- softplus (A5) -----------------------------------------------------------------------------
def log1p(x):
    return torch.log1p(x.exp())


def in_place_on_a_copy(x):
    e = torch.exp(x)
    e = e.clone()  # the copy is not what exp saved, so changing it is safe
    e += 1
    return e.log()


def stable_by_hand(x):
    return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))


def via_logaddexp(x):
    return torch.logaddexp(x, torch.zeros_like(x))


def the_bug(x):
    e = torch.exp(x)
    e += 1
    return torch.log(e)


def hidden_with_data(x):
    e = torch.exp(x)
    e.data += 1
    return torch.log(e)


def without_graph(x):
    with torch.no_grad():
        return torch.log(torch.exp(x) + 1)


def forgot_one(x):
    return torch.log(torch.exp(x))


def changes_its_input(x):
    x.data.mul_(2)
    return torch.log(torch.exp(x / 2) + 1)


def in_place_on_x(x):
    x.exp_()
    return torch.log(x + 1)


def preallocated_float32(x):
    out = torch.zeros(x.shape)
    out += torch.log(torch.exp(x) + 1)
    return out


def flattened_with_view(x):
    flat = x.view(-1)
    return torch.log(torch.exp(flat) + 1).view(x.shape)


def through_numpy(x):
    return torch.from_numpy(np.log1p(np.exp(x.detach().numpy())))


_exp_of = {}


def exp_kept_per_shape(x):
    if x.shape not in _exp_of:  # "exp is expensive: compute it once"
        _exp_of[x.shape] = torch.exp(x)
    return torch.log(_exp_of[x.shape] + 1)


def relu_instead(x):
    return torch.relu(x)


# -- round 2: answers outside testers wrote ----------------------------------------------------
def clamps_x(x):
    x = x.clamp(-20, 20)  # "exp overflows for large x"
    return torch.log(torch.exp(x) + 1)


def x_itself_above_five(x):
    return torch.where(x > 5, x, torch.log1p(torch.exp(x)))


def x_itself_above_twenty(x):
    return torch.where(x > 20, x, torch.log1p(torch.exp(x)))


def minus_logsigmoid(x):
    return -F.logsigmoid(-x)


class _Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.log1p(torch.exp(x))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(x)


class _SoftplusSignSlip(_Softplus):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(-x)


# -- round 3 (tester X) ----------------------------------------------------------------------
def softplus_module(x):
    return torch.nn.Softplus()(x)


def elementwise_loop(x):
    return torch.stack([torch.log(1 + torch.exp(v)) for v in x.flatten()]).reshape(x.shape)


def minus_log_sigmoid(x):
    return -torch.log(torch.sigmoid(-x))


def clamped_stable_form(x):
    return torch.clamp(x, min=0) + torch.log1p(torch.exp(-torch.abs(x)))


def softplus_beta_two(x):
    return F.softplus(x, beta=2)


def one_point_0001(x):
    return torch.log(torch.exp(x) + 1.0001)


def calls_backward_itself(x):
    y = torch.log(torch.exp(x) + 1)
    y.sum().backward(retain_graph=True)
    return y


def straight_through(x):
    return x + (torch.log(torch.exp(x) + 1) - x).detach()


def detached_then_tracked(x):
    return torch.log(torch.exp(x) + 1).detach().requires_grad_()


# -- round 4 (issue 45): exact zeros, where the stable forms have a kink -----------------------
def relu_stable_form(x):
    return torch.relu(x) + torch.log1p(torch.exp(-torch.abs(x)))


def where_stable_form(x):
    return torch.where(x > 0, x, torch.zeros_like(x)) + torch.log1p(torch.exp(-x.abs()))


def maximum_stable_form(x):
    return torch.maximum(x, torch.zeros_like(x)) + torch.log1p(torch.exp(-x.abs()))


def two_branches(x):
    return torch.where(x > 0, x + torch.log1p(torch.exp(-x)), torch.log1p(torch.exp(x)))


# -- issue 45, fresh round (from the task text) ------------------------------------------------
def sp_float32(x):
    return torch.log(torch.exp(x.float()) + 1)

def sp_squeeze(x):
    return torch.log(torch.exp(x) + 1).squeeze()

def sp_ones_cpu(x):
    return torch.log(torch.exp(x) + torch.ones(x.shape))

def sp_half(x):
    # half precision to save memory
    return torch.log(torch.exp(x.half()) + 1).to(x.dtype)

def sp_detached_above_20(x):
    # x itself above 20, where softplus(x) is about x
    return torch.where(x > 20, x.detach(), torch.log(torch.exp(x) + 1))

def sp_clears_x_grad(x):
    # starts from a clean x.grad
    x.grad = None
    return torch.log(torch.exp(x) + 1)

def sp_requires_grad_inside(x):
    # "lets backward() reach x": switches it on
    x.requires_grad_(True)
    return torch.log(torch.exp(x) + 1)

def sp_row_loop(x):
    return torch.stack([torch.log(torch.exp(row) + 1) for row in x])

def sp_python_float_0d(x):
    if x.dim() == 0:
        return math.log(math.exp(x.item()) + 1)
    return torch.log(torch.exp(x) + 1)

def sp_clamp_output(x):
    # keeps the result away from 0
    return torch.log(torch.exp(x) + 1).clamp(min=1e-4)

def right_logsumexp(x):
    return torch.logsumexp(torch.stack([x, torch.zeros_like(x)]), dim=0)


# -- issue 45, second fresh round (from the task text) ----------------------------------------
def sp_stable_wrong_side(x):
    # the "stable" form: exp(-x) overflows for x far below 0
    return x + torch.log1p(torch.exp(-x))


def sp_cutoff_12(x):
    # "for large x softplus(x) is about x"
    return torch.where(x > 12, x, torch.log(torch.exp(x) + 1))


def right_two_safe_branches(x):
    # each branch fed only the x it is picked for (clamped), so neither overflows
    above = x.clamp(min=0)
    below = x.clamp(max=0)
    return torch.where(x > 0, above + torch.log1p(torch.exp(-above)), torch.log1p(torch.exp(below)))


CATALOGUE = Catalogue({
    ex.softplus: [
        right("F.softplus", F.softplus),
        right("log1p of exp", log1p),
        right("in place on a copy", in_place_on_a_copy),
        wrong("the stable form by hand", stable_by_hand, "except at x = 0 exactly", "came out as 1 instead of",
              "sigmoid(0) = 0.5", kind=EDGE),
        right("logaddexp with 0", via_logaddexp),
        wrong("the bug itself", the_bug,
              "one of the variables needed for gradient computation has been modified by an inplace operation",
              "on backward() through your result",
              "Likely cause: an in-place change (+=, add_) of a tensor that autograd saved",
              outcome=Outcome.RAISED),
        wrong("the in-place change hidden with .data", hidden_with_data, "gradient is wrong",
              "derivative came out as 1 everywhere instead of sigmoid(x)", ".data"),
        wrong("computed under no_grad", without_graph, "does not require grad"),
        wrong("forgot the + 1", forgot_one, "Your result is x itself"),
        wrong("changes its input through .data", changes_its_input, "changed its input x", kind=STATEFUL),
        wrong("exp_ on x", in_place_on_x, "Likely cause: an in-place change of x itself",
              outcome=Outcome.RAISED),
        wrong("a float32 output tensor filled in place", preallocated_float32,
              "dtype torch.float32; expected torch.float64", kind=EDGE),
        wrong("flattens with view", flattened_with_view, "view size is not compatible",
              "Likely cause: .view() needs contiguous memory", kind=EDGE, outcome=Outcome.RAISED),
        wrong("computed in NumPy", through_numpy, "does not require grad", ".numpy()"),
        wrong("exp kept from the first call", exp_kept_per_shape, "Trying to backward through the graph a second time",
              "on backward() through your result (the first x again", "Likely cause: a result kept from an earlier call",
              kind=STATEFUL, outcome=Outcome.RAISED),
        wrong("ReLU instead of softplus", relu_instead, "wrong values", "softplus(x) = log(exp(x) + 1)"),
        right("x itself above 20", x_itself_above_twenty),
        right("-logsigmoid(-x)", minus_logsigmoid),
        right("a custom autograd.Function", _Softplus.apply),
        wrong("x clamped to [-20, 20]", clamps_x, "got 20, expected 21", "x = [-30, -21", kind=EDGE),
        wrong("x itself above 5", x_itself_above_five, "got 6, expected 6.00", kind=EDGE),
        wrong("a custom backward with the wrong sign", _SoftplusSignSlip.apply, "the gradient x.grad",
              "sigmoid(x)"),
        right("nn.Softplus()", softplus_module),
        right("an element-wise loop, stacked", elementwise_loop),
        right("-log(sigmoid(-x))", minus_log_sigmoid),
        wrong("clamp plus log1p of exp(-|x|)", clamped_stable_form, "except at x = 0 exactly", "sigmoid(0) = 0.5",
              kind=EDGE),
        wrong("softplus with beta=2", softplus_beta_two, "wrong values", "softplus(x) = log(exp(x) + 1)"),
        wrong("1.0001 instead of 1", one_point_0001, "wrong values"),
        wrong("calls backward() itself", calls_backward_itself, "calls backward() itself",
              "leave backward() to the caller", kind=STATEFUL),
        wrong("straight-through: values detached around x", straight_through, "derivative came out as 1",
              "recorded no exp()", kind=EDGE),
        wrong("detached, then requires_grad_()", detached_then_tracked, "x.grad is still None"),
        wrong("relu plus log1p of exp(-|x|)", relu_stable_form, "except at x = 0 exactly", "came out as 0 instead of",
              kind=EDGE),
        wrong("where(x > 0, x, 0) plus log1p of exp(-|x|)", where_stable_form, "except at x = 0 exactly",
              "sigmoid(0) = 0.5", kind=EDGE),
        right("maximum(x, 0) plus log1p of exp(-|x|)", maximum_stable_form),
        # (the task bounds x only above: below -88 the unpicked branch's exp(-x) overflows: issue 45, round 2)
        wrong("two branches split at 0", two_branches, "the gradient is nan at x = -100", "torch.where computes both branches",
              kind=EDGE),
        # -- issue 45, fresh round (from the task text) --
        wrong('computed from x.float()', sp_float32, 'dtype torch.float32; expected torch.float64',
              kind=EDGE),
        wrong('the result squeezed', sp_squeeze, 'shape (3,); expected (1, 3)',
              kind=EDGE),
        wrong('torch.ones(x.shape) for the 1', sp_ones_cpu, 'meta', 'Tensor on device cpu',
              kind=EDGE, outcome=Outcome.RAISED),
        wrong('in half precision', sp_half, 'wrong values', 'softplus(x) = log(exp(x) + 1)',
              kind=EDGE),
        wrong('x itself above 20, detached', sp_detached_above_20, 'the gradient x.grad', 'wrong values',
              kind=EDGE),
        wrong('x.grad cleared inside', sp_clears_x_grad, 'cleared x.grad', 'old gradient',
              kind=STATEFUL),
        wrong("requires_grad_() on the caller's x", sp_requires_grad_inside, "switched on requires_grad of the caller's x",
              kind=STATEFUL),
        wrong('a loop over rows', sp_row_loop, 'iteration over a 0-d tensor', '0-d x',
              kind=EDGE, outcome=Outcome.RAISED),
        wrong('a Python float for a 0-d x', sp_python_float_0d, 'expected a torch.Tensor', '0-d x',
              kind=EDGE),
        wrong('clamped away from 0', sp_clamp_output, 'wrong values', 'expected 9.35762e-14',
              kind=EDGE),
        right('logsumexp of x and 0', right_logsumexp),
        # -- issue 45, second fresh round (from the task text) --
        wrong("the stable form on the wrong side, x + log1p(exp(-x))", sp_stable_wrong_side, "Your result is inf at x = -100",
              "The task bounds x only above", "stable form for x > 0 only", kind=EDGE),
        wrong("x itself above 12", sp_cutoff_12, "Your result is x itself at x = 12.25", "float64",
              "F.softplus switches at 20", kind=EDGE),
        right("two branches, each fed only its own side of x", right_two_safe_branches),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
