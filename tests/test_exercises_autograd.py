"""Chapter 02's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them."""

import torch
import torch.nn.functional as F

from course_utils.exercises import autograd as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_fails, assert_passes




def test_every_check_leaves_grad_mode_alone():
    for exercise in (ex.new_parameter, ex.fresh_gradient, ex.sgd_update, ex.softplus):
        assert_passes(exercise, exercise.reference)
        assert torch.is_grad_enabled()


# -- new_parameter (A1) ------------------------------------------------------------------------
def test_new_parameter_reference_and_alternatives_pass():
    assert_passes(ex.new_parameter, ex.new_parameter.reference)

    def as_module_parameter(shape):
        return torch.nn.Parameter(torch.randn(*shape) * 0.01)

    def in_place_then_track(shape):
        return torch.randn(shape).mul_(0.01).requires_grad_()

    def normal_with_flag(shape):
        return torch.normal(0.0, 0.01, size=shape, requires_grad=True)

    def detached_copy(shape):
        return (torch.randn(shape, requires_grad=True) * 0.01).detach().requires_grad_()

    for answer in (as_module_parameter, in_place_then_track, normal_with_flag, detached_copy):
        assert_passes(ex.new_parameter, answer)


def test_new_parameter_classic_mistakes():
    def scaled_after_tracking(shape):
        return torch.randn(shape, requires_grad=True) * 0.01

    assert_fails(ex.new_parameter, scaled_after_tracking, "grad_fn=MulBackward0", "not a leaf", "requires_grad_()")

    def never_tracked(shape):
        return torch.randn(shape) * 0.01

    assert_fails(ex.new_parameter, never_tracked, "does not require grad")

    def unscaled(shape):
        return torch.randn(shape, requires_grad=True)

    assert_fails(ex.new_parameter, unscaled, "standard deviation of about 1.0 ", "Multiply by 0.01")

    def uniform(shape):
        return (torch.rand(shape) * 0.01).requires_grad_()

    assert_fails(ex.new_parameter, uniform, "torch.rand draws uniformly")

    def in_place_on_leaf(shape):
        return torch.randn(shape, requires_grad=True).mul_(0.01)

    assert_fails(
        ex.new_parameter, in_place_on_leaf,
        "a leaf Variable that requires grad is being used in an in-place operation",
        "Likely cause: an in-place operation (mul_, *=)",
        outcome=Outcome.RAISED,
    )

    def double(shape):
        return (torch.randn(shape, dtype=torch.float64) * 0.01).requires_grad_()

    assert_fails(ex.new_parameter, double, "dtype torch.float64")

    def wrong_shape(shape):
        return (torch.randn(10) * 0.01).requires_grad_()

    assert_fails(ex.new_parameter, wrong_shape, "shape (10,); expected (256,)")


# -- fresh_gradient (A2) -----------------------------------------------------------------------
def test_fresh_gradient_reference_and_alternatives_pass():
    assert_passes(ex.fresh_gradient, ex.fresh_gradient.reference)

    def with_autograd_grad(w, x):
        (gradient,) = torch.autograd.grad((w * x).sum(), w)
        return gradient

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

    for answer in (with_autograd_grad, zero_if_present_then_copy, through_an_optimizer):
        assert_passes(ex.fresh_gradient, answer)


def test_fresh_gradient_classic_mistakes():
    def never_cleared(w, x):
        (w * x).sum().backward()
        return w.grad

    assert_fails(ex.fresh_gradient, never_cleared, "sum of both calls' gradients", "gradients accumulate", "w.grad = None")

    def cleared_after(w, x):
        (w * x).sum().backward()
        gradient = w.grad.clone()
        w.grad = None
        return gradient

    assert_fails(ex.fresh_gradient, cleared_after, "the old one plus the new one", "w.grad = None")

    def zero_when_none(w, x):
        w.grad.zero_()
        (w * x).sum().backward()
        return w.grad

    assert_fails(
        ex.fresh_gradient, zero_when_none,
        "'NoneType' object has no attribute 'zero_'",
        "w.grad is None until the first backward()",
        outcome=Outcome.RAISED,
    )

    def returns_the_live_grad(w, x):
        if w.grad is not None:
            w.grad.zero_()
        (w * x).sum().backward()
        return w.grad

    assert_fails(ex.fresh_gradient, returns_the_live_grad, "returned on the first call changed", "w.grad.clone()")

    def returns_the_loss(w, x):
        w.grad = None
        loss = (w * x).sum()
        loss.backward()
        return loss

    assert_fails(ex.fresh_gradient, returns_the_loss, "shape ()")

    def backward_twice(w, x):
        w.grad = None
        loss = (w * x).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        return w.grad

    assert_fails(ex.fresh_gradient, backward_twice, "twice the right one")


# -- sgd_update (A5) ---------------------------------------------------------------------------
def test_sgd_update_reference_and_alternatives_pass():
    assert_passes(ex.sgd_update, ex.sgd_update.reference)

    def sub_in_place(w, lr):
        with torch.no_grad():
            w.sub_(w.grad, alpha=lr)

    def copy_in(w, lr):
        with torch.no_grad():
            w.copy_(w - lr * w.grad)
        return w

    def through_data(w, lr):
        w.data -= lr * w.grad

    def through_optimizer(w, lr):
        torch.optim.SGD([w], lr=lr).step()

    for answer in (sub_in_place, copy_in, through_data, through_optimizer):
        assert_passes(ex.sgd_update, answer)


def test_sgd_update_classic_mistakes():
    def while_recording(w, lr):
        w -= lr * w.grad

    assert_fails(
        ex.sgd_update, while_recording,
        "RuntimeError: a leaf Variable that requires grad is being used in an in-place operation",
        "Likely cause: an in-place update of a leaf", "torch.no_grad()",
        outcome=Outcome.RAISED,
    )

    def rebinds(w, lr):
        w = w - lr * w.grad
        return w

    assert_fails(ex.sgd_update, rebinds, "caller's w is unchanged", "binds the local name w")

    def rebinds_silently(w, lr):
        with torch.no_grad():
            w = w - lr * w.grad

    assert_fails(ex.sgd_update, rebinds_silently, "unchanged after your function ran", "`w = w - lr * w.grad`")

    def uphill(w, lr):
        with torch.no_grad():
            w += lr * w.grad

    assert_fails(ex.sgd_update, uphill, "up the gradient")

    def grad_mode_left_off(w, lr):
        torch.set_grad_enabled(False)
        w -= lr * w.grad

    assert_fails(ex.sgd_update, grad_mode_left_off, "switched off for the whole session")
    assert torch.is_grad_enabled()

    def tracking_switched_off(w, lr):
        w.requires_grad_(False)
        w -= lr * w.grad

    assert_fails(ex.sgd_update, tracking_switched_off, "no longer requires grad")

    def fixed_rate(w, lr):
        with torch.no_grad():
            w -= 0.1 * w.grad

    assert_fails(ex.sgd_update, fixed_rate, "wrong values", "lr=0.5")


# -- softplus (A5) -----------------------------------------------------------------------------
def test_softplus_reference_and_alternatives_pass():
    assert_passes(ex.softplus, ex.softplus.reference)

    def built_in(x):
        return F.softplus(x)

    def log1p(x):
        return torch.log1p(x.exp())

    def in_place_on_a_copy(x):
        e = torch.exp(x)
        e = e.clone()  # the copy is not what exp saved, so changing it is safe
        e += 1
        return e.log()

    for answer in (built_in, log1p, in_place_on_a_copy):
        assert_passes(ex.softplus, answer)


def test_softplus_classic_mistakes():
    def the_bug(x):
        e = torch.exp(x)
        e += 1
        return torch.log(e)

    assert_fails(
        ex.softplus, the_bug,
        "one of the variables needed for gradient computation has been modified by an inplace operation",
        "on backward() through your result",
        "Likely cause: an in-place change (+=, add_) of a tensor that autograd saved",
        outcome=Outcome.RAISED,
    )

    def hidden_with_data(x):
        e = torch.exp(x)
        e.data += 1
        return torch.log(e)

    assert_fails(ex.softplus, hidden_with_data, "gradient is wrong", "derivative came out as 1 everywhere instead of sigmoid(x)", ".data")

    def without_graph(x):
        with torch.no_grad():
            return torch.log(torch.exp(x) + 1)

    assert_fails(ex.softplus, without_graph, "does not require grad")

    def forgot_one(x):
        return torch.log(torch.exp(x))

    assert_fails(ex.softplus, forgot_one, "Your result is x itself")

    def changes_its_input(x):
        x.data += 0
        x.data.mul_(2)
        return torch.log(torch.exp(x / 2) + 1)

    assert_fails(ex.softplus, changes_its_input, "changed its input x")

    def in_place_on_x(x):
        x.exp_()
        return torch.log(x + 1)

    assert_fails(ex.softplus, in_place_on_x, "Likely cause: an in-place change of x itself", outcome=Outcome.RAISED)
