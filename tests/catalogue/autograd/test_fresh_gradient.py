"""Chapter 02, A2 — the catalogue of ``fresh_gradient``: right answers, wrong ones and what their message says."""

import pytest
import torch

from course_utils.exercises import autograd as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- fresh_gradient (A2) -----------------------------------------------------------------------
def zero_if_present_then_copy(w, x):
    if w.grad is not None:
        w.grad.zero_()
    (w * x).sum().backward()
    return w.grad.clone()


def through_an_optimizer(w, x):
    optimizer = torch.optim.SGD([w], lr=0.1)
    optimizer.zero_grad()
    torch.sum(w * x).backward()
    return w.grad


def fresh_zeros_first(w, x):
    w.grad = torch.zeros_like(w)
    loss = torch.dot((w * x).flatten(), torch.ones(w.numel(), dtype=w.dtype))
    loss.backward()
    return w.grad


def cleared_before_and_after(w, x):
    w.grad = None
    (w * x).sum().backward()
    gradient = w.grad
    w.grad = None
    return gradient


def never_cleared(w, x):
    (w * x).sum().backward()
    return w.grad


def cleared_after(w, x):
    (w * x).sum().backward()
    gradient = w.grad.clone()
    w.grad = None
    return gradient


def zero_when_none(w, x):
    w.grad.zero_()
    (w * x).sum().backward()
    return w.grad


def returns_the_live_grad(w, x):
    if w.grad is not None:
        w.grad.zero_()
    (w * x).sum().backward()
    return w.grad


def returns_the_loss(w, x):
    w.grad = None
    loss = (w * x).sum()
    loss.backward()
    return loss


def backward_twice(w, x):
    w.grad = None
    loss = (w * x).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    return w.grad


def closed_form(w, x):
    return x  # "d/dw of sum(w * x) is x"


def with_autograd_grad(w, x):
    (gradient,) = torch.autograd.grad((w * x).sum(), w)
    return gradient


def cast_to_float32(w, x):
    w.grad = None
    (w * x).sum().backward()
    return w.grad.float()


def second_backward_on_old_graph(w, x):
    w.grad = None
    loss = (w * x).sum()
    loss.backward()
    loss.backward()
    return w.grad


# -- round 2: answers outside testers wrote ----------------------------------------------------
def subtracts_the_old_gradient(w, x):
    old = w.grad.clone() if w.grad is not None else torch.zeros_like(w)
    (w * x).sum().backward()
    return w.grad - old


def backward_with_inputs(w, x):
    with torch.enable_grad():
        w.grad = None
        torch.mul(w, x).sum().backward(inputs=[w])
    return w.grad


def backward_then_x(w, x):
    w.grad = None
    (w * x).sum().backward()
    return x  # "the gradient is x anyway"


def tracks_x_too(w, x):
    w.grad = None
    x.requires_grad_(True)  # "both take part in the loss"
    (w * x).sum().backward()
    return w.grad


_cleared_once = []


def clears_on_the_first_call_only(w, x):
    if not _cleared_once:
        w.grad = None
        _cleared_once.append(True)
    (w * x).sum().backward()
    return w.grad


def mean_instead_of_sum(w, x):
    w.grad = None
    (w * x).mean().backward()
    return w.grad


# -- round 3 (tester X) ----------------------------------------------------------------------
def einsum_loss(w, x):
    w.grad = None
    torch.einsum("...,...->", w, x).backward()
    return w.grad


def backward_with_a_gradient_argument(w, x):
    w.grad = None
    product = w * x
    product.backward(torch.ones_like(product))
    return w.grad


def zeros_like_then_backward(w, x):
    w.grad = torch.zeros_like(w)
    (w * x).sum().backward()
    return w.grad


def leaves_grad_mode_off(w, x):
    w.grad = None
    (w * x).sum().backward()
    torch.set_grad_enabled(False)
    return w.grad


def doubles_x_afterwards(w, x):
    w.grad = None
    (w * x).sum().backward()
    with torch.no_grad():
        x.mul_(2)
    return w.grad


def on_a_fresh_copy_of_w(w, x):
    copy = w.detach().clone().requires_grad_()
    (copy * x).sum().backward()
    return copy.grad


def float32_zeros_as_grad(w, x):
    w.grad = torch.zeros(w.shape)
    (w * x).sum().backward()
    return w.grad


def as_numpy(w, x):
    w.grad = None
    (w * x).sum().backward()
    return w.grad.numpy()


# -- round 4 (issue 45): the states an existing w.grad may be in, and what is left there -------
def subtracts_the_old_gradient_in_place(w, x):
    old = None if w.grad is None else w.grad.clone()
    (w * x).sum().backward()
    if old is not None:
        w.grad -= old  # "take the old part back out"
    return w.grad.clone()


def puts_the_old_gradient_back(w, x):
    old = w.grad  # "the caller's gradient is none of my business"
    w.grad = None
    (w * x).sum().backward()
    gradient = w.grad
    w.grad = old
    return gradient


def old_gradient_times_zero(w, x):
    if w.grad is not None:
        w.grad.mul_(0)  # "scale the old one away"
    (w * x).sum().backward()
    return w.grad.clone()


def zero_grad_through_set_to_none_false(w, x):
    torch.optim.SGD([w], lr=0.1).zero_grad(set_to_none=False)
    (w * x).sum().backward()
    return w.grad.clone()


def fills_with_zeros(w, x):
    if w.grad is not None:
        w.grad.fill_(0.0)
    loss = (x * w).sum()
    loss.backward()
    return w.grad.detach().clone()


# -- issue 45, fresh round (from the task text) ------------------------------------------------
def fg_flatten(w, x):
    # returns the gradient as a flat vector
    w.grad = None
    (w * x).sum().backward()
    return w.grad.flatten()

def fg_clear_when_nonzero_sum(w, x):
    # clears only when there is "something" in .grad
    if w.grad is not None and w.grad.sum() != 0:
        w.grad = None
    (w * x).sum().backward()
    return w.grad

def fg_dot(w, x):
    # (w * x).sum() written as a dot product
    w.grad = None
    torch.dot(w, x).backward()
    return w.grad

def fg_x_float32(w, x):
    # makes x float32 "to match"
    w.grad = None
    (w * x.to(torch.float32)).sum().backward()
    return w.grad

def fg_nan_to_num(w, x):
    # guards the loss against inf and nan
    w.grad = None
    torch.nan_to_num(w * x).sum().backward()
    return w.grad

def fg_zero_loss_shortcut(w, x):
    # no backward() needed when the loss is 0
    loss = (w * x).sum()
    if loss.item() == 0:
        return torch.zeros_like(w)
    w.grad = None
    loss.backward()
    return w.grad

def fg_mean_times_len(w, x):
    # the mean, scaled back up by the length
    w.grad = None
    ((w * x).mean() * len(w)).backward()
    return w.grad

def fg_grad_mode_on(w, x):
    # makes sure gradients are on
    torch.set_grad_enabled(True)
    w.grad = None
    (w * x).sum().backward()
    return w.grad

def fg_clamp_grad(w, x):
    # clips the gradient, as training loops do
    w.grad = None
    (w * x).sum().backward()
    w.grad.clamp_(-1e4, 1e4)
    return w.grad

def fg_squeeze(w, x):
    # drops size-1 dimensions from what it returns
    w.grad = None
    (w * x).sum().backward()
    return w.grad.squeeze()

def right_autograd_backward(w, x):
    with torch.enable_grad():
        w.grad = None
        torch.autograd.backward([(w * x).sum()])
    return w.grad


CATALOGUE = Catalogue({
    ex.fresh_gradient: [
        right("zero if present, return a copy", zero_if_present_then_copy),
        right("an optimizer's zero_grad()", through_an_optimizer),
        right("a fresh zero tensor, then backward of a dot product", fresh_zeros_first),
        right("cleared before and after", cleared_before_and_after),
        wrong("never cleared", never_cleared, "sum of both calls' gradients", "gradients accumulate",
              "w.grad = None", kind=STATEFUL),
        wrong("cleared after instead of before", cleared_after, "the old one plus the new one",
              "w.grad = None", kind=STATEFUL),
        wrong("zero_() while w.grad is None", zero_when_none,
              "'NoneType' object has no attribute 'zero_'", "w.grad is None until the first backward()",
              outcome=Outcome.RAISED),
        wrong("returns the live w.grad", returns_the_live_grad, "returned on the first call changed",
              "w.grad.clone()", kind=STATEFUL),
        wrong("returns the loss", returns_the_loss, "shape ()"),
        wrong("backward twice", backward_twice, "twice the right one"),
        wrong("the closed form x", closed_form, "returned x itself", "no backward()", kind=EDGE),
        wrong("torch.autograd.grad instead of backward()", with_autograd_grad,
              "no backward() stored a gradient in w.grad"),
        wrong("casts the gradient to float32", cast_to_float32, "dtype torch.float32; expected torch.float64",
              kind=EDGE),
        wrong("backward twice without retain_graph", second_backward_on_old_graph,
              "Trying to backward through the graph a second time", "Likely cause: a second backward()",
              outcome=Outcome.RAISED),
        wrong("the old gradient subtracted", subtracts_the_old_gradient, "w.grad held the old gradient plus",
              "lands in w.grad", "w.grad = None", kind=STATEFUL),
        right("backward(inputs=[w]) under enable_grad", backward_with_inputs),
        wrong("backward(), then x returned", backward_then_x, "returned x itself", "after backward()",
              kind=EDGE),
        wrong("switches on x.requires_grad", tracks_x_too, "requires_grad of the caller's x", kind=STATEFUL),
        wrong("cleared on the first call only", clears_on_the_first_call_only, "sum of both calls' gradients",
              kind=STATEFUL),
        wrong("mean instead of sum", mean_instead_of_sum, "wrong values"),
        right("an einsum to a scalar", einsum_loss),
        right("backward() with a gradient argument", backward_with_a_gradient_argument),
        right("w.grad = zeros_like(w), then backward", zeros_like_then_backward),
        wrong("grad mode switched off and left off", leaves_grad_mode_off, "switched off for the whole session",
              "set_grad_enabled(False)", kind=STATEFUL),
        wrong("doubles the caller's x afterwards", doubles_x_afterwards, "changed its input x", kind=STATEFUL),
        wrong("backward() on a fresh copy of w", on_a_fresh_copy_of_w, "no backward() stored a gradient in w.grad"),
        wrong("a float32 zero gradient for a float64 w", float32_zeros_as_grad,
              "attempting to assign a gradient with dtype", "Likely cause: w.grad set to a tensor of another dtype",
              kind=EDGE, outcome=Outcome.RAISED),
        wrong("a NumPy array returned", as_numpy, "numpy.ndarray", "expected a torch.Tensor"),
        wrong("the old gradient subtracted from w.grad in place", subtracts_the_old_gradient_in_place,
              "(old + new) - old", "about 1e8", "w.grad = None", kind=EDGE),
        wrong("the old gradient put back afterwards", puts_the_old_gradient_back,
              "w.grad held the old gradient again", "lands in w.grad", kind=STATEFUL),
        wrong("the old gradient multiplied by 0", old_gradient_times_zero, "nan where the old w.grad held inf or nan",
              "w.grad = None", kind=EDGE),
        right("an optimizer's zero_grad(set_to_none=False)", zero_grad_through_set_to_none_false),
        right("fill_(0) if present, then backward", fills_with_zeros),
        # -- issue 45, fresh round (from the task text) --
        wrong('returns the gradient flattened', fg_flatten, 'shape (6,); expected (2, 3)',
              kind=EDGE),
        wrong("clears only when the old gradient's sum is not 0", fg_clear_when_nonzero_sum, 'the old one plus the new one', 'entries cancel',
              kind=STATEFUL),
        wrong('torch.dot for (w * x).sum()', fg_dot, '1D tensors expected',
              kind=EDGE, outcome=Outcome.RAISED),
        wrong('x made float32', fg_x_float32, 'wrong values', 'edges of float64', 'got inf',
              kind=EDGE),
        wrong('nan_to_num on the product', fg_nan_to_num, 'wrong values', 'edges of float32', 'expected inf',
              kind=EDGE),
        wrong('zeros when the loss is 0', fg_zero_loss_shortcut, 'wrong values', 'a w of zeros',
              kind=EDGE),
        wrong('the mean times len(w)', fg_mean_times_len, 'wrong values', 'is x itself'),
        wrong('grad mode switched on and left on', fg_grad_mode_on, 'called under torch.no_grad()', 'left it switched on',
              kind=STATEFUL),
        wrong('the gradient clipped to ±1e4', fg_clamp_grad, 'wrong values', 'got 10000',
              kind=EDGE),
        wrong('returns the gradient squeezed', fg_squeeze, 'shape (3,); expected (1, 3)',
              kind=EDGE),
        right('torch.autograd.backward under enable_grad', right_autograd_backward),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
