"""Chapter 02, A1 — ``new_parameter``: a parameter is a leaf that requires grad."""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.autograd.common import CHAPTER, _grad_fn_name
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import same_values, shape_text, tensor_problem, value_facts


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


def _probe_new_parameter(answer, run):
    torch.set_default_dtype(torch.float32)  # the check restores the learner's default dtype
    cases, made = [], []
    for index, shape in enumerate(_PARAMETER_SHAPES):
        torch.manual_seed(index)  # the check restores the learner's random state afterwards
        on = f"shape={shape_text(list(shape))}"
        got = run(answer, shape, on=on)
        grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)  # (the check puts the learner's own mode back at the end)
        made.append(got)
        case = {"on": on, "shape": list(shape), "got": value_facts(got),
                "grad_enabled_after": grad_enabled_after}
        if isinstance(got, torch.Tensor):
            case["is_leaf"] = bool(got.is_leaf)
            case["grad_fn"] = _grad_fn_name(got)
        cases.append(case)
    # Twice and in sequence: the same seed again must give the same numbers (torch's generator),
    # and the call after it new numbers, in a new tensor.
    shape = _PARAMETER_SHAPES[_AGAIN_SHAPE_INDEX]
    torch.manual_seed(_AGAIN_SHAPE_INDEX)
    again = run(answer, shape, on=f"shape={shape_text(list(shape))} again, after the same torch.manual_seed")
    following = run(answer, shape, on=f"shape={shape_text(list(shape))} once more, right after")
    first = made[_AGAIN_SHAPE_INDEX]
    return {
        "cases": cases,
        "again": value_facts(again),
        "following": value_facts(following),
        "same_object": bool(again is first or following is again),
    }


def _judge_new_parameter(record):
    cases = record["cases"]
    for case in cases:
        got, on = case["got"], case["on"]
        if got["kind"] == "NoneType":
            return Mistake("returned-none",
                           f"new_parameter returned None (on {on}); end your function with `return`.")
        expected = {"kind": "tensor", "shape": case["shape"], "dtype": "torch.float32"}
        problem = tensor_problem(got, expected, what="your parameter", on=on, check_device=False)
        if problem:
            return problem
        if "values" not in got:
            return Mistake("off-default-device", (
                f"Your parameter is on the {got['device']} device, where its numbers cannot be "
                f"read (on {on}); make it on the default device: torch.randn(shape) * 0.01."
            ))
        if case["grad_fn"] is not None:
            return Mistake("not-a-leaf", (
                f"Your tensor was made by an operation (grad_fn={case['grad_fn']}, on {on}), so "
                "it is not a leaf: backward() leaves its .grad None and sends the gradient to "
                "the hidden tensor it was computed from. Do every operation (scaling, reshaping, "
                "copying) first, then switch tracking on and return that very tensor: "
                "(torch.randn(shape) * 0.01).requires_grad_()."
            ))
        if not got["requires_grad"]:
            return Mistake("requires-grad-never-on", (
                f"Your tensor does not require grad (on {on}): autograd will never compute a "
                "gradient for it, so training would not change it. Switch tracking on after "
                "scaling: .requires_grad_()."
            ))
        if not case["is_leaf"]:
            return Mistake("not-a-leaf",
                           f"Your tensor is not a leaf (on {on}); create it fresh, not from another tensor.")
        if not case["grad_enabled_after"]:
            return Mistake("grad-mode-left-off", (
                f"After new_parameter ran, autograd was switched off for the whole session (on "
                f"{on}): torch.set_grad_enabled(False) stays off, so no later forward pass would "
                "be recorded and backward() would fail. No switch is needed here: scale first, "
                "then .requires_grad_() (or use `with torch.no_grad():`, which switches back on)."
            ))
    # Judge the spread on all the large draws together: thousands of numbers leave no room
    # for a correct answer to fail by bad luck.
    large = [case for case in cases if len(case["got"]["values"].ravel()) >= _ENOUGH_FOR_STATISTICS]
    values = np.concatenate([np.asarray(c["got"]["values"], dtype=np.float64).ravel() for c in large])
    on = "shapes " + ", ".join(shape_text(c["shape"]) for c in large)
    std, mean = float(values.std()), float(values.mean())
    if values.min() == values.max():
        return Mistake("constant-values", (
            f"All your values are equal to {values.min():.4g} (on {on}): a parameter needs "
            "random values, torch.randn(shape) * 0.01, or every unit of a layer learns the same."
        ))
    if values.min() >= 0:
        if values.max() < _STD * 1.01 and 0.004 < mean < 0.006:
            return Mistake("rand-not-randn", (
                f"All your values lie in [0, 0.01) (on {on}): that is torch.rand, which draws "
                "uniformly from [0, 1). Use torch.randn, which draws from a normal distribution "
                "around 0."
            ))
        return Mistake("all-non-negative", (
            f"All your values are ≥ 0 (on {on}); numbers drawn by torch.randn(shape) * 0.01 are "
            "negative about half of the time."
        ))
    if 0.7 < std < 1.3 and abs(mean) < 0.1:
        return Mistake("randn-unscaled", (
            f"Your values have a standard deviation of about {std:.1f} (on {on}): that is "
            "torch.randn unscaled. Multiply by 0.01."
        ))
    if not 0.008 < std < 0.012 or abs(mean) > 0.002:
        return Mistake("wrong-mean-or-spread", (
            f"Your values have mean {mean:.4f} and standard deviation {std:.4f} (on {on}); "
            "expected mean about 0 and standard deviation about 0.01: torch.randn(shape) * 0.01."
        ))
    # A normal distribution puts about 1 draw in 22 beyond two standard deviations; thousands
    # of draws with (almost) none there come from another distribution with the same spread.
    beyond = int(np.sum(np.abs(values - mean) > 2 * _STD))
    if beyond < _TAIL_SHARE_AT_LEAST * values.size:
        return Mistake("not-normal", (
            f"Your values have the right spread, but only {beyond} of {values.size} lie beyond "
            f"±0.02, two standard deviations (on {on}); numbers drawn by torch.randn(shape) * 0.01 "
            "land there about 1 time in 22. They do not come from a normal distribution: draw "
            "with torch.randn(shape)."
        ))
    for case in cases:
        values = np.asarray(case["got"]["values"], dtype=np.float64)
        if values.size and np.abs(values).max() > 0.1:
            return Mistake("values-too-large", (
                f"Some of your values are as large as {np.abs(values).max():.3g} (on {case['on']}); "
                "torch.randn(shape) * 0.01 keeps them near 0."
            ))
    first = cases[_AGAIN_SHAPE_INDEX]
    shape = shape_text(first["shape"])
    if record["same_object"]:
        return Mistake("same-tensor-every-call", (
            f"Calling new_parameter({shape}) again returned the very same tensor object as an "
            "earlier call: two layers built with it would share one weight. Every call must "
            "make a new tensor."
        ))
    again, following = record["again"], record["following"]
    template = {"kind": "tensor", "shape": first["shape"], "dtype": "torch.float32"}
    for got in (again, following):
        problem = tensor_problem(got, template, what="your parameter",
                                 on=f"shape={shape} called again", check_device=False)
        if problem:
            return problem
        if "values" not in got:
            return Mistake("off-default-device",
                           f"Your parameter is on the {got['device']} device when called again (shape={shape}).")
    if not same_values(again["values"], first["got"]["values"], rtol=0, atol=0):
        return Mistake("not-torch-generator", (
            f"After the same torch.manual_seed, new_parameter({shape}) gave different numbers "
            "than the first time: your function does not draw from torch's random generator, "
            "so seeding cannot make a run reproducible. Draw with torch.randn(shape)."
        ))
    if same_values(following["values"], again["values"], rtol=0, atol=0):
        return Mistake("reseeded-every-call", (
            f"Two calls of new_parameter({shape}) in a row returned the same numbers: every "
            "call must draw new ones from torch's generator, without resetting it (no "
            "torch.manual_seed inside the function) or reusing an earlier draw."
        ))
    return None


new_parameter = Exercise(
    "new_parameter",
    chapter=CHAPTER,
    title="A parameter autograd will fill",
    expects=Function("new_parameter", ("shape",), returns="a float32 tensor of that shape that requires grad"),
    probe=_probe_new_parameter,
    judge=_judge_new_parameter,
    reference=new_parameter,
    passed_message=(
        "Correct: a leaf that requires grad, so backward() will put its gradient in .grad."
    ),
    hints=[
        "Two properties matter: requires_grad must be True, and the tensor must be a leaf "
        "(grad_fn is None). Every operation on a tensor that requires grad makes a non-leaf.",
        "So do the arithmetic first, while nothing is tracked, and switch tracking on last.",
        "weight = torch.randn(shape) * 0.01, then weight.requires_grad_() (it returns the tensor).",
    ],
    error_notes=[
        (
            "a leaf Variable that requires grad",
            "an in-place operation (mul_, *=) on a tensor created with requires_grad=True. "
            "Scale first, then call .requires_grad_().",
            "scaled-after-requires-grad",
        ),
        (
            "randn() received an invalid combination of arguments",
            "torch.randn takes the shape as it is, torch.randn(shape), or unpacked, "
            "torch.randn(*shape).",
            "randn-shape-argument",
        ),
    ],
)
