"""Chapter 04's lesson on DataLoader workers, run in a real kernel: what a learner sees.

A class defined in a notebook cell lives in ``__main__``, which no other process can import.
Workers started by fork copy the kernel and know the class; spawn (Windows, macOS) and
forkserver (Linux since Python 3.14) pickle the dataset and fail to rebuild it. The chapter's
own cells run here in one kernel, followed by the cases the chapter only tells: fork works,
and ``multiprocessing_context=None`` means Python's default start method.

The same run checks that the cell shows the lesson's real error and nothing else: in
particular not ipykernel's start-up warning "Kernel is running over TCP without encryption",
which a kernel logs once to the terminal that started it (never into a cell, and never from
the spawned workers, which import no part of Jupyter).
"""

import json
import multiprocessing
import os
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

CHAPTER = Path(__file__).resolve().parents[1] / "solutions" / "04_training_loop.ipynb"
CELLS = ("tl-02-code", "tl-03-code", "tl-21b-code", "tl-22-code")  # imports, data, the lesson

HAS_FORKSERVER = "forkserver" in multiprocessing.get_all_start_methods()
FORK_IS_SAFE = sys.platform.startswith("linux")  # fork exists on macOS but crashes there

EXTRA = {
    "fork": (
        "fork_loader = DataLoader(NotebookDigits(x_train[:8], y_train[:8]), batch_size=4,\n"
        "                         num_workers=1, multiprocessing_context='fork')\n"
        "print('fork delivered', sum(len(yb) for xb, yb in fork_loader), 'examples')"
    ),
    # Python's default, set the way 3.14 sets it on Linux (spawn: the failure shows at once).
    "default": (
        "multiprocessing.set_start_method('spawn', force=True)\n"
        "default_loader = DataLoader(NotebookDigits(x_train, y_train), batch_size=64, num_workers=1)\n"
        "with expect_error(RuntimeError, match='exited unexpectedly', lines=1):\n"
        "    next(iter(default_loader))"
    ),
}

NOT_FOR_LEARNERS = ("without encryption", "[IPKernelApp]", "eavesdropping")


def _text(outputs) -> str:
    return json.dumps([dict(output) for output in outputs])


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    chapter = nbformat.read(CHAPTER, as_version=4)
    by_id = {cell.id: cell for cell in chapter.cells}
    cells = [by_id[cell_id] for cell_id in CELLS]
    extra = {name: nbformat.v4.new_code_cell(source) for name, source in EXTRA.items()}
    if not FORK_IS_SAFE:
        del extra["fork"]
    nb = nbformat.v4.new_notebook(cells=[*cells, *extra.values()])
    folder = tmp_path_factory.mktemp("chapter04")
    client = nbclient.NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    # Without PYTEST_CURRENT_TEST, ipykernel sends what its child processes write to fd 1 and 2
    # into the cell, as in JupyterLab (under pytest it leaves them to pytest's capture).
    environ = {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}
    client.execute(env={**environ, "COURSE_NO_PROGRESS": "1", "MPLBACKEND": "Agg"})
    outputs = {cell_id: cell.outputs for cell_id, cell in zip(CELLS, nb.cells)}
    outputs.update({name: cell.outputs for name, cell in extra.items()})
    return outputs


def test_the_kernel_prints_its_own_start_method(executed):
    text = _text(executed["tl-21b-code"])
    default = multiprocessing.get_all_start_methods()[0]  # the list starts with the default
    assert f"workers start by {default}" in text


def test_spawn_and_forkserver_show_the_real_error(executed):
    outputs = executed["tl-22-code"]
    stdout = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    methods = ["spawn", "forkserver"] if HAS_FORKSERVER else ["spawn"]
    for method in methods:
        assert f"workers started by {method}:" in stdout
    # The parent's view, once per start method, and the worker's own last words.
    assert stdout.count("RuntimeError: DataLoader worker") == len(methods), stdout
    assert "exited unexpectedly" in stdout
    if os.name == "posix":  # the workers' stderr reaches the cell through the kernel's fd 2
        assert stderr.count("Can't get attribute 'NotebookDigits'") == len(methods), stderr


@pytest.mark.skipif(not FORK_IS_SAFE, reason="fork is the default only on Linux before Python 3.14")
def test_fork_knows_a_class_defined_in_the_notebook(executed):
    # stdout as the learner reads it: a print may arrive in several chunks, with stderr between
    # (a dead loader of the cell before, collected here, says "Exception ignored in ...").
    stdout = "".join(o.get("text", "") for o in executed["fork"] if o.get("name") == "stdout")
    assert stdout.count("fork delivered 8 examples") == 1, stdout


def test_dataloader_uses_pythons_default_start_method(executed):
    # multiprocessing_context=None: the loader takes Python's default, here set to spawn.
    assert "RuntimeError: DataLoader worker" in _text(executed["default"])


def test_no_kernel_log_reaches_a_cell(executed):
    for name, outputs in executed.items():
        text = _text(outputs)
        for phrase in NOT_FOR_LEARNERS:
            assert phrase not in text, f"{name} shows {phrase!r}: {text[:2000]}"
