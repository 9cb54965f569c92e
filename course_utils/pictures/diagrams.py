"""Diagrams of models and training loops: the shapes a learner should see before the code.

Chapter 03 draws a skip block; chapter 04 draws the six-step training cycle, what a
``DataLoader`` worker starts with under each start method, and the ``num_workers`` timings the
notebook measured. Every function returns a matplotlib ``Figure`` already closed in pyplot;
the notebook shows it with ``course_utils.pictures.show``. Each box, arrow and bar carries a
``gid`` naming what it stands for, so tests can find it.
"""

from __future__ import annotations

BLUE, ORANGE, GREEN, RED, GREY = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#7f7f7f"
LIGHT = {BLUE: "#d6e6f4", ORANGE: "#ffe5cc", GREEN: "#d5efd5", RED: "#f7d4d4", GREY: "#ececec"}
FONT = 9

TRAINING_STEPS = (
    # (step, code, what it touches)
    ("batch", "xb, yb = next batch", "DataLoader → xb, yb"),
    ("forward", "pred = model(xb)", "reads parameters;\nrecords the graph"),
    ("loss", "loss = loss_fn(pred, yb)", "one number\nwith a grad_fn"),
    ("clear gradients", "optimizer.zero_grad()", "every p.grad → None"),
    ("backward", "loss.backward()", "fills every p.grad;\nfrees the graph"),
    ("step", "optimizer.step()", "moves every p:\nthe model changes"),
)


def _box(ax, x, y, w, h, lines, colour, gid, *, fontsizes=None, weight_first=True, mono=()):
    """A rounded box centred at (x, y) with one text per line; returns the patch."""
    from matplotlib.patches import FancyBboxPatch

    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
        facecolor=LIGHT.get(colour, "white"), edgecolor=colour, linewidth=1.5, gid=gid,
    )
    ax.add_patch(patch)
    n = len(lines)
    for i, line in enumerate(lines):
        size = (fontsizes or [FONT] * n)[i]
        dy = (n - 1) / 2 - i
        ax.text(
            x, y + dy * h / (n + 0.6), line, ha="center", va="center", fontsize=size,
            fontweight="bold" if (i == 0 and weight_first) else "normal",
            family="monospace" if i in mono else None,
        )
    return patch


def _arrow(ax, start, end, gid, colour="black", text=None, connection="arc3", text_offset=(0, 0)):
    from matplotlib.patches import FancyArrowPatch

    arrow = FancyArrowPatch(
        start, end, arrowstyle="-|>", mutation_scale=14, color=colour, linewidth=1.5,
        connectionstyle=connection, gid=gid, shrinkA=0, shrinkB=0,
    )
    ax.add_patch(arrow)
    if text:
        mx, my = (start[0] + end[0]) / 2 + text_offset[0], (start[1] + end[1]) / 2 + text_offset[1]
        ax.text(mx, my, text, ha="center", va="center", fontsize=FONT, color=colour,
                style="italic", gid=f"{gid}:label",
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none"})
    return arrow


def _blank_axes(figsize, xlim, ylim):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("auto")
    ax.axis("off")
    return fig, ax


def training_cycle():
    """The six steps of one training step as a loop, with what each step reads or changes.

    Why: chapter 04 lists the six steps as text, but the point a learner must keep is the
    *cycle*: the gradients are cleared between two ``backward()`` calls, and only ``step()``
    changes the model, after which the next batch starts the cycle again.
    """
    import matplotlib.pyplot as plt

    fig, ax = _blank_axes((8, 4.4), (0, 12), (0, 6.6))
    w, h = 3.3, 1.75
    centres = [(2, 4.6), (6, 4.6), (10, 4.6), (10, 1.4), (6, 1.4), (2, 1.4)]
    colours = [GREY, BLUE, BLUE, ORANGE, ORANGE, GREEN]
    for i, ((name, code, touches), (x, y), colour) in enumerate(zip(TRAINING_STEPS, centres, colours)):
        _box(ax, x, y, w, h, [f"{i + 1} {name}", code, *touches.split("\n")], colour,
             gid=f"step:{name}", fontsizes=[10, 9, 9, 9], mono=(1,))
    # 1 → 2 → 3 along the top, 3 ↓ 4, 4 → 5 → 6 along the bottom, 6 ↑ 1: the next batch
    for a, b in [(0, 1), (1, 2), (3, 4), (4, 5)]:
        (xa, ya), (xb, yb) = centres[a], centres[b]
        sign = 1 if xb > xa else -1
        _arrow(ax, (xa + sign * w / 2, ya), (xb - sign * w / 2, yb), gid=f"arrow:{a + 1}-{b + 1}")
    _arrow(ax, (10, 4.6 - h / 2), (10, 1.4 + h / 2), gid="arrow:3-4")
    _arrow(ax, (2, 1.4 + h / 2), (2, 4.6 - h / 2), gid="arrow:6-1", colour=GREEN,
           text="next batch", text_offset=(-1.15, 0))
    ax.text(6, 3.0, "only step 6 changes the model;\nzero_grad() once between two backward()",
            ha="center", va="center", fontsize=FONT, color=GREY)
    ax.set_title("One training step, six steps in order, repeated for every batch", fontsize=11)
    fig.tight_layout()
    plt.close(fig)
    return fig


def skip_block(width: int, hidden: int, *, names=("expand", "project")):
    """A block with a skip connection: the input goes through the layers AND around them to a +.

    Why: ``x + f(x)`` is one line of code, but the picture shows what it means — two paths from
    the same input meet at the ``+``, so the layers only have to learn a correction and the
    gradient has a short path back. ``width`` and ``hidden`` are the block's sizes, drawn on
    the layers, so the picture matches the module the notebook built.
    """
    import matplotlib.pyplot as plt

    for label, value in (("width", width), ("hidden", hidden)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{label} is a number of features, a positive int, not {value!r}")
    expand, project = names
    fig, ax = _blank_axes((8, 2.6), (0, 16), (0.6, 4.8))
    y, h = 1.6, 1.3
    parts = [
        (1.2, 2.2, ["input x", f"{width} features"], GREY, "box:input", ()),
        (4.2, 2.6, [expand, f"Linear({width}→{hidden})"], BLUE, "box:expand", (1,)),
        (6.8, 1.5, ["ReLU"], BLUE, "box:relu", ()),
        (9.4, 2.6, [project, f"Linear({hidden}→{width})"], BLUE, "box:project", (1,)),
        (14.6, 2.2, ["output", "x + f(x)", f"{width} features"], GREY, "box:output", (1,)),
    ]
    for x, w, lines, colour, gid, mono in parts:
        _box(ax, x, y, w, h, lines, colour, gid, mono=mono)
    for (xa, wa, *_), (xb, wb, *_) in zip(parts[:3], parts[1:4]):
        _arrow(ax, (xa + wa / 2, y), (xb - wb / 2, y), gid="arrow:layers")
    from matplotlib.patches import Circle

    plus_x = 12.0
    ax.add_patch(Circle((plus_x, y), 0.42, facecolor="white", edgecolor=ORANGE, linewidth=2, gid="plus"))
    ax.text(plus_x, y, "+", ha="center", va="center", fontsize=14, fontweight="bold", color=ORANGE)
    _arrow(ax, (9.4 + 1.3, y), (plus_x - 0.42, y), gid="arrow:f(x)", text="f(x)",
           text_offset=(0, 0.35))
    _arrow(ax, (plus_x + 0.42, y), (14.6 - 1.1, y), gid="arrow:output")
    # the skip path: from the input, over the layers, down into the +
    ax.plot([1.2, 1.2, plus_x, plus_x], [y + h / 2, 4.1, 4.1, 3.0], color=ORANGE, linewidth=2,
            gid="skip")
    _arrow(ax, (plus_x, 3.0), (plus_x, y + 0.42), gid="arrow:skip", colour=ORANGE)
    ax.text(6.6, 4.35, "skip path: x unchanged, added back at the +", ha="center", va="bottom",
            fontsize=FONT, color=ORANGE)
    ax.set_title("A skip block: forward(x) = x + project(relu(expand(x)))", fontsize=11)
    fig.tight_layout()
    plt.close(fig)
    return fig


START_METHODS = ("fork", "spawn", "forkserver")


def start_methods(default: str | None = None):
    """What a DataLoader worker starts with under fork, spawn and forkserver.

    Why: the notebook shows that a ``Dataset`` class defined in a cell works under fork and
    kills the worker under spawn and forkserver. The reason is what the worker starts from —
    a copy of the notebook's memory, or a fresh Python that must rebuild the dataset from a
    pickle by importing its class — and that is easier to see side by side than to read.
    ``default`` (``multiprocessing.get_start_method()`` in the notebook) is marked.
    """
    import matplotlib.pyplot as plt

    if default is not None and default not in START_METHODS:
        raise ValueError(f"default must be one of {START_METHODS}, not {default!r}")
    fig, ax = _blank_axes((8, 5.2), (0, 15), (0, 10))
    xs = {"fork": 2.5, "spawn": 7.5, "forkserver": 12.5}
    w = 4.4
    starts = {
        "fork": (["worker = a copy of", "the notebook's memory", "NotebookDigits: copied ✓"], GREEN),
        "spawn": (["worker = a fresh Python;", "unpickling the dataset finds", "NotebookDigits not found ✗"], RED),
        "forkserver": (["worker = a copy of a server", "that never ran the notebook:", "NotebookDigits not found ✗"], RED),
    }
    how = {"fork": "copy of memory", "spawn": "pickle the dataset", "forkserver": "pickle the dataset"}
    for method in START_METHODS:
        x = xs[method]
        title = method + ("  (your default)" if method == default else "")
        ax.text(x, 9.5, title, ha="center", va="center", fontsize=11, fontweight="bold",
                color=BLUE if method == default else "black", gid=f"title:{method}")
        _box(ax, x, 7.7, w, 1.7, ["notebook process", "__main__: NotebookDigits,", "x_train, model, ..."],
             GREY, gid=f"parent:{method}")
        lines, colour = starts[method]
        if method == "forkserver":
            _box(ax, x, 5.0, w, 1.1, ["fork server", "fresh Python, no notebook"], GREY,
                 gid="server:forkserver")
            _arrow(ax, (x, 7.7 - 0.85), (x, 5.0 + 0.55), gid="arrow:forkserver-pickle",
                   text=how[method], text_offset=(0, 0))
            _arrow(ax, (x, 5.0 - 0.55), (x, 3.0 + 0.85), gid="arrow:forkserver-fork",
                   text="fork", text_offset=(0.5, 0))
        else:
            _arrow(ax, (x, 7.7 - 0.85), (x, 3.0 + 0.85), gid=f"arrow:{method}",
                   text=how[method], text_offset=(0, 0))
        _box(ax, x, 3.0, w, 1.7, lines, colour, gid=f"worker:{method}", weight_first=False)
        verdict = "loads batches" if method == "fork" else "worker dies:\n\"exited unexpectedly\""
        ax.text(x, 1.4, verdict, ha="center", va="center", fontsize=FONT,
                color=GREEN if method == "fork" else RED, gid=f"verdict:{method}")
    ax.text(7.5, 0.35, "The fix for all three: define the Dataset class in a .py file and import it.", ha="center", va="center", fontsize=FONT)
    ax.set_title("What a DataLoader worker starts with, by start method", fontsize=11)
    fig.tight_layout()
    plt.close(fig)
    return fig


def _time_unit(seconds: float) -> tuple[str, float]:
    if seconds >= 1:
        return "s", 1.0
    if seconds >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def timing_bars(comparison, *, title: str, what: str = "time per call"):
    """The medians of a ``course_utils.bench.compare`` result as bars, the IQR as error bars.

    Why: ``compare`` prints a table; the bars let a learner see at a glance whether the two
    middle halves overlap (then the difference is noise) and which rows were too noisy to
    trust: those bars are hatched and labelled "noisy". Draws with ``plots.plot_bars`` and
    adds the error bars to it.
    """
    from course_utils.plots import plot_bars

    timings = getattr(comparison, "timings", comparison)
    if not timings:
        raise ValueError("timing_bars needs a compare() result with at least one timing")
    names = list(timings)
    largest = max(t.median for t in timings.values())
    unit, scale = _time_unit(largest)
    fig = plot_bars({n: timings[n].median * scale for n in names}, title=title,
                    ylabel=f"{what} ({unit}), median", fmt="{:.3g} " + unit)
    ax = fig.axes[0]
    medians = [timings[n].median * scale for n in names]
    lows = [max(0.0, timings[n].median - timings[n].q1) * scale for n in names]
    highs = [max(0.0, timings[n].q3 - timings[n].median) * scale for n in names]
    errors = ax.errorbar(range(len(names)), medians, yerr=[lows, highs], fmt="none", ecolor="black",
                         capsize=6, linewidth=1.5, label="interquartile range")
    errors.lines[2][0].set_gid("iqr")
    noisy_any = False
    for i, (name, bar) in enumerate(zip(names, ax.patches)):
        bar.set_gid(f"bar:{name}")
        if not timings[name].steady:
            noisy_any = True
            bar.set_hatch("//")
            bar.set_facecolor(LIGHT[ORANGE])
            bar.set_edgecolor(ORANGE)
    # plot_bars writes each value just above its bar: lift it above the error bar, and say noisy
    for i, (name, text) in enumerate(zip(names, [t for t in ax.texts])):
        text.xy = (i, timings[name].q3 * scale)
        if not timings[name].steady:
            # Too few measurements for quartiles: the spread is unknown, not a noisy figure.
            said = (f"noisy: spread {timings[name].spread:.0%}" if timings[name].spread_known
                    else f"spread unknown ({timings[name].measurements} runs)")
            text.set_text(text.get_text() + "\n" + said)
            text.set_color(ORANGE)
    ax.set_ylim(0, max(t.q3 for t in timings.values()) * scale * (1.35 if noisy_any else 1.2))
    ax.legend(loc="upper left", fontsize=FONT)
    return fig
