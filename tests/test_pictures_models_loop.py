"""Pictures of chapters 03 and 04: each shows what it was given, and renders to a real image."""

import io
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.patches import FancyBboxPatch, Rectangle  # noqa: E402
from PIL import Image  # noqa: E402

from course_utils.bench import Comparison, Timing  # noqa: E402
from course_utils.pictures import diagrams, softmax_pictures  # noqa: E402


def assert_renders(fig):
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=60)
    pixels = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("L"))
    assert pixels.std() > 5, "the picture came out as one flat colour"
    width, height = fig.get_size_inches()
    assert 6 <= width <= 8, f"figure width {width} in, the course uses 6 to 8"


def texts(fig):
    """Every text on the figure: titles, labels, annotations, tick labels."""
    found = [fig._suptitle.get_text()] if fig._suptitle else []
    for ax in fig.axes:
        found += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        found += [t.get_text() for t in ax.texts]
        found += [t.get_text() for t in ax.get_xticklabels()]
        legend = ax.get_legend()
        if legend:
            found += [t.get_text() for t in legend.get_texts()]
    return "\n".join(found)


def gids(fig):
    return [a.get_gid() for ax in fig.axes for a in ax.get_children() if a.get_gid()]


def is_closed_in_pyplot(fig):
    import matplotlib.pyplot as plt

    return fig.number not in plt.get_fignums() if hasattr(fig, "number") else True


# ---------------------------------------------------------------- 04: the training cycle
def test_training_cycle_has_six_steps_in_order_and_loops_back():
    fig = diagrams.training_cycle()
    steps = [g for g in gids(fig) if g.startswith("step:")]
    assert steps == ["step:batch", "step:forward", "step:loss", "step:clear gradients",
                     "step:backward", "step:step"]
    arrows = {g for g in gids(fig) if g.startswith("arrow:") and not g.endswith(":label")}
    assert arrows == {"arrow:1-2", "arrow:2-3", "arrow:3-4", "arrow:4-5", "arrow:5-6", "arrow:6-1"}
    words = texts(fig)
    for code in ["model(xb)", "loss_fn(pred, yb)", "optimizer.zero_grad()", "loss.backward()",
                 "optimizer.step()", "next batch", "p.grad"]:
        assert code in words
    assert "training step" in fig.axes[0].get_title()
    assert is_closed_in_pyplot(fig)
    assert_renders(fig)


def test_training_cycle_arrows_go_from_each_box_to_the_next():
    fig = diagrams.training_cycle()
    ax = fig.axes[0]
    boxes = {p.get_gid(): p for p in ax.patches if isinstance(p, FancyBboxPatch)}
    order = [b for b in boxes]
    centre = {g: (p.get_x() + p.get_width() / 2, p.get_y() + p.get_height() / 2) for g, p in boxes.items()}
    for patch in ax.patches:
        gid = patch.get_gid() or ""
        if not gid.startswith("arrow:"):
            continue
        a, b = (int(n) - 1 for n in gid.split(":")[1].split("-"))
        (x0, y0), (x1, y1) = patch._posA_posB
        start, end = centre[order[a]], centre[order[b]]
        # the arrow starts nearer its own box than the target, and ends nearer the target
        assert math.dist((x0, y0), start) < math.dist((x0, y0), end), gid
        assert math.dist((x1, y1), end) < math.dist((x1, y1), start), gid


# ---------------------------------------------------------------- 03: the skip block
def test_skip_block_draws_the_sizes_it_was_given_and_the_skip_path():
    fig = diagrams.skip_block(32, 64)
    words = texts(fig)
    assert "Linear(32→64)" in words and "Linear(64→32)" in words
    assert "skip" in words and "+" in words and "x + f(x)" in words
    found = gids(fig)
    for gid in ["box:input", "box:expand", "box:relu", "box:project", "plus", "skip", "arrow:skip"]:
        assert gid in found
    other = texts(diagrams.skip_block(8, 3))
    assert "Linear(8→3)" in other and "Linear(32→64)" not in other
    assert "skip" in fig.axes[0].get_title().lower()
    assert_renders(fig)


def test_skip_path_ends_at_the_plus():
    fig = diagrams.skip_block(16, 16)
    ax = fig.axes[0]
    plus = next(p for p in ax.patches if p.get_gid() == "plus")
    arrow = next(p for p in ax.patches if p.get_gid() == "arrow:skip")
    (_, _), (x1, y1) = arrow._posA_posB
    assert math.isclose(x1, plus.center[0]) and abs(y1 - plus.center[1]) <= plus.radius + 1e-9
    input_box = next(p for p in ax.patches if p.get_gid() == "box:input")
    skip_line = next(line for line in ax.lines if line.get_gid() == "skip")
    assert input_box.get_x() <= skip_line.get_xdata()[0] <= input_box.get_x() + input_box.get_width()


@pytest.mark.parametrize("width, hidden", [(0, 4), (4, -1), (2.5, 4), ("32", 4)])
def test_skip_block_refuses_sizes_that_are_not_feature_counts(width, hidden):
    with pytest.raises(ValueError, match="features"):
        diagrams.skip_block(width, hidden)


# ---------------------------------------------------------------- 04: start methods
@pytest.mark.parametrize("default", ["fork", "spawn", "forkserver"])
def test_start_methods_marks_the_default_and_only_fork_copies_the_class(default):
    fig = diagrams.start_methods(default)
    ax = fig.axes[0]
    titles = {t.get_gid(): t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("title:")}
    assert [k for k, v in titles.items() if "default" in v] == [f"title:{default}"]
    verdicts = {t.get_gid(): t.get_text() for t in ax.texts if (t.get_gid() or "").startswith("verdict:")}
    assert "loads" in verdicts["verdict:fork"]
    assert "exited unexpectedly" in verdicts["verdict:spawn"]
    assert "exited unexpectedly" in verdicts["verdict:forkserver"]
    words = texts(fig)
    assert "copy of memory" in words and "pickle the dataset" in words and ".py file" in words
    assert "server:forkserver" in gids(fig)
    assert_renders(fig)


def test_start_methods_without_a_default_marks_none_and_refuses_an_unknown_one():
    assert "default" not in texts(diagrams.start_methods())
    with pytest.raises(ValueError, match="forkserver"):
        diagrams.start_methods("thread")


# ---------------------------------------------------------------- 04: num_workers timings
def comparison(noisy=True):
    return Comparison({
        "num_workers=0": Timing("num_workers=0", 0.012, 0.001, 60, 8, 0.0114, 0.0124),
        "num_workers=2": Timing("num_workers=2", 0.090, 0.03 if noisy else 0.005, 8, 8,
                                0.080 if noisy else 0.087, 0.110 if noisy else 0.092),
    })


def test_timing_bars_show_the_medians_and_the_quartiles():
    fig = diagrams.timing_bars(comparison(), title="one epoch of loading", what="time per epoch")
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and (p.get_gid() or "").startswith("bar:")]
    assert [b.get_gid() for b in bars] == ["bar:num_workers=0", "bar:num_workers=2"]
    assert [b.get_height() for b in bars] == pytest.approx([12.0, 90.0])  # in ms
    assert "(ms)" in ax.get_ylabel() and "time per epoch" in ax.get_ylabel()
    segments = next(c for c in ax.collections if c.get_gid() == "iqr").get_segments()
    assert [(s[0][1], s[1][1]) for s in segments] == [pytest.approx((11.4, 12.4)), pytest.approx((80, 110))]
    assert ax.get_ylim()[1] > 110  # the top of the error bar is inside the axes
    assert "one epoch of loading" == ax.get_title()
    assert_renders(fig)


def test_timing_bars_mark_the_noisy_rows_only():
    fig = diagrams.timing_bars(comparison(noisy=True), title="t")
    ax = fig.axes[0]
    bars = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("bar:")}
    assert bars["bar:num_workers=2"].get_hatch() and not bars["bar:num_workers=0"].get_hatch()
    labels = [t.get_text() for t in ax.texts]
    assert sum("noisy" in label for label in labels) == 1 and "33%" in labels[1]
    steady = diagrams.timing_bars(comparison(noisy=False), title="t")
    assert "noisy" not in texts(steady)


def test_timing_bars_pick_a_readable_unit():
    slow = Comparison({"a": Timing("a", 2.0, 0.1, 3, 3), "b": Timing("b", 3.0, 0.1, 3, 3)})
    fig = diagrams.timing_bars(slow, title="t")
    assert "(s)" in fig.axes[0].get_ylabel()
    assert [p.get_height() for p in fig.axes[0].patches if (p.get_gid() or "").startswith("bar:")] == [2.0, 3.0]
    with pytest.raises(ValueError, match="at least one"):
        diagrams.timing_bars(Comparison({}), title="t")


# ---------------------------------------------------------------- 03: softmax twice
def test_softmax_bars_are_the_probabilities_given():
    logits = torch.zeros(10)
    logits[3] = 20.0
    once = logits.softmax(0)
    twice = once.softmax(0)
    fig = softmax_pictures.softmax_once_and_twice(once, twice, target=3)
    left, right = fig.axes
    for ax, expected in [(left, once), (right, twice)]:
        heights = [p.get_height() for p in ax.patches if (p.get_gid() or "").startswith("class:")]
        assert heights == pytest.approx(expected.tolist())
        colours = [p.get_facecolor() for p in ax.patches if (p.get_gid() or "").startswith("class:")]
        assert colours[3] != colours[0] and colours.count(colours[0]) == 9  # the right class stands out
    words = texts(fig)
    assert "1.46" in words  # -log(e / (e + 9)), the floor of the loss with softmax first
    assert "twice" in words and "once" in words and "probability" in words and "uniform 1/10" in words
    assert "-0.00" not in words
    assert_renders(fig)


def test_softmax_bars_refuse_logits_mismatched_classes_and_a_bad_target():
    once = torch.tensor([0.7, 0.2, 0.1])
    with pytest.raises(ValueError, match="logits"):
        softmax_pictures.softmax_once_and_twice(torch.tensor([2.0, 0.0, -1.0]), once, target=0)
    with pytest.raises(ValueError, match="classes"):
        softmax_pictures.softmax_once_and_twice(once, torch.tensor([0.5, 0.5]), target=0)
    with pytest.raises(ValueError, match="class index"):
        softmax_pictures.softmax_once_and_twice(once, once.softmax(0), target=3)
    with pytest.raises(ValueError, match="1-D|row"):
        softmax_pictures.softmax_once_and_twice(once.expand(2, 3), once, target=0)
