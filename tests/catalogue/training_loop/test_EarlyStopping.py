"""Chapter 04's EarlyStopping: its catalogue of right and wrong answers."""

import dataclasses
import math
import sys

import numpy as np
import pytest
import torch

from course_utils.exercises import training_loop as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


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
    """Once it has said stop it says stop for good. Issue 45: wrong by the task text, which says
    True only while `patience` calls in a row brought no improvement ("False otherwise"): a new
    best after the stop resets the count, and step() says False."""

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


# -- issue 45: the stop latches (True even after a new best) ----------------------------------
class StopFlag:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch = patience, math.inf, None
        self.epoch = self.bad = 0
        self.stopped = False

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        if self.bad >= self.patience:
            self.stopped = True
        return self.stopped


class MostBadEpochsSoFar:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch = patience, math.inf, None
        self.epoch = self.bad = self.worst = 0

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        self.worst = max(self.worst, self.bad)
        return self.worst >= self.patience


class FrozenOnceStopped:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch = patience, math.inf, None
        self.epoch = self.bad = 0

    def step(self, val_loss):
        self.epoch += 1
        if self.bad >= self.patience:
            return True  # stopped: nothing changes any more
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        return self.bad >= self.patience


class RemembersWhereItStopped:
    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch = patience, math.inf, None
        self.epoch = self.bad = 0
        self.stopped_at = None

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad = val_loss, self.epoch, 0
        else:
            self.bad += 1
        if self.stopped_at is None and self.bad >= self.patience:
            self.stopped_at = self.epoch
        return self.stopped_at is not None


class EpochsSinceTheBest:
    """No counter: the epochs since the best, from the epoch numbers (None: every epoch counts)."""

    def __init__(self, patience):
        self.patience, self.best_loss, self.best_epoch, self.epoch = patience, math.inf, None, 0

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch = val_loss, self.epoch
        return self.epoch - (self.best_epoch or 0) >= self.patience



# -- issue 45, fresh round (from the task text) --
class _Counting:
    """The reference's shape; subclasses change one thing."""

    START = math.inf

    def __init__(self, patience):
        self.patience = patience
        self.best_loss = self.START
        self.best_epoch = None
        self.epoch = 0
        self.bad_epochs = 0

    def improved(self, val_loss):
        return val_loss < self.best_loss

    def step(self, val_loss):
        self.epoch += 1
        if self.improved(val_loss):
            self.best_loss, self.best_epoch, self.bad_epochs = val_loss, self.epoch, 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


class StartsAtABillion(_Counting):
    START = 1e9


class StartsAtTheLargestFloat(_Counting):
    START = sys.float_info.max


class EqualResetsTheCount(_Counting):
    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch = val_loss, self.epoch
        if val_loss <= self.best_loss:
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


class LastOccurrenceOfTheMinimum:
    def __init__(self, patience):
        self.patience = patience
        self.losses = []
        self.best_loss, self.best_epoch = math.inf, None

    def step(self, val_loss):
        self.losses.append(val_loss)
        low = min(self.losses)
        if low < math.inf:
            self.best_loss = low
            self.best_epoch = len(self.losses) - self.losses[::-1].index(low)
        since = len(self.losses) - (self.best_epoch or 0)
        return since >= self.patience


class MinusOneMeansUnset(_Counting):
    START = -1.0  # "losses are never negative"

    def improved(self, val_loss):
        return self.best_loss < 0 or val_loss < self.best_loss

    def step(self, val_loss):
        self.epoch += 1
        if self.improved(val_loss) and val_loss < math.inf:
            self.best_loss, self.best_epoch, self.bad_epochs = val_loss, self.epoch, 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


class BestEpochCountsImprovements(_Counting):
    def __init__(self, patience):
        super().__init__(patience)
        self.bests = []

    def step(self, val_loss):
        if val_loss < self.best_loss:
            self.bests.append(val_loss)
            self.best_loss, self.best_epoch, self.bad_epochs = val_loss, len(self.bests), 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


class StopsAtOnceOnInf(_Counting):
    def step(self, val_loss):
        if math.isinf(val_loss):
            self.epoch += 1
            self.bad_epochs += 1
            return True  # diverged: no point in going on
        return super().step(val_loss)


class FirstLossAsBestWithoutItsEpoch(_Counting):
    START = None

    def step(self, val_loss):
        self.epoch += 1
        if self.best_loss is None:
            self.best_loss = val_loss
            return False
        return self._count(val_loss)

    def _count(self, val_loss):
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad_epochs = val_loss, self.epoch, 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


class EpochsSinceTheBestWithoutNone(_Counting):
    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch = val_loss, self.epoch
        return self.epoch - self.best_epoch >= self.patience


class BestAsATensor(_Counting):
    def __init__(self, patience):
        super().__init__(patience)
        self.best_loss = torch.tensor(math.inf)

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.bad_epochs = torch.tensor(val_loss), self.epoch, 0
        else:
            self.bad_epochs += 1
        return bool(self.bad_epochs >= self.patience)


class CountsDownThePatienceLeft:
    """Right: the epochs of patience left, counted down, and reset by a new best."""

    def __init__(self, patience):
        self.patience, self.left = patience, patience
        self.best_loss, self.best_epoch, self.seen = math.inf, None, 0

    def step(self, val_loss):
        self.seen += 1
        if val_loss < self.best_loss:
            self.best_loss, self.best_epoch, self.left = val_loss, self.seen, self.patience
        else:
            self.left -= 1
        return self.left <= 0


# -- issue 45, second fresh round (from the task text) --
class NotWorseIsBetter(_Counting):
    """`not (val_loss >= best)`: nan compares False with everything, so it is taken for a new best."""

    def improved(self, val_loss):
        return not (val_loss >= self.best_loss)


CATALOGUE = Catalogue({
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
        wrong("stays stopped once it said stop", StaysStopped, "still True after epoch 4",
              "was a new best", "Don't keep a 'stopped' flag", kind=STATEFUL),
        right("a dataclass returning NumPy booleans", AsADataclass),
        wrong("says stop only when the count equals patience", SaysStopOnlyOnce,
              "then go on (False)", "keeps returning True", kind=STATEFUL),
        wrong("resets the count when it says stop", ResetsWhenItStops,
              "then go on (False)", "don't reset it", kind=STATEFUL),
        wrong("a min_delta margin", WithMinDelta, "tiny steps", "however small the difference", kind=EDGE),
        wrong("rounds the loss", RoundsTheLoss, "tiny steps", "no rounding", kind=EDGE),
        right("min() and index() of a history", BestFromMinOfHistory),
        wrong("a 'stopped' flag", StopFlag, "still True after epoch 4", "was a new best", kind=STATEFUL),
        wrong("the largest count so far", MostBadEpochsSoFar, "still True after epoch 4",
              "the largest count so far", kind=STATEFUL),
        wrong("frozen once it said stop", FrozenOnceStopped, "still True after epoch 4", kind=STATEFUL),
        wrong("remembers the epoch it stopped", RemembersWhereItStopped, "was a new best", kind=STATEFUL),
        right("epochs since the best, no counter", EpochsSinceTheBest),
        wrong("a margin of 1e-8", WithATinyMargin, "tiny steps", "however small the difference", kind=EDGE),
        wrong("rounds to 6 decimals", RoundsToSixDecimals, "tiny steps", "no rounding", kind=EDGE),
        wrong("compares with a best of None", BestStartsAsNone, "'NoneType'",
              "Likely cause: a loss compared (<, >) with None", outcome=Outcome.RAISED),
        # -- issue 45, fresh round (from the task text) --
        wrong("the best starts at 1e9", StartsAtABillion, "best_loss is 1000000000.0", kind=EDGE),
        wrong("the best starts at sys.float_info.max", StartsAtTheLargestFloat,
              "best_loss is 1.7976931348623157e+308", kind=EDGE),
        wrong("an equal loss resets the count", EqualResetsTheCount, "stays flat", "use `<`, not `<=`", kind=EDGE),
        wrong("best_epoch of the last equal minimum", LastOccurrenceOfTheMinimum, "stays flat", kind=EDGE),
        wrong("-1.0 means no best yet", MinusOneMeansUnset, "best_loss is -1.0", kind=EDGE),
        wrong("best_epoch counts the improvements", BestEpochCountsImprovements, "best_epoch is 4; expected 5"),
        wrong("stops at once on inf", StopsAtOnceOnInf, "all inf", "an inf loss stops training at once", kind=EDGE),
        wrong("the first loss as best, without its epoch", FirstLossAsBestWithoutItsEpoch,
              "best_epoch is None; expected 1", kind=EDGE),
        wrong("epochs since the best, no None case", EpochsSinceTheBestWithoutNone,
              "Likely cause: a subtraction with None", kind=EDGE, outcome=Outcome.RAISED),
        wrong("the best kept as a float32 tensor", BestAsATensor, "best_loss is tensor(1.)"),
        right("the patience left, counted down", CountsDownThePatienceLeft),
        # -- issue 45, second fresh round (from the task text) --
        wrong("'not worse' counts nan as a new best", NotWorseIsBetter, "turns nan", "best_loss nan",
              "nan is not strictly lower", kind=EDGE),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
