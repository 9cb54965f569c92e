"""Chapter 04's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them (the catalogue below)."""

import copy
import dataclasses
import functools
import math
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils.exercises import training_loop as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_references_pass_and_leave_the_session_alone
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

EXERCISES = (ex.train_step, ex.evaluate, ex.EarlyStopping)


def test_blank_answers_are_not_attempted():
    def blank(*args, **kwargs):
        raise NotImplementedError()

    class BlankStopper:
        def __init__(self, patience):
            raise NotImplementedError()

    for exercise in (ex.train_step, ex.evaluate):
        assert exercise.verdict(blank).outcome is Outcome.NOT_ATTEMPTED
    assert ex.EarlyStopping.verdict(BlankStopper).outcome is Outcome.NOT_ATTEMPTED


def test_checks_are_fast_and_leave_the_session_alone():
    assert_references_pass_and_leave_the_session_alone(EXERCISES)


# -- train_step (L1) ---------------------------------------------------------------------------
def clear_after_step(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def clear_to_zero_first(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad(set_to_none=False)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def model_zero_grad(model, optimizer, loss_fn, x, y):
    model.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach().item()


def grads_to_none_by_hand(model, optimizer, loss_fn, x, y):
    for p in model.parameters():
        p.grad = None
    prediction = model.forward(x)
    loss = loss_fn(prediction, y)
    torch.autograd.backward(loss)
    optimizer.step()
    return loss.item()


def with_a_closure(model, optimizer, loss_fn, x, y):
    def closure():
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    return optimizer.step(closure).item()


def never_clears(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def clears_between_backward_and_step(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    return loss.item()


def no_step(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    return loss.item()


def step_before_backward(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    optimizer.step()
    loss.backward()
    return loss.item()


def backward_twice(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    loss.backward()
    optimizer.step()
    return loss.item()


def two_forwards_two_backwards(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def returns_tensor(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def forgets_return(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()


notebook_model = torch.nn.Linear(4, 3)


def uses_globals(model, optimizer, loss_fn, x, y):
    return loss_fn(notebook_model(x), y).item()


def updates_by_hand(model, optimizer, loss_fn, x, y):
    model.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.5 * p.grad
    return loss.item()


def clears_the_optimizer_state(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    optimizer.state.clear()  # "start the step from a clean optimizer"
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def own_cross_entropy(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def casts_to_float32(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x.float()), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def standardises_in_place(model, optimizer, loss_fn, x, y):
    x.sub_(x.mean(dim=0)).div_(x.std(dim=0))
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def switches_grad_off_to_log(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    torch.set_grad_enabled(False)  # the logged value needs no graph
    return loss.item()


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


# -- EarlyStopping (L5) ------------------------------------------------------------------------
class WithHistory:
    def __init__(self, patience):
        self.patience = patience
        self.losses = []

    @property
    def best_loss(self):
        return min(self.losses) if self.losses else math.inf

    @property
    def best_epoch(self):
        return self.losses.index(min(self.losses)) + 1 if self.losses else None

    def step(self, val_loss):
        self.losses.append(val_loss)
        return len(self.losses) - self.best_epoch >= self.patience


class EmptyBest:  # the best starts empty, so the first loss (even inf) is the first best
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch, self.epoch, self.bad = patience, None, None, 0, 0

    def step(self, val_loss):
        self.epoch += 1
        if self.best_loss is None or val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


class ZeroMeansNoBest(ex.EarlyStopping.reference):
    def __init__(self, patience):
        super().__init__(patience)
        self.best_epoch = 0


class EpochsSinceBestInNumpy:
    def __init__(self, patience):
        self.patience = patience
        self.best_loss = np.inf
        self.best_epoch = None
        self.epochs = 0

    def step(self, val_loss):
        self.epochs += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch = float(val_loss), self.epochs
        since = np.int64(self.epochs - (self.best_epoch or 0))
        return since >= self.patience  # a NumPy bool


def _stopper(improved, stop_when, compare_with_previous=False, reset=True):
    class Stopper:
        def __init__(self, patience):
            self.patience = patience
            self.best_loss = math.inf
            self.best_epoch = None
            self.previous = math.inf
            self.epoch = 0
            self.bad = 0

        def step(self, val_loss):
            self.epoch += 1
            reference = self.previous if compare_with_previous else self.best_loss
            if improved(val_loss, reference):
                if reset:
                    self.bad = 0
            else:
                self.bad += 1
            if val_loss < self.best_loss or (improved(val_loss, self.best_loss) and not compare_with_previous):
                self.best_loss, self.best_epoch = val_loss, self.epoch
            self.previous = val_loss
            return stop_when(self.bad, self.patience)

    return Stopper


def _lower(a, b):
    return a < b


def _at_patience(bad, patience):
    return bad >= patience


class ReturnsNoneToGoOn(ex.EarlyStopping.reference):
    def step(self, val_loss):
        return super().step(val_loss) or None


class LastEpochAsBest(ex.EarlyStopping.reference):
    def step(self, val_loss):
        stop = super().step(val_loss)
        self.best_epoch = self.epoch
        return stop


class CountStartsAtOne(ex.EarlyStopping.reference):
    def __init__(self, patience):
        super().__init__(patience)
        self.bad_epochs = 1


class CountStartsBelowZero(ex.EarlyStopping.reference):
    def __init__(self, patience):
        super().__init__(patience)
        self.bad_epochs = -1


class BestEpochSetOnlyInStep:
    def __init__(self, patience):
        self.patience, self.best_loss, self.epoch, self.bad = patience, math.inf, 0, 0

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


class CountSetOnlyInStep:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch, self.epoch = patience, math.inf, None, 0

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


class HistoryOnTheClass:
    history = []  # meant as "the losses of this run"

    def __init__(self, patience):
        self.patience = patience

    @property
    def best_loss(self):
        return min(self.history) if self.history else math.inf

    @property
    def best_epoch(self):
        return self.history.index(min(self.history)) + 1 if self.history else None

    def step(self, val_loss):
        self.history.append(val_loss)
        return len(self.history) - self.best_epoch >= self.patience


class FalsyBest:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch, self.epoch, self.bad = patience, None, None, 0, 0

    def step(self, val_loss):
        self.epoch += 1
        if not self.best_loss or val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad >= self.patience



# -- round 2: answers outside testers wrote ------------------------------------------------------
def step_in_eval_mode(model, optimizer, loss_fn, x, y):
    model.eval()  # "no dropout noise in my step"
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def step_then_eval_mode(model, optimizer, loss_fn, x, y):
    model.train()
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.eval()  # "ready for validation"
    return loss.item()


def logs_a_second_forward(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    with torch.no_grad():
        logged = loss_fn(model(x), y).item()
    optimizer.step()
    return logged


def marks_x_as_requiring_grad(model, optimizer, loss_fn, x, y):
    x.requires_grad_(True)
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def clips_the_gradient(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    optimizer.step()
    return loss.item()


def returns_the_loss_after_the_step(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        return loss_fn(model(x), y).item()


def step_with_autograd_grad(model, optimizer, loss_fn, x, y):
    params = [p for p in model.parameters() if p.requires_grad]
    loss = loss_fn(model(x), y)
    for p, g in zip(params, torch.autograd.grad(loss, params)):
        p.grad = g
    optimizer.step()
    return np.float64(loss.item())


def step_in_train_mode_explicitly(model, optimizer, loss_fn, x, y):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach().cpu().item()


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


def step_with_swapped_loss_arguments(model, optimizer, loss_fn, x, y):
    loss = loss_fn(y, model(x))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


_FIRST_OPTIMIZER = {}


def keeps_the_first_optimizer(model, optimizer, loss_fn, x, y):
    """Keeps the optimizer of its first call: right until a new model and optimizer come."""
    optimizer = _FIRST_OPTIMIZER.setdefault("optimizer", optimizer)
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
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


class BestStartsAsNone:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch = patience, None, None
        self.epoch = self.bad = 0

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:  # None on the first call
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


class SaysStopOnlyOnce:
    """`==` patience: True at the patience-th bad epoch, False again after it."""

    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch = patience, math.inf, None
        self.epoch = self.bad = 0

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad == self.patience


class ResetsWhenItStops:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch = patience, math.inf, None
        self.epoch = self.bad = 0

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        if self.bad >= self.patience:
            self.bad = 0  # "start counting again"
            return True
        return False


class WithMinDelta:
    def __init__(self, patience, min_delta=1e-4):
        self.patience, self.min_delta, self.best_loss, self.best_epoch = patience, min_delta, math.inf, None
        self.epoch = self.bad = 0

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss - self.min_delta:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


class RoundsTheLoss:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch = patience, math.inf, None
        self.epoch = self.bad = 0

    def step(self, val_loss):
        self.epoch += 1
        val_loss = round(val_loss, 4)
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


class StaysStopped:
    """Once it has said stop it says stop for good: also right for a loop that stops."""

    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch = patience, float("inf"), None
        self.calls = self.waited = 0
        self.stopped = False

    def step(self, val_loss):
        self.calls += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.waited = val_loss, self.calls, 0
        else:
            self.waited += 1
        self.stopped = self.stopped or self.waited >= self.patience
        return self.stopped


@dataclasses.dataclass
class AsADataclass:
    patience: int
    best_loss: float = math.inf
    best_epoch: "int | None" = None
    _calls: int = 0
    _bad: int = 0

    def step(self, val_loss):
        self._calls += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self._bad = val_loss, self._calls, 0
        else:
            self._bad += 1
        return np.bool_(self._bad >= self.patience)


# -- round 3 -----------------------------------------------------------------------------------
def step_by_keywords_zeroing_param_groups(model, optimizer, loss_fn, x, y):
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                p.grad.detach_()
                p.grad.zero_()
    loss = loss_fn(input=model(x), target=y)
    loss.backward()
    optimizer.step()
    return np.float64(loss.item())


def step_that_puts_the_mode_back_to_train(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.train()  # "back to training" after a step, whatever the mode was
    return loss.item()


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


class BestFromMinOfHistory:
    def __init__(self, patience):
        self.patience, self.losses = patience, []

    @property
    def best_loss(self):
        return min(self.losses, default=math.inf)

    @property
    def best_epoch(self):
        return self.losses.index(min(self.losses)) + 1 if self.losses else None

    def step(self, val_loss):
        self.losses.append(val_loss)
        return len(self.losses) - self.best_epoch >= self.patience


class WithATinyMargin:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch, self.epoch, self.bad = patience, math.inf, None, 0, 0

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss - 1e-8:  # "float noise is no improvement"
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


class RoundsToSixDecimals:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch, self.epoch, self.bad = patience, math.inf, None, 0, 0

    def step(self, val_loss):
        self.epoch += 1
        val_loss = round(val_loss, 6)
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


def clips_the_gradient_to_norm_1(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    return loss.item()


def decays_the_learning_rate_every_call(model, optimizer, loss_fn, x, y):
    for group in optimizer.param_groups:
        group["lr"] *= 0.9
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def converts_the_model_to_float32(model, optimizer, loss_fn, x, y):
    model.float()
    loss = loss_fn(model(x.float()), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


CATALOGUE = Catalogue({
    ex.train_step: [
        wrong("loss_fn(y, model(x))", step_with_swapped_loss_arguments, "(prediction, target), in that order",
              outcome=Outcome.RAISED),
        right("zero_grad() after step()", clear_after_step),
        right("zero_grad(set_to_none=False) first, float(loss.detach())", clear_to_zero_first),
        right("model.zero_grad()", model_zero_grad),
        right("grads set to None by hand, torch.autograd.backward", grads_to_none_by_hand),
        right("optimizer.step(closure)", with_a_closure),
        wrong("never clears the gradients", never_clears,
              "gradients accumulate", "sum of both batches", "zero_grad()", kind=STATEFUL),
        wrong("clears between backward and step", clears_between_backward_and_step,
              "did not change", "between backward() and step()"),
        wrong("no optimizer.step()", no_step, "optimizer.step() of the optimizer you were given never ran"),
        wrong("step() before backward()", step_before_backward,
              "step() ran before backward()", "zero_grad(), backward(), step()"),
        wrong("backward() twice on one loss", backward_twice,
              "backward through the graph a second time", "Likely cause: loss.backward() called twice",
              outcome=Outcome.RAISED),
        wrong("two forwards, two backwards", two_forwards_two_backwards,
              "backward() ran 2 times", "backward() once per step"),
        wrong("returns the loss tensor", returns_tensor, "as a tensor", "loss.item()"),
        wrong("forgets return", forgets_return, "returned None"),
        wrong("uses the notebook's model", uses_globals, "never ran the model it was given"),
        wrong("SGD by hand", updates_by_hand, "the optimizer you were given never took a step"),
        wrong("clears the optimizer's state every call", clears_the_optimizer_state,
              "brand-new Adam", "second call", kind=STATEFUL),
        wrong("switches autograd off and leaves it off", switches_grad_off_to_log,
              "left autograd switched off", kind=STATEFUL),
        wrong("F.cross_entropy instead of loss_fn", own_cross_entropy,
              "not the loss_fn you were given", "label smoothing", kind=EDGE),
        wrong("casts x to float32", casts_to_float32,
              "must have the same dtype", "Likely cause: the model and the batch you were given have the same dtype", kind=EDGE,
              outcome=Outcome.RAISED),
        wrong("standardises the batch in place", standardises_in_place,
              "changed its input x in place", kind=EDGE),
        right("model.train() first, as many training loops do", step_in_train_mode_explicitly),
        right("model.train() after the step", step_that_puts_the_mode_back_to_train),
        right("keyword arguments to loss_fn, zeroed via param_groups, a NumPy float",
              step_by_keywords_zeroing_param_groups),
        wrong("clips the gradient to norm 1", clips_the_gradient_to_norm_1,
              "times its length", "clip_grad_norm_", kind=EDGE),
        wrong("decays the learning rate inside train_step", decays_the_learning_rate_every_call,
              "learning rate was 0.45 instead of 0.5", kind=STATEFUL),
        wrong("model.float() and x.float()", converts_the_model_to_float32,
              "changed the model's dtype", "given as float64", kind=EDGE),
        right("torch.autograd.grad into .grad, a NumPy float", step_with_autograd_grad),
        wrong("trains in eval mode", step_in_eval_mode, "ran with the model in eval mode", kind=EDGE),
        wrong("hands the model back in eval mode", step_then_eval_mode,
              "gave the model back in eval mode", kind=STATEFUL),
        wrong("logs the loss of a second forward pass", logs_a_second_forward,
              "2 forward passes", "one training step is one forward pass", kind=EDGE),
        wrong("marks x as requiring grad", marks_x_as_requiring_grad, "changed its input x in place",
              kind=EDGE),
        wrong("keeps the optimizer of its first call", keeps_the_first_optimizer,
              "the optimizer you were given never ran", kind=STATEFUL),
        wrong("clips the gradient", clips_the_gradient, "times its length", "gradient clipping"),
        wrong("returns the loss after the step", returns_the_loss_after_the_step,
              "the loss of this batch is", "this call's forward pass"),
    ],
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
    ],
    ex.EarlyStopping: [
        right("a history and properties", WithHistory),
        right("an empty best (None) until the first loss", EmptyBest),
        right("best_epoch 0 for no best yet", ZeroMeansNoBest),
        right("epochs since the best, NumPy numbers", EpochsSinceBestInNumpy),
        wrong("stops at the first rise", _stopper(_lower, lambda bad, patience: bad >= 1,
                                                  compare_with_previous=True), "ignores patience"),
        wrong("compares with the previous epoch", _stopper(_lower, _at_patience, compare_with_previous=True),
              "drifts down", "not with the previous epoch"),
        wrong("an equal loss counts as better", _stopper(lambda a, b: a <= b, _at_patience),
              "stays flat", "use `<`, not `<=`", kind=EDGE),
        wrong("stops one epoch late", _stopper(_lower, lambda bad, patience: bad > patience),
              "one epoch late", ">=, not >"),
        wrong("stops one epoch early", _stopper(_lower, lambda bad, patience: bad >= patience - 1),
              "one epoch early"),
        wrong("a new best does not reset the count", _stopper(_lower, _at_patience, reset=False),
              "reset the count", kind=STATEFUL),
        wrong("returns None to go on", ReturnsNoneToGoOn, "step() returned NoneType"),
        wrong("the last epoch as best_epoch", LastEpochAsBest, "best_epoch is"),
        wrong("the count starts at 1", CountStartsAtOne, "all inf", "does not start at 0", kind=EDGE),
        wrong("the count starts at -1", CountStartsBelowZero, "all inf", "starts below 0", kind=EDGE),
        wrong("best_epoch set only in step()", BestEpochSetOnlyInStep,
              "has no attribute best_epoch", "best_epoch = None"),
        wrong("the count set only in step()", CountSetOnlyInStep, "__init__ never set",
              outcome=Outcome.RAISED),
        wrong("the history is a class attribute", HistoryOnTheClass,
              "carries over from one object to the next", "class attribute", kind=STATEFUL),
        wrong("`if not self.best_loss` takes 0.0 for no best", FalsyBest,
              "0.0 counts as false", "if not self.best_loss", kind=EDGE),
        right("stays stopped once it said stop", StaysStopped),
        right("a dataclass returning NumPy booleans", AsADataclass),
        wrong("says stop only when the count equals patience", SaysStopOnlyOnce,
              "then go on (False)", "keeps returning True", kind=STATEFUL),
        wrong("resets the count when it says stop", ResetsWhenItStops,
              "then go on (False)", "don't reset it", kind=STATEFUL),
        wrong("a min_delta margin", WithMinDelta, "tiny steps", "however small the difference", kind=EDGE),
        wrong("rounds the loss", RoundsTheLoss, "tiny steps", "no rounding", kind=EDGE),
        right("min() and index() of a history", BestFromMinOfHistory),
        wrong("a margin of 1e-8", WithATinyMargin, "tiny steps", "however small the difference", kind=EDGE),
        wrong("rounds to 6 decimals", RoundsToSixDecimals, "tiny steps", "no rounding", kind=EDGE),
        wrong("compares with a best of None", BestStartsAsNone, "'NoneType'",
              "Likely cause: a loss compared (<, >) with None", outcome=Outcome.RAISED),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()


def test_float_of_a_loss_that_requires_grad_passes_with_a_note_on_item():
    """float(loss) is correct, but torch warns about it: the verdict passes and says why."""
    from course_utils.exercises import training_loop as ex

    def step_with_float(model, optimizer, loss_fn, x, y):
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss)

    verdict = ex.train_step.verdict(step_with_float)
    assert verdict.passed
    assert "Note: torch warned" in verdict.message and "loss.item()" in verdict.message
    reference = ex.train_step.verdict(ex.train_step.reference)
    assert reference.passed and "Note:" not in reference.message
