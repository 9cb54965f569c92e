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
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
