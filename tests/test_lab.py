"""The course's JupyterLab starts clean: no news prompt, no update check, the course's kernel."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "course-test-token"
needs_set_up_course = pytest.mark.skipif(
    Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
    reason="needs the course's own .venv, set up by ./course setup",
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture
def lab(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}",
         f"--ServerApp.root_dir={ROOT}", "--allow-root"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        env={**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
             "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "user-settings"),
             "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get(port, "/api/status")
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("JupyterLab did not start within 60 s")
                time.sleep(0.3)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


@needs_set_up_course
def test_jupyterlab_neither_asks_about_news_nor_checks_for_updates(lab):
    # The course's overrides become the defaults JupyterLab's front end starts from.
    schema = get(lab, "/lab/api/settings/@jupyterlab/apputils-extension:notification")["schema"]
    assert schema["properties"]["fetchNews"]["default"] == "false", "JupyterLab would ask"
    assert schema["properties"]["checkForUpdates"]["default"] is False


@needs_set_up_course
def test_the_course_kernel_is_offered_and_runs_this_venv(lab):
    specs = get(lab, "/api/kernelspecs")["kernelspecs"]
    spec = specs["pytorch-course"]["spec"]
    assert spec["display_name"] == "Python (PyTorch course)"
    assert Path(spec["argv"][0]).parent == Path(sys.executable).parent
