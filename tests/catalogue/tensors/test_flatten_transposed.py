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


# -- issue 45, fresh round (from the task text) -------------------------------------------------
def ft_preallocated(x):
    out = torch.empty(x.numel())
    out[:] = x.T.reshape(-1)
    return out


def ft_plus_zero_copy(x):
    return x.T.reshape(-1) + 0


def ft_tolist_result(x):
    return x.T.reshape(-1).tolist()


def ft_empty_special(x):
    if x.numel() == 0:
        return torch.tensor([])
    return x.T.reshape(-1)


def ft_float_roundtrip(x):
    return x.float().T.reshape(-1).to(x.dtype)


def ft_cat_unbind(x):
    return torch.cat(x.unbind(1))


def ft_index_square(x):
    index = torch.arange(x.numel()).view(x.shape[1], x.shape[0]).T.reshape(-1)
    return x.reshape(-1)[index]


def ft_nan_to_num(x):
    return torch.nan_to_num(x.T.reshape(-1))


def ft_times_one(x):
    return x.T.reshape(-1) * 1.0


def ft_loop_default_dtype(x):
    rows, cols = x.shape
    return torch.tensor([x[i, j].item() for j in range(cols) for i in range(rows)])


def ft_gather_index(x):
    return x.reshape(-1)[torch.arange(x.numel()).view(x.shape).T.reshape(-1)]


# -- issue 45, second fresh round (from the task text) ------------------------------------
def ft_flatten_then_T(x):
    return x.reshape(-1).T


def ft_flatten_then_t_in_two_lines(x):
    flat = x.flatten()
    return flat.t()


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
        # -- issue 45, fresh round (from the task text) --
        right("fancy index of arange laid out like x, transposed", ft_gather_index),
        wrong("fills a float32 buffer: float64 lost", ft_preallocated,
              "has dtype torch.float32; expected torch.float64", kind=EDGE),
        wrong("+ 0 to copy: a bool x becomes int64", ft_plus_zero_copy,
              "has dtype torch.int64; expected torch.bool", kind=EDGE),
        wrong("returns a Python list", ft_tolist_result,
              "is a list", "expected a torch.Tensor"),
        wrong("an empty x becomes torch.tensor([])", ft_empty_special,
              "has dtype torch.float32; expected torch.int64", "x of shape (0, 2)", kind=EDGE),
        wrong("through float32 and back: the edges of float64 lost", ft_float_roundtrip,
              "wrong values", "at the edges of float64", kind=EDGE),
        wrong("torch.cat of unbind(1): no columns", ft_cat_unbind,
              "expected a non-empty list of Tensors", "Likely cause:", "(n, 0)", kind=EDGE, outcome=RAISED),
        wrong("indices laid out (columns, rows)", ft_index_square,
              "wrong values", "x of shape (2, 3)"),
        wrong("nan_to_num cleans the nan and inf", ft_nan_to_num,
              "at the edges of float32", "expected inf", kind=EDGE),
        wrong("* 1.0 makes an integer x float", ft_times_one,
              "has dtype torch.float32; expected torch.int64", kind=EDGE),
        wrong("element by element through .item(): float64 lost", ft_loop_default_dtype,
              "has dtype torch.float32; expected torch.float64", kind=EDGE),
        # -- issue 45, second fresh round (from the task text) --
        wrong("flattens, then .T", ft_flatten_then_T, "flattens x first",
              "a 1-D tensor has only one dimension", "Transpose first, then flatten"),
        wrong("flattens into a name, then .t()", ft_flatten_then_t_in_two_lines, "flattens x first",
              "a 1-D tensor has only one dimension", "Transpose first, then flatten"),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
