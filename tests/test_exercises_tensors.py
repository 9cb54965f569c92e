"""Chapter 01's exercises: references and other right answers pass; classic mistakes get
the message that names them."""

import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_fails, assert_passes




# -- T1 match_reference ----------------------------------------------------------------------
def test_match_reference_right_answers():
    assert_passes(ex.match_reference, ex.match_reference.reference)
    assert_passes(ex.match_reference, lambda x, reference: x.to(reference.device).to(reference.dtype))
    assert_passes(ex.match_reference, lambda x, reference: x.type(reference.dtype).to(reference.device))


def test_match_reference_mistakes():
    assert_fails(ex.match_reference, lambda x, reference: x.to(reference.device), "kept x's dtype", "Did you move only the device?")
    assert_fails(ex.match_reference, lambda x, reference: x.to(reference.dtype), "Your result is on cpu, the reference on meta")
    assert_fails(ex.match_reference, lambda x, reference: torch.zeros_like(reference), "the reference's shape")


# -- T3 independent_copy ---------------------------------------------------------------------
def test_independent_copy_right_answers():
    assert_passes(ex.independent_copy, ex.independent_copy.reference)
    assert_passes(ex.independent_copy, lambda array: torch.from_numpy(array).clone())
    assert_passes(ex.independent_copy, lambda array: torch.from_numpy(array.copy()))


@pytest.mark.parametrize("sharing", [torch.from_numpy, torch.as_tensor], ids=["from_numpy", "as_tensor"])
def test_independent_copy_sharing_is_named(sharing):
    assert_fails(ex.independent_copy, sharing, "shares memory with the array", "torch.tensor(array)")


def test_independent_copy_legacy_constructor_changes_the_dtype():
    assert_fails(ex.independent_copy, lambda array: torch.Tensor(array), "torch.Tensor(array) always makes float32")


def test_independent_copy_returning_the_array_is_caught():
    assert_fails(ex.independent_copy, lambda array: array.copy(), "is a numpy.ndarray")


# -- T5 flatten_transposed -------------------------------------------------------------------
def test_flatten_transposed_right_answers():
    assert_passes(ex.flatten_transposed, ex.flatten_transposed.reference)
    assert_passes(ex.flatten_transposed, lambda x: x.t().contiguous().view(-1))
    assert_passes(ex.flatten_transposed, lambda x: torch.flatten(x.transpose(0, 1)))
    assert_passes(ex.flatten_transposed, lambda x: x.permute(1, 0).flatten())


def test_flatten_transposed_view_error_is_explained():
    assert_fails(
        ex.flatten_transposed, lambda x: x.T.view(-1),
        "view size is not compatible with input tensor's size and stride",
        "Likely cause: view() cannot reorder memory",
        outcome=Outcome.RAISED,
    )


def test_flatten_transposed_other_mistakes():
    assert_fails(ex.flatten_transposed, lambda x: x.reshape(-1), "x's own order", "transpose first")
    assert_fails(ex.flatten_transposed, lambda x: x.T.contiguous(), "expected one dimension")


# -- T6 remove_batch_dim ---------------------------------------------------------------------
def test_remove_batch_dim_right_answers():
    assert_passes(ex.remove_batch_dim, ex.remove_batch_dim.reference)
    assert_passes(ex.remove_batch_dim, lambda x: x[0])
    assert_passes(ex.remove_batch_dim, lambda x: x.reshape(x.shape[1:]))


def test_remove_batch_dim_mistakes():
    assert_fails(ex.remove_batch_dim, lambda x: x.squeeze(), "drops EVERY size-1 dimension", "squeeze(0)")
    assert_fails(ex.remove_batch_dim, lambda x: x.squeeze(1), "squeeze(d) silently does nothing")
    assert_fails(ex.remove_batch_dim, lambda x: x.flatten(), "has shape")
    # The right shape, but the learner's own x lost its batch dimension too.
    assert_fails(
        ex.remove_batch_dim, lambda x: x.squeeze_(0),
        "changed its input x in place", "has shape (5,) afterwards instead of (1, 5)",
        "squeeze_", "use x.squeeze(0), which returns a new tensor",
    )


# -- T7 outer_sum ----------------------------------------------------------------------------
def test_outer_sum_right_answers():
    assert_passes(ex.outer_sum, ex.outer_sum.reference)
    assert_passes(ex.outer_sum, lambda a, b: a.unsqueeze(1) + b)
    assert_passes(ex.outer_sum, lambda a, b: torch.stack([a[i] + b for i in range(len(a))]))


def test_outer_sum_mistakes():
    assert_fails(
        ex.outer_sum, lambda a, b: a + b,
        "The size of tensor a (3) must match the size of tensor b (4)", outcome=Outcome.RAISED,
    )
    # When the sizes happen to match, the same mistake raises nothing: the check names it.
    def square_only(a, b):
        if len(a) != len(b):
            return a[:, None] + b[None, :]
        return a + b

    assert_fails(ex.outer_sum, square_only, "Two (N,) tensors meet element by element", "a[:, None]")
    assert_fails(ex.outer_sum, lambda a, b: a[None, :] + b[:, None], "rows should follow a")


# -- T7 residuals ----------------------------------------------------------------------------
def test_residuals_right_answers():
    assert_passes(ex.residuals, ex.residuals.reference)
    assert_passes(ex.residuals, lambda pred, target: pred[:, 0] - target)
    assert_passes(ex.residuals, lambda pred, target: (pred - target[:, None]).view(-1))


def test_residuals_mistakes():
    assert_fails(
        ex.residuals, lambda pred, target: pred - target,
        "has shape (4, 4); expected (4,)",
        "a (4, 1) tensor met a (4,) tensor and broadcast to (4, 4)",
    )
    assert_fails(ex.residuals, lambda pred, target: pred - target[:, None], "(4, 1); expected (4,)")
    # "Fixing" the (N, N) shape by averaging it away gives the right shape and wrong numbers.
    assert_fails(ex.residuals, lambda pred, target: (pred - target).mean(dim=1), "wrong values")
    # The right numbers, but the caller's pred is (N,) afterwards: its next use breaks.
    assert_fails(
        ex.residuals, lambda pred, target: pred.squeeze_(1) - target,
        "changed its input pred in place", "has shape (4,) afterwards instead of (4, 1)",
        "squeeze_", "use pred.squeeze(1), which returns a new tensor",
    )

    def subtracts_in_place(pred, target):
        return pred.squeeze(1).sub_(target)

    assert_fails(ex.residuals, subtracts_in_place, "changed the numbers in its input pred")


# -- T8 checked_mse --------------------------------------------------------------------------
def test_checked_mse_right_answers():
    assert_passes(ex.checked_mse, ex.checked_mse.reference)

    def with_value_error(pred, target):
        if pred.shape != target.shape:
            raise ValueError(f"shape mismatch: {pred.shape} and {target.shape}")
        return torch.nn.functional.mse_loss(pred, target)

    assert_passes(ex.checked_mse, with_value_error)


def test_checked_mse_mistakes():
    assert_fails(
        ex.checked_mse, lambda pred, target: ((pred - target) ** 2).mean(),
        "instead of stopping", "assert pred.shape == target.shape",
    )

    def silent_assert(pred, target):
        # (a bare `assert` here would get a message from pytest's assertion rewriting)
        if pred.shape != target.shape:
            raise AssertionError()
        return ((pred - target) ** 2).mean()

    assert_fails(ex.checked_mse, silent_assert, "says nothing", "both shapes")

    def vague(pred, target):
        if pred.shape != target.shape:
            raise AssertionError("shapes differ")
        return ((pred - target) ** 2).mean()

    assert_fails(ex.checked_mse, vague, "'shapes differ'", "include both shapes")

    def numel_only(pred, target):
        assert pred.numel() == target.numel(), f"{pred.shape} vs {target.shape}"
        return ((pred.reshape(-1) - target.reshape(-1)) ** 2).mean()

    assert_fails(ex.checked_mse, numel_only, "instead of stopping")


def test_checked_mse_stub_is_not_attempted():
    def stub(pred, target):
        raise NotImplementedError()

    assert ex.checked_mse.verdict(stub).outcome is Outcome.NOT_ATTEMPTED
