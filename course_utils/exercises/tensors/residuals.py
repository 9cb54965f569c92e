"""T7 — residuals: per-sample errors without the (N, N) bug.

Engine: applies edges.edge_tensor (the edges of float32, float64 and int64, pred and target five
places apart in the cycle: inf meets inf, the largest values meet their negation), an empty
batch and a batch of one in other dtypes, and bfloat16, float16 and int32 inputs (the task
allows any dtype both share); hand-written because the task's rule (no (N, N) tensor on the
way) is watched with a TorchFunctionMode while the answer runs.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.edges import edge_tensor
from course_utils.exercises.facts import given, same_values, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _calls_in,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
)


MESSAGES = Messages("residuals", {
    "squeezed-pred-in-place": "{changed} (pred.squeeze(1), without the underscore, returns a new tensor.)",
    "broadcast-every-pair": Message(
        "Your result has shape ({n}, {n}); expected ({n},) ({on}). The classic broadcasting bug: a ({n}, 1) "
        "tensor met a ({n},) tensor and broadcast to ({n}, {n}), every prediction minus every target. Drop "
        "pred's last dimension first: pred.squeeze(1), or pred[:, 0].",
        advises=("pred.squeeze(1)",)),
    "every-pair-on-the-way": (
        "{problem} On the way your function built the ({n}, {n}) tensor of every pair: pred ({n}, 1) minus "
        "target ({n},) broadcasts to every prediction minus every target. Make pred (N,) first: "
        "pred.squeeze(1) or pred[:, 0]."),
    "every-pair-kept-a-part": (
        "Your numbers are right, but on the way your function built the ({n}, {n}) tensor of every "
        "prediction minus every target ({on}) and kept only a part of it (its diagonal, say). For a batch "
        "of 100,000 samples that is 10^10 numbers. Make pred (N,) first, pred.squeeze(1) or pred[:, 0], "
        "and subtract once."),
    "column-result": "Your result has shape ({n}, 1); expected ({n},) ({on}). One value per sample, in one dimension.",
    "lost-sample-dim": (
        "Your result has shape (); expected (1,) ({on}): with one sample the sample dimension "
        "disappeared.{note}"),
    "squeeze-all": (
        "Your result has shape (); expected (1,) ({on}): with one sample the sample dimension "
        "disappeared.{note}"),
    "squeeze-all-note": (
        " squeeze() with no argument drops every size-1 dimension, the sample one too when N = 1: name "
        "the dimension, squeeze(1)."),
    "opposite-sign": "Your result has the opposite sign ({on}): it is target - pred; the task asks for pred - target.",
    "absolute-errors": (
        "Your result holds the absolute errors |pred - target| ({on}); the task asks for pred - target, "
        "with its sign."),
    "squared-errors": "Your result holds the squared errors ({on}); the task asks for pred - target itself.",
    "wrong-on-second-call": (
        "Your function was right on its first call, not on a second call with the same pred and target: "
        "{problem}"),
    "passed": "Correct: one error per sample, shape (N,).",
    "hint-1": "Print both shapes: pred is (N, 1), target is (N,). What does broadcasting make of them?",
    "hint-2": "Make both (N,) before subtracting: pred.squeeze(1) or pred[:, 0] (or pred.view(-1)).",
    "loop-over-empty-batch": (
        "an empty batch (N = 0) gives a loop over the samples nothing to collect, and torch.stack refuses "
        "an empty list. pred.squeeze(1) - target handles every N, 0 too."),
    "numpy-has-no-bfloat16": (
        "NumPy has no bfloat16, so a tensor of that dtype cannot go through .numpy(). Stay in torch, which "
        "works for every dtype: pred.squeeze(1) - target."),
})


def residuals(pred, target):
    return pred.squeeze(1) - target


# (N, dtype, pred non-contiguous, values): then the edges the task allows (any dtype both
# share, any values): an empty batch and a batch of one in other dtypes, bfloat16 (which NumPy
# has not), float16 and int32, and the classic edges of float32, float64 and int64
# (edges.edge_tensor), where a detour through another dtype or a cleaning of nan and inf shows.
_RESIDUAL_CASES = [
    (4, torch.float32, False, "random"),
    (1, torch.float32, False, "random"),
    (7, torch.float64, False, "random"),
    (3, torch.float32, True, "random"),
    (0, torch.float32, False, "random"),
    (5, torch.float64, False, "random"),
    (0, torch.float64, False, "random"),
    (1, torch.int64, False, "random"),
    (4, torch.bfloat16, False, "random"),
    (4, torch.float16, True, "random"),
    (5, torch.int32, False, "random"),
    (18, torch.float32, False, "edges"),
    (18, torch.float64, True, "edges"),
    (11, torch.int64, False, "edges"),
]


def _residual_inputs(n, dtype, strided, values, generator):
    """pred (N, 1), a column of a wider tensor where ``strided``, and target (N,)."""
    if values == "edges":  # five places apart in the cycle of edges
        pred = edge_tensor((n, 1), dtype)
        if strided:
            wide = torch.zeros(n, 3, dtype=dtype)
            wide[:, 1:2] = pred
            pred = wide[:, 1:2]
        return pred, edge_tensor((n,), dtype, shift=5)

    def draw(*shape):
        raw = torch.rand(*shape, generator=generator)
        return raw.to(dtype) if dtype.is_floating_point else (raw * 20 - 10).round().to(dtype)

    pred = draw(n, 3)[:, 1:2] if strided else draw(n, 1)
    return pred, draw(n)


_SQUARES_KEPT = 32  # (N, N) tensors recorded per input: an answer makes one or two


class _SquareWatch(torch.overrides.TorchFunctionMode):
    """The (N, N) floating tensors the torch calls inside it made (``squares``: their values),
    so that the judge's side can tell whether one of them was the tensor of every pred minus
    every target, even when the answer keeps only a part of it (``_every_pair_built``). It
    computes no such tensor itself: that is what the classic mistake gives."""

    def __init__(self, n, device):
        super().__init__()
        self.n, self.device = n, device
        self.squares = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for value in result if isinstance(result, (tuple, list)) else (result,):
            if (len(self.squares) < _SQUARES_KEPT and isinstance(value, torch.Tensor)
                    and tuple(value.shape) == (self.n, self.n) and value.device == self.device
                    and value.layout == torch.strided and (value.is_floating_point() or value.is_complex())):
                try:
                    self.squares.append(value_facts(value)["values"])  # (read past every mode)
                except Exception:  # a tensor NumPy cannot read (a conjugate view): not the one
                    pass
        return result


def _every_pair_built(squares, pairs) -> int:
    """The number of elements of the first of ``squares`` that is ``pairs`` (or its negative,
    or either transposed), compared in ``pairs``'s dtype; 0 if none is."""
    if pairs.dtype in (torch.bfloat16, torch.float16):  # (which NumPy reads as float32)
        pairs = pairs.float()
    pairs = pairs.numpy()
    forms = (pairs, -pairs, pairs.T, -pairs.T)
    with np.errstate(all="ignore"):  # (at the edges of a dtype, inf - inf and overflows)
        for values in squares:
            data = np.asarray(values).astype(pairs.dtype)  # (in float64 too, say)
            if data.size and any(np.allclose(data, form, rtol=1e-3, atol=1e-6) for form in forms):
                return int(data.size)
    return 0


def _probe_residuals(answer, run):
    """What the answer gives on each input, the (N, N) tensors it made on the way, and the
    inputs themselves: never what a right answer (or the (N, N) bug) gives
    (``_expect_residuals`` adds that, on the judge's side)."""
    generator = _generator(8)
    cases = []
    for n, dtype, strided, values in _RESIDUAL_CASES:
        pred, target = _residual_inputs(n, dtype, strided, values, generator)
        on = f"pred of shape ({n}, 1), target of shape ({n},), {_dtype_name(dtype)}"
        if strided:
            on += ", pred a column of a wider tensor (not contiguous)"
        if values == "edges":
            on += f", at the edges of {_dtype_name(dtype)}"
        given_pred, given_target = (pred if strided else pred.clone()), target.clone()
        pred = pred.clone()  # kept to compare with
        record = {
            "on": on,
            "n": n,
            "given": {"pred": given(pred), "target": given(target)},
        }
        watch = _SquareWatch(n, pred.device)
        try:
            with watch:
                got = run(answer, given_pred, given_target, on=on)
            record["got"] = value_facts(got)
            record["squares_made"] = watch.squares
            record["pred_after"] = value_facts(given_pred)
            record["target_after"] = value_facts(given_target)
            left = _left_as_it_was(given_pred, pred) and _left_as_it_was(given_target, target)
            record["again"] = (
                value_facts(run(answer, given_pred, given_target, on=on + ", second call"))
                if left else record["got"]
            )
        except LearnerRaised as raised:
            # The judge decides: what the earlier inputs show already is the mistake to name,
            # before an error that only a later input (bfloat16, an integer dtype) raises.
            return {"cases": cases, "calls": _calls_in(answer), "raised": later_error(raised, answer, cases)}
        cases.append(record)
    return {"cases": cases, "calls": _calls_in(answer)}


def _expect_residuals(record):
    """What the reference solution gives on each recorded pred and target, what the (N, N) bug
    gives (every pred minus every target), and whether the answer made that tensor on the way,
    for the judge."""
    for case in record["cases"]:
        pred, target = tensor_of(case["given"]["pred"]), tensor_of(case["given"]["target"])
        case["expected"] = value_facts(residuals.reference(pred, target))
        pairs = pred - target
        case["every_pair"] = value_facts(pairs)["values"]
        case["every_pair_built"] = _every_pair_built(case["squares_made"], pairs)
    return record


def _judge_residuals(record):
    cases, calls = record["cases"], record["calls"]
    for case in cases:
        got, on, n = case["got"], case["on"], case["n"]
        for name in ("pred", "target"):
            changed = _input_changed(case["given"][name], case[f"{name}_after"], name, on)
            if changed:
                if name == "pred" and case["pred_after"]["shape"] == [n]:
                    return MESSAGES("squeezed-pred-in-place", changed=changed)
                return changed
        if got["kind"] == "tensor" and got["shape"] == [n, n] and n > 1 and same_values(
            got.get("values", []), case["every_pair"]
        ):
            return MESSAGES("broadcast-every-pair", n=n, on=on)
        if got["kind"] == "tensor" and got["shape"] == [n, 1]:
            return MESSAGES("column-result", n=n, on=on)
        if got["kind"] == "tensor" and got["shape"] == [] and n == 1:
            mistake, note = "lost-sample-dim", ""
            if "squeeze()" in calls:
                mistake, note = "squeeze-all", MESSAGES.text("squeeze-all-note")
            return MESSAGES(mistake, on=on, note=note)
        expected = case["expected"]
        if got["kind"] == "tensor" and got["shape"] == expected["shape"] and "values" in got:
            values, right = np.asarray(got["values"], dtype=np.float64), np.asarray(expected["values"], dtype=np.float64)
            if not same_values(values, right):
                if same_values(values, -right):
                    return MESSAGES("opposite-sign", on=on)
                if same_values(values, np.abs(right)):
                    return MESSAGES("absolute-errors", on=on)
                if same_values(values, right ** 2):
                    return MESSAGES("squared-errors", on=on)
        problem = tensor_problem(got, expected, on=on)
        if problem:
            if n > 1 and case["every_pair_built"]:  # the same mistake, said with what shows it
                return Mistake("broadcast-every-pair",
                               MESSAGES.text("every-pair-on-the-way", problem=problem, n=n))
            return problem
        problem = tensor_problem(case["again"], expected, what="the second result", on=on)
        if problem:
            return MESSAGES("wrong-on-second-call", problem=problem)
    for case in cases:
        n = case["n"]
        if n > 1 and case["every_pair_built"]:
            return Mistake("broadcast-every-pair",
                           MESSAGES.text("every-pair-kept-a-part", n=n, on=case["on"]))
    if record.get("raised"):
        return Raised(record["raised"])
    return None


residuals = Exercise(
    "residuals",
    chapter=CHAPTER,
    title="Per-sample errors without the (N, N) bug",
    expects=Function("residuals", ("pred", "target"), returns="an (N,) tensor: pred - target per sample"),
    probe=_probe_residuals,
    expect=_expect_residuals,
    judge=_judge_residuals,
    reference=residuals,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "loop-over-empty-batch": "stack expects a non-empty TensorList",
        "numpy-has-no-bfloat16": "Got unsupported ScalarType BFloat16",
    }),
    messages=MESSAGES,
)
