"""plot_gradient_norms: one bar per parameter on a log axis; what cannot be drawn is named."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")  # before anything imports matplotlib

import math

import pytest
import torch
from matplotlib.figure import Figure
from torch import nn

from course_utils.diagnose import gradient_norms
from course_utils.plots import plot_gradient_norms


def not_drawable(fig) -> list[str]:
    return [t.get_text().strip() for t in fig.axes[0].texts if t.get_gid() == "not-drawable"]


def test_bars_on_a_log_axis_and_the_rest_named_in_their_place():
    fig = plot_gradient_norms(
        ["a.weight", "a.bias", "b.weight", "b.bias", "c.weight"],
        [1e-6, None, 0.0, float("nan"), torch.tensor(3.0)],
        title="norms",
    )
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_title() == "norms"
    widths = sorted(bar.get_width() for bar in ax.patches)
    assert widths == [pytest.approx(1e-6), pytest.approx(3.0)]
    assert not_drawable(fig) == ["no grad", "zero", "nan"]
    assert [label.get_text() for label in ax.get_yticklabels()][:2] == ["a.weight", "a.bias"]


def test_names_and_norms_must_pair_up():
    with pytest.raises(ValueError, match="2 names but 1 norms"):
        plot_gradient_norms(["a", "b"], [1.0])


def test_gradient_norms_plot_draws_the_models_parameters():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    model[0].bias.requires_grad_(False)
    model(torch.randn(5, 3)).sum().backward()
    fig = gradient_norms(model).plot()
    assert len(fig.axes[0].patches) == 3
    assert not_drawable(fig) == ["no grad"]
    assert "Sequential" in fig.axes[0].get_title()
    assert all(math.isfinite(bar.get_width()) for bar in fig.axes[0].patches)
