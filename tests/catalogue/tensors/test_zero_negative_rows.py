"""Chapter 01's zero_negative_rows: its catalogue of right and wrong answers."""

import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, TYPICAL, Catalogue, right, wrong

RAISED = Outcome.RAISED


# -- zero_negative_rows -------------------------------------------------------------------------
def zero_rows_masked_fill(x):
    negative = x.sum(1) < 0
    x.masked_fill_(negative[:, None], 0)
    return negative.sum()


def zero_rows_index_fill(x):
    rows = torch.nonzero(x.sum(dim=1) < 0).flatten()
    x.index_fill_(0, rows, 0.0)
    return len(rows)


def zero_rows_copy_where(x):
    negative = x.sum(dim=1, keepdim=True) < 0
    x.copy_(torch.where(negative, torch.zeros_like(x), x))
    return negative.count_nonzero().item()


def zero_rows_by_mean(x):
    negative = x.mean(dim=1) < 0
    x[negative, :] = 0.0
    return len(x[negative])


def zero_rows_chained(x):
    negative = x.sum(dim=1) < 0
    x[negative][:] = 0
    return int(negative.sum())


def zero_rows_new_tensor(x):
    negative = x.sum(dim=1) < 0
    x = torch.where(negative[:, None], torch.zeros_like(x), x)
    return int(negative.sum())


def zero_rows_returns_x(x):
    x[x.sum(dim=1) < 0] = 0
    return x


def zero_rows_negative_elements(x):
    negative = x < 0
    x[negative] = 0
    return int(negative.any(dim=1).sum())


def zero_rows_of_column_sums(x):
    negative = x.sum(dim=0) < 0
    x[:, negative] = 0
    return int(negative.sum())


def zero_rows_keepdim_mask(x):
    negative = x.sum(dim=1, keepdim=True) < 0
    x[negative] = 0
    return int(negative.sum())


def zero_rows_counted_after(x):
    x[x.sum(dim=1) < 0] = 0
    return int((x.sum(dim=1) < 0).sum())


def zero_rows_or_equal(x):
    negative = x.sum(dim=1) <= 0
    x[negative] = 0
    return int(negative.sum())


def zero_rows_multiply(x):
    keep = x.sum(dim=1) >= 0
    x *= keep[:, None]
    return int((~keep).sum())


def zero_rows_contiguous_first(x):
    x = x.contiguous()  # "to be safe": a copy when x is not contiguous
    negative = x.sum(dim=1) < 0
    x[negative] = 0
    return int(negative.sum())


def zero_rows_through_data(x):
    negative = x.sum(dim=1) < 0
    x.data = torch.where(negative[:, None], torch.zeros_like(x), x)
    return int(negative.sum())


_masks = {}


def zero_rows_cached_mask(x):
    # the mask of the first call, kept for the same x (x is kept too: a freed x's id is reused)
    if id(x) not in _masks or _masks[id(x)][0] is not x:
        _masks[id(x)] = (x, x.sum(dim=1) < 0)
    negative = _masks[id(x)][1]
    x[negative] = 0
    return int(negative.sum())


def zero_rows_loop(x):
    count = 0
    for i in range(len(x)):
        if x[i].sum() < 0:
            x[i] = 0
            count += 1
    return count


def zero_rows_where_square_mask(x):
    negative = x.sum(dim=1) < 0
    x.copy_(torch.where(negative, 0.0, x))
    return int(negative.sum())


def zero_rows_float_count(x):
    negative = x.sum(dim=1) < 0
    x[negative] = 0
    return negative.float().sum()


# -- issue 15 -----------------------------------------------------------------------------------
def zero_rows_by_the_whole_sum(x):
    negative = x.sum() < 0  # no dim: one number for the whole tensor
    x[negative] = 0
    return int(negative.sum())


def zero_rows_not_at_least_zero(x):
    negative = ~(x.sum(dim=1) >= 0)
    x[negative] = 0
    return int(negative.sum())


def zero_rows_refusing_rows_of_zeros(x):
    # a check the task never asked for: after one call, the zeroed rows are rows of zeros
    assert not (x == 0).all(dim=1).any(), "x has a row of zeros"
    negative = x.sum(dim=1) < 0
    x[negative] = 0
    return int(negative.sum())


# -- issue 45: rows at the dtype's edges (subnormals, -0.0, inf with -inf, sums that overflow) -----
def zero_rows_nan_to_num_first(x):
    negative = x.nan_to_num().sum(dim=1) < 0
    x[negative] = 0
    return int(negative.sum())


def zero_rows_clamped_first(x):
    info = torch.finfo(x.dtype)  # "inf would break the sum": keep it finite
    negative = x.clamp(info.min, info.max).sum(dim=1) < 0
    x[negative] = 0
    return int(negative.sum())


def zero_rows_float32_mask(x):
    negative = x.float().sum(dim=1) < 0
    x[negative] = 0
    return int(negative.sum())


def zero_rows_divided_first(x):
    negative = (x / x.shape[1]).sum(dim=1) < 0  # "divide first, against overflow"
    x[negative] = 0
    return int(negative.sum())


def zero_rows_float64_sum(x):
    negative = x.sum(dim=1, dtype=torch.float64) < 0
    x[negative] = 0
    return int(negative.sum())


def zero_rows_einsum_index_put(x):
    rows = torch.einsum("ij->i", x) < 0
    x.index_put_((rows,), torch.tensor(0, dtype=x.dtype))
    return int(rows.count_nonzero())


# -- issue 45, fresh round (from the task text) --
def zero_rows_signbit(x):  # -0.0 sums count as negative, and so does nan from inf + -inf
    negative = torch.signbit(x.sum(dim=1))
    x[negative] = 0
    return int(negative.sum())


def zero_rows_counts_zero_rows_after(x):  # counts the rows of zeros, old ones too (and rows of no columns)
    x[x.sum(dim=1) < 0] = 0
    return int((x == 0).all(dim=1).sum())


def zero_rows_nonzero_squeeze_len(x):  # one negative row: squeeze() makes a 0-d index, len() fails
    rows = (x.sum(dim=1) < 0).nonzero().squeeze()
    x[rows] = 0
    return len(rows)


def zero_rows_epsilon_threshold(x):  # "below 0 up to rounding": tiny negative sums stay
    negative = x.sum(dim=1) < -torch.finfo(x.dtype).eps
    x[negative] = 0
    return int(negative.sum())


def zero_rows_cumsum_last(x):  # the running sum's last column: no column to read in an x without columns
    negative = x.cumsum(dim=1)[:, -1] < 0
    x[negative] = 0
    return int(negative.sum())


def zero_rows_nan_to_num_in_place(x):  # tames the infinities of the caller's x, in rows not zeroed too
    x.nan_to_num_()
    negative = x.sum(dim=1) < 0
    x[negative] = 0
    return int(negative.sum())


def zero_rows_count_of_keepdim_mask(x):  # a keepdim mask counted down its rows: a (1,) tensor, not 0-d
    negative = x.sum(dim=1, keepdim=True) < 0
    x.masked_fill_(negative, 0)
    return negative.sum(dim=0)


def zero_rows_float32_working_copy(x):  # half precision sums inaccurate: works on a float32 copy
    y = x.to(torch.float32)
    negative = y.sum(dim=1) < 0
    y[negative] = 0
    return int(negative.sum())


def zero_rows_as_tuple_len(x):  # len of nonzero(as_tuple=True) is the number of dimensions
    rows = (x.sum(dim=1) < 0).nonzero(as_tuple=True)
    x[rows] = 0
    return len(rows)


def zero_rows_counts_elements(x):  # the expanded mask counts elements, not rows
    mask = (x.sum(dim=1, keepdim=True) < 0).expand_as(x)
    x[mask] = 0
    return int(mask.sum())


def zero_rows_index_put(x):
    negative = x.sum(dim=1) < 0
    x.index_put_((negative,), torch.tensor(0, dtype=x.dtype))
    return torch.count_nonzero(negative)


CATALOGUE = Catalogue({
    ex.zero_negative_rows: [
        wrong("~(sum >= 0)", zero_rows_not_at_least_zero, "whose sum is nan", "x.sum(dim=1) < 0 is not", kind=EDGE),
        wrong("sum() without dim", zero_rows_by_the_whole_sum, "one True or False for the whole tensor",
              "x.sum(dim=1)"),
        right("masked_fill_ with a column mask, a 0-d count", zero_rows_masked_fill),
        right("index_fill_ of the row indices", zero_rows_index_fill),
        right("copy_ of torch.where, count_nonzero().item()", zero_rows_copy_where),
        # issue 45: was right; a negative subnormal sum's mean rounds to -0.0
        wrong("the mean below 0: a tiny negative sum's mean is -0.0", zero_rows_by_mean,
              "its sum is the smallest negative number", "rounds it to -0.0", "x.sum(dim=1) < 0",
              kind=EDGE),
        wrong("nan_to_num before summing", zero_rows_nan_to_num_first, "whose sum is nan",
              "nan_to_num replaces inf and -inf", kind=EDGE),
        wrong("clamped to the dtype's range before summing", zero_rows_clamped_first,
              "whose sum is nan", "clamp replaces inf and -inf", kind=EDGE),
        wrong("the mask from a float32 sum of a float64 x", zero_rows_float32_mask,
              "at the edges of float64", "wrong values", kind=EDGE),
        wrong("divides before summing: sums of 0 come out below 0", zero_rows_divided_first,
              "sum is exactly 0", "x's own sums", kind=EDGE),
        right("the sum in float64", zero_rows_float64_sum),
        right("einsum row sums, index_put_", zero_rows_einsum_index_put),
        wrong("writes through a chained index: into a copy", zero_rows_chained,
              "The caller's x is unchanged", "indexes twice", "x[negative] = 0"),
        wrong("builds a new tensor and rebinds the name x", zero_rows_new_tensor,
              "The caller's x is unchanged", "Assigning a new tensor to the name x"),
        wrong("returns x instead of the count", zero_rows_returns_x,
              "returned a tensor shaped like x", "int(negative.sum())"),
        wrong("zeroes the negative elements", zero_rows_negative_elements,
              "zeroed the negative elements, not the rows"),
        wrong("sums the columns", zero_rows_of_column_sums, "zeroed the columns", "sum(dim=1)"),
        wrong("a keepdim mask does not fit x", zero_rows_keepdim_mask,
              "The shape of the mask", "Likely cause:", "keepdim=True", outcome=RAISED),
        wrong("counts after zeroing", zero_rows_counted_after,
              "returned 0; 2 rows were to be zeroed", "Counting after the zeroing finds none"),
        wrong("a loop over the rows", zero_rows_loop, "asks for no Python loop", "for i in range(len(x))"),
        wrong("a float count", zero_rows_float_count, "float32 tensor", "as an int"),
        wrong("torch.where with an (N,) mask lines up with the columns", zero_rows_where_square_mask,
              "must match the size of tensor", "Likely cause:", "lines up with the columns",
              outcome=RAISED),
        wrong("<= zeroes the rows summing to exactly 0", zero_rows_or_equal,
              "sum is exactly 0", "< 0, not <= 0", kind=EDGE),
        wrong("multiplies by a keep mask: -inf * 0 is nan", zero_rows_multiply,
              "holds nan", "holding inf and -inf", kind=EDGE),
        wrong("contiguous() first: a copy of a non-contiguous x", zero_rows_contiguous_first,
              "(not contiguous)", "works for every contiguous x", "contiguous()", kind=EDGE),
        wrong("replaces x.data: the caller's other views miss it", zero_rows_through_data,
              "gave x new memory", "x.data", kind=EDGE),
        wrong("remembers the first call's mask", zero_rows_cached_mask,
              "second call", "returned 2; expected 0", "remembers rows of an earlier call",
              kind=STATEFUL),
        # the probe calls again whatever the first call left; the judge reports the second
        # call's error only where the first call left x right (issue 43)
        wrong("refuses a row of zeros: raises on the second call", zero_rows_refusing_rows_of_zeros,
              "x has a row of zeros", "second call on the same x", kind=STATEFUL, outcome=RAISED),
        # -- issue 45, fresh round (from the task text) --
        wrong("signbit of the sums: nan from inf + -inf has its sign bit set", zero_rows_signbit,
              "whose sum is nan", "signbit reads the sign bit", kind=EDGE),
        wrong("counts the rows of zeros afterwards", zero_rows_counts_zero_rows_after,
              "That is the number of rows of zeros afterwards", kind=EDGE),
        wrong("nonzero().squeeze() and len(): one negative row is a 0-d index", zero_rows_nonzero_squeeze_len,
              "len() of a 0-d tensor", "Likely cause:", kind=EDGE, outcome=RAISED),
        wrong("below minus eps: a tiny negative sum stays", zero_rows_epsilon_threshold,
              "at the edges of float32", "wrong values", kind=EDGE),
        wrong("the last column of cumsum: none in an x without columns", zero_rows_cumsum_last,
              "index -1 is out of bounds", "no columns", kind=EDGE, outcome=RAISED),
        wrong("nan_to_num_ on the caller's x", zero_rows_nan_to_num_in_place,
              "holding inf and -inf", "got 3.40282e+38, expected inf", kind=EDGE),
        wrong("a (1,) count from a keepdim mask", zero_rows_count_of_keepdim_mask,
              "tensor of shape (1,) holding 2", "0-d integer tensor", kind=TYPICAL),
        wrong("zeroes a float32 copy of a float64 x", zero_rows_float32_working_copy,
              "for this float64 x it wrote into a copy", "another dtype is a copy", kind=EDGE),
        wrong("len() of nonzero(as_tuple=True): the number of dimensions", zero_rows_as_tuple_len,
              "Your function returned 1; 2 rows were to be zeroed", kind=TYPICAL),
        wrong("counts the elements of an expanded mask", zero_rows_counts_elements,
              "number of elements zeroed", kind=TYPICAL),
        right("index_put_ of a 0-d zero, count_nonzero", zero_rows_index_put),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
