"""Two explorers for learners: how shapes broadcast, and what autograd recorded.

Each explorer works in three places. In a Jupyter front end with ipywidgets it is
interactive; in plain Python it prints a text equivalent; and in a headless run (nbgrader,
nbclient, the course's runners, or ``COURSE_STATIC_WIDGETS=1``) it is static even in a kernel,
so that no run waits on widget messages. ``_live`` makes that one decision.

The pure parts (``broadcast_report``, ``backward_graph``) return report objects that print as
text and render as HTML, so lessons and tests can use them without any widget.

matplotlib and ipywidgets are imported inside the functions that need them: importing the
course must stay cheap.
"""

from __future__ import annotations

import html
import math
import operator
import os
from dataclasses import dataclass, field

import torch

from course_utils.display import in_notebook_kernel, show

STATIC_ENV = "COURSE_STATIC_WIDGETS"
# nbgrader sets this while it runs notebooks (autograde, validate): no front end is attached.
NBGRADER_ENV = "NBGRADER_EXECUTION"


def _live() -> bool:
    """True when an interactive widget can be shown and someone is there to see it.

    A widget lives on messages between the kernel and a front end. A headless run has no front
    end: nbgrader, the course's grader and test command, nbconvert and book builders (executed
    by nbclient) — and waiting on widget messages there can hang the run (jupyter/nbclient#312,
    jupyter/nbconvert#2003). So the explorers are static unless a front end is attached.
    """
    if _setting(STATIC_ENV) or os.environ.get(NBGRADER_ENV):
        return False
    if not in_notebook_kernel() or not _front_end_attached():
        return False
    try:
        import ipywidgets
    except ImportError:
        return False
    return front_end_renders(getattr(ipywidgets, "__version__", "0"), os.environ)


def front_end_renders(ipywidgets_version: str, environ) -> bool:
    """Whether the front end can draw this kernel's widgets: ipywidgets 8 everywhere; ipywidgets
    7 only on Colab, whose own front end renders its models. JupyterLab 4 and Notebook 7 (a hub,
    VS Code) carry ipywidgets 8's manager, which shows ipywidgets 7's widgets as "Click to show
    javascript error" (``@jupyter-widgets/controls ^1.5.0 is not registered``): the kernel cannot
    see the front end, so with ipywidgets 7 anywhere else the explorers stay static."""
    from course_utils import hosting

    try:
        major = int(str(ipywidgets_version).split(".")[0])
    except ValueError:
        return False
    return major >= 8 or hosting.where(dict(environ), course_folder=False).kind == hosting.COLAB


def _setting(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes"}


def _front_end_attached() -> bool:
    """Whether the cell now running was sent by a front end a person sits at.

    JupyterLab, Notebook and VS Code execute cells allowing ``input()``; nbclient, which runs
    notebooks for nbgrader, nbconvert, the course's grader and book builders, never does.
    ipykernel records it per request. Unknown (another kernel): assume a front end.
    """
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    return bool(getattr(kernel, "_allow_stdin", True))


# ---------------------------------------------------------------------------------------------
# Broadcasting
# ---------------------------------------------------------------------------------------------

EQUAL = "equal"
A_STRETCHED = "a is 1 → stretched"
B_STRETCHED = "b is 1 → stretched"
A_MISSING = "missing in a → added"
B_MISSING = "missing in b → added"
MISMATCH = "mismatch"

BIGGER_WARNING = (
    "the result is bigger than both inputs: right for an outer product made on purpose, a "
    "silent bug if you meant element by element, like (N,) against (N, 1) → (N, N)"
)

_STRETCHED_IN_A = {A_STRETCHED, A_MISSING}
_STRETCHED_IN_B = {B_STRETCHED, B_MISSING}
_MISSING = {A_MISSING, B_MISSING}
_MAX_ELEMENTS = 2**63 - 1  # a tensor counts its elements in an int64


@dataclass(frozen=True)
class DimRule:
    """One aligned dimension: ``position`` counts from the right (-1 is the last)."""

    position: int
    a: int | None  # None: a has fewer dimensions, so this one is missing
    b: int | None
    rule: str
    result: int | None  # None: the sizes clash


@dataclass
class BroadcastReport:
    """What ``a + b`` does with two shapes, dimension by dimension, with PyTorch's verdict."""

    shape_a: tuple[int, ...]
    shape_b: tuple[int, ...]
    dims: tuple[DimRule, ...]
    result: tuple[int, ...] | None
    error: str | None
    warning: str | None
    _shown: bool = field(default=False, repr=False, compare=False)

    @property
    def aligned(self) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
        """The two shapes lined up from the right; None where a shape has no such dimension."""
        return tuple(d.a for d in self.dims), tuple(d.b for d in self.dims)

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(d.rule for d in self.dims)

    @property
    def ok(self) -> bool:
        return self.error is None

    def headline(self) -> str:
        a, b = _shape_text(self.shape_a), _shape_text(self.shape_b)
        return f"a {a} + b {b}: line the shapes up from the right"

    def outcome(self) -> str:
        if self.error is not None:
            return f"a + b fails: RuntimeError: {self.error}"
        return f"a + b has shape {_shape_text(self.result)}"

    def __str__(self) -> str:
        lines = [self.headline(), ""]
        if self.dims:
            lines += _text_table(self.dims) + [""]
            lines += [f"  dim {d.position}: {d.rule}" for d in self.dims] + [""]
        else:
            lines += ["  both are scalars: no dimensions to line up", ""]
        lines.append(self.outcome())
        if self.warning:
            lines.append(f"⚠ {self.warning}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        parts = [f"<div><p><b>{html.escape(self.headline())}</b></p>"]
        if self.dims:
            parts.append(_html_table(self))
        else:
            parts.append("<p>both are scalars: no dimensions to line up</p>")
        colour = "#b71c1c" if self.error else "#1b5e20"
        parts.append(f'<p style="color:{colour}"><b>{html.escape(self.outcome())}</b></p>')
        if self.warning:
            parts.append(f'<p style="color:#e65100">⚠ {html.escape(self.warning)}</p>')
        return "".join(parts) + "</div>"

    def _ipython_display_(self):
        # The static explorer has shown this report already; as a cell's value it would show twice.
        if not self._shown:
            show(self)


def _shape_text(shape: tuple[int, ...]) -> str:
    return str(tuple(shape))


def parse_shape(text: str) -> tuple[int, ...]:
    """Read a shape as a learner types it: "4, 1", "(4, 1)", "[4, 1]" or "4 1"; "" is a scalar."""
    cleaned = text.strip().strip("()[]").replace(",", " ")
    sizes = []
    for word in cleaned.split():
        if not word.isdigit():
            raise ValueError(
                f"{word!r} is not a dimension size: "
                "write whole numbers separated by commas, e.g. 4, 1"
            )
        sizes.append(int(word))
    return tuple(sizes)


def _as_shape(shape) -> tuple[int, ...]:
    """Accept a tuple, list, torch.Size or typed text; refuse what no tensor could have."""
    if isinstance(shape, str):
        return parse_shape(shape)
    try:
        sizes = tuple(operator.index(size) for size in shape)  # refuses 2.5, accepts numpy ints
    except TypeError:
        raise TypeError(
            f"a shape is a tuple of sizes such as (4, 1), not {type(shape).__name__}"
        ) from None
    if any(size < 0 for size in sizes):
        raise ValueError(f"a shape cannot have a negative size: {sizes}")
    if math.prod(sizes) > _MAX_ELEMENTS:
        raise ValueError(f"no tensor can have shape {sizes}: too many elements")
    return sizes


def _rule(a: int | None, b: int | None) -> tuple[str, int | None]:
    if a is None:
        return A_MISSING, b
    if b is None:
        return B_MISSING, a
    if a == b:
        return EQUAL, a
    if a == 1:
        return A_STRETCHED, b
    if b == 1:
        return B_STRETCHED, a
    return MISMATCH, None


def _align(shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> tuple[DimRule, ...]:
    n = max(len(shape_a), len(shape_b))
    padded_a = (None,) * (n - len(shape_a)) + shape_a
    padded_b = (None,) * (n - len(shape_b)) + shape_b
    dims = []
    for i, (a, b) in enumerate(zip(padded_a, padded_b)):
        rule, result = _rule(a, b)
        dims.append(DimRule(position=i - n, a=a, b=b, rule=rule, result=result))
    return tuple(dims)


def _add_outcome(shape_a, shape_b) -> tuple[tuple[int, ...] | None, str | None]:
    """Let PyTorch itself decide: the result shape, or the exact message ``a + b`` raises.

    The shape comes from adding tensors on the ``meta`` device, which have shapes but no
    memory. The meta kernels word a clash differently from the CPU and CUDA kernels, though,
    so the message a learner will really see comes from the CPU kernel, fed one-element
    tensors expanded to the shapes: the shape check fails before anything is allocated.
    """
    try:
        meta_sum = torch.empty(shape_a, device="meta") + torch.empty(shape_b, device="meta")
        return tuple(meta_sum.shape), None
    except (RuntimeError, NotImplementedError):
        pass  # the shapes clash, or this build cannot compute on meta
    try:
        return tuple(torch.broadcast_shapes(shape_a, shape_b)), None
    except RuntimeError:
        pass  # they clash: only now is the CPU addition sure to fail before it allocates
    try:
        cpu_sum = torch.zeros(()).expand(shape_a) + torch.zeros(()).expand(shape_b)
    except RuntimeError as error:
        return None, str(error)
    return tuple(cpu_sum.shape), None


def _bigger_than_both(shape_a, shape_b, result) -> bool:
    return result is not None and math.prod(result) > max(math.prod(shape_a), math.prod(shape_b))


def broadcast_report(shape_a, shape_b) -> BroadcastReport:
    """Explain ``a + b`` for tensors of these shapes, and say what PyTorch answers."""
    shape_a, shape_b = _as_shape(shape_a), _as_shape(shape_b)
    result, error = _add_outcome(shape_a, shape_b)
    return BroadcastReport(
        shape_a=shape_a,
        shape_b=shape_b,
        dims=_align(shape_a, shape_b),
        result=result,
        error=error,
        warning=BIGGER_WARNING if _bigger_than_both(shape_a, shape_b, result) else None,
    )


def _text_table(dims: tuple[DimRule, ...]) -> list[str]:
    """Rows a, b, result under dim headers; a missing dimension stays blank, as on paper."""
    rows = [
        ("", [f"dim {d.position}" for d in dims]),
        ("a", ["" if d.a is None else str(d.a) for d in dims]),
        ("b", ["" if d.b is None else str(d.b) for d in dims]),
        ("result", ["✗" if d.result is None else str(d.result) for d in dims]),
    ]
    width = max(len(cell) for _, cells in rows for cell in cells)
    return [
        f"  {name:<6}" + "".join(f"  {cell:>{width}}" for cell in cells) for name, cells in rows
    ]


# How each box of the table and of the picture looks: plain, stretched (a 1 that grows),
# added (a missing dimension, taken as 1), mismatch, or a result.
def _cells(report: BroadcastReport) -> list[tuple[str, list[tuple[str, str]]]]:
    """(row name, [(text, kind)] one per aligned dimension) for a, b and the result."""

    def input_cell(size: int | None, rule: str, stretched_here: set[str]) -> tuple[str, str]:
        text = "(1)" if size is None else str(size)
        if rule == MISMATCH:
            return text, "mismatch"
        if rule in stretched_here:
            return text, "added" if rule in _MISSING else "stretched"
        return text, "plain"

    def result_cell(size: int | None) -> tuple[str, str]:
        return ("✗", "mismatch") if size is None else (str(size), "result")

    dims = report.dims
    return [
        ("a", [input_cell(d.a, d.rule, _STRETCHED_IN_A) for d in dims]),
        ("b", [input_cell(d.b, d.rule, _STRETCHED_IN_B) for d in dims]),
        ("result", [result_cell(d.result) for d in dims]),
    ]


_CELL = "padding:2px 10px;text-align:center;border:1px solid #ccc;font-family:monospace"
_HTML_KIND = {
    "plain": "",
    "result": "",
    "stretched": "background:#fff3c4",
    "added": "background:#fff3c4;border-style:dashed;color:#888",
    "mismatch": "background:#ffcdd2;color:#b71c1c;font-weight:bold",
}


def _html_table(report: BroadcastReport) -> str:
    header = "".join(f'<th style="{_CELL}">dim {d.position}</th>' for d in report.dims)
    rows = [f"<tr><th></th>{header}</tr>"]
    for name, cells in _cells(report):
        tds = "".join(
            f'<td style="{_CELL};{_HTML_KIND[kind]}" title="{html.escape(d.rule)}">'
            f"{html.escape(text)}</td>"
            for (text, kind), d in zip(cells, report.dims)
        )
        rows.append(f'<tr><th style="text-align:left">{name}</th>{tds}</tr>')
    rules = "".join(
        f'<td style="{_CELL};font-size:80%;{_HTML_KIND["mismatch"] if d.rule == MISMATCH else ""}">'
        f"{html.escape(d.rule)}</td>"
        for d in report.dims
    )
    rows.append(f'<tr><th style="text-align:left">rule</th>{rules}</tr>')
    return f'<table style="border-collapse:collapse">{"".join(rows)}</table>'


# (fill, edge colour, line style) of a box in the picture.
_BOX_KIND = {
    "plain": ("#e3f2fd", "#555", "solid"),
    "result": ("#c8e6c9", "#555", "solid"),
    "stretched": ("#ffe082", "#555", "solid"),
    "added": ("#ffe082", "#555", "dashed"),
    "mismatch": ("#ef9a9a", "#b71c1c", "solid"),
}


def _draw_box(ax, x: float, y: float, text: str, kind: str) -> None:
    from matplotlib.patches import Rectangle

    fill, edge, linestyle = _BOX_KIND[kind]
    box = Rectangle((x, y), 1, 0.8, facecolor=fill, edgecolor=edge, linestyle=linestyle, lw=1.5)
    ax.add_patch(box)
    ax.text(x + 0.5, y + 0.4, text, ha="center", va="center", fontsize=11, family="monospace")


def _row_labels(report: BroadcastReport, names: tuple[str, str], op: str) -> list[str]:
    result = "error" if report.error else _shape_text(report.result)
    a, b = names
    return [
        f"{a} {_shape_text(report.shape_a)}",
        f"{b} {_shape_text(report.shape_b)}",
        f"{a} {op} {b} {result}",
    ]


def _display_figure(fig) -> None:
    """Show a figure as a PNG whatever matplotlib backend the kernel uses.

    Only the inline backend teaches IPython to render figures; under another one (MPLBACKEND=Agg,
    as in the course's tests) a displayed figure would be the text "<Figure ...>".
    """
    import io

    from IPython.display import Image, display

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    display(Image(data=buffer.getvalue(), format="png"))


def draw_broadcast(shape_a, shape_b, *, names=("a", "b"), op="+"):
    """A picture of the alignment: one box per dimension, stretched ones shaded, clashes red.

    ``names`` and ``op`` label the rows as the learner's code reads: ``names=("pred", "target"),
    op="-"`` draws ``pred - target``. Every element-wise operation broadcasts alike.

    The figure is closed in pyplot before it is returned, so a notebook shows it once: as the
    cell's value, or where it is displayed, never again when the cell ends.
    """
    import matplotlib.pyplot as plt

    report = broadcast_report(shape_a, shape_b)
    n = len(report.dims)
    step = 1.2
    fig, ax = plt.subplots(figsize=(2.6 + 0.75 * max(n, 1), 2.4))
    for row, (label, (_, cells)) in enumerate(zip(_row_labels(report, names, op), _cells(report))):
        y = (2 - row) * 1.1
        ax.text(-0.3, y + 0.4, label, ha="right", va="center", fontsize=10)
        for column, (text, kind) in enumerate(cells):
            _draw_box(ax, column * step, y, text, kind)
        if n == 0:
            ax.text(0, y + 0.4, "scalar: no dimensions", va="center", fontsize=10, color="#555")
    ax.set_xlim(-3.2, max(n, 2) * step)
    ax.set_ylim(-0.2, 3.2)
    ax.set_axis_off()
    expression = f"{names[0]} {op} {names[1]}"
    if report.ok:
        title = f"{expression} has shape {_shape_text(report.result)}"
    else:
        title = f"{expression} fails: the sizes clash where a box is red"
    ax.set_title(title, fontsize=10)
    plt.close(fig)
    return fig


def _shape_input(description: str, shape: tuple[int, ...]):
    import ipywidgets as widgets

    return widgets.Text(
        value=", ".join(str(size) for size in shape),
        description=description,
        placeholder="e.g. 4, 1",
        layout=widgets.Layout(width="14em"),
    )


def broadcast_explorer(shape_a=(4,), shape_b=(4, 1)):
    """Type two shapes and see how ``a + b`` lines them up, or why it fails.

    Live: returns the widget, so put the call last in a cell. Static: shows the report for the
    given shapes and returns it.
    """
    if not _live():
        report = broadcast_report(shape_a, shape_b)
        show(report)
        report._shown = True
        return report
    return _live_broadcast_explorer(_as_shape(shape_a), _as_shape(shape_b))


def _live_broadcast_explorer(shape_a: tuple[int, ...], shape_b: tuple[int, ...]):
    import ipywidgets as widgets

    box_a, box_b = _shape_input("a shape", shape_a), _shape_input("b shape", shape_b)
    output = widgets.Output()

    def update(_change=None):
        output.clear_output(wait=True)
        with output:
            try:
                a, b = parse_shape(box_a.value), parse_shape(box_b.value)
            except ValueError as error:
                print(f"⚠ {error}")
                return
            show(broadcast_report(a, b))
            _display_figure(draw_broadcast(a, b))

    box_a.observe(update, names="value")
    box_b.observe(update, names="value")
    update()
    return widgets.VBox([widgets.HBox([box_a, box_b]), output])


# ---------------------------------------------------------------------------------------------
# The backward graph
# ---------------------------------------------------------------------------------------------

NO_GRAPH_LEAF = "a leaf: nothing recorded yet"
NO_GRAPH_UNTRACKED = "not tracked: requires_grad=False (no graph)"


@dataclass(frozen=True)
class GraphNode:
    """One recorded step; ``kind`` is "leaf" for AccumulateGrad, which fills a leaf's .grad."""

    index: int
    label: str
    kind: str
    shape: tuple[int, ...] | None = None


@dataclass
class GraphReport:
    """The graph autograd recorded for one tensor, read from its ``grad_fn`` backwards.

    ``nodes[0]`` is the output's grad_fn; ``edges`` run in the backward direction, from a node
    to the ones its gradient flows into; ``children`` keeps repeats (``y + y`` uses y twice).
    """

    name: str
    nodes: tuple[GraphNode, ...]
    edges: tuple[tuple[int, int], ...]
    children: dict[int, tuple[int, ...]]
    message: str | None = None  # set when there is no graph
    _shown: bool = field(default=False, repr=False, compare=False)

    @property
    def shared(self) -> tuple[int, ...]:
        """Nodes reached along more than one path: shown once, then referred back to."""
        counts: dict[int, int] = {}
        for kids in self.children.values():
            for kid in kids:
                counts[kid] = counts.get(kid, 0) + 1
        return tuple(index for index, count in sorted(counts.items()) if count > 1)

    def __str__(self) -> str:
        if self.message is not None:
            return f"{self.name} = {self.message}"
        return "\n".join(_tree_lines(self))

    def _repr_html_(self) -> str:
        return f'<pre style="line-height:1.3">{html.escape(str(self))}</pre>'

    def _ipython_display_(self):
        # show_graph has shown this report already; as a cell's value it would show twice.
        if not self._shown:
            show(self)


def _name_of(tensor, names: dict | None) -> str | None:
    for name, candidate in (names or {}).items():
        if candidate is tensor:
            return name
    return None


def _node_label(node, names: dict | None) -> tuple[str, str, tuple[int, ...] | None]:
    leaf = getattr(node, "variable", None)
    if leaf is None:
        return type(node).__name__, "op", None
    shape = tuple(leaf.shape)
    return f"AccumulateGrad → {_name_of(leaf, names) or 'leaf'} {shape}", "leaf", shape


def _walk(root_fn, names: dict | None):
    """Visit each grad_fn once (breadth first); keep the node objects alive while comparing them."""
    seen: dict[int, int] = {id(root_fn): 0}
    order = [root_fn]
    children: dict[int, tuple[int, ...]] = {}
    for index, fn in enumerate(order):  # ``order`` grows while we walk it
        kids = []
        for next_fn, _ in fn.next_functions:
            if next_fn is None:  # an input that does not require grad: not in the graph
                continue
            if id(next_fn) not in seen:
                seen[id(next_fn)] = len(order)
                order.append(next_fn)
            kids.append(seen[id(next_fn)])
        children[index] = tuple(kids)
    nodes = tuple(GraphNode(i, *_node_label(fn, names)) for i, fn in enumerate(order))
    return nodes, children


def _unique_edges(children: dict[int, tuple[int, ...]]) -> tuple[tuple[int, int], ...]:
    edges = []
    for parent, kids in children.items():
        for kid in kids:
            if (parent, kid) not in edges:
                edges.append((parent, kid))
    return tuple(edges)


def backward_graph(tensor, names: dict[str, torch.Tensor] | None = None) -> GraphReport:
    """Read what autograd recorded for ``tensor``; ``names`` labels tensors you know by name."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"backward_graph needs a tensor, not {type(tensor).__name__}")
    name = _name_of(tensor, names) or "output"
    if tensor.grad_fn is None:
        message = NO_GRAPH_LEAF if tensor.requires_grad else NO_GRAPH_UNTRACKED
        return GraphReport(name=name, nodes=(), edges=(), children={}, message=message)
    nodes, children = _walk(tensor.grad_fn, names)
    return GraphReport(name=name, nodes=nodes, edges=_unique_edges(children), children=children)


def _tree_lines(report: GraphReport) -> list[str]:
    """The tree, depth first; a shared node's branch is written once, later mentions point back."""
    tags = {index: number for number, index in enumerate(report.shared, start=1)}
    written: set[int] = set()
    lines = []
    # Each entry: (node, prefix of its own line, prefix for its children's lines).
    stack = [(0, f"{report.name} = ", "")]
    while stack:
        index, lead, indent = stack.pop()
        label = report.nodes[index].label
        if index in tags and index in written:
            lines.append(f"{lead}{label} [shared #{tags[index]}, see above]")
            continue
        written.add(index)
        lines.append(f"{lead}{label}" + (f" [shared #{tags[index]}]" if index in tags else ""))
        kids = report.children.get(index, ())
        for position in reversed(range(len(kids))):
            last = position == len(kids) - 1
            branch, carry = ("└─ ", "   ") if last else ("├─ ", "│  ")
            stack.append((kids[position], indent + branch, indent + carry))
    return lines


def _layers(report: GraphReport) -> dict[int, int]:
    """Each node's longest distance from the output, so every arrow points downwards."""
    depth = {0: 0}
    for index in _topological_order(report):
        for kid in report.children.get(index, ()):
            depth[kid] = max(depth.get(kid, 0), depth[index] + 1)
    return depth


def _topological_order(report: GraphReport) -> list[int]:
    """Parents before children (reverse post-order), without recursion: graphs can be deep."""
    post, done = [], set()
    stack = [(0, iter(report.children.get(0, ())))]
    done.add(0)
    while stack:
        index, kids = stack[-1]
        kid = next(kids, None)
        if kid is None:
            stack.pop()
            post.append(index)
        elif kid not in done:
            done.add(kid)
            stack.append((kid, iter(report.children.get(kid, ()))))
    return post[::-1]


def _positions(report: GraphReport) -> dict[int, tuple[float, float]]:
    """x in slots (each row centred), y = minus the layer: the output on top."""
    depth = _layers(report)
    by_layer: dict[int, list[int]] = {}
    for index in range(len(report.nodes)):
        by_layer.setdefault(depth[index], []).append(index)
    widest = max(len(row) for row in by_layer.values())
    positions = {}
    for layer, row in by_layer.items():
        for slot, index in enumerate(row):
            positions[index] = (slot + (widest - len(row)) / 2, -layer)
    return positions


_OP_FILL = "#bbdefb"
_LEAF_FILL = "#c8e6c9"


def _box(fill: str) -> dict:
    return {"boxstyle": "round,pad=0.4", "fc": fill}


def _figure_size(report: GraphReport, positions) -> tuple[float, float]:
    """Wide enough that the longest label fits in its slot; capped for very large graphs."""
    slots = max(x for x, _ in positions.values()) + 1
    layers = -min(y for _, y in positions.values()) + 1
    slot_inches = 0.8 + 0.075 * max(len(node.label) for node in report.nodes)
    return min(max(1 + slot_inches * slots, 5.5), 18), min(1 + 0.75 * layers, 20)


def _draw_nodes(ax, report: GraphReport, positions) -> dict:
    boxes = {}
    for node in report.nodes:
        label = f"{report.name} = {node.label}" if node.index == 0 else node.label
        fill = _LEAF_FILL if node.kind == "leaf" else _OP_FILL
        x, y = positions[node.index]
        boxes[node.index] = ax.text(x, y, label, ha="center", va="center", bbox=_box(fill))
    return boxes


def _draw_arrows(ax, report: GraphReport, boxes: dict) -> None:
    """From the bottom of each node to the top of the nodes its gradient flows into."""
    for parent, kid in report.edges:
        ax.annotate(
            "",
            xy=(0.5, 1),
            xycoords=boxes[kid],
            xytext=(0.5, 0),
            textcoords=boxes[parent],
            arrowprops={"arrowstyle": "->", "color": "#555"},
        )


def draw_backward_graph(tensor, names: dict[str, torch.Tensor] | None = None):
    """The recorded graph as boxes and arrows: output at the top, leaves (green) at the bottom.

    Arrows follow the backward pass, the way gradients flow. The figure is closed in pyplot
    before it is returned, so a notebook shows it once.
    """
    import matplotlib.pyplot as plt

    report = backward_graph(tensor, names)
    if report.message is not None:
        fig, ax = plt.subplots(figsize=(5, 1.2))
        ax.text(0.5, 0.5, str(report), ha="center", va="center", bbox=_box("#eeeeee"))
    else:
        positions = _positions(report)
        width, height = _figure_size(report, positions)
        fig, ax = plt.subplots(figsize=(width, height))
        _draw_arrows(ax, report, _draw_nodes(ax, report, positions))
        ax.set_xlim(-0.6, max(x for x, _ in positions.values()) + 0.6)
        ax.set_ylim(min(y for _, y in positions.values()) - 0.5, 0.5)
        fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.9)
        ax.set_title("backward graph: gradients flow down, from the output to the leaves")
    ax.set_axis_off()
    plt.close(fig)
    return fig


def show_graph(tensor, names: dict[str, torch.Tensor] | None = None) -> GraphReport:
    """Show what autograd recorded for ``tensor``: a drawing and the tree in a notebook (the
    drawing is a still picture, so a static page such as the course's website shows it too),
    the tree alone in a plain Python session."""
    report = backward_graph(tensor, names)
    if in_notebook_kernel():
        _display_figure(draw_backward_graph(tensor, names))
    show(report)
    report._shown = True
    return report
