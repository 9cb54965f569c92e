"""The classic edges of a tensor input, derived from its dtype: what every check tries.

A check that tries the inputs its author thought of passes the wrong answers nobody thought of:
``mean < 0`` for ``sum < 0`` agrees until a row holds a subnormal, ``log(exp(a) * exp(b))`` for
``a + b`` until a value passes 88, a float32 cast for a float64 score until two scores tie to
within float32's step. Those inputs are not particular to a task: they are the edges of the
dtype. So they are written once, here, and a check declares only what its task allows (a dtype,
finite values only, no negatives, a range) and takes the edges that fall inside.

Generated inputs come from ``torch.testing.make_tensor``, run under a forked and seeded random
state: deterministic, and the learner's random streams are left as they were. Property-based
generation (Hypothesis) was measured and left out (``tools/edges_vs_generators.py``): on six
wrong answers to ``a + b`` that agree with it on ordinary numbers, the edges found 6 in 6 ms,
20 make_tensor pairs 1 in 45 ms, 20 derandomized Hypothesis examples 5 in 363 ms; and it would
be a new package in every learner's environment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

INF, NAN = math.inf, math.nan


@dataclass(frozen=True)
class Allowed:
    """Which values a task allows for one input: ``finite`` (no inf, no nan), ``nan=False``
    (infinities but no nan), ``nonnegative``, and an optional closed range [``low``, ``high``]
    (nan lies in no range); edges outside it are left out."""

    finite: bool = False
    nonnegative: bool = False
    low: float | None = None
    high: float | None = None
    nan: bool = True

    def admits(self, value) -> bool:
        value = float(value)
        if math.isnan(value):
            return self.nan and not self.finite and self.low is None and self.high is None
        if math.isinf(value) and self.finite:
            return False
        if self.nonnegative and (value < 0 or math.copysign(1.0, value) < 0):
            return False
        if self.low is not None and value < self.low:
            return False
        return self.high is None or value <= self.high


ANY = Allowed()


def _step_after(value: float, dtype: torch.dtype) -> float:
    here = torch.tensor(value, dtype=dtype)
    return float(torch.nextafter(here, torch.tensor(INF, dtype=dtype)))


def float_edges(dtype: torch.dtype) -> list[float]:
    """Zero of both signs, the smallest subnormal and normal numbers, one and the number right
    after it (a near-tie), a magnitude whose ``exp`` overflows, a magnitude whose square does,
    the dtype's largest finite values, the infinities and nan."""
    info = torch.finfo(dtype)
    subnormal = _step_after(0.0, dtype)
    exp_overflows = math.log(info.max) + 1.0
    square_overflows = math.sqrt(info.max) * 2.0
    values = [0.0, -0.0, subnormal, -subnormal, info.tiny, -info.tiny, 1.0, -1.0, _step_after(1.0, dtype),
              exp_overflows, -exp_overflows, square_overflows, -square_overflows, info.max, -info.max,
              INF, -INF, NAN]
    return [float(torch.tensor(v, dtype=dtype)) for v in values]


def int_edges(dtype: torch.dtype) -> list[int]:
    """Zero, one, minus one, the dtype's extremes and the values beside them, and the first
    integers that float32 (2**24 + 1) and float64 (2**53 + 1) cannot hold exactly."""
    if dtype == torch.bool:
        return [False, True]
    info = torch.iinfo(dtype)
    values = [0, 1, -1, info.max, info.min, info.max - 1, info.min + 1, 2 ** 24 + 1, -(2 ** 24 + 1),
              2 ** 53 + 1, -(2 ** 53 + 1)]
    return [v for v in values if info.min <= v <= info.max]


def edge_values(dtype: torch.dtype, allowed: Allowed = ANY) -> list:
    """The classic edges of ``dtype`` that ``allowed`` admits, in a fixed order, each once
    (an unsigned dtype's smallest value is 0; -0.0 and 0.0 count as two)."""
    values = float_edges(dtype) if dtype.is_floating_point else int_edges(dtype)
    seen, unique = set(), []
    for value in values:
        if repr(value) not in seen and allowed.admits(value):
            seen.add(repr(value))
            unique.append(value)
    return unique


def edge_tensor(shape: Sequence[int], dtype: torch.dtype, allowed: Allowed = ANY, *, shift: int = 0) -> torch.Tensor:
    """A tensor of ``shape`` filled with the edges of ``dtype``, cycled from position ``shift``:
    each row meets several edges, and a different ``shift`` pairs them differently (a row with
    +inf and -inf, a row with the largest value twice)."""
    values = edge_values(dtype, allowed)
    count = math.prod(shape)
    if not values:
        raise ValueError(f"no edge of {dtype} is allowed by {allowed}")
    if count == 0:
        return torch.empty(tuple(shape), dtype=dtype)
    cycled = np.array([values[(shift + i) % len(values)] for i in range(count)], dtype=object)
    # Made in its shape in one call: no flat tensor of the values is ever made (a probe's spy
    # would take a flat vector for a right answer that is one, such as x[0] of a (1, n) x).
    return torch.tensor(cycled.reshape(tuple(shape)).tolist(), dtype=dtype)


def near_ties(shape: Sequence[int], dtype: torch.dtype, *, base: float = 1.0) -> torch.Tensor:
    """A tensor whose values differ from ``base`` by one or two steps of ``dtype``: exact ties
    and near-ties, which a comparison computed in a narrower dtype resolves differently."""
    first = torch.tensor(base, dtype=dtype)
    one_up = torch.nextafter(first, torch.tensor(INF, dtype=dtype))
    two_up = torch.nextafter(one_up, torch.tensor(INF, dtype=dtype))
    pattern = torch.stack([first, one_up, first, two_up])
    count = math.prod(shape)
    return pattern.repeat(count // 4 + 1)[:count].reshape(tuple(shape))


def not_contiguous(tensor: torch.Tensor) -> torch.Tensor:
    """The same values laid out otherwise in memory: transposed storage for a matrix (``view``
    fails on it), every other element of a wider tensor for a vector."""
    if tensor.dim() >= 2 and tensor.shape[-1] > 1 and tensor.shape[-2] > 1:
        return tensor.mT.contiguous().mT
    if tensor.dim() == 0 or tensor.shape[-1] < 2:
        return tensor
    wide = torch.zeros(*tensor.shape[:-1], 2 * tensor.shape[-1], dtype=tensor.dtype)
    wide[..., ::2] = tensor
    return wide[..., ::2]


def resized(shape: Sequence[int], dim: int, size: int) -> tuple[int, ...]:
    """``shape`` with dimension ``dim`` set to ``size`` (a batch of one, an empty batch)."""
    return tuple(size if d == dim else n for d, n in enumerate(shape))


def generated(shape: Sequence[int], dtype: torch.dtype, *, seed: int, low: float | None = None,
              high: float | None = None) -> torch.Tensor:
    """One input from ``torch.testing.make_tensor``, drawn under a forked random state seeded
    with ``seed``: the same tensor on every run, and the caller's random state untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.testing.make_tensor(tuple(shape), dtype=dtype, device="cpu", low=low, high=high)
