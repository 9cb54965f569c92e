"""The pictures of chapters 06 (gradient norms per layer) and 07 (resume curves, atomic save).

What a learner would notice: the lines show the numbers they were given, one per network or
run, on a log axis where promised; the resume is marked where it happened; the diagram has its
three steps and a whole checkpoint after every crash; each renders to a PNG that is not blank.
"""

import io

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from course_utils.pictures import checkpoint_pictures, gradient_pictures  # noqa: E402

NORMS = {
    "sigmoid, default init": [1e-9 * 4.0**i for i in range(12)],
    "relu, default init": [1e-5 * 2.0**i for i in range(12)],
    "relu, Kaiming init": [0.05 + 0.001 * i for i in range(12)],
    "sigmoid, residual + norm": [0.02 + 0.0005 * i for i in range(12)],
}
VAL = {
    "uninterrupted": [1.2, 0.6, 0.4, 0.3, 0.25, 0.22],
    "weights only": [1.2, 0.6, 0.4, 0.5, 0.3, 0.2],
    "full resume": [1.2, 0.6, 0.4, 0.3, 0.25, 0.22],
}


def assert_renders(fig):
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=60)
    pixels = np.asarray(PILImage.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    assert pixels.shape[0] > 50 and pixels.shape[1] > 50
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 2, "the picture came out blank"
    width, height = fig.get_size_inches()
    assert 6 <= width <= 8, f"figure width {width} in: the course's pictures are 6-8 inches wide"


def all_text(fig):
    return " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))


# --- chapter 06: gradient norms of several networks --------------------------------------------

def test_gradient_picture_draws_one_line_per_network_through_the_given_norms():
    fig = gradient_pictures.draw_layer_gradient_norms(NORMS)
    ax = fig.axes[0]
    assert len(ax.lines) == len(NORMS)
    for line, (name, norms) in zip(ax.lines, NORMS.items()):
        assert name in line.get_label()
        assert list(line.get_xdata()) == list(range(1, 13)), "layer 1 first, one point per layer"
        np.testing.assert_allclose(line.get_ydata(), norms)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(legend) == len(NORMS) and all(any(n in t for t in legend) for n in NORMS)
    assert_renders(fig)


def test_gradient_picture_is_on_a_log_axis_and_says_what_it_shows():
    fig = gradient_pictures.draw_layer_gradient_norms(NORMS)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log", "norms from 1e-9 to 1e-1 need a log axis"
    assert "log" in ax.get_ylabel() and "gradient norm" in ax.get_ylabel()
    assert "block" in ax.get_xlabel() and "input" in ax.get_xlabel()
    assert "vanishing" in ax.get_title()
    # the legend carries the first/last ratio the prose discusses: 4**-11 for the sigmoid
    assert "first/last 2e-07" in ax.lines[0].get_label()


def test_gradient_picture_lines_can_be_told_apart_without_colour():
    ax = gradient_pictures.draw_layer_gradient_norms(NORMS).axes[0]
    assert len({line.get_marker() for line in ax.lines}) == len(NORMS)
    assert len({line.get_color() for line in ax.lines}) == len(NORMS)


@pytest.mark.parametrize("bad, words", [
    ({}, "at least one network"),
    ({"a": [1.0, 0.0, 2.0]}, "layer 2"),
    ({"a": [1.0, float("nan")]}, "log"),
    ({"a": [1.0, None]}, "layer 2"),
    ({"a": [1.0, 2.0], "b": [1.0, 2.0, 3.0]}, "same number of layers"),
])
def test_gradient_picture_names_what_cannot_be_drawn(bad, words):
    with pytest.raises(ValueError, match=words):
        gradient_pictures.draw_layer_gradient_norms(bad)


def test_gradient_picture_accepts_the_numbers_as_given_and_does_not_change_them():
    norms = {"plain": [1e-6, 1e-3, 1.0]}
    before = {k: list(v) for k, v in norms.items()}
    gradient_pictures.draw_layer_gradient_norms(norms)
    assert norms == before


# --- chapter 07: resume curves -----------------------------------------------------------------

def test_resume_picture_draws_each_run_through_its_losses():
    fig = checkpoint_pictures.draw_resume_curves(VAL, 3)
    ax = fig.axes[0]
    runs = [line for line in ax.lines if line.get_gid() != "resume"]
    assert len(runs) == len(VAL)
    for line, (name, losses) in zip(runs, VAL.items()):
        assert line.get_label() == name
        assert list(line.get_xdata()) == list(range(1, 7))
        np.testing.assert_allclose(line.get_ydata(), losses)
    assert_renders(fig)


def test_resume_picture_marks_the_resume_after_the_saved_epoch():
    ax = checkpoint_pictures.draw_resume_curves(VAL, 3).axes[0]
    marks = [line for line in ax.lines if line.get_gid() == "resume"]
    assert len(marks) == 1
    xs = set(marks[0].get_xdata())
    assert xs == {3.5}, "between the epoch saved and the first epoch trained after the resume"
    assert "epoch 3" in marks[0].get_label() and "resume" in marks[0].get_label()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("resume" in t for t in legend)
    assert ax.get_xlabel() == "epoch" and "validation loss" in ax.get_ylabel()


def test_resume_picture_draws_the_uninterrupted_run_underneath_and_wider():
    ax = checkpoint_pictures.draw_resume_curves(VAL, 3).axes[0]
    reference, *resumed = [line for line in ax.lines if line.get_gid() != "resume"]
    # the full resume lies exactly on the uninterrupted run: both must stay visible
    assert all(reference.get_linewidth() > line.get_linewidth() for line in resumed)
    assert reference.get_zorder() < min(line.get_zorder() for line in resumed)
    assert resumed[0].get_linestyle() != resumed[1].get_linestyle()


@pytest.mark.parametrize("after", [0, 6, -1])
def test_resume_picture_refuses_a_resume_outside_the_run(after):
    with pytest.raises(ValueError, match="resumed_after"):
        checkpoint_pictures.draw_resume_curves(VAL, after)


def test_resume_picture_needs_a_run():
    with pytest.raises(ValueError, match="uninterrupted"):
        checkpoint_pictures.draw_resume_curves({}, 1)


# --- chapter 07: the atomic save ---------------------------------------------------------------

def test_atomic_save_diagram_has_three_steps_in_order_and_a_whole_checkpoint_after_each_crash():
    fig = checkpoint_pictures.draw_atomic_save()
    ax = fig.axes[0]
    steps = [p for p in ax.patches if p.get_gid() == "step"]
    crashes = [p for p in ax.patches if p.get_gid() == "crash"]
    assert len(steps) == 3 and len(crashes) == 3
    assert [p.get_x() for p in steps] == sorted(p.get_x() for p in steps)
    text = all_text(fig)
    order = [text.index(word) for word in ("torch.save(obj, tmp)", "os.fsync", "os.replace")]
    assert order == sorted(order), "write, then fsync, then replace"
    assert "same folder" in text
    assert text.count("the OLD one") == 2 and text.count("the NEW one") == 1
    assert "half a file" in text, "the unsafe plain save is shown for contrast"
    assert "atomic" in ax.get_title()
    assert_renders(fig)


def test_pictures_are_closed_in_pyplot():
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    gradient_pictures.draw_layer_gradient_norms(NORMS)
    checkpoint_pictures.draw_resume_curves(VAL, 3)
    checkpoint_pictures.draw_atomic_save()
    assert set(plt.get_fignums()) == before
