"""course_utils.pictures.show: every picture reaches the page as a PNG, whatever the backend."""

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from course_utils.pictures import show  # noqa: E402


def test_show_displays_the_figure_once_as_a_png(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.bar([0, 1], [1, 2], color="#d62728")
    plt.close(fig)
    show(fig)
    assert len(shown) == 1 and isinstance(shown[0], IPython.display.Image)
    png = PILImage.open(io.BytesIO(shown[0].data))
    assert png.format == "PNG" and png.width > 50
    colours = png.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 2, "the picture came out blank"
