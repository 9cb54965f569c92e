"""Chapter 00's public cases (see ``course_utils.exercises.public``)."""

from __future__ import annotations

import torch

from course_utils.exercises.public import PublicCase, PublicCases, describe


def _no_arguments():
    return ()


def _what_it_reports(answer, arguments, run, on):
    """The environment differs on every machine: public facts are the dict's keys and the type
    of each value; the values themselves are checked by the grader on the learner's machine."""
    returned = run(answer, *arguments, on=on)
    facts = {"returned_type": describe("dict" if isinstance(returned, dict) else type(returned).__name__)}
    if isinstance(returned, dict):
        facts["keys"] = describe(sorted(str(key) for key in returned))
        facts["value_types"] = describe({str(key): _type_name(value) for key, value in sorted(returned.items())})
    return facts


def _type_name(value) -> str:
    """A path may come as a str or a pathlib.Path, as the practice check accepts."""
    import os

    return "str" if isinstance(value, os.PathLike) else type(value).__name__


_VALUES_DIFFER_PER_MACHINE = ("the right values differ on every machine, so a public case "
                              "can only check the keys and the types")
kernel_environment = PublicCases(
    cases=[PublicCase("this kernel", _no_arguments)],
    use=_what_it_reports,
    lets_through={mistake: _VALUES_DIFFER_PER_MACHINE for mistake in (
        "site-packages as torch_dir", "in_virtualenv compares prefix with exec_prefix",
        "the first python on PATH", "resolves the interpreter link",
        "VIRTUAL_ENV decides in_virtualenv", "torch.__file__ as the folder",
        "base_prefix as the environment", "sys.argv[0] as the interpreter", "only the old real_prefix test",
        "torch_dir as the folder's name", "the interpreter's file name only",
        "site.getsitepackages()[0] as the environment")},
)


def _cube_inputs(values, dtype):
    return lambda: (torch.tensor(values, dtype=dtype),)


_SAME_NUMBERS = "the formula gives the same numbers as autograd; only the hidden cases see how they were made"
known_gradient = PublicCases(
    cases=[
        PublicCase("x = [0.5, -2.0, 3.0], float32", _cube_inputs([0.5, -2.0, 3.0], torch.float32)),
        PublicCase("x of shape (2, 2), float64", _cube_inputs([[1.5, 0.0], [-1.0, 4.0]], torch.float64)),
    ],
    lets_through={"runs backward, returns the formula": _SAME_NUMBERS, "3x² written out": _SAME_NUMBERS},
)

_ON_THE_CPU = ("on the CPU, every device is the CPU: computing elsewhere, or not copying back, "
               "shows only on another device, which the hidden cases provide")
device_smoke_test = PublicCases(
    cases=[PublicCase("device 'cpu'", lambda: ("cpu",))],
    lets_through={mistake: _ON_THE_CPU for mistake in (
        "ignores the device", "moves after computing", "forgets the copy back")},
)


def _a_truth_value(answer, arguments, run, on):
    """True or False; a 0-d bool tensor counts as its value, as the practice check accepts."""
    returned = run(answer, *arguments, on=on)
    if isinstance(returned, torch.Tensor) and returned.dtype == torch.bool and returned.numel() == 1:
        returned = bool(returned)
    return {"returned": describe(returned)}


def _draw(seed, n):
    return lambda: (seed, n)


def _draws_once(answer, arguments, run, on):
    """One draw, and whether the same seed gives it again (the global generator left elsewhere)."""
    first = run(answer, *arguments, on=on)
    torch.manual_seed(12345)
    torch.randn(7)
    again = run(answer, *arguments, on=on + ", called again after other draws")
    return {"returned": describe(first), "again": describe(again)}


seeded_draw = PublicCases(
    cases=[PublicCase("seed=3, n=4", _draw(3, 4)), PublicCase("seed=11, n=1", _draw(11, 1))],
    use=_draws_once,
)


def _seeded(seed_offset):
    def draw(seed):
        generator = torch.Generator().manual_seed(seed + seed_offset)
        return torch.rand(3, generator=generator)
    draw.__qualname__ = "a draw that follows its seed"
    return draw


def _always_new():
    generator = torch.Generator().manual_seed(2024)

    def draw(seed):
        return torch.rand(3, generator=generator)  # ignores the seed: new numbers every call
    draw.__qualname__ = "a draw that ignores its seed"
    return draw


def _same_for_every_seed():
    def draw(seed):
        return torch.ones(3)
    draw.__qualname__ = "a draw that gives the same numbers for every seed"
    return draw


def _never_seeded():
    def draw(seed):
        return torch.rand(3)  # torch's global generator, never seeded: new numbers every call
    draw.__qualname__ = "a draw that never seeds torch's generator"
    return draw


def _reordered():
    calls = [0]

    def draw(seed):
        calls[0] += 1
        numbers = torch.rand(4, generator=torch.Generator().manual_seed(seed))
        return torch.roll(numbers, shifts=calls[0])  # the same numbers, in another order each call
    draw.__qualname__ = "a draw that returns its numbers in another order on every call"
    return draw


def _jittered():
    calls = [0]

    def draw(seed):
        calls[0] += 1
        numbers = torch.rand(3, generator=torch.Generator().manual_seed(seed))
        return numbers * (1 + 4e-6 * calls[0])  # differ in the 6th digit from call to call
    draw.__qualname__ = "a draw whose numbers differ in the 6th digit from call to call"
    return draw


seed_check = PublicCases(use=_a_truth_value, cases=[
    PublicCase("a draw that follows its seed", lambda: (_seeded(100),)),
    PublicCase("a draw that ignores its seed", lambda: (_always_new(),)),
    PublicCase("a draw that gives the same numbers for every seed", lambda: (_same_for_every_seed(),)),
    PublicCase("a draw that never seeds torch's generator", lambda: (_never_seeded(),)),
    PublicCase("a draw that returns its numbers in another order on every call", lambda: (_reordered(),)),
    PublicCase("a draw whose numbers differ in the 6th digit from call to call", lambda: (_jittered(),)),
])
