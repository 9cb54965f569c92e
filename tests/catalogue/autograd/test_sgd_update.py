"""Chapter 02, A5 — the catalogue of ``sgd_update``: right answers, wrong ones and what their message says."""

import pytest
import torch

from course_utils.exercises import autograd as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


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


# -- round 2: answers outside testers wrote ----------------------------------------------------
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


# -- round 3 (tester X) ----------------------------------------------------------------------
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


def sgd_clears_the_grad_first(w, lr):
    with torch.no_grad():
        w.grad.zero_()  # "clean" before the update
        w -= lr * w.grad


# -- issue 45, fresh round (from the task text) ------------------------------------------------
def sg_grad_mode_switch(w, lr):
    torch.set_grad_enabled(False)
    w -= lr * w.grad
    torch.set_grad_enabled(True)

def sg_scale_grad_and_back(w, lr):
    # scales .grad in place, steps, and scales it back
    with torch.no_grad():
        w.grad *= lr
        w -= w.grad
        w.grad /= lr

def sg_tensor_lr(w, lr):
    with torch.no_grad():
        w -= torch.tensor(lr) * w.grad

def sg_clipped(w, lr):
    # clips the gradient "for stability"
    with torch.no_grad():
        w -= lr * w.grad.clamp(-1.0, 1.0)

def sg_nan_to_num(w, lr):
    # guards against a nan or inf gradient
    with torch.no_grad():
        w -= lr * torch.nan_to_num(w.grad)

def sg_multiplicative(w, lr):
    # the same step written as a scaling of w
    with torch.no_grad():
        w.mul_(1 - lr * w.grad / w)

def sg_weight_decay(w, lr):
    # a little weight decay "as optimizers do"
    with torch.no_grad():
        w -= lr * (w.grad + 1e-4 * w)

def sg_contiguous_sub(w, lr):
    # makes sure w is contiguous first
    with torch.no_grad():
        w.contiguous().sub_(lr * w.grad)

def sg_lr_capped(w, lr):
    # a learning rate above 1 is surely a mistake
    with torch.no_grad():
        w -= min(lr, 1.0) * w.grad

def sg_skip_nonfinite(w, lr):
    # skips a step with a non-finite gradient, as a GradScaler does
    if not torch.isfinite(w.grad).all():
        return
    with torch.no_grad():
        w -= lr * w.grad

def right_addcmul(w, lr):
    with torch.no_grad():
        w.addcmul_(w.grad, torch.full_like(w, -lr))


# -- issue 45, second fresh round (from the task text) ----------------------------------------
def sgd_slice_assign(w, lr):
    # assign into w[:], in place
    with torch.no_grad():
        w[:] = w - lr * w.grad


def right_copy_of_the_step(w, lr):
    with torch.no_grad():
        w.copy_(w.sub(w.grad, alpha=lr))


CATALOGUE = Catalogue({
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
        # (a 0-d w has no rows: issue 45, round 2)
        wrong("a loop over rows", row_by_row, "len() of a 0-d tensor", "0-d leaf",
              "Likely cause: w may be a 0-d tensor", kind=EDGE, outcome=Outcome.RAISED),
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
        # -- issue 45, fresh round (from the task text) --
        wrong('grad mode switched off, then on', sg_grad_mode_switch, 'called under torch.no_grad()', 'left it switched on',
              kind=STATEFUL),
        wrong('the gradient scaled in place and back', sg_scale_grad_and_back, 'changed w.grad',
              kind=STATEFUL),
        wrong('lr made a float32 tensor', sg_tensor_lr, 'only to float32 precision',
              kind=EDGE),
        wrong('the gradient clipped to ±1', sg_clipped, 'wrong values', 'Expected w - lr * w.grad'),
        wrong('nan_to_num on the gradient', sg_nan_to_num, 'wrong values', 'edges of float32', 'expected -inf',
              kind=EDGE),
        wrong('the step as a scaling of w', sg_multiplicative, 'wrong values', 'edges of float32', 'got nan',
              kind=EDGE),
        wrong('a little weight decay', sg_weight_decay, 'wrong values', 'Expected w - lr * w.grad'),
        wrong('sub_ on w.contiguous()', sg_contiguous_sub, "left this call's w unchanged", 'non-contiguous', '.contiguous()',
              kind=EDGE),
        wrong('the rate capped at 1', sg_lr_capped, 'wrong values', 'lr=2.0',
              kind=EDGE),
        wrong('no step on a non-finite gradient', sg_skip_nonfinite, "left this call's w unchanged", '±inf, nan',
              kind=EDGE),
        right('addcmul_ with a tensor of -lr', right_addcmul),
        # -- issue 45, second fresh round (from the task text) --
        wrong("assigned into w[:]", sgd_slice_assign, "slice() cannot be applied to a 0-dim tensor", "0-d leaf",
              "Likely cause: w may be a 0-d tensor", kind=EDGE, outcome=Outcome.RAISED),
        right("w.copy_(w - lr * w.grad) under no_grad", right_copy_of_the_step),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
