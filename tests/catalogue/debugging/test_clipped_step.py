"""Chapter 06's exercise clipped_step: right answers pass, classic mistakes fail with the message that names them."""

import pytest
import torch
from torch import nn

from course_utils.exercises import debugging as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


def clips_before_backward(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    loss.backward()
    optimizer.step()
    return total


def clips_after_the_step(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)


# -- clipped_step (D6) -----------------------------------------------------------------------
def clip_returns_a_numpy_float(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total.numpy()[()]  # a NumPy float32, to log


def clip_returns_float(model, optimizer, loss, max_norm):
    loss.backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
    optimizer.step()
    optimizer.zero_grad()
    return norm.item()


def clip_by_hand(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale)
    optimizer.step()
    return total


def clip_model_zero_grad(model, optimizer, loss, max_norm):
    model.zero_grad(set_to_none=False)
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total


def clip_trainable_list(model, optimizer, loss, max_norm):
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    trainable = [p for p in model.parameters() if p.requires_grad]
    total = torch.nn.utils.clip_grad_norm_(trainable, max_norm, norm_type=2.0)
    optimizer.step()
    return float(total)


def clip_after_step(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return nn.utils.clip_grad_norm_(model.parameters(), max_norm)


def clip_before_backward(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    loss.backward()
    optimizer.step()
    return total


def clip_by_value(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_value_(model.parameters(), max_norm)
    optimizer.step()
    return max_norm


def clip_returns_the_clipped_norm(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])


def clip_zeroes_before_step(model, optimizer, loss, max_norm):
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.zero_grad()
    optimizer.step()
    return total


def clip_returns_nothing(model, optimizer, loss, max_norm):
    ex.clipped_step.reference(model, optimizer, loss, max_norm)


def clip_no_zero_grad(model, optimizer, loss, max_norm):
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total


def clip_new_optimizer(model, optimizer, loss, max_norm):
    lr = optimizer.param_groups[0]["lr"]
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)  # "to be sure of the lr"
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total


def clip_by_hand_every_parameter(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))
    if total > max_norm:
        for p in model.parameters():
            p.grad *= max_norm / total
    optimizer.step()
    return total


def clip_always_rescales(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
    for g in grads:
        g *= max_norm / total  # "normalise the gradient to max_norm"
    optimizer.step()
    return total


def clip_with_the_two_part_api(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
    nn.utils.clip_grads_with_norm_(model.parameters(), max_norm, total)
    optimizer.step()
    return total


def clip_the_optimizers_parameters(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    total = nn.utils.clip_grad_norm_(params, max_norm, foreach=False)
    optimizer.step()
    return total


def clip_the_l1_norm(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type=1)
    optimizer.step()
    return total


def clip_each_parameter(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    norms = [nn.utils.clip_grad_norm_(p, max_norm) for p in model.parameters() if p.grad is not None]
    optimizer.step()
    return torch.linalg.vector_norm(torch.stack(norms))


def clip_by_scaling_the_lr(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
    for group in optimizer.param_groups:  # "the same step, scaled"
        group["lr"] *= min(1.0, max_norm / (float(total) + 1e-6))
    optimizer.step()
    return total


def clip_returns_a_numpy_array(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total.numpy()  # a 0-d array


def clip_grads_set_to_none_by_hand(model, optimizer, loss, max_norm):
    for parameter in model.parameters():
        parameter.grad = None
    loss.backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
    optimizer.step()
    return total


# -- issue 45 ----------------------------------------------------------------------------------
def clip_the_loss(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_(loss, max_norm)
    optimizer.step()
    return total


def clip_the_loss_in_a_list(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = nn.utils.clip_grad_norm_([loss], max_norm)
    optimizer.step()
    return total


def clamp_the_loss(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.clamp(max=max_norm).backward()
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total


def clip_with_set_to_none_false(model, optimizer, loss, max_norm):
    optimizer.zero_grad(set_to_none=False)
    loss.backward()
    total = nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=float(max_norm), error_if_nonfinite=True)
    optimizer.step()
    return total.item()


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def c_first_group_only(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = torch.nn.utils.clip_grad_norm_(optimizer.param_groups[0]["params"], max_norm)
    optimizer.step()
    return total


def _grads(model):
    return [p.grad for p in model.parameters() if p.grad is not None]


def _scale(grads, total, max_norm):
    factor = max_norm / (total + 1e-6)
    if factor < 1:
        for g in grads:
            g.mul_(factor)


def c_sum_of_norms(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    grads = _grads(model)
    total = sum(g.norm() for g in grads)
    _scale(grads, total, max_norm)
    optimizer.step()
    return total


def c_largest_value(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    grads = _grads(model)
    total = max(g.abs().max() for g in grads)
    _scale(grads, total, max_norm)
    optimizer.step()
    return total


def c_root_mean_square(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    grads = _grads(model)
    total = torch.cat([g.flatten() for g in grads]).pow(2).mean().sqrt()
    _scale(grads, total, max_norm)
    optimizer.step()
    return total


def c_no_square_root(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    grads = _grads(model)
    total = sum((g ** 2).sum() for g in grads)
    _scale(grads, total, max_norm)
    optimizer.step()
    return total


def c_exhausted_generator(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    params = (p for p in model.parameters() if p.grad is not None)
    total = torch.nn.utils.get_total_norm([p.grad for p in params])
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)  # the generator is spent
    optimizer.step()
    return total


def c_skips_the_step(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = torch.nn.utils.get_total_norm(_grads(model))
    if total <= max_norm:  # a bad batch: skip it
        optimizer.step()
    return total


def c_clips_the_weights(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = torch.nn.utils.get_total_norm(_grads(model))
    optimizer.step()
    with torch.no_grad():
        weights = [p for p in model.parameters() if p.requires_grad]
        norm = torch.nn.utils.get_total_norm(weights)
        if norm > max_norm:
            for p in weights:
                p.mul_(max_norm / norm)
    return total


def c_weights_only(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    weights = [p for name, p in model.named_parameters() if name.endswith("weight")]
    total = torch.nn.utils.clip_grad_norm_(weights, max_norm)  # biases are small anyway
    optimizer.step()
    return total


def c_norm_of_the_loss_grad(model, optimizer, loss, max_norm):
    optimizer.zero_grad()
    loss.backward()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total / len(_grads(model))


def clip_with_autograd_grad(model, optimizer, loss, max_norm):
    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params)
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    factor = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for p, g in zip(params, grads):
        p.grad = g * factor  # set, not added: no stale gradient
    optimizer.step()
    return total


def clip_trainable_tensor(model, optimizer, loss, max_norm):
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    trainable = [p for p in model.parameters() if p.requires_grad]
    return_value = torch.nn.utils.clip_grad_norm_(trainable, max_norm, norm_type=2.0)
    optimizer.step()
    return return_value


def clip_with_set_to_none_false_tensor(model, optimizer, loss, max_norm):
    optimizer.zero_grad(set_to_none=False)
    loss.backward()
    total = nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=float(max_norm), error_if_nonfinite=True)
    optimizer.step()
    return total


# -- issue 45, second fresh round (from the task text) ---------------------------------------
def cs_zero_grad_last(model, optimizer, loss, max_norm):
    # Zeroes after the step: a .grad the model held on entry is added to this loss's gradient.
    loss.backward()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    optimizer.zero_grad()
    return total


def cs_item(model, optimizer, loss, max_norm):
    # Returns the norm as a Python float, not what clip_grad_norm_ returns (a 0-d tensor).
    optimizer.zero_grad()
    loss.backward()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return total.item()


def cs_scale_lr(model, optimizer, loss, max_norm):
    # Scales the learning rate for this step instead of the gradients: momentum keeps the
    # unclipped gradient, so the second step differs.
    optimizer.zero_grad()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    scale = min(1.0, max_norm / (total.item() + 1e-6))
    saved = [group["lr"] for group in optimizer.param_groups]
    for group in optimizer.param_groups:
        group["lr"] *= scale
    optimizer.step()
    for group, lr in zip(optimizer.param_groups, saved):
        group["lr"] = lr
    return total


CATALOGUE = Catalogue({
    ex.clipped_step: [
        wrong("clip before backward()", clips_before_backward, "clip_grad_norm_ ran before loss.backward()"),
        wrong("clip after step()", clips_after_the_step, "clip_grad_norm_ ran after optimizer.step()"),
        # was right before issue 45's second round: the old .grad on entry, and a float returned
        wrong("zero_grad after step, returns a float", clip_returns_float,
              "plus the .grad the model already held", "Zero them first", kind=STATEFUL),
        right("clipped by hand", clip_by_hand),
        right("model.zero_grad", clip_model_zero_grad),
        # was right before issue 45's second round (returns float(total))
        wrong("trainable parameters only, norm_type given, float()", clip_trainable_list,
              "returned float", "a 0-d tensor"),
        right("trainable parameters only, norm_type given", clip_trainable_tensor),
        # was right before issue 45's second round
        wrong("returns a NumPy float", clip_returns_a_numpy_float, "returned numpy.float32", "a 0-d tensor"),
        wrong("clips after step", clip_after_step, "unclipped gradient", "before optimizer.step()"),
        wrong("clips before backward", clip_before_backward, "unclipped gradient", "after loss.backward()"),
        wrong("clips by value", clip_by_value, "clip_grad_value_", "direction"),
        wrong("returns the clipped norm", clip_returns_the_clipped_norm, "the norm after clipping"),
        wrong("zero_grad between clip and step", clip_zeroes_before_step, "did not move"),
        wrong("returns nothing", clip_returns_nothing, "returned None", "`return`"),
        wrong("never zeroes the gradients", clip_no_zero_grad, "second call", "plus the first call's",
              "optimizer.zero_grad() before loss.backward()", kind=STATEFUL),
        wrong("makes a new optimizer", clip_new_optimizer, "remembered nothing of the first call",
              "optimizer you are given", kind=STATEFUL),
        wrong("by hand over every parameter, frozen ones too", clip_by_hand_every_parameter,
              "'NoneType'", "frozen with requires_grad=False", outcome=Outcome.RAISED, kind=EDGE),
        wrong("also scales small gradients up", clip_always_rescales, "scaled the gradient up",
              "min(1, max_norm / total_norm)", kind=EDGE),
        right("get_total_norm and clip_grads_with_norm_", clip_with_the_two_part_api),
        right("the optimizer's parameters, foreach=False", clip_the_optimizers_parameters),
        wrong("clips the L1 norm", clip_the_l1_norm, "L1 norm (norm_type=1)", "norm_type=2"),
        wrong("clips each parameter on its own", clip_each_parameter, "on its own", "all of them together"),
        wrong("scales the learning rate instead, for good", clip_by_scaling_the_lr, "After call 2",
              kind=STATEFUL),
        # was right before issue 45's second round
        wrong("returns a 0-d NumPy array", clip_returns_a_numpy_array, "returned numpy.ndarray", "a 0-d tensor"),
        right("grads set to None by hand, keyword max_norm", clip_grads_set_to_none_by_hand),
        # -- issue 45: the loss clipped instead of the gradients
        wrong("clip_grad_norm_ on the loss", clip_the_loss, "no parameter, such as the loss", "model.parameters()"),
        wrong("clip_grad_norm_ on [loss]", clip_the_loss_in_a_list, "no parameter, such as the loss"),
        wrong("the loss clamped to max_norm", clamp_the_loss, "zero everywhere", "Clip the gradients, not the loss"),
        # was right before issue 45's second round (returns .item())
        wrong("zero_grad(set_to_none=False), a list, .item()", clip_with_set_to_none_false,
              "returned float", "without .item()"),
        right("zero_grad(set_to_none=False), a list", clip_with_set_to_none_false_tensor),
        # -- issue 45, fresh round (from the task text) --
        wrong('clips the first parameter group only', c_first_group_only,
              'is: zero_grad, backward, clip_grad_norm_(model.parameters(),', kind=EDGE),
        wrong("the parameters' norms added", c_sum_of_norms,
              'is: zero_grad, backward, clip_grad_norm_(model.parameters(),'),
        wrong('the largest gradient value as the norm', c_largest_value,
              'default (norm_type=2): clip_grad_norm_(model.parameters(),'),
        wrong('the root mean square as the norm', c_root_mean_square,
              'is: zero_grad, backward, clip_grad_norm_(model.parameters(),'),
        wrong('the norm without its square root', c_no_square_root,
              'is: zero_grad, backward, clip_grad_norm_(model.parameters(),'),
        wrong('one generator of parameters used twice', c_exhausted_generator,
              'as model.parameters() kept in a variable, is spent after one'),
        wrong('skips the step instead of clipping', c_skips_the_step,
              'optimizer.step() after clipping, and zero the gradients'),
        wrong("clips the weights' norm", c_clips_the_weights,
              'is: zero_grad, backward, clip_grad_norm_(model.parameters(),'),
        wrong("clips the weights' gradients only", c_weights_only,
              'is: zero_grad, backward, clip_grad_norm_(model.parameters(),'),
        wrong('returns the average norm per parameter', c_norm_of_the_loss_grad,
              'Return what clip_grad_norm_ returns'),
        right("torch.autograd.grad, .grad set by hand", clip_with_autograd_grad),
        # -- issue 45, second fresh round (from the task text) --
        wrong("zero_grad after the step", cs_zero_grad_last,
              "plus the .grad the model already held", "Zero them first", kind=STATEFUL),
        wrong("returns total.item()", cs_item, "returned float", "not what clip_grad_norm_ returns"),
        wrong("scales the learning rate instead of the gradients", cs_scale_lr,
              "never clipped the gradients", "Momentum stores the gradient", kind=STATEFUL),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
