"""A real browser for the course's browser tests: headless Chromium driven by Playwright.

These tests run in their own environment (``./course test-browser`` makes it from
requirements-browser.txt), never in the learner's .venv, and are not collected by
``./course test``. The browser is the first of: ``COURSE_CHROMIUM``, Debian's or Ubuntu's
``chromium``, Google Chrome, Playwright's own download. Without one the tests fail and say how
to install one: a browser test that skips itself would pass while testing nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Chromium on a machine with no network (CI's): no background connections, no update checks,
# no first-run dialogs; root (CI, containers) needs --no-sandbox.
CHROMIUM_ARGS = [
    "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps",
]


def pytest_addoption(parser):
    group = parser.getgroup("course browser tests")
    group.addoption("--site", default=str(ROOT / "_site"),
                    help="the website ./course book built (default: _site/)")
    group.addoption("--course-python", default=str(ROOT / ".venv" / "bin" / "python"),
                    help="the course's Python, which runs JupyterLab (default: .venv/bin/python)")
    group.addoption("--artifacts", default=str(ROOT / ".course" / "browser-screenshots"),
                    help="where screenshots are kept (default: .course/browser-screenshots/)")


def find_chromium() -> str | None:
    """A Chromium-family browser's executable, or None to let Playwright use its own."""
    named = os.environ.get("COURSE_CHROMIUM")
    if named:
        return named
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def artifacts(pytestconfig) -> Path:
    folder = Path(pytestconfig.getoption("--artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def course_python(pytestconfig) -> Path:
    python = Path(pytestconfig.getoption("--course-python"))
    if not python.exists():
        pytest.fail(f"{python} does not exist: run ./course setup first")
    return python


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import Error, sync_playwright

    executable = find_chromium()
    args = CHROMIUM_ARGS + (["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=executable, args=args, headless=True)
        except Error as error:
            pytest.fail(
                f"could not start Chromium ({executable or 'Playwright’s own'}): {error}\n"
                "Install one (Debian/Ubuntu: apt-get install chromium), point COURSE_CHROMIUM at "
                f"it, or run: {sys.executable} -m playwright install chromium", pytrace=False)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A fresh page that records what a person would see go wrong: console errors, uncaught
    exceptions and requests that failed, in ``page.problems``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda message: problems.append(f"console {message.type}: {message.text}")
            if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    page.on("requestfailed", lambda request: problems.append(
        f"request failed: {request.url} ({request.failure})"))
    page.problems = problems
    yield page
    context.close()
