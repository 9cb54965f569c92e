"""Chapter 03, M9 — the catalogue of ``multilabel_loss``: right answers, wrong ones and what their message says."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises import models as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- multilabel_loss (M9) ----------------------------------------------------------------------
def ml_bce_module(logits, targets):
    return nn.BCEWithLogitsLoss()(logits, targets.type_as(logits))


def ml_softplus(logits, targets):
    targets = targets.to(logits.dtype)
    return (F.softplus(logits) - logits * targets).mean()


def ml_logsigmoid(logits, targets):
    targets = targets.to(logits.dtype)
    return -(targets * F.logsigmoid(logits) + (1 - targets) * F.logsigmoid(-logits)).mean()


def ml_clamped_formula(logits, targets):
    t = targets.to(logits.dtype)
    per_entry = logits.clamp(min=0) - logits * t + torch.log1p(torch.exp(-logits.abs()))
    return per_entry.sum() / t.numel()


def ml_summed_then_divided(logits, targets):
    loss = F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), reduction="none")
    return loss.mean(dim=1).mean()


def ml_sigmoid_then_bce(logits, targets):
    return F.binary_cross_entropy(torch.sigmoid(logits), targets.to(logits.dtype))


def ml_targets_as_they_are(logits, targets):
    return F.binary_cross_entropy_with_logits(logits, targets)


def ml_targets_float(logits, targets):
    return F.binary_cross_entropy_with_logits(logits, targets.float())


def ml_softmax_cross_entropy(logits, targets):
    return F.cross_entropy(logits, targets.to(logits.dtype))


def ml_summed(logits, targets):
    return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), reduction="sum")


def ml_per_example(logits, targets):
    per_entry = F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), reduction="none")
    return per_entry.sum(dim=1).mean()


def ml_sigmoid_twice(logits, targets):
    probs = torch.sigmoid(logits)  # "the model's outputs as probabilities"
    return nn.BCEWithLogitsLoss()(probs, targets.to(logits.dtype))


def ml_sigmoid_in_place(logits, targets):
    return F.binary_cross_entropy(logits.sigmoid_(), targets.to(logits.dtype))


def ml_log_of_sigmoid(logits, targets):
    t = targets.to(logits.dtype)
    p = torch.sigmoid(logits)
    return -(t * torch.log(p) + (1 - t) * torch.log(1 - p)).mean()


def ml_where_two_formulas(logits, targets):
    t = targets.to(logits.dtype)
    positive = logits - logits * t + torch.log1p(torch.exp(-logits))
    negative = -logits * t + torch.log1p(torch.exp(logits))
    return torch.where(logits >= 0, positive, negative).mean()


def ml_detached(logits, targets):
    return F.binary_cross_entropy_with_logits(logits.detach(), targets.to(logits.dtype))


def ml_tracks_the_logits(logits, targets):
    logits.requires_grad_(True)  # "so backward works"
    return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype))


def ml_ones_on_the_cpu(logits, targets):
    t = targets.to(logits.dtype)
    ones = torch.ones(t.shape)
    return -(t * F.logsigmoid(logits) + (ones - t) * F.logsigmoid(-logits)).mean()


def ml_formula_without_converting(logits, targets):
    return -(targets * F.logsigmoid(logits) + (1 - targets) * F.logsigmoid(-logits)).mean()


def ml_flattened_by_view(logits, targets):
    return F.binary_cross_entropy_with_logits(logits.view(-1), targets.to(logits.dtype).view(-1))


_ML_FIRST_WEIGHTS = {}


def ml_label_weights_of_the_first_batch(logits, targets):
    # pos_weight from the label frequencies, computed once "for speed"
    if "pos_weight" not in _ML_FIRST_WEIGHTS:
        _ML_FIRST_WEIGHTS["pos_weight"] = torch.ones(logits.shape[1], dtype=logits.dtype)
    return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype),
                                              pos_weight=_ML_FIRST_WEIGHTS["pos_weight"])


# -- issue 45, fresh round (from the task text) --
_ML_FRESH_AVERAGE = {}


def ml_float32_then_back(logits, targets):
    loss = F.binary_cross_entropy_with_logits(logits.float(), targets.float())
    return loss.to(logits.dtype)


def ml_clamp_100(logits, targets):
    return F.binary_cross_entropy_with_logits(logits.clamp(-100, 100), targets.to(logits.dtype))


def ml_float_targets_as_given(logits, targets):
    if not targets.is_floating_point():
        targets = targets.to(logits.dtype)
    return F.binary_cross_entropy_with_logits(logits, targets)


def ml_always_double(logits, targets):
    return F.binary_cross_entropy_with_logits(logits.double(), targets.double())


def ml_eps_sigmoid(logits, targets):
    t = targets.to(logits.dtype)
    p = torch.sigmoid(logits).clamp(1e-7, 1 - 1e-7)
    return -(t * torch.log(p) + (1 - t) * torch.log(1 - p)).mean()


def ml_shape_one(logits, targets):
    loss = F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), reduction="none")
    return loss.mean(dim=1).mean(dim=0, keepdim=True)


def ml_balanced(logits, targets):
    t = targets.to(logits.dtype)
    loss = F.binary_cross_entropy_with_logits(logits, t, reduction="none")
    positives, negatives = loss[t == 1], loss[t == 0]
    return (positives.mean() + negatives.mean()) / 2


def ml_label_smoothing(logits, targets):
    t = targets.to(logits.dtype) * 0.9 + 0.05
    return F.binary_cross_entropy_with_logits(logits, t)


def ml_running_average(logits, targets):
    loss = F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype))
    previous = _ML_FRESH_AVERAGE.get("avg")
    _ML_FRESH_AVERAGE["avg"] = loss.detach() if previous is None else 0.9 * previous + 0.1 * loss.detach()
    return loss - loss.detach() + _ML_FRESH_AVERAGE["avg"]


def ml_half_compute(logits, targets):
    loss = F.binary_cross_entropy_with_logits(logits.half(), targets.half())  # "saves memory"
    return loss.to(logits.dtype)


def ml_where_softplus(logits, targets):
    positive = targets.bool()
    return torch.where(positive, F.softplus(-logits), F.softplus(logits)).mean()


# -- issue 45, second fresh round (from the task text) --
def ml_tolist(logits, targets):
    # convert bool/int targets by rebuilding them from Python numbers
    t = torch.tensor(targets.tolist(), dtype=logits.dtype)
    return F.binary_cross_entropy_with_logits(logits, t)


def ml_stable_formula_kink(logits, targets):
    # the textbook stable formula: right values, but kinks at a logit of exactly 0
    t = targets.to(logits.dtype)
    return (logits.clamp(min=0) - logits * t + torch.log1p(torch.exp(-logits.abs()))).mean()


def ml_log1p_exp(logits, targets):
    # softplus(x) - x * t, softplus written as log1p(exp(x)): exp overflows past ~88
    t = targets.to(logits.dtype)
    return (torch.log1p(torch.exp(logits)) - logits * t).mean()


def ml_through_numpy(logits, targets):
    t = torch.from_numpy(targets.numpy()).to(logits.dtype)
    return F.binary_cross_entropy_with_logits(logits, t)


def ml_logaddexp(logits, targets):
    # log(1 + e^x) = logaddexp(0, x): smooth at 0, finite for large x
    t = targets.to(logits.dtype)
    return (torch.logaddexp(torch.zeros_like(logits), logits) - logits * t).mean()


CATALOGUE = Catalogue({
    ex.multilabel_loss: [
        right("nn.BCEWithLogitsLoss with type_as", ml_bce_module),
        right("softplus(z) - z * t", ml_softplus),
        right("logsigmoid of both sides", ml_logsigmoid),
        # its gradient at a logit of exactly 0 is 1 - t, not 0.5 - t (issue 45, second round)
        wrong("the clamped formula, summed and divided", ml_clamped_formula, "exactly where a logit is 0",
              "got 0.0416667, expected 0.0208333", kind=EDGE),
        right("per-example means, then their mean", ml_summed_then_divided),
        wrong("sigmoid, then BCELoss", ml_sigmoid_then_bce, "You applied sigmoid, then binary cross-entropy",
              "clamps it to -100", "logits up to 95", kind=EDGE),
        wrong("integer targets as they are", ml_targets_as_they_are, "can't be cast", "int64",
              "targets.to(logits.dtype)", outcome=Outcome.RAISED),
        wrong("targets.float() with float64 logits", ml_targets_float, "dtype torch.float32; expected torch.float64",
              "not .float()", kind=EDGE),
        wrong("cross-entropy over the labels", ml_softmax_cross_entropy, "softmax over the labels",
              "binary cross-entropy"),
        wrong("summed", ml_summed, "sum over all entries"),
        wrong("summed over labels, mean over examples", ml_per_example, "averages over the examples only",
              "N × C"),
        wrong("sigmoid before BCEWithLogitsLoss", ml_sigmoid_twice, "already probabilities", "raw logits"),
        wrong("sigmoid_ on the caller's logits", ml_sigmoid_in_place, "changed its input logits in place",
              kind=STATEFUL),
        wrong("log of sigmoid by hand", ml_log_of_sigmoid, "Your loss is nan", "logits up to 95",
              "binary_cross_entropy_with_logits", kind=EDGE),
        wrong("torch.where between two formulas", ml_where_two_formulas, "gradient is nan",
              "exp(100) is inf", kind=EDGE),
        wrong("a detached loss", ml_detached, "does not require grad", "detach()"),
        wrong("switches on requires_grad of the logits", ml_tracks_the_logits,
              "requires_grad of the caller's logits", kind=STATEFUL),
        wrong("a tensor of ones made on the CPU", ml_ones_on_the_cpu, "not on the expected device",
              "Likely cause: a tensor on the CPU inside your code", kind=EDGE, outcome=Outcome.RAISED),
        wrong("a formula on bool targets", ml_formula_without_converting, "bool", "targets.to(logits.dtype)",
              kind=EDGE, outcome=Outcome.RAISED),
        wrong("view(-1) on transposed logits", ml_flattened_by_view, "view size is not compatible", ".reshape()",
              kind=EDGE, outcome=Outcome.RAISED),
        wrong("pos_weight kept from the first batch", ml_label_weights_of_the_first_batch,
              "must match the size", "on 5 examples, 4 labels", kind=STATEFUL, outcome=Outcome.RAISED),
        # -- issue 45, fresh round (from the task text) --
        wrong('computed in float32, cast back', ml_float32_then_back, "converted to float32", kind=EDGE),
        wrong('logits clamped to ±100', ml_clamp_100, "edges of float32", kind=EDGE),
        wrong('float targets passed as they are', ml_float_targets_as_given, "the targets' dtype", "float32 targets", kind=EDGE),
        wrong('always float64', ml_always_double, "dtype torch.float64; expected torch.float32", kind=EDGE),
        wrong('sigmoid clamped to [1e-7, 1 - 1e-7]', ml_eps_sigmoid, "logits up to 95", kind=EDGE),
        wrong('mean with keepdim: shape (1,)', ml_shape_one, "shape (1,)"),
        wrong('positives and negatives averaged apart', ml_balanced, "Your loss is 0.9426"),
        wrong('label smoothing', ml_label_smoothing, "Your loss is 1.0173"),
        wrong('a running average over calls', ml_running_average, "Your loss is", kind=STATEFUL),
        wrong('computed in float16', ml_half_compute, "Your loss is 1.0098; expected 1.0094"),
        right("torch.where between two softplus", ml_where_softplus),
        # -- issue 45, second fresh round (from the task text) --
        wrong("targets rebuilt with torch.tensor(targets.tolist())", ml_tolist, "copied out of its device",
              ".tolist()", "on a GPU", kind=EDGE, outcome=Outcome.RAISED),
        wrong("max(x, 0) - x t + log1p(exp(-|x|))", ml_stable_formula_kink, "exactly where a logit is 0",
              "kink", "0.5 - t", kind=EDGE),
        wrong("softplus written as log1p(exp(x))", ml_log1p_exp, "Your loss is inf", "exp() of a large logit overflows",
              "log(1 + exp(x)) is inf", kind=EDGE),
        wrong("targets rebuilt through NumPy", ml_through_numpy, "copied out of its device", ".numpy()",
              kind=EDGE, outcome=Outcome.RAISED),
        right("logaddexp(0, x) - x * t", ml_logaddexp),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
