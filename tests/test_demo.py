"""expect_error: shows PyTorch's real message, and fails loudly when the error is gone."""

import pytest
import torch

from course_utils.demo import ExpectedErrorMissing, expect_error


def test_the_real_message_is_printed_and_the_cell_goes_on(capsys):
    with expect_error(RuntimeError) as caught:
        torch.ones(2, 3).view(-1, 4)
    out = capsys.readouterr().out
    assert out.startswith("RuntimeError: shape '[-1, 4]' is invalid for input of size 6")
    assert "size 6" in caught.message


def test_a_missing_error_fails_loudly():
    with pytest.raises(ExpectedErrorMissing, match="expected RuntimeError or ValueError"):
        with expect_error(RuntimeError, ValueError):
            torch.ones(2, 3).view(3, 2)


def test_a_changed_message_fails_loudly():
    with pytest.raises(ExpectedErrorMissing, match="message changed"):
        with expect_error(RuntimeError, match="no such words"):
            torch.ones(2, 3).view(-1, 4)


def test_other_errors_pass_through():
    with pytest.raises(KeyError):
        with expect_error(RuntimeError):
            {}["missing"]


def test_long_messages_are_shortened(capsys):
    with expect_error(ValueError, lines=2):
        raise ValueError("one\ntwo\nthree\nfour")
    assert capsys.readouterr().out == "ValueError: one\n  two\n  ...\n"
