"""plot_bars: one bar per measurement, stacked parts, and bars this machine could not measure."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")  # before anything imports matplotlib

import pytest
import torch
from matplotlib.figure import Figure

from course_utils import plots


def _labels(fig):
    return [t.get_text() for t in fig.axes[0].texts]


def test_one_bar_per_name_labelled_with_its_value():
    fig = plots.plot_bars({"0 workers": 1.5, "2 workers": torch.tensor(0.75)}, title="epoch", ylabel="s")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert [p.get_height() for p in ax.patches] == [1.5, 0.75]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0 workers", "2 workers"]
    assert _labels(fig) == ["1.5", "0.75"]
    assert ax.get_title() == "epoch" and ax.get_ylabel() == "s"
    assert ax.get_legend() is None


def test_a_bar_that_could_not_be_measured_is_empty_and_says_so():
    fig = plots.plot_bars({"cpu": 2.0, "pin_memory": None}, title="t", ylabel="s", missing="needs a GPU")
    assert [p.get_height() for p in fig.axes[0].patches] == [2.0, 0.0]
    assert _labels(fig) == ["2", "needs a GPU"]


def test_parts_stack_into_one_bar_with_a_legend():
    bars = {
        "batch 16": {"parameters": 4.0, "activations": 1.0},
        "batch 64": {"parameters": 4.0, "activations": 4.0},
        "GPU only": None,
    }
    fig = plots.plot_bars(bars, title="memory", ylabel="MB", fmt="{:.1f} MB")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["parameters", "activations"]
    heights = [p.get_height() for p in ax.patches]
    assert heights == [4.0, 4.0, 0.0, 1.0, 4.0, 0.0]
    assert _labels(fig) == ["5.0 MB", "8.0 MB", "n/a"]


def test_the_figure_is_closed_so_a_notebook_shows_it_once():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    plots.plot_bars({"a": 1.0}, title="t", ylabel="y")
    assert plt.get_fignums() == before


def test_mixing_numbers_and_parts_or_nothing_is_refused():
    with pytest.raises(ValueError, match="dict of parts"):
        plots.plot_bars({"a": 1.0, "b": {"x": 1.0}}, title="t", ylabel="y")
    with pytest.raises(ValueError, match="at least one"):
        plots.plot_bars({}, title="t", ylabel="y")
