"""The inputs zero_negative_rows' check tries, and how its probe records what the answer
returned as its count (plain data; the judge words it)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from course_utils.exercises.edges import Allowed, edge_tensor, edge_values
from course_utils.exercises.facts import value_facts
from course_utils.exercises.tensors.common import _dtype_name

_INF = float("inf")
# Rows chosen so that each classic mistake shows: a negative row with a positive element (a
# mask of elements zeroes less), a row summing to exactly 0 that is not all zeros (<= zeroes
# it), an all-zero row (<= counts it), columns whose sums are negative (a column mask).
_ROWS_4x3 = [[1.0, -3.0, 0.5], [2.0, 1.5, -0.5], [1.0, -1.0, 0.0], [-0.5, -0.25, 0.25]]
_ROWS_3x3 = [[0.5, 2.0, -0.75], [-2.0, 0.5, 1.0], [1.25, -1.5, -0.5]]
# The last row sums to nan (inf + -inf): nan < 0 is False, so it stays, and ~(sum >= 0) zeroes it.
_ROWS_INF = [[1.0, -_INF, 2.0], [_INF, 1.0, -3.0], [-1.0, 0.5, 0.25], [0.0, 0.0, 0.0], [_INF, -_INF, 1.0]]
_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _edge_rows(dtype):
    """Rows at the dtype's edges whose sum has one sign (or is nan) in whatever order, and at
    whatever precision, it is added up: a negative subnormal (its mean rounds to -0.0), rows
    of -0.0 (not below 0), inf with -inf (nan, kept), -inf with the largest value (-inf:
    replacing inf by the largest value makes it finite), sums that overflow to -inf or inf."""
    info = torch.finfo(dtype)
    tiny = float(torch.nextafter(torch.zeros((), dtype=dtype), torch.ones((), dtype=dtype)))
    top = info.max
    return torch.tensor([
        [-tiny, 0.0, 0.0],
        [tiny, -0.0, -tiny],
        [-0.0, -0.0, -0.0],
        [_INF, -_INF, -1.0],
        [-_INF, top, 0.5],
        [-top, -top, top],
        [top, top, -top],
    ], dtype=dtype)


# The task allows any float values but nan ("it may hold inf"): every other classic edge.
_TASK_ALLOWS = Allowed(nan=False)


def _sign_of(value) -> str:
    value = float(value)
    return "nan" if math.isnan(value) else ("negative" if value < 0 else "not negative")


def _one_sign(row, dtype) -> bool:
    """Whether ``row``'s sum is below 0 (or nan) however it is added up: in each order, in
    the dtype, in float32 and float64, exactly. The task fixes no order, so a row whose sum's
    sign depends on it (the largest value, minus itself, plus a small one) shows no mistake."""
    t = torch.tensor(row, dtype=dtype)
    signs = {_sign_of(t[None].sum(dim=1)[0]), _sign_of(t.double().sum()), _sign_of(t.float().sum())}
    for order in itertools.permutations(range(len(row))):
        total = t[order[0]]
        for i in order[1:]:
            total = total + t[i]
        signs.add(_sign_of(total))
    try:
        signs.add(_sign_of(math.fsum(row)))
    except (OverflowError, ValueError):  # inf with -inf, or a sum past float64's range
        pass
    return len(signs) == 1


def _engine_edge_rows(dtype):
    """The dtype's classic edges (edges.edge_values: ±0, subnormals, its smallest normal and
    largest values, 1 and the step after it, magnitudes whose exp or square overflows, ±inf),
    three consecutive ones to a row, every rotation; the rows whose sum has one sign in every
    order of adding it up."""
    count = len(edge_values(dtype, _TASK_ALLOWS))
    rows = edge_tensor((count, 3), dtype, _TASK_ALLOWS).tolist()
    chosen = [row for row in rows if _one_sign(row, dtype)]
    return torch.tensor(chosen, dtype=dtype)


def _rows(values, dtype):
    return lambda generator: torch.tensor(values, dtype=dtype)


def _random_rows(n, m, dtype):
    """Multiples of 0.25 between -2 and 2: sums are exact in every float dtype."""
    def make(generator):
        return ((torch.rand(n, m, generator=generator) * 16).floor() / 4 - 2).to(dtype)
    return make


def _fixed(rows):
    return lambda generator: rows.clone()


_ENGINE_ROWS = {dtype: _engine_edge_rows(dtype) for dtype in _FLOATS}

# (description, make the base tensor, the view of it passed as x)
_ZERO_ROWS_CASES = [
    ("x of shape (4, 3), float32", _rows(_ROWS_4x3, torch.float32), lambda base: base),
    ("x of shape (3, 3), float32", _rows(_ROWS_3x3, torch.float32), lambda base: base),
    ("x of shape (6, 2), float64", _random_rows(6, 2, torch.float64), lambda base: base),
    ("x of shape (5, 4), float16", _random_rows(5, 4, torch.float16), lambda base: base),
    ("x of shape (5, 3), float32, the transpose of a (3, 5) tensor (not contiguous)",
     _random_rows(3, 5, torch.float32), lambda base: base.T),
    ("x of shape (4, 3), float64, every other column of a (4, 6) tensor (not contiguous)",
     _random_rows(4, 6, torch.float64), lambda base: base[:, ::2]),
    ("x of shape (4, 3), float32, rows 1 to 4 of a (6, 3) tensor",
     _random_rows(6, 3, torch.float32), lambda base: base[1:5]),
    ("x of shape (5, 3), float32, holding inf and -inf (one row sums to nan)", _rows(_ROWS_INF, torch.float32),
     lambda base: base),
    ("x of shape (1, 3), float32 (one row)", _rows([[-1.0, 0.5, 0.25]], torch.float32),
     lambda base: base),
    ("x of shape (0, 3), float32 (no rows)", _random_rows(0, 3, torch.float32), lambda base: base),
    ("x of shape (3, 0), float32 (no columns)", _random_rows(3, 0, torch.float32), lambda base: base),
    *[(f"x of shape (7, 3), {_dtype_name(dtype)}, at the edges of {_dtype_name(dtype)}: subnormals, "
       "-0.0, inf and -inf, values near its largest (sums that overflow)",
       (lambda dtype: lambda generator: _edge_rows(dtype))(dtype), lambda base: base)
      for dtype in _FLOATS],
    *[(f"x of shape ({len(_ENGINE_ROWS[dtype])}, 3), {_dtype_name(dtype)}, every edge of {_dtype_name(dtype)} "
       "(±0, subnormals, its smallest normal and largest values, the step after 1, magnitudes whose exp or "
       "square overflows, ±inf), three to a row", _fixed(_ENGINE_ROWS[dtype]), lambda base: base)
      for dtype in _FLOATS],
]


def _count_facts(value) -> dict:
    """What the answer returned as its count, as plain data: the kind, and the number where it
    is one (an int, a numpy integer, or a 0-d integer tensor, as the task accepts)."""
    if isinstance(value, bool):
        return {"kind": "bool", "value": None, "repr": repr(value)}
    if isinstance(value, (int, np.integer)):
        return {"kind": "int", "value": int(value), "repr": repr(int(value))}
    if isinstance(value, torch.Tensor):
        tensor = torch.Tensor.detach(value)
        facts = {"kind": "other tensor", "value": None, "dtype": _dtype_name(tensor.dtype),
                 "shape": [int(n) for n in tensor.shape]}
        if tensor.numel() == 1 and tensor.device.type != "meta":
            number = tensor.reshape(()).to("cpu").item()
            integral = not (tensor.dtype.is_floating_point or tensor.dtype.is_complex
                            or tensor.dtype == torch.bool)
            facts["number"] = repr(number)
            if integral and tensor.dim() == 0:
                facts.update(kind="tensor", value=int(number))
        return facts
    facts = value_facts(value)
    return {"kind": facts["kind"], "value": None, "repr": facts["repr"]}
