"""Chapter 00's seeded_draw (E7): its catalogue of right and wrong answers."""

import functools
import random

import numpy as np
import pytest
import torch

from course_utils.env import seed_everything
from course_utils.exercises import environment as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# ============================================================================================
# seeded_draw (E7)
# ============================================================================================
def draw_own_generator(seed, n):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=generator)


def draw_after_seed_everything(seed, n):
    seed_everything(seed)
    return torch.randn(n)


def draw_normal_in_place(seed, n):
    torch.random.manual_seed(seed)
    return torch.empty(n).normal_()


def draw_python_seed_only(seed, n):
    random.seed(seed)
    np.random.seed(seed)
    return torch.randn(n)


def draw_fixed_seed(seed, n):
    torch.manual_seed(42)
    return torch.randn(n)


def draw_uniform(seed, n):
    torch.manual_seed(seed)
    return torch.rand(n)


def draw_torch_seed(seed, n):
    torch.seed(seed)
    return torch.randn(n)


def draw_from_numpy(seed, n):
    np.random.seed(seed)
    return torch.from_numpy(np.random.randn(n))


def draw_twice(seed, n):
    torch.manual_seed(seed)
    torch.randn(n)
    return torch.randn(n)


_seeds_seen = set()


def draw_seeds_once(seed, n):
    if seed not in _seeds_seen:
        torch.manual_seed(seed)
        _seeds_seen.add(seed)
    return torch.randn(n)


@functools.lru_cache(maxsize=None)
def draw_cached(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n)


def draw_squeezed(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n).squeeze()


def draw_five(seed, n):
    torch.manual_seed(seed)
    return torch.randn(5)


def draw_in_fork_rng(seed, n):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return torch.randn(n)


def draw_with_torch_normal(seed, n):
    torch.manual_seed(int(seed))
    return torch.normal(0.0, 1.0, size=(n,))


def draw_seed_below_100(seed, n):
    torch.manual_seed(seed % 100)
    return torch.randn(n)


# -- round 3 of outside testing ---------------------------------------------------------------
def draw_with_the_default_generator(seed, n):
    torch.default_generator.manual_seed(seed)
    return torch.randn(n)


def draw_with_the_next_seed(seed, n):
    torch.manual_seed(seed + 1)
    return torch.randn(n)


def draw_one_more_and_drop_it(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n + 1)[1:]


# -- issue 45 ----------------------------------------------------------------------------------
def draw_from_a_fresh_generator(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n, generator=torch.Generator())


def draw_from_a_generator_seeded_at_random(seed, n):
    torch.manual_seed(seed)
    generator = torch.Generator()
    generator.seed()
    return torch.randn(n, generator=generator)


def draw_from_a_generator_seeded_with_0(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n, generator=torch.Generator().manual_seed(0))


def draw_from_a_generator_seeded_with_seed_plus_1(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n, generator=torch.Generator().manual_seed(seed + 1))


def draw_from_a_generator_seeded_in_two_lines(seed, n):
    generator = torch.Generator()
    generator.manual_seed(seed)
    return torch.randn(n, generator=generator)

# -- issue 45, fresh round (from the task text) ------------------------------------------
def draw_sorted(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n).sort().values


def draw_as_a_column(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n, 1)


def draw_at_least_one(seed, n):
    torch.manual_seed(seed)
    return torch.randn(max(n, 1))


def draw_one_at_a_time(seed, n):
    torch.manual_seed(seed)
    return torch.stack([torch.randn(()) for _ in range(n)])


def draw_in_half_precision(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n, dtype=torch.float16).float()


_draws_by_seed = {}


def draw_cached_by_seed_only(seed, n):
    if seed not in _draws_by_seed:
        torch.manual_seed(seed)
        _draws_by_seed[seed] = torch.randn(n)
    return _draws_by_seed[seed].clone()


def draw_in_float64_then_float32(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n, dtype=torch.float64).float()


def draw_clamped(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n).clamp(-3, 3)


def draw_as_a_list(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n).tolist()


def draw_seeds_when_seed_is_truthy(seed, n):
    if seed:
        torch.manual_seed(seed)
    return torch.randn(n)


def draw_with_a_size_object(seed, n):
    torch.random.manual_seed(seed)
    return torch.randn(torch.Size([n]), dtype=torch.float32)


# -- issue 45, second fresh round (from the task text) ------------------------------------
def draw_then_seed(seed, n):
    out = torch.randn(n)
    torch.manual_seed(seed)
    return out


def draw_uniform_then_seed(seed, n):
    out = torch.rand(n)
    torch.manual_seed(seed)
    return out


CATALOGUE = Catalogue({
    ex.seeded_draw: [
        right("inside torch.random.fork_rng()", draw_in_fork_rng),
        right("torch.normal(0, 1, size=(n,))", draw_with_torch_normal),
        wrong("folds the seed below 100", draw_seed_below_100, "wrong values", "seed=123457", kind=EDGE),
        right("its own torch.Generator", draw_own_generator),
        right("seed_everything", draw_after_seed_everything),
        right("torch.random.manual_seed and normal_()", draw_normal_in_place),
        wrong("seeds Python and NumPy only", draw_python_seed_only, "different numbers", "do not seed torch"),
        wrong("fixed seed", draw_fixed_seed, "ignores its seed argument"),
        wrong("uniform numbers", draw_uniform, "torch.rand's"),
        wrong("torch.seed(seed)", draw_torch_seed, "torch.seed() sets a fresh, random seed", "Likely cause:",
              outcome=Outcome.RAISED),
        wrong("NumPy's draw", draw_from_numpy, "dtype torch.float64; expected torch.float32"),
        wrong("draws twice", draw_twice, "wrong values", "draws right after"),
        wrong("seeds only the first time it sees a seed", draw_seeds_once, "Two calls with seed=0 gave different numbers",
              kind=STATEFUL),
        wrong("caches its draws", draw_cached, "the very tensor object the first call returned", kind=STATEFUL),
        wrong("squeezes the result", draw_squeezed, "has shape (); expected (1,)", "dropped that dimension", kind=EDGE),
        wrong("always five numbers", draw_five, "has shape (5,); expected (3,)", "seed=7, n=3", kind=EDGE),
        # -- round 3 of outside testing
        right("generator=torch.manual_seed(seed)", lambda seed, n: torch.randn(n, generator=torch.manual_seed(seed))),
        right("torch.default_generator.manual_seed", draw_with_the_default_generator),
        right("torch.randn(size=[n]) with int(seed)", lambda seed, n: (torch.manual_seed(int(seed)),
                                                                   torch.randn(size=[n]))[1]),
        wrong("seed + 1", draw_with_the_next_seed, "right shape but wrong values", "torch.manual_seed(seed)"),
        wrong("draws n + 1 and drops the first", draw_one_more_and_drop_it, "right shape but wrong values"),
        # -- issue 45: torch.manual_seed(seed) called, the numbers drawn from another generator
        wrong("seeds torch, draws from a fresh torch.Generator()", draw_from_a_fresh_generator,
              "draws nothing from it", "torch.Generator()", kind=EDGE),
        wrong("seeds torch, draws from a generator seeded at random", draw_from_a_generator_seeded_at_random,
              "draws nothing from it", kind=EDGE),
        wrong("seeds torch, draws from a generator seeded with 0", draw_from_a_generator_seeded_with_0,
              "draws nothing from it", kind=EDGE),
        wrong("seeds torch, draws from a generator seeded with seed + 1", draw_from_a_generator_seeded_with_seed_plus_1,
              "draws nothing from it", kind=EDGE),
        right("a torch.Generator() seeded on its own line", draw_from_a_generator_seeded_in_two_lines),
        # -- issue 45, fresh round (from the task text) --

        wrong("sorts its draw", draw_sorted, "right shape but wrong values", "draws right after"),
        wrong("a column of n numbers", draw_as_a_column, "has shape (5, 1); expected (5,)"),
        wrong("at least one number", draw_at_least_one, "has shape (1,); expected (0,)", "n=0", kind=EDGE),
        wrong("one number at a time, stacked", draw_one_at_a_time, "stack expects a non-empty TensorList",
              "Likely cause:", kind=EDGE, outcome=Outcome.RAISED),
        wrong("draws in float16, converts to float32", draw_in_half_precision, "right shape but wrong values",
              "draws right after"),
        wrong("caches one draw per seed, whatever n", draw_cached_by_seed_only, "has shape (5,); expected (3,)",
              "seed=0, n=3", kind=STATEFUL),
        wrong("draws float64, converts to float32", draw_in_float64_then_float32, "right shape but wrong values",
              "n=1000", kind=EDGE),
        wrong("clamps to [-3, 3]", draw_clamped, "right shape but wrong values", "n=1000", kind=EDGE),
        wrong("returns a list", draw_as_a_list, "is a list", "expected a torch.Tensor"),
        wrong("seeds only when `if seed:` holds", draw_seeds_when_seed_is_truthy, "not for seed=0",
              "`if seed:` is False for 0", kind=EDGE),
        right("torch.random.manual_seed, torch.randn(torch.Size([n]))", draw_with_a_size_object),
        # -- issue 45, second fresh round (from the task text) --
        wrong("draws, then seeds", draw_then_seed, "only after drawing", "torch.randn(n) draws from",
              "Seed first, then draw", kind=STATEFUL),
        wrong("draws uniform numbers, then seeds", draw_uniform_then_seed, "only after drawing",
              "torch.rand(n) draws from", "Seed first, then draw", kind=STATEFUL),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
