"""Chapter 04, L5: EarlyStopping, a class that says when to stop training.

Engine: applies edges.edge_values(float64, Allowed(finite=True)) as one sequence of losses
(inf and nan have their own), a second object after a first, and calls after the stop; hand-written
because the answer is a class whose objects keep state from call to call, and its judge names
the slips of a stopping rule from when each object said stop."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.edges import Allowed, edge_values
from course_utils.exercises.messages import Messages
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.training_loop.common import CHAPTER



MESSAGES = Messages("EarlyStopping", {
    "said-never": "never said stop",
    "said-stop-after": "said stop after epoch {stop}",
    "wrong-best-loss": "After {on}, best_loss is {got}; expected {expected}, the lowest loss seen so far.",
    "count-not-from-zero": (
        "Your EarlyStopping {said} on {on}; it should stop after epoch {right}. No loss "
        "improved on the best, so each epoch adds 1 to the count of epochs without "
        "improvement, and it reaches patience={patience} after epoch {right}: your count "
        "does not start at 0, or an inf loss stops training at once. Set the count to 0 in "
        "__init__, and count an epoch whose loss is inf like any epoch without improvement."
    ),
    "count-below-zero": (
        "Your EarlyStopping {said} on {on}; it should stop after epoch {right}. No loss "
        "improved on the best (best_epoch is still {best_epoch}), so each epoch adds 1 to "
        "the count of epochs without improvement and it reaches patience={patience} after "
        "epoch {right}: your count starts below 0. Set it to 0 in __init__."
    ),
    "mixes-inf-readings": (
        "Your EarlyStopping {said} with best_epoch {best_epoch} on {on}. Either the first inf "
        "is no improvement on a best that starts at math.inf (stop after epoch {right}, "
        "best_epoch None), or it is the first best (best_epoch 1, stop after epoch "
        "{right_plus_one}); your answer mixes the two."
    ),
    "state-on-class": (
        "step() changed {name}, a class attribute: one container that every EarlyStopping "
        "shares, so the state of one object carries over from one object to the next (a "
        "second run of training would start with the first one's losses). Create it on "
        "self in __init__: self.{name} = ..."
    ),
    "state-carries-over": (
        "A second EarlyStopping, given {on} after a first one, {said_again} "
        "with best_epoch {best_epoch_again} and best_loss {best_loss_again}; the first "
        "object given the same losses {said_first} with best_epoch {best_epoch_first}. Something "
        "carries over from one object to the next: state kept on the class (a list or a "
        "counter written as a class attribute) or in a global. Set every attribute on self "
        "in __init__."
    ),
    "start-best-loss": "math.inf",
    "start-best-epoch": "None, no best epoch yet",
    "attribute-set-only-in-step": (
        "A new EarlyStopping(patience={patience}) has no attribute {name}: it "
        "appears only once step() sets it, so code that reads it before (or without) an "
        "improvement crashes. Set it in __init__ ({name} = {start})."
    ),
    "returns-not-a-bool": (
        "step() returned {kind} (on {on}); return True to stop now and False "
        "to go on, e.g. `return self.bad_epochs >= self.patience`."
    ),
    "falsy-zero-best": (
        "On {on}, the best loss was 0.0 at epoch {expected_epoch}, but your "
        "class then took {got_loss} (epoch {got_epoch}) as a new best: "
        "0.0 counts as false, so a test like `if not self.best_loss` reads it as 'no best "
        "yet'. Start best_loss at math.inf and compare with `<` (or test `is None`)."
    ),
    "ignores-patience": (
        "Your EarlyStopping {said} on {on}; it should stop after epoch {right}. You stop at "
        "the first epoch that is worse than the one before: "
        "that ignores patience. Count the epochs without a new best and stop when "
        "that count reaches patience."
    ),
    "compares-with-previous": (
        "Your EarlyStopping {said} on {on}; it should stop after epoch {right}. From epoch 3 "
        "on, each epoch is better than the one before it, yet "
        "none beats the best (0.5 at epoch 2). Compare with the best loss so far, not with the "
        "previous epoch."
    ),
    "margin-or-rounding": (
        "Your EarlyStopping {said} on {on}; it should stop after epoch {right}. 0.4999999999 "
        "is lower than 0.5, and 0.4999999998 lower than "
        "0.4999999999: each is a new best, however small the difference. Any loss "
        "strictly lower than the best counts: compare val_loss < self.best_loss, with "
        "no margin (min_delta) and no rounding."
    ),
    "equal-counts-as-better": (
        "Your EarlyStopping {said} on {on}; it should stop after epoch {right}. A loss equal "
        "to the best is not an improvement: use `<`, not "
        "`<=`, or a flat validation loss never stops training."
    ),
    "no-reset-on-new-best": (
        "Your EarlyStopping {said} on {on}; it should stop after epoch {right}. A new best "
        "loss must reset the count of epochs without "
        "improvement to 0; you keep counting from before."
    ),
    "stops-one-late": (
        "Your EarlyStopping {said} on {on}; it should stop after epoch {right}. You stop one "
        "epoch late: stop as soon as the number of epochs "
        "without improvement reaches patience (>=, not >)."
    ),
    "stops-one-early": (
        "Your EarlyStopping {said} on {on}; it should stop after epoch {right}. You stop one "
        "epoch early: patience=N means you wait N epochs "
        "without improvement, and stop after the Nth (count >= patience)."
    ),
    "nan-counts-as-improvement": (
        "Your EarlyStopping {said} with best_loss {best_loss} and best_epoch {best_epoch} on "
        "{on}; it should stop after epoch {right}, with best_loss {expected_loss} from epoch "
        "{expected_epoch}. nan is not strictly lower than the best (every comparison with nan "
        "is False), so it is no improvement: a test of 'not worse', such as "
        "`not (val_loss >= self.best_loss)`, takes it for one. Test the improvement itself, "
        "`if val_loss < self.best_loss:`, and count every other epoch, nan too, as one without "
        "improvement."
    ),
    "wrong-stop-epoch": "Your EarlyStopping {said} on {on}; it should stop after epoch {right}.",
    "wrong-best-epoch": (
        "After {on}, best_epoch is {got}; expected {expected}. "
        "Count the calls to step() from 1, and remember the number of the call that "
        "gave the lowest loss."
    ),
    "stop-latched": (
        "Your EarlyStopping said stop after epoch {stop} on {on}, and still True after "
        "epoch {epoch}, whose loss {loss:g} was a new best (lower than {before:g}). step() "
        "returns True only while the last `patience` calls brought no improvement: a new "
        "best resets the count of epochs without improvement to 0, so step() returns False "
        "then, and True again only after `patience` more epochs without a new best. Don't "
        "keep a 'stopped' flag (or the largest count so far); return count >= patience."
    ),
    "wrong-after-new-best": (
        "Your EarlyStopping said {said} after epoch {epoch} on {on}; expected "
        "{expected}. After the stop, {loss:g} {why}"
    ),
    "clause-was-a-new-best": (
        "was a new best: it resets the count of epochs without improvement to 0 and becomes "
        "best_loss, like any new best."
    ),
    "clause-no-improvement": (
        "brought no improvement on the best since the last new best: count it, and say stop "
        "once the count reaches patience."
    ),
    "stop-not-kept": (
        "Your EarlyStopping said stop after epoch {stop} on {on}, then go on (False) "
        "after epoch {later}, although no loss had improved on the best since. Training should "
        "still stop: the number of epochs without improvement only grows, so step() keeps "
        "returning True until a loss beats the best. Compare that number with `>=` patience, "
        "and don't reset it when you say stop."
    ),
    "passed": (
        "Correct: you stop after `patience` epochs without a new best, compare with the best "
        "so far, and remember which epoch that was."
    ),
    "hint-1": (
        "Keep three things: the best loss so far, the epoch it came from, and how many epochs "
        "have passed since. Start the best at math.inf so the first (finite) loss is always a new best."
    ),
    "hint-2": (
        "In step(): count the epoch; if val_loss < best_loss it is a new best (reset the count "
        "to 0), otherwise add 1 to the count. Return whether the count has reached patience."
    ),
    "hint-3": (
        "self.epoch += 1; if val_loss < self.best_loss: self.best_loss, self.best_epoch, "
        "self.bad_epochs = val_loss, self.epoch, 0; else: self.bad_epochs += 1; "
        "return self.bad_epochs >= self.patience"
    ),
    "attribute-not-set-in-init": (
        "an attribute used in step() that __init__ never set. Set every attribute in "
        "__init__ (best_loss = math.inf, best_epoch = None, the counters = 0)."
    ),
    "arithmetic-with-none": (
        "a subtraction with None: best_epoch (or another attribute that starts as None) is "
        "None until the first best, and stays so on losses that are all inf, so arithmetic "
        "with it fails. Test `is None` first (no best yet: every epoch counts as one without "
        "improvement), or keep the epochs without improvement in a counter of their own."
    ),
    "loss-compared-with-none": (
        "a loss compared (<, >) with None: an attribute that starts as None cannot be "
        "compared with a number. Start best_loss at math.inf, or test `is None` before "
        "comparing."
    ),
})

# Error notes: the clue in the error's message, by note id.
ERROR_CLUES = {"attribute-not-set-in-init": "has no attribute",
               "arithmetic-with-none": "unsupported operand type(s) for -:",
               "loss-compared-with-none": "and 'NoneType'"}

# ============================================================================================
# L5 — early stopping
# ============================================================================================
class EarlyStopping:
    def __init__(self, patience):
        self.patience = patience
        self.best_loss = math.inf
        self.best_epoch = None
        self.epoch = 0
        self.bad_epochs = 0          # epochs since the best one

    def step(self, val_loss):
        self.epoch += 1
        if val_loss < self.best_loss:   # strictly lower: an equal loss is no progress
            self.best_loss = val_loss
            self.best_epoch = self.epoch
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
        return self.bad_epochs >= self.patience


_EarlyStopping = EarlyStopping

_ALL_INF = "losses that are all inf (a run that diverged from the start)"
_REACHES_ZERO = "a loss that reaches exactly 0.0"
_TINY_STEPS = "a loss that improves by tiny steps"
# After a stop, a loss that beats the best: the last call brought an improvement, so step()
# says False (True again only after `patience` more calls without one), and the new best counts.
_NEW_BEST_AFTER_STOP = "a loss that sets a new best after the stop"
_NAN = "a loss that turns nan (a run that diverged after a first epoch)"
_EDGES = "losses at the edges of a float64, falling from the largest finite one to the most negative"
_EDGE_LOSSES = sorted(edge_values(torch.float64, Allowed(finite=True)), reverse=True)

# (name, patience, validation losses): each separates the right rule from one classic mistake.
_STOPPING_CASES = (
    ("a loss that rises every epoch", 3, [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]),
    ("a loss that recovers before patience runs out", 3, [1.0, 0.8, 0.85, 0.7, 0.6, 0.65, 0.66, 0.67, 0.5, 0.4]),
    ("a loss that drifts down but never beats its best", 2, [1.0, 0.5, 0.9, 0.8, 0.7, 0.6, 0.55, 0.52]),
    ("a loss that stays flat", 2, [0.7, 0.7, 0.7, 0.7, 0.7, 0.7]),
    ("patience=1", 1, [0.9, 0.6, 0.61, 0.3]),
    # A best of exactly 0.0 is falsy: `if not self.best_loss` would take it for "no best yet".
    (_REACHES_ZERO, 2, [0.5, 0.0, 0.1, 0.2, 0.3]),
    # Strictly lower is an improvement however small: no margin (min_delta), no rounding. Steps
    # of 1e-10 catch a margin of 1e-8 and rounding to up to 9 decimals alike.
    (_TINY_STEPS, 2, [0.5, 0.4999999999, 0.4999999998, 0.4999999998, 0.4999999998, 0.4999999998]),
    # A diverged run: no loss ever beats math.inf, so the count's starting value decides.
    (_ALL_INF, 2, [math.inf] * 5),
    # Run on through the stop (the caller's loop may log on, or resume): then twice, on a
    # second new object after a first that said stop, which must start from nothing.
    (_NEW_BEST_AFTER_STOP, 2, [1.0, 1.1, 1.2, 0.5, 0.6, 0.7, 0.4, 0.45]),
    (_NEW_BEST_AFTER_STOP + ", on a second EarlyStopping", 2, [1.0, 1.1, 1.2, 0.5, 0.6, 0.7, 0.4, 0.45]),
    # The edges of a float64 loss (edges.py; finite: inf has its case above), from the largest
    # down: each a new best but -0.0, which equals 0.0; then the lowest twice, to stop. A best
    # that starts at 1e9 or sys.float_info.max, a sentinel below zero, a relative margin or a
    # float32 copy of the best each take one of them for another.
    (_EDGES, 2, _EDGE_LOSSES + _EDGE_LOSSES[-1:] * 2),
    # nan is lower than nothing: no improvement, however the comparison is written ("not worse",
    # `not (val_loss >= best)`, takes it for a new best and never stops).
    (_NAN, 2, [1.0, math.nan, math.nan, math.nan]),
)


def _run_stopper(make, patience, losses, run, on):
    stopper = run(make, patience, on=f"EarlyStopping({patience})")
    missing_after_init = [n for n in ("best_loss", "best_epoch") if not hasattr(stopper, n)]
    answers, stop = [], None
    through = on.startswith(_NEW_BEST_AFTER_STOP)  # every loss, a new best after the stop too
    for loss in losses:
        if stop is not None and not through and loss < min(losses[: len(answers)]):
            break  # after a stop, only the calls that bring no improvement either
        answer = run(stopper.step, loss, on=f"{on}, after losses {losses[: len(answers) + 1]}")
        if type(answer) is np.bool_:  # a comparison of NumPy numbers: True/False all the same
            answer = bool(answer)
        answers.append(answer)
        if stop is None and answer is True:
            stop = len(answers)
    kinds = [type(a).__name__ for a in answers]
    # What step() said on the later calls, none of which improved on the best either.
    # (Run through a new best, "said" holds every answer and the judge compares it instead.)
    after_stop = [bool(a) if type(a) is bool else repr(a) for a in answers[stop:]] if stop and not through else []
    best_epoch = getattr(stopper, "best_epoch", "missing")
    best_loss = getattr(stopper, "best_loss", "missing")
    return {
        "missing_after_init": missing_after_init,
        "said": [bool(a) if type(a) is bool else repr(a) for a in answers] if through else None,
        "kinds": kinds,
        "stop": stop,
        "after_stop": after_stop,
        "best_epoch": best_epoch if type(best_epoch) is int else repr(best_epoch),
        "best_loss": float(best_loss) if isinstance(best_loss, (int, float)) and type(best_loss) is not bool else repr(best_loss),
    }


def _probe_early_stopping(answer, run):
    """What the answer's objects say on each sequence of losses (and the sequences): never what
    the reference says (``_expect_early_stopping`` adds that, on the judge's side)."""
    # The first sequence twice, on two objects one after the other: state kept on the class or
    # in a global (not on self) carries over from one EarlyStopping to the next.
    on, patience, losses = _STOPPING_CASES[0]
    shared = {  # containers on the class itself, which every object shares
        name: copy.copy(value)
        for name, value in (vars(answer).items() if isinstance(answer, type) else ())
        if type(value) in (list, dict, set)
    }
    first = _run_stopper(answer, patience, losses, run, on)
    changed = sorted(name for name, kept in shared.items() if getattr(answer, name, None) != kept)
    again = _run_stopper(answer, patience, losses, run, f"{on}, on a second EarlyStopping")
    again["class_attributes_changed"] = changed
    cases = []
    record = {"cases": cases, "again": again}
    for on, patience, losses in _STOPPING_CASES:
        try:
            got = first if not cases else _run_stopper(answer, patience, losses, run, on)
        except LearnerRaised as raised:
            # The judge decides: a slip an earlier sequence already shows is the one to report,
            # not an error a later one led to.
            record["raised"] = later_error(raised, answer)
            if record["raised"] is None:
                raise
            break
        cases.append({"on": f"{on} (patience={patience}, losses {losses})", "patience": patience,
                      "losses": list(losses), "name": on, "got": got})
    return record


def _run_directly(function, *args, on=None):
    return function(*args)


def _expect_early_stopping(record):
    """What the reference class says on each recorded sequence (its patience and losses): when
    it stops, its best epoch and loss, as the probe drives an answer (``_run_stopper``)."""
    for case in record["cases"]:
        case["expected"] = _run_stopper(EarlyStopping.reference, case["patience"], case["losses"],
                                        _run_directly, case["name"])
    return record


def _first_rise(losses):
    return next((i + 1 for i in range(1, len(losses)) if losses[i] > losses[i - 1]), None)


def _said(stop) -> str:
    return MESSAGES.text("said-never") if stop is None else MESSAGES.text("said-stop-after", stop=stop)


def _judge_all_inf(on, got, expected, patience):
    """A first loss of inf is no improvement on math.inf, or (with a best that starts empty)
    the first best: both readings are correct, as long as the count starts at 0."""
    stop, right, best_epoch = got["stop"], expected["stop"], got["best_epoch"]
    no_best = best_epoch in ("None", 0)
    if got["best_loss"] != expected["best_loss"]:
        return MESSAGES("wrong-best-loss", on=on, got=got["best_loss"], expected=expected["best_loss"])
    if (stop == right and no_best) or (right is not None and stop == right + 1 and best_epoch == 1):
        return None
    said = _said(stop)
    if no_best and stop is not None and right is not None and stop < right:
        return MESSAGES("count-not-from-zero", said=said, on=on, right=right, patience=patience)
    if no_best and (stop is None or (right is not None and stop > right)):
        return Mistake("count-not-from-zero", MESSAGES.text(
            "count-below-zero", said=said, on=on, right=right, best_epoch=best_epoch, patience=patience))
    return MESSAGES("mixes-inf-readings", said=said, best_epoch=best_epoch, on=on, right=right,
                    right_plus_one=None if right is None else right + 1)


def _stop_problem(case, got, expected):
    """step() said stop after another epoch than the reference: which slip explains it."""
    on, losses, stop, right = case["on"], case["losses"], got["stop"], expected["stop"]
    fields = {"said": _said(stop), "on": on, "right": right}
    if stop is not None and stop == _first_rise(losses) and stop != right:
        return MESSAGES("ignores-patience", **fields)
    if on.startswith("a loss that drifts") and (stop is None or stop > right):
        return MESSAGES("compares-with-previous", **fields)
    if on.startswith(_TINY_STEPS) and stop is not None and right is not None and stop < right:
        return MESSAGES("margin-or-rounding", **fields)
    if on.startswith("a loss that stays flat") and (stop is None or stop > right):
        return MESSAGES("equal-counts-as-better", **fields)
    if on.startswith("a loss that recovers") and stop is not None and stop < right:
        return MESSAGES("no-reset-on-new-best", **fields)
    if stop is not None and right is not None and stop == right + 1:
        return MESSAGES("stops-one-late", **fields)
    if stop is not None and right is not None and stop == right - 1:
        return MESSAGES("stops-one-early", **fields)
    return MESSAGES("wrong-stop-epoch", **fields)


def _objects_problem(record):
    """State that carries over from one object to the next (on the class, or in a global)."""
    cases = record["cases"]
    first, again = cases[0]["got"], record["again"]
    if again.get("class_attributes_changed"):
        return MESSAGES("state-on-class", name=again["class_attributes_changed"][0])
    if (again["stop"], again["best_epoch"], again["best_loss"]) != (
        first["stop"], first["best_epoch"], first["best_loss"]
    ):
        return Mistake("state-on-class", MESSAGES.text(
            "state-carries-over", on=cases[0]["on"], said_again=_said(again["stop"]),
            best_epoch_again=again["best_epoch"], best_loss_again=again["best_loss"],
            said_first=_said(first["stop"]), best_epoch_first=first["best_epoch"]))
    return None


def _judge_early_stopping(record):
    problem = _objects_problem(record)
    if problem:
        return problem
    for case in record["cases"]:
        on, got, expected = case["on"], case["got"], case["expected"]
        if got["missing_after_init"]:
            name = got["missing_after_init"][0]
            start = MESSAGES.text("start-best-loss" if name == "best_loss" else "start-best-epoch")
            return MESSAGES("attribute-set-only-in-step", patience=case["patience"], name=name, start=start)
        wrong_kinds = [k for k in got["kinds"] if k != "bool"]
        if wrong_kinds:
            return MESSAGES("returns-not-a-bool", kind=wrong_kinds[0], on=on)
        if on.startswith(_NEW_BEST_AFTER_STOP) and got["said"] != expected["said"] and got["stop"] == expected["stop"]:
            return _new_best_after_stop_problem(case, got, expected)
        if on.startswith(_ALL_INF):
            problem = _judge_all_inf(on, got, expected, case["patience"]) or _after_stop_problem(on, got)
            if problem:
                return problem
            continue
        if (
            on.startswith(_REACHES_ZERO) and type(got["best_epoch"]) is int
            and got["best_epoch"] > expected["best_epoch"]
            and isinstance(got["best_loss"], float) and got["best_loss"] > 0
        ):
            return MESSAGES("falsy-zero-best", on=on, expected_epoch=expected["best_epoch"],
                            got_loss=got["best_loss"], got_epoch=got["best_epoch"])
        if on.startswith(_NAN) and _took_nan_for_best(got, expected):
            return MESSAGES("nan-counts-as-improvement", said=_said(got["stop"]), on=on, right=expected["stop"],
                            best_loss=got["best_loss"], best_epoch=got["best_epoch"],
                            expected_loss=expected["best_loss"], expected_epoch=expected["best_epoch"])
        if got["stop"] != expected["stop"]:
            return _stop_problem(case, got, expected)
        if got["best_epoch"] != expected["best_epoch"]:
            return MESSAGES("wrong-best-epoch", on=on, got=got["best_epoch"], expected=expected["best_epoch"])
        if not isinstance(got["best_loss"], float) or got["best_loss"] != expected["best_loss"]:
            return MESSAGES("wrong-best-loss", on=on, got=got["best_loss"], expected=expected["best_loss"])
        problem = _after_stop_problem(on, got)
        if problem:
            return problem
    if record.get("raised"):
        return Raised(record["raised"])
    return None


def _took_nan_for_best(got, expected) -> bool:
    """best_loss is nan, or best_epoch is a later epoch than the reference's (a nan one)."""
    best_loss, best_epoch = got["best_loss"], got["best_epoch"]
    return (isinstance(best_loss, float) and math.isnan(best_loss)) or (
        type(best_epoch) is int and type(expected["best_epoch"]) is int and best_epoch > expected["best_epoch"])


def _new_best_after_stop_problem(case, got, expected):
    """What step() said from the stop on, when a later loss beat the best."""
    losses, on = case["losses"], case["on"]
    index = next(i for i, (a, e) in enumerate(zip(got["said"], expected["said"])) if a != e)
    before = min(losses[:index]) if index else math.inf
    epoch, loss = index + 1, losses[index]
    new_best = loss < before
    said = got["said"][index]
    if new_best and said is True:
        return MESSAGES("stop-latched", stop=got["stop"], on=on, epoch=epoch, loss=loss, before=before)
    why = MESSAGES.text("clause-was-a-new-best" if new_best else "clause-no-improvement")
    return MESSAGES("wrong-after-new-best", said=said, epoch=epoch, on=on, expected=expected["said"][index],
                    loss=loss, why=why)


def _after_stop_problem(on, got):
    """After saying stop, step() goes on saying stop while no loss improves on the best."""
    after_stop = got.get("after_stop", [])
    if all(answer is True for answer in after_stop):
        return None
    later = got["stop"] + 1 + next(i for i, a in enumerate(after_stop) if a is not True)
    return MESSAGES("stop-not-kept", stop=got["stop"], on=on, later=later)


EarlyStopping = Exercise(
    "EarlyStopping",
    chapter=CHAPTER,
    title="Early stopping",
    expects=Function(
        "EarlyStopping", ("patience",), returns="an object whose step(val_loss) returns True or False"
    ),
    probe=_probe_early_stopping,
    expect=_expect_early_stopping,
    judge=_judge_early_stopping,
    reference=EarlyStopping,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes(ERROR_CLUES),
    messages=MESSAGES,
)
