"""T10 — best_match: batched matrix products and argmax along a dimension.

Engine: applies edges.near_ties (keys one or two steps of float32 and float64 apart, around eight
values, with one-hot queries, so every dot product is exact whatever adds it up); hand-written
because the task states a rule (no Python loop, counted from the answer's source and its torch
calls) and its named mistakes read the answer's calls, which the quick path does not record. The
classic edges beyond near-ties are left out: the task leaves open which of two equal scores is
the best, so ±0, subnormal products (0 in float32) and products that overflow (inf ties) have
no one right answer.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Raised, later_error
from course_utils.exercises.edges import near_ties
from course_utils.exercises.facts import (
    given, same_values, shape_text, tensor_of, tensor_problem, value_facts,
)
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.tensors.common import (
    CHAPTER,
    _calls_in,
    _dtype_name,
    _generator,
    _input_changed,
    _left_as_it_was,
    _loops_in,
)
from course_utils.exercises.torch_calls import TorchCallCounter

_ONE_PRODUCT = "(q @ k.mT).argmax(dim=-1)"

MESSAGES = Messages("best_match", {
    "python-loop": (
        "The task asks for no Python loop; {found} One matrix product handles every batch: "
        "(q @ k.mT).argmax(dim=-1)."),
    "loop-in-source": "your function has one: `{loop}`.",
    "loop-by-calls": "for a batch of {batch} your function made {calls} torch calls, one or more per batch.",
    "returned-values-and-indices": (
        "Your function returned {kind}(values, indices) ({on}): a pair. Return only the indices: "
        ".argmax(dim=-1), or .max(dim=-1).indices."),
    "argmax-without-dim": (
        "Your result is a single number ({on}): argmax() without a dim gives one index into all the "
        "scores, flattened. Give it the keys' dimension: argmax(dim=-1)."),
    "returned-scores": (
        "Your result has dtype {dtype} ({on}): these are the largest scores themselves, not their "
        "indices. argmax(dim=-1) gives the index of each."),
    "argmax-over-queries": "Your {what} ({on}): {how} The scores are (B, n, m), the keys last: argmax(dim=-1).",
    "over-queries-by-shape": "result has shape {shape}; expected {expected_shape}",
    "one-index-per-key": "one index per key instead of one per query.",
    "over-queries-by-values": "argmax runs over the queries",
    "best-query-per-key": "for each key it gives the best query.",
    "k-not-transposed": (
        "Your product multiplies q by k without transposing it ({on}): with n = m = d the shapes happen "
        "to fit, but each query meets k's columns, not its keys. Transpose k's last two dimensions: "
        "q @ k.mT."),
    "near-tie-rounded": Message(
        "Your index for query {query} is key {got}, whose dot product is smaller than key {best}'s by "
        "one step of {dtype} ({on}): something between the dot products and argmax (a softmax, a lower "
        "precision, a rounding) made the two equal, and argmax then took one of the equals. argmax the "
        "dot products themselves, in the inputs' own dtype: (q @ k.mT).argmax(dim=-1).",
        advises=(_ONE_PRODUCT,)),
    "query-of-batch": "{query} of batch {batch}",
    "argmin-not-argmax": (
        "Your result picks the key with the smallest dot product ({on}); the task asks for the "
        "largest: argmax."),
    "squeezed-batch": (
        "Your result has shape {shape}; expected (1, {n}) ({on}): the batch dimension of a batch of one "
        "is gone.{note}"),
    "squeeze-note": " squeeze() drops it; name the dimension.",
    "wrong-on-second-call": (
        "Your function was right on its first call, not on a second call with the same q and k: {problem}"),
    "passed": "Correct: one batched product, one argmax over the keys.",
    "hint-1": "Every query against every key of its batch: (B, n, d) @ (B, d, m) gives the (B, n, m) scores.",
    "hint-2": "k.mT (or k.transpose(-2, -1)) swaps only the last two dimensions, for (B, m, d) and (m, d) alike.",
    "hint-3": "The keys are the last dimension of the scores: argmax(dim=-1).",
    "batched-keys-not-transposed": (
        "q @ k multiplies each (n, d) matrix of queries by an (m, d) matrix of keys: the inner sizes, d "
        "and m, do not fit. Transpose the keys' last two dimensions: q @ k.mT."),
    "keys-not-transposed": (
        "q @ k multiplies (n, d) queries by (m, d) keys: the inner sizes, d and m, do not fit. "
        "Transpose the keys' last two dimensions: q @ k.mT."),
    "bmm-of-2-d-keys": (
        "torch.bmm takes two 3-D tensors only, and k may be (m, d), the same keys for every batch. @ "
        "(torch.matmul) broadcasts the batch dimensions: q @ k.mT."),
    "transpose-of-missing-dimension": (
        "k may have two dimensions, (m, d), so dimension 2 does not exist. Count from the end, which "
        "works for both: k.transpose(-2, -1), or k.mT."),
    "einsum-of-fixed-dimensions": (
        "k may have two dimensions, (m, d), the same keys for every batch, and an einsum equation names "
        "a fixed number of them. q @ k.mT broadcasts the batch dimensions (so does an ellipsis: "
        "\"...nd,...md->...nm\")."),
    "batch-dimension-moved": (
        "the batch dimensions of a product broadcast like an element-wise operation, and these do not "
        "fit. Often a transpose moved k's batch dimension (k.T reverses all the dimensions of a 3-D k; "
        "transpose(0, 1) swaps batch and keys). k.mT swaps only the last two."),
    "loop-over-empty-batch": (
        "with an empty batch (B = 0) a loop over the batch gives torch.stack an empty list. One product "
        "handles every B: (q @ k.mT).argmax(dim=-1)."),
    "view-of-non-contiguous": (
        "q and k may be non-contiguous views, which view() cannot reshape; @ needs no reshaping: "
        "(q @ k.mT).argmax(dim=-1)."),
})


# ============================================================================================
# T10 — batched matrix products and argmax along a dimension
# ============================================================================================
def best_match(q, k):
    return (q @ k.mT).argmax(dim=-1)


# (B, n, m, d, dtype, k shared by every batch (m, d), q and k given as transposed views).
# n == m == d in one case, so that q @ k (no transpose) and an argmax over the queries keep the
# right shape; B == m in another, so that swapping k's first two dimensions does too.
_MATCH_SHAPES = [
    (2, 3, 4, 5, torch.float32, False, False),
    (3, 4, 4, 4, torch.float32, False, False),
    (1, 2, 3, 4, torch.float64, False, False),
    (2, 1, 3, 2, torch.float32, False, False),
    (2, 3, 1, 2, torch.float32, False, False),
    (3, 2, 3, 4, torch.float64, False, False),
    (2, 3, 4, 5, torch.float32, True, False),
    (2, 3, 4, 5, torch.float32, False, True),
    (3, 2, 5, 3, torch.float64, True, True),
    (1, 3, 4, 2, torch.float32, True, False),
    (0, 2, 3, 4, torch.float32, False, False),
]
_MATCH_LOOP_B, _MATCH_LOOP_CALLS = 40, 30


def _match_input(shape, dtype, transposed, generator):
    if transposed:  # the transpose of a contiguous tensor: not contiguous
        *batch, rows, columns = shape
        return (torch.randn(*batch, columns, rows, generator=generator)).to(dtype).mT
    return torch.randn(*shape, generator=generator).to(dtype)


def _match_text(b, n, m, d, dtype, shared, transposed):
    k_shape = (m, d) if shared else (b, m, d)
    text = (f"q of shape {shape_text([b, n, d])}, k of shape {shape_text(list(k_shape))}, "
            f"{_dtype_name(dtype)}")
    if shared:
        text += ", the same keys for every batch"
    if transposed:
        text += ", q and k transposed views (not contiguous)"
    return text


def _probe_best_match(answer, run):
    """What the answer gives on each input, and the inputs themselves: never what a right answer
    gives (``_expect_best_match`` adds that, on the judge's side)."""
    generator = _generator(12)
    record = {"loops": _loops_in(answer), "calls": _calls_in(answer)}
    q = torch.randn(_MATCH_LOOP_B, 2, 3, generator=generator)
    k = torch.randn(_MATCH_LOOP_B, 4, 3, generator=generator)
    counter = TorchCallCounter()
    with counter:
        run(answer, q, k, on=f"q of shape ({_MATCH_LOOP_B}, 2, 3), k of shape ({_MATCH_LOOP_B}, 4, 3)")
    record["torch_calls"] = counter.count
    record["cases"] = cases = []
    if record["loops"] or counter.count >= _MATCH_LOOP_CALLS:
        return record
    for b, n, m, d, dtype, shared, transposed in _MATCH_SHAPES:
        q = _match_input((b, n, d), dtype, transposed, generator)
        k = _match_input((m, d) if shared else (b, m, d), dtype, transposed, generator)
        on = _match_text(b, n, m, d, dtype, shared, transposed)
        case = {
            "on": on, "b": b, "n": n, "m": m, "d": d, "shared": shared,
            "given": {"q": given(q), "k": given(k)},
        }
        kept_q, kept_k = q.clone(), k.clone()
        try:
            got = run(answer, q, k, on=on)
        except LearnerRaised as raised:
            # The judge decides: a mistake the earlier inputs already show is the one to report.
            record["raised"] = later_error(raised, answer, cases)
            return record
        case["got"] = value_facts(got)
        case["q_after"], case["k_after"] = value_facts(q), value_facts(k)
        left = _left_as_it_was(q, kept_q) and _left_as_it_was(k, kept_k)
        case["again"] = value_facts(run(answer, q, k, on=on + ", second call")) if left else case["got"]
        cases.append(case)
    for on, q, k in _near_ties():
        if not _near_tie_case(answer, run, record, cases, on, q, k):
            break
    return record


_NEAR_TIE_ON = ("one query and two keys whose dot products with it differ only in the last bit "
                "of float32 (0.1 and the next float32 above it)")
_NEAR_TIE_64_ON = ("q of shape (1, 2, 2), k of shape (1, 3, 2), float64: two queries, each with two "
                   "keys whose dot products with it differ only in the last bit of float64, the "
                   "larger first for one query and last for the other")


def _near_ties():
    """Dot products one step of the inputs' own dtype apart, each exact whatever adds it up
    (q holds ones and zeros): exp() of their difference rounds to 1, so a softmax makes them
    equal; so does a float32 copy of float64 scores. argmax then picks the first of the equals,
    the smaller one for query 0 of the float64 case; an argmax that picks the last of equals
    picks the smaller one for query 1."""
    low = torch.tensor(0.1, dtype=torch.float32)
    high = torch.nextafter(low, torch.tensor(1.0))
    yield _NEAR_TIE_ON, torch.ones(1, 1, 1), torch.stack([low, high]).reshape(1, 2, 1)
    one = torch.tensor(1.0, dtype=torch.float64)
    low, top = torch.tensor(0.1, dtype=torch.float64), torch.tensor(0.7, dtype=torch.float64)
    q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64)
    k = torch.tensor([[[low, float(top)],
                       [float(torch.nextafter(low, one)), 0.25],
                       [0.05, float(torch.nextafter(top, -one))]]], dtype=torch.float64)
    yield _NEAR_TIE_64_ON, q, k
    for dtype, d in ((torch.float32, 5), (torch.float64, 3)):
        yield _near_ties_on(dtype, d), torch.eye(d, dtype=dtype).expand(len(_TIE_BASES), d, d), torch.stack(
            [near_ties((4, d), dtype, base=base) for base in _TIE_BASES])


# Around values whose significand lies high in its binade, scaling the scores down (by sqrt(d),
# say) can round two of them, one step apart, to one number; around smaller ones a softmax or
# exp() does. Eight values, one per batch, so that each way of rounding meets one of them.
_TIE_BASES = (1.9, 1.7, 1.3, 1.99, 0.95, 0.3, 3.7, 100.0)


def _near_ties_on(dtype, d):
    name = _dtype_name(dtype)
    return (f"q of shape ({len(_TIE_BASES)}, {d}, {d}), one-hot queries, k of shape ({len(_TIE_BASES)}, 4, {d}), "
            f"{name}: keys one or two steps of {name} apart (near-ties), around a different value in each batch")


def _near_tie_case(answer, run, record, cases, on, q, k):
    """One near tie, recorded as a case; False where the answer raised. (Tried after the others
    whatever they showed: the judge reads the cases in order, so a mistake they show comes
    first; an error here is the judge's to report, after them.)"""
    b, n, d = q.shape
    case = {
        "on": on, "b": b, "n": n, "m": k.shape[-2], "d": d, "shared": False, "near_tie": True,
        "given": {"q": given(q), "k": given(k)},
    }
    try:
        got = run(answer, q, k, on=on)
    except LearnerRaised as raised:
        record["raised"] = later_error(raised, answer)
        return False
    case["got"], case["again"] = value_facts(got), value_facts(got)
    case["q_after"], case["k_after"] = value_facts(q), value_facts(k)
    cases.append(case)
    return True


def _expect_best_match(record):
    """What the reference solution gives on each recorded q and k (in float64, as exact as
    the dot products get), and what the classic mistakes give (argmin, an argmax over the
    queries, k not transposed), for the judge."""
    for case in record["cases"]:
        q, k = tensor_of(case["given"]["q"]).double(), tensor_of(case["given"]["k"]).double()
        b, m, d = case["b"], case["m"], case["d"]
        scores = q @ k.mT
        case["expected"] = value_facts(best_match.reference(q, k))
        case["smallest"] = value_facts(scores.argmin(dim=-1))["values"]
        if case.get("near_tie"):
            case["over_queries"] = case["untransposed"] = None
            continue
        case["over_queries"] = value_facts(scores.argmax(dim=-2))["values"] if b else None
        case["untransposed"] = value_facts((q @ k).argmax(dim=-1))["values"] if d == m and b else None
    return record


def _judge_best_match(record):
    if record["loops"]:
        return MESSAGES("python-loop", found=MESSAGES.text("loop-in-source", loop=record["loops"][0]))
    if record["torch_calls"] >= _MATCH_LOOP_CALLS:
        return MESSAGES("python-loop", found=MESSAGES.text("loop-by-calls", batch=_MATCH_LOOP_B,
                                                           calls=record["torch_calls"]))
    calls = record["calls"]
    for case in record["cases"]:
        on, got, expected = case["on"], case["got"], case["expected"]
        b, n, m = case["b"], case["n"], case["m"]
        for name in ("q", "k"):
            changed = _input_changed(case["given"][name], case[f"{name}_after"], name, on)
            if changed:
                return changed
        kind = got["kind"]
        if "return_types" in kind:
            return MESSAGES("returned-values-and-indices", kind=kind.split('.')[-1], on=on)
        if kind == "tensor":
            shape, values = got["shape"], got.get("values")
            if shape == [] and expected["shape"] != []:
                return MESSAGES("argmax-without-dim", on=on)
            if shape == expected["shape"] and values is not None and got["dtype"] != "torch.int64" and (
                    got["dtype"].startswith("torch.float")):
                return MESSAGES("returned-scores", dtype=got["dtype"], on=on)
            if shape == [b, m] and n != m and b:
                return MESSAGES("argmax-over-queries", on=on, how=MESSAGES.text("one-index-per-key"),
                                what=MESSAGES.text("over-queries-by-shape", shape=shape_text(shape),
                                                   expected_shape=shape_text(expected["shape"])))
            if shape == expected["shape"] and values is not None and not same_values(
                    values, expected["values"], rtol=0, atol=0):
                if case["over_queries"] is not None and same_values(values, case["over_queries"], rtol=0, atol=0):
                    return MESSAGES("argmax-over-queries", what=MESSAGES.text("over-queries-by-values"), on=on,
                                    how=MESSAGES.text("best-query-per-key"))
                if case["untransposed"] is not None and same_values(values, case["untransposed"], rtol=0, atol=0):
                    return MESSAGES("k-not-transposed", on=on)
                if case.get("near_tie"):
                    got_flat = np.asarray(values).reshape(-1)
                    want_flat = np.asarray(expected["values"]).reshape(-1)
                    flat = int(np.flatnonzero(got_flat != want_flat)[0])
                    query = str(flat) if b == 1 else MESSAGES.text("query-of-batch", query=flat % n, batch=flat // n)
                    return MESSAGES("near-tie-rounded", query=query, got=int(got_flat[flat]),
                                    best=int(want_flat[flat]),
                                    dtype=case["given"]["q"]["dtype"].removeprefix("torch."), on=on)
                if same_values(values, case["smallest"], rtol=0, atol=0):
                    return MESSAGES("argmin-not-argmax", on=on)
            if b == 1 and shape == [n] and expected["shape"] == [1, n]:
                note = MESSAGES.text("squeeze-note") if "squeeze()" in calls else ""
                return MESSAGES("squeezed-batch", shape=shape_text(shape), n=n, on=on, note=note)
        problem = tensor_problem(got, expected, on=on, rtol=0, atol=0)
        if problem:
            return problem
        problem = tensor_problem(case["again"], expected, what="the second result", on=on, rtol=0, atol=0)
        if problem:
            return MESSAGES("wrong-on-second-call", problem=problem)
    if record.get("raised"):
        return Raised(record["raised"])
    return None


best_match = Exercise(
    "best_match",
    chapter=CHAPTER,
    title="The best key for every query",
    expects=Function("best_match", ("q", "k"),
                     returns="an int64 tensor of shape (B, n): the index of each query's best key"),
    probe=_probe_best_match,
    expect=_expect_best_match,
    judge=_judge_best_match,
    reference=best_match,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "batched-keys-not-transposed": "Expected size for first two dimensions of batch2 tensor",
        "keys-not-transposed": "shapes cannot be multiplied",
        "bmm-of-2-d-keys": "must be a 3D tensor",
        "transpose-of-missing-dimension": "Dimension out of range",
        "einsum-of-fixed-dimensions": "does not match the number of dimensions",
        "batch-dimension-moved": "must match the size of tensor",
        "loop-over-empty-batch": "stack expects a non-empty TensorList",
        "view-of-non-contiguous": "view size is not compatible",
    }),
    messages=MESSAGES,
)
