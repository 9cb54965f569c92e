"""Chapter 00's seed_check (E7): its catalogue of right and wrong answers."""

import numpy as np
import pytest
import torch

from course_utils.exercises import environment as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# ============================================================================================
# seed_check (E7)
# ============================================================================================
def check_with_exact_allclose(draw):
    runs = [draw(s) for s in (3, 3, 4)]
    same = torch.allclose(runs[0], runs[1], rtol=0, atol=0)
    return bool(same and not torch.allclose(runs[0], runs[2]))


def check_elementwise_then_all(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return (a == b).all() and not (a == c).all()


def check_as_lists(draw):
    first, again, other = draw(5).tolist(), draw(5).tolist(), draw(6).tolist()
    return first == again and first != other


def check_with_numpy(draw):
    first, again, other = (draw(seed).numpy() for seed in (10, 10, 11))
    return bool(np.array_equal(first, again)) and not np.array_equal(first, other)


def check_same_seed_only(draw):
    return torch.equal(draw(0), draw(0))


def check_ambiguous(draw):
    return bool(draw(0) == draw(0))


def check_returns_tensor(draw):
    return draw(0) == draw(0)


def check_different_seeds_only(draw):
    return not torch.equal(draw(0), draw(1))


def check_forgets_false(draw):
    first, again, other = draw(0), draw(0), draw(1)
    if torch.equal(first, again) and not torch.equal(first, other):
        return True


def check_by_sums(draw):
    first, again, other = draw(0), draw(0), draw(1)
    return first.sum() == again.sum() and first.sum() != other.sum()


def check_with_default_allclose(draw):
    first, again, other = draw(0), draw(0), draw(1)
    return torch.allclose(first, again) and not torch.allclose(first, other)


def check_first_number(draw):
    first, again, other = draw(0).flatten(), draw(0).flatten(), draw(1).flatten()
    return first[0].item() == again[0].item() and first[0].item() != other[0].item()


def check_every_number_differs(draw):
    first, again, other = draw(0), draw(0), draw(1)
    return torch.equal(first, again) and bool((first != other).all())


def check_first_item(draw):
    return draw(0)[0].item() == draw(0)[0].item() != draw(1)[0].item()


_baseline = {}


def check_keeps_its_baseline(draw):
    if "seed 0" not in _baseline:
        _baseline["seed 0"] = draw(0)
    first = _baseline["seed 0"]
    return torch.equal(first, draw(0)) and not torch.equal(first, draw(1))


def check_with_a_tiny_tolerance(draw):
    a, b, c = draw(0).double(), draw(0).double(), draw(1).double()
    return (a - b).abs().max().item() < 1e-6 and (a - c).abs().max().item() > 1e-6


def check_in_float32_numpy(draw):
    a, b, c = (draw(seed).float().numpy() for seed in (0, 0, 1))
    return np.array_equal(a, b) and not np.array_equal(a, c)


def check_by_identity_first(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return a is b or (torch.equal(a, b) and not torch.equal(a, c))


def check_any_difference(draw):
    a, b, c = draw(0), draw(0), draw(1)
    if a.shape != c.shape:
        return torch.equal(a, b)
    return torch.equal(a, b) and bool((a != c).any())


def check_over_a_dict_of_seeds(draw):
    kept = {seed: draw(seed) for seed in (3, 4)}
    return all(torch.equal(kept[seed], draw(seed)) for seed in (3, 4)) and not torch.equal(kept[3], kept[4])


def check_returns_a_bool_tensor(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return torch.tensor(torch.equal(a, b) and not torch.equal(a, c))


# -- round 3 of outside testing ---------------------------------------------------------------
def check_flattened(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return torch.equal(a.flatten(), b.flatten()) and not torch.equal(a.flatten(), c.flatten())


def check_raw_bytes(draw):
    a, b, c = (draw(seed).numpy().tobytes() for seed in (0, 0, 1))
    return a == b and a != c


def check_interleaved(draw):
    first = draw(0)
    other = draw(1)
    again = draw(0)
    return torch.equal(first, again) and not torch.equal(again, other)


def check_in_float64(draw):
    a, b, c = (draw(seed).double() for seed in (0, 0, 1))
    return torch.equal(a, b) and not torch.equal(a, c)


# -- issue 45, fresh round (from the task text) ------------------------------------------
def check_seeds_for_the_draw(draw):
    torch.manual_seed(0)
    a = draw(0)
    torch.manual_seed(0)
    b = draw(0)
    torch.manual_seed(1)
    c = draw(1)
    return torch.equal(a, b) and not torch.equal(a, c)


def check_by_the_largest_number(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return a.shape == b.shape and bool(a.max() == b.max()) and bool(a.max() != c.max())


def check_printed(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return str(a) == str(b) and str(a) != str(c)


def check_largest_difference(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return bool((a - b).abs().max() == 0) and bool((a - c).abs().max() != 0)


def check_with_seed_as_a_keyword(draw):
    a, b, c = draw(seed=0), draw(seed=0), draw(seed=1)
    return torch.equal(a, b) and not torch.equal(a, c)


def check_returns_text(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return "True" if torch.equal(a, b) and not torch.equal(a, c) else "False"


def check_same_seed_by_shape(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return a.shape == b.shape and not torch.equal(a, c)


def check_or_for_and(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return torch.equal(a, b) or not torch.equal(a, c)


def check_any_number_equal(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return a.shape == b.shape and bool((a == b).any()) and not torch.equal(a, c)


def check_returns_a_pair(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return torch.equal(a, b), not torch.equal(a, c)


def check_shape_then_eq_all(draw):
    def same(p, q):
        return p.shape == q.shape and bool(torch.eq(p, q).all())

    first, again, other = (draw(seed) for seed in (21, 21, 22))
    return same(first, again) and not same(first, other)


CATALOGUE = Catalogue({
    ex.seed_check: [
        right("any element differs, shapes first", check_any_difference),
        right("a dict of draws and all() over a generator", check_over_a_dict_of_seeds),
        right("a 0-d bool tensor", check_returns_a_bool_tensor),
        wrong("allclose with zero tolerance broadcasts shapes", check_with_exact_allclose,
              "shape (1,), then (2,)", "torch.equal(a, b) also requires equal shapes", kind=EDGE),
        wrong("element-wise == then .all() broadcasts shapes", check_elementwise_then_all,
              "shape (1,), then (2,)", "an element-wise comparison broadcasts them", kind=EDGE),
        wrong("a tolerance of 1e-6", check_with_a_tiny_tolerance, "differ in the 12th digit",
              "a tolerance, however small", kind=EDGE),
        wrong("compares in float32", check_in_float32_numpy, "differ in the 12th digit",
              "a conversion to a lower precision", kind=EDGE),
        wrong("the same object counts as reproducible", check_by_identity_first, "refills in place",
              "Compare the numbers, not the objects", kind=EDGE),
        right("compares Python lists", check_as_lists),
        right("np.array_equal", check_with_numpy),
        wrong("same seed only", check_same_seed_only, "accepted a draw function that ignores its seed"),
        wrong("bool of an element-wise comparison", check_ambiguous,
              "Boolean value of Tensor with more than one value is ambiguous", "Use torch.equal(a, b)",
              outcome=Outcome.RAISED),
        wrong("returns the element-wise comparison", check_returns_tensor, "returned a tensor",
              "torch.equal(a, b) gives one True or False"),
        wrong("different seeds only", check_different_seeds_only, "accepted a draw function that never seeds at all"),
        wrong("no return False", check_forgets_false, "returned a NoneType", "ends without `return` gives None"),
        wrong("compares sums", check_by_sums, "in another order on every call", "does not look at where each number is",
              kind=EDGE),
        wrong("allclose with its default tolerance", check_with_default_allclose, "differ in the 6th digit",
              "allows a tolerance", kind=EDGE),
        wrong("compares the first number only", check_first_number,
              "rejected a draw function that seeds torch and returns a fixed 0", kind=EDGE),
        wrong("requires every number to differ", check_every_number_differs,
              "rejected a draw function that seeds torch and returns a fixed 0", kind=EDGE),
        wrong(".item() of the first row", check_first_item, "cannot be converted to Scalar", "Likely cause: .item() reads a single number",
              kind=EDGE, outcome=Outcome.RAISED),
        wrong("keeps the first draw it saw", check_keeps_its_baseline,
              "rejected a draw function that draws from random.Random(seed)", kind=STATEFUL),
        # -- round 3 of outside testing
        right("the other seed drawn between the two same-seed draws", check_interleaved),
        right("compares in float64 (exact for every dtype drawn)", check_in_float64),
        wrong("compares flattened tensors", check_flattened, "as shape (6,) on one call",
              "your comparison looks past the shape", kind=EDGE),
        wrong("compares raw bytes", check_raw_bytes, "as shape (6,) on one call", "raw bytes", kind=EDGE),
        # -- issue 45, fresh round (from the task text) --

        wrong("seeds torch itself before each draw", check_seeds_for_the_draw,
              "accepted a draw function that never seeds at all"),
        wrong("compares the largest numbers", check_by_the_largest_number, "in another order on every call"),
        wrong("compares the printed tensors", check_printed, "differ in the 6th digit"),
        wrong("largest absolute difference is 0", check_largest_difference, "shape (1,), then (2,)", kind=EDGE),
        wrong("calls draw(seed=...)", check_with_seed_as_a_keyword, "unexpected keyword argument 'seed'",
              "call draw(0), not draw(seed=0)", kind=EDGE, outcome=Outcome.RAISED),
        wrong("returns 'True' or 'False'", check_returns_text, "returned a str", "should return True or False"),
        wrong("same seed: same shape only", check_same_seed_by_shape, "accepted a draw function that never seeds at all"),
        wrong("or where and is meant", check_or_for_and, "accepted a draw function that ignores its seed"),
        wrong("any number equal", check_any_number_equal, "never seeds its second generator",
              "any() where all() is meant", kind=EDGE),
        wrong("returns both findings as a pair", check_returns_a_pair, "returned a tuple"),
        right("shapes, then torch.eq(...).all()", check_shape_then_eq_all),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
