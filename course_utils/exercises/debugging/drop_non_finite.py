"""Chapter 06, D5: drop the examples that hold a nan or an inf (the exercise ``drop_non_finite``).

Engine: applies edges.edge_tensor (every edge of float32 and float16, one per example and three
per example: ±0, subnormals, the largest values, magnitudes whose square or exp overflows, ±inf,
nan); hand-written because its named mistakes (nan only, a mask used as
indices, values replaced, a derived value that overflows, the batch dimension squeezed) are read
from what the answer kept, which quick.tensor_function would not name.
"""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.debugging.common import CHAPTER, _kind, _generator
from course_utils.exercises.edges import edge_tensor
from course_utils.exercises.facts import given, same_values, shape_text, tensor_of, value_facts
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.messages import Message, Messages


MESSAGES = Messages("drop_non_finite", {
    "not-two-tensors-kinds": "Return two tensors, x[keep] and y[keep] (on {on}); got {x_kind} and {y_kind}.",
    "wrong-keep-mask-count": (
        "Your function kept {kept} example{plural}; {want} are finite (on {on}): keep exactly the "
        "examples whose every value is finite."),
    "mask-per-value": (
        "your mask has one entry per value, not per example: reduce over every dimension but the "
        "first, e.g. torch.isfinite(x).flatten(start_dim=1).all(dim=1)."),
    "view-of-non-contiguous": (
        "the check's input is non-contiguous (a transposed tensor, as x.transpose(1, 2) or "
        "permute() give): .view() needs a contiguous memory layout; use .reshape(), which copies "
        "only when it must."),
    "float-indices": (
        "when no example is kept, torch.tensor([]) of an empty list of indices is a float tensor, "
        "which cannot index; give it dtype=torch.long, or index with the boolean mask itself, "
        "x[keep]."),
    "mean-of-integers": (
        "the check passes integer features too (int64 counts), and mean() works on floats only. "
        "Test the values themselves: torch.isfinite works on every dtype (integers are always "
        "finite)."),
    "stack-of-nothing-kept": (
        "when no example is kept, the list you stack is empty; a boolean mask, x[keep], gives an "
        "empty tensor with the right shape instead."),
    "passed": (
        "Correct: every example with a nan, inf or -inf anywhere in its features is gone, with its "
        "label, whatever the shape of one example."),
    "hint-1": "torch.isfinite(x) is True where a value is neither nan nor ±inf; torch.isnan misses inf.",
    "hint-2": (
        "You need one True/False per example: flatten each example's values, x.flatten(start_dim=1), "
        "then .all(dim=1). dim=1 alone only works for tables."),
    "hint-3": "keep = torch.isfinite(x).flatten(start_dim=1).all(dim=1); return x[keep], y[keep]",
    "in-place-on-input": (
        "Your function changed the tensors it was given (on {on}); build new ones with boolean "
        "indexing, x[keep], and leave the data set's tensors as they were."),
    "not-two-tensors": "Your function returned {kind} (on {on}); return the two tensors: return x[keep], y[keep].",
    "moved-device": (
        "Your tensors are on {x_device} and {y_device}; the x and y you were given are on the CPU (on "
        "{on}). Return them where they were: x[keep], y[keep]."),
    "squeezed-index": (
        "Exactly one example is finite here, and your x has shape {shape}, without the batch "
        "dimension; expected {expected_shape} (on {on}). Indexing with a single number (what "
        ".nonzero().squeeze() gives for one match) drops dimension 0; index with the boolean mask "
        "itself, x[keep], which keeps it however many examples remain."),
    "dropped-features": (
        "Your x has shape {shape}; expected {expected_shape} (on {on}). Drop whole examples (along dimension "
        "0), not features or single values: a boolean mask with one entry per example, x[keep]."),
    "any-not-all": (
        "Your x still has all {n} examples, unchanged (on {on}), though {n_want} of them hold a nan "
        "or an inf: nothing was dropped. Keep an example only when every one of its values is finite:"
        " torch.isfinite, reduced with .all() over each example's values."),
    "mask-as-indices": (
        "Your x has all {n} examples, each one a copy of example 0 or example 1 (on {on}): your "
        "True/False mask was used as numbers, so x[mask.long()] (or index_select with it) picks "
        "example 1 for every True and example 0 for every False. Index with the boolean mask itself, "
        "x[keep], which keeps the examples where it is True."),
    "wrong-keep-mask": (
        "Your x has all {n} examples, but not the examples you were given (on {on}); {want} of them "
        "are finite. Keep exactly those, in their order: x[keep] with a boolean mask, one True/False "
        "per example."),
    "replaced-bad-values": (
        "Your x still has all {n} examples (on {on}): replacing the bad values (nan_to_num, zeros) "
        "keeps examples whose features are invented. Drop those examples, and their labels with them."),
    "tested-derived-values": (
        "Your function kept {kept} example{plural}; {want} are finite (on {on}): it dropped an example"
        " whose values are all finite, only large (their sum overflows {dtype} to inf). Whatever your"
        " test computes from the values made them count as bad: a sum or mean of large values "
        "overflows, so does a conversion to a narrower dtype (float64 to float32, for instance), and "
        "a limit on their size drops finite values. Test every value itself with torch.isfinite, in "
        "its own dtype, then reduce the True/False per example with .all()."),
    "tested-narrower-copy": (
        "Your function kept {kept} example{plural}; {want} are finite (on {on}): it dropped an example"
        " whose values are all finite in {dtype}, only larger than {narrow} can hold (its largest "
        "finite value is {largest:.4g}). Your test saw them as inf: a conversion from {dtype} to "
        "{narrow} (x.float(), x.half(), .to(...)) makes them inf, and a limit on their size drops "
        "finite values as well. Test every value itself with torch.isfinite, in its own dtype "
        "{dtype}, then reduce the True/False per example with .all()."),
    "converted-x": (
        "Your x has dtype {dtype}; the x you were given is {expected_dtype} (on {on}). Keep the examples as "
        "they are: index x with the mask, without converting it."),
    "wrong-examples": "Your x holds the wrong examples (on {on}); keep the finite ones, in their order.",
    "converted-y": (
        "Your y has dtype {dtype}; the labels you were given are {expected_dtype} (on {on}). Keep them as "
        "they are: y[keep]."),
    "labels-not-filtered": (
        "Your x is right but your y is not (on {on}): the labels must lose the same examples as x, so"
        " that x[i] still goes with y[i]. Index both with the same mask."),
    "nan-only": Message(
        "Your function kept {kept} example{plural}; {want} are finite (on {on}): it finds nan but not "
        "inf. torch.isnan (and x != x) sees nan only; torch.isfinite is False for nan, inf and -inf "
        "alike.",
        advises=('torch.isfinite(x)',)),
})


# ============================================================================================
# D5 — drop the examples that hold a nan or an inf
# ============================================================================================
def drop_non_finite(x, y):
    keep = torch.isfinite(x).flatten(start_dim=1).all(dim=1)
    return x[keep], y[keep]


def _non_finite_cases():
    g = _generator(5)
    table = torch.randn(7, 4, generator=g)
    table[1, 2] = float("nan")
    table[3, 0] = float("inf")
    table[5, 3] = float("-inf")
    # Images stored channels-last and viewed as (N, C, H, W): a non-contiguous tensor.
    images = torch.rand(6, 3, 3, generator=g).transpose(1, 2).unsqueeze(1)
    images[0, 0, 2, 1] = float("nan")
    images[4, 0, 0, 0] = float("inf")
    clean = torch.randn(4, 2, generator=g, dtype=torch.float64)
    # float16 features: row 0's values are finite, but their sum overflows to inf.
    half = torch.tensor([[40000.0, 40000.0], [float("nan"), 1.0], [1.0, 2.0], [-60000.0, -9000.0]],
                        dtype=torch.float16)
    # float64 features: row 1's values are finite, but their sum overflows float64 as well; row
    # 3's sum does not, but 1e100 is beyond float32 (a test of a float32 copy drops it).
    huge = torch.tensor([[1.0, -2.0], [1.5e308, 1.5e308], [float("-inf"), 3.0], [1e100, 2.0]],
                        dtype=torch.float64)
    # Exactly one example kept: an index that is a single number would drop the batch dimension.
    single = torch.rand(3, 2, 2, generator=g)
    single[0, 1, 1] = float("-inf")
    single[2, 0, 0] = float("nan")
    all_bad = torch.tensor([[1.0, float("nan"), 2.0], [float("inf"), 0.0, 1.0]])
    counts = torch.tensor([[3, 0, 7], [1, 2, 2], [5, 5, 0]])
    return [
        ("a table of 7 examples × 4 features, with a nan, an inf and a -inf", table,
         torch.arange(7) * 10),
        ("6 images of shape (1, 3, 3), a non-contiguous tensor, with a nan in one and an inf "
         "in another", images, torch.arange(6) * 10),
        ("4 float64 examples, all finite", clean, torch.arange(4) * 10),
        ("4 float16 examples, one with a nan; the others are finite (40000 + 40000 overflows "
         "float16, but no value does)", half, torch.tensor([1.5, 2.5, 3.5, 4.5])),
        ("4 float64 examples, one with a -inf; the others are finite (1.5e308 + 1.5e308 "
         "overflows float64, and 1e100 is beyond float32, but no value is inf or nan)", huge,
         torch.tensor([7, 8, 9, 10])),
        ("3 images of shape (2, 2), one with a -inf and one with a nan: exactly one is kept",
         single, torch.tensor([0, 1, 2])),
        ("2 examples that both hold a nan or an inf: nothing is kept", all_bad, torch.tensor([4, 2])),
        ("3 examples of int64 counts (integers are always finite)", counts, torch.tensor([0, 1, 0])),
        # The dtype's edges (edges.py): one per example, so each example is one edge (a value
        # whose square overflows, a subnormal, the largest value...), and three per example.
        ("every edge of float32, one per example (a table of 1 feature: ±0, subnormals, the "
         "largest values, ±inf, nan)", edge_tensor((18, 1), torch.float32), torch.arange(18) * 3 + 1),
        ("float16's edges, three per example", edge_tensor((6, 3), torch.float16, shift=1),
         torch.arange(6) * 3 + 1),  # labels no index computed by the check equals
    ]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, nan included (torch.equal says nan != nan)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    return torch.equal(nan_a, nan_b) and torch.equal(a.masked_fill(nan_a, 0), b.masked_fill(nan_b, 0))


def _probe_drop_non_finite(answer, run):
    """What the answer returned on each input, and the inputs themselves ("given"): never which
    examples a right answer keeps (``_expect_drop_non_finite`` computes that, and what the
    classic mistakes keep, on the judge's side)."""
    cases = []
    record = {"cases": cases}
    for on, x, y in _non_finite_cases():
        x_in, y_in = x.clone(), y.clone()
        try:
            got = run(answer, x_in, y_in, on=on)
        except LearnerRaised as raised:
            # The judge decides: what is already wrong on the simple table is the mistake to
            # name, before an error that a later, harder input (images, 4-D) led to.
            record["raised"] = later_error(raised, answer, cases)
            break
        case = {
            "on": on,
            "n": len(x),
            "dtype": str(x.dtype).removeprefix("torch."),
            "kind": _kind(got),
            "given": {"x": given(x), "y": given(y)},
            "changed_input": not (_same(x_in, x) and _same(y_in, y)),
        }
        if isinstance(got, (tuple, list)) and len(got) == 2:
            case["x"] = value_facts(got[0])
            case["y"] = value_facts(got[1])
            # Every example back, untouched: nothing was dropped (rather than values replaced).
            case["x_is_input"] = isinstance(got[0], torch.Tensor) and got[0].device.type == "cpu" and _same(
                torch.Tensor.detach(got[0]), x)
        cases.append(case)
    return record


def _expect_drop_non_finite(record):
    """What the reference keeps of each recorded input, and what the classic mistakes keep (a
    test of nan only, a test of each example's sum), for the judge."""
    for case in record["cases"]:
        x, y = tensor_of(case["given"]["x"]), tensor_of(case["given"]["y"])
        expected_x, expected_y = drop_non_finite.reference(x, y)
        case["expected_x"] = value_facts(expected_x)
        case["expected_y"] = value_facts(expected_y)
        rows = x.flatten(start_dim=1)
        keep = torch.isfinite(rows).all(1)
        by_sum = torch.isfinite(rows.sum(1)) if x.is_floating_point() else keep
        case["nan_only_rows"] = int((~torch.isnan(rows).any(1)).sum()) if x.is_floating_point() else len(x)
        case["by_sum"] = value_facts(x[by_sum]) if not torch.equal(by_sum, keep) else None
        # A test on a narrower copy (x.float() of float64, x.half() of float32): large finite
        # values become inf there.
        narrow = _NARROWER.get(x.dtype)
        by_narrow = torch.isfinite(rows.to(narrow)).all(1) if narrow is not None else keep
        case["by_narrower"] = None if torch.equal(by_narrow, keep) else {
            "dtype": str(narrow).removeprefix("torch."), "largest": float(torch.finfo(narrow).max),
            "x": value_facts(x[by_narrow])}
        # The mask turned into numbers (keep.long(), .int()) and used as indices: x[0] and x[1].
        case["mask_as_indices"] = value_facts(x[keep.long()])
        # The input as given, to tell replaced bad values from other changes.
        case["finite_as_given"] = value_facts(x) if x.is_floating_point() else None
    return record


_NARROWER = {torch.float64: torch.float32, torch.float32: torch.float16}


def _judge_drop_non_finite(record):
    problem = _judge_non_finite_cases(record["cases"])
    if problem is None and record.get("raised"):
        return Raised(record["raised"])
    return problem


def _finite_in_place(x, given_x) -> bool:
    """True when every finite value of the input is still in its place in x (only the nan and
    inf were changed): what replacing the bad values gives."""
    if given_x is None or x["shape"] != given_x["shape"] or "values" not in x or "values" not in given_x:
        return True  # nothing to tell replacing from other changes: the usual message
    got = np.asarray(x["values"], dtype=np.float64)
    given = np.asarray(given_x["values"], dtype=np.float64)
    finite = np.isfinite(given)
    return bool(np.array_equal(got[finite], given[finite]))


def _judge_non_finite_cases(cases):
    for case in cases:
        on = case["on"]
        if case["changed_input"]:
            return MESSAGES("in-place-on-input", on=on)
        if "x" not in case:
            return MESSAGES("not-two-tensors", kind=case['kind'], on=on)
        x, y, expected_x = case["x"], case["y"], case["expected_x"]
        if x["kind"] != "tensor" or y["kind"] != "tensor":
            return Mistake("not-two-tensors", MESSAGES.text("not-two-tensors-kinds", on=on, x_kind=x['kind'], y_kind=y['kind']))
        if x["device"] != "cpu" or y["device"] != "cpu":
            return MESSAGES("moved-device", x_device=x['device'], y_device=y['device'], on=on)
        if (expected_x["shape"][0] == 1 and x["shape"] == expected_x["shape"][1:]
                and y["shape"] == case["expected_y"]["shape"][1:]):
            return MESSAGES("squeezed-index",
                            shape=shape_text(x['shape']),
                            expected_shape=shape_text(expected_x['shape']),
                            on=on)
        if x["shape"][1:] != expected_x["shape"][1:]:
            return MESSAGES("dropped-features",
                            shape=shape_text(x['shape']),
                            expected_shape=shape_text(expected_x['shape']),
                            on=on)
        kept, want = x["shape"][0], expected_x["shape"][0]
        if kept == case["n"] and want != case["n"] and case.get("x_is_input"):
            return MESSAGES("any-not-all", n=case['n'], on=on, n_want=case['n'] - want)
        if kept == case["n"] and want != case["n"] and same_values(x["values"], case["mask_as_indices"]["values"]):
            return MESSAGES("mask-as-indices", n=case['n'], on=on)
        if kept == case["n"] and want != case["n"] and not _finite_in_place(x, case.get("finite_as_given")):
            return MESSAGES("wrong-keep-mask", n=case['n'], on=on, want=want)
        if kept == case["n"] and want != case["n"]:
            return MESSAGES("replaced-bad-values", n=case['n'], on=on)
        narrower = case.get("by_narrower")
        if narrower is not None and x["shape"] == narrower["x"]["shape"] and same_values(
                x["values"], narrower["x"]["values"]):
            return MESSAGES("tested-narrower-copy", kept=kept, plural='s' if kept != 1 else '',
                            want=want, on=on, dtype=case['dtype'], narrow=narrower["dtype"],
                            largest=narrower["largest"])
        by_sum = case["by_sum"]
        if by_sum is not None and x["shape"] == by_sum["shape"] and same_values(x["values"], by_sum["values"]):
            return MESSAGES("tested-derived-values",
                            kept=kept,
                            plural='s' if kept != 1 else '',
                            want=want,
                            on=on,
                            dtype=case['dtype'])
        if kept != want:
            if kept == case["nan_only_rows"]:
                return MESSAGES("nan-only", kept=kept, plural='s' if kept != 1 else '', want=want, on=on)
            return Mistake("wrong-keep-mask", MESSAGES.text(
                "wrong-keep-mask-count", kept=kept, plural='s' if kept != 1 else '', want=want, on=on))
        if x["dtype"] != expected_x["dtype"]:
            return MESSAGES("converted-x",
                            dtype=x['dtype'].removeprefix('torch.'),
                            expected_dtype=expected_x['dtype'].removeprefix('torch.'),
                            on=on)
        if not same_values(x["values"], expected_x["values"]):
            return MESSAGES("wrong-examples", on=on)
        expected_y = case["expected_y"]
        # The dtype first: labels converted (float labels cast to int64) also change values.
        if y["shape"] == expected_y["shape"] and y["dtype"] != expected_y["dtype"]:
            return MESSAGES("converted-y",
                            dtype=y['dtype'].removeprefix('torch.'),
                            expected_dtype=expected_y['dtype'].removeprefix('torch.'),
                            on=on)
        if y["shape"] != expected_y["shape"] or not same_values(y["values"], expected_y["values"]):
            return MESSAGES("labels-not-filtered", on=on)
    return None


drop_non_finite = Exercise(
    "drop_non_finite",
    chapter=CHAPTER,
    title="Drop the examples that hold a nan or an inf",
    expects=Function("drop_non_finite", ("x", "y"), returns="a tuple of two tensors, x[keep] and y[keep]"),
    probe=_probe_drop_non_finite,
    expect=_expect_drop_non_finite,
    judge=_judge_drop_non_finite,
    reference=drop_non_finite,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "mask-per-value": "The shape of the mask",
        "view-of-non-contiguous": "view size is not compatible",
        "float-indices": "tensors used as indices must be long",
        "mean-of-integers": "could not infer output dtype",
        "stack-of-nothing-kept": "stack expects a non-empty TensorList",
    }),
    messages=MESSAGES,
)
