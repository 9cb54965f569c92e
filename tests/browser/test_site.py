"""The website as a reader meets it, in a real browser: every page loads without an error, every
figure is a real picture, the navigation and the search work, and the exercises are shown as a
learner meets them (a stub, and a check that says "not attempted"), and each chapter opens its
own notebook in Colab and Kaggle when the site was built for a GitHub repository.

The site is the one ``./course book`` built (``--site``, default _site/), served over HTTP on
the loopback address, as GitHub Pages would serve it. A full-page screenshot of each page is
kept in the artifacts folder (``--artifacts``).
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
# A figure is a picture when its pixels are not all (nearly) one colour: a blank PNG, or one
# that decoded to nothing, has a single colour.
MIN_DISTINCT_COLOURS = 8

COUNT_COLOURS = """img => {
    const canvas = document.createElement("canvas");
    canvas.width = Math.min(img.naturalWidth, 400);
    canvas.height = Math.min(img.naturalHeight, 400);
    const context = canvas.getContext("2d");
    context.drawImage(img, 0, 0, canvas.width, canvas.height);
    const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
    const colours = new Set();
    for (let i = 0; i < data.length; i += 4) colours.add((data[i] >> 4) << 8 | (data[i + 1] >> 4) << 4 | data[i + 2] >> 4);
    return colours.size;
}"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(pytestconfig) -> Path:
    folder = Path(pytestconfig.getoption("--site"))
    if not (folder / "index.html").exists():
        pytest.fail(f"no website in {folder}: build it with ./course book", pytrace=False)
    return folder


@pytest.fixture(scope="module")
def site_url(site):
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def open_page(page, url: str) -> None:
    page.goto(url, wait_until="networkidle")
    # MathJax typesets after load; wait until it says it is done, where the page has math.
    page.wait_for_function("() => !window.MathJax || !MathJax.startup || MathJax.startup.promise"
                           " && (MathJax.startup.promise.then(() => window.__typeset = true), true)")
    page.wait_for_function("() => !window.MathJax || window.__typeset === true")


def figures_in_notebook(site: Path, chapter: str) -> int:
    """How many pictures the executed notebook behind the page displayed."""
    nb = json.loads((site / "_sources" / "chapters" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    return sum(1 for cell in nb["cells"] for output in cell.get("outputs", [])
               if {"image/png", "image/svg+xml", "image/jpeg"} & set(output.get("data", {})))


def figures_that_are_not_pictures(page) -> list[str]:
    """Each image of the page that did not load, or loaded blank, described for the report."""
    problems = []
    for index, img in enumerate(page.locator("img").all()):
        img.scroll_into_view_if_needed()
        loaded = img.evaluate("img => img.complete && img.naturalWidth > 0")
        source = (img.get_attribute("src") or "")[:80]
        if not loaded:
            problems.append(f"image {index} ({source}) did not load")
            continue
        colours = img.evaluate(COUNT_COLOURS)
        if img.evaluate("img => !!img.closest('.cell_output')") and colours < MIN_DISTINCT_COLOURS:
            problems.append(f"figure {index} ({source}) is blank: {colours} colour(s)")
    return problems


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapter_page_shows_every_figure_and_no_error(page, site, site_url, artifacts, chapter):
    open_page(page, f"{site_url}/chapters/{chapter}.html")
    assert page.locator(".cell_output img").count() == figures_in_notebook(site, chapter)
    assert figures_that_are_not_pictures(page) == []
    assert page.problems == [], f"{chapter}: the browser reported problems"
    # The notebook's title is the page's title, and the page says how to run it yourself.
    assert page.locator("h1").first.inner_text().startswith(chapter[:2])
    assert page.get_by_text("Run it yourself.").count() == 1
    page.screenshot(path=str(artifacts / f"site-{chapter}.jpeg"), full_page=True, type="jpeg", quality=60)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_exercises_are_shown_as_a_learner_meets_them(page, site, site_url, chapter):
    open_page(page, f"{site_url}/chapters/{chapter}.html")
    nb = json.loads((site / "_sources" / "chapters" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    checks = sum(1 for cell in nb["cells"] if re.search(r"^ex\.\w+\.check\(", "".join(cell["source"]), re.M))
    headings = page.locator("h2, h3, h4").filter(has_text="✎ Exercise")
    unsolved = page.locator(".cell_output").filter(has_text=re.compile("⏳ .*: not attempted"))
    assert checks > 0 and headings.count() == checks, f"{chapter}: {headings.count()} exercises, {checks} checks"
    assert unsolved.count() == checks, "every exercise's check says 'not attempted'"
    passed = page.locator(".cell_output").filter(has_text=re.compile("✅ .*: passed"))
    assert passed.count() == 0, "no exercise is solved on the site"
    assert page.locator(".cell_input").filter(has_text="YOUR CODE HERE").count() >= checks, "each shows its stub"


def test_the_front_page_leads_to_every_chapter_in_order(page, site_url, artifacts):
    open_page(page, f"{site_url}/index.html")
    assert page.problems == []
    navigation = page.locator("nav.bd-links a.reference.internal")
    linked = [Path(href.split("#")[0]).stem for href in navigation.evaluate_all(
        "links => links.map(link => link.getAttribute('href'))")]
    assert [name for name in linked if name in CHAPTERS] == CHAPTERS
    page.screenshot(path=str(artifacts / "site-index.jpeg"), full_page=True, type="jpeg", quality=60)
    # Next, next, ...: the reader can walk the whole course in order.
    visited = []
    page.locator("a.right-next").click()
    for _ in CHAPTERS:
        page.wait_for_load_state("networkidle")
        visited.append(Path(page.url).stem)
        following = page.locator("a.right-next")
        if following.count() == 0:
            break
        following.click()
    assert visited == CHAPTERS


def test_the_search_finds_a_chapter_by_what_it_teaches(page, site_url):
    page.goto(f"{site_url}/search.html?q=broadcasting", wait_until="networkidle")
    results = page.locator("#search-results a")
    results.first.wait_for(timeout=15_000)
    assert any("01_tensors" in (href or "") for href in results.evaluate_all(
        "links => links.map(link => link.getAttribute('href'))"))
    assert page.problems == []


def test_each_page_offers_its_notebook_for_download(page, site_url):
    open_page(page, f"{site_url}/chapters/01_tensors.html")
    # The site's own copy (a relative link): Colab's and Kaggle's addresses end in .ipynb too.
    link = page.locator("a[href$='.ipynb']:not([href^='http'])").first
    response = page.request.get(f"{site_url}/chapters/{link.get_attribute('href')}")
    assert response.ok and '"nbformat"' in response.text()


@pytest.fixture(scope="module")
def built_for(site) -> dict:
    """What ``./course book`` says the site was built for (its _course.json): the repository
    (None when none was set) and the branch that the Colab and Kaggle buttons open."""
    facts = site / "_course.json"
    if not facts.exists():
        pytest.fail(f"{facts} is missing: rebuild the site with ./course book", pytrace=False)
    return json.loads(facts.read_text(encoding="utf-8"))


def test_each_chapter_opens_its_own_notebook_in_colab_and_kaggle_or_none_without_a_repository(
        page, site, site_url, built_for):
    """With a GitHub repository set at build time (CI sets one), every chapter page has an
    "Open in Colab" and an "Open in Kaggle" button for its own learner notebook on the built
    branch; with none set, no link to either at all."""
    repository, branch = built_for["repository_url"], built_for["branch"]
    github = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)", repository or "")
    assert built_for["open_in"] == bool(github), f"the site was built for {repository!r}"
    for chapter in CHAPTERS:
        open_page(page, f"{site_url}/chapters/{chapter}.html")
        buttons = {name: page.get_by_role("link", name=name, exact=True)
                   for name in ("Open in Colab", "Open in Kaggle")}
        elsewhere = page.locator("a[href*='colab.research.google.com'], a[href*='kaggle.com']")
        if not github:
            assert elsewhere.count() == 0, f"{chapter}: a Colab/Kaggle link, but no repository was set"
            continue
        notebook = f"{github.group(1)}/blob/{branch}/notebooks/{chapter}.ipynb"
        assert buttons["Open in Colab"].count() == 1 and buttons["Open in Kaggle"].count() == 1, chapter
        assert buttons["Open in Colab"].get_attribute("href") == (
            f"https://colab.research.google.com/github/{notebook}")
        assert buttons["Open in Kaggle"].get_attribute("href") == (
            f"https://kaggle.com/kernels/welcome?src=https://github.com/{notebook}")
        assert elsewhere.count() == 2, f"{chapter}: only the two buttons lead to Colab or Kaggle"
        for button in buttons.values():
            assert button.is_visible(), f"{chapter}: {button} is not visible"
        # Next to them, the page's own notebook, the one the theme's download button gives.
        download = page.get_by_role("link", name="Download the notebook", exact=True)
        response = page.request.get(f"{site_url}/chapters/{download.get_attribute('href')}")
        assert response.ok and '"nbformat"' in response.text()
        assert page.problems == [], f"{chapter}: the browser reported problems"
