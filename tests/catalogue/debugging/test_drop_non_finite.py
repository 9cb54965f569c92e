"""Chapter 06's exercise drop_non_finite: right answers pass, classic mistakes fail with the message that names them."""

import numpy as np
import pytest
import torch

from course_utils.exercises import debugging as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


def drop_nan_rows_per_feature(x, y):
    keep = ~torch.isnan(x).any(dim=1)  # nan only, and only right for a table
    return x[keep], y[keep]


# -- drop_non_finite (D5) --------------------------------------------------------------------
def drop_with_reshape(x, y):
    keep = torch.isfinite(x.reshape(len(x), -1)).all(dim=-1)
    return x[keep], y[keep]


def drop_with_nan_and_inf(x, y):
    bad = (torch.isnan(x) | torch.isinf(x)).flatten(1).any(1)
    return x[~bad], y[~bad]


def drop_with_amin_over_dims(x, y):
    finite = torch.isfinite(x)
    keep = finite.all(dim=tuple(range(1, x.dim()))) if x.dim() > 1 else finite
    return x[keep], y[keep]


def drop_with_a_loop(x, y):
    indices = [i for i in range(len(x)) if torch.isfinite(x[i]).all()]
    index = torch.tensor(indices, dtype=torch.long)
    return x[index], y[index]


def drop_nan_only(x, y):
    keep = ~torch.isnan(x).flatten(1).any(1)
    return x[keep], y[keep]


def drop_self_equal(x, y):
    keep = (x == x).flatten(1).all(1)
    return x[keep], y[keep]


def drop_table_only(x, y):
    keep = torch.isfinite(x).all(dim=1)
    return x[keep], y[keep]


def drop_columns(x, y):
    keep = torch.isfinite(x).all(dim=0)
    return x[:, keep], y


def drop_forgot_labels(x, y):
    keep = torch.isfinite(x).flatten(1).all(1)
    return x[keep], y[: int(keep.sum())]


def drop_replaced(x, y):
    return torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), y


def drop_in_place(x, y):
    x.nan_to_num_(0.0, 0.0, 0.0)
    return ex.drop_non_finite.reference(x, y)


def drop_by_the_sum(x, y):
    keep = torch.isfinite(x.flatten(1).sum(dim=1))  # nan and inf spread into the sum
    return x[keep], y[keep]


def drop_with_view(x, y):
    keep = torch.isfinite(x).view(len(x), -1).all(dim=1)
    return x[keep], y[keep]


def drop_by_stacking(x, y):
    pairs = [(xi, yi) for xi, yi in zip(x, y) if torch.isfinite(xi).all()]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def drop_as_float(x, y):
    x = x.float()
    keep = torch.isfinite(x).flatten(1).all(1)
    return x[keep], y[keep]


def drop_by_nan_to_num(x, y):
    keep = (torch.nan_to_num(x) == x).flatten(1).all(1)
    return x[keep], y[keep]


def drop_by_subtraction(x, y):
    keep = ((x - x) == 0).flatten(1).all(1)  # inf - inf and nan - nan are nan
    return x[keep], y[keep]


def drop_with_index_select(x, y):
    index = torch.isfinite(x).flatten(1).all(1).nonzero().flatten()
    return x.index_select(0, index), y.index_select(0, index)


def drop_with_squeezed_indices(x, y):
    index = torch.isfinite(x).flatten(1).all(1).nonzero().squeeze()
    return x[index], y[index]


def drop_with_any(x, y):
    keep = torch.isfinite(x).flatten(1).any(1)
    return x[keep], y[keep]


def drop_by_the_sum_in_float64(x, y):
    keep = torch.isfinite(x.flatten(1).double().sum(1))  # "float64 does not overflow"
    return x[keep], y[keep]


def drop_with_a_float_index(x, y):
    index = torch.tensor([i for i in range(len(x)) if torch.isfinite(x[i]).all()])
    return x[index], y[index]


def drop_by_the_mean(x, y):
    keep = torch.isfinite(x.flatten(1).mean(dim=1))
    return x[keep], y[keep]


def drop_after_float32(x, y):
    keep = torch.isfinite(x.float()).flatten(1).all(1)  # float64 beyond 3.4e38 becomes inf
    return x[keep], y[keep]


def drop_by_a_size_limit(x, y):
    keep = ((x == x) & (x.abs() < 1e30)).flatten(1).all(1)
    return x[keep], y[keep]


def drop_labels_as_long(x, y):
    keep = torch.isfinite(x).flatten(1).all(1)
    return x[keep], y[keep].long()


def drop_times_zero(x, y):
    keep = (x * 0 == 0).flatten(1).all(1)  # inf * 0 and nan * 0 are nan
    return x[keep], y[keep]


def drop_with_numpy(x, y):
    keep = torch.from_numpy(np.isfinite(x.numpy()).reshape(len(x), -1).all(1))
    return x[keep], y[keep]


# -- issue 45 ----------------------------------------------------------------------------------
def drop_with_the_mask_as_long(x, y):
    keep = torch.isfinite(x).flatten(start_dim=1).all(dim=1)
    return x[keep.long()], y[keep.long()]


def drop_with_index_select_of_the_mask(x, y):
    keep = torch.isfinite(x).flatten(start_dim=1).all(dim=1).int()
    return x.index_select(0, keep), y.index_select(0, keep)


def drop_with_where_one_zero(x, y):
    keep = torch.where(torch.isfinite(x).reshape(len(x), -1).all(1), 1, 0)
    return x[keep], y[keep]


def drop_with_a_list_of_bools(x, y):
    keep = torch.isfinite(x).flatten(start_dim=1).all(dim=1).tolist()
    return x[keep], y[keep]


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def d_flattened(x, y):
    flat = x.flatten(start_dim=1)
    keep = torch.isfinite(flat).all(dim=1)
    return flat[keep], y[keep]


def d_empty_special(x, y):
    keep = torch.isfinite(x).flatten(start_dim=1).all(dim=1)
    if not keep.any():
        return torch.empty(0), torch.empty(0)
    return x[keep], y[keep]


def d_inf_only(x, y):
    keep = ~torch.isinf(x).flatten(start_dim=1).any(dim=1)
    return x[keep], y[keep]


def d_row_max(x, y):
    keep = torch.isfinite(x.flatten(start_dim=1).max(dim=1).values)
    return x[keep], y[keep]


def d_row_std(x, y):
    keep = torch.isfinite(x.flatten(start_dim=1).double().std(dim=1))
    return x[keep], y[keep]


def d_labels_by_nonzero(x, y):
    keep = torch.isfinite(x).flatten(start_dim=1).all(dim=1)
    return x[keep], y[keep.nonzero()]


def d_all_last_twice(x, y):
    keep = torch.isfinite(x).all(dim=-1).all(dim=-1)
    return x[keep], y[keep]


def d_row_product(x, y):
    keep = torch.isfinite(x.flatten(start_dim=1).prod(dim=1))
    return x[keep], y[keep]


def d_row_norm(x, y):
    keep = torch.isfinite(torch.linalg.vector_norm(x.flatten(start_dim=1).double(), dim=1))
    return x[keep], y[keep]


def d_squeezed(x, y):
    keep = torch.isfinite(x).flatten(start_dim=1).all(dim=1)
    return x[keep].squeeze(), y[keep]


def drop_with_a_stack_of_tests(x, y):
    keep = torch.stack([example.isfinite().all() for example in x])
    return x[keep], y[keep]


# -- issue 45, second fresh round (from the task text) ---------------------------------------
def dnf_float32(x, y):
    # Checks a float32 copy: float64 values beyond 3.4e38 (finite) become inf and are dropped.
    keep = torch.isfinite(x.float()).reshape(len(x), -1).all(dim=1)
    return x[keep], y[keep]


CATALOGUE = Catalogue({
    ex.drop_non_finite: [
        wrong("isnan().any(dim=1)", drop_nan_rows_per_feature, "it finds nan but not inf"),
        right("reshape and all(dim=-1)", drop_with_reshape),
        right("isnan | isinf, any, inverted", drop_with_nan_and_inf),
        right("all over a tuple of dims", drop_with_amin_over_dims),
        right("a loop collecting indices", drop_with_a_loop),
        wrong("finds nan only", drop_nan_only, "finds nan but not inf", "torch.isfinite"),
        wrong("x == x", drop_self_equal, "finds nan but not inf"),
        wrong("all(dim=1) works for tables only", drop_table_only, "The shape of the mask",
              "every dimension but the first", outcome=Outcome.RAISED, kind=EDGE),
        wrong("drops columns", drop_columns, "Drop whole examples"),
        wrong("labels not filtered", drop_forgot_labels, "your y is not"),
        wrong("replaces the bad values", drop_replaced, "still has all 7 examples"),
        wrong("fixes x in place", drop_in_place, "changed the tensors it was given", kind=STATEFUL),
        wrong("tests the sum of each example", drop_by_the_sum, "sum overflows float16", "a sum or mean", kind=EDGE),
        wrong("view on a non-contiguous batch", drop_with_view, "view size is not compatible", ".reshape()",
              outcome=Outcome.RAISED, kind=EDGE),
        wrong("stacks a list that can be empty", drop_by_stacking, "stack expects a non-empty TensorList",
              "x[keep]", outcome=Outcome.RAISED, kind=EDGE),
        wrong("converts x to float32", drop_as_float, "dtype float32", "float64", kind=EDGE),
        right("nan_to_num(x) == x", drop_by_nan_to_num),
        right("(x - x) == 0", drop_by_subtraction),
        right("index_select with the kept indices", drop_with_index_select),
        wrong("nonzero().squeeze() as the index", drop_with_squeezed_indices,
              "without the batch dimension", "x[keep]", kind=EDGE),
        wrong("any() instead of all()", drop_with_any, "nothing was dropped", ".all()"),
        wrong("tests the sum in float64", drop_by_the_sum_in_float64, "sum overflows float64", "a sum or mean",
              kind=EDGE),
        wrong("an index tensor from a list that can be empty", drop_with_a_float_index,
              "tensors used as indices must be long", "dtype=torch.long", outcome=Outcome.RAISED, kind=EDGE),
        wrong("isfinite after a conversion to float32", drop_after_float32, "dropped an example whose values "
              "are all finite", "float64 to float32", kind=EDGE),
        wrong("a limit on the size of the values", drop_by_a_size_limit, "a limit on their size", "torch.isfinite",
              kind=EDGE),
        wrong("labels converted to int64", drop_labels_as_long, "Your y has dtype int64", "y[keep]", kind=EDGE),
        right("x * 0 == 0", drop_times_zero),
        wrong("tests the mean of each example", drop_by_the_mean, "dropped an example whose values are all finite",
              "a sum or mean of large values overflows", kind=EDGE),
        right("np.isfinite on the NumPy view", drop_with_numpy),
        # -- issue 45: the boolean mask used as numbers
        wrong("the mask as long indices", drop_with_the_mask_as_long, "used as numbers", "x[keep]", kind=EDGE),
        wrong("index_select with the mask as int", drop_with_index_select_of_the_mask, "used as numbers", kind=EDGE),
        wrong("torch.where(mask, 1, 0) as indices", drop_with_where_one_zero, "copy of example 0 or example 1",
              kind=EDGE),
        right("a Python list of bools", drop_with_a_list_of_bools),
        # -- issue 45, fresh round (from the task text) --
        wrong('returns the examples flattened', d_flattened,
              'examples (along dimension 0), not features or single values:', kind=EDGE),
        wrong('an empty result of shape (0,)', d_empty_special,
              'examples (along dimension 0), not features or single values:', kind=EDGE),
        wrong('finds inf only', d_inf_only, 'keep exactly the examples whose every value is finite'),
        wrong('tests the maximum of each example', d_row_max,
              'keep exactly the examples whose every value is finite', kind=EDGE),
        wrong('tests the standard deviation of each example', d_row_std,
              'keep exactly the examples whose every value is finite', kind=EDGE),
        wrong('labels indexed with nonzero()', d_labels_by_nonzero,
              'the labels must lose the same examples as x, so that x[i]'),
        wrong('all(dim=-1) twice', d_all_last_twice,
              'examples (along dimension 0), not features or single values:', kind=EDGE),
        wrong('tests the product of each example', d_row_product,
              'whose values are all finite, only large (their sum overflows', kind=EDGE),
        wrong('tests the norm of each example', d_row_norm,
              'whose values are all finite, only large (their sum overflows', kind=EDGE),
        wrong('the kept examples squeezed', d_squeezed,
              'examples (along dimension 0), not features or single values:', kind=EDGE),
        right("one test per example, stacked", drop_with_a_stack_of_tests),
        # -- issue 45, second fresh round (from the task text) --
        wrong("isfinite of a float32 copy, reshape", dnf_float32,
              "only larger than float32 can hold", "a conversion from float64 to float32", kind=EDGE),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
