"""The broadcasting and backward-graph explorers: static, faked live, and in a real kernel."""

import subprocess
import sys

import matplotlib
import nbclient
from front_end import execute_as_front_end
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.text import Annotation
from nbformat.v4 import new_code_cell, new_notebook

from course_utils import widgets

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _no_static_override(monkeypatch):
    monkeypatch.delenv(widgets.STATIC_ENV, raising=False)


def real_error(shape_a, shape_b) -> str:
    with pytest.raises(RuntimeError) as caught:
        torch.ones(shape_a) + torch.ones(shape_b)
    return str(caught.value)


# --- broadcast_report ---------------------------------------------------------------------------


def test_equal_shapes_broadcast_to_themselves():
    report = widgets.broadcast_report((2, 3), [2, 3])
    assert report.result == (2, 3)
    assert report.error is None and report.warning is None
    assert report.rules == ("equal", "equal")


def test_ones_stretch_in_both_directions():
    report = widgets.broadcast_report(torch.Size([3, 1]), (1, 4))
    assert report.result == (3, 4)
    assert report.rules == ("b is 1 → stretched", "a is 1 → stretched")


def test_a_vector_against_a_column_grows_to_a_square_and_warns():
    report = widgets.broadcast_report((4,), (4, 1))
    assert report.result == (4, 4)
    assert report.aligned == ((None, 4), (4, 1))
    assert report.rules == ("missing in a → added", "b is 1 → stretched")
    assert report.warning == widgets.BIGGER_WARNING
    assert "(N,) against (N, 1)" in str(report)


def test_a_clash_reports_exactly_what_pytorch_raises():
    report = widgets.broadcast_report((2, 3), (4,))
    assert report.result is None
    assert report.error == real_error((2, 3), (4,))
    assert report.rules == ("missing in b → added", "mismatch")
    assert report.error in str(report)


def test_zero_sized_dimensions_follow_the_same_rules():
    stretched = widgets.broadcast_report((0,), (3, 1))
    assert stretched.result == (3, 0) and stretched.warning is None
    clash = widgets.broadcast_report((0,), (3,))
    assert clash.error == real_error((0,), (3,))


def test_scalars_have_no_dimensions_to_line_up():
    both = widgets.broadcast_report((), ())
    assert both.result == () and both.dims == ()
    assert "scalars" in str(both)
    assert widgets.broadcast_report((), (2, 5)).result == (2, 5)


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((5, 1, 3, 1), (2, 1, 7)),
        ((1,), ()),
        ((2, 1), (1, 2, 1)),
        ((6, 2), (3, 2)),
        ((1, 0), (5, 1)),
    ],
)
def test_the_rules_table_agrees_with_pytorch(shape_a, shape_b):
    report = widgets.broadcast_report(shape_a, shape_b)
    if report.ok:
        assert tuple(d.result for d in report.dims) == report.result
        assert report.result == tuple((torch.ones(shape_a) + torch.ones(shape_b)).shape)
    else:
        assert "mismatch" in report.rules
        assert report.error == real_error(shape_a, shape_b)


def test_huge_shapes_cost_no_memory():
    report = widgets.broadcast_report((100_000,), (100_000, 1))
    assert report.result == (100_000, 100_000)
    clash = widgets.broadcast_report((10**6, 3), (10**6 + 1, 1, 4))
    assert "must match" in clash.error


def test_text_and_html_name_both_shapes():
    report = widgets.broadcast_report((2, 3), (4,))
    for text in (str(report), report._repr_html_()):
        assert "(2, 3)" in text and "(4,)" in text
    page = report._repr_html_()
    assert "<table" in page and "#ffcdd2" in page  # the clash is red
    assert "#fff3c4" in widgets.broadcast_report((4,), (4, 1))._repr_html_()  # stretched


def test_the_text_table_lines_the_shapes_up_from_the_right():
    lines = str(widgets.broadcast_report((4,), (4, 1))).splitlines()
    a_row = next(line for line in lines if line.startswith("  a "))
    b_row = next(line for line in lines if line.startswith("  b "))
    assert len(a_row) == len(b_row) and a_row.endswith("4") and b_row.endswith("1")


def test_shapes_are_read_from_text_and_bad_ones_refused():
    assert widgets.parse_shape("4, 1") == (4, 1)
    assert widgets.parse_shape(" (2,3) ") == (2, 3)
    assert widgets.parse_shape("[4 1]") == (4, 1)
    assert widgets.parse_shape("") == ()
    with pytest.raises(ValueError, match="'x' is not a dimension size"):
        widgets.parse_shape("4, x")
    with pytest.raises(ValueError, match="negative"):
        widgets.broadcast_report((-1,), (2,))
    with pytest.raises(ValueError, match="too many elements"):
        widgets.broadcast_report((2**62, 4), (1,))
    with pytest.raises(TypeError, match="tuple of sizes"):
        widgets.broadcast_report(4, (2,))
    with pytest.raises(TypeError, match="tuple of sizes"):
        widgets.broadcast_report((2.5,), (2,))


# --- draw_broadcast -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape_a, shape_b", [((), ()), ((3,), (2, 3)), ((5, 1, 3, 1), (2, 1, 7))])
def test_the_picture_has_one_box_per_dimension_in_each_row(shape_a, shape_b):
    fig = widgets.draw_broadcast(shape_a, shape_b)
    assert isinstance(fig, Figure)
    assert len(fig.axes[0].patches) == 3 * max(len(shape_a), len(shape_b))
    fig.canvas.draw()


def test_the_picture_marks_a_clash_red():
    fig = widgets.draw_broadcast((2, 3), (4,))
    fills = [to_hex(patch.get_facecolor()) for patch in fig.axes[0].patches]
    red = [fill for fill in fills if fill == "#ef9a9a"]
    assert len(red) == 3  # a's 3, b's 4 and the result's ✗


def test_the_picture_is_closed_so_a_notebook_shows_it_once():
    import matplotlib.pyplot as plt

    fig = widgets.draw_broadcast((4,), (4, 1))
    assert fig.number not in plt.get_fignums()


# --- backward_graph -----------------------------------------------------------------------------


def test_a_chain_reads_as_an_indented_tree():
    x = torch.ones(3, requires_grad=True)
    y = (x**3).sum()
    report = widgets.backward_graph(y, names={"x": x, "y": y})
    assert str(report) == (
        "y = SumBackward0\n"
        "└─ PowBackward0\n"
        "   └─ AccumulateGrad → x (3,)"
    )
    assert [node.kind for node in report.nodes] == ["op", "op", "leaf"]
    assert report.edges == ((0, 1), (1, 2))
    assert "<pre" in report._repr_html_()


def test_a_shared_node_is_shown_once_and_referred_back_to():
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    y = a * b
    z = y + y
    report = widgets.backward_graph(z, names={"a": a, "b": b})
    assert [node.label for node in report.nodes].count("MulBackward0") == 1
    text = str(report)
    assert text.count("AccumulateGrad → a (2,)") == 1
    assert "MulBackward0 [shared #1, see above]" in text
    assert report.children[0] == (1, 1)  # the gradient reaches y along both inputs of +


def test_unnamed_leaves_and_constants():
    w = torch.ones(2, 2, requires_grad=True)
    out = w * torch.ones(2, 2)  # the constant does not require grad: it is not in the graph
    report = widgets.backward_graph(out)
    assert str(report) == "output = MulBackward0\n└─ AccumulateGrad → leaf (2, 2)"


def test_tensors_without_a_graph_say_why():
    x = torch.ones(3, requires_grad=True)
    assert str(widgets.backward_graph(x, {"x": x})) == "x = a leaf: nothing recorded yet"
    plain = torch.ones(3) * 2
    report = widgets.backward_graph(plain)
    assert str(report) == "output = not tracked: requires_grad=False (no graph)"
    assert report.nodes == () and report.edges == ()
    with torch.no_grad():
        assert "not tracked" in str(widgets.backward_graph(x * 2))
    with pytest.raises(TypeError, match="needs a tensor"):
        widgets.backward_graph([1.0])


def test_html_is_escaped():
    x = torch.ones(1, requires_grad=True)
    page = widgets.backward_graph(x * 2, {"<x>": x})._repr_html_()
    assert "&lt;x&gt;" in page and "<x>" not in page


def test_a_deep_graph_does_not_hit_the_recursion_limit():
    x = torch.ones(1, requires_grad=True)
    y = x
    for _ in range(sys.getrecursionlimit() + 100):
        y = y * 1.0
    report = widgets.backward_graph(y)
    assert len(report.nodes) == sys.getrecursionlimit() + 101
    assert str(report).endswith("AccumulateGrad → leaf (1,)")


def test_draw_backward_graph_returns_a_figure():
    x = torch.ones(3, requires_grad=True)
    w = torch.ones(3, 3, requires_grad=True)
    h = (w @ x).relu()
    loss = (h * h + h.exp()).mean() + (x**2).sum()
    fig = widgets.draw_backward_graph(loss, {"x": x, "w": w})
    assert isinstance(fig, Figure)
    boxes = [text for text in fig.axes[0].texts if not isinstance(text, Annotation)]
    assert len(boxes) == len(widgets.backward_graph(loss).nodes)
    fig.canvas.draw()
    assert isinstance(widgets.draw_backward_graph(x), Figure)


# --- the explorers, static ----------------------------------------------------------------------


def test_outside_a_kernel_the_broadcast_explorer_prints_the_report(capsys):
    assert not widgets._live()
    report = widgets.broadcast_explorer((3, 1), (1, 4))
    assert capsys.readouterr().out == str(widgets.broadcast_report((3, 1), (1, 4))) + "\n"
    assert isinstance(report, widgets.BroadcastReport)


def test_outside_a_kernel_show_graph_prints_the_tree(capsys):
    x = torch.ones(3, requires_grad=True)
    report = widgets.show_graph((x**3).sum(), {"x": x})
    assert capsys.readouterr().out == str(report) + "\n"


def test_the_static_setting_wins_even_in_a_kernel(monkeypatch):
    monkeypatch.setattr(widgets, "in_notebook_kernel", lambda: True)
    assert widgets._live()
    monkeypatch.setenv(widgets.STATIC_ENV, "1")
    assert not widgets._live()


# --- the broadcast explorer, live (faked outside a kernel) --------------------------------------


@pytest.fixture
def live(monkeypatch):
    monkeypatch.setattr(widgets, "_live", lambda: True)


def shape_boxes(explorer):
    return explorer.children[0].children


def test_the_live_explorer_is_a_widget_that_follows_the_text_boxes(live, capsys):
    import ipywidgets

    explorer = widgets.broadcast_explorer()
    assert isinstance(explorer, ipywidgets.VBox)
    box_a, box_b = shape_boxes(explorer)
    assert (box_a.value, box_b.value) == ("4", "4, 1")
    assert "a + b has shape (4, 4)" in capsys.readouterr().out

    box_a.value = "2, 3"
    box_b.value = "4"
    assert real_error((2, 3), (4,)) in capsys.readouterr().out


def test_bad_text_gets_one_line_not_a_traceback(live, capsys):
    explorer = widgets.broadcast_explorer()
    capsys.readouterr()
    shape_boxes(explorer)[0].value = "4, x"
    # Outside a kernel, clearing the output area prints terminal escapes; only the text counts.
    lines = [line for line in capsys.readouterr().out.splitlines() if line.isprintable()]
    assert lines == [
        "⚠ 'x' is not a dimension size: write whole numbers separated by commas, e.g. 4, 1"
    ]


def test_show_graph_live_shows_a_drawing_and_the_tree(live, monkeypatch, capsys):
    import IPython.display

    monkeypatch.setattr(widgets, "in_notebook_kernel", lambda: True)
    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    x = torch.ones(3, requires_grad=True)
    report = widgets.show_graph((x**3).sum(), {"x": x})
    assert isinstance(shown[0], IPython.display.Image) and shown[0].format == "png"
    assert capsys.readouterr().out == str(report) + "\n"


# --- cheap import, real kernel ------------------------------------------------------------------


def test_importing_the_widgets_does_not_pull_in_plotting_or_widgets():
    code = (
        "import sys, course_utils.widgets\n"
        "print(','.join(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def run_notebook(*sources, tmp_path, front_end=True):
    """Run cells in a real kernel: as JupyterLab sends them, or headless as nbclient does."""
    nb = new_notebook(cells=[new_code_cell(source) for source in sources])
    client = nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    if not front_end:
        client.execute()
        return nb
    execute_as_front_end(client)
    return nb


def output_widget_contents(nb) -> list[dict]:
    """What the kernel wrote into Output widgets (nbclient keeps it in the widget state)."""
    state = nb.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
    return [
        output
        for model in state.values()
        if model["model_name"] == "OutputModel"
        for output in model["state"]["outputs"]
    ]


def test_the_explorers_run_live_in_a_real_kernel_with_a_front_end(tmp_path):
    nb = run_notebook(
        "import torch, os\nfrom course_utils.widgets import broadcast_explorer, show_graph",
        "broadcast_explorer()",
        "x = torch.ones(3, requires_grad=True)\nshow_graph((x ** 3).sum(), {'x': x})",
        "os.environ['COURSE_STATIC_WIDGETS'] = '1'\nbroadcast_explorer((2, 3), (4,))",
        tmp_path=tmp_path,
    )
    widget, graph, static = (cell.outputs for cell in nb.cells[1:])
    assert [o.output_type for o in widget] == ["execute_result"]
    assert "application/vnd.jupyter.widget-view+json" in widget[0].data
    report, picture = output_widget_contents(nb)  # an error here would hide in the widget
    assert "a + b has shape (4, 4)" in report["data"]["text/plain"]
    assert "image/png" in picture["data"]
    assert "image/png" in graph[0].data  # the drawing, shown once
    assert "└─ AccumulateGrad → x (3,)" in graph[1].data["text/plain"]
    assert len(graph) == 2  # the returned report does not show a second time
    assert len(static) == 1 and "<table" in static[0].data["text/html"]
    assert "must match the size" in static[0].data["text/plain"]


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
EXPLORER_CELLS = (
    "import torch\nfrom course_utils.widgets import broadcast_explorer, show_graph",
    "broadcast_explorer((5, 1), (5,))",
    "x = torch.ones(3, requires_grad=True)\nshow_graph((x ** 3).sum(), {'x': x})",
)


def assert_static(nb):
    explorer, graph = (cell.outputs for cell in nb.cells[1:])
    for output in explorer + graph:
        assert WIDGET_VIEW not in output.get("data", {}), "a widget in a headless run"
    assert "a + b has shape (5, 5)" in explorer[0].data["text/plain"]
    assert "└─ AccumulateGrad → x (3,)" in graph[-1].data["text/plain"]
    assert not nb.metadata.get("widgets"), "no widget state was sent"


def test_headless_runs_like_nbconvert_and_the_grader_get_static_explorers(tmp_path):
    assert_static(run_notebook(*EXPLORER_CELLS, tmp_path=tmp_path, front_end=False))


def test_under_nbgrader_the_explorers_are_static_whatever_sends_the_cells(tmp_path, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # the kernel inherits it, as in nbgrader
    assert_static(run_notebook(*EXPLORER_CELLS, tmp_path=tmp_path, front_end=True))


def test_show_graph_draws_in_a_headless_kernel_too(monkeypatch, capsys):
    """A website page is built by a headless kernel: the drawing the prose promises is a still
    picture, so it is shown there as in JupyterLab, not only the text tree."""
    import IPython.display

    monkeypatch.setenv("COURSE_STATIC_WIDGETS", "1")
    monkeypatch.setattr(widgets, "in_notebook_kernel", lambda: True)
    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    x = torch.ones(3, requires_grad=True)
    widgets.show_graph((x**3).sum(), {"x": x})
    assert any(isinstance(item, IPython.display.Image) for item in shown)


def test_ipywidgets_7_is_live_only_where_the_front_end_can_draw_it():
    """A kernel with ipywidgets 7 (Colab's) behind JupyterLab 4 (a hub, VS Code) shows "Click to
    show javascript error": the explorers stay static there; Colab's own front end draws them."""
    from course_utils.widgets import front_end_renders

    assert front_end_renders("8.1.5", {}) and front_end_renders("8.1.9", {"COLAB_RELEASE_TAG": "x"})
    assert not front_end_renders("7.7.1", {})
    assert not front_end_renders("7.7.1", {"KAGGLE_KERNEL_RUN_TYPE": "Interactive"})
    assert front_end_renders("7.7.1", {"COLAB_RELEASE_TAG": "release-colab"})
