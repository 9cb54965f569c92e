"""Chapter 01's checked_mse: its catalogue of right and wrong answers, and its stub."""

import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

RAISED = Outcome.RAISED


# -- checked_mse --------------------------------------------------------------------------------
# (A bare `assert` without a message in a test module gets one from pytest's assertion
# rewriting, so the silent answers below raise AssertionError themselves.)
def mse_value_error_and_functional(pred, target):
    if pred.shape != target.shape:
        raise ValueError(f"shape mismatch: {pred.shape} and {target.shape}")
    return torch.nn.functional.mse_loss(pred, target)


class ShapeMismatch(ValueError):
    """A learner's own error type, a subclass of the ValueError the task asks for."""


def mse_own_error_type(pred, target):
    if pred.size() != target.size():
        raise ShapeMismatch(f"{list(pred.size())} != {list(target.size())}")
    return torch.mean(torch.square(pred - target))


def mse_shapes_as_4x1(pred, target):
    if pred.shape != target.shape:
        raise AssertionError(
            "pred is " + "x".join(map(str, pred.shape)) + f", target {tuple(target.shape)}"
        )
    return (pred - target).pow(2).sum() / pred.numel()


def mse_silent_assert(pred, target):
    if pred.shape != target.shape:
        raise AssertionError()
    return ((pred - target) ** 2).mean()


def mse_vague_message(pred, target):
    if pred.shape != target.shape:
        raise AssertionError("shapes differ")
    return ((pred - target) ** 2).mean()


def mse_checks_numel_only(pred, target):
    assert pred.numel() == target.numel(), f"{pred.shape} vs {target.shape}"
    return ((pred.reshape(-1) - target.reshape(-1)) ** 2).mean()


def mse_checks_dim_only(pred, target):
    assert pred.dim() == target.dim(), f"{pred.shape} vs {target.shape}"
    return ((pred - target) ** 2).mean()


def mse_checks_first_size_only(pred, target):
    assert len(pred) == len(target), f"{pred.shape} vs {target.shape}"
    return ((pred - target) ** 2).mean()


def mse_in_place(pred, target):
    assert pred.shape == target.shape, f"{pred.shape} vs {target.shape}"
    return pred.sub_(target).pow_(2).mean()


def mse_flattened_with_view(pred, target):
    assert pred.shape == target.shape, f"{pred.shape} vs {target.shape}"
    return ((pred.view(-1) - target.view(-1)) ** 2).mean()


def mse_divided_by_len(pred, target):
    assert pred.shape == target.shape, f"{pred.shape} vs {target.shape}"
    return ((pred - target) ** 2).sum() / len(pred)


def mse_type_error(pred, target):
    if pred.shape != target.shape:
        raise TypeError(f"{tuple(pred.shape)} vs {tuple(target.shape)}")
    return ((pred - target) ** 2).mean()


# -- round 3 of outside testing -----------------------------------------------------------------
def mse_same_shape_twice(pred, target):
    # (raise, not assert: pytest's assertion rewriting would add both shapes to the message)
    if pred.shape != target.shape:
        raise AssertionError(f"pred {tuple(pred.shape)} vs target {tuple(pred.shape)}")
    return ((pred - target) ** 2).mean()


def mse_runtime_error(pred, target):
    if pred.shape != target.shape:
        raise RuntimeError(f"{pred.shape} vs {target.shape}")
    return ((pred - target) ** 2).mean()


def mse_shapes_as_error_args(pred, target):
    if pred.shape != target.shape:
        raise AssertionError(pred.shape, target.shape)
    return torch.mean(torch.square(pred - target))


def mse_torch_assert(pred, target):
    torch._assert(pred.shape == target.shape, f"pred {pred.shape} target {target.shape}")
    difference = pred - target
    return (difference * difference).mean()


# -- issue 45, fresh round (from the task text) -------------------------------------------------
def _shapes(pred, target):
    return f"pred {tuple(pred.shape)} vs target {tuple(target.shape)}"


def mse_mean_dim0(pred, target):
    if pred.shape != target.shape:
        raise AssertionError(_shapes(pred, target))
    return ((pred - target) ** 2).mean(dim=0)


def mse_nanmean(pred, target):
    if pred.shape != target.shape:
        raise AssertionError(_shapes(pred, target))
    return ((pred - target) ** 2).nanmean()


def mse_empty_zero(pred, target):
    if pred.shape != target.shape:
        raise AssertionError(_shapes(pred, target))
    if pred.numel() == 0:
        return torch.tensor(0.0)
    return ((pred - target) ** 2).mean()


def mse_float32(pred, target):
    if pred.shape != target.shape:
        raise AssertionError(_shapes(pred, target))
    return ((pred.float() - target.float()) ** 2).mean()


def mse_squeeze_then_compare(pred, target):
    pred, target = pred.squeeze(), target.squeeze()
    if pred.shape != target.shape:
        raise AssertionError(_shapes(pred, target))
    return ((pred - target) ** 2).mean()


def mse_checks_broadcastable(pred, target):
    try:
        torch.broadcast_shapes(pred.shape, target.shape)
    except RuntimeError:
        raise AssertionError(_shapes(pred, target)) from None
    return ((pred - target) ** 2).mean()


def mse_message_numel(pred, target):
    if pred.shape != target.shape:
        raise AssertionError(f"pred has {pred.numel()} elements, target {target.numel()}")
    return ((pred - target) ** 2).mean()


def mse_reduction_sum(pred, target):
    if pred.shape != target.shape:
        raise ValueError(_shapes(pred, target))
    return torch.nn.functional.mse_loss(pred, target, reduction="sum")


def mse_row_sums_mean(pred, target):
    if pred.shape != target.shape:
        raise AssertionError(_shapes(pred, target))
    return ((pred - target) ** 2).sum(dim=-1).mean()


def mse_warns(pred, target):
    import warnings
    if pred.shape != target.shape:
        warnings.warn(_shapes(pred, target))
    return ((pred - target) ** 2).mean()


def mse_sub_mul_mean(pred, target):
    if tuple(pred.shape) != tuple(target.shape):
        raise ValueError(f"pred.shape={tuple(pred.shape)}, target.shape={tuple(target.shape)}")
    diff = pred.sub(target)
    return diff.mul(diff).mean()


CATALOGUE = Catalogue({
    ex.checked_mse: [
        right("ValueError and F.mse_loss", mse_value_error_and_functional),
        right("own subclass of ValueError, shapes as lists", mse_own_error_type),
        right("shapes written 4x1, sum over numel", mse_shapes_as_4x1),
        right("assert with torch.Size in the message", lambda pred, target: (
            (pred - target).pow(2).mean() if pred.shape == target.shape
            else (_ for _ in ()).throw(AssertionError(f"{pred.shape} != {target.shape}")))),
        wrong("no check: broadcasting computes a number", lambda pred, target: ((pred - target) ** 2).mean(),
              "instead of stopping", "assert pred.shape == target.shape"),
        wrong("an AssertionError without a message", mse_silent_assert, "says nothing", "both shapes"),
        wrong("a message without the shapes", mse_vague_message, "'shapes differ'", "include both shapes"),
        wrong("checks the number of elements only", mse_checks_numel_only,
              "For pred (4, 1) and target (4,) your function returned a tensor of shape ()",
              "instead of stopping"),
        wrong("checks the first size only", mse_checks_first_size_only, "instead of stopping"),
        wrong("raises a TypeError", mse_type_error, "raised TypeError",
              "an AssertionError (or a ValueError)"),
        wrong("checks the number of dimensions only", mse_checks_dim_only,
              "For pred (2, 3) and target (3, 2) your function raised RuntimeError",
              "from your own check of the shapes", kind=EDGE),
        wrong("flattens with view: a transposed input", mse_flattened_with_view,
              "view size is not compatible", "Likely cause:", "transposed pred or target",
              kind=EDGE, outcome=RAISED),
        wrong("divides by len(pred): rows, not elements", mse_divided_by_len,
              "divides the sum of squares by the number of rows, 3", "pred.numel()", kind=EDGE),
        wrong("squares in place on the caller's pred", mse_in_place,
              "changed the numbers in its input pred", kind=STATEFUL),
        # -- round 3 of outside testing
        right("AssertionError with the shapes as its arguments", mse_shapes_as_error_args),
        right("torch._assert", mse_torch_assert),
        right("%-formatting of tuples", lambda pred, target: (
            ((pred - target) ** 2).mean() if pred.shape == target.shape
            else (_ for _ in ()).throw(AssertionError(
                "pred %s target %s" % (tuple(pred.shape), tuple(target.shape)))))),
        wrong("the message shows pred's shape twice", mse_same_shape_twice,
              "'pred (4, 1) vs target (4, 1)'", "include both shapes"),
        wrong("raises a RuntimeError", mse_runtime_error, "raised RuntimeError",
              "an AssertionError (or a ValueError)"),
        wrong("returns a Python float", lambda pred, target: ((pred - target) ** 2).mean().item()
              if pred.shape == target.shape else (_ for _ in ()).throw(
                  AssertionError(f"{pred.shape} vs {target.shape}")),
              "is a float", "expected a torch.Tensor"),
        wrong("root mean square", lambda pred, target: ((pred - target) ** 2).mean().sqrt()
              if pred.shape == target.shape else (_ for _ in ()).throw(
                  AssertionError(f"{pred.shape} vs {target.shape}")),
              "right shape but wrong values"),
        # -- issue 45, fresh round (from the task text) --
        right("sub, mul, mean; ValueError with shape= in its message", mse_sub_mul_mean),
        wrong("mean over dim 0 only: a 2-D loss is not 0-dim", mse_mean_dim0,
              "your loss has shape (2,); expected ()", kind=EDGE),
        wrong("nanmean skips the nan", mse_nanmean,
              "at the edges of float32", "got inf, expected nan", kind=EDGE),
        wrong("returns 0 for empty inputs", mse_empty_zero,
              "(empty)", "got 0, expected nan", kind=EDGE),
        wrong("computes in float32: float64 lost", mse_float32,
              "has dtype torch.float32; expected torch.float64", kind=EDGE),
        wrong("squeezes both before comparing the shapes", mse_squeeze_then_compare,
              "instead of stopping"),
        wrong("checks only that the shapes broadcast", mse_checks_broadcastable,
              "instead of stopping"),
        wrong("message with element counts, not shapes", mse_message_numel,
              "'pred has 4 elements, target 4'", "include both shapes"),
        wrong("F.mse_loss with reduction='sum'", mse_reduction_sum,
              "the sum of the squares, not their mean", 'reduction is "mean"'),
        wrong("sums the last dimension, then the mean", mse_row_sums_mean,
              "the sum of the squares, not their mean"),
        wrong("warns instead of stopping", mse_warns,
              "instead of stopping"),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()


def test_checked_mse_stub_is_not_attempted():
    def stub(pred, target):
        raise NotImplementedError()

    assert ex.checked_mse.verdict(stub).outcome is Outcome.NOT_ATTEMPTED
