"""Correct answer cells written the many ways learners write them, for the grader's tests.

Every style keeps the answer right and changes only how the cell is written: imports at the
top or inside the function, helpers and constants, decorators, type hints (with and without
``from __future__ import annotations``), a lambda, ``from torch import ...``, a docstring and
comments, a callable object, a function made by a factory, a helper from an earlier answer
cell. The grader must score each one full marks (tests/test_grading_answer_styles.py), on
whatever Python runs the tests: the bytecode of each style differs from one version to the
next, which is what the grader's "written in your answer cell" check compares.
"""

from __future__ import annotations

import textwrap

# The grading course's exercises (tests/grading_course/): name, parameters, a right body that
# calls torch's functions through the module (``torch.add``: the call that compiles differently
# when the cell itself imports torch), and whether the body may run under torch.no_grad().
ANSWERS = {
    "01_tensors": {
        "match_reference": ("x, reference", ["return x.to(dtype=reference.dtype, device=reference.device)"], True),
        "independent_copy": ("array", ["return torch.tensor(array)"], True),
        "flatten_transposed": ("x", ["return torch.reshape(x.T, (-1,))"], True),
        "remove_batch_dim": ("x", ["return torch.squeeze(x, 0)"], True),
        "outer_sum": ("a, b", ["return torch.add(a[:, None], b[None, :])"], True),
        "residuals": ("pred, target", ["return torch.sub(pred.squeeze(1), target)"], True),
        "checked_mse": ("pred, target", [
            'assert pred.shape == target.shape, f"pred {tuple(pred.shape)} vs target {tuple(target.shape)}"',
            "return torch.mean((pred - target) ** 2)",
        ], True),
    },
    "02_autograd": {
        "new_parameter": ("shape", ["weight = torch.randn(shape) * 0.01", "return weight.requires_grad_(True)"], True),
        "fresh_gradient": ("w, x", ["w.grad = None", "loss = torch.sum(w * x)", "loss.backward()", "return w.grad"],
                           False),
        "sgd_update": ("w, lr", ["with torch.no_grad():", "    w -= lr * w.grad"], True),
        "softplus": ("x", ["e = torch.exp(x)", "return torch.log(e + 1)"], False),
    },
}


def _body(lines, indent="    "):
    return textwrap.indent("\n".join(lines), indent)


def _single_return(lines):
    return lines[0][len("return "):] if len(lines) == 1 and lines[0].startswith("return ") else None


def import_at_top(name, params, lines):
    return f"import torch\n\ndef {name}({params}):\n{_body(lines)}\n"


def import_inside(name, params, lines):
    return f"def {name}({params}):\n    import torch\n{_body(lines)}\n"


def helper_and_constant(name, params, lines):
    return (f"import torch\n\nSCALE = 1.0\n\ndef _unchanged(value):\n    return value\n\n"
            f"def {name}({params}):\n    _unchanged(SCALE)\n{_body(lines)}\n")


def own_decorator(name, params, lines):
    return ("import functools\nimport torch\n\ndef logged(function):\n    @functools.wraps(function)\n"
            "    def run(*args, **kwargs):\n        return function(*args, **kwargs)\n    return run\n\n"
            f"@logged\ndef {name}({params}):\n{_body(lines)}\n")


def no_grad_decorator(name, params, lines):
    return f"import torch\n\n@torch.no_grad()\ndef {name}({params}):\n{_body(lines)}\n"


def type_hints(name, params, lines):
    hinted = ", ".join(f"{p.strip()}: torch.Tensor" for p in params.split(","))
    return f"import torch\nfrom typing import Any\n\ndef {name}({hinted}) -> Any:\n{_body(lines)}\n"


def future_annotations(name, params, lines):
    return "from __future__ import annotations\n\n" + type_hints(name, params, lines)


def a_lambda(name, params, lines):
    value = _single_return(lines)
    if value is None:
        return None
    return f"import torch\n\n{name} = lambda {params}: {value}\n"


def from_torch_import(name, params, lines):
    return "from torch import nn, Tensor\nimport torch as torch\n\n" + f"def {name}({params}):\n{_body(lines)}\n"


def docstring_and_comments(name, params, lines):
    return (f"# my answer\n\n\nimport torch  # the library\n\n\ndef {name}({params}):\n"
            f'    """My answer: it does what the task asks."""\n    # here it comes\n\n{_body(lines)}\n\n'
            "# done\n")


def callable_object(name, params, lines):
    return (f"import torch\n\nclass _Answer:\n    def __call__(self, {params}):\n{_body(lines, '        ')}\n\n"
            f"{name} = _Answer()\n")


def factory(name, params, lines):
    return (f"import torch\n\ndef _make():\n    def {name}({params}):\n{_body(lines, '        ')}\n"
            f"    return {name}\n\n{name} = _make()\n")


def shown_at_the_end(name, params, lines):
    return f"import torch\n\ndef {name}({params}):\n{_body(lines)}\n\n{name}\n"


STYLES = (import_at_top, import_inside, helper_and_constant, own_decorator, no_grad_decorator, type_hints,
          future_annotations, a_lambda, from_torch_import, docstring_and_comments, callable_object, factory,
          shown_at_the_end)


def styled_answers(chapter: str, offset: int) -> dict[str, tuple[str, str]]:
    """grade_id -> (style name, answer cell) for one learner of ``chapter``: exercise i in style
    i + offset (round the list), the next style whenever a style does not fit the exercise (a
    lambda for a body of several statements, no_grad for a gradient)."""
    answers = {}
    for index, (name, (params, lines, no_grad_ok)) in enumerate(ANSWERS[chapter].items()):
        for step in range(len(STYLES)):
            style = STYLES[(index + offset + step) % len(STYLES)]
            if style is no_grad_decorator and not no_grad_ok:
                continue
            source = style(name, params, lines)
            if source is not None:
                answers[name] = (style.__name__, source)
                break
    return answers


def learners(chapter: str) -> list[dict[str, tuple[str, str]]]:
    """Enough learners of ``chapter`` that every style answers at least one exercise."""
    count = len(ANSWERS[chapter])
    return [styled_answers(chapter, offset) for offset in range(0, len(STYLES), count)] + (
        [styled_answers(chapter, len(STYLES) - 1)] if len(STYLES) % count else [])


def helper_in_an_earlier_cell(chapter: str) -> dict[str, tuple[str, str]]:
    """One learner whose first answer cell defines a helper that every later answer calls."""
    answers = {}
    for index, (name, (params, lines, _)) in enumerate(ANSWERS[chapter].items()):
        source = f"import torch\n\ndef {name}({params}):\n    _kept(None)\n{_body(lines)}\n"
        if index == 0:
            source = "def _kept(value):\n    return value\n\n" + source
        answers[name] = ("helper_in_an_earlier_cell", source)
    return answers
