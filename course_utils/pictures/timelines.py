"""Timelines of training steps: what each step waited for, and what the fixes changed.

Chapter 05 measures, batch by batch, how long a training loop waits for its data loader and
how long it computes. Totals and quartiles say *that* the loader is the bottleneck; a timeline
shows it: each step a bar, its waiting part then its computing part, one step after the other,
so the learner sees the idle time, the slow first batch of each epoch (workers starting), and
how much shorter the same two epochs are once the loader is fixed.
"""

from __future__ import annotations

import math

WAIT, COMPUTE = "#ff7f0e", "#1f77b4"


def _steps(name, waits, computes) -> tuple[list[float], list[float]]:
    waits, computes = [float(w) for w in waits], [float(c) for c in computes]
    if len(waits) != len(computes):
        raise ValueError(f"{name}: {len(waits)} waits but {len(computes)} compute times: "
                         "give one of each per step")
    if not waits:
        raise ValueError(f"{name}: no steps to draw")
    if any(not math.isfinite(t) or t < 0 for t in waits + computes):
        raise ValueError(f"{name}: times are seconds, finite and not negative")
    return waits, computes


def step_timeline(runs, *, title="waiting for data vs computing, step by step"):
    """One panel per run: a horizontal bar per step, its wait (orange) then its compute (blue).

    ``runs`` maps a run's name (e.g. "baseline", "all together") to ``(waits, computes)``, two
    lists of seconds with one entry per step, as the notebook measured them. Each step starts
    where the previous one ended, so a panel reads left to right as the run went, and the
    panels share their time axis (milliseconds): a shorter run ends further left. Each panel's
    title gives its totals. Returns the figure, closed in pyplot.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    runs = {name: _steps(name, *pair) for name, pair in dict(runs).items()}
    if not runs:
        raise ValueError("step_timeline needs at least one run")
    most = max(len(w) for w, _ in runs.values())
    fig, axes = plt.subplots(
        len(runs), 1, figsize=(8, 0.9 + len(runs) * (0.6 + 0.17 * most)), sharex=True,
        squeeze=False, layout="constrained",
    )
    for ax, (name, (waits, computes)) in zip(axes[:, 0], runs.items()):
        start = 0.0
        for step, (wait, compute) in enumerate(zip(waits, computes)):
            ax.barh(step, 1000 * wait, left=1000 * start, height=0.7, color=WAIT)
            ax.barh(step, 1000 * compute, left=1000 * (start + wait), height=0.7, color=COMPUTE)
            start += wait + compute
        waited, computed = sum(waits), sum(computes)
        ax.set_title(
            f"{name}: {len(waits)} steps in {1000 * (waited + computed):.0f} ms, "
            f"{1000 * waited:.0f} ms of it waiting for data ({100 * waited / max(start, 1e-12):.0f} %)",
            fontsize=10, loc="left",
        )
        ax.set_ylim(len(waits) - 0.4, -0.6)  # step 1 at the top
        ticks = sorted({0, len(waits) - 1} | set(range(0, len(waits), 4)))
        ax.set_yticks(ticks)
        ax.set_yticklabels([str(t + 1) for t in ticks])
        ax.set_ylabel("step", fontsize=10)
        ax.grid(alpha=0.3, axis="x")
    axes[-1, 0].set_xlabel("time since the loop started (ms)", fontsize=10)
    axes[0, 0].legend(
        [Patch(color=WAIT), Patch(color=COMPUTE)], ["waiting for the batch", "computing the step"],
        loc="lower right", bbox_to_anchor=(1.0, 1.12), ncol=2, fontsize=9, frameon=False,
    )
    fig.suptitle(title, fontsize=11, x=0.02, ha="left")
    plt.close(fig)
    return fig


def _box(ax, x, y, w, h, text, colour, *, fontsize=9, text_colour="white"):
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                facecolor=colour, edgecolor="none"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
            color=text_colour)


def accumulation_timeline(k, micro_batch_size=None):
    """Gradient accumulation as a timeline: k forward/backward passes add into .grad, one step.

    Why a picture: the recipe is four lines of code, but what matters is *where* each line sits
    in time: ``zero_grad()`` once before the first micro-batch (not inside the loop), each
    micro-batch's loss divided by ``k`` and back-propagated at once (so its graph, with its
    activations, is freed before the next one), ``.grad`` filling up part by part, and one
    ``optimizer.step()`` at the end with the big batch's gradient. ``k`` is the number of
    micro-batches (1 to 8 drawn); ``micro_batch_size``, if given, is written in each box.
    Returns the figure, closed in pyplot.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 8:
        raise ValueError(f"k is a whole number of micro-batches from 1 to 8, not {k!r}")
    if micro_batch_size is not None and (isinstance(micro_batch_size, bool)
                                         or not isinstance(micro_batch_size, int)
                                         or micro_batch_size < 1):
        raise ValueError(f"micro_batch_size is a positive whole number, not {micro_batch_size!r}")

    columns = k + 2
    fig, ax = plt.subplots(figsize=(8, 3.9))
    grey, blue, green, orange = "#7f7f7f", "#1f77b4", "#2ca02c", "#ff7f0e"
    top, box_h, grad_y, grad_h = 2.0, 1.3, 0.35, 0.55
    size = "" if micro_batch_size is None else f"\n{micro_batch_size} examples"
    small = 9 if k <= 4 else 8 if k <= 6 else 7
    _box(ax, 0.07, top, 0.86, box_h, "zero_grad()\nonce,\nbefore the\nfirst", grey,
         fontsize=small)
    for i in range(1, k + 1):
        _box(ax, i + 0.07, top, 0.86, box_h,
             f"micro-batch\n{i} of {k}{size}\nforward\nloss / {k}\nbackward()", blue,
             fontsize=small)
        ax.annotate("", (i + 0.5, grad_y + grad_h + 0.05), xytext=(i + 0.5, top - 0.03),
                    arrowprops={"arrowstyle": "->", "color": blue, "lw": 1.5})
        ax.text(i + 0.55, (top + grad_y + grad_h) / 2, "+=", fontsize=10, color=blue,
                va="center", ha="left")
        # .grad after micro-batch i: i of the k parts of the big batch's gradient
        ax.add_patch(Rectangle((i + 0.1, grad_y), 0.8, grad_h, facecolor="white",
                               edgecolor=green))
        ax.add_patch(Rectangle((i + 0.1, grad_y), 0.8 * i / k, grad_h, facecolor=green,
                               alpha=0.6, edgecolor="none"))
        ax.text(i + 0.5, grad_y - 0.08, f"{i}/{k}", ha="center", va="top", fontsize=9,
                color=green)
    ax.text(0.5, grad_y + grad_h / 2, ".grad", ha="center", va="center", fontsize=10,
            color=green, fontweight="bold")
    ax.add_patch(Rectangle((0.1, grad_y), 0.8, grad_h, facecolor="white", edgecolor=green))
    ax.text(0.5, grad_y - 0.08, "0", ha="center", va="top", fontsize=9, color=green)
    _box(ax, k + 1.07, top, 0.86, box_h, "optimizer\n.step()\nonce, with\nthe whole\ngradient",
         orange, fontsize=small)
    ax.annotate("", (k + 1.5, top - 0.03), xytext=(k + 0.92, grad_y + grad_h / 2),
                arrowprops={"arrowstyle": "->", "color": orange, "lw": 1.5,
                            "connectionstyle": "angle,angleA=0,angleB=90"})
    ax.annotate("", (columns - 0.02, top + box_h + 0.25), xytext=(0.02, top + box_h + 0.25),
                arrowprops={"arrowstyle": "->", "color": grey, "lw": 1})
    ax.text(columns / 2, top + box_h + 0.32, "time: one optimizer step", ha="center",
            va="bottom", fontsize=9, color=grey)
    ax.text(columns / 2, -0.2,
            ".grad fills up part by part; each backward() frees its micro-batch's graph,\n"
            "so only one micro-batch's activations are ever in memory",
            ha="center", va="top", fontsize=9, color="#333333")
    ax.set_xlim(-0.05, columns + 0.05)
    ax.set_ylim(-0.75, top + box_h + 0.7)
    ax.set_axis_off()
    ax.set_title(f"gradient accumulation: {k} micro-batches add into .grad, then one step",
                 fontsize=11)
    fig.tight_layout()
    plt.close(fig)
    return fig
