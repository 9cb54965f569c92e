"""Chapter 01's residuals: its catalogue of right and wrong answers."""

import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

RAISED = Outcome.RAISED


# -- residuals ----------------------------------------------------------------------------------
def residuals_subtract_in_place(pred, target):
    return pred.squeeze(1).sub_(target)


def residuals_minus_equals(pred, target):
    pred -= target.unsqueeze(1)
    return pred.squeeze(1)


def residuals_sample_by_sample(pred, target):
    return torch.stack([p[0] - t for p, t in zip(pred, target)])


def residuals_through_python_floats(pred, target):
    return torch.tensor([(p - t).item() for p, t in zip(pred[:, 0], target)])


# -- round 3 of outside testing -----------------------------------------------------------------
def residuals_diagonal_of_every_pair(pred, target):
    return (pred - target).diagonal()  # right numbers, from an (N, N) tensor


# -- issue 45, fresh round (from the task text) -------------------------------------------------
def rs_transpose_no_squeeze(pred, target):
    return pred.T - target


def rs_first_target(pred, target):
    return pred[:, 0] - target[0]


def rs_nan_to_num(pred, target):
    return torch.nan_to_num(pred.squeeze(1) - target)


def rs_float32(pred, target):
    return pred.squeeze(1).float() - target.float()


def rs_minus_mean(pred, target):
    return pred.squeeze(1) - target.mean()


def rs_relative(pred, target):
    return (pred.squeeze(1) - target) / target


def rs_empty_special(pred, target):
    if len(target) == 0:
        return torch.empty(0)
    return pred.squeeze(1) - target


def rs_item_for_one(pred, target):
    if len(target) == 1:
        return (pred[0, 0] - target[0]).item()
    return pred.squeeze(1) - target


def rs_through_numpy(pred, target):
    return torch.from_numpy(pred.detach().numpy()[:, 0] - target.detach().numpy())


def rs_sum_over_column(pred, target):
    return (pred - target[:, None]).sum(dim=1)


def rs_select_subtract(pred, target):
    return torch.subtract(pred.select(1, 0), target)


CATALOGUE = Catalogue({
    ex.residuals: [
        right("index column 0", lambda pred, target: pred[:, 0] - target),
        right("target to a column, then view(-1)", lambda pred, target: (pred - target[:, None]).view(-1)),
        right("flatten pred", lambda pred, target: pred.flatten() - target),
        right("torch.sub with squeeze(-1)", lambda pred, target: torch.sub(pred.squeeze(-1), target)),
        wrong("the (N, N) broadcasting bug", lambda pred, target: pred - target,
              "has shape (4, 4); expected (4,)", "a (4, 1) tensor met a (4,) tensor and broadcast to (4, 4)"),
        wrong("target to a column: (N, 1) left", lambda pred, target: pred - target[:, None],
              "(4, 1); expected (4,)"),
        wrong("averages the (N, N) away", lambda pred, target: (pred - target).mean(dim=1),
              "right shape but wrong values"),
        wrong("target minus pred", lambda pred, target: target - pred.squeeze(1),
              "opposite sign", "pred - target"),
        wrong("absolute errors", lambda pred, target: (pred.squeeze(1) - target).abs(),
              "absolute errors", "with its sign"),
        wrong("squeezes the caller's pred in place", lambda pred, target: pred.squeeze_(1) - target,
              "changed its input pred in place", "is (4,) float32 afterwards instead of (4, 1)",
              "squeeze_", "pred.squeeze(1), without the underscore", kind=STATEFUL),
        wrong("subtracts in place on a view of pred", residuals_subtract_in_place,
              "changed the numbers in its input pred", kind=STATEFUL),
        wrong("pred -= target", residuals_minus_equals,
              "changed the numbers in its input pred", "-=", kind=STATEFUL),
        wrong("squeeze() after the subtraction: N = 1 loses its dimension",
              lambda pred, target: (pred - target[:, None]).squeeze(),
              "has shape (); expected (1,)", "squeeze(1)", kind=EDGE),
        wrong("sample by sample: an empty batch", residuals_sample_by_sample,
              "stack expects a non-empty TensorList", "Likely cause:", "empty batch (N = 0)",
              kind=EDGE, outcome=RAISED),
        wrong("through Python floats: float64 lost", residuals_through_python_floats,
              "has dtype torch.float32; expected torch.float64", kind=EDGE),
        # -- round 3 of outside testing
        right("reshape to len(target)", lambda pred, target: pred.reshape(len(target)) - target),
        right("pred.T[0]", lambda pred, target: pred.T[0] - target),
        wrong("the diagonal of the (N, N) tensor", residuals_diagonal_of_every_pair,
              "built the (4, 4) tensor of every prediction minus every target", "(its diagonal, say)", kind=EDGE),
        wrong("squared errors", lambda pred, target: (pred.squeeze(1) - target) ** 2,
              "squared errors"),
        wrong("averages the (N, N) away: named", lambda pred, target: (pred - target).mean(dim=1),
              "right shape but wrong values", "built the (4, 4) tensor of every pair"),
        # -- issue 45, fresh round (from the task text) --
        right("torch.subtract of select(1, 0)", rs_select_subtract),
        wrong("pred.T - target: a (1, N) row", rs_transpose_no_squeeze,
              "has shape (1, 4); expected (4,)"),
        wrong("subtracts the first target from every pred", rs_first_target,
              "wrong values"),
        wrong("nan_to_num cleans the nan and inf", rs_nan_to_num,
              "at the edges of float32", "expected -inf", kind=EDGE),
        wrong("computes in float32: float64 lost", rs_float32,
              "has dtype torch.float32; expected torch.float64", kind=EDGE),
        wrong("subtracts the mean target", rs_minus_mean,
              "wrong values"),
        wrong("relative errors", rs_relative,
              "wrong values"),
        wrong("an empty batch becomes torch.empty(0): float32", rs_empty_special,
              "has dtype torch.float32; expected torch.float64", "pred of shape (0, 1)", kind=EDGE),
        wrong("a Python number for one sample", rs_item_for_one,
              "is a float", "pred of shape (1, 1)", kind=EDGE),
        wrong("through NumPy: no bfloat16", rs_through_numpy,
              "unsupported ScalarType BFloat16", "Likely cause:", "NumPy has no bfloat16", kind=EDGE, outcome=RAISED),
        wrong("sum over the column: int32 becomes int64", rs_sum_over_column,
              "has dtype torch.int64; expected torch.int32", kind=EDGE),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
