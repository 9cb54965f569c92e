"""Measure, do not quote: every speed or memory claim in the course is measured on your machine.

Speeds differ by a factor of a hundred between a laptop CPU and a data-centre GPU, so a number
printed in the text would be wrong for almost everyone. The helpers here wrap the tools PyTorch
already has for measuring itself and print what they found in plain units:

- ``time_it`` and ``compare``: ``torch.utils.benchmark.Timer``, which warms up, repeats, and
  synchronizes CUDA so that asynchronous GPU work is not mistaken for instant work.
- ``saved_for_backward``: ``torch.autograd.graph.saved_tensors_hooks``, which sees every tensor
  autograd keeps for the backward pass. This is the memory a graph holds alive, and unlike the
  allocator's statistics it can be measured on every device, the CPU included.
- ``peak_memory``: the CUDA allocator's own peak statistics, or on the CPU the allocation events
  that ``torch.profiler`` records.
- ``memory_budget``: where the memory of a training step goes (parameters, gradients, optimizer
  state, activations), each part counted from the tensors themselves, on every device.
"""

from __future__ import annotations

import html
import os
import timeit
from dataclasses import dataclass
from typing import Callable

import torch
import torch.utils.benchmark

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


@dataclass(frozen=True)
class Timing:
    """One function's time per call; the median and IQR resist the odd slow run."""

    label: str
    median: float  # seconds per call
    iqr: float  # seconds, interquartile range of the measurements
    runs: int  # calls of the function in all, as torch.utils.benchmark counts them
    measurements: int  # blocks of runs that were timed; the IQR is taken over these

    def __str__(self) -> str:
        prefix = f"{self.label}: " if self.label else ""
        return (
            f"{prefix}{format_seconds(self.median)} "
            f"(IQR {format_seconds(self.iqr, unit_of=self.median)}, {self.runs:,} runs)"
        )


def time_it(fn: Callable[[], object], *, label: str = "", min_run_time: float = 0.2) -> Timing:
    """Time ``fn()`` with ``torch.utils.benchmark.Timer`` on as many threads as torch uses here.

    The Timer alone would run on one thread, which makes CPU timings look slower than the
    learner's own code runs; ``torch.get_num_threads()`` is what their code gets.
    """
    timer = torch.utils.benchmark.Timer(
        stmt="fn()",
        globals={"fn": fn},
        num_threads=torch.get_num_threads(),
        label=label,
        timer=_synchronized_clock(),
    )
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    return Timing(
        label=label,
        median=measurement.median,
        iqr=measurement.iqr,
        runs=len(measurement.times) * measurement.number_per_run,
        measurements=len(measurement.times),
    )


_COMPARISON_HEADER = ("name", "median", "IQR", "× vs first")


@dataclass(frozen=True)
class Comparison:
    """Several timings side by side; ratios are against the first, so list the baseline first."""

    timings: dict[str, Timing]

    def ratio(self, a: str, b: str) -> float:
        """How many times longer ``a`` takes than ``b`` (below 1: ``a`` is faster)."""
        return self.timings[a].median / self.timings[b].median

    def _rows(self) -> list[tuple[str, str, str, str]]:
        first = next(iter(self.timings))
        return [
            (
                name,
                format_seconds(timing.median),
                format_seconds(timing.iqr, unit_of=timing.median),
                f"{self.ratio(name, first):.2f}×",
            )
            for name, timing in self.timings.items()
        ]

    def __str__(self) -> str:
        rows = [_COMPARISON_HEADER, *self._rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_COMPARISON_HEADER))]
        lines = [
            "  ".join(
                [row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:])]
            )
            for row in rows
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in _COMPARISON_HEADER)
        body = "".join(
            "<tr>"
            + f"<td style='text-align:left'>{html.escape(name)}</td>"
            + "".join(f"<td style='text-align:right'>{html.escape(cell)}</td>" for cell in cells)
            + "</tr>"
            for name, *cells in self._rows()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def compare(functions: dict[str, Callable[[], object]], *, min_run_time: float = 0.2) -> Comparison:
    """Time each function in turn; the first one is the baseline that the ratios refer to."""
    if not functions:
        raise ValueError("compare() needs at least one function to time")
    return Comparison(
        {name: time_it(fn, label=name, min_run_time=min_run_time) for name, fn in functions.items()}
    )


# --- memory that autograd keeps -------------------------------------------------------------


@dataclass(frozen=True)
class SavedTensors:
    """What autograd kept alive for the backward pass while a function ran."""

    count: int
    bytes: int

    def __str__(self) -> str:
        noun = "tensor" if self.count == 1 else "tensors"
        return f"{self.count} {noun}, {format_bytes(self.bytes)} kept for backward"


def _storage_key_and_bytes(t: torch.Tensor) -> tuple[object, int]:
    """Identify the memory a saved tensor keeps alive, and its size.

    A view keeps its whole base alive, so the size is the storage's ``nbytes()``, not the view's
    ``numel * element_size``; two saved views of one storage count once. Tensors without a plain
    storage (sparse, some subclasses) fall back to ``numel * element_size`` and count on their own.
    """
    try:
        storage = t.untyped_storage()
        return (t.device, storage.data_ptr()), storage.nbytes()
    except (RuntimeError, NotImplementedError):
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

    The sum starts at zero, so tensors that existed before ``fn`` do not count, and freeing one
    of them can take the sum below zero; the peak is never reported below zero. It counts what
    PyTorch's CPU allocator hands out, byte for byte; memory that NumPy or Python allocate is
    not seen.
    """
    from torch.profiler import ProfilerActivity, profile

    # Recent Kineto builds print "profiler_start/stop" lines on every run; they would land in
    # the notebook. Only a default: a learner who set KINETO_LOG_LEVEL keeps their choice.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
        del result
    running = peak = 0
    for delta in _cpu_memory_deltas(prof):
        running += delta
        peak = max(peak, running)
    return MemoryPeak(peak, "CPU memory events recorded by torch.profiler")


def _cpu_memory_deltas(prof) -> list[int]:
    """Each CPU allocation (+) and free (-) in bytes, in the order they happened.

    ``prof.events()`` is no use here: it adds each allocation into the operator it happened in,
    so an operator's temporary buffers cancel out and the order inside it is lost. The raw
    Kineto results that ``events()`` is built from keep one ``[memory]`` record per event.
    """
    records = [
        event
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]" and event.device_type() == torch.autograd.DeviceType.CPU
    ]
    records.sort(key=lambda event: event.start_ns())
    return [event.nbytes() for event in records]


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
    return [
        value
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    ]


_BUDGET_HEADER = ("part", "size", "bytes", "share", "grows with batch")


@dataclass(frozen=True)
class MemoryBudget:
    """The memory one training step needs, part by part, counted from the tensors themselves.

    ``activations`` is what autograd saved for the backward pass during the forward pass and
    the loss, parameters excluded (they are counted once, as parameters); it includes the
    input batch when the first layer needs it for its weight gradient, and under autocast the
    lower-precision copies of the weights that the matrix products keep. Temporary buffers that
    an operation frees before it returns are not in any part: a device's measured peak is
    higher than ``total`` by those.
    """

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int

    @property
    def fixed(self) -> int:
        """What does not depend on the batch size: parameters, gradients, optimizer state."""
        return self.parameters + self.gradients + self.optimizer_state

    @property
    def total(self) -> int:
        return self.fixed + self.activations

    def parts(self) -> dict[str, int]:
        return {
            "parameters": self.parameters,
            "gradients": self.gradients,
            "optimizer state": self.optimizer_state,
            "activations": self.activations,
        }

    def _rows(self) -> list[tuple[str, str, str, str, str]]:
        total = self.total
        rows = []
        for name, nbytes in self.parts().items():
            share = f"{100 * nbytes / total:.1f} %" if total else "-"
            grows = "yes" if name == "activations" else "no"
            rows.append((name, format_bytes(nbytes), f"{nbytes:,}", share, grows))
        rows.append(("total", format_bytes(total), f"{total:,}", "100.0 %" if total else "-", ""))
        return rows

    def __str__(self) -> str:
        rows = [_BUDGET_HEADER, *self._rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_BUDGET_HEADER))]
        return "\n".join(
            "  ".join(
                [row[0].ljust(widths[0])]
                + [cell.rjust(w) for cell, w in zip(row[1:4], widths[1:4])]
                + [row[4].ljust(widths[4])]
            ).rstrip()
            for row in rows
        )

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
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def memory_budget(
    model: torch.nn.Module, optimizer=None, loss_fn: Callable[[], torch.Tensor] | None = None
) -> MemoryBudget:
    """Count the bytes of parameters, gradients, optimizer state and activations of ``model``.

    With ``loss_fn`` (a function that runs the forward pass and returns the loss), this runs
    one training step: the forward pass under ``saved_tensors_hooks`` to see the activations,
    ``loss.backward()``, and ``optimizer.step()`` when there is an optimizer, because
    gradients and optimizer state only exist after a step. Like any training step it changes
    the weights. Without ``loss_fn`` it counts the tensors as they are now (activations 0).

    Every number is read from tensors, so it is exact on every device, the CPU included.
    """
    params = [p for p in model.parameters()]
    param_keys = {_storage_key_and_bytes(p)[0] for p in params}
    activations = 0
    if loss_fn is not None:
        saved: dict[object, tuple[torch.Tensor, int]] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            key, nbytes = _storage_key_and_bytes(t)
            if key not in param_keys:
                saved.setdefault(key, (t, nbytes))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = loss_fn()
        activations = sum(nbytes for _, nbytes in saved.values())
        saved.clear()
        loss.backward()
        del loss
        if optimizer is not None:
            optimizer.step()
    return MemoryBudget(
        parameters=tensor_bytes(params),
        gradients=tensor_bytes(p.grad for p in params),
        optimizer_state=tensor_bytes(optimizer_state_tensors(optimizer)),
        activations=activations,
    )
