"""Chapter 01's outer_sum: its catalogue of right and wrong answers."""

import numpy as np
import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, TYPICAL, Catalogue, right, wrong

RAISED = Outcome.RAISED


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


# -- round 3 of outside testing -----------------------------------------------------------------
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


# -- issue 45: large magnitudes and the dtype's extremes ----------------------------------------
def outer_sum_log_of_exp_products(a, b):
    # exp turns sums into products: log(e^a e^b) = a + b, until e^a overflows
    return torch.log(torch.outer(torch.exp(a), torch.exp(b))) if a.is_floating_point() and (
        b.is_floating_point()) else a[:, None] + b[None, :]


def outer_sum_log_of_exp_in_float64(a, b):
    out = torch.log(torch.outer(torch.exp(a.double()), torch.exp(b.double())))
    dtype = torch.result_type(a, b)
    return out.to(dtype) if dtype.is_floating_point else out.round().to(dtype)


def outer_sum_log_of_broadcast_exp(a, b):
    if a.is_floating_point() or b.is_floating_point():
        return torch.log(torch.exp(a)[:, None] * torch.exp(b)[None, :])
    return a[:, None] + b[None, :]


def outer_sum_through_float64(a, b):
    return (a.double()[:, None] + b.double()[None, :]).to(torch.result_type(a, b))


def outer_sum_halves_against_overflow(a, b):
    if a.is_floating_point() and b.is_floating_point():
        return (a[:, None] / 2 + b[None, :] / 2) * 2
    return a[:, None] + b[None, :]


# -- issue 45, fresh round (from the task text) --
def outer_sum_cartesian_prod_sum(a, b):  # sum() of integers gives int64 (and does not wrap)
    dtype = torch.promote_types(a.dtype, b.dtype)
    return torch.cartesian_prod(a.to(dtype), b.to(dtype)).sum(dim=1).reshape(len(a), len(b))


def outer_sum_repeat_then_add_in_place(a, b):  # += keeps a's dtype
    out = a.unsqueeze(1).repeat(1, len(b))
    out += b
    return out


def outer_sum_numpy_add_outer(a, b):  # numpy's promotion: int64 + float32 is float64 there
    return torch.from_numpy(np.add.outer(a.numpy(), b.numpy()))


def outer_sum_int64_against_overflow(a, b):  # widens integers to int64 against overflow
    if not a.is_floating_point():
        a = a.long()
    if not b.is_floating_point():
        b = b.long()
    return a[:, None] + b[None, :]


def outer_sum_item_for_one(a, b):  # N == 1 through a Python number: float64 a stops promoting
    if len(a) == 1:
        return (a.item() + b)[None, :]
    return a[:, None] + b[None, :]


def outer_sum_empty_special_case(a, b):  # the empty case in the default dtype
    if len(a) == 0:
        return torch.empty(0, len(b))
    return a[:, None] + b[None, :]


# -- issue 45, second fresh round (from the task text) ------------------------------------
def os_stack_copies(a, b):
    return torch.stack([b] * len(a)) + a[:, None]


CATALOGUE = Catalogue({
    ex.outer_sum: [
        right("unsqueeze(1) and broadcasting b", lambda a, b: a.unsqueeze(1) + b),
        right("view(-1, 1) + view(1, -1)", lambda a, b: a.view(-1, 1) + b.view(1, -1)),
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
        # -- round 3 of outside testing
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
        # -- issue 45
        wrong("log of the outer product of exps: overflows", outer_sum_log_of_exp_products,
              "wrong values", "at the edges of float32", "got inf", kind=EDGE),
        wrong("log of exps in float64, rounded back", outer_sum_log_of_exp_in_float64,
              "wrong values", "at the edges of", kind=EDGE),
        wrong("log of broadcast exps", outer_sum_log_of_broadcast_exp,
              "wrong values", "at the edges of float32", kind=EDGE),
        wrong("adds in float64, casts back: int64 past 2**53 rounds", outer_sum_through_float64,
              "wrong values", "at the edges of int64", kind=EDGE),
        wrong("halves a and b against overflow: subnormals vanish", outer_sum_halves_against_overflow,
              "wrong values", "at the edges of float32", "expected 1.401298464324817e-45", kind=EDGE),
        right("torch.add of unsqueeze(-1) and b", lambda a, b: torch.add(a.unsqueeze(-1), b)),
        right("torch.sub with alpha=-1", lambda a, b: torch.sub(a[:, None], b, alpha=-1)),
        # -- issue 45, fresh round (from the task text) --
        wrong("squeeze() drops N == 1", lambda a, b: (a[:, None] + b[None, :]).squeeze(),
              "has shape (3,); expected (1, 3)", kind=EDGE),
        wrong("cartesian_prod, summed: integer sums become int64", outer_sum_cartesian_prod_sum,
              "has dtype torch.int64; expected torch.int32", kind=EDGE),
        wrong("torch.stack of copies: none for N == 0",
              lambda a, b: torch.stack([a] * len(b), dim=1) + torch.stack([b] * len(a)),
              "stack expects a non-empty TensorList", "Likely cause:", kind=EDGE, outcome=RAISED),
        wrong("repeat, then += b: keeps a's dtype", outer_sum_repeat_then_add_in_place,
              "can't be cast to the desired output type", "Likely cause:", kind=TYPICAL, outcome=RAISED),
        wrong("reshape(len(a), -1): no -1 for N == 0", lambda a, b: a.reshape(len(a), -1) + b,
              "cannot reshape tensor of 0 elements", "Likely cause:", kind=EDGE, outcome=RAISED),
        wrong("through tolist(): Python numbers lose the dtype",
              lambda a, b: torch.tensor(a.tolist())[:, None] + torch.tensor(b.tolist()),
              "has dtype torch.float32; expected torch.float64", kind=EDGE),
        wrong("numpy's add.outer: numpy's type promotion", outer_sum_numpy_add_outer,
              "a + b has torch.float32", kind=EDGE),
        wrong("widens integers to int64 against overflow", outer_sum_int64_against_overflow,
              "has dtype torch.int64; expected torch.int32", kind=EDGE),
        wrong("a.item() for N == 1: a Python number does not promote", outer_sum_item_for_one,
              "a single a (N = 1)", "a + b has torch.float64", kind=EDGE),
        wrong("an empty a answered in the default dtype", outer_sum_empty_special_case,
              "an empty a (N = 0)", "a + b has torch.float64", kind=EDGE),
        wrong("torch.vmap over a: each a[i] is 0-d, and a 0-d float64 does not promote",
              lambda a, b: torch.vmap(lambda ai: ai + b)(a) if len(a) else a[:, None] + b,
              "a + b has torch.float64", kind=EDGE),
        right("expand a over b's length, transpose, add", lambda a, b: a.expand(len(b), len(a)).T + b),
        # -- issue 45, second fresh round (from the task text) --
        wrong("stacks a copy of b per element of a", os_stack_copies, "stack expects a non-empty TensorList",
              "a list with one entry per element of a", "[b] * len(a)", kind=EDGE, outcome=RAISED),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
