"""Out-of-memory messages as bars: what the device holds, and the request beside it.

One look answers what the message's sentence hides: is the request longer than the whole bar
(larger than the device), longer than free + cache (live tensors fill it), or shorter (the room
exists, in pieces)? Every bar is drawn to one scale per message, in the message's own numbers.
"""

from __future__ import annotations

from course_utils.out_of_memory import OutOfMemory, gib

# (label, colour) of each part of a device's memory, left to right
_PARTS = (
    ("live tensors (allocated)", "#c0392b"),
    ("cache, unused pieces (reserved but unallocated)", "#f39c12"),
    ("outside PyTorch's tensors (CUDA context, other processes)", "#7f8c8d"),
    ("free", "#27ae60"),
)


def _parts(oom: OutOfMemory) -> list[int]:
    allocated, cached, free = oom.allocated or 0, oom.reserved_unallocated or 0, oom.free or 0
    outside = max(oom.total - allocated - cached - free, 0)
    return [allocated, cached, outside, free]


def out_of_memory_bars(readings: dict[str, OutOfMemory]):
    """One pair of bars per message: the device split into its parts, and the request."""
    import matplotlib.pyplot as plt

    drawable = {label: oom for label, oom in readings.items() if oom.device == "cuda"
                and oom.total and oom.free is not None and oom.reserved_unallocated is not None}
    if not drawable:
        raise ValueError("no CUDA message with total, free and reserved-but-unallocated numbers to draw")
    fig, axes = plt.subplots(len(drawable), 1, figsize=(9, 1.9 * len(drawable) + 0.6), squeeze=False)
    for ax, (label, oom) in zip(axes[:, 0], drawable.items()):
        scale = max(oom.total, oom.requested)
        left = 0
        for (name, colour), size in zip(_PARTS, _parts(oom)):
            ax.barh(1, size / scale, left=left / scale, color=colour, label=name, height=0.6)
            left += size
        room = oom.free_plus_cache
        ax.barh(0, oom.requested / scale, color="#2c3e50", height=0.6, label="the request")
        ax.axvline(oom.total / scale, color="black", lw=1)
        ax.set_yticks([1, 0], ["device", "asked for"])
        ax.set_xticks([])
        ax.set_xlim(0, 1.02)
        ax.set_title(f"{label}: asked {gib(oom.requested)}, free + cache {gib(room)}, "
                     f"device {gib(oom.total)} → {oom.situation}", fontsize=9, loc="left")
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_visible(False)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    plt.close(fig)
    return fig
