"""Checkpoints in pictures (chapter 07, section S2): a resume you can see, and the atomic save.

Two pictures. ``draw_resume_curves`` puts the validation losses of an uninterrupted run and of
its resumed copies on one axis with the resume marked, so "bit for bit the same run" and "not the
same run" become one line on top of another, or one that leaves it. ``draw_atomic_save`` is a
diagram of the three steps of ``save_atomically`` and of what a crash at each point leaves.
"""

from __future__ import annotations

import math

# The uninterrupted run is the reference: a wide grey band the others are drawn on top of.
REFERENCE_STYLE = dict(color="#7f7f7f", linewidth=6, alpha=0.45, marker="", linestyle="-")
RESUMED_STYLES = (
    dict(color="#d62728", linewidth=1.8, marker="s", markersize=5, linestyle="--"),
    dict(color="#1f77b4", linewidth=1.8, marker="o", markersize=4, linestyle="-"),
    dict(color="#ff7f0e", linewidth=1.8, marker="^", markersize=5, linestyle=":"),
)


def draw_resume_curves(val_losses: dict, resumed_after: int, *, title: str | None = None):
    """Validation loss per epoch of an uninterrupted run and of resumed runs, the resume marked.

    Why this picture: "same weights, bit for bit" is a yes or no; the curves show what a
    wrong resume costs and where it starts. Before the checkpoint every run is the same run, so
    the lines lie on top of each other; after it, a resume that restored everything stays on
    the uninterrupted run and one that restored the weights only goes its own way.

    ``val_losses`` maps a run's name to its validation loss after each epoch (epoch 1 first),
    the first entry being the uninterrupted run (drawn as a wide grey band underneath).
    ``resumed_after`` is the number of epochs finished when the checkpoint was saved: a dashed
    vertical line is drawn there. Returns a Figure closed in pyplot.
    """
    from course_utils.plots import plot_curves

    if not val_losses:
        raise ValueError("give at least the uninterrupted run: {name: [val loss per epoch]}")
    runs = {str(name): [float(v) for v in losses] for name, losses in val_losses.items()}
    epochs = max(len(losses) for losses in runs.values())
    if any(not losses for losses in runs.values()):
        raise ValueError("every run needs at least one validation loss")
    if not 1 <= int(resumed_after) < epochs:
        raise ValueError(
            f"resumed_after counts the epochs finished before the checkpoint: between 1 and "
            f"{epochs - 1} for runs of {epochs} epochs, not {resumed_after}"
        )
    if len(runs) > 1 + len(RESUMED_STYLES):
        raise ValueError(f"at most {len(RESUMED_STYLES)} resumed runs next to the uninterrupted one")
    fig = plot_curves(
        runs,
        title=title or "validation loss: does the resumed run stay on the uninterrupted one?",
        ylabel="validation loss (cross-entropy)",
        xlabel="epoch",
    )
    ax = fig.axes[0]
    for line, style in zip(ax.lines, (REFERENCE_STYLE, *RESUMED_STYLES)):
        line.set(**style)
    ax.lines[0].set_zorder(1)
    resume_line = ax.axvline(
        resumed_after + 0.5, color="black", linestyle="--", linewidth=1.2, zorder=0,
        label=f"checkpoint saved after epoch {resumed_after}, run resumed",
    )
    resume_line.set_gid("resume")
    ax.set_xticks(range(1, epochs + 1))
    finite = [v for losses in runs.values() for v in losses if math.isfinite(v)]
    if finite:
        low, high = min(finite), max(finite)
        pad = 0.08 * (high - low or abs(high) or 1.0)
        ax.set_ylim(low - pad, high + pad)
    ax.title.set_fontsize(10)
    fig.set_size_inches(7.0, 4.0)
    ax.legend(fontsize=9, loc="upper right", framealpha=0.9)
    fig.tight_layout()
    return fig


STEPS = (
    ("1. write aside", "torch.save(obj, tmp)\ntmp: .checkpoint.pt.abc.tmp,\nin the same folder"),
    ("2. flush + fsync", "file.flush()\nos.fsync(file.fileno())\nthe bytes are on the disk"),
    ("3. replace", "os.replace(tmp, path)\none atomic rename: the\nname now means the new file"),
)
CRASHES = (
    ("crash during step 1", "checkpoint.pt: the OLD one,\nwhole (a stray .tmp\nmay be left behind)"),
    ("crash during step 2", "checkpoint.pt: the OLD one,\nwhole (the new one is\nonly in the .tmp)"),
    ("crash in or after step 3", "checkpoint.pt: the NEW one,\nwhole (the rename is\nall or nothing)"),
)


def draw_atomic_save():
    """The atomic save as a diagram: temporary file, fsync, rename; and what a crash leaves.

    Why this picture: the safety of ``save_atomically`` is an argument about *when* a crash
    can happen, which reads more easily as a timeline than as prose. A plain ``torch.save`` onto
    the real name (top row) empties the old file before writing, so a crash half-way leaves
    half a file; the atomic save (bottom row) never touches the real name until a single
    rename, so a crash at any point leaves either the old checkpoint or the new one, whole.
    Returns a Figure closed in pyplot; the boxes carry gids ``step``, ``crash`` and ``plain``.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    fig, ax = plt.subplots(figsize=(8.0, 5.2))
    ax.set_xlim(0, 12)
    ax.set_ylim(0, 8.6)
    ax.axis("off")
    red, green, blue, grey = "#d62728", "#2ca02c", "#1f77b4", "#7f7f7f"

    def box(x, y, w, h, text, *, edge, face, gid, size=9, weight="normal"):
        patch = FancyBboxPatch(
            (x, y), w, h, boxstyle="round,pad=0.05,rounding_size=0.15", linewidth=1.5,
            edgecolor=edge, facecolor=face, gid=gid,
        )
        ax.add_patch(patch)
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size,
                weight=weight, family="DejaVu Sans")
        return patch

    def arrow(x0, y0, x1, y1, colour="black", style="-|>"):
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle=style, mutation_scale=14,
                                     color=colour, linewidth=1.4))

    # Top row: the plain torch.save onto the real name.
    ax.text(0.1, 8.3, 'torch.save(obj, "checkpoint.pt"): not safe', fontsize=10, weight="bold",
            color=red, va="center")
    box(0.1, 6.5, 3.7, 1.3, "open checkpoint.pt to write:\nthe old checkpoint is\nemptied at once",
        edge=red, face="#fbe3e3", gid="plain")
    arrow(3.82, 7.15, 4.13, 7.15)
    box(4.15, 6.5, 3.7, 1.3, "write the new bytes\ninto checkpoint.pt", edge=red, face="#fbe3e3",
        gid="plain")
    arrow(7.87, 7.15, 8.18, 7.15, colour=red)
    box(8.2, 6.5, 3.7, 1.3, "crash half-way:\nhalf a file, both\ncheckpoints lost", edge=red,
        face="white", gid="plain", weight="bold")

    # Bottom row: save_atomically.
    ax.text(0.1, 5.75, "save_atomically(obj, \"checkpoint.pt\"): safe",
            fontsize=10, weight="bold", color=green, va="center")
    xs = (0.1, 4.15, 8.2)
    width = 3.7
    for x, (head, body) in zip(xs, STEPS):
        box(x, 3.4, width, 1.9, f"{head}\n{body}", edge=blue, face="#e1ecf7", gid="step")
    for x in xs[:2]:
        arrow(x + width + 0.02, 4.35, x + 4.05 - 0.02, 4.35)
    # What a crash at each point leaves: below each step.
    for x, (head, body) in zip(xs, CRASHES):
        old = "OLD" in body
        colour = grey if old else green
        arrow(x + width / 2, 3.35, x + width / 2, 2.55, colour=colour)
        box(x, 0.9, width, 1.55, f"{head}:\n{body}", edge=colour, face="#f0f0f0" if old else "#e3f3e3",
            gid="crash")
    ax.text(6.0, 0.35, "the real name only ever changes in step 3, in one step: "
            "old or new, never half of one",
            ha="center", va="center", fontsize=9.5, color="black")
    ax.set_title("an atomic save: write aside, fsync, then rename onto the real name",
                 fontsize=11)
    fig.tight_layout()
    plt.close(fig)
    return fig
