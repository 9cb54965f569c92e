"""Chapter 02's exercises: the catalogue of right answers (other styles than the reference) and
wrong answers (classic mistakes, and answers right only on the first call or the easy input),
each with the words its message must contain."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils.exercises import autograd as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_passes
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


def test_every_check_leaves_grad_mode_alone():
    for exercise in (ex.new_parameter, ex.fresh_gradient, ex.sgd_update, ex.softplus, ex.input_gradient):
        assert_passes(exercise, exercise.reference)
        assert torch.is_grad_enabled()


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


# -- sgd_update (A5) ---------------------------------------------------------------------------
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


def add_with_alpha(w, lr):
    with torch.no_grad():
        w.add_(-lr * w.grad)


def optimizer_then_zero_grad(w, lr):
    optimizer = torch.optim.SGD([w], lr=lr)
    optimizer.step()
    optimizer.zero_grad()


def while_recording(w, lr):
    w -= lr * w.grad


def rebinds(w, lr):
    w = w - lr * w.grad
    return w


def rebinds_silently(w, lr):
    with torch.no_grad():
        w = w - lr * w.grad


def uphill(w, lr):
    with torch.no_grad():
        w += lr * w.grad


def grad_mode_left_off(w, lr):
    torch.set_grad_enabled(False)
    w -= lr * w.grad


def tracking_switched_off(w, lr):
    w.requires_grad_(False)
    w -= lr * w.grad


def fixed_rate(w, lr):
    with torch.no_grad():
        w -= 0.1 * w.grad


_optimizers = {}


def optimizer_made_once(w, lr):
    if "sgd" not in _optimizers:  # "build the optimizer once, not every step"
        _optimizers["sgd"] = torch.optim.SGD([w], lr=lr)
    for group in _optimizers["sgd"].param_groups:
        group["lr"] = lr
    _optimizers["sgd"].step()


_momentum = {}


def momentum_kept(w, lr):
    if id(w) not in _momentum:
        _momentum[id(w)] = torch.optim.SGD([w], lr=lr, momentum=0.9)
    optimizer = _momentum[id(w)]
    optimizer.param_groups[0]["lr"] = lr
    optimizer.step()


def through_data_assignment(w, lr):
    w.data = w.data - lr * w.grad


def scales_the_gradient(w, lr):
    with torch.no_grad():
        w.grad *= lr
        w -= w.grad


def flattened_view(w, lr):
    with torch.no_grad():
        flat = w.view(-1)
        flat -= lr * w.grad.view(-1)


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


def rounded_through_float32(w, lr):
    with torch.no_grad():
        w.copy_(w.float() - lr * w.grad.float())


def float32_step(w, lr):
    with torch.no_grad():
        w -= (lr * w.grad).float()


def foreach_add(w, lr):
    with torch.no_grad():
        torch._foreach_add_([w], [w.grad], alpha=-lr)


def under_inference_mode(w, lr):
    with torch.inference_mode():
        w.sub_(lr * w.grad)


def detached_alias(w, lr):
    w.detach().sub_(lr * w.grad)  # detach() shares w's memory


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


def row_by_row(w, lr):
    with torch.no_grad():
        for i in range(len(w)):
            w[i] -= lr * w.grad[i]


def slice_assignment(w, lr):
    with torch.no_grad():
        w[...] = w - lr * w.grad


def fresh_momentum_sgd(w, lr):
    torch.optim.SGD([w], lr=lr, momentum=0.9).step()


def set_grad_enabled_block_returning_w(w, lr):
    with torch.set_grad_enabled(False):
        w.sub_(lr * w.grad)
    return w


def fresh_adam(w, lr):
    torch.optim.Adam([w], lr=lr).step()


def sign_of_the_gradient(w, lr):
    with torch.no_grad():
        w -= lr * w.grad.sign()


def mean_gradient(w, lr):
    with torch.no_grad():
        w -= lr * w.grad.mean()


def rate_decayed_by_call_count(w, lr, _calls=[0]):
    _calls[0] += 1
    with torch.no_grad():
        w -= lr / _calls[0] * w.grad


def stepped_twice(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
        w -= lr * w.grad


def negated_gradient_in_place(w, lr):
    w.grad.neg_()
    with torch.no_grad():
        w += lr * w.grad


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



# -- input_gradient (A7) -----------------------------------------------------------------------
def with_torch_func(f, x):
    return torch.func.grad(lambda t: f(t).sum())(x)


def backward_with_inputs_on_a_copy(f, x):
    leaf = x.detach().clone().requires_grad_()
    f(leaf).sum().backward(inputs=[leaf])  # only the leaf named in inputs= receives a gradient
    return leaf.grad


def with_grad_outputs(f, x):
    leaf = x.detach().requires_grad_()
    out = f(leaf)
    return torch.autograd.grad(out, leaf, grad_outputs=torch.ones_like(out))[0]


def through_functional_vjp(f, x):
    out = f(x.detach())
    return torch.autograd.functional.vjp(f, x.detach(), v=torch.ones_like(out))[1]


def under_enable_grad_on_a_clone(f, x):
    with torch.enable_grad():
        leaf = x.clone().detach().requires_grad_(True)
        return torch.autograd.grad([f(leaf).sum()], [leaf])[0]


def backward_on_a_copy(f, x):
    leaf = x.detach().requires_grad_()
    f(leaf).sum().backward()
    return leaf.grad


def mean_of_the_output(f, x):
    leaf = x.detach().requires_grad_()
    return torch.autograd.grad(f(leaf).mean(), leaf)[0]


def backward_on_the_output_itself(f, x):
    leaf = x.detach().requires_grad_()
    f(leaf).backward()
    return leaf.grad


def grad_of_x_as_given(f, x):
    return torch.autograd.grad(f(x).sum(), x)[0]


def switches_on_the_callers_x(f, x):
    x.requires_grad_(True)
    return torch.autograd.grad(f(x).sum(), x)[0]


def switches_the_callers_x_off_afterwards(f, x):
    x.requires_grad_(True)
    gradient = torch.autograd.grad(f(x).sum(), x)[0]
    x.requires_grad_(False)  # "put it back"
    return gradient


def backward_then_zero_grad(f, x):
    leaf = x.detach().requires_grad_()
    f(leaf).sum().backward()
    if isinstance(f, torch.nn.Module):
        f.zero_grad()  # "clean up after myself"
    return leaf.grad


def in_float32(f, x):
    leaf = x.detach().float().requires_grad_()
    return torch.autograd.grad(f(leaf).sum(), leaf)[0]


def input_through_numpy(f, x):
    leaf = torch.tensor(x.detach().numpy(), requires_grad=True)
    return torch.autograd.grad(f(leaf).sum(), leaf)[0]


def input_gradient_freezing_f(f, x):
    if isinstance(f, torch.nn.Module):
        f.requires_grad_(False)  # "so that no .grad of f fills up"
    leaf = x.detach().requires_grad_(True)
    f(leaf).sum().backward()
    return leaf.grad


def input_gradient_in_eval_mode(f, x):
    if isinstance(f, torch.nn.Module):
        f.eval()  # "no dropout while measuring"
    leaf = x.detach().requires_grad_(True)
    return torch.autograd.grad(f(leaf).sum(), leaf)[0]


def input_gradient_under_no_grad(f, x):
    leaf = x.detach().requires_grad_(True)  # a leaf that requires grad, as the advice says
    with torch.no_grad():
        total = f(leaf).sum()
    total.backward()
    return leaf.grad


def input_gradient_of_a_non_leaf(f, x):
    leaf = x.detach().requires_grad_(True)
    doubled = leaf * 1  # not a leaf: its .grad is not kept
    f(doubled).sum().backward()
    return doubled.grad


def sgd_clears_the_grad_first(w, lr):
    with torch.no_grad():
        w.grad.zero_()  # "clean" before the update
        w -= lr * w.grad


_leaves = {}


def leaf_kept_per_shape(f, x):
    key = tuple(x.shape)
    if key not in _leaves:  # "no need to make a new leaf every time"
        _leaves[key] = torch.zeros(x.shape, dtype=x.dtype, device=x.device, requires_grad=True)
    leaf = _leaves[key]
    with torch.no_grad():
        leaf.copy_(x)
    f(leaf).sum().backward(inputs=[leaf])
    return leaf.grad


def grad_mode_left_off_after(f, x):
    leaf = x.detach().requires_grad_()
    gradient = torch.autograd.grad(f(leaf).sum(), leaf)[0]
    torch.set_grad_enabled(False)  # "no graph needed for what comes next"
    return gradient


def ones_like_x(f, x):
    return torch.ones_like(x)


def the_output_itself(f, x):
    return f(x.detach())


def uses_x_itself_when_it_requires_grad(f, x):
    if x.requires_grad:
        x.grad = None
        f(x).sum().backward(inputs=[x])
        return x.grad
    leaf = x.detach().requires_grad_()
    return torch.autograd.grad(f(leaf).sum(), leaf)[0]



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
    ],
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
        right("the old gradient subtracted", subtracts_the_old_gradient),
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
    ],
    ex.sgd_update: [
        wrong("zeroes .grad before the update", sgd_clears_the_grad_first, "its .grad is all zeros",
              "the gradient was cleared before the update read it"),
        right("sub_ with alpha", sub_in_place),
        right("copy_ of the new values", copy_in),
        right("through .data", through_data),
        right("a fresh SGD optimizer", through_optimizer),
        right("add_ of the negative step", add_with_alpha),
        right("an optimizer's step, then zero_grad()", optimizer_then_zero_grad),
        wrong("update while recording", while_recording,
              "RuntimeError: a leaf Variable that requires grad is being used in an in-place operation",
              "Likely cause: an in-place update of a leaf", "torch.no_grad()", outcome=Outcome.RAISED),
        wrong("rebinds the name and returns", rebinds, "caller's w is unchanged", "binds the local name w"),
        wrong("rebinds the name silently", rebinds_silently, "unchanged after your function ran",
              "`w = w - lr * w.grad`"),
        wrong("uphill", uphill, "up the gradient"),
        wrong("grad mode left off", grad_mode_left_off, "switched off for the whole session", kind=STATEFUL),
        wrong("requires_grad switched off", tracking_switched_off, "no longer requires grad"),
        wrong("a fixed learning rate", fixed_rate, "wrong values", "lr=0.5"),
        wrong("an optimizer built on the first call only", optimizer_made_once,
              "updated the w of an earlier call", "this call's w", kind=STATEFUL),
        wrong("momentum kept between calls", momentum_kept, "second call with the same w",
              "momentum kept from the first call", kind=STATEFUL),
        wrong("w.data = new tensor", through_data_assignment, "lives in new memory", "`w.data = ...`",
              kind=EDGE),
        wrong("scales the caller's gradient", scales_the_gradient, "changed w.grad", kind=STATEFUL),
        wrong("a flat view of a transposed w", flattened_view, "view size is not compatible",
              "Likely cause: .view() needs contiguous memory", "non-contiguous", kind=EDGE,
              outcome=Outcome.RAISED),
        right("torch._foreach_add_", foreach_add),
        right("under torch.inference_mode()", under_inference_mode),
        right("sub_ on a detached alias", detached_alias),
        wrong("rounded through float32", rounded_through_float32, "only to float32 precision",
              "non-contiguous float64", kind=EDGE),
        wrong("a float32 step into a float64 w", float32_step, "only to float32 precision", kind=EDGE),
        right("a loop over rows", row_by_row),
        right("slice assignment", slice_assignment),
        right("a fresh SGD with momentum (its first step is plain SGD)", fresh_momentum_sgd),
        right("torch.set_grad_enabled(False) block, w returned", set_grad_enabled_block_returning_w),
        wrong("a fresh Adam", fresh_adam, "wrong values", "Expected w - lr * w.grad"),
        wrong("the sign of the gradient", sign_of_the_gradient, "wrong values"),
        wrong("the mean gradient", mean_gradient, "wrong values"),
        wrong("the rate decayed by a call counter", rate_decayed_by_call_count, "the same w again", "wrong values",
              kind=STATEFUL),
        wrong("two steps", stepped_twice, "wrong values"),
        wrong("the gradient negated in place", negated_gradient_in_place, "changed w.grad", kind=STATEFUL),
    ],
    ex.softplus: [
        right("F.softplus", F.softplus),
        right("log1p of exp", log1p),
        right("in place on a copy", in_place_on_a_copy),
        right("the stable form by hand", stable_by_hand),
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
        right("clamp plus log1p of exp(-|x|)", clamped_stable_form),
        wrong("softplus with beta=2", softplus_beta_two, "wrong values", "softplus(x) = log(exp(x) + 1)"),
        wrong("1.0001 instead of 1", one_point_0001, "wrong values"),
        wrong("calls backward() itself", calls_backward_itself, "calls backward() itself",
              "leave backward() to the caller", kind=STATEFUL),
        wrong("straight-through: values detached around x", straight_through, "derivative came out as 1",
              "recorded no exp()", kind=EDGE),
        wrong("detached, then requires_grad_()", detached_then_tracked, "x.grad is still None"),
    ],
    ex.input_gradient: [
        wrong("freezes f's parameters", input_gradient_freezing_f, "changed requires_grad of f's parameters",
              kind=EDGE),
        wrong("leaves f in eval mode", input_gradient_in_eval_mode, "switched f between train and eval mode",
              kind=EDGE),
        right("torch.func.grad", with_torch_func),
        wrong("a leaf, but computed under no_grad", input_gradient_under_no_grad,
              "Likely cause: your function computes under torch.no_grad()", "outside that block",
              outcome=Outcome.RAISED),
        wrong("returns the .grad of a non-leaf", input_gradient_of_a_non_leaf,
              "from a `return` that gives a value", "is not a leaf"),
        right("backward(inputs=[leaf]) on a copy", backward_with_inputs_on_a_copy),
        right("grad_outputs of ones", with_grad_outputs),
        right("torch.autograd.functional.vjp", through_functional_vjp),
        right("under enable_grad, lists of tensors", under_enable_grad_on_a_clone),
        wrong("backward() on a detached copy", backward_on_a_copy, "left a gradient in the .grad of f's parameters",
              "torch.autograd.grad"),
        wrong("the mean of f(x)", mean_of_the_output, "divided by 8", "the mean of f(x)"),
        wrong("backward() on the non-scalar output", backward_on_the_output_itself,
              "grad can be implicitly created only for scalar outputs", "Likely cause: a gradient asked of f(x) itself",
              outcome=Outcome.RAISED),
        wrong("autograd.grad on x as given", grad_of_x_as_given, "does not require grad",
              "Likely cause: a gradient asked with respect to an x that does not require grad", outcome=Outcome.RAISED),
        wrong("requires_grad_() on the caller's x", switches_on_the_callers_x,
              "switched on requires_grad of the caller's x", kind=STATEFUL),
        wrong("the caller's x switched off afterwards", switches_the_callers_x_off_afterwards,
              "switched off requires_grad of the caller's x", kind=EDGE),
        wrong("backward(), then f.zero_grad()", backward_then_zero_grad, "cleared the .grad of f's parameters",
              "layer.weight.grad", kind=EDGE),
        wrong("a float32 copy of x", in_float32, "dtype torch.float32; expected torch.float64", kind=EDGE),
        wrong("through NumPy", input_through_numpy, "meta device", "Likely cause: the check passes an x on the meta device",
              kind=EDGE, outcome=Outcome.RAISED),
        wrong("a leaf kept per shape", leaf_kept_per_shape, "second call", "twice the right gradient",
              kind=STATEFUL),
        wrong("grad mode switched off and left off", grad_mode_left_off_after, "switched off for the whole session",
              kind=STATEFUL),
        wrong("ones_like(x)", ones_like_x, "wrong values", "f(x).sum()"),
        wrong("f(x) itself", the_output_itself, "shape (4, 2); expected (4, 3)"),
        wrong("x itself used when it requires grad", uses_x_itself_when_it_requires_grad, "changed x.grad",
              kind=EDGE),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
