"""Chapter 05's split_step_time: its catalogue of right and wrong answers."""

import gc
import itertools
import time
from time import perf_counter

import pytest
import torch

from course_utils.exercises import speed_and_memory as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- split_step_time (P7) --------------------------------------------------------------------
def total_minus_compute(loader, step_fn):
    compute = 0.0
    begin = time.monotonic()
    for batch in loader:
        started = time.monotonic()
        step_fn(batch)
        compute += time.monotonic() - started
    return [time.monotonic() - begin - compute, compute]


def with_an_explicit_iterator(loader, step_fn):
    data = compute = 0.0
    batches = iter(loader)
    while True:
        t0 = perf_counter()
        try:
            batch = next(batches)
        except StopIteration:
            break
        t1 = perf_counter()
        step_fn(batch)
        t2 = perf_counter()
        data += t1 - t0
        compute += t2 - t1
    return data, compute


def lists_of_durations_in_ns(loader, step_fn):
    waits, steps = [], []
    mark = time.perf_counter_ns()
    for batch in loader:
        arrived = time.perf_counter_ns()
        step_fn(batch)
        done = time.perf_counter_ns()
        waits.append(arrived - mark)
        steps.append(done - arrived)
        mark = done
    return sum(waits) / 1e9, sum(steps) / 1e9


def _split(mistake):
    def answer(loader, step_fn):
        clock = time.process_time if mistake == "process_time" else time.perf_counter
        data = compute = 0.0
        count = 0
        start = clock()
        for index, batch in enumerate(loader):
            if mistake == "skip_first" and index == 0:
                start = clock()
            got = clock()
            data += got - start
            step_fn(batch)
            done = clock()
            compute += done - got
            start = got if mistake == "restart_at_fetch" else done
            count += 1
        if mistake == "swapped":
            return compute, data
        if mistake == "average":
            return data / max(count, 1), compute / max(count, 1)
        return data, compute

    return answer


def start_inside(loader, step_fn):
    data = compute = 0.0
    start = None
    for batch in loader:
        got = time.perf_counter()
        if start is not None:
            data += got - start
        step_fn(batch)
        start = time.perf_counter()
        compute += start - got
    return data, compute


def compute_until_next_batch(loader, step_fn):
    data = compute = 0.0
    start = time.perf_counter()
    previous = None
    for batch in loader:
        got = time.perf_counter()
        if previous is None:
            data += got - start
        else:
            compute += got - previous  # the step and the next wait
        step_fn(batch)
        previous = got
    if previous is not None:
        compute += time.perf_counter() - previous
    return data, compute


def twice(loader, step_fn):
    n = len(list(loader))
    return _split(None)(loader, step_fn) if n else (0.0, 0.0)


def averages_with_len(loader, step_fn):
    data, compute = _split(None)(loader, step_fn)
    return data / len(loader), compute / len(loader)


def times_in_tensors_sized_by_len(loader, step_fn):
    waits, steps = torch.zeros(len(loader)), torch.zeros(len(loader))
    start = time.perf_counter()
    for i, batch in enumerate(loader):
        got = time.perf_counter()
        waits[i] = got - start
        step_fn(batch)
        start = time.perf_counter()
        steps[i] = start - got
    return float(waits.sum()), float(steps.sum())


def totals_started_in_the_loop(loader, step_fn):
    start = time.perf_counter()
    for i, batch in enumerate(loader):
        if i == 0:
            data = compute = 0.0
        got = time.perf_counter()
        data += got - start
        step_fn(batch)
        start = time.perf_counter()
        compute += start - got
    return data, compute


_totals = {"data": 0.0, "compute": 0.0}


def totals_in_a_global(loader, step_fn):
    start = time.perf_counter()
    for batch in loader:
        got = time.perf_counter()
        _totals["data"] += got - start
        step_fn(batch)
        start = time.perf_counter()
        _totals["compute"] += start - got
    return _totals["data"], _totals["compute"]


def steps_on_the_loader(loader, step_fn):
    data = compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        got = time.perf_counter()
        data += got - start
        step_fn(loader)
        start = time.perf_counter()
        compute += start - got
    return data, compute


# -- round 2: answers outside testers wrote ------------------------------------------------------
def iterator_made_before_the_clock(loader, step_fn):
    data = compute = 0.0
    batches = iter(loader)  # outside the clock: a DataLoader starts its workers here
    while True:
        t0 = perf_counter()
        try:
            batch = next(batches)
        except StopIteration:
            break
        t1 = perf_counter()
        step_fn(batch)
        compute += perf_counter() - t1
        data += t1 - t0
    return data, compute


def iterator_made_on_the_clock(loader, step_fn):
    data = compute = 0.0
    t0 = perf_counter()
    batches = iter(loader)
    for batch in batches:
        t1 = perf_counter()
        step_fn(batch)
        t2 = perf_counter()
        data, compute = data + (t1 - t0), compute + (t2 - t1)
        t0 = t2
    return data, compute


def fetches_everything_first(loader, step_fn):
    start = time.perf_counter()
    batches = list(loader)
    data = time.perf_counter() - start
    compute = 0.0
    for batch in batches:
        t = time.perf_counter()
        step_fn(batch)
        compute += time.perf_counter() - t
    return data, compute


def as_a_numpy_array(loader, step_fn):
    import numpy as np

    times = np.zeros(2)
    start = time.perf_counter()
    for batch in loader:
        fetched = time.perf_counter()
        times[0] += fetched - start
        step_fn(batch)
        start = time.perf_counter()
        times[1] += start - fetched
    return times


def keeps_the_last_times(loader, step_fn):
    data = compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        fetched = time.perf_counter()
        data = fetched - start
        step_fn(batch)
        start = time.perf_counter()
        compute = start - fetched
    return data, compute


def with_time_monotonic_ns_numpy(loader, step_fn):
    import numpy as np

    waits, steps = [], []
    mark = time.monotonic_ns()
    for batch in loader:
        got = time.monotonic_ns()
        step_fn(batch)
        done = time.monotonic_ns()
        waits.append(got - mark)
        steps.append(done - got)
        mark = done
    return np.float64(sum(waits) / 1e9), np.float64(sum(steps) / 1e9)


# -- round 3 -----------------------------------------------------------------------------------
def with_time_time(loader, step_fn):
    data = compute = 0.0
    start = time.time()
    for batch in loader:
        fetched = time.time()
        data += fetched - start
        step_fn(batch)
        start = time.time()
        compute += start - fetched
    return data, compute


def in_milliseconds(loader, step_fn):
    data = compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        fetched = time.perf_counter()
        data += fetched - start
        step_fn(batch)
        start = time.perf_counter()
        compute += start - fetched
    return data * 1000, compute * 1000  # "ms are easier to read"


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def st_nanoseconds(loader, step_fn):
    """perf_counter_ns(), returned in nanoseconds."""
    data = compute = 0
    start = time.perf_counter_ns()
    for batch in loader:
        fetched = time.perf_counter_ns()
        data += fetched - start
        step_fn(batch)
        start = time.perf_counter_ns()
        compute += start - fetched
    return data, compute


def st_disables_gc(loader, step_fn):
    """gc.disable() for steadier timings, never enabled again."""
    gc.disable()
    data = compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        fetched = time.perf_counter()
        data += fetched - start
        step_fn(batch)
        start = time.perf_counter()
        compute += start - fetched
    return data, compute


def st_one_thread(loader, step_fn):
    """torch.set_num_threads(1) for steadier timings, left set."""
    torch.set_num_threads(1)
    data = compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        fetched = time.perf_counter()
        data += fetched - start
        step_fn(batch)
        start = time.perf_counter()
        compute += start - fetched
    return data, compute


def st_rounds_each_interval(loader, step_fn):
    """each interval rounded to the millisecond."""
    data = compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        fetched = time.perf_counter()
        data += round(fetched - start, 3)
        step_fn(batch)
        start = time.perf_counter()
        compute += round(start - fetched, 3)
    return data, compute


def st_first_batches_only(loader, step_fn):
    """measures the first 5 batches: enough for an estimate."""
    data = compute = 0.0
    start = time.perf_counter()
    for batch in itertools.islice(loader, 5):
        fetched = time.perf_counter()
        data += fetched - start
        step_fn(batch)
        start = time.perf_counter()
        compute += start - fetched
    return data, compute


def st_unpacks_the_batch(loader, step_fn):
    """for x, y in loader: step_fn((x, y))."""
    data = compute = 0.0
    start = time.perf_counter()
    for x, y in loader:
        fetched = time.perf_counter()
        data += fetched - start
        step_fn((x, y))
        start = time.perf_counter()
        compute += start - fetched
    return data, compute


def st_prefetches(loader, step_fn):
    """asks for the next batch before running the step on this one."""
    data = compute = 0.0
    iterator = iter(loader)
    start = time.perf_counter()
    batch = next(iterator, None)
    data += time.perf_counter() - start
    while batch is not None:
        start = time.perf_counter()
        following = next(iterator, None)
        fetched = time.perf_counter()
        data += fetched - start
        step_fn(batch)
        compute += time.perf_counter() - fetched
        batch = following
    return data, compute


def st_rounds_the_totals(loader, step_fn):
    """the totals rounded to 2 decimals."""
    data = compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        fetched = time.perf_counter()
        data += fetched - start
        step_fn(batch)
        start = time.perf_counter()
        compute += start - fetched
    return round(data, 2), round(compute, 2)


def st_no_grad(loader, step_fn):
    """the loop under torch.no_grad(): "measuring needs no gradients"."""
    data = compute = 0.0
    with torch.no_grad():
        start = time.perf_counter()
        for batch in loader:
            fetched = time.perf_counter()
            data += fetched - start
            step_fn(batch)
            start = time.perf_counter()
            compute += start - fetched
    return data, compute


def st_first_batch_is_warm_up(loader, step_fn):
    """the first batch is a warm-up: stepped, not counted."""
    data = compute = 0.0
    start = time.perf_counter()
    for i, batch in enumerate(loader):
        fetched = time.perf_counter()
        step_fn(batch)
        done = time.perf_counter()
        if i > 0:
            data += fetched - start
            compute += done - fetched
        start = done
    return data, compute


def st_next_with_gc_off(loader, step_fn):
    was_enabled = gc.isenabled()
    gc.disable()  # no collection in the middle of a measurement
    try:
        data = compute = 0.0
        asked = time.perf_counter()
        iterator = iter(loader)
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                break
            arrived = time.perf_counter()
            data += arrived - asked
            step_fn(batch)
            asked = time.perf_counter()
            compute += asked - arrived
        return data, compute
    finally:
        if was_enabled:
            gc.enable()


# -- issue 45, second fresh round (from the task text) --------------------------------------
def st2_compute_is_the_rest(loader, step_fn):
    """times the waits only, and takes compute as the rest of the call: the loader's last wait
    (the next() that ends the loop) lands in compute."""
    t0 = time.perf_counter()
    data = 0.0
    start = t0
    for batch in loader:
        data += time.perf_counter() - start
        step_fn(batch)
        start = time.perf_counter()
    total = time.perf_counter() - t0
    return data, total - data


def st2_steps_timed_data_is_the_rest(loader, step_fn):
    """times each step around step_fn; the data time is the rest of the call, the loader's end
    included (a wait for the loader too)."""
    t0 = time.perf_counter()
    compute = 0.0
    for batch in loader:
        before = time.perf_counter()
        step_fn(batch)
        compute += time.perf_counter() - before
    return time.perf_counter() - t0 - compute, compute


CATALOGUE = Catalogue({
    ex.split_step_time: [
        right("total minus compute, time.monotonic, a list", total_minus_compute),
        right("iter() on the clock, then a for loop", iterator_made_on_the_clock),
        right("time.monotonic_ns, NumPy floats", with_time_monotonic_ns_numpy),
        right("a NumPy array of the two totals", as_a_numpy_array),
        right("lists of durations in nanoseconds", lists_of_durations_in_ns),
        right("time.time()", with_time_time),
        wrong("returns milliseconds", in_milliseconds, "milliseconds, not seconds", "no * 1000"),
        wrong("data time restarts at the fetch", _split("restart_at_fetch"), "data time includes the steps"),
        wrong("the first wait is missed", start_inside, "first batch's wait is missing"),
        wrong("swapped", _split("swapped"), "swapped"),
        wrong("averages per batch", _split("average"), "averages per batch"),
        wrong("time.process_time", _split("process_time"), "time.process_time()", "time.perf_counter()"),
        wrong("returns one number", lambda loader, step_fn: 0.1, "return two numbers"),
        wrong("iterates the loader twice", twice, "iterated more than once"),
        wrong("compute runs until the next batch", compute_until_next_batch,
              "compute time includes waiting"),
        wrong("step_fn given the loader", steps_on_the_loader, "step_fn was not given the loader's batches"),
        wrong("averages with len(loader)", averages_with_len, "averages per batch"),
        wrong("tensors of times sized by len(loader)", times_in_tensors_sized_by_len, "has no len()",
              "Likely cause: a loader may have no length", kind=EDGE, outcome=Outcome.RAISED),
        wrong("totals first set inside the loop", totals_started_in_the_loop,
              "an empty loader", "Likely cause: a variable first set inside the loop", kind=EDGE,
              outcome=Outcome.RAISED),
        wrong("totals kept in a global", totals_in_a_global, "carried over from",
              kind=STATEFUL),
        wrong("iter(loader) before the clock starts", iterator_made_before_the_clock,
              "wait in iter(loader) is missing", kind=EDGE),
        wrong("an explicit iterator made before the clock", with_an_explicit_iterator,
              "wait in iter(loader) is missing", kind=EDGE),
        wrong("fetches every batch first", fetches_everything_first,
              "before stepping on the ones it already had", "as it arrives"),
        wrong("keeps the last batch's times", keeps_the_last_times, "(data_seconds += ...)"),
        # -- issue 45, fresh round (from the task text) --
        wrong('perf_counter_ns() returned as it is', st_nanoseconds,
              'nanoseconds, not seconds'),
        wrong('gc.disable(), never enabled again', st_disables_gc,
              'garbage collector', kind=STATEFUL),
        wrong('torch.set_num_threads(1), left set', st_one_thread,
              'thread count', kind=STATEFUL),
        wrong('each interval rounded to the millisecond', st_rounds_each_interval,
              'rounded', '0.001 s', kind=EDGE),
        wrong('the first 5 batches only (islice)', st_first_batches_only,
              "Only 5 of the loader's 12 batches", kind=EDGE),
        wrong('for x, y in loader: step_fn((x, y))', st_unpacks_the_batch,
              "step_fn was not given the loader's batches"),
        wrong('asks for the next batch before stepping', st_prefetches,
              'drew batches from the loader before stepping'),
        wrong('the totals rounded to 2 decimals', st_rounds_the_totals,
              'rounded', '0.01 s', kind=EDGE),
        wrong('the loop under torch.no_grad()', st_no_grad,
              'gradients turned off', kind=STATEFUL),
        wrong('the first batch as an uncounted warm-up', st_first_batch_is_warm_up,
              "first batch's wait is missing"),
        right('next() in a while loop, gc off and put back in finally', st_next_with_gc_off),
        # -- issue 45, second fresh round (from the task text) --
        wrong('compute as the rest of the call (the end of the loader in it)', st2_compute_is_the_rest,
              "loader's last wait", 'inside step_fn alone', kind=EDGE),
        right('steps timed around step_fn, data as the rest of the call', st2_steps_timed_data_is_the_rest),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
