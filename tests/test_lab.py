"""The course's JupyterLab starts clean: no news prompt, no update check, no warning about
eavesdropping on kernels, and the course's kernel. Set-up writes the settings into .venv."""

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
def lab_log(tmp_path):
    return tmp_path / "lab.log"


@pytest.fixture
def lab(tmp_path, lab_log):
    port = free_port()
    log = open(lab_log, "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}",
         f"--ServerApp.root_dir={ROOT}", "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
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
        log.close()


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


def run_code(port, kernel_id, code):
    """Run ``code`` in a kernel of the server, as JupyterLab does; return its stream output."""
    import uuid

    import websocket  # websocket-client, which comes with jupyter_server

    ws = websocket.create_connection(
        f"ws://127.0.0.1:{port}/api/kernels/{kernel_id}/channels?token={TOKEN}", timeout=60)
    try:
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test",
                       "session": uuid.uuid4().hex, "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": False,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
        }))
        out = ""
        while True:
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out += msg["content"]["text"]
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return out
    finally:
        ws.close()


@needs_set_up_course
def test_kernels_talk_over_local_sockets_so_none_warns_about_eavesdropping(lab, lab_log):
    request = urllib.request.Request(
        f"http://127.0.0.1:{lab}/api/kernels", data=json.dumps({"name": "pytorch-course"}).encode(),
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        kernel_id = json.loads(response.read())["id"]
    assert run_code(lab, kernel_id, "import sys; print(sys.prefix)").strip() == sys.prefix
    time.sleep(0.5)
    log = lab_log.read_text()
    assert "Kernel started" in log, log[-2000:]
    assert "without encryption" not in log and "eavesdropping" not in log
