"""E7 — seeded_draw: same seed, same numbers.

Engine: applies edges.edge_values to the seed (the seeds seed_everything accepts, 0 to
LARGEST_SEED: its extremes and 2**24 + 1) and to n (0, 1, and one large enough for torch's
vectorised draw) and states.session_settings' random state (the global stream moved on before
every call); hand-written because the inputs are a seed and a count, not tensors, and the
verdict reads which generator the answer seeded (torch.initial_seed()), which a comparison of
results cannot tell.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from course_utils.env import LARGEST_SEED
from course_utils.exercises.core import Exercise, Function, Raised, later_error
from course_utils.exercises.edges import Allowed, edge_values
from course_utils.exercises.environment.common import CHAPTER, _cases_record
from course_utils.exercises.facts import same_values, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised

_SEED = "torch.manual_seed(seed)"
MESSAGES = Messages("seeded_draw", {
    "hint-1": "torch.manual_seed(seed) resets torch's random stream on the CPU (and on CUDA devices).",
    "hint-2": "Seed first, then draw: torch.randn(n).",
    "passed": "Correct: the same seed gives the same numbers, a new seed new numbers.",
    "seed-not-manual-seed": (
        "torch.seed() sets a fresh, random seed. The function that sets yours is "
        "torch.manual_seed(seed)."),
    "drew-from-another-generator": (
        "Your function seeds torch's global generator with torch.manual_seed(seed), but "
        "draws nothing from it (on {on}): your numbers come from another "
        "generator, which torch.manual_seed does not touch (a new torch.Generator() "
        "starts from its own fixed seed, whatever seed you set globally). Draw from the "
        "seeded one, torch.randn(n), or seed your own with that seed: "
        "torch.randn(n, generator=torch.Generator().manual_seed(seed))."),
    "seeded-after-draw": (
        "Your function calls torch.manual_seed(seed) only after drawing (on {on}): its numbers "
        "are the ones {draw} draws from wherever torch's global generator stood before "
        "the call (other cells had moved it on), and the seed only sets the stream for "
        "whatever draws next. Seed first, then draw: torch.manual_seed(seed), then "
        "torch.randn(n)."),
    "unreadable-draw": "The check could not read the numbers of your draw (on {on}); return {returns}.",
    "squeezed": "{problem} torch.randn(1) has shape (1,); something in your function dropped that dimension.",
    "same-tensor-every-call": (
        "Your second call with seed=0 returned the very tensor object the first call "
        "returned, so a change made to one result (the check added 100 to the first) shows "
        "up in the other. Draw fresh numbers on every call."),
    "not-seeded-before-draw": Message(
        "Two calls with seed=0 gave different numbers (something ran in between, as other "
        "cells would). Seed torch inside the function, right before drawing, with "
        "torch.manual_seed(seed).", advises=(_SEED,)),
    "seeded-other-library": Message(
        "Two calls with seed=0 gave different numbers (something ran in between, as other "
        "cells would). Seed torch inside the function, right before drawing, with "
        "torch.manual_seed(seed). Your function left {generators} generator seeded with 0, but "
        "those do not seed torch: torch.randn draws from torch's own generator.", advises=(_SEED,)),
    "not-from-seeded-stream": (
        "Two calls with seed=0 gave different numbers (something ran in between, as other "
        "cells would), though your function seeded torch with seed=0 both times: the numbers "
        "it returns do not come from the stream that seed starts. Return what torch.randn(n) "
        "draws right after torch.manual_seed(seed)."),
    "seeded-first-call-only": (
        "Two calls with seed=0 gave different numbers (something ran in between, as other "
        "cells would): your function seeded torch on the first call with seed=0, not on the "
        "second. Seed on every call, right before drawing, not once per seed."),
    "seeds-only-some-seeds": (
        "Two calls with seed=0 gave different numbers (something ran in between, as other "
        "cells would): your function seeded torch for seed={seeded_for} but not for seed=0. "
        "Seed on every call, whatever the seed: a test such as `if seed:` is False for 0, a "
        "seed like any other."),
    "fixed-seed": Message(
        "seed=0 and seed=1 gave the same numbers: your function ignores its seed argument. "
        "Pass `seed` to torch.manual_seed, not a fixed number.", advises=(_SEED,)),
    "seed-not-followed": (
        "seed=0 and seed=1 gave the same numbers: your function seeds torch with its seed, "
        "but the numbers it returns do not follow it. Return what torch.randn(n) draws right "
        "after torch.manual_seed(seed)."),
    "rand-not-randn": (
        "Your numbers repeat, but they are torch.rand's (uniform in [0, 1)); the task "
        "asks for torch.randn (normal, mean 0, std 1)."),
    # Appended to the comparison's words (facts.tensor_problem) when the values differ.
    "advice-seed-then-draw": " Seed with torch.manual_seed(seed), then call torch.randn(n).",
    "advice-draw-as-it-is": (
        " Your function seeds torch with its seed; return the n numbers that torch.randn(n) "
        "draws right after, as they are: no draw before them, nothing changed after."),
})


# ============================================================================================
# E7 — same seed, same numbers
# ============================================================================================
def seeded_draw(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n)


def _seeded_elsewhere(seed) -> list[str]:
    """Which other generators are exactly in the state that seeding them with ``seed`` leaves."""
    seeded = []
    if random.getstate() == random.Random(seed).getstate():
        seeded.append("Python's random")
    state, fresh = np.random.get_state(), np.random.RandomState(seed).get_state()
    if state[0] == fresh[0] and np.array_equal(state[1], fresh[1]) and state[2] == fresh[2]:
        seeded.append("NumPy's")
    return seeded


_SEEDED_BEFORE = 9_000_001  # the seeds the probe leaves torch's global generator at before each call


def _global_seeded_unused(seed) -> bool:
    """True when torch's global generator was seeded with ``seed`` during the call and nothing
    was drawn from it afterwards: the numbers came from another generator."""
    import torch

    return torch.initial_seed() == seed and torch.equal(
        torch.default_generator.get_state(), torch.Generator().manual_seed(seed).get_state())


def _other_generator(cases):
    """The verdict for an answer that seeds torch's global generator but draws from another one,
    or that drew from the global generator before seeding it (its numbers are what the stream
    the probe left before the call gives, drawn on the judge's side in ``case["before_seeding"]``)."""
    for case in cases:
        got = case["got"].get("values")
        if not case.get("global_seeded_unused") or got is None or not np.size(got):
            continue
        for draw, before in case.get("before_seeding", {}).items():
            if np.shape(before) == np.shape(got) and same_values(got, before, rtol=0, atol=0):
                return MESSAGES("seeded-after-draw", on=case["on"], draw=draw)
    for case in cases:
        if case.get("global_seeded_unused"):
            return MESSAGES("drew-from-another-generator", on=case["on"])
    return None


def _calls():
    """(seed, n) for each call: the seed-logic calls first (0, 0 again, 1), then the edges of
    what the task allows: the same seed with another n, n = 0, an n large enough for torch's
    vectorised draw (16 or more) and for values beyond 3 in magnitude, and the edges of the
    seeds seed_everything accepts (0 to LARGEST_SEED)."""
    import torch

    calls = [(0, 5), (0, 5), (1, 5), (7, 3), (3, 1), (123457, 2), (0, 3), (0, 0), (2, 1000)]
    seeds = list(dict.fromkeys(edge_values(torch.int64, Allowed(nonnegative=True, high=LARGEST_SEED))
                               + [LARGEST_SEED, LARGEST_SEED - 1]))
    return calls + [(seed, 2) for seed in seeds if seed not in {s for s, _ in calls}]


def _probe_seeded_draw(answer, run):
    """Each seed and n given and what the answer drew: never the numbers a right answer draws
    (``_expect_seeded_draw`` draws them with the same seed, on the judge's side)."""
    import torch

    calls = _calls()
    cases = []
    record = {"cases": cases}
    first = None
    for index, (seed, n) in enumerate(calls):
        # Other cells seeded and drew before (a seed none of the calls use, another each time).
        torch.manual_seed(_SEEDED_BEFORE + index)
        torch.rand(1)  # move the global stream on, as other notebook cells would
        on = f"seed={seed}, n={n}" + (", a second call" if index == 1 else "")
        try:
            got = run(answer, seed, n, on=on)
        except LearnerRaised as raised:
            # The judge decides: a mistake the earlier calls already show is the one to report,
            # not the error a later call led to.
            record["raised"] = later_error(raised, answer, cases)
            break
        cases.append(
            {
                "given": {"seed": seed, "n": n},
                # The seed the probe left torch's global generator at before the call (then one
                # torch.rand(1) drawn): the stream an answer that draws before seeding draws from.
                "stream_before": _SEEDED_BEFORE + index,
                "on": on,
                "got": value_facts(got),
                "seeded_elsewhere": _seeded_elsewhere(seed),
                "global_seeded_unused": n > 0 and _global_seeded_unused(seed),
                # Which seed torch's global generator was last seeded with, and whether that is
                # this call's: what the answer did, not what it should give.
                "seeded_with_seed": torch.initial_seed() == seed % 2**64,
                "same_object_as_first": index == 1 and got is first and got is not None,
            }
        )
        if index == 0:
            first = got
            if isinstance(got, torch.Tensor):
                # Later code may change a result in place: that must not reach the next draw.
                with torch.no_grad():
                    try:
                        torch.Tensor.add_(got, 100.0)
                    except Exception:  # a dtype or device that cannot take it: nothing to change
                        pass
    return record


def _expect_seeded_draw(record):
    """What the reference draws with each recorded seed (on the CPU, every random stream put
    back afterwards), and what torch.rand draws with it (the classic mistake), for the judge."""
    import torch

    from course_utils.env import random_state_preserved

    record = _cases_record(record)
    for case in record["cases"]:
        seed, n = case["given"]["seed"], case["given"]["n"]
        with random_state_preserved(), torch.device("cpu"):
            case["expected"] = value_facts(seeded_draw.reference(seed, n))
        case["uniform"] = torch.rand(n, generator=torch.Generator().manual_seed(seed)).numpy().copy()
        # What torch.randn(n) draws from the stream the probe left before the call (seeded, then
        # moved on by one torch.rand(1)): the numbers of an answer that draws before seeding.
        case["before_seeding"] = {}
        for draw, function in (("torch.randn(n)", torch.randn), ("torch.rand(n)", torch.rand)):
            before = torch.Generator().manual_seed(case["stream_before"])
            torch.rand(1, generator=before)
            case["before_seeding"][draw] = function(n, generator=before).numpy().copy()
    return record


def _judge_seeded_draw(record):
    record = _cases_record(record)
    cases = record["cases"]
    for case in cases:
        got = case["got"]
        if got["kind"] != "tensor" or got["shape"] != case["expected"]["shape"] or "values" not in got:
            problem = tensor_problem(got, case["expected"], what="your draw", on=case["on"]) or MESSAGES(
                "unreadable-draw", on=case["on"], returns=seeded_draw.expects.returns)
            if got["kind"] == "tensor" and case["given"]["n"] == 1 and got["shape"] == []:
                return MESSAGES("squeezed", problem=problem)
            return problem
    if record.get("raised") and len(cases) < 3:  # the calls that tell seeds apart never ran
        return Raised(record["raised"])
    first, again, other = cases[0]["got"]["values"], cases[1]["got"]["values"], cases[2]["got"]["values"]
    if cases[1]["same_object_as_first"]:
        return MESSAGES("same-tensor-every-call")
    if not same_values(first, again, rtol=0, atol=0):
        if _other_generator(cases):
            return _other_generator(cases)
        elsewhere = cases[1]["seeded_elsewhere"]
        if elsewhere:
            return MESSAGES("seeded-other-library", generators=" and ".join(elsewhere))
        if cases[1]["seeded_with_seed"]:
            return MESSAGES("not-from-seeded-stream")
        if cases[0]["seeded_with_seed"]:
            return MESSAGES("seeded-first-call-only")
        seeded_for = sorted({case["given"]["seed"] for case in cases
                             if case["seeded_with_seed"] and case["given"]["seed"] != 0})
        if seeded_for:
            return MESSAGES("seeds-only-some-seeds", seeded_for=", ".join(map(str, seeded_for[:3])))
        return MESSAGES("not-seeded-before-draw")
    if same_values(first, other, rtol=0, atol=0):
        if _other_generator(cases):
            return _other_generator(cases)
        if cases[0]["seeded_with_seed"] and cases[2]["seeded_with_seed"]:
            return MESSAGES("seed-not-followed")
        return MESSAGES("fixed-seed")
    for case in cases:
        got = case["got"]
        if np.size(got["values"]) and same_values(got["values"], case["uniform"]):
            return MESSAGES("rand-not-randn")
        problem = tensor_problem(got, case["expected"], what="your draw", on=case["on"])
        if problem:
            if _other_generator(cases):
                return _other_generator(cases)
            seeded = all(case["seeded_with_seed"] for case in cases)
            return problem + MESSAGES.text("advice-draw-as-it-is" if seeded else "advice-seed-then-draw")
    if record.get("raised"):
        return Raised(record["raised"])
    return None


seeded_draw = Exercise(
    "seeded_draw",
    chapter=CHAPTER,
    title="Same seed, same numbers",
    expects=Function("seeded_draw", ("seed", "n"), returns="a float32 tensor of shape (n,) from torch.randn"),
    probe=_probe_seeded_draw,
    expect=_expect_seeded_draw,
    judge=_judge_seeded_draw,
    reference=seeded_draw,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({"seed-not-manual-seed": "seed() takes 0 positional arguments"}),
    messages=MESSAGES,
)
