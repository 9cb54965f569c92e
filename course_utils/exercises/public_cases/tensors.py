"""Chapter 01's public cases (see ``course_utils.exercises.public``).

Inputs only, built from seeds and literal values other than the practice probes' ones; the
facts a right answer gives on them come from the reference, at release time. Where the task
asks for more than a result (no Python loop, an in-place change, a refusal of unequal shapes,
a copy that does not share memory), the ``use`` records how the learner's code behaved.
"""

from __future__ import annotations


import numpy as np
import torch
from course_utils.exercises.shape_mentions import mentions, shape_forms
from course_utils.exercises.torch_calls import TorchCallCounter

from course_utils.exercises.public import PublicCase, PublicCases, call_and_describe, describe
from course_utils.exercises.running import LearnerRaised


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------------------------
# "Without a Python loop": a loop makes one torch call or more per element of a large input,
# one operation a handful. The count is a fact about the learner's code, not about its result.
# --------------------------------------------------------------------------------------------
_FEW_CALLS = 30
_NO_LOOP = f"no_Python_loop_(fewer_than_{_FEW_CALLS}_torch_calls)"




def _counting_calls(answer, arguments, run, on, returned_as=lambda value: value):
    """Called once, as call_and_describe does, and whether it made few torch calls."""
    counter = TorchCallCounter()
    with counter:
        returned = run(answer, *arguments, on=on)
    return {"returned": describe(returned_as(returned)),
            "arguments": [describe(value) for value in arguments],
            _NO_LOOP: describe(counter.count < _FEW_CALLS)}


# ============================================================================================
# match_reference
# ============================================================================================
def _match_inputs():
    x = torch.tensor([[1.25, -0.1, 3.3], [7.0, 0.001, -2.75]], dtype=torch.float64)
    return x, torch.zeros(5, dtype=torch.float32)


def _match_inputs_large_integers():
    # Odd and past 2**24: float32 cannot hold them, float64 can.
    x = torch.tensor([2**40 + 1, -3, 2**31 + 7, 9], dtype=torch.int64)
    return x, torch.zeros(2, 2, dtype=torch.float64)


def _match_inputs_transposed():
    x = (torch.rand(3, 2, generator=_generator(101)) * 8 - 4).T  # (2, 3), not contiguous
    return x, torch.zeros(3, dtype=torch.float64, device="meta")


# Exact numbers: converting to a dtype rounds once, the same way for every right answer; a
# detour through float32 shows only past float32's 7 digits, which a tolerance would hide.
match_reference = PublicCases(
    rtol=0, atol=0,
    cases=[
        PublicCase("x: (2, 3) float64 on cpu, reference: float32 on cpu", _match_inputs),
        PublicCase("x: (4,) int64 on cpu, reference: float64 on cpu", _match_inputs_large_integers),
        PublicCase("x: (2, 3) float32 on cpu (a transposed view), reference: float64 on meta",
                   _match_inputs_transposed),
    ],
)


# ============================================================================================
# independent_copy
# ============================================================================================
def _array(values, dtype):
    return lambda: (np.array(values, dtype=dtype),)


_AFTER_CHANGE = "your_tensor_after_the_caller_changed_the_array"


def _copied_not_shared(answer, arguments, run, on):
    """What it returned, the caller's array afterwards, and the returned tensor once the caller
    changed the array: a copy stays as it was, a tensor sharing the memory follows."""
    (array,) = arguments
    returned = run(answer, array, on=on)
    facts = {"returned": describe(returned), "arguments": [describe(array.tolist())]}
    if array.flags.writeable:
        original = array.copy()
        array += 1
        facts[_AFTER_CHANGE] = describe(returned)
        array[...] = original
    else:  # (a read-only array cannot change; the hidden cases say so)
        facts[_AFTER_CHANGE] = describe(returned)
    return facts


independent_copy = PublicCases(
    use=_copied_not_shared,
    cases=[
        PublicCase("a NumPy array of shape (2, 3), float32",
                   _array([[0.5, -1.25, 2.0], [3.75, 0.0, -0.5]], np.float32)),
        PublicCase("a NumPy array of shape (4,), float64", _array([1.1, -2.2, 3.3, 1e-3], np.float64)),
        PublicCase("a NumPy array of shape (3,), int32", _array([7, -3, 12], np.int32)),
    ],
)


# ============================================================================================
# flatten_transposed
# ============================================================================================
def _matrix(rows, columns, dtype, seed, transposed=False):
    def make():
        generator = _generator(seed)
        if transposed:  # the transpose of a contiguous (columns, rows): not contiguous
            return (torch.rand(columns, rows, generator=generator) * 16 - 8).to(dtype).T
        return (torch.rand(rows, columns, generator=generator) * 16 - 8).to(dtype)
    return lambda: (make(),)


flatten_transposed = PublicCases(cases=[
    PublicCase("x of shape (3, 4), float32", _matrix(3, 4, torch.float32, 102)),
    PublicCase("x of shape (3, 3), float64, transposed (not contiguous)",
               _matrix(3, 3, torch.float64, 103, transposed=True)),
])


# ============================================================================================
# zero_negative_rows
# ============================================================================================
# Rows that show the classic mistakes: a negative sum with a positive element, a positive sum
# with a negative element, a sum of exactly 0 that is not all zeros; columns whose sums are
# negative too.
_ROWS = [[2.0, -3.0, 0.5], [1.0, 1.5, -0.5], [0.75, -0.25, -0.5], [-1.0, -0.5, 0.25]]


def _literal_rows():
    return (torch.tensor(_ROWS, dtype=torch.float32),)


def _rows_of_quarters(rows, columns, dtype, seed, transposed=False):
    """Multiples of 0.25 between -2 and 2: every sum is exact."""
    def make():
        shape = (columns, rows) if transposed else (rows, columns)
        values = ((torch.rand(shape, generator=_generator(seed)) * 16).floor() / 4 - 2).to(dtype)
        return (values.T if transposed else values,)
    return make


def _a_count(value):
    """The number of rows as an int: a 0-d integer tensor counts as its number, as the practice
    check accepts (a bool, a float, a float tensor or a tensor of shape (1,) do not)."""
    if isinstance(value, np.integer):
        return int(value)
    if (isinstance(value, torch.Tensor) and value.dim() == 0 and value.device.type != "meta"
            and not (value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool)):
        return int(torch.Tensor.detach(value).reshape(()).cpu().item())
    return value


def _zeroes_in_place(answer, arguments, run, on):
    """The count it returned, the caller's x afterwards, and whether it made few torch calls."""
    return _counting_calls(answer, arguments, run, on, returned_as=_a_count)


zero_negative_rows = PublicCases(
    use=_zeroes_in_place,
    rtol=0, atol=0,
    cases=[
        PublicCase("x of shape (4, 3), float32", _literal_rows),
        PublicCase("x of shape (5, 3), float64, the transpose of a (3, 5) tensor (not contiguous)",
                   _rows_of_quarters(5, 3, torch.float64, 104, transposed=True)),
        PublicCase("x of shape (50, 4), float32", _rows_of_quarters(50, 4, torch.float32, 105)),
    ],
)


# ============================================================================================
# remove_batch_dim
# ============================================================================================
def _batch(shape, dtype, seed):
    def make():
        values = torch.rand(shape, generator=_generator(seed)) * 20 - 10
        return (values > 0 if dtype is torch.bool else values.to(dtype),)
    return make


remove_batch_dim = PublicCases(cases=[
    PublicCase("x of shape (1, 3, 1), float64", _batch((1, 3, 1), torch.float64, 106)),
    PublicCase("x of shape (1, 2, 4), int64", _batch((1, 2, 4), torch.int64, 107)),
    PublicCase("x of shape (1,), bool", _batch((1,), torch.bool, 117)),
])


# ============================================================================================
# outer_sum
# ============================================================================================
def _outer_inputs():
    return (torch.tensor([1.5, -2.25, 0.125], dtype=torch.float64),
            torch.tensor([10.0, -0.5, 3.0, 0.25, -7.5], dtype=torch.float64))


def _outer_inputs_square_mixed():
    return (torch.tensor([3, -1, 0, 8], dtype=torch.int64),
            torch.tensor([0.5, 2.25, -1.75, 4.0], dtype=torch.float32))


def _outer_inputs_large():
    generator = _generator(108)
    return (torch.rand(45, generator=generator) * 20 - 10, torch.rand(32, generator=generator) * 20 - 10)


outer_sum = PublicCases(
    use=_counting_calls,
    cases=[
        PublicCase("a of shape (3,), b of shape (5,), float64", _outer_inputs),
        PublicCase("a of shape (4,), int64, b of shape (4,), float32", _outer_inputs_square_mixed),
        PublicCase("a of shape (45,), b of shape (32,), float32", _outer_inputs_large),
    ],
)


# ============================================================================================
# residuals
# ============================================================================================
def _residual_inputs():
    pred = torch.tensor([[0.5], [-1.25], [2.0], [0.75], [3.5]], dtype=torch.float32)
    return pred, torch.tensor([1.0, -2.0, 2.5, 0.25, 3.0], dtype=torch.float32)


def _residual_inputs_column():
    generator = _generator(109)
    pred = torch.randn(3, 2, generator=generator, dtype=torch.float64)[:, 1:]  # not contiguous
    return pred, torch.randn(3, generator=generator, dtype=torch.float64)


residuals = PublicCases(cases=[
    PublicCase("pred of shape (5, 1), target of shape (5,), float32", _residual_inputs),
    PublicCase("pred of shape (3, 1), target of shape (3,), float64, pred a column of a wider "
               "tensor (not contiguous)", _residual_inputs_column),
])


# ============================================================================================
# best_match
# ============================================================================================
def _queries_and_keys(q_shape, k_shape, dtype, seed, transposed=False):
    def make():
        generator = _generator(seed)
        if transposed:  # the transpose of a contiguous tensor: not contiguous
            *batch, n, d = q_shape
            q = torch.randn(*batch, d, n, generator=generator, dtype=dtype).mT
        else:
            q = torch.randn(*q_shape, generator=generator, dtype=dtype)
        return q, torch.randn(*k_shape, generator=generator, dtype=dtype)
    return make


best_match = PublicCases(
    use=_counting_calls,
    cases=[
        PublicCase("q of shape (2, 3, 5), k of shape (2, 4, 5), float32",
                   _queries_and_keys((2, 3, 5), (2, 4, 5), torch.float32, 110)),
        PublicCase("q of shape (1, 4, 3), a transposed view (not contiguous), k of shape (5, 3), "
                   "float64, the same keys for every batch",
                   _queries_and_keys((1, 4, 3), (5, 3), torch.float64, 111, transposed=True)),
        PublicCase("q of shape (36, 3, 2), k of shape (36, 5, 2), float32",
                   _queries_and_keys((36, 3, 2), (36, 5, 2), torch.float32, 112)),
    ],
)


# ============================================================================================
# checked_mse
# ============================================================================================
_DID = "what_your_function_did"
_REFUSED = "raised an AssertionError or a ValueError"
_NAMES_BOTH = "its_message_names_both_shapes"


def _loss_or_refusal(answer, arguments, run, on):
    """Equal shapes: the loss, as call_and_describe records it (an error is the learner's to
    see). Unequal shapes: whether it stopped with an AssertionError or a ValueError, and
    whether that error's message names both shapes."""
    pred, target = arguments
    if pred.shape == target.shape:
        return call_and_describe(answer, arguments, run, on)
    try:
        returned = run(answer, pred, target, on=on)
    except LearnerRaised as raised:
        error = raised.error
        if isinstance(error, NotImplementedError):
            raise  # the exercise's stub: not attempted yet
        try:
            message = str(error)
        except Exception:  # an exception whose __str__ is broken
            message = ""
        refused = isinstance(error, (AssertionError, ValueError))
        did = _REFUSED if refused else f"raised {type(error).__name__}"
        names = mentions(message, shape_forms(tuple(pred.shape))) and mentions(message, shape_forms(tuple(target.shape)))
        return {_DID: describe(did), _NAMES_BOTH: describe(bool(message) and names)}
    kind = "a tensor" if isinstance(returned, torch.Tensor) else f"a {type(returned).__name__}"
    return {_DID: describe(f"returned {kind} instead of stopping"), _NAMES_BOTH: describe(False)}


def _pair(pred_shape, target_shape, dtype, seed, transposed=False):
    def make():
        generator = _generator(seed)
        if transposed:
            return tuple(torch.rand(tuple(reversed(shape)), generator=generator, dtype=dtype).T
                         for shape in (pred_shape, target_shape))
        return (torch.rand(pred_shape, generator=generator, dtype=dtype),
                torch.rand(target_shape, generator=generator, dtype=dtype))
    return make


checked_mse = PublicCases(
    use=_loss_or_refusal,
    rtol=1e-4,
    cases=[
        PublicCase("pred and target of shape (2, 5), float64, transposed views (not contiguous)",
                   _pair((2, 5), (2, 5), torch.float64, 113, transposed=True)),
        PublicCase("pred (5, 1) and target (5,)", _pair((5, 1), (5,), torch.float32, 115)),
        PublicCase("pred (2, 4) and target (4, 2)", _pair((2, 4), (4, 2), torch.float32, 116)),
    ],
)
