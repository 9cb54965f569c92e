"""Chapter 01's exercises: the catalogue of answers each check is tried against.

Right answers in other styles than the reference pass; wrong answers, written as learners
write them, fail with the message that names their mistake (see tests/exercise_catalogue.py).
"""

import copy

import numpy as np
import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

RAISED = Outcome.RAISED


# -- match_reference: answers of more than one line -------------------------------------------
def match_in_two_steps(x, reference):
    x = x.to(reference.device)
    x = x.to(reference.dtype)
    return x


def match_by_converting_x_data(x, reference):
    x.data = x.data.to(reference.dtype)  # changes the caller's x
    return x.to(reference.device)


def match_by_moving_x_data(x, reference):
    x.data = x.data.to(dtype=reference.dtype, device=reference.device)
    return x


def match_by_moving_a_clones_data(x, reference):
    x = x.clone()
    x.data = x.data.to(dtype=reference.dtype, device=reference.device)
    return x


def match_only_float_dtypes(x, reference):
    if reference.dtype == torch.float16:
        x = x.half()
    else:
        x = x.float()
    return x.to(reference.device)


def match_by_adding_zeros(x, reference):
    zero = torch.zeros(1, dtype=reference.dtype, device=reference.device)
    return x.to(reference.device) + zero  # type promotion picks the wider dtype


# -- independent_copy ---------------------------------------------------------------------------
_buffer = {}


def copy_into_reused_buffer(array):
    source = torch.from_numpy(array)
    key = (source.shape, source.dtype)
    if key not in _buffer:  # allocate once, reuse on later calls
        _buffer[key] = torch.empty(source.shape, dtype=source.dtype)
    return _buffer[key].copy_(source)


_copies = {}


def copy_memoised_by_id(array):
    if id(array) not in _copies:
        _copies[id(array)] = torch.tensor(array)
    return _copies[id(array)]


def copy_row_by_row(array):
    return torch.stack([torch.tensor(row) for row in array])


def copy_then_break_the_link_too_late(array):
    tensor = torch.from_numpy(array)
    array = array.copy()  # rebinds the local name; the tensor still shares the caller's array
    return tensor


# -- flatten_transposed -------------------------------------------------------------------------
def flatten_by_columns(x):
    return torch.cat([x[:, j] for j in range(x.shape[1])])


def flatten_with_assumed_strides(x):
    rows, cols = x.shape
    return x.as_strided((cols, rows), (1, cols)).reshape(-1)


# -- outer_sum ----------------------------------------------------------------------------------
def outer_sum_square_only(a, b):
    if len(a) != len(b):
        return a[:, None] + b[None, :]
    return a + b


def outer_sum_loop_into_empty(a, b):
    out = torch.empty(len(a), len(b), dtype=a.dtype)
    for i in range(len(a)):
        out[i] = a[i] + b
    return out


def outer_sum_meshgrid_ij(a, b):
    rows, cols = torch.meshgrid(a, b, indexing="ij")
    return rows + cols


def outer_sum_meshgrid_xy(a, b):
    rows, cols = torch.meshgrid(a, b, indexing="xy")
    return rows + cols


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
    if id(x) not in _masks:  # the mask of the first call, kept for the same x
        _masks[id(x)] = x.sum(dim=1) < 0
    negative = _masks[id(x)]
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


# -- best_match ---------------------------------------------------------------------------------
def best_match_loop(q, k):
    return torch.stack([(qi @ (k if k.dim() == 2 else k[i]).T).argmax(dim=1) for i, qi in enumerate(q)])


def best_match_bmm(q, k):
    return torch.bmm(q, k.transpose(1, 2)).argmax(dim=2)


def best_match_normalises_q_in_place(q, k):
    q /= q.norm(dim=-1, keepdim=True)
    return (q @ k.mT).argmax(dim=-1)


def best_match_reshape_view(q, k):
    b, n, d = q.shape
    scores = q.view(b * n, d) @ k.reshape(-1, d).T if k.dim() == 2 else q @ k.mT
    return scores.view(b, n, -1).argmax(dim=-1)


def best_match_einsum_ellipsis(q, k):
    return torch.einsum("...nd,...md->...nm", q, k).argmax(dim=-1)


def best_match_broadcast_product(q, k):
    scores = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(dim=-1)
    return scores.softmax(dim=-1).argmax(dim=-1)


def best_match_max_indices(q, k):
    return torch.matmul(q, k.transpose(-2, -1)).max(dim=-1).indices


def best_match_untransposed(q, k):
    return (q @ k).argmax(dim=-1)


def best_match_flat_argmax(q, k):
    return (q @ k.mT).argmax()


def best_match_over_queries(q, k):
    return (q @ k.mT).argmax(dim=1)


def best_match_max_pair(q, k):
    return (q @ k.mT).max(dim=-1)


def best_match_max_values(q, k):
    return (q @ k.mT).max(dim=-1).values


def best_match_argmin(q, k):
    return (q @ k.mT).argmin(dim=-1)


def best_match_squeezed(q, k):
    return (q @ k.mT).argmax(dim=-1).squeeze()


def best_match_dot_T(q, k):
    return (q @ k.T).argmax(dim=-1)


def best_match_einsum_3d(q, k):
    return torch.einsum("bnd,bmd->bnm", q, k).argmax(dim=-1)


def best_match_int32(q, k):
    return (q @ k.mT).argmax(dim=-1).int()


def best_match_swaps_batch_and_keys(q, k):
    return (q @ k.transpose(0, 1).mT).argmax(dim=-1) if k.dim() == 3 else (q @ k.mT).argmax(dim=-1)


# -- round 3 of outside testing -----------------------------------------------------------------
def match_through_float32(x, reference):
    return x.float().to(reference.dtype).to(reference.device)  # float32 rounds float64, big ints


def match_through_float64(x, reference):
    return x.double().to(reference)  # float64 holds every value tried exactly


def copy_from_a_sum(array):
    return torch.from_numpy(array + 0)  # a 0-d array + 0 is a NumPy scalar


def copy_into_an_empty_tensor(array):
    out = torch.empty(array.shape, dtype=torch.from_numpy(array[...]).dtype)
    out.copy_(torch.from_numpy(np.ascontiguousarray(array)))  # 0-d becomes (1,)
    return out


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


def outer_sum_while_loop(a, b):
    out = torch.empty(len(a), len(b), dtype=torch.result_type(a, b))
    i = 0
    while i < len(a):
        out[i] = a[i] + b
        i += 1
    return out


def outer_sum_recursive(a, b):
    if len(a) == 0:
        return torch.empty(0, len(b), dtype=torch.result_type(a, b))
    return torch.cat([(a[0] + b)[None], outer_sum_recursive(a[1:], b)])


def residuals_diagonal_of_every_pair(pred, target):
    return (pred - target).diagonal()  # right numbers, from an (N, N) tensor


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


def match_by_copying_into_the_reference(x, reference):
    reference.copy_(x)
    return reference


def remove_by_view_of_everything(x):
    return x.view(-1)


def flatten_through_numpy(x):
    return torch.from_numpy(x.numpy().T.reshape(-1).copy())


ROUND_3 = {
    ex.match_reference: [
        right("a float64 detour, then x.to(reference)", match_through_float64),
        right("clone, then to(..., copy=True)", lambda x, reference: x.clone().to(
            device=reference.device, dtype=reference.dtype, copy=True)),
        wrong("to(dtype, device) by position: the device comes first",
              lambda x, reference: x.to(reference.dtype, reference.device),
              "to() received an invalid combination of arguments", "Likely cause:",
              "takes the device first", outcome=RAISED),
        right("to(device, dtype) by position", lambda x, reference: x.to(reference.device, reference.dtype)),
        wrong("a float32 detour rounds float64 numbers and big integers", match_through_float32,
              "Your numbers were rounded on the way", "as if they passed through float32",
              kind=EDGE),
    ],
    ex.independent_copy: [
        right("torch.tensor of a NumPy copy", lambda array: torch.tensor(np.array(array))),
        right("np.copy, as_tensor, detach().clone()",
              lambda array: torch.as_tensor(np.copy(array)).detach().clone()),
        wrong("from_numpy(array + 0): a 0-d array gives a NumPy scalar", copy_from_a_sum,
              "expected np.ndarray (got numpy.float64)", "Likely cause:", "gives a NumPy scalar",
              kind=EDGE, outcome=RAISED),
        wrong("copy_ from np.ascontiguousarray: a 0-d array becomes (1,)", copy_into_an_empty_tensor,
              "doesn't match the broadcast shape [1]", "Likely cause:", "np.ascontiguousarray",
              kind=EDGE, outcome=RAISED),
        wrong("from_numpy(np.ascontiguousarray(array)) shares a contiguous array",
              lambda array: torch.from_numpy(np.ascontiguousarray(array)),
              "shares memory with the array"),
        wrong(".contiguous() copies only a non-contiguous array",
              lambda array: torch.from_numpy(array).contiguous(),
              "shares memory with the array", kind=EDGE),
    ],
    ex.flatten_transposed: [
        right("stack of unbind(1), then reshape", flatten_columns_by_unbind),
        right("einsum transpose, reshape to numel", lambda x: torch.einsum("ij->ji", x).reshape(x.numel())),
        wrong("transposes only a non-square x", lambda x: x.reshape(-1) if x.shape[0] == x.shape[1]
              else x.T.reshape(-1), "x's own order", "x of shape (3, 3)", kind=EDGE),
        wrong("transposes only a contiguous x", flatten_transposes_only_contiguous_x,
              "x's own order", "transposed (not contiguous)", kind=EDGE),
        wrong("replaces the caller's x through x.data", flatten_through_x_data,
              "changed its input x in place", "x.data", kind=STATEFUL),
    ],
    ex.remove_batch_dim: [
        right("unbind(0)[0]", lambda x: x.unbind(0)[0]),
        right("select(0, 0)", lambda x: x.select(0, 0)),
        wrong("reshape(-1, *shape[2:]): a 1-D x keeps its dimension",
              lambda x: x.reshape(-1, *x.shape[2:]), "still has shape (1,)", "x of shape (1,)",
              kind=EDGE),
        wrong("flatten(0, 1): a 1-D x has no dimension 1", lambda x: x.flatten(0, 1),
              "Dimension out of range", "on x of shape (1,)", "Likely cause:", kind=EDGE,
              outcome=RAISED),
    ],
    ex.outer_sum: [
        right("torch.broadcast_tensors, then add",
              lambda a, b: torch.add(*torch.broadcast_tensors(a[:, None], b[None, :]))),
        right("unsqueeze(-1), contiguous result", lambda a, b: (a.unsqueeze(-1) + b).contiguous()),
        wrong("torch.vmap over a: no empty a", lambda a, b: torch.vmap(lambda ai: ai + b)(a),
              "index 0 out of range for tensor of size [0]", "Likely cause:", "N = 0",
              kind=EDGE, outcome=RAISED),
        wrong("a while loop over the rows", outer_sum_while_loop, "asks for no Python loop",
              "while i < len(a)"),
        wrong("recursion over a's elements", outer_sum_recursive, "asks for no Python loop",
              "torch calls", kind=EDGE),
        wrong("a - b instead of a + b", lambda a, b: a[:, None] - b[None, :],
              "right shape but wrong values"),
    ],
    ex.residuals: [
        right("reshape to len(target)", lambda pred, target: pred.reshape(len(target)) - target),
        right("pred.T[0]", lambda pred, target: pred.T[0] - target),
        wrong("the diagonal of the (N, N) tensor", residuals_diagonal_of_every_pair,
              "built the (4, 4) tensor of every prediction minus every target", "(its diagonal, say)", kind=EDGE),
        wrong("squared errors", lambda pred, target: (pred.squeeze(1) - target) ** 2,
              "squared errors"),
        wrong("averages the (N, N) away: named", lambda pred, target: (pred - target).mean(dim=1),
              "right shape but wrong values", "built the (4, 4) tensor of every pair"),
    ],
    ex.checked_mse: [
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
    ],
}

CATALOGUE = Catalogue({
    ex.match_reference: [
        wrong("copy_ into the reference", match_by_copying_into_the_reference,
              "reference.copy_(x) writes x's numbers into the reference tensor itself", outcome=RAISED),
        right("x.to(reference), tensor as the template", lambda x, reference: x.to(reference)),
        right("device then dtype, two statements", match_in_two_steps),
        right("torch.as_tensor with dtype and device", lambda x, reference: torch.as_tensor(
            x, dtype=reference.dtype, device=reference.device)),
        right("empty_like then copy_", lambda x, reference: torch.empty_like(
            x, dtype=reference.dtype, device=reference.device).copy_(x)),
        right("type(dtype) then to(device)",
              lambda x, reference: x.type(reference.dtype).to(reference.device)),
        right("type_as then to(device)", lambda x, reference: x.type_as(reference).to(reference.device)),
        wrong("moves only the device", lambda x, reference: x.to(reference.device),
              "keeps x's dtype in every case", "Only the device moved"),
        wrong("returns x unchanged", lambda x, reference: x,
              "keeps x's dtype and device", "Change both"),
        wrong("converts only the dtype", lambda x, reference: x.to(reference.dtype),
              "Your result is on cpu, the reference on meta", ".to(reference.device)"),
        wrong("returns a tensor like the reference", lambda x, reference: torch.zeros_like(reference),
              "the reference's shape", "Keep x's own shape"),
        wrong("ones in x's shape instead of x's values",
              lambda x, reference: torch.ones_like(x, dtype=reference.dtype, device=reference.device),
              "right shape but wrong values"),
        wrong("hard-codes the cpu device", lambda x, reference: x.to(reference.dtype).to("cpu"),
              "on cpu, the reference on meta"),
        wrong("always float32: only the notebook's float reference", lambda x, reference: x.float().to(
            reference.device), "float32 in every case", "reference.dtype", kind=EDGE),
        wrong("only float16 or float32", match_only_float_dtypes,
              "has dtype float32", "expected the reference's, bfloat16", kind=EDGE),
        wrong("type promotion by adding a zero of the reference's dtype", match_by_adding_zeros,
              "kept x's dtype float64", "should have the reference's, float32", kind=EDGE),
        wrong("x.type(reference.type()) has no name for meta tensors",
              lambda x, reference: x.type(reference.type()), "invalid type", "Likely cause:",
              "x.type(...)", kind=EDGE, outcome=RAISED),
        wrong("moves the caller's x through x.data, meta too", match_by_moving_x_data,
              "changed its input x in place", "x.data", kind=STATEFUL),
        wrong("moves a clone through .data: no meta for .data", match_by_moving_a_clones_data,
              "have incompatible tensor type", "Likely cause: an assignment to .data cannot move",
              kind=EDGE, outcome=RAISED),
        wrong("converts the caller's x through x.data", match_by_converting_x_data,
              "changed its input x in place", "is (3,) float32 afterwards instead of (3,) float64",
              "x.data", kind=STATEFUL),
    ],
    ex.independent_copy: [
        right("from_numpy then clone", lambda array: torch.from_numpy(array).clone()),
        right("from_numpy of a NumPy copy", lambda array: torch.from_numpy(array.copy())),
        right("as_tensor then clone", lambda array: torch.as_tensor(array).clone()),
        right("torch.tensor with the array's own dtype",
              lambda array: torch.tensor(array, dtype=torch.from_numpy(array).dtype)),
        right("copy.deepcopy of the shared tensor", lambda array: copy.deepcopy(torch.from_numpy(array))),
        right("torch.asarray with copy=True", lambda array: torch.asarray(array, copy=True)),
        wrong("adds 0 to the shared tensor: a bool array becomes int64",
              lambda array: torch.from_numpy(array) + 0,
              "has dtype torch.int64, the array torch.bool", kind=EDGE),
        wrong("torch.from_numpy shares", torch.from_numpy,
              "shares memory with the array", "torch.tensor(array)"),
        wrong("torch.as_tensor shares", torch.as_tensor,
              "shares memory with the array", "torch.tensor(array)"),
        wrong("legacy torch.Tensor constructor", lambda array: torch.Tensor(array),
              "shares memory with the array", "torch.Tensor(array) (capital T) shares"),
        wrong("returns a NumPy copy", lambda array: array.copy(), "is a numpy.ndarray",
              "expected a torch.Tensor"),
        wrong("copies the local name after sharing", copy_then_break_the_link_too_late,
              "shares memory with the array"),
        wrong(".float() copies a float64 array but shares a float32 one",
              lambda array: torch.from_numpy(array).float(),
              "shares memory with the array", "float32", "(.float() of a float32 array)", kind=EDGE),
        wrong("through a Python list: loses the dtype", lambda array: torch.tensor(array.tolist()),
              "has dtype torch.float32, the array torch.float64", ".tolist()", kind=EDGE),
        wrong("stacks row by row: no rows in an empty array", copy_row_by_row,
              "stack expects a non-empty TensorList", "Likely cause:", "empty array",
              kind=EDGE, outcome=RAISED),
        wrong("copies into one buffer reused by every call", copy_into_reused_buffer,
              "changed the tensor it returned the first time", "same memory", kind=STATEFUL),
        wrong("memoised by id(array): stale after the array changes", copy_memoised_by_id,
              "returned the old values", "on every call", kind=STATEFUL),
    ],
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
    ],
    ex.remove_batch_dim: [
        wrong("view(-1)", remove_by_view_of_everything, "reshape(-1) runs, but it flattens every dimension",
              outcome=RAISED),
        right("indexing the first sample", lambda x: x[0]),
        right("reshape to shape[1:]", lambda x: x.reshape(x.shape[1:])),
        right("flatten(0, 1) for 2+ dims, else index", lambda x: x.flatten(0, 1) if x.dim() > 1 else x[0]),
        right("torch.squeeze with dim=0", lambda x: torch.squeeze(x, dim=0)),
        right("view to shape[1:]", lambda x: x.view(x.shape[1:])),
        wrong("squeeze() drops every size-1 dim", lambda x: x.squeeze(),
              "every size-1 dimension is gone", "squeeze(0)"),
        wrong("squeezes the last dimension", lambda x: x.squeeze(-1),
              "still has shape (1, 5)", "squeeze(d) silently does nothing"),
        wrong("squeezes dimension 1: a 1-D x has none", lambda x: x.squeeze(1),
              "Dimension out of range", "on x of shape (1,)", "Likely cause:", kind=EDGE,
              outcome=RAISED),
        wrong("slices instead of indexing", lambda x: x[:1], "still has shape (1, 5)",
              "dimension 0, is still there"),
        wrong("flattens everything", lambda x: x.flatten(), "has shape (12,); expected (3, 4)"),
        wrong("squeezes the caller's x in place", lambda x: x.squeeze_(0),
              "changed its input x in place", "is (5,) float32 afterwards instead of (1, 5)",
              "squeeze_", kind=STATEFUL),
        wrong("sum over the batch: bool becomes int64", lambda x: x.sum(0),
              "has dtype torch.int64; expected torch.bool", kind=EDGE),
        right("movedim then index the last dimension", lambda x: x.movedim(0, -1)[..., 0]),
        wrong("reshape(*shape[1:]): no size at all for a 1-D x", lambda x: x.reshape(*x.shape[1:]),
              'reshape() missing 1 required positional arguments', "Likely cause:",
              "x.reshape(x.shape[1:])", kind=EDGE, outcome=RAISED),
        wrong("view(*shape[1:]): no size at all for a 1-D x", lambda x: x.view(*x.shape[1:]),
              "view() received an invalid combination of arguments", "Likely cause:",
              "x.view(x.shape[1:])", kind=EDGE, outcome=RAISED),
        wrong("mean over the batch: no mean of integers", lambda x: x.mean(0),
              "could not infer output dtype", "Likely cause:", "needs a floating dtype",
              kind=EDGE, outcome=RAISED),
        wrong("through a Python list: loses the dtype", lambda x: torch.tensor(x.tolist()[0]),
              "has dtype torch.float32; expected torch.float64", kind=EDGE),
    ],
    ex.outer_sum: [
        right("unsqueeze(1) and broadcasting b", lambda a, b: a.unsqueeze(1) + b),
        right("view(-1, 1) + view(1, -1)", lambda a, b: a.view(-1, 1) + b.view(1, -1)),
        right("torch.vmap over a", lambda a, b: torch.vmap(lambda ai: ai + b)(a) if len(a) else a[:, None] + b),
        right("repeat b's length, transpose, add", lambda a, b: a.repeat(len(b), 1).T + b),
        wrong("meshgrid needs one dtype: an int64 a with a float32 b", outer_sum_meshgrid_ij,
              "meshgrid expects all tensors to have the same dtype", "Likely cause:",
              "an integer a with a float b", kind=EDGE, outcome=RAISED),
        wrong("converts b to a's dtype", lambda a, b: a[:, None] + b.to(a.dtype),
              "Your result has dtype torch.int64; a + b has torch.float32", kind=EDGE),
        wrong("gives the result a's dtype", lambda a, b: (a[:, None] + b).to(a.dtype),
              "the dtype a + b has", kind=EDGE),
        right("expand both then add", lambda a, b: torch.add(a[:, None].expand(-1, len(b)),
                                                             b.expand(len(a), -1))),
        wrong("a + b: element by element", lambda a, b: a + b,
              "must match the size of tensor b", "Likely cause:",
              "a[:, None]", outcome=RAISED),
        wrong("a + b when the sizes happen to match", outer_sum_square_only,
              "Two (N,) tensors meet element by element", "a[:, None]"),
        wrong("new dimension on the wrong side", lambda a, b: a[None, :] + b[:, None],
              "rows should follow a"),
        wrong("meshgrid with xy indexing", outer_sum_meshgrid_xy, "rows should follow a"),
        wrong("outer product instead of sum", lambda a, b: torch.outer(a, b),
              "products a[i] * b[j]", "the sum a[i] + b[j]"),
        wrong("a Python loop over the rows", outer_sum_loop_into_empty,
              "asks for no Python loop", "for i in range(len(a))"),
        wrong("a comprehension over Python numbers",
              lambda a, b: torch.tensor([[ai + bj for bj in b.tolist()] for ai in a.tolist()]),
              "asks for no Python loop"),
        wrong("a loop hidden in map", lambda a, b: torch.stack(list(map(lambda ai: ai + b, a))),
              "asks for no Python loop", "torch calls", kind=EDGE),
        wrong("starts from float zeros: integers become float32",
              lambda a, b: torch.zeros(len(a), len(b)) + a[:, None] + b,
              "has dtype torch.float32; expected torch.int64", kind=EDGE),
        wrong("unsqueezes the caller's a in place", lambda a, b: a.unsqueeze_(1) + b,
              "changed its input a in place", "is (3, 1) float32 afterwards instead of (3,)",
              kind=STATEFUL),
    ],
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
    ],
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
    ],
})


def zero_rows_by_the_whole_sum(x):
    negative = x.sum() < 0  # no dim: one number for the whole tensor
    x[negative] = 0
    return int(negative.sum())


def best_match_after_softmax(q, k):
    return torch.softmax(q @ k.mT, dim=-1).argmax(dim=-1)


def zero_rows_not_at_least_zero(x):
    negative = ~(x.sum(dim=1) >= 0)
    x[negative] = 0
    return int(negative.sum())


def best_match_in_float64(q, k):
    keys = k.double().transpose(-2, -1)
    return torch.matmul(q.double(), keys).argmax(dim=-1)


ISSUE_15 = {
    ex.zero_negative_rows: [
        wrong("~(sum >= 0)", zero_rows_not_at_least_zero, "whose sum is nan", "x.sum(dim=1) < 0 is not", kind=EDGE),
        wrong("sum() without dim", zero_rows_by_the_whole_sum, "one True or False for the whole tensor",
              "x.sum(dim=1)"),
        right("masked_fill_ with a column mask, a 0-d count", zero_rows_masked_fill),
        right("index_fill_ of the row indices", zero_rows_index_fill),
        right("copy_ of torch.where, count_nonzero().item()", zero_rows_copy_where),
        right("the mean below 0: the sum's sign", zero_rows_by_mean),
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
    ],
    ex.best_match: [
        right("scores in float64, argmax on them", best_match_in_float64),
        wrong("softmax, then argmax", best_match_after_softmax, "made the two equal", "argmax the dot products themselves",
              kind=EDGE),
        right("einsum with an ellipsis", best_match_einsum_ellipsis),
        wrong("broadcast product, summed, softmax then argmax", best_match_broadcast_product,
              "made the two equal", kind=EDGE),
        right("matmul, transpose(-2, -1), max().indices", best_match_max_indices),
        wrong("q @ k without a transpose", best_match_untransposed,
              "Expected size for first two dimensions of batch2 tensor", "Likely cause:", "q @ k.mT",
              outcome=RAISED),
        wrong("argmax() without a dim", best_match_flat_argmax, "a single number", "argmax(dim=-1)"),
        wrong("argmax over the queries", best_match_over_queries,
              "one index per key instead of one per query"),
        wrong("returns max's (values, indices) pair", best_match_max_pair,
              "returned max(values, indices)", ".max(dim=-1).indices"),
        wrong("returns the largest scores", best_match_max_values,
              "the largest scores themselves, not their indices"),
        wrong("argmin", best_match_argmin, "smallest dot product"),
        wrong("a loop over the batch", best_match_loop, "asks for no Python loop"),
        wrong("int32 indices", best_match_int32, "has dtype torch.int32; expected torch.int64"),
        wrong("k.T reverses every dimension of a 3-D k", best_match_dot_T,
              "must match the size of tensor", "Likely cause:", "k.T reverses", outcome=RAISED),
        wrong("swaps the batch and key dimensions of k", best_match_swaps_batch_and_keys,
              "must match the size of tensor", "Likely cause:", "transpose(0, 1)", outcome=RAISED),
        wrong("torch.bmm and transpose(1, 2): no (m, d) keys", best_match_bmm,
              "Dimension out of range", "Likely cause:", "k.mT", kind=EDGE, outcome=RAISED),
        wrong("einsum for 3-D keys only", best_match_einsum_3d,
              "does not match the number of dimensions", "Likely cause:", "ellipsis",
              kind=EDGE, outcome=RAISED),
        wrong("view of a non-contiguous q", best_match_reshape_view,
              "view size is not compatible", "Likely cause:", "non-contiguous", kind=EDGE,
              outcome=RAISED),
        wrong("squeeze() drops the batch of one", best_match_squeezed,
              "the batch dimension of a batch of one is gone", "squeeze()", kind=EDGE),
        wrong("normalises the caller's q in place", best_match_normalises_q_in_place,
              "changed the numbers in its input q", kind=STATEFUL),
    ],
}

CATALOGUE = Catalogue({**{exercise: entries + ROUND_3.get(exercise, [])
                          for exercise, entries in CATALOGUE.entries.items()}, **ISSUE_15})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()


def test_checked_mse_stub_is_not_attempted():
    def stub(pred, target):
        raise NotImplementedError()

    assert ex.checked_mse.verdict(stub).outcome is Outcome.NOT_ATTEMPTED
