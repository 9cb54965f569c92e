"""Loss plots, sweeps and progress bars: quiet until the end headless, updated in place live."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")  # before anything imports matplotlib

import math
import subprocess
import sys

import IPython.display
import nbclient
from front_end import execute_as_front_end
import pytest
import torch
from matplotlib.figure import Figure
from nbformat.v4 import new_code_cell, new_notebook

from course_utils import plots
from course_utils.widgets import STATIC_ENV

VAL = [0.9, 0.5, 0.4, 0.45, float("nan")]


@pytest.fixture(autouse=True)
def _no_static_override(monkeypatch):
    monkeypatch.delenv(STATIC_ENV, raising=False)


def train_five_epochs(plot):
    for epoch in range(5):
        plot.update(epoch, train=torch.tensor(1.0 / (epoch + 1)), val=VAL[epoch])


def best_marker(fig):
    return [c for c in fig.axes[0].collections if c.get_gid() == "best"]


def test_headless_the_plot_keeps_the_history_and_draws_only_when_finished(capsys):
    plot = plots.LiveLossPlot()
    train_five_epochs(plot)
    assert capsys.readouterr().out == ""
    assert plot.history["train"] == [(e, pytest.approx(1.0 / (e + 1))) for e in range(5)]
    assert plot.history["val"][:4] == [(0, 0.9), (1, 0.5), (2, 0.4), (3, 0.45)]
    assert all(isinstance(v, float) for _, v in plot.history["train"])

    fig = plot.finish()
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["train", "val (diverged: not finite)"]
    (marker,) = best_marker(fig)
    assert marker.get_offsets().tolist() == [[2, 0.4]]  # the nan at epoch 4 is not the best
    out = capsys.readouterr().out
    assert out == "loss: 5 epochs; last train 0.2, val nan; best val 0.4 at epoch 2\n"
    assert plot.finish() is fig
    assert capsys.readouterr().out == ""


def test_a_loss_that_is_not_one_number_is_named():
    plot = plots.LiveLossPlot()
    with pytest.raises(ValueError, match=r"shape \(3,\).*loss.mean\(\)"):
        plot.update(0, train=torch.ones(3))


def test_the_context_manager_finishes_and_a_finished_plot_takes_no_more(capsys):
    with plots.LiveLossPlot(title="run a") as plot:
        plot.update(1, train=1.0)
    assert isinstance(plot.figure, Figure)
    assert capsys.readouterr().out == "run a: 1 epochs; last train 1\n"
    with pytest.raises(RuntimeError, match="finished"):
        plot.update(2, train=0.5)


class FakeHandle:
    def __init__(self, log):
        self.log = log

    def update(self, obj):
        self.log.append(("update", obj))


@pytest.fixture
def live(monkeypatch):
    """A pretend live kernel: _live is True and displays are recorded, not sent."""
    log = []

    def display(obj, display_id=None, **kwargs):
        log.append(("display", obj))
        return FakeHandle(log) if display_id else None

    monkeypatch.setattr(plots, "_live", lambda: True)
    monkeypatch.setattr(IPython.display, "display", display)
    return log


def test_live_the_plot_is_displayed_once_then_updated_in_place(live, capsys):
    plot = plots.LiveLossPlot()
    train_five_epochs(plot)
    assert [kind for kind, _ in live] == ["display"] + ["update"] * 4
    assert all(isinstance(obj, IPython.display.Image) for _, obj in live)

    fig = plot.finish()
    assert [kind for kind, _ in live] == ["display"] + ["update"] * 5
    assert best_marker(fig)
    assert capsys.readouterr().out == ""
    # Shown already: as a cell's value the figure shows nothing more.
    assert fig._ipython_display_() is None


def test_live_every_n_updates_redraws_less_often(live):
    plot = plots.LiveLossPlot(every=2)
    train_five_epochs(plot)  # updates 1, 3 and 5 redraw
    assert [kind for kind, _ in live] == ["display", "update", "update"]
    plot.finish()
    assert len(live) == 4


def test_in_a_static_kernel_finish_shows_the_figure_once(monkeypatch, capsys):
    shown = []
    monkeypatch.setattr(plots, "_live", lambda: False)
    monkeypatch.setattr(plots, "_in_kernel", lambda: True)
    monkeypatch.setattr(plots, "_display_figure", shown.append)
    plot = plots.LiveLossPlot()
    train_five_epochs(plot)
    assert shown == []
    fig = plot.finish()
    assert shown == [fig]
    assert capsys.readouterr().out == ""


def test_plot_curves_compares_runs_from_lists_or_pairs():
    history = {"lr 0.1": [1.0, 0.5, 0.3], "lr 1": [(1, 1.0), (2, float("inf"))]}
    fig = plots.plot_curves(history, title="two runs", logy=True)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["lr 0.1", "lr 1 (diverged: not finite)"]
    assert ax.lines[0].get_xdata().tolist() == [1, 2, 3]
    assert ax.get_yscale() == "log"
    assert ax.get_title() == "two runs"


def test_plot_sweep_stars_the_best_and_keeps_diverged_runs():
    rates = [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    fig = plots.plot_sweep(rates, [0.9, 0.4, 0.2, 0.5, float("nan")])
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    (marker,) = best_marker(fig)
    assert marker.get_offsets().tolist() == [[1e-2, 0.2]]
    (diverged,) = [line for line in ax.lines if line.get_gid() == "diverged"]
    assert diverged.get_xdata().tolist() == [1.0]
    assert "diverged" in diverged.get_label()


def test_plot_sweep_when_every_run_diverged():
    fig = plots.plot_sweep([0.1, 1.0], [float("nan"), torch.tensor(math.inf)])
    assert not best_marker(fig)


def test_plot_sweep_refuses_mismatched_or_non_positive_input():
    with pytest.raises(ValueError, match="2 swept values but 1 results"):
        plots.plot_sweep([0.1, 1.0], [0.5])
    with pytest.raises(ValueError, match="logx=False"):
        plots.plot_sweep([0.0, 1.0], [0.5, 0.4])


def test_headless_progress_yields_everything_and_prints_one_line(capsys):
    assert list(plots.progress(range(50), desc="batches")) == list(range(50))
    out = capsys.readouterr().out
    assert out.startswith("batches: 50/50 done in ") and out.endswith(" s\n")
    assert out.count("\n") == 1


def test_headless_progress_without_a_length_and_stopped_early(capsys):
    assert list(plots.progress(x for x in "abc")) == ["a", "b", "c"]
    assert capsys.readouterr().out.startswith("3 done in ")
    for item in plots.progress(range(10), desc="d"):
        if item == 3:
            break
    # Items 0 to 3 were handed out: the loop stopped at the 4th of 10.
    assert capsys.readouterr().out.startswith("d: stopped at 4/10 after ")


def test_live_progress_is_one_widget_updated_in_place(live, capsys):
    import ipywidgets

    assert list(plots.progress(range(20), desc="steps")) == list(range(20))
    ((kind, box),) = live
    bar, label = box.children
    assert isinstance(bar, ipywidgets.IntProgress)
    assert (bar.value, bar.max, bar.bar_style) == (20, 20, "success")
    assert label.value.startswith("steps: 20/20 done in ")
    assert capsys.readouterr().out == ""


def test_live_progress_without_a_length_fills_the_bar_at_the_end(live):
    list(plots.progress(iter(range(7))))
    bar, label = live[0][1].children
    assert (bar.value, bar.max) == (7, 7)
    assert label.value.startswith("7 done in ")


def test_importing_plots_does_not_pull_in_plotting_or_widgets():
    code = (
        "import sys, course_utils, course_utils.plots\n"
        "print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


class RecordingClient(nbclient.NotebookClient):
    """Keeps each cell's output message types: nbclient applies display updates in place."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.messages: dict[int, list[str]] = {}

    def process_message(self, msg, cell, cell_index):
        kind = msg["header"]["msg_type"]
        if kind in {"display_data", "update_display_data", "execute_result", "stream"}:
            self.messages.setdefault(cell_index, []).append(kind)
        return super().process_message(msg, cell, cell_index)


@pytest.mark.parametrize("run", ["front end", "headless", "static setting"])
def test_the_helpers_run_in_a_real_kernel(run, tmp_path, monkeypatch):
    """Live where JupyterLab sends the cells; one static display when nbclient runs them
    headless (nbgrader, the grader, nbconvert) or COURSE_STATIC_WIDGETS=1 says so."""
    monkeypatch.setenv("MPLBACKEND", "Agg")  # the kernel inherits it, as in the course's tests
    static = run != "front end"
    if run == "static setting":
        monkeypatch.setenv(STATIC_ENV, "1")
    nb = new_notebook(
        cells=[
            new_code_cell(
                "from course_utils.plots import LiveLossPlot, plot_curves, plot_sweep, progress\n"
                "plot = LiveLossPlot()\n"
                "for epoch in range(3):\n"
                "    plot.update(epoch, train=1 / (epoch + 1), val=1.5 / (epoch + 1))\n"
                "plot.finish()"  # the cell's value: must not show the plot a second time
            ),
            new_code_cell("plot_curves(plot.history, title='runs');"),
            new_code_cell("total = sum(progress(range(30), desc='steps'))\nprint(total)"),
        ]
    )
    client = RecordingClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    if run == "headless":
        client.execute()
    else:
        execute_as_front_end(client)
    # Live: one display, redrawn after epochs 2 and 3 and by finish. Static: finish shows it.
    # Either way, no second display for the cell's value.
    updates = 0 if static else 3
    assert client.messages[0] == ["display_data"] + ["update_display_data"] * updates
    loss, curves, loop = nb.cells
    ((plot_output,),) = [loss.outputs]
    assert "image/png" in plot_output.data
    assert curves.outputs == []  # a closed figure ending in ";" is not shown: no stray figure
    if static:
        (printed,) = loop.outputs
        first, second = printed.text.splitlines()
        assert first.startswith("steps: 30/30 done in ") and second == "435"
    else:
        widget, printed = loop.outputs
        assert "application/vnd.jupyter.widget-view+json" in widget.data
        assert printed.text == "435\n"
