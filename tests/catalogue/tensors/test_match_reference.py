"""Chapter 01's match_reference: its catalogue of right and wrong answers."""

import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, TYPICAL, Catalogue, right, wrong

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


# -- round 3 of outside testing -----------------------------------------------------------------
def match_through_float32(x, reference):
    return x.float().to(reference.dtype).to(reference.device)  # float32 rounds float64, big ints


def match_through_float64(x, reference):
    return x.double().to(reference)  # float64 rounds int64 past 2**53


def match_by_copying_into_the_reference(x, reference):
    reference.copy_(x)
    return reference


# -- issue 45, fresh round (from the task text) --
def match_int64_for_any_integer(x, reference):  # every integer reference taken for int64
    return x.to(device=reference.device, dtype=reference.dtype if reference.is_floating_point() else torch.int64)


def match_requires_grad_like_reference(x, reference):  # copies requires_grad too, onto x itself when no copy
    out = x.to(dtype=reference.dtype, device=reference.device)
    if out.is_floating_point():
        out.requires_grad_(reference.requires_grad)
    return out


def match_default_float_for_ints(x, reference):  # float references fine; integer ones via float32
    if reference.is_floating_point():
        return x.to(reference.dtype).to(reference.device)
    return x.to(torch.get_default_dtype()).to(reference.dtype).to(reference.device)


# -- issue 45, second fresh round (from the task text) ------------------------------------
def mr_empty_like_copy(x, reference):
    return torch.empty_like(reference).copy_(x)


def mr_empty_like_then_copy_in_two_lines(x, reference):
    out = torch.empty_like(reference)
    out.copy_(x)
    return out


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
        # -- round 3 of outside testing
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
        # -- issue 45, fresh round (from the task text) --
        wrong("view(dtype) reinterprets the bits", lambda x, reference: x.view(reference.dtype).to(reference.device),
              "has shape (6,); expected (3,)", kind=TYPICAL),
        wrong("every integer reference taken for int64", match_int64_for_any_integer,
              "has dtype int64", "expected the reference's, int32", kind=EDGE),
        wrong("empty_like(reference): the reference's shape",
              lambda x, reference: torch.empty_like(reference).copy_(x),
              "must match the size", "Likely cause: your function takes the reference's shape",
              "The result keeps x's shape", kind=TYPICAL, outcome=RAISED),
        wrong("through tolist(): an empty x loses its shape",
              lambda x, reference: torch.tensor(x.tolist(), dtype=reference.dtype, device=reference.device),
              "has shape (0,); expected (0, 3)", kind=EDGE),
        wrong("copies the reference's requires_grad", match_requires_grad_like_reference,
              "requires grad and x does not", kind=EDGE),
        wrong("through numpy: no bfloat16 there",
              lambda x, reference: torch.from_numpy(x.numpy()).to(reference.dtype).to(reference.device),
              "unsupported ScalarType BFloat16", "numpy has no bfloat16", kind=EDGE, outcome=RAISED),
        wrong("the wider of the two dtypes",
              lambda x, reference: x.to(device=reference.device, dtype=torch.promote_types(x.dtype, reference.dtype)),
              "kept x's dtype float64", kind=TYPICAL),
        wrong("squeeze() drops size-1 dims",
              lambda x, reference: x.squeeze().to(reference.dtype).to(reference.device),
              "has shape (4,); expected (4, 1)", kind=EDGE),
        wrong("view(-1) of a non-contiguous x",
              lambda x, reference: x.view(-1).to(reference.dtype).to(reference.device).view(x.shape),
              "view size is not compatible", "Likely cause:", kind=EDGE, outcome=RAISED),
        wrong("integer references through the default float dtype", match_default_float_for_ints,
              "what x gives through float32", "cannot hold every int64 number", kind=EDGE),
        wrong("a float64 detour rounds int64 past 2**53", match_through_float64,
              "what x gives through float64", "cannot hold every int64 number", kind=EDGE),
        right("new_empty on the reference, then copy_", lambda x, reference: reference.new_empty(x.shape).copy_(x)),
        # -- issue 45, second fresh round (from the task text) --
        wrong("allocates like the reference, copies x in", mr_empty_like_copy, "must match the size",
              "takes the reference's shape", "The result keeps x's shape", kind=TYPICAL, outcome=RAISED),
        wrong("allocates like the reference in one line, copies x in the next",
              mr_empty_like_then_copy_in_two_lines, "takes the reference's shape",
              "The result keeps x's shape", kind=TYPICAL, outcome=RAISED),
        wrong("multiplies by ones like the reference", lambda x, reference: x * torch.ones_like(reference),
              "takes the reference's shape", "The result keeps x's shape", kind=TYPICAL, outcome=RAISED),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
