"""Chapter 04's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them."""

import math
import torch

from course_utils.exercises import training_loop as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import (
    assert_fails,
    assert_passes,
    assert_references_pass_and_leave_the_session_alone,
)

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
def test_train_step_reference_and_alternatives_pass():
    assert_passes(ex.train_step, ex.train_step.reference)

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

    for answer in (clear_after_step, clear_to_zero_first, model_zero_grad):
        assert_passes(ex.train_step, answer)


def test_train_step_classic_mistakes():
    def never_clears(model, optimizer, loss_fn, x, y):
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    assert_fails(ex.train_step, never_clears, "gradients accumulate", "sum of both batches", "zero_grad()")

    def clears_between_backward_and_step(model, optimizer, loss_fn, x, y):
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        return loss.item()

    assert_fails(ex.train_step, clears_between_backward_and_step, "did not change", "between backward() and step()")

    def no_step(model, optimizer, loss_fn, x, y):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss.item()

    assert_fails(ex.train_step, no_step, "forgot optimizer.step()")

    def backward_twice(model, optimizer, loss_fn, x, y):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        loss.backward()
        optimizer.step()
        return loss.item()

    assert_fails(
        ex.train_step, backward_twice, "backward through the graph a second time",
        "Likely cause: loss.backward() called twice", outcome=Outcome.RAISED,
    )

    def two_forwards_two_backwards(model, optimizer, loss_fn, x, y):
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    assert_fails(ex.train_step, two_forwards_two_backwards, "twice one SGD step", "backward() once")

    def returns_tensor(model, optimizer, loss_fn, x, y):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    assert_fails(ex.train_step, returns_tensor, "as a tensor", "loss.item()")

    def forgets_return(model, optimizer, loss_fn, x, y):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    assert_fails(ex.train_step, forgets_return, "returned None")

    notebook_model = torch.nn.Linear(4, 3)

    def uses_globals(model, optimizer, loss_fn, x, y):
        return loss_fn(notebook_model(x), y).item()

    assert_fails(ex.train_step, uses_globals, "never ran the model it was given")


def test_train_step_leaves_its_arguments_alone():
    model = torch.nn.Linear(2, 2)
    before = [p.detach().clone() for p in model.parameters()]
    assert_passes(ex.train_step, ex.train_step.reference)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


# -- evaluate (L4) -----------------------------------------------------------------------------
def test_evaluate_reference_and_alternatives_pass():
    assert_passes(ex.evaluate, ex.evaluate.reference)

    def with_try_finally_and_inference_mode(model, x, y, loss_fn):
        was_training = model.training
        model.eval()
        try:
            with torch.inference_mode():
                return loss_fn(model(x), y).item()
        finally:
            if was_training:
                model.train()

    def with_decorator(model, x, y, loss_fn):
        @torch.no_grad()
        def forward():
            return loss_fn(model(x), y)

        mode = model.training
        model.eval()
        loss = float(forward())
        model.train(mode)
        return loss

    for answer in (with_try_finally_and_inference_mode, with_decorator):
        assert_passes(ex.evaluate, answer)


def test_evaluate_classic_mistakes():
    def forgets_eval(model, x, y, loss_fn):
        with torch.no_grad():
            return loss_fn(model(x), y).item()

    assert_fails(ex.evaluate, forgets_eval, "forgot model.eval()", "Dropout", "num_batches_tracked went from 3 to 4")

    def forgets_no_grad(model, x, y, loss_fn):
        was_training = model.training
        model.eval()
        loss = loss_fn(model(x), y).item()
        model.train(was_training)
        return loss

    assert_fails(ex.evaluate, forgets_no_grad, "recorded a graph", "torch.no_grad()")

    def always_train_at_the_end(model, x, y, loss_fn):
        model.eval()
        with torch.no_grad():
            loss = loss_fn(model(x), y).item()
        model.train()
        return loss

    assert_fails(ex.evaluate, always_train_at_the_end, "a model in eval mode", "model.train(was_training)")

    def never_back_to_train(model, x, y, loss_fn):
        model.eval()
        with torch.no_grad():
            return loss_fn(model(x), y).item()

    assert_fails(ex.evaluate, never_back_to_train, "left the model in eval mode")

    def sets_only_the_flag(model, x, y, loss_fn):
        was_training = model.training
        model.eval()
        with torch.no_grad():
            loss = loss_fn(model(x), y).item()
        model.training = was_training
        return loss

    assert_fails(ex.evaluate, sets_only_the_flag, "some of its layers are still in eval mode")

    def returns_tensor(model, x, y, loss_fn):
        was_training = model.training
        model.eval()
        with torch.no_grad():
            loss = loss_fn(model(x), y)
        model.train(was_training)
        return loss

    assert_fails(ex.evaluate, returns_tensor, "as a tensor", "loss.item()")


# -- EarlyStopping (L5) ------------------------------------------------------------------------
def test_early_stopping_reference_and_alternatives_pass():
    assert_passes(ex.EarlyStopping, ex.EarlyStopping.reference)

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

    assert_passes(ex.EarlyStopping, WithHistory)


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


def test_early_stopping_classic_mistakes():
    def lower(a, b):
        return a < b

    def at_patience(bad, patience):
        return bad >= patience

    first_increase = _stopper(lower, lambda bad, patience: bad >= 1, compare_with_previous=True)
    assert_fails(ex.EarlyStopping, first_increase, "ignores patience")

    previous_epoch = _stopper(lower, at_patience, compare_with_previous=True)
    assert_fails(ex.EarlyStopping, previous_epoch, "drifts down", "not with the previous epoch")

    equal_is_better = _stopper(lambda a, b: a <= b, at_patience)
    assert_fails(ex.EarlyStopping, equal_is_better, "stays flat", "use `<`, not `<=`")

    one_late = _stopper(lower, lambda bad, patience: bad > patience)
    assert_fails(ex.EarlyStopping, one_late, "one epoch late", ">=, not >")

    one_early = _stopper(lower, lambda bad, patience: bad >= patience - 1)
    assert_fails(ex.EarlyStopping, one_early, "one epoch early")

    no_reset = _stopper(lower, at_patience, reset=False)
    assert_fails(ex.EarlyStopping, no_reset, "reset the count")

    class ReturnsNoneToGoOn(ex.EarlyStopping.reference):
        def step(self, val_loss):
            return super().step(val_loss) or None

    assert_fails(ex.EarlyStopping, ReturnsNoneToGoOn, "step() returned NoneType")

    class LastEpochAsBest(ex.EarlyStopping.reference):
        def step(self, val_loss):
            stop = super().step(val_loss)
            self.best_epoch = self.epoch
            return stop

    assert_fails(ex.EarlyStopping, LastEpochAsBest, "best_epoch is")


def test_early_stopping_count_and_attributes_start_in_init():
    # A correct alternative: the best starts empty, so the first loss (even inf) is the first best.
    class EmptyBest:
        def __init__(self, patience):
            self.patience, self.best_loss, self.best_epoch, self.epoch, self.bad = patience, None, None, 0, 0

        def step(self, val_loss):
            self.epoch += 1
            if self.best_loss is None or val_loss < self.best_loss:
                self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
            else:
                self.bad += 1
            return self.bad >= self.patience

    assert_passes(ex.EarlyStopping, EmptyBest)

    class ZeroMeansNoBest(ex.EarlyStopping.reference):
        def __init__(self, patience):
            super().__init__(patience)
            self.best_epoch = 0

    assert_passes(ex.EarlyStopping, ZeroMeansNoBest)

    class CountStartsAtOne(ex.EarlyStopping.reference):
        def __init__(self, patience):
            super().__init__(patience)
            self.bad_epochs = 1

    assert_fails(ex.EarlyStopping, CountStartsAtOne, "all inf", "does not start at 0")

    class CountStartsBelowZero(ex.EarlyStopping.reference):
        def __init__(self, patience):
            super().__init__(patience)
            self.bad_epochs = -1

    assert_fails(ex.EarlyStopping, CountStartsBelowZero, "all inf", "starts below 0")

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

    assert_fails(ex.EarlyStopping, BestEpochSetOnlyInStep, "has no attribute best_epoch", "best_epoch = None")

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

    assert_fails(ex.EarlyStopping, CountSetOnlyInStep, "__init__ never set", outcome=Outcome.RAISED)
