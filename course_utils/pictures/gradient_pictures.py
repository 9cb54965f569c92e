"""Gradient norms layer by layer, several networks on one log axis (chapter 06, section D7).

A table of twelve gradient norms per network in scientific notation asks the reader to compare
exponents in their head; on a log axis a network whose gradients vanish is a line that falls
towards the input, and a healthy one is flat. ``course_utils.plots.plot_gradient_norms`` draws
one network's parameters as bars; this module puts several networks side by side as lines.
"""

from __future__ import annotations

import math

MARKERS = ("o", "s", "^", "D", "v", "P")
# Colour-blind friendly, the matplotlib defaults the rest of the course uses.
COLOURS = ("#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#7f7f7f", "#9467bd")


def _check_norms(norms_by_network: dict) -> dict[str, list[float]]:
    if not norms_by_network:
        raise ValueError("give at least one network: {name: [gradient norm per layer, ...]}")
    checked: dict[str, list[float]] = {}
    lengths = set()
    for name, norms in norms_by_network.items():
        values = [float(v) if v is not None else math.nan for v in norms]
        if not values:
            raise ValueError(f"{name!r} has no gradient norms")
        for index, value in enumerate(values, start=1):
            if not math.isfinite(value) or value <= 0:
                raise ValueError(
                    f"{name!r}, layer {index}: gradient norm {value!r} cannot be drawn on a log "
                    "axis; a zero, missing or non-finite gradient is a bug to look at first"
                )
        checked[str(name)] = values
        lengths.add(len(values))
    if len(lengths) > 1:
        raise ValueError(
            "every network needs one norm per layer, and the same number of layers: got "
            + ", ".join(f"{name!r}: {len(v)}" for name, v in checked.items())
        )
    return checked


def draw_layer_gradient_norms(norms_by_network: dict, *, title: str | None = None,
                              layer_name: str = "block"):
    """Per-layer gradient norms of several networks, one line each, on a log axis.

    Why this picture: vanishing gradients are a slope. The first layers of a plain sigmoid
    network get gradients a million times smaller than the last ones, which a line falling
    towards layer 1 shows at a glance, while a flat line (Kaiming init, residual + norm) says
    "one scale throughout". Each legend entry carries the first/last ratio the prose discusses.

    ``norms_by_network`` maps a network's name to its gradient norms, first layer (nearest the
    input) first, as the notebook measured them. Returns a Figure closed in pyplot.
    """
    from course_utils.plots import plot_curves

    checked = _check_norms(norms_by_network)
    labelled = {
        f"{name}  (first/last {values[0] / values[-1]:.0e})": values
        for name, values in checked.items()
    }
    fig = plot_curves(
        labelled,
        title=title
        or "gradient norm per block: a line that drops towards block 1 shows vanishing gradients",
        ylabel="gradient norm of the weight (log scale)",
        logy=True,
        xlabel=f"{layer_name} (1 = nearest the input)",
    )
    ax = fig.axes[0]
    for index, line in enumerate(ax.lines):
        line.set_color(COLOURS[index % len(COLOURS)])
        line.set_marker(MARKERS[index % len(MARKERS)])
        line.set_markersize(5)
        line.set_linewidth(1.6)
    count = len(next(iter(checked.values())))
    ax.set_xticks(range(1, count + 1))
    ax.set_xlim(0.5, count + 0.5)
    ax.title.set_fontsize(10)
    ax.xaxis.label.set_fontsize(10)
    ax.yaxis.label.set_fontsize(10)
    fig.set_size_inches(7.0, 4.0)
    ax.legend(fontsize=9, loc="lower right", framealpha=0.9)
    fig.tight_layout()
    return fig
