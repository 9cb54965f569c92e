"""Chapter 02's pictures: gradients that are never cleared, and what recording keeps in memory.

``draw_uncleared_gradients`` plots gradient descent with and without clearing ``.grad`` (loss and
parameter per step); ``draw_recording_memory`` compares the bytes saved for backward and the peak
memory of one forward pass with grad, under ``no_grad`` and under ``inference_mode``. Both take
the numbers the notebook measured; matplotlib is imported inside them.
"""

from __future__ import annotations

import math

CLEARED, NEVER_CLEARED = "#1f77b4", "#d62728"
SAVED, PEAK = "#1f77b4", "#ff7f0e"
_UNITS = (("B", 1), ("KB", 1024), ("MB", 1024**2), ("GB", 1024**3))


def _floats(name: str, values) -> list[float]:
    values = [float(v) for v in values]
    if not values:
        raise ValueError(f"{name} is empty: give one value per step")
    return values


def draw_uncleared_gradients(cleared_losses, never_cleared_losses, cleared_w, never_cleared_w, *,
                             target=None):
    """Loss and parameter per step of gradient descent, clearing ``.grad`` or never clearing it.

    A table of numbers says the loss "never settles"; two curves show it: cleared, the loss falls
    steadily and ``w`` walks to its target; never cleared, every step adds up all the gradients
    so far, so ``w`` swings past the target and back and the loss rises and falls. The loss is on
    a log axis, so a loss falling to 1e-5 and one swinging around 1 are both readable. ``target``
    (the value ``w`` should reach) is drawn as a dashed line when given.
    """
    import matplotlib.pyplot as plt

    series = {
        "cleared_losses": _floats("cleared_losses", cleared_losses),
        "never_cleared_losses": _floats("never_cleared_losses", never_cleared_losses),
        "cleared_w": _floats("cleared_w", cleared_w),
        "never_cleared_w": _floats("never_cleared_w", never_cleared_w),
    }
    lengths = {len(v) for v in series.values()}
    if len(lengths) != 1:
        sizes = ", ".join(f"{name} {len(v)}" for name, v in series.items())
        raise ValueError(f"one value per step in every series, but the lengths differ: {sizes}")
    steps = list(range(len(series["cleared_losses"])))

    fig, (loss_ax, w_ax) = plt.subplots(1, 2, figsize=(8.0, 3.7))
    loss_ax.plot(steps, series["cleared_losses"], marker=".", color=CLEARED,
                 label="cleared every step")
    loss_ax.plot(steps, series["never_cleared_losses"], marker=".", color=NEVER_CLEARED,
                 linestyle="--", label="never cleared")
    loss_ax.set_yscale("log")
    loss_ax.set_xlabel("step")
    loss_ax.set_ylabel("loss (log scale)")
    loss_ax.set_title("loss: falls, or never settles", fontsize=10)
    loss_ax.grid(alpha=0.3, which="both")

    w_ax.plot(steps, series["cleared_w"], marker=".", color=CLEARED, label="cleared every step")
    w_ax.plot(steps, series["never_cleared_w"], marker=".", color=NEVER_CLEARED, linestyle="--",
              label="never cleared")
    if target is not None:
        w_ax.axhline(float(target), color="#555555", linestyle=":", linewidth=1.5,
                     label=f"target w = {float(target):g}", gid="target")
    w_ax.set_xlabel("step")
    w_ax.set_ylabel("w (the parameter)")
    w_ax.set_title("w: walks to the target, or swings past it", fontsize=10)
    w_ax.grid(alpha=0.3)
    handles, labels = w_ax.get_legend_handles_labels()  # one legend for both panels, below them
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    fig.suptitle("gradient descent when .grad is cleared every step, and when it is not",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    plt.close(fig)
    return fig


def _unit(largest: float) -> tuple[str, int]:
    """The largest unit (1 KB = 1024 B, as ``bench.format_bytes``) in which ``largest`` is >= 1."""
    unit = _UNITS[0]
    for candidate in _UNITS:
        if largest >= candidate[1]:
            unit = candidate
    return unit


def _bytes(name: str, value) -> float | None:
    if value is None:
        return None
    value = getattr(value, "bytes", value)  # bench.SavedTensors and bench.MemoryPeak carry .bytes
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}: a size in bytes is a number >= 0, not {value}")
    return value


def draw_recording_memory(saved: dict, peak: dict, *, missing: str = "not measurable here"):
    """Bytes kept for backward and peak memory, with grad, under no_grad and inference_mode.

    The point of the A3 section in one look: with recording on, autograd keeps every layer's
    activations for a backward pass, so both bars are tall; with ``no_grad`` or
    ``inference_mode`` nothing is kept, and the peak is one layer's output at a time. ``saved``
    and ``peak`` map each way of running to bytes (or to ``bench.saved_for_backward`` /
    ``bench.peak_memory`` results). A peak of ``None`` (a device without memory statistics) is
    drawn as an empty bar labelled ``missing``.

    Two quantities per way, side by side, so ``plots.plot_bars`` (one bar per name, or parts
    stacked into one) does not fit: neither is a part of the other (the saved bytes count the
    input batch, which was allocated before the pass; the peak counts only the pass's own
    allocations), so they must not be stacked.
    """
    import matplotlib.pyplot as plt

    if not saved:
        raise ValueError("draw_recording_memory needs at least one way of running")
    if set(saved) != set(peak):
        raise ValueError(f"saved and peak must name the same ways: {sorted(saved)} vs {sorted(peak)}")
    names = list(saved)
    saved_bytes = [_bytes(f"saved[{n!r}]", saved[n]) for n in names]
    peak_bytes = [_bytes(f"peak[{n!r}]", peak[n]) for n in names]
    if any(value is None for value in saved_bytes):
        raise ValueError("saved_for_backward always measures: give a number of bytes for each way")
    largest = max([v for v in saved_bytes + peak_bytes if v is not None] + [0.0])
    unit, scale = _unit(largest)

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    width = 0.38
    for offset, label, colour, values, gid in (
        (-width / 2, "kept for backward (saved_for_backward)", SAVED, saved_bytes, "saved"),
        (width / 2, "peak memory (peak_memory)", PEAK, peak_bytes, "peak"),
    ):
        positions = [i + offset for i in range(len(names))]
        heights = [0.0 if v is None else v / scale for v in values]
        ax.bar(positions, heights, width, color=colour, label=label, gid=gid)
        for x, value in zip(positions, values):
            text = missing if value is None else f"{value / scale:.3g} {unit}"
            ax.annotate(text, (x, 0.0 if value is None else value / scale), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=9,
                        rotation=90 if value is None else 0,
                        color="gray" if value is None else "black")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=10)
    ax.set_ylabel(f"memory ({unit}, 1 KB = 1024 B)")
    ax.set_title("one forward pass: recording keeps the activations, no_grad and\n"
                 "inference_mode keep nothing", fontsize=10)
    ax.margins(y=0.2)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=9, loc="upper right")
    fig.tight_layout()
    plt.close(fig)
    return fig
