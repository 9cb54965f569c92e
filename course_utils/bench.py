"""Measure, do not quote: every speed or memory claim in the course is measured on your machine.

Speeds differ by a factor of a hundred between a laptop CPU and a data-centre GPU, so a number
printed in the text would be wrong for almost everyone. The helpers here wrap the tools PyTorch
already has for measuring itself and print what they found in plain units:

- ``time_it`` and ``compare``: blocks of calls timed in interleaved rounds, with a clock that
  first waits for queued GPU work (asynchronous kernels would look instant), until the
  measurements agree. A timing whose measurements do not agree is reported as noise, and
  ``Comparison.conclusion`` says which is faster only when the difference is larger than it.
- ``saved_for_backward``: ``torch.autograd.graph.saved_tensors_hooks``, which sees every tensor
  autograd keeps for the backward pass. This is the memory a graph holds alive, and unlike the
  allocator's statistics it can be measured on every device, the CPU included.
- ``peak_memory``: the CUDA allocator's own peak statistics, or on the CPU the allocation events
  that ``torch.profiler`` records (with the frees of older tensors it cannot see put back).
- ``memory_budget``: where the memory of a training step goes (parameters, buffers, gradients,
  optimizer state, activations), each part counted from the tensors themselves, on every
  device; on the ``meta`` device it estimates a model too large to build, allocating nothing.
"""

from __future__ import annotations

import html
import os
import statistics
import timeit
from timeit import Timer as _StdlibTimer
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from course_utils.step_on_shapes import is_fake

# --- units ----------------------------------------------------------------------------------

_SECOND_UNITS = (("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3))
_BYTE_UNITS = (("KB", 1024), ("MB", 1024**2), ("GB", 1024**3))


def format_seconds(seconds: float, *, unit_of: float | None = None) -> str:
    """A duration in the unit that keeps it readable: ``format_seconds(1.23e-5) == '12.3 µs'``.

    ``unit_of`` picks the unit for another duration instead, so that a spread prints in the
    unit of its median: ``12.3 µs (IQR 0.4 µs)`` rather than ``(IQR 400.0 ns)``.
    """
    unit, scale = _second_unit(seconds if unit_of is None else unit_of)
    return f"{seconds / scale:.1f} {unit}"


def _second_unit(seconds: float) -> tuple[str, float]:
    for unit, scale in _SECOND_UNITS:
        # Compare after rounding, so that 999.96 µs reads "1.0 ms", not "1000.0 µs".
        if abs(round(seconds / scale, 1)) < 1000:
            return unit, scale
    return "s", 1.0


def format_bytes(n: int) -> str:
    """A size in B, KB, MB or GB, where 1 KB = 1024 B (what the allocators count in).

    ``format_bytes(1536) == '1.5 KB'``; exact bytes below one KB: ``format_bytes(12) == '12 B'``.
    """
    if abs(n) < 1024:
        return f"{n} B"
    for unit, scale in _BYTE_UNITS[:-1]:
        if abs(round(n / scale, 1)) < 1024:
            return f"{n / scale:.1f} {unit}"
    unit, scale = _BYTE_UNITS[-1]
    return f"{n / scale:.1f} {unit}"


# --- timing ---------------------------------------------------------------------------------


def _synchronized_clock() -> Callable[[], float]:
    """A clock that first waits for queued GPU work, or asynchronous kernels would look instant.

    The Timer's own clock does this for CUDA in every version, for MPS only in recent ones
    (through ``torch.accelerator``); the course supports torch 2.6, so it says it here.
    """
    synchronize = _accelerator_synchronize()
    if synchronize is None:
        return timeit.default_timer

    def clock() -> float:
        synchronize()
        return timeit.default_timer()

    return clock


def _accelerator_synchronize() -> Callable[[], None] | None:
    if torch.cuda.is_available():
        return torch.cuda.synchronize
    if torch.backends.mps.is_available():
        return torch.mps.synchronize
    return None


STEADY_SPREAD = 0.10
"""A timing is steady when its interquartile range is at most this share of its median."""

MIN_MEASUREMENTS_FOR_SPREAD = 3
"""Quartiles of fewer timed measurements than this mean nothing: the spread is then unknown."""

NOISE_VERDICTS = ("faster", "slower", "same within noise", "too noisy", "too few measurements")


@dataclass(frozen=True)
class Timing:
    """One function's time per call; the median and quartiles resist the odd slow run.

    ``spread`` is the interquartile range as a share of the median. Above ``STEADY_SPREAD``
    the measurements disagree too much for any conclusion to be drawn from them.
    """

    label: str
    median: float  # seconds per call
    iqr: float  # seconds, interquartile range of the measurements
    runs: int  # calls of the function in all
    measurements: int  # timed blocks of calls; the quartiles are taken over these
    q1: float | None = None  # seconds, first quartile (median - iqr / 2 when not given)
    q3: float | None = None  # seconds, third quartile (median + iqr / 2 when not given)
    fastest: float | None = None  # seconds, the fastest measurement (q1 when not given)
    slowest: float | None = None  # seconds, the slowest measurement (q3 when not given)

    def __post_init__(self) -> None:
        if self.q1 is None:
            object.__setattr__(self, "q1", self.median - self.iqr / 2)
        if self.q3 is None:
            object.__setattr__(self, "q3", self.median + self.iqr / 2)
        if self.fastest is None:
            object.__setattr__(self, "fastest", self.q1)
        if self.slowest is None:
            object.__setattr__(self, "slowest", self.q3)

    @property
    def spread(self) -> float:
        return self.iqr / self.median if self.median > 0 else float("inf")

    @property
    def spread_known(self) -> bool:
        """False below ``MIN_MEASUREMENTS_FOR_SPREAD`` measurements: then not steady, not noisy."""
        return self.measurements >= MIN_MEASUREMENTS_FOR_SPREAD

    @property
    def steady(self) -> bool:
        return self.spread_known and self.spread <= STEADY_SPREAD

    def __str__(self) -> str:
        prefix = f"{self.label}: " if self.label else ""
        if not self.spread_known:
            return (
                f"{prefix}{format_seconds(self.median)} ({self.runs:,} runs in {self.measurements} "
                "timed measurements: too few to know the spread, so neither steady nor noisy)"
            )
        noisy = "" if self.steady else f"; too noisy to trust: spread {self.spread:.0%}"
        return (
            f"{prefix}{format_seconds(self.median)} "
            f"(IQR {format_seconds(self.iqr, unit_of=self.median)}, {self.runs:,} runs{noisy})"
        )


def _block_timer(fn: Callable[[], object]) -> _StdlibTimer:
    """A timer of blocks of calls that reads the course's clock, which waits for the GPU.

    Not ``torch.utils.benchmark.Timer``: its ``timeit`` warms up with two extra calls before
    every block, which triples the cost of a block of one slow call, and its thread setting is
    what torch uses here anyway (``torch.get_num_threads()``: what the learner's code gets).
    """
    return _StdlibTimer(fn, timer=_synchronized_clock())


def _calls_per_block(timer: _StdlibTimer, block_seconds: float) -> int:
    """How many calls make one timed block last ``block_seconds``; the tries warm up."""
    timer.timeit(1)
    number = 1
    while True:
        seconds = timer.timeit(number)
        if seconds >= block_seconds or number >= 1_000_000:
            return number
        number = min(1_000_000, max(2 * number, int(number * block_seconds / max(seconds, 1e-9))))


def _quartiles(times: list[float]) -> tuple[float, float, float]:
    if len(times) == 1:
        return times[0], times[0], times[0]
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return q1, median, q3


def _timing(label: str, times: list[float], number: int) -> Timing:
    q1, median, q3 = _quartiles(times)
    return Timing(label, median, q3 - q1, len(times) * number, len(times), q1, q3, min(times), max(times))


def compare(
    functions: dict[str, Callable[[], object]],
    *,
    min_run_time: float = 0.2,
    max_run_time: float | None = None,
) -> Comparison:
    """Time each function, in interleaved rounds, until every timing is steady or time is up.

    Each round times one block of calls of every function in turn, so a burst of load from
    elsewhere on the machine falls on all of them rather than on one. Rounds go on until each
    function had ``min_run_time`` seconds and at least four blocks, and then until every
    spread is at most ``STEADY_SPREAD``, or until each function had ``max_run_time`` seconds
    (default five times ``min_run_time``). What could not be made steady says so: read
    ``Comparison.conclusion`` rather than the medians alone.
    """
    if not functions:
        raise ValueError("compare() needs at least one function to time")
    max_run_time = 5 * min_run_time if max_run_time is None else max(max_run_time, min_run_time)
    timers = {name: _block_timer(fn) for name, fn in functions.items()}
    block_seconds = max(min_run_time / 8, 1e-4)
    numbers = {name: _calls_per_block(timer, block_seconds) for name, timer in timers.items()}
    times: dict[str, list[float]] = {name: [] for name in timers}
    spent = dict.fromkeys(timers, 0.0)
    while True:
        for name, timer in timers.items():
            seconds = timer.timeit(numbers[name])
            times[name].append(seconds / numbers[name])
            spent[name] += seconds
        enough = all(len(t) >= 4 for t in times.values()) and min(spent.values()) >= min_run_time
        if enough and all(_timing(n, t, numbers[n]).steady for n, t in times.items()):
            break
        if min(spent.values()) >= max_run_time:
            break
    return Comparison({name: _timing(name, t, numbers[name]) for name, t in times.items()})


def time_it(
    fn: Callable[[], object], *, label: str = "", min_run_time: float = 0.2, max_run_time: float | None = None
) -> Timing:
    """Time ``fn()`` until the measurements agree (see ``compare``); ``.steady`` says if they did."""
    return compare({label: fn}, min_run_time=min_run_time, max_run_time=max_run_time).timings[label]


_COMPARISON_HEADER = ("name", "median", "IQR", "spread", "× vs first")


@dataclass(frozen=True)
class Comparison:
    """Several timings side by side; ratios are against the first, so list the baseline first."""

    timings: dict[str, Timing]

    def ratio(self, a: str, b: str) -> float:
        """How many times longer ``a`` takes than ``b`` (below 1: ``a`` is faster)."""
        return self.timings[a].median / self.timings[b].median

    @classmethod
    def from_samples(cls, samples: Mapping[str, Sequence[float]]) -> Comparison:
        """Times measured elsewhere (one per batch, per epoch, per call), judged by the same rule.

        Each number is one measurement in seconds; the first name is the baseline of the ratios.
        """
        if not samples:
            raise ValueError("from_samples needs at least one list of times")
        timings = {}
        for name, times in samples.items():
            times = [float(t) for t in times]
            if not times:
                raise ValueError(f"from_samples: no times for {name!r}")
            timings[name] = _timing(name, times, 1)
        return cls(timings)

    def verdict(self, a: str, b: str) -> str:
        """``"faster"`` or ``"slower"`` (``a`` against ``b``) only when the difference is larger
        than the noise: when both timings are steady, their middle halves (interquartile
        ranges) must not overlap; when either is noisy, no measurement of one may overlap any
        of the other (every run of ``a`` faster than every run of ``b``: a twentyfold
        difference survives a noisy machine, a 10 % one does not). Otherwise
        ``"same within noise"`` (steady, overlapping) or ``"too noisy"``. With fewer than
        ``MIN_MEASUREMENTS_FOR_SPREAD`` measurements of either, the noise is unknown, so
        nothing is concluded: ``"too few measurements"``."""
        ta, tb = self.timings[a], self.timings[b]
        if not (ta.spread_known and tb.spread_known):
            return "too few measurements"
        if ta.steady and tb.steady:
            if ta.q3 < tb.q1:
                return "faster"
            if ta.q1 > tb.q3:
                return "slower"
            return "same within noise"
        if ta.slowest < tb.fastest:
            return "faster"
        if ta.fastest > tb.slowest:
            return "slower"
        return "too noisy"

    def conclusion(self, a: str, b: str) -> str:
        """One sentence that says no more than the measurements do."""
        ta, tb = self.timings[a], self.timings[b]
        verdict = self.verdict(a, b)
        if verdict == "too few measurements":
            return (
                f"{a} vs {b}: too few measurements to conclude ({ta.measurements} and "
                f"{tb.measurements}; the noise can only be told from at least "
                f"{MIN_MEASUREMENTS_FOR_SPREAD} each)."
            )
        if verdict == "too noisy":
            return (
                f"{a} vs {b}: too noisy to conclude on this machine (spread {ta.spread:.0%} and "
                f"{tb.spread:.0%}; a steady timing has at most {STEADY_SPREAD:.0%}, and the "
                "measurements of the two overlap). Run the cell again when the machine is quieter."
            )
        ratio = self.ratio(a, b)
        if ta.steady and tb.steady:
            low, high = ta.q1 / tb.q3, ta.q3 / tb.q1
            span = f"between {low:.2f}× and {high:.2f}× over the middle half of the measurements"
        else:
            low, high = ta.fastest / tb.slowest, ta.slowest / tb.fastest
            span = f"between {low:.2f}× and {high:.2f}× over all measurements, which were noisy"
        if verdict == "same within noise":
            return f"{a} and {b} take the same time within the noise here ({ratio:.2f}×, {span})."
        return f"{a} is {verdict} than {b} here: {ratio:.2f}× the time ({span})."

    def _rows(self) -> list[tuple[str, str, str, str, str]]:
        first = next(iter(self.timings))
        return [
            (
                name,
                format_seconds(timing.median),
                format_seconds(timing.iqr, unit_of=timing.median),
                "unknown"
                if not timing.spread_known
                else f"{timing.spread:.0%}" + ("" if timing.steady else " noisy"),
                f"{self.ratio(name, first):.2f}×",
            )
            for name, timing in self.timings.items()
        ]

    def _noise_note(self) -> str:
        noisy = [n for n, t in self.timings.items() if t.spread_known and not t.steady]
        if not noisy:
            return ""
        # The same rule as verdict(): a noisy row's ratio alone proves nothing, but a difference
        # larger than every measurement's spread still stands (the conclusion line says which).
        return (
            f"noisy: {', '.join(noisy)} (spread above {STEADY_SPREAD:.0%}): the ratio alone proves "
            "nothing; a difference counts only where every measurement of one lies beyond every "
            "measurement of the other"
        )

    def __str__(self) -> str:
        rows = [_COMPARISON_HEADER, *self._rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_COMPARISON_HEADER))]
        lines = [
            "  ".join(
                [row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:])]
            )
            for row in rows
        ]
        note = self._noise_note()
        return "\n".join(lines + ([note] if note else []))

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in _COMPARISON_HEADER)
        body = "".join(
            "<tr>"
            + f"<td style='text-align:left'>{html.escape(name)}</td>"
            + "".join(f"<td style='text-align:right'>{html.escape(cell)}</td>" for cell in cells)
            + "</tr>"
            for name, *cells in self._rows()
        )
        note = self._noise_note()
        caption = f"<p>{html.escape(note)}</p>" if note else ""
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{caption}"


def by_epoch(samples: Mapping[str, Sequence[float]], epochs: int) -> list[Comparison]:
    """Per-batch times of several epochs, compared one epoch at a time.

    A first epoch and the ones after it can cost differently (workers start, a cache fills,
    ``torch.compile`` compiles); mixed in one list, the slow first batches and the quick later
    ones make a spread that hides both. Each list is cut into ``epochs`` equal parts, and the
    parts of the same epoch are compared by ``Comparison.verdict``'s rule.
    """
    comparisons = []
    for number in range(epochs):
        part = {}
        for name, times in samples.items():
            times = list(times)
            if len(times) % epochs:
                raise ValueError(f"by_epoch: {len(times)} times of {name!r} do not split into {epochs} epochs")
            size = len(times) // epochs
            part[name] = times[number * size : (number + 1) * size]
        comparisons.append(Comparison.from_samples(part))
    return comparisons


# --- memory that autograd keeps -------------------------------------------------------------


@dataclass(frozen=True)
class SavedTensors:
    """What autograd kept alive for the backward pass while a function ran."""

    count: int
    bytes: int

    def __str__(self) -> str:
        noun = "tensor" if self.count == 1 else "tensors"
        return f"{self.count} {noun}, {format_bytes(self.bytes)} kept for backward"


_SPARSE_PARTS = {
    torch.sparse_coo: ("_indices", "_values"),
    torch.sparse_csr: ("crow_indices", "col_indices", "values"),
    torch.sparse_csc: ("ccol_indices", "row_indices", "values"),
    torch.sparse_bsr: ("crow_indices", "col_indices", "values"),
    torch.sparse_bsc: ("ccol_indices", "row_indices", "values"),
}


def _storage_key_and_bytes(t: torch.Tensor) -> tuple[object, int]:
    """Identify the memory a saved tensor keeps alive, and its size.

    A view keeps its whole base alive, so the size is the storage's ``nbytes()``, not the view's
    ``numel * element_size``; two saved views of one storage count once. A storage is known by
    its address; where there is none (``meta`` tensors, which have shapes but no memory, all
    report address 0) by the identity of the storage object itself, so that two meta tensors
    count apart and a tied meta weight counts once. A sparse tensor occupies its indices and
    values, not its dense size. Tensors without a plain storage (some subclasses) fall back to
    ``numel * element_size`` and count on their own.
    """
    parts = _SPARSE_PARTS.get(t.layout)
    if parts is not None:
        pieces = [getattr(t, name)() for name in parts]
        return ("sparse", id(t)), sum(p.numel() * p.element_size() for p in pieces)
    try:
        storage = t.untyped_storage()
        if is_fake(t):  # shapes only, like meta; asking for its address is deprecated
            return ("fake", storage._cdata), storage.nbytes()
        address = storage.data_ptr()
        if address == 0 and storage.nbytes() > 0:  # meta: no address, the storage is the identity
            return (t.device, "storage", storage._cdata), storage.nbytes()
        return (t.device, address), storage.nbytes()
    except (RuntimeError, NotImplementedError, AttributeError):
        return id(t), t.numel() * t.element_size()


def saved_for_backward(fn: Callable[[], object]) -> SavedTensors:
    """Count the tensors autograd saves while ``fn()`` runs, each storage once, in storage bytes.

    This counts everything saved during the call, also for parts of the graph that ``fn`` drops
    before it returns. Under ``torch.no_grad()`` nothing is saved, which is why inference in
    ``no_grad`` needs less memory on every device.
    """
    saved: dict[object, tuple[torch.Tensor, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key, nbytes = _storage_key_and_bytes(t)
        # Holding the tensor keeps its memory from being reused (and miscounted) until we finish.
        saved.setdefault(key, (t, nbytes))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn()
    del result
    return SavedTensors(count=len(saved), bytes=sum(nbytes for _, nbytes in saved.values()))


# --- peak memory ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryPeak:
    """Memory a function needed beyond what was already allocated, and how it was found."""

    bytes: int | None  # None: this device gives no way to measure it
    method: str
    is_peak: bool = True  # False on MPS, which reports what is allocated now, not a peak

    def __str__(self) -> str:
        if self.bytes is None:
            return f"not measurable: {self.method}"
        if self.is_peak:
            return f"{format_bytes(self.bytes)} at peak ({self.method})"
        return f"{format_bytes(self.bytes)} ({self.method})"


def peak_memory(fn: Callable[[], object], device: torch.device | str | None = None) -> MemoryPeak:
    """The most memory ``fn()`` had allocated at once on ``device``, above what was there before.

    ``device`` defaults to the course's device (``course_utils.env.pick_device()``), the one the
    notebooks put their tensors on. What ``fn`` returns counts: it is still alive when measured.
    """
    device = torch.device(device) if device is not None else _course_device()
    if device.type == "cpu":
        return _cpu_peak(fn)
    if device.type == "mps":
        return _mps_difference(fn)
    backend = getattr(torch, device.type, None)
    if hasattr(backend, "max_memory_allocated") and hasattr(backend, "reset_peak_memory_stats"):
        return _allocator_peak(fn, device, backend)
    return MemoryPeak(None, f"PyTorch keeps no memory statistics for {device.type} devices")


def _course_device() -> torch.device:
    from course_utils.env import pick_device

    return pick_device()


def _allocator_peak(fn: Callable[[], object], device: torch.device, backend) -> MemoryPeak:
    """CUDA (and XPU) allocators track their own peak; reset it, run, read it."""
    backend.synchronize(device)
    before = backend.memory_allocated(device)
    backend.reset_peak_memory_stats(device)
    result = fn()
    backend.synchronize(device)
    peak = backend.max_memory_allocated(device)
    del result
    name = device.type.upper()
    return MemoryPeak(peak - before, f"{name} allocator statistics (max_memory_allocated)")


def _mps_difference(fn: Callable[[], object]) -> MemoryPeak:
    """MPS reports only what is allocated now, so memory freed inside ``fn`` goes unseen."""
    torch.mps.synchronize()
    before = torch.mps.current_allocated_memory()
    result = fn()
    torch.mps.synchronize()
    after = torch.mps.current_allocated_memory()
    del result
    return MemoryPeak(
        after - before,
        "MPS keeps no peak: this is what fn() left allocated, from current_allocated_memory()",
        is_peak=False,
    )


def _cpu_peak(fn: Callable[[], object]) -> MemoryPeak:
    """Replay the profiler's allocation events (+bytes, -bytes) and keep the highest running sum.

    The sum starts at zero, so tensors that existed before ``fn`` do not count. The profiler
    records no free of memory allocated before it started (torch warns: "will not include the
    deallocation event"), so replacing an old tensor, or a step that drops old gradients, would
    look like new memory. Those frees are put back: every CPU tensor Python can reach before
    the call (and its ``.grad``) is watched, and when its memory is freed during the call a
    free of its size is replayed at that moment. Memory held only inside C++ (never seen by
    Python) that was allocated before the call and freed during it is still not seen. The peak
    is never reported below zero. It counts what PyTorch's CPU allocator hands out, byte for
    byte; memory that NumPy or Python allocate is not seen.
    """
    from torch.profiler import ProfilerActivity, profile

    # Recent Kineto builds print "profiler_start/stop" lines on every run; they would land in
    # the notebook. Only a default: a learner who set KINETO_LOG_LEVEL keeps their choice.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    # Garbage from before (tensors in reference cycles) would otherwise be collected at some
    # random moment inside fn, and its free would count as fn's doing.
    import gc

    gc.collect()
    watch = _OlderTensors()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        watch.start()
        try:
            result = fn()
            del result
        finally:
            watch.stop()
    running = peak = 0
    for delta in _cpu_memory_deltas(prof, watch):
        running += delta
        peak = max(peak, running)
    return MemoryPeak(peak, "CPU memory events recorded by torch.profiler")


_FREE_MARK = "course_utils.bench: free of older memory #"


class _OlderTensors:
    """The CPU tensors that exist before a measurement, so that their frees can be replayed.

    Each storage is watched through a weak reference; a finalizer on every Python tensor that
    uses it marks, in the profiler's own timeline, the moment the tensor goes. A storage that
    is gone by the end was freed at its last mark.
    """

    def __init__(self) -> None:
        import gc

        from torch.multiprocessing.reductions import StorageWeakRef

        self.storages: dict[int, tuple[object, int]] = {}
        self.finalizers: list = []
        self.freed: dict[int, int] = {}
        tensors = []
        for obj in gc.get_objects():
            # type(), not isinstance(): isinstance reads __class__, which lazy modules answer
            # with deprecation warnings.
            if issubclass(type(obj), torch.Tensor):
                tensors.append(obj)
                try:
                    grad = obj.grad if obj.is_leaf else None
                except Exception:  # noqa: BLE001 - a tensor subclass that cannot say: skip it
                    grad = None
                if grad is not None:
                    tensors.append(grad)
        for t in tensors:
            try:
                if t.device.type != "cpu" or t.layout != torch.strided or is_fake(t):
                    continue
                storage = t.untyped_storage()
                address, nbytes = storage.data_ptr(), storage.nbytes()
            except (RuntimeError, NotImplementedError, AttributeError):
                continue
            if address == 0 or nbytes == 0:
                continue
            if address not in self.storages:
                self.storages[address] = (StorageWeakRef(storage), nbytes)
            self.finalizers.append((t, address))
        del tensors

    def start(self) -> None:
        import weakref

        pending, self.finalizers = self.finalizers, []
        for t, address in pending:
            try:
                self.finalizers.append(weakref.finalize(t, self._gone, address))
            except TypeError:
                continue
        del pending

    def _gone(self, address: int) -> None:
        with torch.profiler.record_function(f"{_FREE_MARK}{address}"):
            pass

    def stop(self) -> None:
        for finalizer in self.finalizers:
            finalizer.detach()
        self.finalizers = []
        self.freed = {
            address: nbytes for address, (ref, nbytes) in self.storages.items() if ref.expired()
        }


def _cpu_memory_deltas(prof, older: _OlderTensors | None = None) -> list[int]:
    """Each CPU allocation (+) and free (-) in bytes, in the order they happened.

    ``prof.events()`` is no use here: it adds each allocation into the operator it happened in,
    so an operator's temporary buffers cancel out and the order inside it is lost. The raw
    Kineto results that ``events()`` is built from keep one ``[memory]`` record per event.
    With ``older``, the frees of memory allocated before the profiler started (which it does
    not record) are put back at the last mark of each freed storage.
    """
    records = []
    last_mark: dict[int, object] = {}
    for event in prof.profiler.kineto_results.events():
        name = event.name()
        if name == "[memory]" and event.device_type() == torch.autograd.DeviceType.CPU:
            records.append((event.start_ns(), event.nbytes()))
        elif older is not None and name.startswith(_FREE_MARK):
            address = int(name[len(_FREE_MARK):])
            if address in older.freed:
                start = event.start_ns()
                if address not in last_mark or start >= last_mark[address]:
                    last_mark[address] = start
    if older is not None:
        records.extend((start, -older.freed[address]) for address, start in last_mark.items())
    records.sort(key=lambda record: record[0])
    return [nbytes for _, nbytes in records]


# --- where the memory of training goes ------------------------------------------------------


def tensor_bytes(tensors) -> int:
    """Bytes of memory the tensors occupy, each storage counted once.

    A ``1000 × 1000`` float32 tensor counts ``4_000_000`` bytes; a weight shared by two layers
    (tied embeddings) counts once; ``None`` entries (a parameter without a gradient) count 0.
    """
    seen: dict[object, int] = {}
    for t in tensors:
        if t is None:
            continue
        key, nbytes = _storage_key_and_bytes(t)
        seen.setdefault(key, nbytes)
    return sum(seen.values())


def optimizer_state_tensors(optimizer) -> list[torch.Tensor]:
    """Every tensor an optimizer keeps between steps (Adam: ``exp_avg``, ``exp_avg_sq``, ``step``).

    The state is made lazily by the first ``step()``: before it, this list is empty.
    """
    if optimizer is None:
        return []
    found: list[torch.Tensor] = []
    _collect_tensors(list(optimizer.state.values()), found)
    return found


def _collect_tensors(value, found: list[torch.Tensor]) -> None:
    """Every tensor inside nested lists, tuples and dicts (LBFGS keeps lists: ``old_dirs``)."""
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_tensors(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect_tensors(item, found)


_BUDGET_HEADER = ("part", "size", "bytes", "share", "grows with batch")


@dataclass(frozen=True)
class MemoryBudget:
    """The memory one training step needs, part by part, counted from the tensors themselves.

    ``activations`` is what autograd saved for the backward pass during the forward pass and
    the loss, parameters and buffers excluded (they are counted once, in their own rows); it
    includes the input batch when the first layer needs it for its weight gradient, and under
    autocast the lower-precision copies of the weights that the matrix products keep. Temporary
    buffers that an operation frees before it returns are not in any part: a device's measured
    peak is higher than ``total`` by those. ``buffers`` are the module's buffers (BatchNorm's
    running statistics): fixed, like the parameters, not growing with the batch.
    """

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    # Parts that do not exist yet (gradients before the first backward(), Adam's state before
    # the first step()): their size is what that call will allocate, worked out, not counted.
    not_yet: tuple[str, ...] = ()
    buffers: int = 0
    # Parts whose size could not be found (the state of an optimizer that cannot be stepped
    # without a closure, before its first step): shown as "unknown", counted as 0 in the sums.
    unknown: tuple[str, ...] = ()
    how: str = ""  # how the activations were found, when a loss_fn was given

    @property
    def fixed(self) -> int:
        """What does not depend on the batch: parameters, buffers, gradients, optimizer state."""
        return self.parameters + self.buffers + self.gradients + self.optimizer_state

    @property
    def total(self) -> int:
        return self.fixed + self.activations

    def parts(self) -> dict[str, int]:
        """Bytes per part; ``buffers`` only when the model has some."""
        parts = {"parameters": self.parameters}
        if self.buffers:
            parts["buffers"] = self.buffers
        parts.update(
            {
                "gradients": self.gradients,
                "optimizer state": self.optimizer_state,
                "activations": self.activations,
            }
        )
        return parts

    def _rows(self) -> list[tuple[str, str, str, str, str]]:
        total = self.total
        rows = []
        for name, nbytes in self.parts().items():
            grows = "yes" if name == "activations" else "no"
            if name in self.unknown:
                rows.append((f"{name} (unknown)", "unknown", "unknown", "-", grows))
                continue
            share = f"{100 * nbytes / total:.1f} %" if total else "-"
            label = f"{name} (not yet)" if name in self.not_yet else name
            rows.append((label, format_bytes(nbytes), f"{nbytes:,}", share, grows))
        label = "total (without unknown parts)" if self.unknown else "total"
        rows.append((label, format_bytes(total), f"{total:,}", "100.0 %" if total else "-", ""))
        return rows

    def _not_yet_note(self) -> str:
        notes = []
        if self.not_yet:
            by = {"gradients": "the first backward()", "optimizer state": "the first step()"}
            parts = "; ".join(f"{name} by {by.get(name, 'a later call')}" for name in self.not_yet)
            notes.append(f"not yet allocated, shown at the size that will be: {parts}")
        if "optimizer state" in self.unknown:
            notes.append(
                "optimizer state unknown: this optimizer makes its state on its first step(), and "
                "a twin of it could not be stepped to measure it (it needs a closure, another "
                "argument, or the gradients are sparse); it is not 0 B. Call memory_budget again after "
                "one real step to count it."
            )
        if "gradients" in self.unknown:
            notes.append(
                "gradients unknown: a sparse gradient (Embedding(sparse=True)) holds only the rows "
                "a batch uses; give memory_budget a loss_fn to work it out for that batch"
            )
        other = [name for name in self.unknown if name not in ("optimizer state", "gradients")]
        if other:
            notes.append(f"unknown: {', '.join(other)}")
        if self.how:
            notes.append(f"activations {self.how}")
        return "\n".join(notes)

    def __str__(self) -> str:
        rows = [_BUDGET_HEADER, *self._rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_BUDGET_HEADER))]
        lines = [
            "  ".join(
                [row[0].ljust(widths[0])]
                + [cell.rjust(w) for cell, w in zip(row[1:4], widths[1:4])]
                + [row[4].ljust(widths[4])]
            ).rstrip()
            for row in rows
        ]
        note = self._not_yet_note()
        return "\n".join(lines + ([note] if note else []))

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in _BUDGET_HEADER)
        body = "".join(
            "<tr>"
            + f"<td style='text-align:left'>{html.escape(name)}</td>"
            + "".join(f"<td style='text-align:right'>{html.escape(c)}</td>" for c in cells[:3])
            + f"<td style='text-align:left'>{html.escape(cells[3])}</td>"
            + "</tr>"
            for name, *cells in self._rows()
        )
        note = self._not_yet_note()
        caption = "".join(f"<p>{html.escape(line)}</p>" for line in note.splitlines())
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{caption}"


def _state_a_first_step_makes(optimizer) -> int | None:
    """Bytes of state ``optimizer`` will create on its first ``step()``, measured on a twin.

    Optimizers such as Adam make their state lazily, so before the first step there is nothing
    to count. A twin optimizer of the same class and settings takes one step on zero-filled
    stand-ins of the parameters (with zero gradients) and its state is counted; the model and
    the real optimizer are not touched. The stand-ins are ``meta`` tensors first (shapes without
    memory: nothing real is allocated), and real zeros only when the twin cannot step on meta.
    ``None`` when the twin cannot be built or stepped (an optimizer that needs a closure, a
    constructor with other arguments, one that needs sparse gradients).
    """
    for device in ("meta", None):
        groups = []
        for group in optimizer.param_groups:
            stand_ins = []
            for p in group["params"]:
                twin = torch.zeros_like(p, device=device, requires_grad=True)
                if p.requires_grad:
                    twin.grad = torch.zeros_like(p, device=device)
                stand_ins.append(twin)
            settings = {k: v for k, v in group.items() if k != "params"}
            groups.append({**settings, "params": stand_ins})
        try:
            twin_optimizer = type(optimizer)(groups)
            twin_optimizer.step()
        except Exception:  # noqa: BLE001 - any optimizer we cannot imitate is reported as unknown
            continue
        return tensor_bytes(optimizer_state_tensors(twin_optimizer))
    return None


def _sparse_gradient_weights(model: torch.nn.Module) -> set[int]:
    """ids of the weights whose backward() makes sparse gradients (``Embedding(sparse=True)``)."""
    kinds = (torch.nn.Embedding, torch.nn.EmbeddingBag)
    return {
        id(m.weight)
        for m in model.modules()
        if isinstance(m, kinds) and getattr(m, "sparse", False) and m.weight.requires_grad
    }


def _refuse_uninitialized(model: torch.nn.Module) -> None:
    """A lazy layer has no shapes before its first forward, so nothing about it can be counted."""
    lazy = [
        f"{name or 'the model'} ({type(module).__name__})"
        for name, module in model.named_modules()
        if any(
            isinstance(t, torch.nn.parameter.UninitializedTensorMixin)
            for t in [*module._parameters.values(), *module._buffers.values()]
        )
    ]
    if lazy:
        raise ValueError(
            f"memory_budget cannot count {', '.join(lazy)}: a lazy layer has no shapes until its "
            "first forward. Run one batch through the model first (with torch.no_grad():"
            " model(x)), then call memory_budget."
        )


def memory_budget(
    model: torch.nn.Module, optimizer=None, loss_fn: Callable[[], torch.Tensor] | None = None
) -> MemoryBudget:
    """Count the bytes of parameters, buffers, gradients, optimizer state and activations.

    With ``loss_fn`` (a function of no arguments that runs the forward pass and returns the
    loss tensor), one training step is worked out without being taken: the forward pass and
    the loss run on shapes alone (``FakeTensorMode``) under ``saved_tensors_hooks``, which see
    the activations, and ``torch.autograd.grad`` gives the gradients' sizes. Nothing real is
    allocated, no ``.grad`` is touched, the optimizer does not step, and the buffers and random
    generators are as they were. A forward that reads values (``.item()``) cannot run on shapes:
    then the pass runs for real (no ``.grad`` touched, no step), and ``how`` says so.
    Gradients that no backward() has made yet, and optimizer state that no step() has made yet
    (Adam makes it lazily), are given at the size those calls will allocate and listed in
    ``not_yet``, rather than as 0 B; a state that cannot be predicted is listed in ``unknown``,
    never shown as 0 B. Without ``loss_fn`` the activations are 0.

    What is counted and what is estimated: every number is read from tensors (shapes, dtypes,
    storages), so it is exact on every device, the CPU included. To estimate a model too large
    to build for real, build it on the ``meta`` device (``with torch.device("meta"): model =
    ...``, inputs on meta too): meta tensors have shapes and no memory. The state a first
    ``step()`` will make is worked out on a twin optimizer over meta stand-ins (real zeros only
    if it cannot step on meta).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            "memory_budget needs a torch.nn.Module as its first argument, "
            f"got {type(model).__name__}"
        )
    if optimizer is not None and not hasattr(optimizer, "param_groups"):
        raise TypeError(
            "memory_budget's optimizer must be a torch.optim.Optimizer (or None), "
            f"got {type(optimizer).__name__}"
        )
    if loss_fn is not None and not callable(loss_fn):
        raise TypeError(
            "memory_budget's loss_fn must be a function of no arguments that returns the loss, "
            f"got {type(loss_fn).__name__}"
        )
    _refuse_uninitialized(model)
    params = [p for p in model.parameters()]
    buffers = [b for b in model.buffers()]
    trained = [p for p in params if p.requires_grad]
    activations = 0
    how = ""
    # Gradients as they are now, and those a backward() would add where there are none yet.
    gradients_now = [p.grad for p in params]
    coming: list[torch.Tensor] = []
    if loss_fn is not None:
        from course_utils.step_on_shapes import count_step

        fixed_keys = {_storage_key_and_bytes(t)[0] for t in params + buffers}
        step = count_step(model, loss_fn, trained, _storage_key_and_bytes, fixed_keys)
        activations = sum(nbytes for _, nbytes in step.saved.values())
        how = step.how
        coming = [g for p, g in zip(trained, step.gradients) if p.grad is None and g is not None]
        del step
    elif trained and all(p.grad is None for p in trained):
        coming = trained  # backward() makes one gradient the size of each
    unknown = []
    # A sparse gradient holds the rows the batch used: only a loss_fn can say how many.
    sparse_weights = _sparse_gradient_weights(model)
    if loss_fn is None and any(id(p) in sparse_weights for p in coming):
        coming = [p for p in coming if id(p) not in sparse_weights]
        unknown.append("gradients")
    gradients = tensor_bytes(gradients_now) + tensor_bytes(coming)
    state = tensor_bytes(optimizer_state_tensors(optimizer))
    not_yet = ["gradients"] if coming and "gradients" not in unknown else []
    sparse = bool(sparse_weights) or any(
        t is not None and t.layout != torch.strided for t in [*gradients_now, *coming]
    )
    if optimizer is not None and not optimizer.state:
        # The twin steps on dense stand-ins; with sparse gradients its state would be guessed.
        predicted = None if sparse else _state_a_first_step_makes(optimizer)
        if predicted is None:
            unknown.append("optimizer state")
        elif predicted:  # plain SGD keeps no state: nothing is missing
            state = predicted
            not_yet.append("optimizer state")
    return MemoryBudget(
        parameters=tensor_bytes(params),
        gradients=gradients,
        optimizer_state=state,
        activations=activations,
        not_yet=tuple(not_yet),
        buffers=tensor_bytes(buffers),
        unknown=tuple(unknown),
        how=how,
    )
