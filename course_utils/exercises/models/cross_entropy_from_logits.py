"""Chapter 03, M5 — ``cross_entropy_from_logits``: cross-entropy from raw logits, built from log_softmax.

Engine: applies edges.edge_tensor / edges.near_ties (finite logits of one sign per row, every
float dtype) and states.session_settings (a call under torch.no_grad()); hand-written because
the task has a rule of its own (no F.cross_entropy), a gradient and named mistakes.
"""

from __future__ import annotations

import numpy as np
import torch
from course_utils.exercises.torch_calls import TorchCallRecorder
import torch.nn.functional as F

from course_utils.exercises import edges, states
from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.facts import given, same_values, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.models.common import (
    CHAPTER,
    LOSS_TEXTS,
    LOSS_TOLERANCE,
    NOTE_CLUES,
    NOTE_TEXTS,
    _loss_on_meta_problem,
    _not_a_loss,
    _on_meta,
    narrower_or_other,
)

MESSAGES = Messages("cross_entropy_from_logits", {
    "passed": (
        "Correct, and stable for very large logits: this is exactly what F.cross_entropy "
        "computes, which is why it wants logits, not probabilities."
    ),
    "hint-1": (
        "Cross-entropy is the average over the batch of -log p(target), with p the softmax of "
        "the logits over the classes (dim=1)."
    ),
    "hint-2": (
        "Never take torch.log of a softmax: for large logits it gives -inf. torch.log_softmax "
        "computes the log-probabilities directly."
    ),
    "hint-3": "log_probs = torch.log_softmax(logits, dim=1); return F.nll_loss(log_probs, targets)",
    "called-cross-entropy": (
        "Your function calls F.cross_entropy (or nn.CrossEntropyLoss), which this "
        "exercise asks you to build yourself: log_softmax over the classes, then "
        "F.nll_loss (or pick each target's log-probability and average)."
    ),
    "changed-logits-in-place": (
        "Your function changed its input logits in place (on {on}): the caller's "
        "tensors are not yours to change. Compute new tensors (logits - m, not logits -= m)."
    ),
    "changed-targets-in-place": (
        "Your function changed its input targets in place (on {on}): the caller's "
        "tensors are not yours to change. Make new tensors from them (targets[:, None] or "
        "targets.unsqueeze(1), not a method ending in _ such as unsqueeze_)."
    ),
    **LOSS_TEXTS,
    "not-reduced": (
        "Your loss has shape {shape} (on {on}); expected one number, "
        "shape (): average over the batch (F.nll_loss does it by default)."
    ),
    "lost-logits-dtype": "Your loss has dtype {got}; expected {expected}, the logits' dtype (on {on}).",
    "loss-on-other-device": "Your loss is on {device} for logits on the CPU (on {on}); keep it where the logits are.",
    "computed-in-narrower-dtype": (
        "Your loss is {value} (on {on}), what the right formula gives on the logits converted "
        "to {narrower}, which keeps fewer digits and a smaller range than {dtype}. "
        "Compute in the logits' own dtype (no .float() or .half() on the way)."
    ),
    "unstable-log": (
        "Your loss is {value} (on {on}): exp() of large logits overflows (or a "
        "probability underflows to 0, whose log is -inf), as in "
        "torch.log(torch.softmax(...)) or a log of a sum of exp(). torch.log_softmax "
        "computes the log-probabilities without forming the probabilities, so it stays finite."
    ),
    "cut-from-graph": (
        "Your loss does not require grad (on {on}): it is cut off from the "
        "logits, so loss.backward() cannot train the model. Compute it with torch "
        "operations on logits (no .item(), torch.tensor(...), detach() or .numpy())."
    ),
    "grad-left-none": "backward() from your loss left logits.grad None. Expected (softmax(logits) - one_hot(targets)) / N.",
    "wrong-gradient": "{problem} Expected (softmax(logits) - one_hot(targets)) / N.",
    "softmax-first": (
        "You applied softmax, then cross-entropy: cross-entropy applies "
        "log_softmax itself, so the probabilities get squashed twice and the loss can "
        "never get near 0. Give it the raw logits. (on {on}: got {got:.4f}, expected {expected:.4f})"
    ),
    "nll-on-logits": Message(
        "F.nll_loss on raw logits just picks -logit of the target class: "
        "it expects log-probabilities. Take torch.log_softmax(logits, dim=1) first. "
        "(on {on}: got {got:.4f}, expected {expected:.4f})",
        advises=("torch.log_softmax(logits, dim=1)",)),
    "summed": (
        "Your loss is the sum over the batch, not the mean: it grows with the "
        "batch size, and so would your effective learning rate. Average (nll_loss's default). "
        "(on {on}: got {got:.4f}, expected {expected:.4f})"
    ),
    "no-minus": (
        "Your loss has the wrong sign: it is the mean log-probability of the "
        "targets, which training would push down. Cross-entropy is its negative. "
        "(on {on}: got {got:.4f}, expected {expected:.4f})"
    ),
    "wrong-dim": (
        "Your log_softmax normalises over dim=0, the examples: the classes of logits "
        "of shape (N, C) are dim=1. (on {on}: got {got:.4f}, expected {expected:.4f})"
    ),
    "wrong-loss-value": "Your loss is {got:.4f}; expected {expected:.4f} (on {on}).",
    "float-targets": "targets are class indices (int64): pass them as they are, not as floats.",
    "classes-on-wrong-dim": "logits have shape (N, C): the classes are dim=1.",
    **{key: NOTE_TEXTS[key] for key in ("copied-out-of-device", "tensor-made-on-cpu")},
    "in-place-change-of-logits": "an in-place change of logits (-=, sub_): compute a new tensor, logits - m.",
    "view-of-non-contiguous": (
        ".view() needs contiguous memory, and logits may be a transposed tensor: use "
        ".reshape()."
    ),
})


# ============================================================================================
# M5 — cross-entropy from raw logits, built from log_softmax
# ============================================================================================
def cross_entropy_from_logits(logits, targets):
    log_probs = torch.log_softmax(logits, dim=1)
    return F.nll_loss(log_probs, targets)




_FORBIDDEN_SHORTCUTS = {"cross_entropy", "cross_entropy_loss"}
_GRADIENT_CASE = "6 examples, 4 classes, logits with requires_grad=True"
_META_CASE = "logits and targets on meta (a stand-in for a GPU)"


def _ce_cases():
    generator = torch.Generator().manual_seed(3)

    def batch(n, c, scale=1.0, dtype=torch.float32):
        logits = torch.randn(n, c, generator=generator, dtype=dtype) * scale
        return logits, torch.randint(0, c, (n,), generator=generator)

    by_class = torch.randn(5, 7, generator=generator, dtype=torch.float64)  # (C, N) in memory
    transposed_targets = torch.randint(0, 5, (7,), generator=generator)
    return [
        ("6 examples, 4 classes", *batch(6, 4)),
        ("8 examples, 10 classes", *batch(8, 10, scale=3)),
        # confident logits: exp() overflows
        ("5 examples with very large logits (up to about ±1000)", *batch(5, 3, scale=400)),
        ("a batch of one example, 3 classes", *batch(1, 3)),
        ("7 examples, 5 classes, float64 logits stored transposed (non-contiguous)",
         by_class.t(), transposed_targets),
        *_edge_cases(),
    ]


# The logits a task of raw scores allows: finite (an answer that masks with a one-hot product is
# right, and 0 * -inf is nan), and, within a row, no two further apart than the dtype holds: each
# row's edges have one sign, so that log_softmax itself never overflows.
_ONE_SIGN = edges.Allowed(finite=True, nonnegative=True)
_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _edge_cases():
    """Per float dtype: logits at the dtype's edges (zeros, subnormals, 1 and the number after
    it, magnitudes whose exp or square overflows, the largest finite value), one sign per row,
    each target its row's largest logit; and four logits tied within two steps of half the
    largest value (a sum of them overflows; log_softmax does not)."""
    found = []
    for dtype in _FLOATS:
        name = str(dtype).removeprefix("torch.")
        rows = torch.cat([edges.edge_tensor((2, 6), dtype, _ONE_SIGN),
                          -edges.edge_tensor((2, 6), dtype, _ONE_SIGN, shift=4)])
        found.append((f"4 examples, 6 classes, {name} logits at the edges of {name} (0, subnormals, "
                      f"1 and the next {name}, up to the largest finite {name}), one sign per row",
                      rows, rows.argmax(dim=1)))
        ties = edges.near_ties((2, 4), dtype, base=torch.finfo(dtype).max / 2)
        found.append((f"2 examples, 4 classes, {name} logits tied within two steps of half the "
                       f"largest {name}", ties, torch.tensor([1, 3])))
    return found


_NO_GRAD_CASE = "6 examples, 4 classes, called under torch.no_grad()"


def _ce_record(on, logits, targets, got, called, logits_changed, targets_changed):
    """What the answer did on one input, and the input: never what a right answer gives."""
    return {
        "on": on,
        "dtype": str(logits.dtype),
        "got": value_facts(got),
        "called": sorted(called),
        "logits_changed": logits_changed,
        "targets_changed": targets_changed,
        "given": {"logits": given(logits), "targets": given(targets)},
    }


def _probe_cross_entropy(answer, run):
    """What the answer returns on each input (and the gradient backward() gives the logits), and
    the inputs themselves: ``_expect_cross_entropy`` adds what the reference and each classic
    mistake give, on the judge's side."""
    cases = []
    for on, logits, targets in _ce_cases():
        given_logits, given_targets = logits.clone(), targets.clone()
        if not logits.is_contiguous():
            given_logits = logits.t().clone().t()
        recorder = TorchCallRecorder()
        before = states.session_settings()
        with recorder:
            got = run(answer, given_logits, given_targets, on=on)
        cases.append(_ce_record(on, logits, targets, got, recorder.names,
                                not torch.equal(given_logits, logits), not torch.equal(given_targets, targets)))
        cases[-1]["logits_tracked"] = bool(given_logits.requires_grad)  # the caller's logits did not
        cases[-1]["settings_changed"] = states.changed_settings(before, states.session_settings())
    _, logits, targets = _ce_cases()[0]  # under no_grad: grad mode is what an answer may switch
    with torch.no_grad():
        before = states.session_settings()
        got = run(answer, logits.clone(), targets.clone(), on=_NO_GRAD_CASE)
        cases.append(_ce_record(_NO_GRAD_CASE, logits, targets, got, set(), False, False))
        cases[-1]["settings_changed"] = states.changed_settings(before, states.session_settings())
        cases[-1]["logits_tracked"] = False
    if any(c["logits_changed"] or c["targets_changed"] or c.get("logits_tracked")
           or c["got"]["kind"] != "tensor" for c in cases):
        return {"cases": cases, "meta": None}  # judged from these; the next steps would only raise
    # Differentiable: the loss is what loss.backward() starts from.
    _, logits, targets = _ce_cases()[0]
    leaf = logits.clone().requires_grad_(True)
    recorder = TorchCallRecorder()
    with recorder:
        got = run(answer, leaf, targets.clone(), on=_GRADIENT_CASE)
    case = _ce_record(_GRADIENT_CASE, logits, targets, got, recorder.names, False, False)
    case["grad"] = None
    if isinstance(got, torch.Tensor) and got.requires_grad and got.numel() == 1:
        run(got.backward, on=f"backward() from your loss ({_GRADIENT_CASE})")
        case["grad"] = value_facts(leaf.grad)
    cases.append(case)
    if not (case["got"]["kind"] == "tensor" and case["got"]["requires_grad"]):
        return {"cases": cases, "meta": None}
    meta = _on_meta(lambda: run(answer, logits.to("meta"), targets.to("meta"), on=_META_CASE))
    return {"cases": cases, "meta": meta}


def _expect_cross_entropy(record):
    """What the reference gives on each recorded input, what each classic mistake gives, and,
    for the input with requires_grad=True (the one with "grad"), the gradient backward() from
    the reference's loss gives the logits: (softmax(logits) - one_hot(targets)) / N."""
    reference = cross_entropy_from_logits.reference
    for case in record["cases"]:
        logits = tensor_of(case["given"]["logits"])
        targets = tensor_of(case["given"]["targets"])
        probs = logits.softmax(dim=1)
        picked_logits = logits[torch.arange(len(targets)), targets]
        case["expected"] = value_facts(reference(logits, targets))
        case["softmax_first"] = value_facts(F.cross_entropy(probs, targets))
        case["nll_on_logits"] = value_facts(-picked_logits.mean())
        case["summed"] = value_facts(F.cross_entropy(logits, targets, reduction="sum"))
        case["no_minus"] = value_facts(-F.cross_entropy(logits, targets))
        case["wrong_dim"] = value_facts(F.nll_loss(torch.log_softmax(logits, dim=0), targets))
        narrower = {torch.float64: torch.float32, torch.float32: torch.float16}.get(logits.dtype)
        if narrower is not None:  # the formula on logits converted to a narrower dtype
            case["narrowed"] = {"dtype": str(narrower).removeprefix("torch."),
                                "values": value_facts(reference(logits.to(narrower), targets).to(logits.dtype))["values"]}
        if "grad" in case:
            leaf = logits.clone().requires_grad_(True)
            with torch.enable_grad():
                reference(leaf, targets).backward()
            case["expected_grad"] = leaf.grad.numpy().copy()
    return record


_CE_MISTAKES = ["softmax_first", "nll_on_logits", "summed", "no_minus", "wrong_dim"]


def _judge_cross_entropy(record):
    for case in record["cases"]:
        on, got, expected = case["on"], case["got"], case["expected"]
        shortcut = _FORBIDDEN_SHORTCUTS & set(case["called"])
        if shortcut:
            return MESSAGES("called-cross-entropy")
        if case["logits_changed"]:
            return MESSAGES("changed-logits-in-place", on=on)
        if case["targets_changed"]:
            return MESSAGES("changed-targets-in-place", on=on)
        problem = _not_a_loss(case, got, on, MESSAGES)
        if problem:
            return problem
        # a float64 loss from float32 logits (log_softmax(..., dtype=torch.float64)) is only
        # more precise; a float32 loss from float64 logits loses digits
        if narrower_or_other(got["dtype"], case["dtype"]):
            return MESSAGES("lost-logits-dtype", got=got["dtype"], expected=case["dtype"], on=on)
        if "values" not in got:
            return MESSAGES("loss-on-other-device", device=got["device"], on=on)
        value = float(np.asarray(got["values"]))
        rtol, atol = LOSS_TOLERANCE.get(case["dtype"], LOSS_TOLERANCE["torch.float32"])
        right = float(np.asarray(expected["values"]))
        narrowed = case.get("narrowed")
        if narrowed and not same_values(value, right, rtol=rtol, atol=atol) and same_values(
                value, narrowed["values"], rtol=rtol, atol=atol):
            return MESSAGES("computed-in-narrower-dtype", value=value, on=on, narrower=narrowed["dtype"],
                            dtype=case["dtype"].removeprefix("torch."))
        if not np.isfinite(value):
            return MESSAGES("unstable-log", value=value, on=on)
        if same_values(value, right, rtol=rtol, atol=atol):
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
                    return MESSAGES("wrong-gradient", problem=problem)
            continue
        for key in _CE_MISTAKES:
            if same_values(value, case[key]["values"], rtol=rtol, atol=atol):
                return MESSAGES(key.replace("_", "-"), on=on, got=value, expected=right)
        return MESSAGES("wrong-loss-value", got=value, expected=right, on=on)
    return _loss_on_meta_problem(record["meta"], MESSAGES)


cross_entropy_from_logits = Exercise(
    "cross_entropy_from_logits",
    chapter=CHAPTER,
    title="Cross-entropy from raw logits",
    expects=Function("cross_entropy_from_logits", ("logits", "targets"),
                     returns="a 0-d tensor: the mean loss"),
    probe=_probe_cross_entropy,
    expect=_expect_cross_entropy,
    judge=_judge_cross_entropy,
    reference=cross_entropy_from_logits,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "float-targets": "expected scalar type Long",
        "classes-on-wrong-dim": "Dimension out of range",
        **{key: NOTE_CLUES[key] for key in ("copied-out-of-device", "tensor-made-on-cpu")},
        "in-place-change-of-logits": "a leaf Variable that requires grad",
        "view-of-non-contiguous": "view size is not compatible with input tensor's size and stride",
    }),
    messages=MESSAGES,
)
