"""Chapter 01's independent_copy: its catalogue of right and wrong answers."""

import copy

import numpy as np
import pytest
import torch

from course_utils.exercises import tensors as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

RAISED = Outcome.RAISED


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
    if id(array) not in _copies or _copies[id(array)][0] is not array:  # array kept: ids are reused
        _copies[id(array)] = (array, torch.tensor(array))
    return _copies[id(array)][1]


def copy_row_by_row(array):
    return torch.stack([torch.tensor(row) for row in array])


def copy_then_break_the_link_too_late(array):
    tensor = torch.from_numpy(array)
    array = array.copy()  # rebinds the local name; the tensor still shares the caller's array
    return tensor


# -- round 3 of outside testing -----------------------------------------------------------------
def copy_from_a_sum(array):
    return torch.from_numpy(array + 0)  # a 0-d array + 0 is a NumPy scalar


def copy_into_an_empty_tensor(array):
    out = torch.empty(array.shape, dtype=torch.from_numpy(array[...]).dtype)
    out.copy_(torch.from_numpy(np.ascontiguousarray(array)))  # 0-d becomes (1,)
    return out


# -- issue 45, fresh round (from the task text) -------------------------------------------------
def ic_asarray(array):
    return torch.asarray(array)


def ic_slice_copy(array):
    return torch.from_numpy(array[...])


def ic_zeros_copy(array):
    return torch.zeros(array.shape).copy_(torch.from_numpy(array))


def ic_empty_special(array):
    if array.size == 0:
        return torch.tensor([])
    return torch.tensor(array)


def ic_ravel_reshape(array):
    return torch.from_numpy(array.ravel()).reshape(array.shape)


def ic_astype_no_copy(array):
    return torch.from_numpy(array.astype(array.dtype, copy=False))


def ic_unsigned_to_int64(array):
    if array.dtype.kind == "u":
        return torch.tensor(array.astype(np.int64))
    return torch.tensor(array)


def ic_detach(array):
    return torch.from_numpy(array).detach()


def ic_to_cpu(array):
    return torch.from_numpy(array).to("cpu")


def ic_read_only(array):
    array.setflags(write=False)
    return torch.tensor(array)


def ic_empty_then_copy(array):
    source = torch.from_numpy(array[...])
    return torch.empty(source.shape, dtype=source.dtype).copy_(source)


CATALOGUE = Catalogue({
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
        # -- round 3 of outside testing
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
        # -- issue 45, fresh round (from the task text) --
        right("torch.empty of the array's dtype, then copy_", ic_empty_then_copy),
        wrong("torch.asarray shares by default", ic_asarray,
              "shares memory with the array"),
        wrong("from_numpy(array[...]): a NumPy view still shares", ic_slice_copy,
              "shares memory with the array"),
        wrong("copy_ into torch.zeros: float32", ic_zeros_copy,
              "has dtype torch.float32, the array torch.float64", kind=EDGE),
        wrong("an empty array becomes torch.tensor([])", ic_empty_special,
              "has dtype torch.float32, the array torch.float64", "(empty)", kind=EDGE),
        wrong("ravel copies only a non-contiguous array", ic_ravel_reshape,
              "shares memory with the array", kind=EDGE),
        wrong("astype(copy=False) to its own dtype", ic_astype_no_copy,
              "shares memory with the array"),
        wrong("unsigned arrays made int64", ic_unsigned_to_int64,
              "has dtype torch.int64, the array torch.uint8", kind=EDGE),
        wrong("detach() thought to copy", ic_detach,
              "shares memory with the array"),
        wrong(".to('cpu') of a CPU tensor thought to copy", ic_to_cpu,
              "shares memory with the array"),
        wrong("copies, but makes the caller's array read-only", ic_read_only,
              "read-only", "writeable flag is off", kind=STATEFUL),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
