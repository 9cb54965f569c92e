"""What softmax does to one example's class probabilities, applied once and applied twice.

Chapter 03 warns against a softmax before ``CrossEntropyLoss``, which applies its own softmax
again. Numbers say the loss is stuck above 1.46; the bars show why: the second softmax squeezes
probabilities between 0 and 1 into an almost flat distribution.
"""

from __future__ import annotations

import math

BLUE, ORANGE, GREY = "#1f77b4", "#ff7f0e", "#7f7f7f"


def _as_list(values, label: str) -> list[float]:
    if hasattr(values, "detach"):
        if values.dim() != 1:
            raise ValueError(
                f"{label} must be one example's probabilities, one per class (a 1-D tensor), "
                f"not shape {tuple(values.shape)}: pick a row, e.g. probabilities[0]"
            )
        values = values.detach().cpu().tolist()
    values = [float(v) for v in values]
    if len(values) < 2:
        raise ValueError(f"{label} needs at least two classes, got {len(values)}")
    if any(not math.isfinite(v) or v < 0 for v in values) or abs(sum(values) - 1) > 1e-3:
        raise ValueError(
            f"{label} must be probabilities (non-negative, summing to 1; these sum to "
            f"{sum(values):.4g}): pass softmax outputs, not logits"
        )
    return values


def softmax_once_and_twice(once, twice, *, target: int):
    """Bars for one example's classes: softmax(logits) beside softmax(softmax(logits)).

    ``once`` and ``twice`` are the probabilities the notebook computed (1-D, one per class);
    ``target`` is the right class, drawn in orange with its probability and the loss
    ``-log p`` written on it. The dashed line is the uniform 1/C, which the twice-softmaxed
    bars hug.
    """
    import matplotlib.pyplot as plt

    once, twice = _as_list(once, "once"), _as_list(twice, "twice")
    if len(once) != len(twice):
        raise ValueError(f"once has {len(once)} classes and twice {len(twice)}: give the same example")
    classes = len(once)
    if not 0 <= target < classes:
        raise ValueError(f"target is a class index between 0 and {classes - 1}, not {target}")
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), sharey=True)
    panels = [
        (axes[0], once, "softmax once: what the loss should see"),
        (axes[1], twice, "softmax twice: softmax before the loss"),
    ]
    for ax, probabilities, heading in panels:
        colours = [ORANGE if c == target else BLUE for c in range(classes)]
        bars = ax.bar(range(classes), probabilities, color=colours)
        for c, bar in enumerate(bars):
            bar.set_gid(f"class:{c}")
        p = probabilities[target]
        loss = max(0.0, -math.log(p)) if p > 0 else math.inf
        ax.annotate(f"p = {p:.3f}\nloss −log p = {loss:.2f}", (target, p),
                    xytext=(0, 4), textcoords="offset points", ha="center", va="bottom",
                    fontsize=9, color="black")
        ax.axhline(1 / classes, color=GREY, linestyle="--", linewidth=1)
        ax.set_title(heading, fontsize=10)
        ax.set_xticks(range(classes))
        ax.set_xlabel("class (orange: the right one)")
        ax.set_ylim(0, 1.25)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("probability")
    axes[1].text(classes - 0.5, 1 / classes + 0.02, f"uniform 1/{classes}", ha="right",
                 va="bottom", fontsize=9, color=GREY)
    fig.suptitle("A second softmax flattens the probabilities: the right class cannot stand out",
                 fontsize=11)
    fig.tight_layout()
    plt.close(fig)
    return fig
