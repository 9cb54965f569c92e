"""Chapter 03, M9 — ``multilabel_loss``: binary cross-entropy from logits, for a multi-label batch."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import given, same_values, tensor_of, tensor_problem, value_facts
from course_utils.exercises.models.common import (
    CHAPTER,
    _DEVICE_NOTE,
    _loss_on_meta_problem,
    _not_a_loss,
    _on_meta,
)


# ============================================================================================
# M9 — binary cross-entropy from logits, for a multi-label batch
# ============================================================================================
def multilabel_loss(logits, targets):
    return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype))


_ML_GRADIENT_CASE = "4 examples, 3 labels, logits up to ±100 with requires_grad=True"
_ML_META_CASE = "logits and float targets on meta (a stand-in for a GPU)"
_ML_AGAIN = " (the first batch again, the same tensors)"


def _ml_cases():
    """(description, logits, targets): every target dtype the task allows, logits large enough
    that sigmoid rounds to exactly 0 or 1, a batch of one, float64 and non-contiguous tensors."""
    generator = torch.Generator().manual_seed(9)

    def labels(shape):
        return torch.randint(0, 2, shape, generator=generator)

    large = torch.tensor([[40.0, -35.0, 3.0, 0.5], [-30.0, 25.0, -2.0, 60.0], [95.0, -1.0, 18.0, -70.0]])
    large_targets = torch.tensor([[0, 1, 1, 0], [0, 0, 1, 1], [0, 1, 0, 1]]).float()
    by_label = torch.randn(5, 6, generator=generator, dtype=torch.float64) * 2  # (C, N) in memory
    return [
        ("4 examples, 3 labels, float targets",
         torch.randn(4, 3, generator=generator) * 2, labels((4, 3)).float()),
        ("5 examples, 4 labels, integer (int64) targets",
         torch.randn(5, 4, generator=generator) * 2, labels((5, 4))),
        ("3 examples, 5 labels, bool targets",
         torch.randn(3, 5, generator=generator) * 2, labels((3, 5)).bool()),
        ("3 examples, 4 labels, logits up to 95 (sigmoid rounds them to exactly 0 or 1), float targets",
         large, large_targets),
        ("a batch of one example, 6 labels, float targets",
         torch.randn(1, 6, generator=generator) * 2, labels((1, 6)).float()),
        ("6 examples, 5 labels, float64 logits and int64 targets stored transposed (non-contiguous)",
         by_label.t(), labels((5, 6)).t()),
    ]


def _ml_record(on, logits, targets, got, logits_changed, targets_changed):
    """What the answer did on one input, and the input: never what a right answer gives."""
    return {
        "on": on,
        "dtype": str(logits.dtype),
        "got": value_facts(got),
        "logits_changed": logits_changed,
        "targets_changed": targets_changed,
        "given": {"logits": given(logits), "targets": given(targets)},
    }


def _probe_multilabel_loss(answer, run):
    """What the answer returns on each input (and the gradient backward() gives the logits), and
    the inputs themselves: ``_expect_multilabel_loss`` adds what the reference and each classic
    mistake give, on the judge's side."""
    cases = []
    firsts = None
    for on, logits, targets in _ml_cases():
        given_logits, given_targets = logits.clone(), targets.clone()
        if not logits.is_contiguous():  # keep the caller's layout: a transposed view
            given_logits, given_targets = logits.t().clone().t(), targets.t().clone().t()
        if firsts is None:
            firsts = (given_logits, given_targets, logits, targets)
        got = run(answer, given_logits, given_targets, on=on)
        cases.append(_ml_record(on, logits, targets, got, not torch.equal(given_logits, logits),
                                not torch.equal(given_targets, targets)))
        cases[-1]["logits_tracked"] = bool(given_logits.requires_grad)
    # the same tensors again: an answer that changed them, or kept something from the first call
    given_logits, given_targets, logits, targets = firsts
    on = _ml_cases()[0][0] + _ML_AGAIN
    got = run(answer, given_logits, given_targets, on=on)
    cases.append(_ml_record(on, logits, targets, got, not torch.equal(given_logits, logits),
                            not torch.equal(given_targets, targets)))
    cases[-1]["logits_tracked"] = bool(given_logits.requires_grad)
    if any(c["logits_changed"] or c["targets_changed"] or c["logits_tracked"]
           or c["got"]["kind"] != "tensor" for c in cases):
        return {"cases": cases, "meta": None}  # judged from these; the next steps would only raise
    # Differentiable: the loss is what loss.backward() starts from. Logits of ±100 overflow exp()
    # in float32, where a torch.where between two formulas gets a nan gradient from the branch
    # it does not pick.
    logits = torch.tensor([[100.0, -100.0, 2.0], [-3.0, 40.0, 0.5], [1.0, -1.0, -60.0], [0.25, 80.0, -0.5]])
    targets = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    leaf = logits.clone().requires_grad_(True)
    got = run(answer, leaf, targets.clone(), on=_ML_GRADIENT_CASE)
    case = _ml_record(_ML_GRADIENT_CASE, logits, targets, got, False, False)
    case["grad"] = None
    if isinstance(got, torch.Tensor) and got.requires_grad and got.numel() == 1:
        run(got.backward, on=f"backward() from your loss ({_ML_GRADIENT_CASE})")
        case["grad"] = value_facts(leaf.grad)
    cases.append(case)
    if not (case["got"]["kind"] == "tensor" and case["got"]["requires_grad"]):
        return {"cases": cases, "meta": None}
    _, logits, targets = _ml_cases()[0]
    meta = _on_meta(lambda: run(answer, logits.to("meta"), targets.to("meta"), on=_ML_META_CASE))
    return {"cases": cases, "meta": meta}


def _expect_multilabel_loss(record):
    """What the reference gives on each recorded input (on the inputs widened to float64, so
    that the right value is exact for every dtype), what each classic mistake gives, and, for
    the input with requires_grad=True (the one with "grad"), the gradient backward() from the
    reference's loss gives the logits: (sigmoid(logits) - targets) / (N * C)."""
    reference = multilabel_loss.reference
    for case in record["cases"]:
        logits = tensor_of(case["given"]["logits"])
        targets = tensor_of(case["given"]["targets"])
        z, t = logits.double(), targets.double()
        per_entry = F.binary_cross_entropy_with_logits(z, t, reduction="none")
        probs = torch.sigmoid(logits)
        variants = {
            "expected": reference(z, t),
            "sigmoid_then_bce": F.binary_cross_entropy(probs, targets.to(probs.dtype)).double(),
            "sigmoid_twice": F.binary_cross_entropy_with_logits(torch.sigmoid(z), t),
            "softmax_ce": F.cross_entropy(z, t),
            "summed": per_entry.sum(),
            "per_example": per_entry.sum(dim=1).mean(),
            "no_minus": -per_entry.mean(),
        }
        case.update({key: value_facts(value) for key, value in variants.items()})
        if "grad" in case:
            leaf = logits.clone().requires_grad_(True)
            with torch.enable_grad():
                reference(leaf, targets).backward()
            case["expected_grad"] = leaf.grad.numpy().copy()
    return record


_ML_MISTAKES = [
    ("sigmoid_then_bce", "You applied sigmoid, then binary cross-entropy on the probabilities "
     "(BCELoss): where sigmoid rounds a large logit to exactly 1 or 0, the log is -inf and BCELoss "
     "clamps it to -100, so the loss is wrong and, on those entries, its gradient is 0. "
     "F.binary_cross_entropy_with_logits takes the raw logits and stays exact."),
    ("sigmoid_twice", "Your loss applies sigmoid to outputs that were already probabilities: "
     "binary_cross_entropy_with_logits (BCEWithLogitsLoss) applies sigmoid itself. Give it the "
     "raw logits."),
    ("softmax_ce", "You used cross-entropy, which takes a softmax over the labels, as if exactly "
     "one were right. In a multi-label batch each label is its own yes/no question: binary "
     "cross-entropy, one sigmoid per label."),
    ("summed", "Your loss is the sum over all entries, not the mean: it grows with the batch "
     "size and the number of labels. Average (the default reduction)."),
    ("per_example", "Your loss sums over the labels and averages over the examples only; the task "
     "asks for the mean over all N × C entries (the default reduction)."),
    ("no_minus", "Your loss has the wrong sign: binary cross-entropy is minus the mean "
     "log-likelihood of the targets."),
]


def _judge_multilabel_loss(record):
    for case in record["cases"]:
        on, got, expected = case["on"], case["got"], case["expected"]
        if case["logits_changed"]:
            return Mistake("changed-logits-in-place", (
                f"Your function changed its input logits in place (on {on}): the caller's tensors "
                "are not yours to change (the model's output is still needed for backward). "
                "Compute new tensors (torch.sigmoid(logits), not logits.sigmoid_())."
            ))
        if case["targets_changed"]:
            return Mistake("changed-targets-in-place", (
                f"Your function changed its input targets in place (on {on}): the caller's "
                "tensors are not yours to change. Make a new tensor: targets.to(logits.dtype)."
            ))
        problem = _not_a_loss(case, got, on, "the mean over every example and label")
        if problem:
            return problem
        wider = case["dtype"] == "torch.float32" and got["dtype"] == "torch.float64"
        if got["dtype"] != case["dtype"] and not wider:
            hint = (" binary_cross_entropy_with_logits returns the targets' dtype: convert them "
                    "with targets.to(logits.dtype), not .float()."
                    if got["dtype"] == "torch.float32" else "")
            return Mistake("lost-logits-dtype", (
                f"Your loss has dtype {got['dtype']}; expected {case['dtype']}, the logits' "
                f"dtype (on {on}).{hint}"
            ))
        if "values" not in got:
            return Mistake("loss-off-device",
                           f"Your loss is on {got['device']} for logits on the CPU (on {on}); keep it where the logits are.")
        value = float(np.asarray(got["values"]))
        right = float(np.asarray(expected["values"]))
        if not np.isfinite(value):
            return Mistake("unstable-log", (
                f"Your loss is {value} (on {on}): for a large logit sigmoid rounds to exactly 1 "
                "or 0, and log(0) is -inf. F.binary_cross_entropy_with_logits (or F.logsigmoid) "
                "computes the log-probabilities without forming the probabilities, so it stays finite."
            ))
        if same_values(value, right, rtol=1e-4, atol=1e-5):
            if case["on"].endswith(_ML_AGAIN):
                continue
            if "expected_grad" in case:
                if not got["requires_grad"]:
                    return Mistake("cut-from-graph", (
                        f"Your loss does not require grad (on {on}): it is cut off from the "
                        "logits, so loss.backward() cannot train the model. Compute it with torch "
                        "operations on logits (no .item(), torch.tensor(...), detach() or .numpy())."
                    ))
                grad = case["grad"]
                problem = tensor_problem(
                    grad, {"kind": "tensor", "shape": list(case["expected_grad"].shape),
                           "dtype": case["dtype"], "device": "cpu", "values": case["expected_grad"]},
                    what="the gradient logits.grad", on=on, rtol=1e-4, atol=1e-6,
                ) if grad is not None else "backward() from your loss left logits.grad None."
                if problem:
                    mistake = "wrong-gradient" if grad is not None else "cut-from-graph"
                    if grad is not None and np.isnan(np.asarray(grad.get("values", 0.0))).any():
                        mistake = "nan-gradient"
                        problem += (
                            " The loss is right, but its gradient is nan: torch.where picks one "
                            "branch's value, yet backward goes through both, and the branch not "
                            "taken overflows (exp(100) is inf in float32). Use a formula that "
                            "never overflows, such as F.binary_cross_entropy_with_logits."
                        )
                    return Mistake(mistake, problem + " Expected (sigmoid(logits) - targets) / (N * C).")
            continue
        for key, message in _ML_MISTAKES:
            if same_values(value, case[key]["values"], rtol=1e-4, atol=1e-5):
                return Mistake(key.replace("_", "-"), f"{message} (on {on}: got {value:.4f}, expected {right:.4f})")
        first = record["cases"][0]["got"]
        if case["on"].endswith(_ML_AGAIN):
            return Mistake("state-kept-between-calls", (
                f"Your loss is {value:.4f} on the first batch called again with the same tensors; "
                f"the first call gave {float(np.asarray(first['values'])):.4f} and the right value "
                f"is {right:.4f}: something is kept from one call to the next."
            ))
        return Mistake("wrong-loss-value", f"Your loss is {value:.4f}; expected {right:.4f} (on {on}).")
    return _loss_on_meta_problem(record["meta"])


multilabel_loss = Exercise(
    "multilabel_loss",
    chapter=CHAPTER,
    title="Binary cross-entropy from logits, multi-label",
    expects=Function("multilabel_loss", ("logits", "targets"),
                     returns="a 0-d tensor: the mean loss, in the logits' dtype"),
    probe=_probe_multilabel_loss,
    expect=_expect_multilabel_loss,
    judge=_judge_multilabel_loss,
    reference=multilabel_loss,
    passed_message=(
        "Correct: one sigmoid per label, computed from the logits so that it stays exact for "
        "confident outputs, with targets converted to the logits' dtype."
    ),
    hints=[
        "Each of the C labels is its own yes/no question, so the loss is binary cross-entropy "
        "per entry, averaged over all N × C entries. It should take the raw logits.",
        "F.binary_cross_entropy_with_logits (nn.BCEWithLogitsLoss) wants floating-point targets "
        "in the logits' dtype: integer or bool targets raise. targets.to(logits.dtype) converts them.",
        "return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype))",
    ],
    error_notes=[
        (
            "can't be cast to the desired output type",
            "integer targets given to binary_cross_entropy_with_logits as they are (or changed "
            "in place), and an integer tensor cannot hold its floating-point result. Convert "
            "them to a new tensor: targets.to(logits.dtype).",
            "integer-targets",
        ),
        (
            "with two bool tensors is not supported",
            "bool targets given to binary_cross_entropy_with_logits as they are: convert them "
            "first, targets.to(logits.dtype).",
            "bool-targets",
        ),
        (
            "with a bool tensor is not supported",
            "1 - targets on bool targets: convert them first, targets.to(logits.dtype).",
            "one-minus-bool-targets",
        ),
        (
            "but expected Double",
            "binary_cross_entropy on float64 probabilities with float32 targets: convert the "
            "targets to the logits' dtype, targets.to(logits.dtype).",
            "targets-of-other-dtype",
        ),
        (
            "must be the same as input size",
            "targets of another shape than the logits: both are (N, C), one 0/1 per label.",
            "targets-of-other-shape",
        ),
        (
            "view size is not compatible with input tensor's size and stride",
            ".view() needs contiguous memory, and logits may be a transposed tensor: use "
            ".reshape(), or no reshaping at all.",
            "view-of-non-contiguous",
        ),
        _DEVICE_NOTE,
        (
            "a leaf Variable that requires grad",
            "an in-place change of logits (sigmoid_, -=): compute a new tensor.",
            "in-place-change-of-logits",
        ),
    ],
)
