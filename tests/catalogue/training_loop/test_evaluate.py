"""Chapter 04's evaluate: its catalogue of right and wrong answers."""

import copy
import functools
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises import training_loop as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- evaluate (L4) -----------------------------------------------------------------------------
def eval_with_try_finally_and_inference_mode(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            return loss_fn(model(x), y).item()
    finally:
        if was_training:
            model.train()


def eval_with_decorator(model, x, y, loss_fn):
    @torch.no_grad()
    def forward():
        return loss_fn(model(x), y)

    mode = model.training
    model.eval()
    loss = float(forward())
    model.train(mode)
    return loss


def eval_remembers_every_layer(model, x, y, loss_fn):
    modes = {m: m.training for m in model.modules()}
    model.eval()
    with torch.set_grad_enabled(False):
        out = model(x)
    for m, mode in modes.items():
        m.training = mode
    return loss_fn(out, y).item()


def eval_train_false_and_inference_decorator(model, x, y, loss_fn):
    mode = model.training
    model.train(False)
    value = torch.inference_mode()(lambda: loss_fn(model(x), y).item())()
    model.train(mode)
    return value


def forgets_eval(model, x, y, loss_fn):
    with torch.no_grad():
        return loss_fn(model(x), y).item()


def forgets_no_grad(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    loss = loss_fn(model(x), y).item()
    model.train(was_training)
    return loss


def always_train_at_the_end(model, x, y, loss_fn):
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y).item()
    model.train()
    return loss


def never_back_to_train(model, x, y, loss_fn):
    model.eval()
    with torch.no_grad():
        return loss_fn(model(x), y).item()


def reads_the_mode_after_eval(model, x, y, loss_fn):
    model.eval()
    was_training = model.training
    with torch.no_grad():
        loss = loss_fn(model(x), y).item()
    model.train(was_training)
    return loss


def sets_only_the_flag(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y).item()
    model.training = was_training
    return loss


def eval_by_the_flag(model, x, y, loss_fn):
    was_training = model.training
    model.training = False
    with torch.no_grad():
        loss = loss_fn(model(x), y).item()
    model.training = was_training
    return loss


def eval_returns_tensor(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return loss


def grad_switched_off_for_good(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    torch.set_grad_enabled(False)
    loss = loss_fn(model(x), y).item()
    model.train(was_training)
    return loss


def grad_switched_on_at_the_end(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    torch.set_grad_enabled(False)
    loss = loss_fn(model(x), y).item()
    torch.set_grad_enabled(True)
    model.train(was_training)
    return loss


def freezes_instead_of_no_grad(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    loss = loss_fn(model(x), y).item()
    model.train(was_training)
    return loss


def eval_own_cross_entropy(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = F.cross_entropy(model(x), y).item()
    model.train(was_training)
    return loss


def eval_casts_to_float32(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x.float()), y).item()
    model.train(was_training)
    return loss


# -- round 2: answers outside testers wrote ------------------------------------------------------
def eval_on_a_copy(model, x, y, loss_fn):
    frozen = copy.deepcopy(model).eval()
    with torch.no_grad():
        return loss_fn(frozen(x), y).item()


def eval_in_weighted_chunks(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(x), 16):
            xb, yb = x[start:start + 16], y[start:start + 16]
            total += loss_fn(model(xb), yb).item() * len(xb)
    model.train(was_training)
    return total / len(x)


def eval_in_chunks_mean_of_means(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    means = []
    with torch.no_grad():
        for start in range(0, len(x), 16):
            means.append(loss_fn(model(x[start:start + 16]), y[start:start + 16]).item())
    model.train(was_training)
    return sum(means) / len(means)


def eval_with_set_grad_enabled_block(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    with torch.set_grad_enabled(False):
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return loss.item()


def eval_child_by_child(model, x, y, loss_fn):
    modes = [child.training for child in model.children()]
    for child in model.children():
        child.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    for child, mode in zip(model.children(), modes):
        child.train(mode)
    return loss.item()


def freezes_then_unfreezes_all(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    loss = loss_fn(model(x), y)
    for p in model.parameters():
        p.requires_grad_(True)
    model.train(was_training)
    return loss.item()


def forward_before_eval(model, x, y, loss_fn):
    was_training = model.training
    with torch.no_grad():
        model(x)  # "warm up"
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return loss.item()


_MODES = weakref.WeakKeyDictionary()


def remembers_the_mode_per_model(model, x, y, loss_fn):
    was_training = _MODES.setdefault(model, model.training)  # the mode of the first call
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return loss.item()


@functools.lru_cache(maxsize=None)
def cached_evaluation(model, x, y, loss_fn):
    """Keyed on the objects: the same model, batch and loss_fn give back the first number."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return loss.item()


def restores_the_mode_by_name(model, x, y, loss_fn):
    mode = "train" if model.training else "eval"
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(mode)  # a string, not a bool
    return loss.item()


# -- round 3 -----------------------------------------------------------------------------------
def eval_casts_the_model_to_float32(model, x, y, loss_fn):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model.float()(x.float()), y)
    model.train(was_training)
    return loss.item()


def eval_switches_back_only_if_it_was_training(model, x, y, loss_fn):
    if not model.training:
        with torch.no_grad():
            return float(loss_fn(model(x), y))
    model.eval()
    with torch.no_grad():
        value = loss_fn(model(x), y).item()
    model.train()
    return value


def eval_restores_the_previous_grad_mode(model, x, y, loss_fn):
    grad_was, mode_was = torch.is_grad_enabled(), model.training
    torch.set_grad_enabled(False)
    model.eval()
    value = loss_fn(model(x), y).item()
    torch.set_grad_enabled(grad_was)
    model.train(mode_was)
    return np.float64(value)



# -- issue 45, fresh round (from the task text) --
def ev_seeds_dropout(model, x, y, loss_fn):
    """Seeds the global generator 'so the evaluation is reproducible'."""
    torch.manual_seed(0)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return loss.item()


def ev_clears_the_gradients(model, x, y, loss_fn):
    """Calls model.zero_grad() 'to leave no gradient behind'."""
    was_training = model.training
    model.eval()
    model.zero_grad()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return loss.item()


def ev_switches_only_dropout_and_batchnorm1d(model, x, y, loss_fn):
    """Puts only nn.Dropout and nn.BatchNorm1d layers in eval mode, and back."""
    kinds = (nn.Dropout, nn.BatchNorm1d)
    modes = {m: m.training for m in model.modules() if isinstance(m, kinds)}
    for m in modes:
        m.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    for m, mode in modes.items():
        m.train(mode)
    return loss.item()


def ev_freezes_and_restores_the_flags(model, x, y, loss_fn):
    """Stops the graph by freezing every parameter (flags restored after) instead of no_grad."""
    was_training = model.training
    flags = [p.requires_grad for p in model.parameters()]
    model.eval()
    model.requires_grad_(False)
    loss = loss_fn(model(x), y)
    for p, flag in zip(model.parameters(), flags):
        p.requires_grad_(flag)
    model.train(was_training)
    return loss.item()


def ev_sets_the_default_dtype(model, x, y, loss_fn):
    """Sets the default dtype to the batch's dtype and leaves it so."""
    torch.set_default_dtype(x.dtype)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return loss.item()


def ev_per_example_losses_via_reduction(model, x, y, loss_fn):
    """Asks loss_fn for per-example losses (reduction='none') and averages; never puts it back."""
    was_training = model.training
    model.eval()
    loss_fn.reduction = "none"
    with torch.no_grad():
        loss = loss_fn(model(x), y).mean()
    model.train(was_training)
    return loss.item()


def ev_rounds_the_loss(model, x, y, loss_fn):
    """Rounds the loss to 4 decimals."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return round(loss.item(), 4)


def ev_returns_the_total(model, x, y, loss_fn):
    """Returns the set's total loss (mean * len(x))."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return loss.item() * len(x)


def ev_no_grad_only_when_switching(model, x, y, loss_fn):
    """Does the careful path only when the model came in train mode; an eval model just runs."""
    if not model.training:
        return loss_fn(model(x), y).item()
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train()
    return loss.item()


def ev_returns_a_numpy_scalar(model, x, y, loss_fn):
    """Returns the loss as a NumPy scalar of the loss's dtype (np.float32 for a float32 model)."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(x), y)
    model.train(was_training)
    return loss.numpy()[()]


def ev_apply_eval_and_tolist(model, x, y, loss_fn):
    """Right: eval() through model.apply, the mode put back in a finally, loss.tolist()."""
    was_training = model.training
    model.apply(lambda module: module.train(False))
    try:
        with torch.no_grad():
            loss = loss_fn(model(x), y)
    finally:
        model.train(mode=was_training)
    return loss.tolist()


CATALOGUE = Catalogue({
    ex.evaluate: [
        right("try/finally with inference_mode", eval_with_try_finally_and_inference_mode),
        right("no_grad as a decorator", eval_with_decorator),
        right("remembers every layer's mode", eval_remembers_every_layer),
        right("model.train(False), inference_mode as a decorator", eval_train_false_and_inference_decorator),
        wrong("forgets model.eval()", forgets_eval,
              "ran in train mode", "model.eval()", "Dropout", "num_batches_tracked went from 3 to 4"),
        wrong("forgets no_grad", forgets_no_grad, "recorded a graph", "torch.no_grad()"),
        wrong("sets only model.training = False", eval_by_the_flag,
              "model.training was False, but its layers were in train mode"),
        wrong("returns the loss tensor", eval_returns_tensor, "as a tensor", "loss.item()"),
        wrong("reads the mode after eval()", reads_the_mode_after_eval, "left the model in eval mode"),
        wrong("always model.train() at the end", always_train_at_the_end,
              "a float64 model in eval mode", "model.train(was_training)", kind=STATEFUL),
        wrong("never back to train mode", never_back_to_train, "left the model in eval mode", kind=STATEFUL),
        wrong("puts back only the outer flag", sets_only_the_flag,
              "some of its layers are still in eval mode", kind=STATEFUL),
        wrong("set_grad_enabled(False) never undone", grad_switched_off_for_good,
              "left autograd switched off", kind=STATEFUL),
        wrong("set_grad_enabled(True) at the end, whatever it was", grad_switched_on_at_the_end,
              "switched autograd on for its caller", kind=STATEFUL),
        wrong("freezes the parameters instead of no_grad", freezes_instead_of_no_grad,
              "requires_grad=False", "torch.no_grad()", kind=STATEFUL),
        wrong("F.cross_entropy instead of loss_fn", eval_own_cross_entropy,
              "not the loss_fn you were given", kind=EDGE),
        wrong("casts x to float32", eval_casts_to_float32,
              "must have the same dtype", "Likely cause: the model and the batch you were given have the same dtype", kind=EDGE,
              outcome=Outcome.RAISED),
        right("on a deep copy in eval mode", eval_on_a_copy),
        right("chunks weighted by their size", eval_in_weighted_chunks),
        right("torch.set_grad_enabled(False) as a block", eval_with_set_grad_enabled_block),
        right("eval() and train(mode) on each child", eval_child_by_child),
        wrong("unfreezes every parameter at the end", freezes_then_unfreezes_all,
              "the caller had frozen it", kind=STATEFUL),
        wrong("mean of unequal chunks' means", eval_in_chunks_mean_of_means,
              "running the model 4 times", "weight each part's mean loss", kind=EDGE),
        wrong("remembers the mode of the first call per model", remembers_the_mode_per_model,
              "now back in train mode", "left the model in eval mode", kind=STATEFUL),
        wrong("functools.lru_cache on evaluate", cached_evaluation,
              "again without running the model", "the weights changed since", kind=STATEFUL),
        wrong("model.train('train')", restores_the_mode_by_name, "expected to be boolean",
              "Likely cause: model.train(mode) takes True or False", outcome=Outcome.RAISED),
        wrong("a forward pass before model.eval()", forward_before_eval, "ran in train mode",
              "num_batches_tracked went from 3 to 4"),
        wrong("model.float() and x.float()", eval_casts_the_model_to_float32,
              "changed the model's dtype", "given as float64", kind=STATEFUL),
        right("eval()/train() only when it came in train mode", eval_switches_back_only_if_it_was_training),
        right("set_grad_enabled(False), then the previous grad mode back, a NumPy float",
              eval_restores_the_previous_grad_mode),
        # -- issue 45, fresh round (from the task text) --
        wrong("torch.manual_seed inside", ev_seeds_dropout, "changed the global random state", kind=STATEFUL),
        wrong("model.zero_grad() inside", ev_clears_the_gradients, "cleared the gradients the model came with",
              "no zero_grad() in evaluate", kind=STATEFUL),
        wrong("eval() on nn.Dropout and nn.BatchNorm1d only", ev_switches_only_dropout_and_batchnorm1d,
              "some of its layers were in train mode", kind=EDGE),
        wrong("freezes the parameters, then restores their flags", ev_freezes_and_restores_the_flags,
              "recorded a graph", "an x that requires grad", kind=EDGE),
        wrong("sets the default dtype", ev_sets_the_default_dtype, "changed the default dtype", kind=STATEFUL),
        wrong("loss_fn.reduction = 'none', never put back", ev_per_example_losses_via_reduction,
              "changed loss_fn.reduction from 'mean' to 'none'", kind=STATEFUL),
        wrong("rounds the loss", ev_rounds_the_loss, "rounded to 4 decimals", kind=EDGE),
        wrong("returns the total", ev_returns_the_total, "the loss of this batch is"),
        wrong("no no_grad for a model that came in eval mode", ev_no_grad_only_when_switching,
              "recorded a graph", "in eval mode", kind=EDGE),
        wrong("returns a NumPy scalar of the loss's dtype", ev_returns_a_numpy_scalar, "returned numpy.float32",
              kind=EDGE),
        right("eval() through apply, train(mode=...) in finally, loss.tolist()", ev_apply_eval_and_tolist),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
