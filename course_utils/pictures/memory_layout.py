"""Chapter 01's pictures: where a tensor's numbers are in memory, and what broadcasting pairs up.

``draw_strides`` shows one storage and the 2-D tensors that read it (``x`` and ``x.T``): the
storage cells in memory order, each tensor's grid with the storage cell every element reads, and
the order in which ``view(-1)`` would have to read them. ``draw_residual_matrix`` shows the
``(N, N)`` tensor that ``pred - target`` gives when ``pred`` is ``(N, 1)`` and ``target`` ``(N,)``.
Both take what the notebook computed; matplotlib is imported inside them.
"""

from __future__ import annotations

MAX_STORAGE_CELLS = 24  # more cells than this are too small to read
VIEW_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c")
GOOD, BAD = "#2ca02c", "#d62728"
GRID_CELL, ORDER_CELL = 1.3, 0.8  # widths of a grid cell and of a reading-order cell


def _storage_values(t) -> list:
    """The numbers of ``t``'s whole storage, in memory order."""
    n = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((n,), (1,), 0).tolist()


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _reading_order(t) -> list[int]:
    """The storage cell of each element, in the order ``view(-1)`` would hand them out."""
    rows, columns = t.shape
    s0, s1 = t.stride()
    offset = t.storage_offset()
    return [offset + i * s0 + j * s1 for i in range(rows) for j in range(columns)]


def _check_views(views: dict) -> None:
    import torch

    if not views:
        raise ValueError("draw_strides needs at least one tensor, e.g. {'x': x, 'x.T': x.T}")
    if len(views) > len(VIEW_COLOURS):
        raise ValueError(f"draw_strides draws at most {len(VIEW_COLOURS)} tensors, not {len(views)}")
    storages = set()
    for name, t in views.items():
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name}: draw_strides draws 2-D tensors, not {shape}")
        if t.device.type == "meta":
            raise ValueError(f"{name} is on the meta device: it has no numbers to draw")
        storages.add((t.device, t.untyped_storage().data_ptr()))
    if len(storages) > 1:
        raise ValueError(
            "the tensors do not share one storage: draw views of one tensor (x, x.T, x[:, 1:])"
        )
    first = next(iter(views.values()))
    n = first.untyped_storage().nbytes() // first.element_size()
    if n > MAX_STORAGE_CELLS:
        raise ValueError(f"a storage of {n} elements is too long to draw: at most {MAX_STORAGE_CELLS}")


def _cell(ax, x, y, text, *, colour="white", edge="#444444", gid=None, fontsize=10, width=1.0,
          bold=False):
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), width, 1.0, facecolor=colour, edgecolor=edge, linewidth=1.2,
                           gid=gid))
    ax.text(x + width / 2, y + 0.5, text, ha="center", va="center", fontsize=fontsize,
            fontweight="bold" if bold else "normal", gid=None if gid is None else f"{gid}-text")


def draw_strides(views: dict):
    """One storage and the tensors that read it: why ``x.T.view(-1)`` fails.

    A transpose moves no data, it only swaps the strides, and the text "not contiguous" does not
    say what that means. Here the storage is one row of cells in memory order; each tensor is a
    grid whose cells say which storage cell they read (``@k``); and under each grid, the storage
    cells in the order ``view(-1)`` would read them, with the jump between neighbours. A view is
    one stride: it works when every jump is the same (``x``: +1 each time), and fails when the
    jumps go back and forth (``x.T``: +3, -2, +3, ...).

    ``views`` maps a name to a 2-D tensor; all of them must share one storage (``x`` and ``x.T``).
    """
    import matplotlib.pyplot as plt

    _check_views(views)
    first = next(iter(views.values()))
    storage = _storage_values(first)
    n = len(storage)
    grids = list(views.items())
    tallest = max(t.shape[0] for _, t in grids)
    panel = max(max(t.shape[1] for _, t in grids) * GRID_CELL, n * ORDER_CELL, 6.5) + 1.0
    width = max(n, panel * len(grids))
    grid_top = tallest + 2.4
    top = grid_top + 1.9  # the storage row, above the tensors
    bottom = -2.0
    height = top + 2.1 - bottom
    inches = min(8.0, max(6.0, 0.55 * width))
    fig, ax = plt.subplots(figsize=(inches, inches * height / (width + 0.4)))

    palette = plt.get_cmap("YlGnBu")
    shade = {k: palette(0.05 + 0.5 * k / max(n - 1, 1)) for k in range(n)}  # lighter = earlier
    ax.text(0, top + 1.5, "storage: the numbers in memory order (cell index above each)",
            fontsize=10, va="bottom")
    for k, value in enumerate(storage):
        ax.text(k + 0.5, top + 1.05, str(k), ha="center", va="bottom", fontsize=9, color="#555555")
        _cell(ax, k, top, _fmt(value), colour=shade[k], gid=f"storage-{k}")

    for index, (name, t) in enumerate(grids):
        colour = VIEW_COLOURS[index]
        left = index * panel
        rows, columns = t.shape
        ax.text(left, grid_top + 0.2, f"{name}: shape {tuple(t.shape)}, strides {t.stride()}",
                fontsize=10, color=colour, fontweight="bold", va="bottom", gid=f"title-{name}")
        values = t.tolist()
        for i in range(rows):
            for j in range(columns):
                k = t.storage_offset() + i * t.stride(0) + j * t.stride(1)
                x0, y0 = left + j * GRID_CELL, grid_top - (i + 1)
                _cell(ax, x0, y0, "", colour=shade[k], edge=colour, width=GRID_CELL,
                      gid=f"{name}-{i}-{j}")
                ax.text(x0 + 0.45, y0 + 0.5, _fmt(values[i][j]), ha="center", va="center",
                        fontsize=10, gid=f"{name}-{i}-{j}-value")
                ax.text(x0 + GRID_CELL - 0.08, y0 + 0.12, f"@{k}", ha="right", va="bottom",
                        fontsize=8, color="#333333", gid=f"{name}-{i}-{j}-reads")
        order = _reading_order(t)
        jumps = [b - a for a, b in zip(order, order[1:])]
        one_stride = len(set(jumps)) <= 1
        ax.text(left, 1.15, f"{name}.view(-1) would read the cells", fontsize=9, va="bottom")
        for position, k in enumerate(order):
            _cell(ax, left + position * ORDER_CELL, 0.0, str(k), colour=shade[k],
                  width=ORDER_CELL, fontsize=9, edge=colour, gid=f"order-{name}-{position}")
        for position, jump in enumerate(jumps):
            ax.text(left + (position + 1) * ORDER_CELL, -0.12, f"{jump:+d}", ha="center",
                    va="top", fontsize=9, color=GOOD if one_stride else BAD)
        if one_stride:
            step = jumps[0] if jumps else 1
            verdict = f"one step size ({step:+d}): view(-1) works"
        else:
            verdict = "steps go back and forth: no single\nstride fits, so view(-1) fails"
        ax.text(left, -0.75, verdict, fontsize=9, va="top", color=GOOD if one_stride else BAD,
                gid=f"verdict-{name}")

    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(bottom, top + 2.1)
    ax.set_aspect("equal")
    ax.set_axis_off()
    names = " and ".join(views)
    ax.set_title(f"{names} share one storage; each element reads the cell @k", fontsize=11)
    plt.close(fig)
    return fig


def draw_residual_matrix(pairs, *, right=None):
    """The ``(N, N)`` tensor of the broadcasting bug as a heat map, its diagonal outlined.

    ``pred - target`` with ``pred`` of shape ``(N, 1)`` and ``target`` of shape ``(N,)`` gives
    every prediction minus every target. Only the diagonal, ``pred[i] - target[i]``, is what was
    meant; the other ``N² - N`` cells are the bug, and they all go into a loss that raises no
    error. ``pairs`` is that ``(N, N)`` tensor (or array) as the notebook computed it; ``right``,
    if given, is the ``(N,)`` of correct residuals, and must equal the diagonal.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Rectangle

    values = np.asarray(pairs.detach().cpu() if hasattr(pairs, "detach") else pairs, dtype=float)
    if values.ndim != 2 or values.shape[0] != values.shape[1] or values.shape[0] == 0:
        raise ValueError(f"draw_residual_matrix draws an (N, N) matrix, not shape {values.shape}")
    n = values.shape[0]
    if right is not None:
        right = np.asarray(right.detach().cpu() if hasattr(right, "detach") else right, dtype=float)
        if right.shape != (n,) or not np.allclose(np.diag(values), right):
            raise ValueError("right must be the (N,) residuals pred[i] - target[i]: the diagonal")
    limit = float(np.abs(values).max()) or 1.0
    fig, ax = plt.subplots(figsize=(6.5, 4.8))
    image = ax.imshow(values, cmap="PuOr", vmin=-limit, vmax=limit)
    colourbar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    colourbar.set_label("pred[i] − target[j]", fontsize=10)
    for i in range(n):
        for j in range(n):
            dark = abs(values[i, j]) > 0.6 * limit
            ax.text(j, i, f"{values[i, j]:+.2f}", ha="center", va="center", fontsize=9,
                    color="white" if dark else "black", fontweight="bold" if i == j else "normal")
        ax.add_patch(Rectangle((i - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black",
                               linewidth=2.5, gid=f"diagonal-{i}"))
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xlabel("target index j (target has shape (N,))", fontsize=10)
    ax.set_ylabel("prediction index i (pred has shape (N, 1))", fontsize=10)
    ax.set_title(
        f"pred − target is ({n}, {n}): only the outlined diagonal is pred[i] − target[i];\n"
        f"the other {n * n - n} cells are the bug, averaged into the loss without an error",
        fontsize=10,
    )
    fig.tight_layout()
    plt.close(fig)
    return fig
