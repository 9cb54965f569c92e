"""Sphinx configuration of the course's website (built by ``./course book``).

Sphinx with MyST-NB renders the executed notebooks; the Sphinx Book Theme gives the chapter
navigation, the search box and a download button for each page's notebook. Everything a page
needs is served from the site itself (MathJax included), so it works offline and a test can
require that no request fails.
"""

import os
import shutil
from pathlib import Path

project = "PyTorch, from a working environment to a training loop you can trust"
author = "the course's authors"
html_title = "PyTorch: a training loop you can trust"
language = "en"

extensions = ["myst_nb"]
# Pages are executed before Sphinx sees them (course_utils/book/execute.py), in the course's
# own kernel; Sphinx renders what they printed.
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath"]
master_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
suppress_warnings = ["mystnb.unknown_mime_type"]

html_theme = "sphinx_book_theme"
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_favicon = "_static/favicon.svg"  # the ∇ of gradients; without one, every page 404s on /favicon.ico
# Figures are drawn on white: light unless the reader picks another mode (the theme's switch).
html_context = {"default_mode": "light"}
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
}
repository = os.environ.get("COURSE_REPOSITORY_URL", "").strip()
if repository:
    html_theme_options.update({"repository_url": repository, "use_repository_button": True})


def _local_mathjax() -> str:
    """Copy MathJax 3 (from the django-static-mathjax wheel) into _static; its path there."""
    import mathjax  # the wheel's package: static/mathjax/es5/...

    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = Path(__file__).parent / "_static" / "mathjax"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shutil.copy2(es5 / "tex-chtml.js", target / "tex-chtml.js")
    shutil.copytree(es5 / "output" / "chtml" / "fonts" / "woff-v2",
                    target / "output" / "chtml" / "fonts" / "woff-v2")
    return "mathjax/tex-chtml.js"


mathjax_path = _local_mathjax()
