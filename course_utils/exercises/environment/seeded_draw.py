"""E7 — seeded_draw: same seed, same numbers."""

from __future__ import annotations

import random

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.environment.common import CHAPTER, _cases_record
from course_utils.exercises.facts import same_values, tensor_problem, value_facts
from course_utils.exercises.running import LearnerRaised


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
    """The verdict for an answer that seeds torch's global generator but draws from another one."""
    for case in cases:
        if case.get("global_seeded_unused"):
            return Mistake("drew-from-another-generator", (
                f"Your function seeds torch's global generator with torch.manual_seed(seed), but "
                f"draws nothing from it (on {case['on']}): your numbers come from another "
                "generator, which torch.manual_seed does not touch (a new torch.Generator() "
                "starts from its own fixed seed, whatever seed you set globally). Draw from the "
                "seeded one, torch.randn(n), or seed your own with that seed: "
                "torch.randn(n, generator=torch.Generator().manual_seed(seed))."
            ))
    return None


def _probe_seeded_draw(answer, run):
    """Each seed and n given and what the answer drew: never the numbers a right answer draws
    (``_expect_seeded_draw`` draws them with the same seed, on the judge's side)."""
    import torch

    calls = [(0, 5), (0, 5), (1, 5), (7, 3), (3, 1), (123457, 2)]
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
                "on": on,
                "got": value_facts(got),
                "seeded_elsewhere": _seeded_elsewhere(seed),
                "global_seeded_unused": _global_seeded_unused(seed),
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
    return record


def _judge_seeded_draw(record):
    record = _cases_record(record)
    cases = record["cases"]
    for case in cases:
        got = case["got"]
        if got["kind"] != "tensor" or got["shape"] != case["expected"]["shape"] or "values" not in got:
            problem = tensor_problem(got, case["expected"], what="your draw", on=case["on"]) or Mistake(
                "unreadable-draw",
                f"The check could not read the numbers of your draw (on {case['on']}); return "
                f"{seeded_draw.expects.returns}.",
            )
            if got["kind"] == "tensor" and case["given"]["n"] == 1 and got["shape"] == []:
                return Mistake("squeezed", problem + (
                    " torch.randn(1) has shape (1,); something in your function dropped that dimension."
                ))
            return problem
    if record.get("raised") and len(cases) < 3:  # the calls that tell seeds apart never ran
        return Raised(record["raised"])
    first, again, other = cases[0]["got"]["values"], cases[1]["got"]["values"], cases[2]["got"]["values"]
    if cases[1]["same_object_as_first"]:
        return Mistake("same-tensor-every-call", (
            "Your second call with seed=0 returned the very tensor object the first call "
            "returned, so a change made to one result (the check added 100 to the first) shows "
            "up in the other. Draw fresh numbers on every call."
        ))
    if not same_values(first, again, rtol=0, atol=0):
        if _other_generator(cases):
            return _other_generator(cases)
        elsewhere = cases[1]["seeded_elsewhere"]
        mistake, note = "not-seeded-before-draw", ""
        if elsewhere:
            mistake, note = "seeded-other-library", (
                f" Your function left {' and '.join(elsewhere)} generator seeded with 0, but "
                "those do not seed torch: torch.randn draws from torch's own generator."
            )
        return Mistake(mistake, (
            "Two calls with seed=0 gave different numbers (something ran in between, as other "
            "cells would). Seed torch inside the function, right before drawing, with "
            f"torch.manual_seed(seed).{note}"
        ))
    if same_values(first, other, rtol=0, atol=0):
        if _other_generator(cases):
            return _other_generator(cases)
        return Mistake("fixed-seed", (
            "seed=0 and seed=1 gave the same numbers: your function ignores its seed argument. "
            "Pass `seed` to torch.manual_seed, not a fixed number."
        ))
    for case in cases:
        got = case["got"]
        if same_values(got["values"], case["uniform"]):
            return Mistake("rand-not-randn", (
                "Your numbers repeat, but they are torch.rand's (uniform in [0, 1)); the task "
                "asks for torch.randn (normal, mean 0, std 1)."
            ))
        problem = tensor_problem(got, case["expected"], what="your draw", on=case["on"])
        if problem:
            if _other_generator(cases):
                return _other_generator(cases)
            return problem + " Seed with torch.manual_seed(seed), then call torch.randn(n)."
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
    passed_message="Correct: the same seed gives the same numbers, a new seed new numbers.",
    hints=[
        "torch.manual_seed(seed) resets torch's random stream on the CPU (and on CUDA devices).",
        "Seed first, then draw: torch.randn(n).",
    ],
    error_notes=[
        (
            "seed() takes 0 positional arguments",
            "torch.seed() sets a fresh, random seed. The function that sets yours is "
            "torch.manual_seed(seed).",
            "seed-not-manual-seed",
        ),
    ],
)
