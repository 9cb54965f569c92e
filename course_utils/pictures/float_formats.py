"""The 16-bit float formats, drawn: where their bits go, what range that buys, and loss scaling.

Chapter 05 prints ``torch.finfo`` for float32, float16 and bfloat16 and shows a gradient that
underflows in float16. Three rows of numbers (65504, 6.1e-05, 1.2e-38...) do not show what a
learner needs to see: that bfloat16 spends its bits on the exponent (float32's range, few
digits) while float16 spends them on the mantissa (digits, a narrow range), and that real
gradients sit partly below float16's smallest number until ``GradScaler`` multiplies them up.
"""

from __future__ import annotations

import math

SIGN, EXPONENT, MANTISSA = "#7f7f7f", "#1f77b4", "#ff7f0e"
GRADIENTS, SCALED = "#d62728", "#2ca02c"


def bit_layout(info) -> tuple[int, int, int]:
    """(sign, exponent, mantissa) bits of a format, read from a ``torch.finfo``-like object.

    ``eps`` is 2 to the minus number of stored mantissa bits, and the sign takes one bit.
    """
    bits = int(info.bits)
    mantissa = round(-math.log2(float(info.eps)))
    exponent = bits - 1 - mantissa
    if bits <= 0 or mantissa <= 0 or exponent <= 0:
        raise ValueError(f"not a floating-point format: bits={info.bits}, eps={info.eps}")
    return 1, exponent, mantissa


def _number(x: float) -> str:
    """65504 as 65504, 3.4028e+38 as 3.4e+38: exact where it is short enough to read."""
    return f"{x:.0f}" if 1 <= x < 1e6 and x == int(x) else f"{x:.2g}"


def _log_axis(ax) -> None:
    """A log x axis labelled 1e-08, 1e+00, ...: plain text, not mathtext (slow to parse first)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"1e{round(math.log10(v)):+03d}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _check(name: str, info) -> None:
    for attribute in ("bits", "eps", "tiny", "max"):
        if not hasattr(info, attribute):
            raise ValueError(f"{name}: give torch.finfo(dtype) (it has no {attribute!r})")
    if not 0 < float(info.tiny) < float(info.max) or not math.isfinite(float(info.max)):
        raise ValueError(f"{name}: the range must be 0 < smallest normal < largest finite")


def float_formats(formats, gradients=None, scale=None, *, zoom="float16",
                  gradient_label="gradients"):
    """Bit layouts and ranges of float formats, and (optionally) loss scaling of gradients.

    ``formats`` maps a name to ``torch.finfo(dtype)`` (anything with ``bits``, ``eps``, ``tiny``
    and ``max``). The top panel draws each format's sign / exponent / mantissa bits as boxes to
    scale, with their counts; the middle panel draws each format's range on one log axis: normal
    numbers from ``tiny`` (smallest normal) to ``max`` (largest finite), and the subnormals below
    ``tiny`` (down to ``tiny * eps``) lighter, since they keep ever fewer digits.

    ``gradients``, a pair ``(low, high)`` of gradient magnitudes the notebook measured, adds a
    bottom panel that zooms on the format named ``zoom``: what falls below its smallest
    subnormal becomes 0, what passes its largest number becomes inf, and the gradients are a
    band labelled ``gradient_label``. With ``scale`` (a ``GradScaler`` scale such as 65536) the
    band multiplied by the scale is drawn under it, with an arrow: loss scaling moves the
    gradients up into the format's range. Returns the figure, closed in pyplot.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    formats = dict(formats)
    if not formats:
        raise ValueError("float_formats needs at least one format")
    for name, info in formats.items():
        _check(name, info)
    if gradients is not None:
        low, high = (float(g) for g in gradients)
        if not 0 < low <= high or not math.isfinite(high):
            raise ValueError(f"gradients must be magnitudes 0 < low <= high, not {gradients!r}")
        if zoom not in formats:
            raise ValueError(f"zoom={zoom!r} is not one of the formats {list(formats)}")
    if scale is not None:
        if gradients is None:
            raise ValueError("scale needs gradients: it is drawn as the gradients moved up")
        if not float(scale) > 1:
            raise ValueError(f"a loss scale is a factor above 1, not {scale!r}")

    names = list(formats)
    n = len(names)
    panels = 3 if gradients is not None else 2
    ratios = [0.8, 1.0, 1.1][:panels]
    fig, axes = plt.subplots(panels, 1, figsize=(8, 1.2 + 1.0 * n + (2.0 if panels == 3 else 0)),
                             gridspec_kw={"height_ratios": ratios}, layout="constrained")
    bits_ax, range_ax = axes[0], axes[1]

    # Top: the bits, one box per field, to scale (a 32-bit format spans the whole width).
    widest = max(int(formats[name].bits) for name in names)
    for row, name in enumerate(names):
        y = n - 1 - row
        x = 0.0
        for field, count, colour in zip(("sign", "exponent", "mantissa"),
                                        bit_layout(formats[name]), (SIGN, EXPONENT, MANTISSA)):
            bits_ax.add_patch(Rectangle((x, y + 0.1), count, 0.8, facecolor=colour,
                                        edgecolor="white", alpha=0.85))
            text = f"{field} {count}" if field != "sign" and count >= 7 else str(count)
            bits_ax.text(x + count / 2, y + 0.5, text, ha="center", va="center",
                         fontsize=9, color="white", fontweight="bold")
            x += count
        bits_ax.text(-0.6, y + 0.5, f"{name}\n{int(formats[name].bits)} bits", ha="right",
                     va="center", fontsize=10)
    bits_ax.set_xlim(-7, widest + 0.5)
    bits_ax.set_ylim(-0.1, n + 0.05)
    bits_ax.set_axis_off()
    handles = [Rectangle((0, 0), 1, 1, color=c, alpha=0.85) for c in (SIGN, EXPONENT, MANTISSA)]
    bits_ax.legend(handles, ["sign", "exponent bits: the range", "mantissa bits: the digits"],
                   loc="lower center", bbox_to_anchor=(0.5, 0.97), ncol=3, fontsize=9,
                   frameon=False)
    bits_ax.set_title("where the bits go: bfloat16 keeps float32's exponent, float16 keeps "
                      "more of its mantissa\n", fontsize=11)

    # Middle: the ranges, on one log axis.
    for row, name in enumerate(names):
        info = formats[name]
        y = n - 1 - row
        tiny, largest = float(info.tiny), float(info.max)
        smallest = tiny * float(info.eps)  # the smallest subnormal
        range_ax.barh(y, largest - tiny, left=tiny, height=0.5, color=EXPONENT, alpha=0.8)
        range_ax.barh(y, tiny - smallest, left=smallest, height=0.5, color=EXPONENT, alpha=0.3)
        range_ax.annotate(_number(largest), (largest, y), xytext=(3, 0),
                          textcoords="offset points", va="center", fontsize=9)
        range_ax.annotate(f"{tiny:.2g}", (tiny, y + 0.25), xytext=(0, 2),
                          textcoords="offset points", ha="center", va="bottom", fontsize=9)
    range_ax.set_yticks(range(n))
    range_ax.set_yticklabels(list(reversed(names)), fontsize=10)
    _log_axis(range_ax)
    lowest = min(float(formats[m].tiny) * float(formats[m].eps) for m in names)
    highest = max(float(formats[m].max) for m in names)
    range_ax.set_xlim(lowest / 1e3, highest * 1e9)
    range_ax.set_ylim(-0.5, n - 0.2)
    range_ax.set_xlabel("magnitude (log scale); labelled: smallest normal and largest finite "
                        "number; lighter: subnormals", fontsize=9)
    range_ax.grid(alpha=0.3, axis="x")
    range_ax.set_title("the range of each format: float16 is narrow, bfloat16 is as wide as "
                       "float32", fontsize=11)

    if gradients is not None:
        _draw_zoom(axes[2], zoom, formats[zoom], low, high, scale, gradient_label)
    plt.close(fig)
    return fig


def _draw_zoom(ax, name, info, low, high, scale, label):
    """One format's range close up, with the gradients and (if given) the scaled gradients."""
    tiny, largest = float(info.tiny), float(info.max)
    smallest = tiny * float(info.eps)
    top = max(high * (float(scale) if scale is not None else 1.0), largest)
    left, right = min(low, smallest) / 30, top * 3000
    _log_axis(ax)
    ax.set_xlim(left, right)
    ax.axvspan(left, smallest, color="#7f7f7f", alpha=0.25, lw=0)
    ax.axvspan(smallest, tiny, color=EXPONENT, alpha=0.12, lw=0)
    ax.axvspan(tiny, largest, color=EXPONENT, alpha=0.28, lw=0)
    ax.axvspan(largest, right, color="#7f7f7f", alpha=0.25, lw=0)
    rows = [(label, low, high, GRADIENTS)]
    if scale is not None:
        s = float(scale)
        rows.append((f"{label} × {s:g}", low * s, high * s, SCALED))
    for row, (text, a, b, colour) in enumerate(rows):
        y = len(rows) - 1 - row
        ax.plot([a, b], [y, y], color=colour, lw=8, solid_capstyle="butt")
        ax.annotate(text, (b, y), xytext=(6, 0), textcoords="offset points", va="center",
                    fontsize=9, color=colour)
    if scale is not None:
        middle = math.sqrt(low * high)
        ax.annotate("", (middle * float(scale), 0.15), xytext=(middle, 0.85),
                    arrowprops={"arrowstyle": "->", "color": SCALED, "lw": 1.5})
    ax.set_ylim(-0.8, len(rows) - 0.2 + 0.9)
    label_y = len(rows) - 0.3 + 0.55
    for x, text in ((math.sqrt(left * smallest), "becomes 0"),
                    (math.sqrt(smallest * tiny), "subnormal"),
                    (math.sqrt(tiny * largest), f"{name}: normal numbers"),
                    (math.sqrt(largest * right), "becomes inf")):
        ax.text(x, label_y, text, ha="center", va="center", fontsize=9, color="#333333")
    ax.set_yticks([])
    ax.set_xlabel(f"magnitude (log scale): {name} from {smallest:.2g} (subnormal) and "
                  f"{tiny:.2g} (normal) to {_number(largest)}", fontsize=9)
    title = f"close up on {name}: where the {label} are"
    if scale is not None:
        title = f"close up on {name}: loss scaling moves the {label} up, into its range"
    ax.set_title(title, fontsize=11)
