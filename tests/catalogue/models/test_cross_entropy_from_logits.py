"""Chapter 03, M5 — the catalogue of ``cross_entropy_from_logits``: right answers, wrong ones and what their message says."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises import models as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- cross_entropy_from_logits (M5) ------------------------------------------------------------
def by_indexing(logits, targets):
    log_probs = logits.log_softmax(dim=-1)
    return -log_probs[torch.arange(len(targets)), targets].mean()


def by_gather(logits, targets):
    log_probs = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    return -log_probs.gather(1, targets[:, None]).mean()


def with_nll_module(logits, targets):
    return nn.NLLLoss()(nn.LogSoftmax(dim=1)(logits), targets)


def by_one_hot(logits, targets):
    one_hot = F.one_hot(targets, num_classes=logits.shape[1]).to(logits.dtype)
    return -(one_hot * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def loop_over_examples(logits, targets):
    losses = []
    for i in range(len(targets)):
        log_probs = F.log_softmax(logits[i], dim=0)
        losses.append(-log_probs[targets[i]])
    return torch.stack(losses).mean()


def subtracts_max_in_place(logits, targets):
    logits -= logits.max(dim=1, keepdim=True).values  # "for stability"
    return F.nll_loss(torch.log_softmax(logits, dim=1), targets)


def log_of_sum_of_exp(logits, targets):
    log_z = torch.log(torch.exp(logits).sum(dim=1))
    return (log_z - logits[torch.arange(len(targets)), targets]).mean()


def as_python_float(logits, targets):
    return F.nll_loss(torch.log_softmax(logits, dim=1), targets).item()


def detached_loss(logits, targets):
    loss = F.nll_loss(torch.log_softmax(logits, dim=1), targets)
    return loss.detach()  # "so the graph is freed"


def one_hot_on_cpu(logits, targets):
    one_hot = torch.zeros(logits.shape)
    one_hot[torch.arange(len(targets)), targets] = 1
    return -(one_hot * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()


def casts_to_float32(logits, targets):
    return F.nll_loss(torch.log_softmax(logits.float(), dim=1), targets)


# -- round 2: answers outside testers wrote ----------------------------------------------------
def unsqueezes_targets_in_place(logits, targets):
    return -torch.log_softmax(logits, dim=1).gather(1, targets.unsqueeze_(1)).mean()


def tracks_the_logits(logits, targets):
    logits.requires_grad_(True)  # "the loss must be differentiable"
    return F.nll_loss(torch.log_softmax(logits, dim=1), targets)


def loop_with_item(logits, targets):
    log_probs = logits.log_softmax(1)
    return -sum(log_probs[i, targets[i].item()] for i in range(len(targets))) / len(targets)


def by_take_along_dim(logits, targets):
    return -torch.take_along_dim(logits.log_softmax(1), targets[:, None], 1).mean()


def by_einsum(logits, targets):
    one_hot = F.one_hot(targets, logits.shape[1]).to(logits.dtype)
    return -torch.einsum("nc,nc->n", one_hot, logits.log_softmax(1)).mean()


def label_smoothed(logits, targets):
    log_probs = torch.log_softmax(logits, dim=1)
    picked = log_probs.gather(1, targets[:, None]).squeeze(1)
    return -(0.99 * picked + 0.01 * log_probs.mean(1)).mean()


# -- round 3 (tester X) ----------------------------------------------------------------------
def every_pair_of_classes(logits, targets):
    return -torch.log_softmax(logits, 1)[:, targets].mean()


def one_hot_mean_over_all(logits, targets):
    return -(F.one_hot(targets, logits.shape[1]) * torch.log_softmax(logits, 1)).mean()


def divided_by_classes(logits, targets):
    return -torch.log_softmax(logits, 1).gather(1, targets[:, None]).sum() / logits.shape[1]


def log_of_softmax_plus_eps(logits, targets):
    return -torch.log(torch.softmax(logits, 1) + 1e-9).gather(1, targets[:, None]).mean()


def shifts_the_callers_logits_through_data(logits, targets):
    logits.data -= logits.data.max(1, keepdim=True).values
    return F.nll_loss(torch.log_softmax(logits, 1), targets)


def arange_on_the_default_device(logits, targets):
    # CPU indices are allowed for indexing a GPU tensor, so this is fine on a GPU too
    return -torch.log_softmax(logits, 1)[torch.arange(len(targets)), targets].mean()


def range_indices(logits, targets):
    return -torch.log_softmax(logits, 1)[range(len(targets)), targets].mean()


def log_softmax_and_nll_modules(logits, targets):
    return nn.NLLLoss()(nn.LogSoftmax(dim=1)(logits), targets)


def max_shift_by_hand(logits, targets):
    z = logits - logits.max(dim=1, keepdim=True).values
    log_probs = z - torch.log(torch.exp(z).sum(1, keepdim=True))
    return -log_probs.gather(1, targets.view(-1, 1)).mean()


def nll_sum_over_n(logits, targets):
    return F.nll_loss(F.log_softmax(logits, dim=1), targets, reduction="sum") / targets.shape[0]


def log_softmax_in_float64(logits, targets):
    return F.nll_loss(F.log_softmax(logits, dim=1, dtype=torch.float64), targets)


def mean_over_dim_zero(logits, targets):
    return -torch.log_softmax(logits, 1).gather(1, targets[:, None]).mean(0)


def one_hot_by_scatter(logits, targets):
    mask = torch.zeros_like(logits).scatter_(1, targets[:, None], 1.0)
    return -(mask * torch.log_softmax(logits, 1)).sum() / logits.shape[0]


def loss_moved_to_the_cpu(logits, targets):
    return F.nll_loss(torch.log_softmax(logits, 1), targets).cpu()


def targets_moved_to_the_cpu(logits, targets):
    return F.nll_loss(torch.log_softmax(logits, 1), targets.cpu())


def cpu_targets_as_indices(logits, targets):
    # indexing a GPU tensor with CPU index tensors is allowed
    return -torch.log_softmax(logits, 1)[torch.arange(len(targets)), targets.cpu()].mean()


# -- issue 45, fresh round (from the task text) --
def ce_global_max(logits, targets):
    shifted = logits - logits.max()
    log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
    return -log_probs[torch.arange(len(targets)), targets].mean()


def ce_float32_then_back(logits, targets):
    log_probs = torch.log_softmax(logits.float(), dim=1)
    return (-log_probs[torch.arange(len(targets)), targets].mean()).to(logits.dtype)


def ce_clamped(logits, targets):
    log_probs = torch.log_softmax(logits.clamp(-1e4, 1e4), dim=1)
    return -log_probs[torch.arange(len(targets)), targets].mean()


def ce_shift_by_min(logits, targets):
    shifted = logits - logits.min(dim=1, keepdim=True).values
    return -torch.log_softmax(shifted, dim=1)[torch.arange(len(targets)), targets].mean()


def ce_shift_by_mean(logits, targets):
    centred = logits - logits.mean(dim=1, keepdim=True)
    return -torch.log_softmax(centred, dim=1)[torch.arange(len(targets)), targets].mean()


def ce_normaliser_detached(logits, targets):
    normaliser = torch.logsumexp(logits.detach(), dim=1, keepdim=True)  # "a constant per row"
    return -(logits - normaliser)[torch.arange(len(targets)), targets].mean()


def ce_hard_max(logits, targets):
    # logsumexp ~ max for confident models
    picked = logits.gather(1, targets[:, None]).squeeze(1)
    return (logits.max(dim=1).values - picked).mean()


def ce_half_compute(logits, targets):
    log_probs = torch.log_softmax(logits.half(), dim=1).to(logits.dtype)  # "saves memory"
    return -log_probs[torch.arange(len(targets)), targets].mean()


def ce_clamp_log_prob(logits, targets):
    log_probs = torch.log_softmax(logits, dim=1).clamp(min=-100)  # as BCELoss does
    return -log_probs[torch.arange(len(targets)), targets].mean()


def ce_enables_grad_globally(logits, targets):
    torch.set_grad_enabled(True)  # "so that backward() works"
    return -torch.log_softmax(logits, dim=1)[torch.arange(len(targets)), targets].mean()


def ce_where_one_hot(logits, targets):
    log_probs = torch.log_softmax(logits, dim=1)
    chosen = F.one_hot(targets, logits.shape[1]).bool()
    return -torch.where(chosen, log_probs, torch.zeros_like(log_probs)).sum(dim=1).mean()


# -- issue 45, second fresh round (from the task text) --
def ce_tolist(logits, targets):
    t = torch.tensor(targets.tolist())  # "a clean int64 copy"
    return F.nll_loss(torch.log_softmax(logits, 1), t)


def ce_through_numpy(logits, targets):
    t = torch.from_numpy(targets.numpy()).long()
    return F.nll_loss(torch.log_softmax(logits, 1), t)


def ce_tolist_on_device(logits, targets):
    # slow (a round trip to Python), but the copy is made where the logits are
    t = torch.tensor(targets.tolist(), device=logits.device)
    return F.nll_loss(torch.log_softmax(logits, 1), t)


CATALOGUE = Catalogue({
    ex.cross_entropy_from_logits: [
        right("indexing the log-probabilities", by_indexing),
        right("logsumexp and gather", by_gather),
        right("nn.NLLLoss and nn.LogSoftmax modules", with_nll_module),
        right("a one-hot mask", by_one_hot),
        right("a Python loop over the examples", loop_over_examples),
        wrong("F.cross_entropy", lambda logits, t: F.cross_entropy(logits, t), "build yourself"),
        wrong("nn.CrossEntropyLoss", lambda logits, t: nn.CrossEntropyLoss()(logits, t), "build yourself"),
        wrong("softmax first", lambda logits, t: F.nll_loss(torch.log_softmax(logits.softmax(dim=1), dim=1), t),
              "You applied softmax, then cross-entropy"),
        wrong("nll_loss on raw logits", lambda logits, t: F.nll_loss(logits, t), "nll_loss on raw logits"),
        wrong("log of softmax", lambda logits, t: F.nll_loss(torch.log(torch.softmax(logits, dim=1)), t),
              "-inf", "torch.log_softmax", kind=EDGE),
        wrong("summed", lambda logits, t: F.nll_loss(torch.log_softmax(logits, dim=1), t, reduction="sum"),
              "sum over the batch"),
        wrong("log_softmax over dim=0", lambda logits, t: F.nll_loss(torch.log_softmax(logits, dim=0), t),
              "normalises over dim=0", "dim=1"),
        wrong("a Python float", as_python_float, "returned float", "0-d tensor"),
        wrong("the max subtracted in place", subtracts_max_in_place, "changed its input logits in place",
              kind=STATEFUL),
        wrong("log of a sum of exp", log_of_sum_of_exp, "Your loss is nan", "exp() of large logits",
              kind=EDGE),
        wrong("a detached loss", detached_loss, "does not require grad", "detach()"),
        wrong("a one-hot mask made on the CPU", one_hot_on_cpu, "not on the expected device",
              "Likely cause: a tensor on the CPU inside your code", kind=EDGE, outcome=Outcome.RAISED),
        wrong("casts to float32", casts_to_float32, "dtype torch.float32; expected torch.float64", kind=EDGE),
        right("a Python loop with .item() indices", loop_with_item),
        right("take_along_dim", by_take_along_dim),
        right("an einsum with a one-hot mask", by_einsum),
        wrong("unsqueeze_ on the caller's targets", unsqueezes_targets_in_place, "changed its input targets",
              "unsqueeze_", kind=STATEFUL),
        wrong("switches on requires_grad of the logits", tracks_the_logits, "requires_grad of the caller's logits",
              kind=STATEFUL),
        wrong("label smoothing", label_smoothed, "Your loss is 1.8975; expected 1.8994"),
        wrong("[:, targets] picks every pair", every_pair_of_classes, "Your loss is 1.7095; expected 1.8994"),
        wrong("one-hot mean over N * C", one_hot_mean_over_all, "Your loss is 0.4749; expected 1.8994"),
        wrong("the sum divided by the classes", divided_by_classes, "expected 1.8994"),
        wrong("log of softmax plus an epsilon", log_of_softmax_plus_eps, "very large logits", kind=EDGE),
        wrong("shifts the caller's logits through .data", shifts_the_callers_logits_through_data,
              "changed its input logits", kind=STATEFUL),
        right("an arange on the default device", arange_on_the_default_device),
        right("range() indices", range_indices),
        right("nn.LogSoftmax and nn.NLLLoss", log_softmax_and_nll_modules),
        right("the max shift by hand", max_shift_by_hand),
        right("nll_loss summed, divided by N", nll_sum_over_n),
        right("log_softmax computed in float64", log_softmax_in_float64),
        right("a one-hot mask by scatter_", one_hot_by_scatter),
        right("CPU index tensors", cpu_targets_as_indices),
        wrong("the loss moved to the CPU", loss_moved_to_the_cpu, "returned a tensor on cpu",
              "on the logits' device", kind=EDGE),
        wrong("nll_loss with the targets moved to the CPU", targets_moved_to_the_cpu, "not on the expected device",
              "Likely cause: a tensor on the CPU inside your code", kind=EDGE, outcome=Outcome.RAISED),
        wrong("mean(0) leaves shape (1,)", mean_over_dim_zero, "shape (1,)", "expected one number, shape ()",
              kind=EDGE),
        # -- issue 45, fresh round (from the task text) --
        wrong("shifted by the batch's max, not each row's", ce_global_max, "Your loss is -inf", kind=EDGE),
        wrong('computed in float32, cast back', ce_float32_then_back, "converted to float32", kind=EDGE),
        wrong('logits clamped to ±1e4', ce_clamped, "edges of float32", kind=EDGE),
        wrong("shifted by each row's min", ce_shift_by_min, "edges of float32", kind=EDGE),
        wrong("centred on each row's mean", ce_shift_by_mean, "edges of float32", kind=EDGE),
        wrong('logsumexp of the detached logits', ce_normaliser_detached, "the gradient logits.grad", "wrong values"),
        wrong('max instead of logsumexp', ce_hard_max, "Your loss is 1.2758; expected 1.8994"),
        wrong('log_softmax in float16', ce_half_compute, "converted to float16", kind=EDGE),
        wrong('log-probabilities clamped at -100', ce_clamp_log_prob, "very large logits", kind=EDGE),
        wrong('torch.set_grad_enabled(True) inside', ce_enables_grad_globally, "changed gradient mode", "torch.no_grad()", kind=STATEFUL),
        right("torch.where on a one-hot mask", ce_where_one_hot),
        # -- issue 45, second fresh round (from the task text) --
        wrong("targets rebuilt with torch.tensor(targets.tolist())", ce_tolist, "copied out of its device",
              ".tolist()", "on a GPU", kind=EDGE, outcome=Outcome.RAISED),
        wrong("targets rebuilt through NumPy", ce_through_numpy, "copied out of its device", ".numpy()",
              kind=EDGE, outcome=Outcome.RAISED),
        right("targets rebuilt from .tolist() on the logits' device", ce_tolist_on_device),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
