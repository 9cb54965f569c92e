"""Chapter 01's best_match: its catalogue of right and wrong answers."""

import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, TYPICAL, Catalogue, right, wrong

RAISED = Outcome.RAISED


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


# -- issue 15 -----------------------------------------------------------------------------------
def best_match_after_softmax(q, k):
    return torch.softmax(q @ k.mT, dim=-1).argmax(dim=-1)


def best_match_in_float64(q, k):
    keys = k.double().transpose(-2, -1)
    return torch.matmul(q.double(), keys).argmax(dim=-1)


# -- issue 45: near-ties in the inputs' own dtype ----------------------------------------------
def best_match_scores_as_float32(q, k):
    return (q @ k.mT).float().argmax(dim=-1)


def best_match_inputs_as_float32(q, k):
    return (q.float() @ k.float().mT).argmax(dim=-1)


def best_match_einsum_in_float32(q, k):
    scores = torch.einsum("...nd,...md->...nm", q.to(torch.float32), k.to(torch.float32))
    return scores.max(dim=-1).indices


def best_match_rounded_scores(q, k):
    return torch.round(q @ k.mT, decimals=8).argmax(dim=-1)


def best_match_topk(q, k):
    return torch.topk(torch.matmul(q, k.transpose(-1, -2)), 1, dim=-1).indices[..., 0]


def best_match_last_of_flipped(q, k):
    m = k.shape[-2]
    return m - 1 - (q @ k.mT).flip(-1).argmax(dim=-1)


# -- issue 45, fresh round (from the task text) --
def best_match_scaled_by_sqrt_d(q, k):  # attention's scaling rounds near-ties equal
    return (q @ k.mT / q.shape[-1] ** 0.5).argmax(dim=-1)


def best_match_transposes_k_in_place(q, k):  # transpose_ turns the caller's k
    return (q @ k.transpose_(-2, -1)).argmax(dim=-1)


def best_match_exp_scores(q, k):  # exp() rounds near-ties equal, and overflows
    return torch.exp(q @ k.mT).argmax(dim=-1)


def best_match_tensordot(q, k):  # tensordot pairs every batch with every batch for 3-D k
    return torch.tensordot(q, k, dims=([-1], [-1])).argmax(dim=-1)


def best_match_nearest_by_distance(q, k):  # the nearest key is not the largest dot product
    return torch.cdist(q, k.expand(q.shape[0], -1, -1) if k.dim() == 2 else k).argmin(dim=-1)


def best_match_cosine(q, k):  # cosine similarity, not the dot product
    return torch.nn.functional.cosine_similarity(q.unsqueeze(-2), k.unsqueeze(-3), dim=-1).argmax(dim=-1)


def best_match_flat_reshape(q, k):  # reshape(0, -1) on an empty batch
    scores = q @ k.mT
    return scores.reshape(q.shape[0] * q.shape[1], -1).argmax(dim=-1).reshape(q.shape[0], q.shape[1])


def best_match_broadcast_sum(q, k):
    return (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(dim=-1).argmax(dim=-1)


CATALOGUE = Catalogue({
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
        # -- issue 45
        wrong("float64 scores cast to float32", best_match_scores_as_float32,
              "made the two equal", "one step of float64", "in the inputs' own dtype", kind=EDGE),
        wrong("float64 inputs cast to float32", best_match_inputs_as_float32,
              "made the two equal", "one step of float64", kind=EDGE),
        wrong("einsum on float32 copies, max().indices", best_match_einsum_in_float32,
              "made the two equal", "one step of float64", kind=EDGE),
        wrong("scores rounded to 8 decimals", best_match_rounded_scores,
              "made the two equal", "argmax the dot products themselves", kind=EDGE),
        right("topk(1) of matmul, its indices", best_match_topk),
        right("the last argmax of the flipped scores", best_match_last_of_flipped),
        # -- issue 45, fresh round (from the task text) --
        wrong("scaled by sqrt(d), as attention does: near-ties round equal", best_match_scaled_by_sqrt_d,
              "near-ties", "made the two equal", kind=EDGE),
        wrong("transpose_ of the caller's k", best_match_transposes_k_in_place,
              "changed its input k in place", kind=STATEFUL),
        wrong("exp of the scores", best_match_exp_scores, "made the two equal", kind=EDGE),
        wrong("tensordot of a 3-D k pairs every batch with every batch", best_match_tensordot,
              "has shape (2, 3, 2); expected (2, 3)", kind=TYPICAL),
        wrong("the largest |dot product|", lambda q, k: (q @ k.mT).abs().argmax(dim=-1),
              "wrong values", kind=TYPICAL),
        wrong("the nearest key by distance", best_match_nearest_by_distance, "wrong values", kind=TYPICAL),
        wrong("cosine similarity", best_match_cosine, "wrong values", kind=TYPICAL),
        wrong("a Python list of indices", lambda q, k: (q @ k.mT).argmax(dim=-1).tolist(),
              "is a list", "expected a torch.Tensor", kind=TYPICAL),
        wrong("reshape(B * n, -1): no -1 for an empty batch", best_match_flat_reshape,
              "cannot reshape tensor of 0 elements", "Likely cause:", kind=EDGE, outcome=RAISED),
        wrong("max with keepdim=True", lambda q, k: torch.max(q @ k.mT, dim=-1, keepdim=True).indices,
              "has shape (2, 3, 1)", kind=TYPICAL),
        right("broadcast product, summed, argmax", best_match_broadcast_sum),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
