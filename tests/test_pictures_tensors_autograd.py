"""The pictures of chapters 01 (tensors) and 02 (autograd): each shows the data it was given."""

import io
import math

import matplotlib
import numpy as np
import pytest
import torch
from PIL import Image

matplotlib.use("Agg")

from course_utils.pictures.autograd_pictures import (  # noqa: E402
    draw_recording_memory,
    draw_uncleared_gradients,
)
from course_utils.pictures.memory_layout import draw_residual_matrix, draw_strides  # noqa: E402
from course_utils.widgets import draw_broadcast  # noqa: E402


def png_pixels(fig) -> np.ndarray:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=60)
    buffer.seek(0)
    return np.asarray(Image.open(buffer).convert("RGB"))


def assert_not_blank(fig):
    pixels = png_pixels(fig)
    assert pixels.size and pixels.reshape(-1, 3).std(axis=0).max() > 5, "the PNG is one flat colour"
    colours = {tuple(p) for p in pixels.reshape(-1, 3)[::7]}
    assert len(colours) > 10, "the PNG has almost no drawing on it"


def all_texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text)]


def by_gid(fig, gid):
    return [a for a in fig.findobj() if getattr(a, "get_gid", lambda: None)() == gid]


def is_open_in_pyplot(fig) -> bool:
    import matplotlib.pyplot as plt

    return fig.number in plt.get_fignums() if hasattr(fig, "number") else False


# --- draw_strides ----------------------------------------------------------------------------


@pytest.fixture
def x():
    return torch.arange(6).reshape(2, 3)


def text_of(fig, gid):
    (artist,) = by_gid(fig, gid)
    return artist.get_text()


def test_strides_storage_row_holds_the_numbers_in_memory_order(x):
    fig = draw_strides({"x": x, "x.T": x.T})
    storage = [text_of(fig, f"storage-{k}-text") for k in range(6)]
    assert storage == ["0", "1", "2", "3", "4", "5"]
    assert not by_gid(fig, "storage-6"), "a storage of six numbers has six cells"
    assert not is_open_in_pyplot(fig)


def test_strides_storage_follows_memory_not_the_tensor_it_was_given():
    x = torch.tensor([[10, 20, 30], [40, 50, 60]])
    fig = draw_strides({"x.T": x.T})  # drawn from x.T alone: memory order is still x's
    assert [text_of(fig, f"storage-{k}-text") for k in range(6)] == ["10", "20", "30", "40", "50", "60"]


def test_strides_each_element_names_the_storage_cell_it_reads(x):
    fig = draw_strides({"x": x, "x.T": x.T})
    xt_reads = [[text_of(fig, f"x.T-{i}-{j}-reads") for j in range(2)] for i in range(3)]
    assert xt_reads == [["@0", "@3"], ["@1", "@4"], ["@2", "@5"]]
    xt_values = [[text_of(fig, f"x.T-{i}-{j}-value") for j in range(2)] for i in range(3)]
    assert xt_values == [["0", "3"], ["1", "4"], ["2", "5"]]
    x_reads = [text_of(fig, f"x-{i}-{j}-reads") for i in range(2) for j in range(3)]
    assert x_reads == ["@0", "@1", "@2", "@3", "@4", "@5"]


def test_strides_titles_give_shape_and_strides(x):
    fig = draw_strides({"x": x, "x.T": x.T})
    assert text_of(fig, "title-x") == "x: shape (2, 3), strides (3, 1)"
    assert text_of(fig, "title-x.T") == "x.T: shape (3, 2), strides (1, 3)"


def test_strides_reading_order_shows_why_view_fails(x):
    fig = draw_strides({"x": x, "x.T": x.T})
    xt_order = [text_of(fig, f"order-x.T-{p}-text") for p in range(6)]
    assert xt_order == ["0", "3", "1", "4", "2", "5"]
    x_order = [text_of(fig, f"order-x-{p}-text") for p in range(6)]
    assert x_order == ["0", "1", "2", "3", "4", "5"]
    assert "works" in text_of(fig, "verdict-x")
    assert "fails" in text_of(fig, "verdict-x.T")
    texts = all_texts(fig)
    assert texts.count("-2") == 2 and texts.count("+3") == 3, "x.T's jumps: +3 -2 +3 -2 +3"


def test_strides_a_sliced_view_reads_from_its_offset():
    x = torch.arange(8).reshape(2, 4)
    part = x[:, 1:3]  # offset 1, strides (4, 1): not contiguous, and view(-1) fails on it
    fig = draw_strides({"x": x, "part": part})
    assert [text_of(fig, f"part-0-{j}-reads") for j in range(2)] == ["@1", "@2"]
    assert [text_of(fig, f"order-part-{p}-text") for p in range(4)] == ["1", "2", "5", "6"]
    assert "fails" in text_of(fig, "verdict-part")


def test_strides_renders(x):
    assert_not_blank(draw_strides({"x": x, "x.T": x.T}))


@pytest.mark.parametrize(
    "views, message",
    [
        ({}, "at least one"),
        ({"v": torch.arange(6)}, "2-D"),
        ({"x": torch.arange(6).reshape(2, 3), "y": torch.arange(6).reshape(2, 3)}, "share one storage"),
        ({"big": torch.arange(100).reshape(10, 10)}, "too long"),
        ({"m": torch.ones(2, 3, device="meta")}, "meta"),
    ],
)
def test_strides_bad_input_is_named(views, message):
    with pytest.raises(ValueError, match=message):
        draw_strides(views)


# --- draw_residual_matrix --------------------------------------------------------------------


@pytest.fixture
def bug():
    torch.manual_seed(0)
    pred, target = torch.rand(5, 1), torch.rand(5)
    return pred, target


def test_residual_matrix_shows_the_pairs_it_was_given(bug):
    pred, target = bug
    pairs = pred - target
    fig = draw_residual_matrix(pairs, right=pred.squeeze(1) - target)
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.images[0].get_array(), pairs.numpy(), rtol=1e-6)
    cell_texts = [t.get_text() for t in ax.texts]
    assert len(cell_texts) == 25
    assert f"{pairs[2, 0].item():+.2f}" in cell_texts
    assert len([a for a in ax.patches if (a.get_gid() or "").startswith("diagonal-")]) == 5
    title = ax.get_title()
    assert "(5, 5)" in title and "diagonal" in title and "20" in title
    assert "target" in ax.get_xlabel() and "pred" in ax.get_ylabel()
    assert not is_open_in_pyplot(fig)


def test_residual_matrix_colour_scale_is_symmetric(bug):
    pred, target = bug
    pairs = pred - target
    image = draw_residual_matrix(pairs).axes[0].images[0]
    low, high = image.get_clim()
    assert low == pytest.approx(-high) and high == pytest.approx(pairs.abs().max().item())


def test_residual_matrix_renders(bug):
    pred, target = bug
    assert_not_blank(draw_residual_matrix(pred - target))


@pytest.mark.parametrize("bad", [torch.zeros(5), torch.zeros(5, 4), torch.zeros(0, 0)])
def test_residual_matrix_wants_a_square_matrix(bad):
    with pytest.raises(ValueError, match=r"\(N, N\)"):
        draw_residual_matrix(bad)


def test_residual_matrix_refuses_right_residuals_that_are_not_the_diagonal(bug):
    pred, target = bug
    with pytest.raises(ValueError, match="diagonal"):
        draw_residual_matrix(pred - target, right=(pred - target)[0])


# --- the static broadcasting pictures of chapter 01 -------------------------------------------


def test_broadcast_pictures_of_the_chapter_name_the_result():
    outer = draw_broadcast((3, 1), (4,))
    assert "(3, 4)" in outer.axes[0].get_title()
    assert_not_blank(outer)
    bug = draw_broadcast((5, 1), (5,))
    assert "(5, 5)" in bug.axes[0].get_title()


# --- draw_uncleared_gradients ----------------------------------------------------------------


def descend(clear, steps=12, lr=0.1):
    w, grad, losses, ws = 0.0, 0.0, [], []
    for _ in range(steps):
        grad = (0.0 if clear else grad) + 2 * (w - 3)
        losses.append((w - 3) ** 2)
        ws.append(w)
        w -= lr * grad
    return losses, ws


def test_uncleared_gradients_plots_the_four_series_it_was_given():
    (cl, cw), (al, aw) = descend(True), descend(False)
    fig = draw_uncleared_gradients(cl, al, cw, aw, target=3)
    loss_ax, w_ax = fig.axes
    assert [list(line.get_ydata()) for line in loss_ax.get_lines()] == [cl, al]
    w_lines = [line for line in w_ax.get_lines() if line.get_gid() != "target"]
    assert [list(line.get_ydata()) for line in w_lines] == [cw, aw]
    assert list(loss_ax.get_lines()[0].get_xdata()) == list(range(12))
    assert loss_ax.get_yscale() == "log", "the loss spans orders of magnitude: a log axis"
    (target,) = by_gid(fig, "target")
    assert set(target.get_ydata()) == {3.0}
    labels = all_texts(fig)
    assert "cleared every step" in labels and "never cleared" in labels
    assert "step" in loss_ax.get_xlabel() and "loss" in loss_ax.get_ylabel()
    assert "w" in w_ax.get_ylabel()
    assert not is_open_in_pyplot(fig)


def test_uncleared_gradients_without_target_draws_no_target_line():
    (cl, cw), (al, aw) = descend(True), descend(False)
    assert not by_gid(draw_uncleared_gradients(cl, al, cw, aw), "target")


def test_uncleared_gradients_renders():
    (cl, cw), (al, aw) = descend(True), descend(False)
    assert_not_blank(draw_uncleared_gradients(cl, al, cw, aw, target=3))


def test_uncleared_gradients_wants_one_value_per_step_in_every_series():
    (cl, cw), (al, aw) = descend(True), descend(False)
    with pytest.raises(ValueError, match="lengths differ"):
        draw_uncleared_gradients(cl, al[:-1], cw, aw)
    with pytest.raises(ValueError, match="empty"):
        draw_uncleared_gradients([], [], [], [])


# --- draw_recording_memory -------------------------------------------------------------------


def bar_heights(fig, gid):
    return [p.get_height() for p in fig.axes[0].patches if p.get_gid() == gid] or [
        p.get_height() for c in fig.axes[0].containers if c.get_gid() == gid for p in c
    ]


def test_recording_memory_bars_equal_the_measurements():
    saved = {"with grad": 3 * 1024**2, "no_grad": 0, "inference_mode": 0}
    peaks = {"with grad": 4 * 1024**2, "no_grad": 2 * 1024**2, "inference_mode": 1.5 * 1024**2}
    fig = draw_recording_memory(saved, peaks)
    ax = fig.axes[0]
    assert bar_heights(fig, "saved") == [3.0, 0.0, 0.0]
    assert bar_heights(fig, "peak") == [4.0, 2.0, 1.5]
    assert [t.get_text() for t in ax.get_xticklabels()] == list(saved)
    assert "MB" in ax.get_ylabel()
    labels = all_texts(fig)
    assert "3 MB" in labels and "1.5 MB" in labels
    assert not is_open_in_pyplot(fig)


def test_recording_memory_takes_bench_results_and_picks_the_unit():
    from course_utils.bench import MemoryPeak, SavedTensors

    saved = {"with grad": SavedTensors(count=2, bytes=6 * 1024), "no_grad": SavedTensors(0, 0)}
    peaks = {"with grad": MemoryPeak(8 * 1024, "test"), "no_grad": MemoryPeak(None, "no stats")}
    fig = draw_recording_memory(saved, peaks)
    assert "KB" in fig.axes[0].get_ylabel()
    assert bar_heights(fig, "saved") == [6.0, 0.0]
    assert bar_heights(fig, "peak") == [8.0, 0.0]
    assert "not measurable here" in all_texts(fig), "a peak that could not be measured says so"
    assert_not_blank(fig)


@pytest.mark.parametrize(
    "saved, peaks, message",
    [
        ({}, {}, "at least one"),
        ({"with grad": 1}, {"no_grad": 1}, "same ways"),
        ({"with grad": -1}, {"with grad": 1}, ">= 0"),
        ({"with grad": math.nan}, {"with grad": 1}, ">= 0"),
        ({"with grad": None}, {"with grad": 1}, "always measures"),
    ],
)
def test_recording_memory_bad_input_is_named(saved, peaks, message):
    with pytest.raises(ValueError, match=message):
        draw_recording_memory(saved, peaks)


def test_a_broadcast_picture_names_the_learners_own_operation():
    texts = lambda fig: [t.get_text() for t in fig.axes[0].texts] + [fig.axes[0].get_title()]  # noqa: E731
    bug = draw_broadcast((5, 1), (5,), names=("pred", "target"), op="-")
    assert "pred - target (5, 5)" in texts(bug) and "pred (5, 1)" in texts(bug)
    assert bug.axes[0].get_title() == "pred - target has shape (5, 5)"
    assert not any("a + b" in text for text in texts(bug))
