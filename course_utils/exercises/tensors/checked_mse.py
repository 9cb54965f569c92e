"""T8 — checked_mse: assert shapes before a key operation.

Engine: applies edges.edge_tensor (every float edge of float32 and float64, as the task allows any
values), edges.generated (float16), an empty and a 0-d pair; hand-written because the task's rule
(stop with an AssertionError or ValueError whose message shows both shapes) is judged from what
the answer raises, which the quick path does not record.
"""

from __future__ import annotations

import torch

from course_utils.exercises.core import Exercise, Function, Raised, later_error
from course_utils.exercises.edges import edge_tensor, generated
from course_utils.exercises.facts import (
    given, same_values, shape_text, tensor_of, tensor_problem, value_facts,
)
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.shape_mentions import mentions, shape_forms
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _calls_in,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
)

MESSAGES = Messages("checked_mse", {
    "mean-over-rows": Message(
        "Your loss divides the sum of squares by the number of rows, {rows}, not by the number of "
        "elements, {numel} ({on}). The mean is over every element: .mean(), or divide by pred.numel().",
        advises=("pred.numel()",)),
    "sum-not-mean": (
        "Your loss is the sum of the squares, not their mean ({on}): divide by the number of elements, "
        "{numel}, or take .mean().{note}"),
    "mse-loss-reduction-note": " F.mse_loss's reduction is \"mean\" (its default), not \"sum\".",
    "wrong-on-second-call": (
        "Your function was right on its first call, not on a second call with the same pred and target: "
        "{problem}"),
    "no-shape-check": (
        "For {on} your function returned {returned}{shown} instead of stopping. Unequal shapes must not "
        "reach the arithmetic, where broadcasting (or a reshape) makes them fit silently: assert "
        "pred.shape == target.shape before computing."),
    "returned-a-tensor": "a tensor",
    "returned-another-type": "a value of type {kind}",
    "of-shape": " of shape {shape}",
    "error-message-shown": " ({message})",
    "error-from-arithmetic": (
        "For {on} your function raised {raised}{shown}; the task asks for an AssertionError (or a "
        "ValueError) from your own check of the shapes, before any arithmetic."),
    "wrong-error-type": (
        "For {on} your function raised {raised}{shown}; the task asks for an AssertionError (or a "
        "ValueError) from your own check of the shapes, before any arithmetic."),
    "assert-without-message": (
        "For {on} your {raised} stopped the code but says nothing. Put both shapes in its message: "
        "assert a.shape == b.shape, f\"{{a.shape}} vs {{b.shape}}\"."),
    "message-lacks-shapes": (
        "For {on} your message was {message!r}: include both shapes, so the person who sees it knows "
        "what to fix."),
    "passed": "Correct: right loss for equal shapes, and a clear stop for unequal ones.",
    "hint-1": "First line: assert pred.shape == target.shape, <a message>.",
    "hint-2": "Put both shapes in the message, e.g. f\"pred {{tuple(pred.shape)}} vs target {{tuple(target.shape)}}\".",
    "hint-3": "Then the loss: ((pred - target) ** 2).mean().",
    "view-of-non-contiguous": (
        "view() needs memory laid out in the order it reads; a transposed pred or target is not. The "
        "loss needs no reshaping: ((pred - target) ** 2).mean(), or reshape()."),
})


# ============================================================================================
# T8 — assert shapes before a key operation
# ============================================================================================
def checked_mse(pred, target):
    assert pred.shape == target.shape, f"pred {tuple(pred.shape)} vs target {tuple(target.shape)}"
    return ((pred - target) ** 2).mean()


# (shape, dtype, layout): equal shapes, one of them non-contiguous ("transposed"), then the
# edges the task allows ("two tensors": any values, any shape): every float edge (±0,
# subnormals, the largest values, squares that overflow, ±inf, nan), generated float16 values,
# an empty pair (whose mean is nan) and a 0-d pair.
_MSE_GOOD = [
    ((4,), torch.float32, "random"),
    ((3, 2), torch.float32, "transposed"),
    ((5, 1), torch.float64, "random"),
    ((2, 2, 2), torch.float32, "random"),
    ((18,), torch.float32, "edges"),
    ((3, 6), torch.float64, "edges"),
    ((3, 4), torch.float16, "generated"),
    ((0, 3), torch.float32, "random"),
    ((), torch.float64, "random"),
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
# The loss's tolerance beyond float32's: a right answer written otherwise (sum / numel) rounds
# otherwise in half precision.
_LOSS_TOLERANCE = {"torch.float16": (1e-2, 1e-3), "torch.bfloat16": (2e-2, 1e-2)}


def _good_pair(shape, dtype, layout, generator, index):
    """pred and target of ``shape`` for one case of ``_MSE_GOOD``."""
    if layout == "edges":  # the arguments 5 apart in the cycle: inf meets inf, max meets -max
        return edge_tensor(shape, dtype), edge_tensor(shape, dtype, shift=5)
    if layout == "generated":
        return generated(shape, dtype, seed=90 + index), generated(shape, dtype, seed=190 + index)

    def make():
        raw = torch.rand(tuple(reversed(shape)) if layout == "transposed" else shape, generator=generator)
        return (raw.T if layout == "transposed" else raw).to(dtype)

    return make(), make()


def _describe(shape, dtype, layout, count) -> str:
    on = f"pred and target of shape {shape_text(list(shape))}, {_dtype_name(dtype)}"
    if layout == "transposed":
        on += ", transposed views (not contiguous)"
    elif layout == "edges":
        on += f", at the edges of {_dtype_name(dtype)} (±0, subnormals, its largest values, ±inf, nan)"
    elif layout == "generated":
        on += ", generated values"
    if count == 0:
        on += " (empty)"
    return on


def _probe_checked_mse(answer, run):
    """What the answer gives (or raises) on each input, and the inputs themselves: never what a
    right answer gives (``_expect_checked_mse`` adds that, on the judge's side)."""
    generator = _generator(9)
    cases = []
    for index, (shape, dtype, layout) in enumerate(_MSE_GOOD):
        pred, target = _good_pair(shape, dtype, layout, generator, index)
        on = _describe(shape, dtype, layout, pred.numel())
        case = {
            "on": on,
            "rows": shape[0] if shape else 1,
            "numel": pred.numel(),
            "given": {"pred": given(pred), "target": given(target)},
        }
        kept_pred, kept_target = pred.clone(), target.clone()
        transposed = layout == "transposed"
        given_pred = pred if transposed else pred.clone()
        given_target = target if transposed else target.clone()
        try:
            case["got"] = value_facts(run(answer, given_pred, given_target, on=on))
            case["pred_after"] = value_facts(given_pred)
            case["target_after"] = value_facts(given_target)
            left = _left_as_it_was(given_pred, kept_pred) and _left_as_it_was(given_target, kept_target)
            case["again"] = (
                value_facts(run(answer, given_pred, given_target, on=on + ", second call"))
                if left else case["got"]
            )
        except LearnerRaised as raised:
            # The judge decides: what the earlier inputs (and the unequal shapes) show already is
            # the mistake to name, before an error that only a later input (0-d, empty) raises.
            raised_later = later_error(raised, answer, cases)
            break
        cases.append(case)
    else:
        raised_later = None
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
    record = {"cases": cases, "refusals": refusals, "calls": _calls_in(answer)}
    if raised_later:
        record["raised"] = raised_later
    return record


def _expect_checked_mse(record):
    """What the reference solution gives on each recorded pred and target of equal shapes, and
    what the sum of squares divided by the number of rows, or not divided at all (the classic
    mistakes), gives, for the judge."""
    for case in record["cases"]:
        pred, target = tensor_of(case["given"]["pred"]), tensor_of(case["given"]["target"])
        case["expected"] = value_facts(checked_mse.reference(pred, target))
        squares = (pred.double() - target.double()) ** 2
        case["rows_mean"] = float(squares.sum() / case["rows"])
        case["sum_of_squares"] = float(squares.sum())
    return record


def _judge_checked_mse(record):
    for case in record["cases"]:
        on = case["on"]
        for name in ("pred", "target"):
            changed = _input_changed(case["given"][name], case[f"{name}_after"], name, on)
            if changed:
                return changed
        got, expected = case["got"], case["expected"]
        rtol, atol = _LOSS_TOLERANCE.get(expected.get("dtype"), (1e-4, 1e-6))
        problem = tensor_problem(got, expected, what="your loss", on=on, rtol=rtol, atol=atol)
        if problem:
            if (
                got["kind"] == "tensor" and got["shape"] == [] and "values" in got
                and case["rows"] != case["numel"]
                and same_values(got["values"], case["rows_mean"], rtol=1e-4)
            ):
                return MESSAGES("mean-over-rows", rows=case["rows"], numel=case["numel"], on=on)
            if (
                got["kind"] == "tensor" and got["shape"] == [] and "values" in got and case["numel"] > 1
                and same_values(got["values"], case["sum_of_squares"], rtol=1e-4)
            ):
                note = MESSAGES.text("mse-loss-reduction-note") if "mse_loss" in record["calls"] else ""
                return MESSAGES("sum-not-mean", numel=case["numel"], on=on, note=note)
            return problem
        problem = tensor_problem(case["again"], expected, what="the second loss", on=on, rtol=rtol, atol=atol)
        if problem:
            return MESSAGES("wrong-on-second-call", problem=problem)
    for refusal in record["refusals"]:
        on = refusal["on"]
        if refusal["raised"] is None:
            returned = refusal["returned"]
            is_tensor = returned["kind"] == "tensor"
            shown = MESSAGES.text("of-shape", shape=shape_text(returned["shape"])) if is_tensor else ""
            kind = (MESSAGES.text("returned-a-tensor") if is_tensor
                    else MESSAGES.text("returned-another-type", kind=returned["kind"]))
            return MESSAGES("no-shape-check", on=on, returned=kind, shown=shown)
        message = refusal["message"]
        mentions_both = bool(message) and mentions(message, refusal["pred_forms"]) and mentions(
            message, refusal["target_forms"])
        if not refusal["asked_type"]:
            shown = MESSAGES.text("error-message-shown", message=message) if message else ""
            # torch's own words: the shapes went unchecked into the arithmetic, which refused them
            unchecked = "must match the size of tensor" in (message or "")
            return MESSAGES("error-from-arithmetic" if unchecked else "wrong-error-type",
                            on=on, raised=refusal["raised"], shown=shown)
        if not message:
            return MESSAGES("assert-without-message", on=on, raised=refusal["raised"])
        if not mentions_both:
            return MESSAGES("message-lacks-shapes", on=on, message=message)
    if record.get("raised"):
        return Raised(record["raised"])
    return None


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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "view-of-non-contiguous": "view size is not compatible with input tensor's size and stride",
    }),
    messages=MESSAGES,
)
