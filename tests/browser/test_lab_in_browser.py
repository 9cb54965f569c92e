"""The course's widgets work where learners use them: in JupyterLab, started by ``./course lab``.

Every other test runs the widgets headless, where they are static on purpose (no front end, so
no widget messages). Only a real browser can show that the live explorer renders, answers typed
shapes, and that the graph viewer draws. So this starts JupyterLab the way a learner does,
through ``./course lab``, opens chapters 01 and 02 in Chromium, runs every cell from the Run
menu, types into the broadcasting explorer and looks at what changed, and keeps screenshots.

The notebooks are copies in a temporary folder: the learner's own my-work/ is never opened or
saved by the test (``./course lab`` still brings it up to date first, as it always does).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "course-browser-test-token"
KERNEL = "Python (PyTorch course)"
CHAPTERS = ("01_tensors.ipynb", "02_autograd.ipynb")

# The course's one knob for time limits on slow or busy machines (tests/slow_machine.py, which
# this folder's own pytest run cannot import).
TIME_SCALE = float(os.environ.get("COURSE_TEST_TIME_SCALE", "").strip() or "1")


def seconds(limit: float) -> float:
    return limit * TIME_SCALE


def milliseconds(limit: float) -> float:
    """Playwright counts in milliseconds."""
    return seconds(limit) * 1000


# --------------------------------------------------------------------------------------------
# JupyterLab, started by ./course lab
# --------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(port: int, path: str):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def log_tail(log: Path, characters: int = 4000) -> str:
    return log.read_text(errors="replace")[-characters:]


def lab_environment(tmp: Path) -> dict[str, str]:
    """The learner's environment, with Jupyter's state in throwaway folders and live widgets."""
    env = {**os.environ,
           "JUPYTER_CONFIG_DIR": str(tmp / "config"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp / "user-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
           "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "COURSE_NO_PROGRESS": "1", "COURSE_SMOKE": "1"}
    # Set by ./course test for headless runs; here the explorers must be live widgets.
    env.pop("COURSE_STATIC_WIDGETS", None)
    return env


def wait_for_lab(server: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + seconds(120)
    while True:
        try:
            get_json(port, "/api/status")
            return
        except OSError:
            if server.poll() is not None:
                pytest.fail(f"./course lab exited ({server.returncode}):\n{log_tail(log)}")
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer within {seconds(120):.0f} s:\n"
                            f"{log_tail(log)}")
            time.sleep(0.3)


def stop(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group; the server shuts its kernels down itself."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=seconds(30))
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.fixture(scope="module")
def lab(tmp_path_factory, course_python):
    """The port of JupyterLab, started by ``./course lab``, serving copies of chapters 01, 02."""
    # ./course lab always runs .venv's Python, and without a .venv it would first install one
    # (minutes, from the network): fail at once instead.
    if os.path.realpath(course_python.parent) != os.path.realpath(ROOT / ".venv" / "bin"):
        pytest.fail(f"./course lab runs {ROOT / '.venv' / 'bin' / 'python'}; "
                    f"--course-python={course_python} cannot choose another", pytrace=False)
    tmp = tmp_path_factory.mktemp("lab")
    notebooks = tmp / "notebooks"
    notebooks.mkdir()
    for name in CHAPTERS:
        shutil.copy(ROOT / "notebooks" / name, notebooks / name)
    port, log = free_port(), tmp / "lab.log"
    # ./course lab passes --ServerApp.root_dir=ROOT itself, and Jupyter refuses a second
    # --ServerApp.root_dir (or --notebook-dir): "root_dir only accepts one value". The
    # folder given as `jupyter lab DIR` does replace it, so that is how the copies are served.
    with open(log, "w") as out:
        server = subprocess.Popen(
            [str(ROOT / "course"), "lab", "--no-browser", f"--port={port}",
             "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}", str(notebooks)],
            cwd=ROOT, env=lab_environment(tmp), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_lab(server, port, log)
        served = {item["name"] for item in get_json(port, "/api/contents")["content"]}
        assert served == set(CHAPTERS), (
            f"JupyterLab serves {sorted(served)}, not the copies in {notebooks}:\n{log_tail(log)}")
        yield port
    finally:
        stop(server)


# --------------------------------------------------------------------------------------------
# A notebook in the browser
# --------------------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def patient_expectations():
    """Playwright's checks wait 5 s for what they expect; on a busy machine, scale that too."""
    expect.set_options(timeout=milliseconds(10))
    yield
    expect.set_options(timeout=None)  # back to Playwright's default for other test files


def open_notebook(page, port: int, name: str):
    """Open ``name`` in a fresh workspace (?reset: no other notebook restored beside it) and wait
    for its kernel; return the notebook's panel."""
    page.goto(f"http://127.0.0.1:{port}/lab/tree/{name}?reset&token={TOKEN}")
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(notebook).to_have_count(1, timeout=milliseconds(60))
    wait_for_idle_kernel(page)
    return notebook


def wait_for_idle_kernel(page) -> None:
    # The status bar names the active notebook's kernel and its state, as a learner reads it.
    expect(page.get_by_text(f"{KERNEL} | Idle", exact=True)).to_be_visible(
        timeout=milliseconds(90))


def run_all_cells(page, notebook, limit: float) -> None:
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    wait_until_every_cell_ran(page, notebook, limit)


def prompts(notebook) -> list[str]:
    # textContent, not innerText: cells scrolled out of view are skipped by the browser's
    # renderer (content-visibility) and their innerText is empty.
    return notebook.locator(".jp-CodeCell .jp-InputPrompt").evaluate_all(
        "prompts => prompts.map(p => p.textContent.trim())")


def wait_until_every_cell_ran(page, notebook, limit: float) -> None:
    """Every code cell shows an execution count ("[12]:", not "[*]:" or "[ ]:") and the kernel
    is idle. Idle alone is not enough: it flickers idle between two queued cells."""
    deadline = time.monotonic() + seconds(limit)
    while True:
        shown = prompts(notebook)
        not_run = [i for i, prompt in enumerate(shown) if not re.fullmatch(r"\[\d+\]:", prompt)]
        if shown and not not_run:
            break
        if "[*]:" not in shown and tracebacks(notebook):  # stopped at an error: fail now
            pytest.fail(f"a cell failed, so {len(not_run)} code cells did not run:\n"
                        + "\n".join(tracebacks(notebook)))
        if time.monotonic() > deadline:
            pytest.fail(f"{len(not_run)} of {len(shown)} code cells did not run within "
                        f"{seconds(limit):.0f} s; the first: cell {not_run[0]} shows "
                        f"{shown[not_run[0]]!r}\n{tracebacks(notebook)}")
        time.sleep(0.5)
    wait_for_idle_kernel(page)


def tracebacks(notebook) -> list[str]:
    """The error outputs a learner would see (stderr that holds a traceback; not warnings)."""
    errors = notebook.locator(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
    ).filter(has_text="Traceback")
    return [text[:2000] for text in errors.all_text_contents()]


def code_cell(notebook, source: str):
    cell = notebook.locator(".jp-CodeCell").filter(
        has=notebook.page.locator(".jp-InputArea-editor", has_text=source))
    expect(cell).to_have_count(1)
    return cell


def decoded_width(image) -> int:
    """How wide the picture is once the browser has decoded it; 0 for a broken one. (Right
    after the kernel sends it, an <img> may not be decoded yet: naturalWidth would still be 0.)"""
    return image.evaluate("img => img.decode().then(() => img.naturalWidth, () => 0)")


def centre_in_view(page, element) -> None:
    # Twice: cells that come into view are laid out at their real height (content-visibility),
    # which moves the element after the first scroll.
    for _ in range(2):
        element.evaluate("e => e.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(300)


# --------------------------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------------------------

def test_broadcast_explorer_answers_the_shapes_a_learner_types(lab, page, artifacts):
    notebook = open_notebook(page, lab, "01_tensors.ipynb")
    run_all_cells(page, notebook, limit=90)
    assert tracebacks(notebook) == []

    explorer = notebook.locator(".widget-vbox").filter(
        has=page.locator("label", has_text="a shape")).first
    a_box, b_box = explorer.get_by_label("a shape"), explorer.get_by_label("b shape")
    output, drawing = explorer.locator(".widget-output"), explorer.locator(".widget-output img")
    # The live widget, drawn by the kernel for broadcast_explorer((8, 1, 3), (4, 3)).
    expect(explorer, "no live broadcasting explorer (ipywidgets) in the notebook").to_be_visible()
    expect(a_box).to_have_value("8, 1, 3")
    expect(b_box).to_have_value("4, 3")
    expect(output).to_contain_text("a (8, 1, 3) + b (4, 3): line the shapes up from the right")
    expect(output).to_contain_text("a + b has shape (8, 4, 3)")
    first_drawing = drawing.get_attribute("src")

    type_shape(a_box, "2, 3")
    type_shape(b_box, "3")
    expect(output).to_contain_text("a (2, 3) + b (3,): line the shapes up from the right",
                                   timeout=milliseconds(30))
    expect(output).to_contain_text("a + b has shape (2, 3)")
    expect(drawing).to_have_count(1)
    assert drawing.get_attribute("src") != first_drawing, "the drawing did not change"
    assert decoded_width(drawing) > 0

    type_shape(b_box, "4")
    expect(output).to_contain_text("a (2, 3) + b (4,): line the shapes up from the right",
                                   timeout=milliseconds(30))
    # PyTorch's own words for the clash, as a + b would raise them.
    expect(output).to_contain_text(
        "a + b fails: RuntimeError: The size of tensor a (3) must match the size of tensor b (4)")
    expect(drawing).to_have_count(1)
    assert decoded_width(drawing) > 0

    centre_in_view(page, explorer)
    explorer.screenshot(path=artifacts / "lab-01-broadcast-explorer-widget.png")
    page.screenshot(path=artifacts / "lab-01-broadcast-explorer.png")
    assert page.problems == []


def type_shape(box, shape: str) -> None:
    """Replace the box's text key by key, as a person does (a key JupyterLab took for a
    notebook shortcut would change the notebook instead), then Enter."""
    box.click()
    box.press("ControlOrMeta+a")
    box.press("Backspace")
    box.press_sequentially(shape)
    box.press("Enter")


def test_graph_viewer_draws_the_backward_graph(lab, page, artifacts):
    notebook = open_notebook(page, lab, "02_autograd.ipynb")
    run_all_cells(page, notebook, limit=120)
    assert tracebacks(notebook) == []

    cell = code_cell(notebook, "show_graph(y, names=")
    outputs = cell.locator(".jp-Cell-outputArea")
    drawing = outputs.locator("img")
    expect(drawing, "show_graph drew no picture of the graph").to_have_count(1)
    assert decoded_width(drawing) > 0
    # The text tree under the drawing, with the names the cell gave the tensors.
    tree = outputs.locator("pre")
    expect(tree).to_contain_text("y = AddBackward0")
    expect(tree).to_contain_text("AccumulateGrad → w (3,)")
    expect(tree).to_contain_text("AccumulateGrad → b ()")

    centre_in_view(page, outputs)
    cell.screenshot(path=artifacts / "lab-02-graph-cell.png")
    page.screenshot(path=artifacts / "lab-02-graph.png")
    assert page.problems == []
