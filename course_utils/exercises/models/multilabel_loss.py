"""Chapter 03, M9 — ``multilabel_loss``: binary cross-entropy from logits, for a multi-label batch.

Engine: applies edges.edge_tensor (finite logits at the edges of float32 and float64, targets of
each dtype the task names) and states.session_settings (a call under torch.no_grad()); hand-written
because the task has named mistakes, a gradient and a second call on the same tensors.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from course_utils.exercises import edges, states
from course_utils.exercises.torch_calls import TorchCallRecorder
from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.facts import given, same_values, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.models.common import (
    CHAPTER,
    LOSS_TEXTS,
    NOTE_CLUES,
    NOTE_TEXTS,
    _loss_on_meta_problem,
    _not_a_loss,
    _on_meta,
)

_CONVERT = "targets.to(logits.dtype)"

MESSAGES = Messages("multilabel_loss", {
    "passed": (
        "Correct: one sigmoid per label, computed from the logits so that it stays exact for "
        "confident outputs, with targets converted to the logits' dtype."
    ),
    "hint-1": (
        "Each of the C labels is its own yes/no question, so the loss is binary cross-entropy "
        "per entry, averaged over all N × C entries. It should take the raw logits."
    ),
    "hint-2": (
        "F.binary_cross_entropy_with_logits (nn.BCEWithLogitsLoss) wants floating-point targets "
        "in the logits' dtype: integer or bool targets raise. targets.to(logits.dtype) converts them."
    ),
    "hint-3": "return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype))",
    "changed-logits-in-place": (
        "Your function changed its input logits in place (on {on}): the caller's tensors "
        "are not yours to change (the model's output is still needed for backward). "
        "Compute new tensors (torch.sigmoid(logits), not logits.sigmoid_())."
    ),
    "changed-targets-in-place": (
        "Your function changed its input targets in place (on {on}): the caller's "
        "tensors are not yours to change. Make a new tensor: targets.to(logits.dtype)."
    ),
    **LOSS_TEXTS,
    "not-reduced": (
        "Your loss has shape {shape} (on {on}); expected one number, "
        "shape (): the mean over every example and label."
    ),
    "lost-logits-dtype": "Your loss has dtype {got}; expected {expected}, the logits' dtype (on {on}).{hint}",
    "kept-targets-dtype": (
        "Your loss has dtype {got}, the targets' dtype, for {expected} logits (on {on}): "
        "binary_cross_entropy_with_logits returns the dtype of its targets, and float targets "
        "may come in another float dtype than the logits. Convert them too, whatever their dtype."
    ),
    "loss-on-other-device": "Your loss is on {device} for logits on the CPU (on {on}); keep it where the logits are.",
    "computed-in-narrower-dtype": (
        "Your loss is {value} (on {on}), what the right formula gives on the logits converted "
        "to float32, which keeps fewer digits and a smaller range than float64. Compute in the "
        "logits' own dtype (no .float() on the way)."
    ),
    "unstable-log": (
        "Your loss is {value} (on {on}): for a large logit sigmoid rounds to exactly 1 "
        "or 0, and log(0) is -inf. F.binary_cross_entropy_with_logits (or F.logsigmoid) "
        "computes the log-probabilities without forming the probabilities, so it stays finite."
    ),
    "exp-overflows": (
        "Your loss is {value} (on {on}): exp() of a large logit overflows to inf (exp(89) is "
        "already inf in float32), and what is built on it is no longer finite: log(1 + exp(x)) "
        "is inf where its true value is about x, a sigmoid written as 1 / (1 + exp(-x)) is "
        "exactly 0, whose log is -inf. F.binary_cross_entropy_with_logits (or F.softplus, which "
        "gives x itself for large x) never forms exp() of a large logit, so it stays finite."
    ),
    "kinked-gradient": (
        "{problem} The loss is right, but its gradient is wrong exactly where a logit is 0 (every "
        "logit of a zero-initialised head): max(x, 0) (clamp, relu) and |x| have a kink there, and "
        "backward() takes one side's slope for each, so the slopes do not add up to "
        "sigmoid(0) - t = 0.5 - t. F.binary_cross_entropy_with_logits (or F.softplus(x) - x * t) "
        "is smooth at 0. Expected (sigmoid(logits) - targets) / (N * C)."
    ),
    "cut-from-graph": (
        "Your loss does not require grad (on {on}): it is cut off from the "
        "logits, so loss.backward() cannot train the model. Compute it with torch "
        "operations on logits (no .item(), torch.tensor(...), detach() or .numpy())."
    ),
    "grad-left-none": "backward() from your loss left logits.grad None. Expected (sigmoid(logits) - targets) / (N * C).",
    "wrong-gradient": "{problem} Expected (sigmoid(logits) - targets) / (N * C).",
    "nan-gradient": (
        "{problem} The loss is right, but its gradient is nan: torch.where picks one "
        "branch's value, yet backward goes through both, and the branch not "
        "taken overflows (exp(100) is inf in float32). Use a formula that "
        "never overflows, such as F.binary_cross_entropy_with_logits. "
        "Expected (sigmoid(logits) - targets) / (N * C)."
    ),
    "sigmoid-then-bce": (
        "You applied sigmoid, then binary cross-entropy on the probabilities "
        "(BCELoss): where sigmoid rounds a large logit to exactly 1 or 0, the log is -inf and BCELoss "
        "clamps it to -100, so the loss is wrong and, on those entries, its gradient is 0. "
        "F.binary_cross_entropy_with_logits takes the raw logits and stays exact. "
        "(on {on}: got {got:.4f}, expected {expected:.4f})"
    ),
    "sigmoid-twice": (
        "Your loss applies sigmoid to outputs that were already probabilities: "
        "binary_cross_entropy_with_logits (BCEWithLogitsLoss) applies sigmoid itself. Give it the "
        "raw logits. (on {on}: got {got:.4f}, expected {expected:.4f})"
    ),
    "softmax-ce": (
        "You used cross-entropy, which takes a softmax over the labels, as if exactly "
        "one were right. In a multi-label batch each label is its own yes/no question: binary "
        "cross-entropy, one sigmoid per label. (on {on}: got {got:.4f}, expected {expected:.4f})"
    ),
    "summed": (
        "Your loss is the sum over all entries, not the mean: it grows with the batch "
        "size and the number of labels. Average (the default reduction). "
        "(on {on}: got {got:.4f}, expected {expected:.4f})"
    ),
    "per-example": (
        "Your loss sums over the labels and averages over the examples only; the task "
        "asks for the mean over all N × C entries (the default reduction). "
        "(on {on}: got {got:.4f}, expected {expected:.4f})"
    ),
    "no-minus": (
        "Your loss has the wrong sign: binary cross-entropy is minus the mean "
        "log-likelihood of the targets. (on {on}: got {got:.4f}, expected {expected:.4f})"
    ),
    "state-kept-between-calls": (
        "Your loss is {got:.4f} on the first batch called again with the same tensors; "
        "the first call gave {first:.4f} and the right value "
        "is {expected:.4f}: something is kept from one call to the next."
    ),
    "wrong-loss-value": "Your loss is {got:.4f}; expected {expected:.4f} (on {on}).",
    "integer-targets": Message(
        "integer targets given to binary_cross_entropy_with_logits as they are (or changed "
        "in place), and an integer tensor cannot hold its floating-point result. Convert "
        "them to a new tensor: targets.to(logits.dtype).", advises=(_CONVERT,)),
    "bool-targets": Message(
        "bool targets given to binary_cross_entropy_with_logits as they are: convert them "
        "first, targets.to(logits.dtype).", advises=(_CONVERT,)),
    "one-minus-bool-targets": Message(
        "1 - targets on bool targets: convert them first, targets.to(logits.dtype).", advises=(_CONVERT,)),
    "targets-of-other-dtype": Message(
        "binary_cross_entropy on float64 probabilities with float32 targets: convert the "
        "targets to the logits' dtype, targets.to(logits.dtype).", advises=(_CONVERT,)),
    "targets-of-other-shape": "targets of another shape than the logits: both are (N, C), one 0/1 per label.",
    "view-of-non-contiguous": (
        ".view() needs contiguous memory, and logits may be a transposed tensor: use "
        ".reshape(), or no reshaping at all."
    ),
    **{key: NOTE_TEXTS[key] for key in ("copied-out-of-device", "tensor-made-on-cpu")},
    "in-place-change-of-logits": "an in-place change of logits (sigmoid_, -=): compute a new tensor.",
})


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
        *_edge_cases(labels),
    ]


_EDGES = " at the edges of "


def _edge_cases(labels):
    """Logits at the edges of float32 and float64 (zeros of both signs, subnormals, 1 and the
    number after it, magnitudes whose exp or square overflows; finite, and small enough that a
    mean of them does not overflow), against targets of each dtype the task names, float32
    targets with float64 logits among them."""
    found = []
    for dtype, target_dtypes in ((torch.float32, (torch.float32, torch.bool)),
                                 (torch.float64, (torch.float64, torch.float32, torch.int64))):
        name = str(dtype).removeprefix("torch.")
        allowed = edges.Allowed(finite=True, low=-torch.finfo(dtype).max / 1e6, high=torch.finfo(dtype).max / 1e6)
        for shift, target_dtype in enumerate(target_dtypes):
            kind = str(target_dtype).removeprefix("torch.")
            found.append((f"4 examples, 6 labels, {name} logits{_EDGES}{name} (±0, subnormals, "
                          f"1 and the next {name}, magnitudes whose exp or square overflows), {kind} targets",
                          edges.edge_tensor((4, 6), dtype, allowed, shift=3 * shift),
                          labels((4, 6)).to(target_dtype)))
    return found


_ML_NO_GRAD_CASE = "4 examples, 3 labels, float targets, called under torch.no_grad()"


def _ml_record(on, logits, targets, got, logits_changed, targets_changed):
    """What the answer did on one input, and the input: never what a right answer gives."""
    return {
        "on": on,
        "dtype": str(logits.dtype),
        "got": value_facts(got),
        "logits_changed": logits_changed,
        "targets_changed": targets_changed,
        "targets_dtype": str(targets.dtype),
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
        before, recorder = states.session_settings(), TorchCallRecorder()
        with recorder:
            got = run(answer, given_logits, given_targets, on=on)
        cases.append(_ml_record(on, logits, targets, got, not torch.equal(given_logits, logits),
                                not torch.equal(given_targets, targets)))
        cases[-1]["logits_tracked"] = bool(given_logits.requires_grad)
        cases[-1]["settings_changed"] = states.changed_settings(before, states.session_settings())
        cases[-1]["called"] = sorted(recorder.names)
    _, logits, targets = _ml_cases()[0]  # under no_grad: grad mode is what an answer may switch
    with torch.no_grad():
        before = states.session_settings()
        got = run(answer, logits.clone(), targets.clone(), on=_ML_NO_GRAD_CASE)
        cases.append(_ml_record(_ML_NO_GRAD_CASE, logits, targets, got, False, False))
        cases[-1]["logits_tracked"] = False
        cases[-1]["settings_changed"] = states.changed_settings(before, states.session_settings())
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
    case = _ml_gradient(answer, run, _ML_GRADIENT_CASE, logits, targets, called_on=_ML_GRADIENT_CASE)
    cases.append(case)
    if not (case["got"]["kind"] == "tensor" and case["got"]["requires_grad"]):
        return {"cases": cases, "meta": None}
    # the gradient on the edges too: at a logit of exactly ±0 (every logit of a zero-initialised
    # head) max(x, 0) and |x| have kinks, whose one-sided slopes give a wrong gradient
    cases += [_ml_gradient(answer, run, on, logits, targets)
              for on, logits, targets in _ml_cases() if _EDGES in on]
    _, logits, targets = _ml_cases()[0]
    meta = _on_meta(lambda: run(answer, logits.to("meta"), targets.to("meta"), on=_ML_META_CASE))
    return {"cases": cases, "meta": meta}


def _ml_gradient(answer, run, on, logits, targets, *, called_on=None):
    """The answer's loss on a leaf copy of ``logits`` that requires grad, and the gradient
    backward() from it gives the leaf (None where there is no loss to call backward() on)."""
    called_on = called_on or f"{on}, logits with requires_grad=True"
    leaf = logits.clone().requires_grad_(True)
    got = run(answer, leaf, targets.clone(), on=called_on)
    case = _ml_record(called_on, logits, targets, got, False, False)
    case["grad"] = None
    if isinstance(got, torch.Tensor) and got.requires_grad and got.numel() == 1:
        run(got.backward, on=f"backward() from your loss ({called_on})")
        case["grad"] = value_facts(leaf.grad)
    return case


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
        if logits.dtype == torch.float64:  # the formula on logits converted to float32
            variants["narrowed"] = reference(logits.float(), targets.float()).double()
        case.update({key: value_facts(value) for key, value in variants.items()})
        if "grad" in case:
            leaf = logits.clone().requires_grad_(True)
            with torch.enable_grad():
                reference(leaf, targets).backward()
            case["expected_grad"] = leaf.grad.numpy().copy()
    return record


_ML_MISTAKES = ["sigmoid_then_bce", "sigmoid_twice", "softmax_ce", "summed", "per_example", "no_minus"]


def _judge_multilabel_loss(record):
    for case in record["cases"]:
        on, got, expected = case["on"], case["got"], case["expected"]
        if case["logits_changed"]:
            return MESSAGES("changed-logits-in-place", on=on)
        if case["targets_changed"]:
            return MESSAGES("changed-targets-in-place", on=on)
        problem = _not_a_loss(case, got, on, MESSAGES)
        if problem:
            return problem
        if got["dtype"] != case["dtype"]:  # the task: the loss in the logits' dtype
            if got["dtype"] == case.get("targets_dtype") and "float" in got["dtype"]:
                return MESSAGES("kept-targets-dtype", got=got["dtype"], expected=case["dtype"], on=on)
            hint = (" binary_cross_entropy_with_logits returns the targets' dtype: convert them "
                    "with targets.to(logits.dtype), not .float()."
                    if got["dtype"] == "torch.float32" else "")
            return MESSAGES("lost-logits-dtype", got=got["dtype"], expected=case["dtype"], on=on, hint=hint)
        if "values" not in got:
            return MESSAGES("loss-on-other-device", device=got["device"], on=on)
        value = float(np.asarray(got["values"]))
        right = float(np.asarray(expected["values"]))
        narrowed = case.get("narrowed")
        if narrowed and not same_values(value, right, rtol=1e-4, atol=1e-5) and same_values(
                value, narrowed["values"], rtol=1e-4, atol=1e-5):
            return MESSAGES("computed-in-narrower-dtype", value=value, on=on)
        if not np.isfinite(value):  # exp() overflowing, or a probability rounded to 0 or 1
            called = set(case.get("called", ()))
            overflow = "exp" in called and not called & {"sigmoid", "sigmoid_"}
            return MESSAGES("exp-overflows" if overflow else "unstable-log", value=value, on=on)
        if same_values(value, right, rtol=1e-4, atol=1e-5):
            if case["on"].endswith(_ML_AGAIN):
                continue
            if "expected_grad" in case:
                if not got["requires_grad"]:
                    return MESSAGES("cut-from-graph", on=on)
                grad = case["grad"]
                if grad is None:
                    return MESSAGES("grad-left-none")
                problem = tensor_problem(
                    grad, {"kind": "tensor", "shape": list(case["expected_grad"].shape),
                           "dtype": case["dtype"], "device": "cpu", "values": case["expected_grad"]},
                    what="the gradient logits.grad", on=on, rtol=1e-4, atol=1e-6,
                )
                if problem:
                    return _gradient_mistake(case, grad, problem)
            continue
        for key in _ML_MISTAKES:
            if same_values(value, case[key]["values"], rtol=1e-4, atol=1e-5):
                return MESSAGES(key.replace("_", "-"), on=on, got=value, expected=right)
        first = record["cases"][0]["got"]
        if case["on"].endswith(_ML_AGAIN):
            return MESSAGES("state-kept-between-calls", got=value, first=float(np.asarray(first["values"])),
                            expected=right)
        return MESSAGES("wrong-loss-value", got=value, expected=right, on=on)
    return _loss_on_meta_problem(record["meta"], MESSAGES)


def _gradient_mistake(case, grad, problem):
    """What a wrong gradient (with a right loss) comes from: a nan from a branch not taken, the
    kinks of max(x, 0) and |x| at a logit of 0, or else what the comparison shows."""
    values = np.asarray(grad.get("values", 0.0), dtype=float)
    if np.isnan(values).any():
        return MESSAGES("nan-gradient", problem=problem)
    expected = np.asarray(case["expected_grad"], dtype=float)
    if values.shape == expected.shape:
        differ = ~np.isclose(values, expected, rtol=1e-4, atol=1e-6)
        zeros = tensor_of(case["given"]["logits"]).double().numpy() == 0
        if differ.any() and not (differ & ~zeros).any():
            return MESSAGES("kinked-gradient", problem=problem)
    return MESSAGES("wrong-gradient", problem=problem)


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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "integer-targets": "can't be cast to the desired output type",
        "bool-targets": "with two bool tensors is not supported",
        "one-minus-bool-targets": "with a bool tensor is not supported",
        "targets-of-other-dtype": "but expected Double",
        "targets-of-other-shape": "must be the same as input size",
        "view-of-non-contiguous": "view size is not compatible with input tensor's size and stride",
        **{key: NOTE_CLUES[key] for key in ("copied-out-of-device", "tensor-made-on-cpu")},
        "in-place-change-of-logits": "a leaf Variable that requires grad",
    }),
    messages=MESSAGES,
)
