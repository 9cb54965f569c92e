"""Chapter 01's flatten_transposed: its catalogue of right and wrong answers."""

import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

RAISED = Outcome.RAISED


# -- flatten_transposed -------------------------------------------------------------------------
def flatten_by_columns(x):
    return torch.cat([x[:, j] for j in range(x.shape[1])])


def flatten_with_assumed_strides(x):
    rows, cols = x.shape
    return x.as_strided((cols, rows), (1, cols)).reshape(-1)


# -- round 3 of outside testing -----------------------------------------------------------------
def flatten_columns_by_unbind(x):
    if x.shape[1] == 0:
        return x.new_empty(0)
    return torch.stack(x.unbind(dim=1)).reshape(-1)


def flatten_transposes_only_contiguous_x(x):
    if x.is_contiguous():
        return x.T.flatten()
    return x.flatten()  # "a non-contiguous x is already transposed"


def flatten_through_x_data(x):
    x.data = x.T.contiguous()
    return x.reshape(-1)


def flatten_through_numpy(x):
    return torch.from_numpy(x.numpy().T.reshape(-1).copy())


CATALOGUE = Catalogue({
    ex.flatten_transposed: [
        wrong("through NumPy", flatten_through_numpy, "NumPy has no bfloat16", outcome=RAISED, kind=EDGE),
        right("t().contiguous().view(-1)", lambda x: x.t().contiguous().view(-1)),
        right("torch.flatten of transpose(0, 1)", lambda x: torch.flatten(x.transpose(0, 1))),
        right("permute then flatten", lambda x: x.permute(1, 0).flatten()),
        right("mT then ravel", lambda x: x.mT.ravel()),
        wrong("view on the transpose", lambda x: x.T.view(-1),
              "view size is not compatible with input tensor's size and stride",
              "Likely cause: view() cannot reorder memory", outcome=RAISED),
        wrong("flattens without transposing", lambda x: x.reshape(-1), "x's own order", "transpose first"),
        wrong("reshapes to (columns, rows) instead of transposing",
              lambda x: x.reshape(x.shape[1], x.shape[0]).reshape(-1), "x's own order",
              "is not a transpose"),
        wrong("transposes but does not flatten", lambda x: x.T.contiguous(), "expected one dimension"),
        wrong("returns a NumPy array", lambda x: x.T.reshape(-1).numpy(), "is a numpy.ndarray"),
        wrong("transposes the caller's x in place", lambda x: x.t_().reshape(-1),
              "changed its input x in place", "is (3, 2) float32 afterwards instead of (2, 3)", "t_",
              kind=STATEFUL),
        wrong("column by column: no columns in an (n, 0) x", flatten_by_columns,
              "expected a non-empty list of Tensors", "Likely cause:", "(n, 0)",
              kind=EDGE, outcome=RAISED),
        wrong("through a Python list: loses float64", lambda x: torch.tensor(x.T.tolist()).flatten(),
              "has dtype torch.float32; expected torch.float64", kind=EDGE),
        wrong("reshape(-1, 1).squeeze(): a 1 x 1 x loses its dimension",
              lambda x: x.T.reshape(-1, 1).squeeze(), "has shape (); expected (1,)",
              "x of shape (1, 1)", kind=EDGE),
        wrong("as_strided with strides assumed contiguous", flatten_with_assumed_strides,
              "right for every contiguous x", "not contiguous", kind=EDGE),
        # -- round 3 of outside testing
        right("stack of unbind(1), then reshape", flatten_columns_by_unbind),
        right("einsum transpose, reshape to numel", lambda x: torch.einsum("ij->ji", x).reshape(x.numel())),
        wrong("transposes only a non-square x", lambda x: x.reshape(-1) if x.shape[0] == x.shape[1]
              else x.T.reshape(-1), "x's own order", "x of shape (3, 3)", kind=EDGE),
        wrong("transposes only a contiguous x", flatten_transposes_only_contiguous_x,
              "x's own order", "transposed (not contiguous)", kind=EDGE),
        wrong("replaces the caller's x through x.data", flatten_through_x_data,
              "changed its input x in place", "x.data", kind=STATEFUL),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
