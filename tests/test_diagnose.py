"""describe() and tensor_summary(): the facts a learner checks first, printed so they line up."""

import numpy as np
import pytest
import torch

from course_utils.diagnose import describe, tensor_summary


def printed(capsys, *args, **kwargs) -> list[str]:
    describe(*args, **kwargs)
    return capsys.readouterr().out.splitlines()


def test_a_single_tensor_gets_no_name_column(capsys):
    assert printed(capsys, torch.zeros(3, 4)) == ["shape (3, 4)  float32  cpu  contiguous"]


def test_a_transposed_tensor_is_not_contiguous(capsys):
    assert printed(capsys, torch.zeros(3, 4).T) == ["shape (4, 3)  float32  cpu  NOT contiguous"]


def test_autograd_state_shows_requires_grad_and_the_grad_fn(capsys):
    w = torch.ones(2, requires_grad=True)
    lines = printed(capsys, w=w, y=w * 2)
    assert lines == [
        "w  shape (2,)  float32  cpu  contiguous  requires_grad",
        "y  shape (2,)  float32  cpu  contiguous  requires_grad  grad_fn=MulBackward0",
    ]


def test_several_positional_tensors_are_numbered_and_aligned(capsys):
    lines = printed(capsys, torch.zeros(3, 4), torch.zeros(10, dtype=torch.int64).view(2, 5).T)
    assert lines == [
        "#0  shape (3, 4)  float32  cpu  contiguous",
        "#1  shape (5, 2)  int64    cpu  NOT contiguous",
    ]


def test_positional_and_named_tensors_together(capsys):
    lines = printed(capsys, torch.zeros(1), target=torch.zeros(1, dtype=torch.float64))
    assert [line.split()[0] for line in lines] == ["#0", "target"]
    assert "float64" in lines[1]


def test_non_tensors_say_what_they_are_and_do_not_widen_the_columns(capsys):
    x = torch.zeros(3, 4)
    lines = printed(capsys, x=x, batch=[x, x, x], mixed=[1, 2, 3], arr=np.zeros((3, 4)), lr=1.5)
    assert lines == [
        "x      shape (3, 4)  float32  cpu  contiguous",
        "batch  list of 3 tensors",
        "mixed  list of 3",
        "arr    numpy.ndarray (3, 4) float64",
        "lr     float 1.5",
    ]


def test_a_non_tensor_alone_is_one_plain_line(capsys):
    assert printed(capsys, [1, 2, 3]) == ["list of 3"]
    assert printed(capsys, None) == ["None"]


def test_tensor_summary_fields():
    w = torch.ones(3, 4, requires_grad=True)
    assert tensor_summary((w * 2).transpose(0, 1)) == {
        "shape": (4, 3),
        "dtype": "float32",
        "device": "cpu",
        "contiguous": False,
        "requires_grad": True,
        "grad_fn": "TransposeBackward0",
        "numel": 12,
        "bytes": 48,
    }
    assert tensor_summary(torch.zeros(2, dtype=torch.float16))["grad_fn"] is None
    assert tensor_summary(torch.zeros(2, dtype=torch.float16))["bytes"] == 4


def test_tensor_summary_refuses_non_tensors_by_naming_them():
    with pytest.raises(TypeError, match="numpy.ndarray"):
        tensor_summary(np.zeros(2))
