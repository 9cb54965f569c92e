"""T8 — checked_mse: assert shapes before a key operation."""

from __future__ import annotations

import torch

from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import (
    given, same_values, shape_text, tensor_of, tensor_problem, value_facts,
)
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.shape_mentions import mentions, shape_forms
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
)


# ============================================================================================
# T8 — assert shapes before a key operation
# ============================================================================================
def checked_mse(pred, target):
    assert pred.shape == target.shape, f"pred {tuple(pred.shape)} vs target {tuple(target.shape)}"
    return ((pred - target) ** 2).mean()


# (shape, dtype, transposed): equal shapes, one of them non-contiguous.
_MSE_GOOD = [
    ((4,), torch.float32, False),
    ((3, 2), torch.float32, True),
    ((5, 1), torch.float64, False),
    ((2, 2, 2), torch.float32, False),
]
# Unequal shapes, most of which broadcast silently: different numbers of dimensions, the same
# number (so comparing .dim() is not enough), the same first size, the same number of elements.
_MSE_BAD = [
    ((4, 1), (4,)),
    ((3,), (3, 1)),
    ((2, 3), (3, 2)),
    ((3, 1), (1, 3)),
    ((2, 3), (2, 1)),
]


def _probe_checked_mse(answer, run):
    """What the answer gives (or raises) on each input, and the inputs themselves: never what a
    right answer gives (``_expect_checked_mse`` adds that, on the judge's side)."""
    generator = _generator(9)
    cases = []
    for shape, dtype, transposed in _MSE_GOOD:
        def make():
            raw = torch.rand(tuple(reversed(shape)) if transposed else shape, generator=generator)
            return (raw.T if transposed else raw).to(dtype)

        pred, target = make(), make()
        on = f"pred and target of shape {shape_text(list(shape))}, {_dtype_name(dtype)}"
        if transposed:
            on += ", transposed views (not contiguous)"
        case = {
            "on": on,
            "rows": shape[0],
            "numel": pred.numel(),
            "given": {"pred": given(pred), "target": given(target)},
        }
        kept_pred, kept_target = pred.clone(), target.clone()
        given_pred = pred if transposed else pred.clone()
        given_target = target if transposed else target.clone()
        case["got"] = value_facts(run(answer, given_pred, given_target, on=on))
        case["pred_after"] = value_facts(given_pred)
        case["target_after"] = value_facts(given_target)
        left = _left_as_it_was(given_pred, kept_pred) and _left_as_it_was(given_target, kept_target)
        case["again"] = (
            value_facts(run(answer, given_pred, given_target, on=on + ", second call"))
            if left else case["got"]
        )
        cases.append(case)
    refusals = []
    for pred_shape, target_shape in _MSE_BAD:
        pred, target = torch.rand(pred_shape, generator=generator), torch.rand(target_shape, generator=generator)
        on = f"pred {shape_text(list(pred_shape))} and target {shape_text(list(target_shape))}"
        try:
            returned = answer(pred, target)  # here raising is the right answer: record it
        except NotImplementedError as error:
            raise LearnerRaised(error, on) from None
        except Exception as error:
            try:
                message = str(error)[:300]
            except Exception:  # an exception whose __str__ is broken
                message = ""
            refusals.append(
                {"on": on, "raised": type(error).__name__, "message": message,
                 "asked_type": isinstance(error, (AssertionError, ValueError)),
                 "pred_forms": shape_forms(pred_shape), "target_forms": shape_forms(target_shape)}
            )
        else:
            refusals.append({"on": on, "raised": None, "returned": value_facts(returned)})
    return {"cases": cases, "refusals": refusals}


def _expect_checked_mse(record):
    """What the reference solution gives on each recorded pred and target of equal shapes, and
    what the sum of squares divided by the number of rows (the classic mistake) gives, for the
    judge."""
    for case in record["cases"]:
        pred, target = tensor_of(case["given"]["pred"]), tensor_of(case["given"]["target"])
        case["expected"] = value_facts(checked_mse.reference(pred, target))
        squares = (pred.double() - target.double()) ** 2
        case["rows_mean"] = float(squares.sum() / case["rows"])
    return record


def _judge_checked_mse(record):
    for case in record["cases"]:
        on = case["on"]
        for name in ("pred", "target"):
            changed = _input_changed(case["given"][name], case[f"{name}_after"], name, on)
            if changed:
                return changed
        got, expected = case["got"], case["expected"]
        problem = tensor_problem(got, expected, what="your loss", on=on, rtol=1e-4)
        if problem:
            if (
                got["kind"] == "tensor" and got["shape"] == [] and "values" in got
                and case["rows"] != case["numel"]
                and same_values(got["values"], case["rows_mean"], rtol=1e-4)
            ):
                return Mistake("mean-over-rows", (
                    f"Your loss divides the sum of squares by the number of rows, "
                    f"{case['rows']}, not by the number of elements, {case['numel']} ({on}). "
                    "The mean is over every element: .mean(), or divide by pred.numel()."
                ))
            return problem
        problem = tensor_problem(case["again"], expected, what="the second loss", on=on, rtol=1e-4)
        if problem:
            return Mistake("wrong-on-second-call", (
                f"Your function was right on its first call, not on a second call with the same pred and target: {problem}"
            ))
    for refusal in record["refusals"]:
        on = refusal["on"]
        if refusal["raised"] is None:
            returned = refusal["returned"]
            shown = f" of shape {shape_text(returned['shape'])}" if returned["kind"] == "tensor" else ""
            return Mistake("no-shape-check", (
                f"For {on} your function returned {_kind_text(returned)}{shown} instead of "
                "stopping. Unequal shapes must not reach the arithmetic, where broadcasting (or "
                "a reshape) makes them fit silently: assert pred.shape == target.shape before "
                "computing."
            ))
        message = refusal["message"]
        mentions_both = bool(message) and mentions(message, refusal["pred_forms"]) and mentions(
            message, refusal["target_forms"])
        if not refusal["asked_type"]:
            shown = f" ({message})" if message else ""
            # torch's own words: the shapes went unchecked into the arithmetic, which refused them
            unchecked = "must match the size of tensor" in (message or "")
            return Mistake("error-from-arithmetic" if unchecked else "wrong-error-type", (
                f"For {on} your function raised {refusal['raised']}{shown}; the task asks for "
                "an AssertionError (or a ValueError) from your own check of the shapes, before "
                "any arithmetic."
            ))
        if not message:
            return Mistake("assert-without-message", (
                f"For {on} your {refusal['raised']} stopped the code but says nothing. Put both "
                "shapes in its message: assert a.shape == b.shape, f\"{a.shape} vs {b.shape}\"."
            ))
        if not mentions_both:
            return Mistake("message-lacks-shapes", (
                f"For {on} your message was {message!r}: include both shapes, so the person who "
                "sees it knows what to fix."
            ))
    return None


def _kind_text(facts: dict) -> str:
    return "a tensor" if facts["kind"] == "tensor" else f"a value of type {facts['kind']}"


checked_mse = Exercise(
    "checked_mse",
    chapter=CHAPTER,
    title="Assert shapes before the loss",
    expects=Function("checked_mse", ("pred", "target"),
                     returns="a 0-dim tensor, the mean squared error (and an AssertionError when the shapes differ)"),
    probe=_probe_checked_mse,
    expect=_expect_checked_mse,
    judge=_judge_checked_mse,
    reference=checked_mse,
    passed_message="Correct: right loss for equal shapes, and a clear stop for unequal ones.",
    hints=[
        "First line: assert pred.shape == target.shape, <a message>.",
        "Put both shapes in the message, e.g. f\"pred {tuple(pred.shape)} vs target {tuple(target.shape)}\".",
        "Then the loss: ((pred - target) ** 2).mean().",
    ],
    error_notes=[
        (
            "view size is not compatible with input tensor's size and stride",
            "view() needs memory laid out in the order it reads; a transposed pred or target "
            "is not. The loss needs no reshaping: ((pred - target) ** 2).mean(), or reshape().",
            "view-of-non-contiguous",
        ),
    ],
)
