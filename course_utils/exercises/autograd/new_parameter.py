"""Chapter 02, A1 — ``new_parameter``: a parameter is a leaf that requires grad.

Engine: applies states.MODULE_STATES["no-grad"] (called under torch.no_grad(), as when a model
is built inside one) and compares with the reference run on the judge's side after the same
torch.manual_seed (``expect``): the very numbers torch.randn(shape) * 0.01 draws, and the state it
leaves torch's generator in. Hand-written because its named mistakes read the statistics of the
draws (spread, tails, signs) and the objects returned by successive calls.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from course_utils.exercises.autograd.common import CHAPTER, _grad_fn_name
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import same_values, shape_text, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.states import MODULE_STATES

MESSAGES = Messages("new_parameter", {
    "returned-none": "new_parameter returned None (on {on}); end your function with `return`.",
    "off-default-device": (
        "Your parameter is on the {device} device, where its numbers cannot be "
        "read (on {on}); make it on the default device: torch.randn(shape) * 0.01."),
    "off-default-device-again": "Your parameter is on the {device} device when called again (shape={shape}).",
    "not-a-leaf": (
        "Your tensor was made by an operation (grad_fn={grad_fn}, on {on}), so "
        "it is not a leaf: backward() leaves its .grad None and sends the gradient to "
        "the hidden tensor it was computed from. Do every operation (scaling, reshaping, "
        "copying) first, then switch tracking on and return that very tensor: "
        "(torch.randn(shape) * 0.01).requires_grad_()."),
    "not-a-leaf-made-from-another": "Your tensor is not a leaf (on {on}); create it fresh, not from another tensor.",
    "requires-grad-never-on": (
        "Your tensor does not require grad (on {on}): autograd will never compute a "
        "gradient for it, so training would not change it. Switch tracking on after "
        "scaling: .requires_grad_()."),
    "grad-mode-left-off": (
        "After new_parameter ran, autograd was switched off for the whole session (on "
        "{on}): torch.set_grad_enabled(False) stays off, so no later forward pass would "
        "be recorded and backward() would fail. No switch is needed here: scale first, "
        "then .requires_grad_() (or use `with torch.no_grad():`, which switches back on)."),
    "grad-mode-switched-on": Message(
        "new_parameter was called with autograd switched off (on {on}), and left it switched on "
        "for the whole session: torch.set_grad_enabled(True) does not put back the mode it found. "
        "No switch is needed here: scale first, then .requires_grad_() (or use "
        "`with torch.no_grad():`, which puts back the mode it found).",
        advises=("torch.no_grad()",)),
    "constant-values": (
        "All your values are equal to {value:.4g} (on {on}): a parameter needs "
        "random values, torch.randn(shape) * 0.01, or every unit of a layer learns the same."),
    "rand-not-randn": (
        "All your values lie in [0, 0.01) (on {on}): that is torch.rand, which draws "
        "uniformly from [0, 1). Use torch.randn, which draws from a normal distribution "
        "around 0."),
    "all-non-negative": (
        "All your values are ≥ 0 (on {on}); numbers drawn by torch.randn(shape) * 0.01 are "
        "negative about half of the time."),
    "randn-unscaled": (
        "Your values have a standard deviation of about {std:.1f} (on {on}): that is "
        "torch.randn unscaled. Multiply by 0.01."),
    "wrong-mean-or-spread": (
        "Your values have mean {mean:.4f} and standard deviation {std:.4f} (on {on}); "
        "expected mean about 0 and standard deviation about 0.01: torch.randn(shape) * 0.01."),
    "not-normal": (
        "Your values have the right spread, but only {beyond} of {size} lie beyond "
        "±0.02, two standard deviations (on {on}); numbers drawn by torch.randn(shape) * 0.01 "
        "land there about 1 time in 22. They do not come from a normal distribution: draw "
        "with torch.randn(shape)."),
    "values-too-large": (
        "Some of your values are as large as {largest:.3g} (on {on}); "
        "torch.randn(shape) * 0.01 keeps them near 0."),
    "not-randn-numbers": (
        "After torch.manual_seed({seed}), new_parameter({shape}) gave other numbers than "
        "torch.randn({shape}) * 0.01 draws after the same seed (on {on}): {count} of {size} differ; "
        "first at index {index}: got {got:.6g}, expected {expected:.6g}. The spread alone is not "
        "the task: draw exactly torch.randn(shape), in float32, and only multiply it by 0.01 "
        "(no clamping, rescaling, reordering or repeating)."),
    "generator-state-differs": (
        "After torch.manual_seed({seed}), new_parameter({shape}) left torch's random generator in "
        "another state than torch.randn({shape}) * 0.01 leaves it (on {on}): your function drew "
        "more or fewer numbers than the shape needs, or reseeded the generator, so every draw "
        "the caller makes afterwards differs. Draw once: torch.randn(shape) * 0.01."),
    "same-tensor-every-call": (
        "Calling new_parameter({shape}) again returned the very same tensor object as an "
        "earlier call: two layers built with it would share one weight. Every call must "
        "make a new tensor."),
    "not-torch-generator": Message(
        "After the same torch.manual_seed, new_parameter({shape}) gave different numbers "
        "than the first time: your function does not draw from torch's random generator, "
        "so seeding cannot make a run reproducible. Draw with torch.randn(shape).",
        advises=("torch.randn(shape)",)),
    "reseeds-generator": (
        "After the same torch.manual_seed, new_parameter({shape}) gave different numbers "
        "than the first time: your function reseeded torch's random generator (its seed was "
        "{seed_after} afterwards, not the caller's {seed}), as torch.seed() or a "
        "torch.manual_seed inside it do. Then the caller's seed no longer decides the draws, and "
        "a run cannot be repeated. Leave the generator alone: torch.randn(shape) * 0.01 draws "
        "new numbers on every call by itself."),
    "reseeded-every-call": (
        "Two calls of new_parameter({shape}) in a row returned the same numbers: every "
        "call must draw new ones from torch's generator, without resetting it (no "
        "torch.manual_seed inside the function) or reusing an earlier draw."),
    "passed": "Correct: a leaf that requires grad, so backward() will put its gradient in .grad.",
    "hint-1": (
        "Two properties matter: requires_grad must be True, and the tensor must be a leaf "
        "(grad_fn is None). Every operation on a tensor that requires grad makes a non-leaf."),
    "hint-2": "So do the arithmetic first, while nothing is tracked, and switch tracking on last.",
    "hint-3": "weight = torch.randn(shape) * 0.01, then weight.requires_grad_() (it returns the tensor).",
    "scaled-after-requires-grad": (
        "an in-place operation (mul_, *=) on a tensor created with requires_grad=True. "
        "Scale first, then call .requires_grad_()."),
    "retain-grad-of-a-non-leaf": (
        "retain_grad() on the tensor you return: it keeps the .grad of a tensor that is not a "
        "leaf, and needing it shows that yours is not one (an operation made it, so it has a "
        "grad_fn and the gradient flows on to the tensor it was computed from). The check also "
        "calls your function under torch.no_grad(), as when a model is built inside one: there "
        "the operation records nothing, its result does not require grad, and retain_grad() "
        "refuses it. Return a leaf itself: scale first, switch tracking on last, "
        "(torch.randn(shape) * 0.01).requires_grad_()."),
    "randn-shape-argument": (
        "torch.randn takes the shape as it is, torch.randn(shape), or unpacked, "
        "torch.randn(*shape)."),
})


# ============================================================================================
# A1 — a parameter is a leaf that requires grad
# ============================================================================================
def new_parameter(shape):
    weight = torch.randn(shape) * 0.01
    return weight.requires_grad_(True)


_PARAMETER_SHAPES = [(256,), (64, 32), (4, 5, 6), (3,)]
_STD = 0.01
_ENOUGH_FOR_STATISTICS = 100
_TAIL_SHARE_AT_LEAST = 0.02  # a normal draw: 4.55 %; 2 424 draws put a miss 6 sigma away
_AGAIN_SHAPE_INDEX = 1  # (64, 32): called again after the same seed, then once more
_NO_GRAD = MODULE_STATES["no-grad"]
_NO_GRAD_SHAPE, _NO_GRAD_SEED = (8, 4), 11


def _generator_state() -> str:
    """torch's global generator state, as a short digest (plain data, no numbers of it)."""
    return hashlib.sha256(torch.random.get_rng_state().numpy().tobytes()).hexdigest()


def _probe_new_parameter(answer, run):
    torch.set_default_dtype(torch.float32)  # the check restores the learner's default dtype
    cases, made = [], []
    calls = [(index, shape, None) for index, shape in enumerate(_PARAMETER_SHAPES)]
    calls.append((_NO_GRAD_SEED, _NO_GRAD_SHAPE, _NO_GRAD))  # as when a model is built under no_grad
    for seed, shape, state in calls:
        torch.manual_seed(seed)  # the check restores the learner's random state afterwards
        on = f"shape={shape_text(list(shape))}" + (f", {state.on}" if state is not None else "")
        with state.put(torch.nn.Module()) if state is not None else torch.enable_grad():
            grad_enabled_before = torch.is_grad_enabled()
            got = run(answer, shape, on=on)
            grad_enabled_after = torch.is_grad_enabled()
        generator_after = _generator_state()
        torch.set_grad_enabled(True)  # (the check puts the learner's own mode back at the end)
        if state is None:
            made.append(got)
        case = {"on": on, "shape": list(shape), "seed": seed, "got": value_facts(got),
                "grad_enabled_before": grad_enabled_before, "grad_enabled_after": grad_enabled_after,
                "generator_after": generator_after}
        if isinstance(got, torch.Tensor):
            case["is_leaf"] = bool(got.is_leaf)
            case["grad_fn"] = _grad_fn_name(got)
        cases.append(case)
    # Twice and in sequence: the same seed again must give the same numbers (torch's generator),
    # and the call after it new numbers, in a new tensor.
    shape = _PARAMETER_SHAPES[_AGAIN_SHAPE_INDEX]
    torch.manual_seed(_AGAIN_SHAPE_INDEX)
    again = run(answer, shape, on=f"shape={shape_text(list(shape))} again, after the same torch.manual_seed")
    seed_after = torch.initial_seed()  # a reseeding inside (torch.seed()) shows here
    following = run(answer, shape, on=f"shape={shape_text(list(shape))} once more, right after")
    first = made[_AGAIN_SHAPE_INDEX]
    return {
        "cases": cases,
        "again": value_facts(again),
        "following": value_facts(following),
        "same_object": bool(again is first or following is again),
        "seed_after": int(seed_after),
    }


def _expect_new_parameter(record):
    """What the reference draws after each case's seed, and the generator state it leaves,
    under a forked random state: the judge's process keeps its own stream."""
    reference = new_parameter.reference
    for case in record["cases"]:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(case["seed"])
            case["expected"] = value_facts(reference(tuple(case["shape"])))["values"]
            case["expected_generator"] = _generator_state()
    return record


def _numbers_problem(case):
    """The reference's numbers after the same seed, and the generator state it leaves."""
    got, expected = np.asarray(case["got"]["values"], dtype=np.float64), case["expected"]
    shape, on = shape_text(case["shape"]), case["on"]
    if got.shape == expected.shape:
        close = np.isclose(got, expected, rtol=1e-5, atol=1e-8, equal_nan=True)
        if not close.all():
            index = tuple(int(i) for i in np.argwhere(~close)[0])
            return MESSAGES("not-randn-numbers", seed=case["seed"], shape=shape, on=on,
                            count=int(np.count_nonzero(~close)), size=close.size, index=index,
                            got=float(got[index]), expected=float(expected[index]))
    if case["generator_after"] != case["expected_generator"]:
        return MESSAGES("generator-state-differs", seed=case["seed"], shape=shape, on=on)
    return None


def _judge_new_parameter(record):
    cases = record["cases"]
    for case in cases:
        got, on = case["got"], case["on"]
        if got["kind"] == "NoneType":
            return MESSAGES("returned-none", on=on)
        expected = {"kind": "tensor", "shape": case["shape"], "dtype": "torch.float32"}
        problem = tensor_problem(got, expected, what="your parameter", on=on, check_device=False)
        if problem:
            return problem
        if "values" not in got:
            return MESSAGES("off-default-device", device=got["device"], on=on)
        if case["grad_fn"] is not None:
            return MESSAGES("not-a-leaf", grad_fn=case["grad_fn"], on=on)
        if not got["requires_grad"]:
            return MESSAGES("requires-grad-never-on", on=on)
        if not case["is_leaf"]:
            return Mistake("not-a-leaf", MESSAGES.text("not-a-leaf-made-from-another", on=on))
        if case["grad_enabled_after"] != case["grad_enabled_before"]:
            return MESSAGES("grad-mode-left-off" if case["grad_enabled_before"] else "grad-mode-switched-on",
                            on=on)
    # Judge the spread on all the large draws together: thousands of numbers leave no room
    # for a correct answer to fail by bad luck.
    large = [case for case in cases if len(case["got"]["values"].ravel()) >= _ENOUGH_FOR_STATISTICS]
    values = np.concatenate([np.asarray(c["got"]["values"], dtype=np.float64).ravel() for c in large])
    on = "shapes " + ", ".join(shape_text(c["shape"]) for c in large)
    std, mean = float(values.std()), float(values.mean())
    if values.min() == values.max():
        return MESSAGES("constant-values", value=float(values.min()), on=on)
    if values.min() >= 0:
        if values.max() < _STD * 1.01 and 0.004 < mean < 0.006:
            return MESSAGES("rand-not-randn", on=on)
        return MESSAGES("all-non-negative", on=on)
    if 0.7 < std < 1.3 and abs(mean) < 0.1:
        return MESSAGES("randn-unscaled", std=std, on=on)
    if not 0.008 < std < 0.012 or abs(mean) > 0.002:
        return MESSAGES("wrong-mean-or-spread", mean=mean, std=std, on=on)
    # A normal distribution puts about 1 draw in 22 beyond two standard deviations; thousands
    # of draws with (almost) none there come from another distribution with the same spread.
    beyond = int(np.sum(np.abs(values - mean) > 2 * _STD))
    if beyond < _TAIL_SHARE_AT_LEAST * values.size:
        return MESSAGES("not-normal", beyond=beyond, size=values.size, on=on)
    for case in cases:
        values = np.asarray(case["got"]["values"], dtype=np.float64)
        if values.size and np.abs(values).max() > 0.1:
            return MESSAGES("values-too-large", largest=float(np.abs(values).max()), on=case["on"])
    first = cases[_AGAIN_SHAPE_INDEX]
    shape = shape_text(first["shape"])
    if record["same_object"]:
        return MESSAGES("same-tensor-every-call", shape=shape)
    again, following = record["again"], record["following"]
    template = {"kind": "tensor", "shape": first["shape"], "dtype": "torch.float32"}
    for got in (again, following):
        problem = tensor_problem(got, template, what="your parameter",
                                 on=f"shape={shape} called again", check_device=False)
        if problem:
            return problem
        if "values" not in got:
            return Mistake("off-default-device", MESSAGES.text("off-default-device-again",
                                                               device=got["device"], shape=shape))
    if not same_values(again["values"], first["got"]["values"], rtol=0, atol=0):
        if record["seed_after"] != _AGAIN_SHAPE_INDEX:
            return MESSAGES("reseeds-generator", shape=shape, seed_after=record["seed_after"],
                            seed=_AGAIN_SHAPE_INDEX)
        return MESSAGES("not-torch-generator", shape=shape)
    if same_values(following["values"], again["values"], rtol=0, atol=0):
        return MESSAGES("reseeded-every-call", shape=shape)
    # The numbers themselves: those torch.randn(shape) * 0.01 draws after the same seed.
    for case in cases:
        problem = _numbers_problem(case)
        if problem:
            return problem
    return None


new_parameter = Exercise(
    "new_parameter",
    chapter=CHAPTER,
    title="A parameter autograd will fill",
    expects=Function("new_parameter", ("shape",), returns="a float32 tensor of that shape that requires grad"),
    probe=_probe_new_parameter,
    judge=_judge_new_parameter,
    expect=_expect_new_parameter,
    reference=new_parameter,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "scaled-after-requires-grad": "a leaf Variable that requires grad",
        "randn-shape-argument": "randn() received an invalid combination of arguments",
        "retain-grad-of-a-non-leaf": "can't retain_grad on Tensor that has requires_grad=False",
    }),
    messages=MESSAGES,
)
