"""E7 — seed_check: write the seed check.

Engine: applies edges.edge_values (a reproducible draw holding float32's classic edges, nan
left out: torch.equal, the task's "exactly the same", never finds nan equal to itself) and the
shapes and dtypes the task allows (0-d, bool, float16, int64, float64); hand-written because
the input is a function, and the cases are draw functions broken the ways real code is.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Raised, a_or_an, later_error
from course_utils.exercises.edges import Allowed, edge_values
from course_utils.exercises.environment.common import CHAPTER, _cases_record
from course_utils.exercises.facts import shape_text, value_facts
from course_utils.exercises.messages import Messages
from course_utils.exercises.running import LearnerRaised

_ACCEPTED = ("Your check accepted a draw function that {description}: called twice with the same "
             "seed it does not give exactly the same tensor.")
MESSAGES = Messages("seed_check", {
    "hint-1": "Call draw three times: twice with one seed, once with another.",
    "hint-2": "Compare whole tensors with torch.equal(a, b): it returns one bool.",
    "hint-3": "Reproducible means: equal for the same seed AND different for different seeds.",
    "passed": "Correct: your check tells reproducible draws from every broken kind tried.",
    "tensor-comparison-as-bool": (
        "`if a == b` or `a == b and ...` on tensors: == gives one boolean per element. "
        "Use torch.equal(a, b)."),
    "item-of-many-values": (
        ".item() reads a single number, and a draw may return a tensor of any shape "
        "(this one has more than one number there): compare whole tensors with "
        "torch.equal(a, b)."),
    "seed-passed-by-keyword": (
        "draw takes a seed as its one argument, whatever that parameter is called (this one "
        "is not called seed): call draw(0), not draw(seed=0)."),
    "not-a-bool": (
        "seed_check returned {kind} ({shown}) for a draw function that {description}; it should "
        "return True or False.{tip}"),
    "tip-one-bool": " Turn your comparison into one bool, e.g. with torch.equal(a, b).",
    "elementwise-comparison": (
        "seed_check returned {kind} ({shown}) for a draw function that {description}; it should "
        "return True or False. `a == b` compares tensors element by element and gives a tensor "
        "of booleans; torch.equal(a, b) gives one True or False."),
    "missing-return": (
        "seed_check returned {kind} ({shown}) for a draw function that {description}; it should "
        "return True or False. A way through your function that ends without `return` gives None."),
    "remembers-earlier-calls": (
        "Your check said {said} for a draw function that {description}, then {said_again} when "
        "given the same function again after checking others: its answer depends on what it "
        "checked before. Call draw afresh inside the function each time and keep nothing "
        "between calls."),
    "rejects-reproducible": (
        "Your check rejected a draw function that {description}, which is reproducible: the "
        "same seed gives exactly the same numbers and another seed other numbers (compare "
        "whole tensors: torch.equal(a, b))."),
    "same-seed-only": (
        "Your check accepted a draw function that ignores its seed: it returns the same "
        "numbers for every seed. Also call it with two different seeds and require different "
        "numbers."),
    "different-seeds-only": _ACCEPTED,
    "order-blind-comparison": _ACCEPTED + (
        " Your comparison does not look at where each number is (a sum, a mean or sorted "
        "values are the same in any order); torch.equal compares element by element."),
    "allows-tolerance": _ACCEPTED + (
        " Your comparison allows a tolerance (as torch.allclose does by default); "
        "reproducible means exactly the same numbers: torch.equal."),
    "rounds-differences-away": _ACCEPTED + (
        " Something in your comparison rounds these differences away: a tolerance, however "
        "small, or a conversion to a lower precision (float64 to float32). Reproducible means "
        "exactly the same numbers: torch.equal, on the tensors as they are."),
    "compares-objects": _ACCEPTED + (
        " Every call returns the same tensor object, so a result compared with itself "
        "(`a is b`) always looks reproducible. Compare the numbers, not the objects: "
        "torch.equal(a, b), with a result cloned before the next call refills it."),
    "ignores-shape": _ACCEPTED + (
        " The same numbers in a tensor of another shape are not the same numbers in the same "
        "places: your comparison looks past the shape (flattened values or raw bytes). "
        "torch.equal(a, b) also requires equal shapes."),
    "broadcast-comparison": _ACCEPTED + (
        " Tensors of different shapes are not the same numbers in the same places, but an "
        "element-wise comparison broadcasts them: (a == b).all() and torch.allclose(a, b) are "
        "True for a (1,) tensor against a (2,) one holding the same number twice. "
        "torch.equal(a, b) also requires equal shapes."),
    "partial-comparison": _ACCEPTED + (
        " Some of its numbers repeat, not all: your comparison is satisfied by part of the "
        "tensor (any() where all() is meant, or a few elements only). torch.equal(a, b) "
        "compares every element."),
})

# Which clue in a broken draw's description explains an answer that accepted it.
_ACCEPTED_CLUES = (
    ("another order", "order-blind-comparison"),
    ("6th digit", "allows-tolerance"),
    ("12th digit", "rounds-differences-away"),
    ("refills in place", "compares-objects"),
    ("(6,) on one call with that seed", "ignores-shape"),
    ("shape (1,), then (2,)", "broadcast-comparison"),
    ("never seeds its second generator", "partial-comparison"),
)


# ============================================================================================
# E7 — write the seed check
# ============================================================================================
def seed_check(draw):
    first = draw(0)
    again = draw(0)
    other = draw(1)
    return torch.equal(first, again) and not torch.equal(first, other)


# The draws a seed check is given: the learner's code calls them, so a grading kernel must not
# guard them (course_utils.grading.guarded_code).
LEARNER_FACING = ("_seeded_rand", "_seed_ignored", "_never_seeded", "_python_random_seeded",
                  "_seeds_the_wrong_library", "_seeded_integers", "_seeded_float64", "_padded",
                  "_seeded_scalar", "_seeded_bools", "_seeded_half", "_seeded_edges", "_seed_by_position")


def _seeded_rand(seed):
    import torch

    torch.manual_seed(seed)
    return torch.rand(4)


def _seed_ignored(seed):
    import torch

    torch.manual_seed(1234)
    return torch.rand(4)


def _never_seeded(seed):
    import torch

    return torch.rand(4)


def _python_random_seeded(seed):
    import torch

    rng = random.Random(seed)
    return torch.tensor([rng.random() for _ in range(6)]).reshape(2, 3)


def _seeds_the_wrong_library(seed):
    import torch

    np.random.seed(seed)
    return torch.rand(4)


def _seeded_integers(seed):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 1000, (5,), generator=generator)


def _seeded_float64(seed):
    import torch

    torch.manual_seed(seed)
    return torch.rand(3, dtype=torch.float64)


def _padded(seed):
    import torch

    torch.manual_seed(seed)
    return torch.cat([torch.zeros(1), torch.rand(4)])


def _seeded_scalar(seed):
    import torch

    torch.manual_seed(seed)
    return torch.rand(())


def _seeded_bools(seed):
    import torch

    torch.manual_seed(seed)
    return torch.rand(16) < 0.5


def _seeded_half(seed):
    import torch

    torch.manual_seed(seed)
    return torch.rand(2, 2, dtype=torch.float16)


# float32's classic edges, nan left out (torch.equal never finds nan equal to itself).
_EDGES = edge_values(torch.float32, Allowed(nan=False))


def _seeded_edges(seed):
    import torch

    torch.manual_seed(seed)
    return torch.cat([torch.tensor(_EDGES, dtype=torch.float32), torch.rand(4)])


def _seed_by_position(value, /):
    import torch

    torch.manual_seed(value)
    return torch.rand(3)


def _draws():
    """Fresh draw functions for one probe: (draw, what it does). Those that change from call to
    call count their own calls, so every probe (and ``_expect_seed_check``'s run of the
    reference) sees the same behaviour. Whether each is reproducible is the reference's to say,
    on the judge's side."""
    import torch

    calls = {"shuffled": 0, "jitter": 0, "jitter64": 0}
    unseeded = torch.Generator().manual_seed(20240607)  # seeded once, never by the draw
    calls_per_seed = {}
    history = []
    buffer = torch.empty(4)

    def _refilled(seed):
        return torch.rand(4, out=buffer)

    def _shuffled(seed):
        calls["shuffled"] += 1
        torch.manual_seed(seed)
        return torch.roll(torch.rand(5), shifts=calls["shuffled"])

    def _jitter(seed):
        calls["jitter"] += 1
        torch.manual_seed(seed)
        return torch.rand(4) * (1 + 4e-6 * calls["jitter"])

    def _jitter64(seed):
        calls["jitter64"] += 1
        torch.manual_seed(seed)
        return torch.rand(4, dtype=torch.float64) * (1 + 2.0**-38 * calls["jitter64"])

    def _reshaped(seed):
        # Counted per seed, so two calls with one seed differ in shape whatever ran between.
        calls_per_seed[seed] = calls_per_seed.get(seed, 0) + 1
        torch.manual_seed(seed)
        numbers = torch.rand(6)
        return numbers if calls_per_seed[seed] % 2 else numbers.reshape(2, 3)

    def _partly_seeded(seed):
        torch.manual_seed(seed)
        return torch.cat([torch.rand(3), torch.rand(2, generator=unseeded)])

    def _growing(seed):
        torch.manual_seed(seed)
        history.append(torch.rand(1))
        return torch.cat(history)

    return [
        (_seeded_rand, "seeds torch, then draws"),
        (_seed_ignored, "ignores its seed (always torch.manual_seed(1234))"),
        (_never_seeded, "never seeds at all"),
        (_python_random_seeded, "draws from random.Random(seed), shape (2, 3)"),
        (_seeds_the_wrong_library, "seeds NumPy, then draws with torch"),
        (_seeded_integers, "draws integers (int64) from its own seeded generator"),
        (_seeded_float64, "seeds torch, then draws float64 numbers"),
        (_padded, "seeds torch and returns a fixed 0 followed by four random numbers"),
        (_shuffled, "returns the same numbers for the same seed, but in another order on every call"),
        (_jitter, "returns numbers for the same seed that differ in the 6th digit from call "
                  "to call (as a non-deterministic GPU kernel does)"),
        (_jitter64, "returns float64 numbers for the same seed that differ in the 12th digit "
                    "from call to call (as a non-deterministic GPU kernel does)"),
        (_refilled, "never seeds, and returns one tensor object that it refills in place on "
                    "every call (torch.rand(4, out=buffer))"),
        (_growing, "draws one number per call and returns every number it has drawn so far, "
                   "so for the same seed it returns shape (1,), then (2,)"),
        (_reshaped, "returns the same six numbers for the same seed, but as shape (6,) on "
                    "one call with that seed and (2, 3) on the next"),
        (_seeded_scalar, "seeds torch and returns one number, as a 0-dimensional tensor"),
        (_seeded_bools, "seeds torch and returns sixteen booleans (dtype torch.bool)"),
        (_seeded_half, "seeds torch and returns float16 numbers of shape (2, 2)"),
        (_seeded_edges, "seeds torch and returns float32's extreme values (±0, subnormals, ±inf, "
                        "the largest numbers) followed by four random numbers"),
        (_seed_by_position, "seeds torch, then draws, and calls its parameter `value`, not `seed`"),
        (_partly_seeded, "seeds torch for its first three numbers but draws the last two from "
                         "a second generator of its own: it never seeds its second generator"),
    ]


def _as_bool(value):
    import torch

    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype == torch.bool:
        return bool(value.item())
    if isinstance(value, np.bool_):
        return bool(value)
    return value if type(value) is bool else None


def _probe_seed_check(answer, run):
    """Which draw each call was given (its index in ``_draws()``) and what the answer said of
    it: never whether the draw is reproducible (``_expect_seed_check`` asks the reference)."""
    draws = _draws()
    # Each draw once, then the first two again: a check must not depend on what it saw before.
    schedule = list(range(len(draws))) + [0, 1]
    cases = []
    record = {"cases": cases}
    for position, index in enumerate(schedule):
        draw, description = draws[index]
        again = position >= len(draws)
        try:
            got = run(answer, draw, on=f"a draw function that {description}" + (", checked again" if again else ""))
        except LearnerRaised as raised:
            # The judge decides: a mistake the earlier calls already show is the one to report,
            # not the error a later draw led to.
            record["raised"] = later_error(raised, answer, cases)
            break
        cases.append(
            {
                "given": {"draw": index},
                "again": again,
                "description": description,
                "got": _as_bool(got),
                "facts": value_facts(got),
            }
        )
    return record


def _expect_seed_check(record):
    """What the reference says of each draw the record names: it checks fresh copies of the
    draws, once each, every random stream put back afterwards."""
    from course_utils.env import random_state_preserved

    record = _cases_record(record)
    with random_state_preserved():
        reproducible = [bool(seed_check.reference(draw)) for draw, _ in _draws()]
    for case in record["cases"]:
        case["expected"] = reproducible[case["given"]["draw"]]
    return record


def _judge_seed_check(record):
    record = _cases_record(record)
    cases = record["cases"]
    for case in cases:
        if case["got"] is None:
            facts = case["facts"]
            fields = {"kind": a_or_an(facts["kind"]), "shown": facts.get("repr", ""),
                      "description": case["description"]}
            if facts["kind"] == "tensor":
                fields["shown"] = f"shape {shape_text(facts['shape'])}, {facts['dtype']}"
                if facts["dtype"] == "torch.bool":
                    return MESSAGES("elementwise-comparison", **fields)
            if facts["kind"] == "NoneType":
                return MESSAGES("missing-return", **fields)
            tip = MESSAGES.text("tip-one-bool") if facts["kind"] == "tensor" else ""
            return MESSAGES("not-a-bool", tip=tip, **fields)
    first_answers = {case["given"]["draw"]: case["got"] for case in cases if not case["again"]}
    for case in cases:
        if case["again"] and case["got"] != first_answers[case["given"]["draw"]]:
            return MESSAGES("remembers-earlier-calls", said=first_answers[case["given"]["draw"]],
                            description=case["description"], said_again=case["got"])
    for case in cases:
        if case["got"] != case["expected"]:
            if case["expected"]:
                return MESSAGES("rejects-reproducible", description=case["description"])
            if "ignores its seed" in case["description"]:
                return MESSAGES("same-seed-only")
            # Not reproducible, yet accepted; unless a clue below says how, the check never
            # compared two draws made with one seed.
            mistake = next((id for clue, id in _ACCEPTED_CLUES if clue in case["description"]),
                           "different-seeds-only")
            return MESSAGES(mistake, description=case["description"])
    if record.get("raised"):
        return Raised(record["raised"])
    return None


seed_check = Exercise(
    "seed_check",
    chapter=CHAPTER,
    title="Write the seed check",
    expects=Function("seed_check", ("draw",), returns="True or False (one bool)"),
    probe=_probe_seed_check,
    expect=_expect_seed_check,
    judge=_judge_seed_check,
    reference=seed_check,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "tensor-comparison-as-bool": "Boolean value of Tensor with more than one value is ambiguous",
        "item-of-many-values": "cannot be converted to Scalar",
        "seed-passed-by-keyword": "unexpected keyword argument 'seed'",
    }),
    messages=MESSAGES,
)
