"""The grader's "written in your answer cell" check, on cells run as the kernel runs them.

Each cell runs in a real IPython shell (the one ipykernel uses), which compiles each top-level
statement on its own: the check must find the checked function's code in the cell however the
cell is written (tests/answer_cell_styles.py), and must still refuse an answer whose code comes
from anywhere else, whatever wraps it. The same styles are graded end to end, in the grading
kernel, by tests/test_grading_answer_styles.py.
"""

from __future__ import annotations

import pytest

import answer_cell_styles as styles
from course_utils.grading.answer_cell import written_in_cell
from course_utils.grading.kernel_probe import answer_code


@pytest.fixture(scope="module")
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


def _run(shell, source: str, name: str):
    result = shell.run_cell(source, silent=True)
    assert result.success, result.error_in_exec or result.error_before_exec
    return shell.user_ns[name]


CELLS = [(chapter, name, style, source)
         for chapter in styles.ANSWERS
         for learner in styles.learners(chapter) + [styles.helper_in_an_earlier_cell(chapter)]
         for name, (style, source) in learner.items()]


def test_every_style_is_tried():
    assert {style for _, _, style, _ in CELLS} == {f.__name__ for f in styles.STYLES} | {"helper_in_an_earlier_cell"}


@pytest.mark.parametrize("chapter,name,style,source", CELLS, ids=[f"{c[1]}-{c[2]}" for c in CELLS])
def test_a_right_answer_cell_in_any_style_is_its_own(shell, chapter, name, style, source):
    if style == "helper_in_an_earlier_cell":
        shell.run_cell("def _kept(value):\n    return value\n", silent=True)
    answer = _run(shell, source, name)
    assert written_in_cell(answer_code(answer), source), f"{style}:\n{source}"


def test_a_method_of_a_module_imported_in_the_same_cell():
    """What broke: ``import torch`` above the function made ``torch.add`` compile otherwise in
    the whole cell than in the statement IPython compiles alone."""
    from IPython.core.interactiveshell import InteractiveShell

    source = "import torch\ndef outer_sum(a, b):\n    return torch.add(a[:, None], b[None, :])\n"
    answer = _run(InteractiveShell.instance(), source, "outer_sum")
    assert written_in_cell(answer_code(answer), source)


BORROWED = "from course_utils.checkpoints import load_checkpoint as borrowed\n"


@pytest.mark.parametrize("attempt", [
    "outer_sum = borrowed\n",
    "import torch\nouter_sum = torch.no_grad()(borrowed)\n",
    "import functools\ndef outer_sum(a, b):\n    pass\nouter_sum = functools.wraps(outer_sum)(borrowed)\n",
    # a library's wrapper that claims to wrap a function of the cell, and runs another's
    "import torch\ndef mine(a, b):\n    pass\nouter_sum = torch.no_grad()(borrowed)\nouter_sum.__wrapped__ = mine\n",
    # a class whose calls go to another's function, through its metaclass
    "class Calls(type):\n    __call__ = borrowed\nclass outer_sum(metaclass=Calls):\n    pass\n",
    # a class that defines nothing itself
    "import torch\nclass outer_sum(torch.nn.Identity):\n    pass\n",
    "import functools\nouter_sum = functools.partial(borrowed)\n",
    "outer_sum = print\n",
], ids=["alias", "library-decorator", "wraps", "rewrapped", "metaclass", "empty-class", "partial", "builtin"])
def test_code_from_elsewhere_is_not_written_in_the_cell(shell, attempt):
    shell.run_cell(BORROWED, silent=True)
    answer = _run(shell, attempt, "outer_sum")
    assert not written_in_cell(answer_code(answer), attempt)


def test_a_class_answer_with_its_methods_in_the_cell():
    from IPython.core.interactiveshell import InteractiveShell

    source = ("import torch\nfrom torch import nn\n\nclass Block(nn.Module):\n    def __init__(self, n):\n"
              "        super().__init__()\n        self.linear = nn.Linear(n, n)\n\n"
              "    def forward(self, x):\n        return x + torch.relu(self.linear(x))\n")
    answer = _run(InteractiveShell.instance(), source, "Block")
    assert written_in_cell(answer_code(answer), source)


def test_a_cell_that_is_not_python_gets_the_benefit_of_the_doubt():
    assert written_in_cell("0" * 64, "def f(:\n")
