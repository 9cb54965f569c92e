"""Which wrong answers each way of choosing inputs finds, and at what cost: the measurement
behind edges.py's choice of the classic edges plus ``torch.testing.make_tensor`` over
property-based generation (Hypothesis).

The wrong answers all compute ``a + b`` and agree with it on ordinary numbers: the log of a
product of exponentials, a ``nan_to_num`` or a clamp that hides an overflow, a detour through
float32, nan turned into 0, halves added and doubled. Each way gets float64 inputs of shape
(3, 4): the engine's edges (the cases ``quick.Inputs`` makes), 20 ``make_tensor`` pairs, and
20 Hypothesis examples (derandomized, no database, no shrinking: what a check could afford).

    .venv/bin/pip install --target .measure-lib -r tools/requirements-measure.txt
    PYTHONPATH=.measure-lib .venv/bin/python tools/edges_vs_generators.py

Hypothesis is never installed in a learner's environment; without it the script measures the
other two.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from course_utils.exercises import edges  # noqa: E402

SHAPE, DTYPE, BUDGET = (3, 4), torch.float64, 20
WRONG = {
    "log of a product of exps": lambda a, b: torch.log(torch.exp(a) * torch.exp(b)),
    "nan_to_num": lambda a, b: torch.nan_to_num(a + b),
    "through float32": lambda a, b: (a.float() + b.float()).to(a.dtype),
    "nan made 0": lambda a, b: torch.where((a + b).isnan(), torch.zeros_like(a), a + b),
    "clamped to 1e30": lambda a, b: (a + b).clamp(-1e30, 1e30),
    "halves, doubled": lambda a, b: (a / 2 + b / 2) * 2,
}


def differs(wrong, a, b) -> bool:
    """Whether ``wrong`` gives other numbers than a + b (inf or nan where a + b has either is
    the same: which one a formula gives at an edge is not the point)."""
    got, expected = wrong(a, b), a + b
    both_non_finite = ~torch.isfinite(got) & ~torch.isfinite(expected)
    return not bool((torch.isclose(got, expected, rtol=1e-7, atol=0, equal_nan=True) | both_non_finite).all())


def edge_pairs():
    count, cells = len(edges.edge_values(DTYPE)), int(np.prod(SHAPE))
    for apart in (0, 1, 5):
        for start in range(0, count, cells):
            yield edges.edge_tensor(SHAPE, DTYPE, shift=start), edges.edge_tensor(SHAPE, DTYPE, shift=start + apart)


def make_tensor_pairs():
    for index in range(BUDGET):
        yield (edges.generated(SHAPE, DTYPE, seed=2 * index), edges.generated(SHAPE, DTYPE, seed=2 * index + 1))


def finds(pairs, wrong) -> tuple[bool, float]:
    start = time.perf_counter()
    found = any(differs(wrong, a, b) for a, b in pairs())
    return found, time.perf_counter() - start


def hypothesis_finds(wrong) -> tuple[bool, float]:
    import hypothesis
    from hypothesis import HealthCheck, Phase, settings, strategies as st
    from hypothesis.extra.numpy import arrays

    hits = []
    floats = arrays(np.float64, SHAPE, elements=st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True))

    @settings(max_examples=BUDGET, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hypothesis.given(floats, floats)
    def probe(x, y):
        if differs(wrong, torch.from_numpy(x), torch.from_numpy(y)):
            hits.append(1)

    start = time.perf_counter()
    probe()
    return bool(hits), time.perf_counter() - start


def main() -> int:
    try:
        import hypothesis  # noqa: F401
        ways = ("edges", "make_tensor", "hypothesis")
    except ImportError:
        ways = ("edges", "make_tensor")
        print("(Hypothesis is not installed: see the docstring to measure it too)")
    totals = {way: [0, 0.0] for way in ways}
    print(f"{'wrong answer':26}" + "".join(f"{way:>22}" for way in ways))
    for name, wrong in WRONG.items():
        row = {"edges": finds(edge_pairs, wrong), "make_tensor": finds(make_tensor_pairs, wrong)}
        if "hypothesis" in ways:
            row["hypothesis"] = hypothesis_finds(wrong)
        for way in ways:
            totals[way][0] += row[way][0]
            totals[way][1] += row[way][1]
        print(f"{name:26}" + "".join(f"{('found' if row[w][0] else 'missed') + f' {row[w][1] * 1e3:7.1f} ms':>22}"
                                     for w in ways))
    print(f"{'found, total time':26}" + "".join(
        f"{f'{totals[w][0]} of {len(WRONG)} {totals[w][1] * 1e3:7.1f} ms':>22}" for w in ways))
    return 0


if __name__ == "__main__":
    sys.exit(main())
