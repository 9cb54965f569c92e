"""Chapter 05, P7: split_step_time, is the loader the bottleneck?

Engine: applies states.session_settings/changed_settings (with the garbage collector and torch's
thread count, which timing code likes to change) and the grad mode the step is called in;
hand-written because the inputs are a loader and a step timed by the wall clock, neither tensors
nor a module: the judge checks inclusions that hold on any machine (and one exclusion: the
loader's end, the last next() that ends the loop, lies outside the steps' time).
"""

from __future__ import annotations

import gc
import time

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.messages import Messages
from course_utils.exercises.speed_and_memory.common import CHAPTER, _kind, _number
from course_utils.exercises.states import changed_settings, session_settings

_TOTALS_BEFORE_THE_LOOP = (
    "a variable first set inside the loop: with an empty loader the loop body never runs. Set "
    "the totals (and the clock) before the loop."
)
MESSAGES = Messages("split_step_time", {
    "returns-not-a-pair": (
        "split_step_time returned {kind} (on {on}); return two numbers of seconds: "
        "`return data_seconds, compute_seconds`."),
    "returns-not-numbers": (
        "split_step_time returned a {kind} of two items, but not two finite numbers (on {on}); "
        "return two numbers of seconds: `return data_seconds, compute_seconds`."),
    "iterates-twice": (
        "The loader was iterated more than once ({fetched} batches drawn from a loader of {n}) (on "
        "{on}): loop over it once, timing as you go."),
    "misses-batches": (
        "Only {fetched} of the loader's {n} batches were drawn (on {on}): time the whole loop, "
        "every batch."),
    "wrong-step-count": (
        "step_fn ran {steps} times for {fetched} batches (on {on}): call it once per batch, inside "
        "the loop."),
    "steps-on-something-else": (
        "step_fn was not given the loader's batches, one by one in order (on {on}): call "
        "step_fn(batch) with the batch the loop just received."),
    "fetches-all-first": (
        "Your function drew batches from the loader before stepping on the ones it already had "
        "(on {on}): with a real loader that keeps them all in memory, and it is not the loop you "
        "are timing. Call step_fn(batch) on each batch as it arrives, inside `for batch in loader:`."),
    "step-without-gradients": (
        "step_fn ran with gradients turned off (on {on}): a training step needs them for its "
        "backward(). Time the loop as the caller gives it, without torch.no_grad() or "
        "torch.inference_mode() around it."),
    "changes-settings": (
        "Your function left {what} changed (on {on}): timing code must leave the caller's session "
        "as it found it; put back what you change (gc.enable(), torch.set_num_threads(...)) "
        "before returning, or leave it alone."),
    "negative-time": "A time cannot be negative: subtract the earlier reading from the later one.{shown}",
    "totals-carried-over": (
        "Your totals carried over from the previous call: they include its times too. Start both "
        "at 0.0 inside the function, on every call (not in a global).{shown}"),
    "not-seconds": (
        "Your numbers are {unit}, not seconds: they are about {factor:g} times the times "
        "measured. Return seconds, as differences of time.perf_counter() readings are (no * "
        "1000; divide time.perf_counter_ns() differences by 1e9).{shown}"),
    "time-from-outside-the-call": (
        "Your {which} time is longer than the whole call took, so it holds time carried over from "
        "outside this call: totals kept from an earlier call (in a global), a clock read before "
        "the call, or a clock reading added as it is instead of the difference of two readings. "
        "Start both totals at 0.0 inside the function and add only differences of "
        "time.perf_counter() readings taken during the call.{shown}"),
    "rounds-the-times": (
        "Your times are rounded (each is a whole multiple of {step:g} s): short waits and steps "
        "round to nothing, or to more than they took. Add the exact differences of "
        "time.perf_counter() readings, and round only where you print them.{shown}"),
    "swapped": "The two numbers are swapped: return (data_seconds, compute_seconds).{shown}",
    "one-batch-times": (
        "You returned the times of one batch (an average, or the last batch's alone); return the "
        "totals over the whole loop, adding each wait and each step into them (data_seconds += "
        "...).{shown}"),
    "averages-per-batch": "You returned averages per batch; return the totals over the whole loop.{shown}",
    "last-batch-only": (
        "You returned the last batch's times only: each batch replaced the totals instead of "
        "adding to them. Add each wait and each step into the totals (data_seconds += ...).{shown}"),
    "cpu-clock": (
        "{opening}time.process_time() counts CPU time, not waiting. Use time.perf_counter().{shown}"),
    "no-wall-clock": (
        "Both times are near zero, yet the loop slept for most of its time: read a wall clock, "
        "time.perf_counter(), before and after each wait and each step.{shown}"),
    "data-clock-spans-step": (
        "Your data time includes the steps: the clock for the next batch must restart after "
        "step_fn returns, not at the previous fetch.{shown}"),
    "compute-clock-spans-wait": (
        "Your compute time includes waiting for the next batch: stop the step's clock as soon as "
        "step_fn returns.{shown}"),
    "iter-outside-the-clock": (
        "The wait in iter(loader) is missing: a DataLoader with workers starts them when it is "
        "asked for an iterator, before the first batch. Start the clock before the `for` "
        "statement (or before iter(loader)), so that this wait counts as data time.{shown}"),
    "first-wait-missed": (
        "The first batch's wait is missing: start the clock before the loop. The first batch is "
        "often the slowest one (a DataLoader starts its workers then).{shown}"),
    "compute-includes-end-wait": (
        "Your compute time includes the loader's last wait, {ended_ms:.1f} ms: the one in which "
        "the `for` asks for one more batch and learns there is none (a loader may close a file or "
        "stop its workers then). compute_seconds is the time inside step_fn alone: read the clock "
        "just before step_fn(batch) and just after it returns, rather than taking the rest of the "
        "call.{shown}"),
    "data-time-short": (
        "Your data time is shorter than the time the loader itself spent producing batches: each "
        "wait runs from just before the `for` asks for a batch to just after it arrives.{shown}"),
    "compute-time-short": (
        "Your compute time is shorter than the time spent inside step_fn: read the clock just "
        "before step_fn(batch) and just after it returns.{shown}"),
    "counted-twice": (
        "Your two times add up to more than the whole call took: some moments were counted "
        "twice. Each moment of the loop is either waiting for a batch or inside step_fn.{shown}"),
    "shown": (
        " (on {on}: the loader spent {data_ms:.1f} ms producing batches, the steps took "
        "{compute_ms:.1f} ms and the whole call {wall_ms:.1f} ms; you returned {got_data_ms:.1f} "
        "ms and {got_compute_ms:.1f} ms)"),
    "passed": (
        "Correct: every moment of the loop is either waiting for the next batch or inside "
        "step_fn, and you counted each in its place."),
    "hint-1": (
        "Read the clock (time.perf_counter()) at three moments: before asking for a batch, when "
        "it arrives, and when step_fn returns."),
    "hint-2": (
        "Arrival minus asking is data time; return minus arrival is compute time. The `for` "
        "statement itself asks for the batch, so read the clock before the loop and again at the "
        "end of each step."),
    "hint-3": (
        "start = time.perf_counter(); for batch in loader: got = time.perf_counter(); data += got "
        "- start; step_fn(batch); start = time.perf_counter(); compute += start - got."),
    "loader-not-looped-over": "loader is something to loop over with `for batch in loader:`.",
    "len-of-loader": (
        "a loader may have no length (a DataLoader over an IterableDataset, a generator): loop "
        "over it and count the batches as they come instead of len(loader)."),
    "average-of-empty-loader": (
        "an empty loader has no batches: dividing by their number fails. Return the totals, which "
        "are then 0.0 and 0.0."),
    "total-set-in-loop": _TOTALS_BEFORE_THE_LOOP,
    "total-set-in-loop-python-3-10": _TOTALS_BEFORE_THE_LOOP,
})


# ============================================================================================
# P7 — is the loader the bottleneck?
# ============================================================================================
def split_step_time(loader, step_fn):
    data_seconds = compute_seconds = 0.0
    start = time.perf_counter()  # the clock runs before the first batch: it is often the slowest
    for batch in loader:
        fetched = time.perf_counter()
        data_seconds += fetched - start  # waiting for the loader
        step_fn(batch)
        start = time.perf_counter()
        compute_seconds += start - fetched  # the step itself
    return data_seconds, compute_seconds


class _UnsizedLoader:
    """Batches that take known times to arrive, each wait measured by the loader itself. No
    len(), like a DataLoader over an IterableDataset or a generator."""

    def __init__(self, delays, start_delay=0.0, end_delay=0.0):
        self.delays = delays
        self.start_delay = start_delay  # spent in iter(loader) itself, before any batch
        self.end_delay = end_delay  # spent in the last next(), the one that ends the loop
        self.ended = 0.0
        self.waited = 0.0
        self.fetched = 0
        self.first = 0.0
        self.started = 0.0
        self.last = 0.0  # the last batch's wait alone

    def __iter__(self):
        if self.start_delay:  # like a DataLoader with workers: iter() starts them
            start = time.perf_counter()
            time.sleep(self.start_delay)
            self.started = time.perf_counter() - start
            self.waited += self.started
            self.first += self.started
        return self._batches()

    def _batches(self):
        for index, delay in enumerate(self.delays):
            start = time.perf_counter()
            time.sleep(delay)
            waited = time.perf_counter() - start
            self.waited += waited
            self.last = waited
            if index == 0:
                self.first += waited
            self.fetched += 1
            yield torch.full((2, 3), float(index))
        if self.end_delay:  # closing a file, stopping workers: then StopIteration
            start = time.perf_counter()
            time.sleep(self.end_delay)
            self.ended = time.perf_counter() - start


class _FakeLoader(_UnsizedLoader):
    """The same, with a len() like a DataLoader over a map-style dataset."""

    def __len__(self):
        return len(self.delays)


class _FakeStep:
    def __init__(self, seconds, loader=None):
        self.seconds = seconds
        self.loader = loader
        self.spent = 0.0
        self.last = 0.0  # the last step's time alone
        self.calls = 0
        self.seen = []
        self.fetched_before = []  # how many batches the loader had given at each call
        self.grad_modes = []  # whether gradients were on at each call

    def __call__(self, batch):
        start = time.perf_counter()
        self.grad_modes.append(torch.is_grad_enabled())
        self.fetched_before.append(self.loader.fetched if self.loader is not None else None)
        self.seen.append(
            float(batch[0, 0]) if isinstance(batch, torch.Tensor) and batch.shape == (2, 3) else None
        )
        time.sleep(self.seconds)
        self.last = time.perf_counter() - start
        self.spent += self.last
        self.calls += 1


# (input, loader class, delay of each batch, seconds per step, seconds iter(loader) takes, seconds
# the last next() takes before it ends the loop). The
# sleeps only need to tell the two kinds of time apart: the judge checks inclusions that hold on
# any machine (the loader's own waits lie inside your data time, the steps inside your compute
# time, both inside the call).
_STARTS_WORKERS = "a loader that starts its workers in iter(loader)"
_TIMING_CASES = [
    ("a slow loader (8 ms a batch, 20 ms for the first) and a 1 ms step",
     _FakeLoader, [0.02] + [0.008] * 4, 0.001, 0.0, 0.0),
    ("a loader with no len(), like a DataLoader over an IterableDataset (1 ms a batch, 20 ms for "
     "the first), and an 8 ms step", _UnsizedLoader, [0.02] + [0.001] * 4, 0.008, 0.0, 0.0),
    (f"{_STARTS_WORKERS}, as a DataLoader with num_workers > 0 does (20 ms), then 3 ms a batch, "
     "and a 3 ms step", _FakeLoader, [0.003] * 3, 0.003, 0.02, 0.0),
    ("an empty loader (no batches at all)", _FakeLoader, [], 0.001, 0.0, 0.0),
    ("a quick loader of 12 batches (0.3 ms each) and a 0.3 ms step", _FakeLoader, [0.0003] * 12, 0.0003,
     0.0, 0.0),
    ("a loader whose end takes 20 ms (its last next(), the one that ends the loop, closes a file), "
     "2 ms a batch, and a 2 ms step", _FakeLoader, [0.002] * 3, 0.002, 0.0, 0.02),
]


def _settings():
    """The session's settings (states.session_settings) and two that timing code likes to
    change: the garbage collector and torch's thread count."""
    return {**session_settings(), "the garbage collector (gc.disable)": gc.isenabled(),
            "torch's thread count (torch.set_num_threads)": torch.get_num_threads()}


def _code_names(fn) -> list:
    """The global and attribute names the learner's code reads (time, perf_counter, ...)."""
    code = getattr(fn, "__code__", None)
    names, todo = set(), [code] if code is not None else []
    while todo:
        code = todo.pop()
        names.update(code.co_names)
        todo.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    return sorted(names)


def _probe_split_step_time(answer, run):
    cases = []
    for on, make, delays, step_s, start_s, end_s in _TIMING_CASES:
        loader = make(delays, start_s, end_s)
        step = _FakeStep(step_s, loader)
        session_gc, session_threads = gc.isenabled(), torch.get_num_threads()
        # The call runs with the collector on and more than one thread, as most sessions have
        # them, so that an answer turning either off (for steadier timings) changes something.
        gc.enable()
        torch.set_num_threads(max(2, session_threads))
        settings = _settings()
        start = time.perf_counter()
        try:
            got = run(answer, loader, step, on=on)
            wall = time.perf_counter() - start
        finally:
            changed = changed_settings(settings, _settings())
            gc.enable() if session_gc else gc.disable()
            torch.set_num_threads(session_threads)
        case = {
            "on": on,
            "batches": len(delays),
            "fetched": loader.fetched,
            "steps": step.calls,
            "in_order": step.seen == [float(i) for i in range(step.calls)],
            "data": loader.waited,
            "compute": step.spent,
            "first": loader.first,
            "started": loader.started,
            "ended": loader.ended,
            "last_wait": loader.last,
            "last_step": step.last,
            "interleaved": step.fetched_before == list(range(1, step.calls + 1)),
            "grad_off": not all(step.grad_modes),
            "settings_changed": changed,
            "wall": wall,
            "got_kind": _kind(got),
        }
        if isinstance(got, (np.ndarray, torch.Tensor)) and tuple(got.shape) == (2,):
            got = list(got)  # two numbers all the same: `data, compute = ...` unpacks them
        if isinstance(got, (tuple, list)) and len(got) == 2:
            case["got"] = [_number(got[0]), _number(got[1])]
        cases.append(case)
        record = {"cases": cases, "names": _code_names(answer)}
        if _judge_split_step_time(record) is not None:  # stop at the first input that shows
            break  # a mistake, so that an error on a later one does not hide it
    return record


def _tol(seconds):
    """Room for clocks read a few instructions apart (and for time.time's resolution)."""
    return 0.001 + 0.01 * seconds


def _whole_multiple(seconds, step):
    """Whether ``seconds`` is a whole multiple of ``step`` (a rounded time)."""
    return abs(seconds / step - round(seconds / step)) < 1e-6


def _judge_split_step_time(record):
    cases = record["cases"]
    for case in cases:
        on, n = case["on"], case["batches"]
        if "got" not in case:
            return MESSAGES("returns-not-a-pair", kind=case["got_kind"], on=on)
        if None in case["got"]:
            return MESSAGES("returns-not-numbers", kind=case["got_kind"], on=on)
        if case["fetched"] > n:
            return MESSAGES("iterates-twice", fetched=case["fetched"], n=n, on=on)
        if case["fetched"] < n:
            return MESSAGES("misses-batches", fetched=case["fetched"], n=n, on=on)
        if case["steps"] != case["fetched"]:
            return MESSAGES("wrong-step-count", steps=case["steps"], fetched=case["fetched"], on=on)
        if not case["in_order"]:
            return MESSAGES("steps-on-something-else", on=on)
        if not case.get("interleaved", True):
            return MESSAGES("fetches-all-first", on=on)
        if case.get("grad_off"):
            return MESSAGES("step-without-gradients", on=on)
        if case.get("settings_changed"):
            return MESSAGES("changes-settings", what=" and ".join(case["settings_changed"]), on=on)
    previous = None
    for case in cases:
        on, n = case["on"], case["batches"]
        data, compute, first, wall = case["data"], case["compute"], case["first"], case["wall"]
        got_data, got_compute = case["got"]
        shown = MESSAGES.text("shown", on=on, data_ms=1000 * data, compute_ms=1000 * compute,
                              wall_ms=1000 * wall, got_data_ms=1000 * got_data,
                              got_compute_ms=1000 * got_compute)

        def covers(got, truth):
            return got >= truth - _tol(truth)

        def fits(total):
            return total <= wall + _tol(wall)

        if min(got_data, got_compute) < -_tol(0):
            return MESSAGES("negative-time", shown=shown)
        if covers(got_data, data) and covers(got_compute, compute) and fits(got_data + got_compute):
            # The loader's waits, its end and the steps are apart in time: the steps' clock
            # cannot hold the end (the last next(), which ends the loop) too.
            ended = case.get("ended", 0.0)
            if ended > 0 and got_compute > wall - data - ended + _tol(wall):
                return MESSAGES("compute-includes-end-wait", ended_ms=1000 * ended, shown=shown)
            previous = case
            continue
        if (
            previous is not None
            and covers(got_data, data + previous["got"][0])
            and covers(got_compute, compute + previous["got"][1])
        ):
            return MESSAGES("totals-carried-over", shown=shown)
        longer = [name for name, got in (("data", got_data), ("compute", got_compute)) if not fits(got)]
        scaled = [  # both numbers in another unit: what seconds times 1000 (or 1e6, 1e9) gives
            (factor, unit) for factor, unit in ((1e3, "milliseconds"), (1e6, "microseconds"),
                                                (1e9, "nanoseconds"))
            if wall > 0 and covers(got_data, factor * data) and covers(got_compute, factor * compute)
            and got_data + got_compute <= factor * (wall + _tol(wall))
        ]
        if longer and scaled:
            return MESSAGES("not-seconds", unit=scaled[0][1], factor=scaled[0][0], shown=shown)
        # Every time returned so far a whole multiple of one step (and not all zero): rounded.
        returned = [g for c in cases[:cases.index(case) + 1] if c["batches"] for g in c["got"]]
        rounded = [step for step in (1.0, 0.1, 0.01, 0.001)
                   if n > 0 and any(returned) and all(_whole_multiple(g, step) for g in returned)]
        if rounded:
            return MESSAGES("rounds-the-times", step=rounded[0], shown=shown)
        if longer:
            return MESSAGES("time-from-outside-the-call", which=longer[0], shown=shown)
        if covers(got_compute, data) and covers(got_data, compute) and fits(got_data + got_compute):
            return MESSAGES("swapped", shown=shown)
        averages = (
            n > 0 and covers(got_data * n, data) and covers(got_compute * n, compute)
            and fits((got_data + got_compute) * n)
        )
        last_only = (
            n > 1 and "last_wait" in case
            and abs(got_data - case["last_wait"]) <= _tol(case["last_wait"])
            and abs(got_compute - case["last_step"]) <= _tol(case["last_step"])
        )
        if averages and last_only:  # a busy machine can make the last wait close to the mean:
            # the reading that fits far better (an average is the totals / n, to within the
            # clock reads; the last batch's times are its wait and step) names the slip
            off_average = abs(got_data * n - data) / n + abs(got_compute * n - compute) / n
            off_last = abs(got_data - case["last_wait"]) + abs(got_compute - case["last_step"])
            averages, last_only = off_average < 2 * off_last, off_last < 2 * off_average
        if averages and last_only:  # on this machine's timings the two cannot be told apart
            return MESSAGES("one-batch-times", shown=shown)
        if averages:
            return MESSAGES("averages-per-batch", shown=shown)
        if last_only:
            return MESSAGES("last-batch-only", shown=shown)
        near_zero = got_data < 0.2 * data and got_compute < 0.2 * compute
        if n > 0 and "process_time" in record["names"] and (near_zero or not covers(got_data, data)):
            # A CPU clock misses the sleeps; on a busy machine the process's other threads
            # still add CPU time, so its readings need not be near zero.
            opening = ("Both times are near zero, yet the loop slept for most of its time: " if near_zero
                       else "Your times leave out the waiting: ")
            return MESSAGES("cpu-clock", opening=opening, shown=shown)
        if n > 0 and near_zero:
            return MESSAGES("no-wall-clock", shown=shown)
        # The data clock ran through the steps, so the data time spans the whole call. (On a
        # busy machine the loader's own total can exceed the learner's by more than the clock
        # tolerance; the data time against the whole call is the steadier sign.)
        data_spans_the_call = got_compute > 0 and abs(got_data - wall) <= 0.5 * got_compute
        if not fits(got_data + got_compute) and (covers(got_data, data + compute) or data_spans_the_call):
            return MESSAGES("data-clock-spans-step", shown=shown)
        if n > 1 and covers(got_compute, compute + data - first) and not covers(got_data, data):
            return MESSAGES("compute-clock-spans-wait", shown=shown)
        if (
            case.get("started", 0) > 0 and covers(got_data, data - case["started"])
            and not covers(got_data, data)
        ):
            return MESSAGES("iter-outside-the-clock", shown=shown)
        if n > 0 and covers(got_data, data - first) and not covers(got_data, data):
            return MESSAGES("first-wait-missed", shown=shown)
        if not covers(got_data, data):
            return MESSAGES("data-time-short", shown=shown)
        if not covers(got_compute, compute):
            return MESSAGES("compute-time-short", shown=shown)
        return MESSAGES("counted-twice", shown=shown)
    return None


split_step_time = Exercise(
    "split_step_time",
    chapter=CHAPTER,
    title="Waiting for data, or computing?",
    expects=Function(
        "split_step_time", ("loader", "step_fn"),
        returns="two numbers of seconds: (data_seconds, compute_seconds)",
    ),
    probe=_probe_split_step_time,
    judge=_judge_split_step_time,
    reference=split_step_time,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "loader-not-looped-over": "not iterable",
        "len-of-loader": "has no len()",
        "average-of-empty-loader": "division by zero",
        "total-set-in-loop": "where it is not associated with a value",
        "total-set-in-loop-python-3-10": "referenced before assignment",
    }),
    messages=MESSAGES,
)
