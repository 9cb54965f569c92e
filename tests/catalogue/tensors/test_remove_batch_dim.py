"""Chapter 01's remove_batch_dim: its catalogue of right and wrong answers."""

import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

RAISED = Outcome.RAISED


# -- round 3 of outside testing -----------------------------------------------------------------
def remove_by_view_of_everything(x):
    return x.view(-1)


# -- issue 45, fresh round (from the task text) -------------------------------------------------
def rb_float_roundtrip(x):
    return x.float().squeeze(0).to(x.dtype)


def rb_plus_zero(x):
    return x[0] + 0


def rb_numpy(x):
    return x.numpy()[0]


def rb_transpose_last(x):
    return x.transpose(0, -1)[..., 0]


def rb_tolist_result(x):
    return x.squeeze(0).tolist()


def rb_item_for_1d(x):
    return x[0] if x.dim() > 1 else x.item()


def rb_tensor_item_1d(x):
    return x.squeeze(0) if x.dim() > 1 else torch.tensor(x.item())


def rb_nansum(x):
    return x.nansum(0)


def rb_stack_rows(x):
    return torch.stack(list(x[0]))


def rb_single_element_scalar(x):
    return x.reshape(()) if x.numel() == 1 else x.squeeze(0)


def rb_permute_last(x):
    return x.permute(*range(1, x.dim()), 0)[..., 0]


CATALOGUE = Catalogue({
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
        # -- round 3 of outside testing
        right("unbind(0)[0]", lambda x: x.unbind(0)[0]),
        right("select(0, 0)", lambda x: x.select(0, 0)),
        wrong("reshape(-1, *shape[2:]): a 1-D x keeps its dimension",
              lambda x: x.reshape(-1, *x.shape[2:]), "still has shape (1,)", "x of shape (1,)",
              kind=EDGE),
        wrong("flatten(0, 1): a 1-D x has no dimension 1", lambda x: x.flatten(0, 1),
              "Dimension out of range", "on x of shape (1,)", "Likely cause:", kind=EDGE,
              outcome=RAISED),
        # -- issue 45, fresh round (from the task text) --
        right("permute the batch dimension last, then index it", rb_permute_last),
        wrong("through float32 and back: the edges of float64 lost", rb_float_roundtrip,
              "wrong values", "at the edges of float64", kind=EDGE),
        wrong("x[0] + 0: a bool x becomes int64", rb_plus_zero,
              "has dtype torch.int64; expected torch.bool", kind=EDGE),
        wrong("returns a NumPy array", rb_numpy,
              "is a numpy.ndarray", "expected a torch.Tensor"),
        wrong("transpose(0, -1) then the last index: the rest reversed", rb_transpose_last,
              "has shape (4, 3); expected (3, 4)", kind=EDGE),
        wrong("returns a Python list", rb_tolist_result,
              "is a list", "expected a torch.Tensor"),
        wrong("a Python number for a 1-D x", rb_item_for_1d,
              "is a float", "x of shape (1,)", kind=EDGE),
        wrong("torch.tensor(x.item()) for a 1-D x: int32 lost", rb_tensor_item_1d,
              "has dtype torch.int64; expected torch.int32", kind=EDGE),
        wrong("nansum over the batch: bool becomes int64", rb_nansum,
              "has dtype torch.int64; expected torch.bool", kind=EDGE),
        wrong("stack of the rows of x[0]: a 1-D x has none", rb_stack_rows,
              "iteration over a 0-d tensor", "Likely cause:", "x of shape (1,)", kind=EDGE, outcome=RAISED),
        wrong("one element made a scalar", rb_single_element_scalar,
              "has shape (); expected (1,)", "removes dimension 0 alone elsewhere", kind=EDGE),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
