"""What a learner sees in a real Jupyter kernel: one verdict per check, and endless loops stopped."""

import nbclient
from nbformat.v4 import new_code_cell, new_notebook


def run_cells(*sources, tmp_path):
    nb = new_notebook(cells=[new_code_cell(source) for source in sources])
    client = nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    return nb.cells


def test_a_check_shows_one_verdict_as_html_with_plain_text(tmp_path):
    cells = run_cells(
        "from course_utils.exercises import environment as ex\n"
        "def seeded_draw(seed, n):\n    raise NotImplementedError()",
        "ex.seeded_draw.check(seeded_draw)",  # the cell's last value: must not show twice
        tmp_path=tmp_path,
    )
    outputs = cells[1].outputs
    assert len(outputs) == 1, outputs
    assert outputs[0].output_type == "display_data"
    assert "⏳ Same seed, same numbers: not attempted" in outputs[0].data["text/plain"]
    assert "<div" in outputs[0].data["text/html"]


def test_an_endless_loop_is_stopped_inside_the_kernel(tmp_path):
    cells = run_cells(
        "from course_utils.exercises import environment as ex\n"
        "ex.seeded_draw.time_limit_s = 1.0\n"
        "def seeded_draw(seed, n):\n    while True:\n        pass",
        "verdict = ex.seeded_draw.check(seeded_draw)",
        "print(verdict.outcome.value)",
        tmp_path=tmp_path,
    )
    assert "stopped after 1 s" in cells[1].outputs[0].data["text/plain"]
    assert cells[2].outputs[0].text == "failed\n"
