"""Chapter 05's pictures: float formats and loss scaling, loader timelines, gradient accumulation.

Each test checks what a learner would notice: the picture shows the numbers it was given (the
bits, the ranges, the gradients, each step's wait and compute), says what it shows, renders,
and refuses input it could only draw wrongly.
"""

import io
import os

os.environ.setdefault("MPLBACKEND", "Agg")  # before anything imports matplotlib

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle
from PIL import Image

from course_utils.pictures.float_formats import bit_layout, float_formats
from course_utils.pictures.timelines import accumulation_timeline, step_timeline

FORMATS = {
    "float32": torch.finfo(torch.float32),
    "float16": torch.finfo(torch.float16),
    "bfloat16": torch.finfo(torch.bfloat16),
}


def _not_blank(fig):
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=50)
    pixels = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    assert pixels.shape[0] > 50 and pixels.shape[1] > 50
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 10, "the PNG is (nearly) one colour"


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def _is_open(fig):
    return fig.number in plt.get_fignums()


# --- float formats -------------------------------------------------------------------------


def test_bit_layouts_come_from_finfo():
    assert bit_layout(FORMATS["float32"]) == (1, 8, 23)
    assert bit_layout(FORMATS["float16"]) == (1, 5, 10)
    assert bit_layout(FORMATS["bfloat16"]) == (1, 8, 7)


def test_the_bit_boxes_have_each_formats_field_widths():
    fig = float_formats(FORMATS)
    assert isinstance(fig, Figure) and not _is_open(fig)
    assert len(fig.axes) == 2, "without gradients: bits and ranges only"
    bits_ax = fig.axes[0]
    widths = [p.get_width() for p in bits_ax.patches if isinstance(p, Rectangle)]
    assert widths == [1, 8, 23, 1, 5, 10, 1, 8, 7]  # in the order the formats were given
    texts = " | ".join(_texts(bits_ax))
    for words in ("float32\n32 bits", "float16\n16 bits", "bfloat16\n16 bits", "mantissa 23",
                  "mantissa 10", "exponent 8"):
        assert words in texts
    assert "bfloat16" in bits_ax.get_title() and "exponent" in bits_ax.get_title()
    _not_blank(fig)


def test_the_ranges_run_from_finfo_tiny_to_max_on_a_log_axis():
    fig = float_formats(FORMATS)
    range_ax = fig.axes[1]
    assert range_ax.get_xscale() == "log"
    bars = range_ax.patches  # per format: the normal range, then the subnormals
    assert len(bars) == 2 * len(FORMATS)
    for (name, info), normal, subnormal in zip(FORMATS.items(), bars[::2], bars[1::2]):
        assert normal.get_x() == pytest.approx(info.tiny), name
        assert normal.get_x() + normal.get_width() == pytest.approx(info.max, rel=1e-6), name
        assert subnormal.get_x() == pytest.approx(info.tiny * info.eps), name
    assert "65504" in _texts(range_ax), "float16's largest number is written out"
    # float16 is drawn narrower than bfloat16 (the row is reversed: first format on top)
    labels = [t.get_text() for t in range_ax.get_yticklabels()]
    assert labels == ["bfloat16", "float16", "float32"]
    assert "magnitude" in range_ax.get_xlabel() and "log" in range_ax.get_xlabel()


def test_gradients_and_their_scaled_copy_sit_where_they_were_given():
    low, high, scale = 2e-6, 3e-3, 65536.0
    fig = float_formats(FORMATS, gradients=(low, high), scale=scale, gradient_label="gradients")
    assert len(fig.axes) == 3
    zoom = fig.axes[2]
    assert zoom.get_xscale() == "log"
    lines = [tuple(line.get_xdata()) for line in zoom.get_lines()]
    assert lines[0] == pytest.approx((low, high))
    assert lines[1] == pytest.approx((low * scale, high * scale))
    texts = _texts(zoom)
    assert "gradients" in texts and "gradients × 65536" in texts
    assert {"becomes 0", "becomes inf", "subnormal"} <= set(texts)
    assert "loss scaling" in zoom.get_title() and "float16" in zoom.get_title()
    assert "65504" in zoom.get_xlabel()
    left, right = zoom.get_xlim()
    assert left < low and right > max(high * scale, FORMATS["float16"].max), "all of it in view"
    _not_blank(fig)


def test_gradients_without_a_scale_draw_one_band():
    fig = float_formats(FORMATS, gradients=(1e-7, 1e-4))
    zoom = fig.axes[2]
    assert len(zoom.get_lines()) == 1
    assert "loss scaling" not in zoom.get_title()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gradients": (0.0, 1e-3)}, "0 < low"),
        ({"gradients": (1e-2, 1e-3)}, "low <= high"),
        ({"scale": 65536}, "scale needs gradients"),
        ({"gradients": (1e-6, 1e-3), "scale": 0.5}, "factor above 1"),
        ({"gradients": (1e-6, 1e-3), "zoom": "float8"}, "float8"),
    ],
)
def test_bad_gradients_or_scale_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        float_formats(FORMATS, **kwargs)


def test_a_format_must_be_a_finfo():
    with pytest.raises(ValueError, match="finfo"):
        float_formats({"float16": torch.float16})
    with pytest.raises(ValueError, match="at least one"):
        float_formats({})


# --- loader timelines ----------------------------------------------------------------------

BEFORE = ([0.10, 0.12, 0.11], [0.004, 0.005, 0.006])
AFTER = ([0.15, 0.002, 0.001], [0.004, 0.004, 0.005])


def _bars(ax):
    return [(p.get_x(), p.get_width()) for p in ax.patches]


def test_each_step_is_its_wait_then_its_compute_one_after_the_other():
    fig = step_timeline({"baseline": BEFORE, "all together": AFTER})
    assert isinstance(fig, Figure) and not _is_open(fig)
    assert len(fig.axes) == 2
    for ax, (waits, computes) in zip(fig.axes, (BEFORE, AFTER)):
        bars = _bars(ax)
        assert len(bars) == 2 * len(waits)
        start = 0.0
        for step, (wait, compute) in enumerate(zip(waits, computes)):
            (wait_x, wait_w), (compute_x, compute_w) = bars[2 * step], bars[2 * step + 1]
            assert wait_x == pytest.approx(1000 * start)
            assert wait_w == pytest.approx(1000 * wait)
            assert compute_x == pytest.approx(1000 * (start + wait))
            assert compute_w == pytest.approx(1000 * compute)
            start += wait + compute
        colours = {tuple(p.get_facecolor()) for p in ax.patches[::2]}
        assert len(colours) == 1 and colours != {tuple(p.get_facecolor()) for p in ax.patches[1::2]}
    _not_blank(fig)


def test_the_panels_share_a_time_axis_and_name_their_totals():
    fig = step_timeline({"baseline": BEFORE, "all together": AFTER}, title="the loader, fixed")
    first, second = fig.axes
    assert first.get_xlim() == second.get_xlim(), "a shorter run must look shorter"
    assert first.get_title(loc="left").startswith("baseline: 3 steps in 345 ms, 330 ms of it waiting")
    assert second.get_title(loc="left").startswith("all together: 3 steps in 166 ms, 153 ms")
    assert "ms" in second.get_xlabel()
    assert fig._suptitle.get_text() == "the loader, fixed"
    legend = first.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["waiting for the batch", "computing the step"]


@pytest.mark.parametrize(
    "runs, message",
    [
        ({"a": ([0.1, 0.2], [0.01])}, "2 waits but 1 compute"),
        ({"a": ([], [])}, "no steps"),
        ({"a": ([0.1, -0.2], [0.01, 0.01])}, "not negative"),
        ({"a": ([0.1, float("nan")], [0.01, 0.01])}, "finite"),
        ({}, "at least one run"),
    ],
)
def test_times_that_cannot_be_a_timeline_are_refused(runs, message):
    with pytest.raises(ValueError, match=message):
        step_timeline(runs)


# --- gradient accumulation -----------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 4, 8])
def test_k_micro_batches_then_one_step(k):
    fig = accumulation_timeline(k, micro_batch_size=64)
    assert isinstance(fig, Figure) and not _is_open(fig)
    ax = fig.axes[0]
    texts = _texts(ax)
    micro = [t for t in texts if t.startswith("micro-batch")]
    assert micro == [f"micro-batch\n{i} of {k}\n64 examples\nforward\nloss / {k}\nbackward()"
                     for i in range(1, k + 1)]
    assert sum("step()" in t for t in texts) == 1, "one optimizer step"
    assert sum("zero_grad()" in t for t in texts) == 1, "zero_grad once, not per micro-batch"
    assert texts.count("+=") == k
    assert [t for t in texts if "/" in t and len(t) <= 3] == [f"{i}/{k}" for i in range(1, k + 1)]
    assert f"{k} micro-batches" in ax.get_title() and "one step" in ax.get_title()
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    assert len(boxes) == k + 2  # zero_grad, k micro-batches, step
    _not_blank(fig)


def test_grad_fills_up_part_by_part():
    k = 4
    ax = accumulation_timeline(k).axes[0]
    fills = [p.get_width() for p in ax.patches
             if type(p) is Rectangle and p.get_facecolor()[3] < 1]  # the translucent fills
    assert fills == pytest.approx([0.8 * i / k for i in range(1, k + 1)])
    assert not any("examples" in t for t in _texts(ax)), "no size given, none written"


@pytest.mark.parametrize("k", [0, 9, 2.5, True, "4"])
def test_k_must_be_a_small_whole_number(k):
    with pytest.raises(ValueError, match="micro-batches"):
        accumulation_timeline(k)


def test_micro_batch_size_must_be_positive():
    with pytest.raises(ValueError, match="micro_batch_size"):
        accumulation_timeline(4, micro_batch_size=0)
