"""Chapter 03, M1 — ``SkipBlock``: a subclass with a skip connection."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, a_or_an
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.facts import (
    given,
    not_a_module,
    same_values,
    shape_text,
    tensor_problem,
    value_facts,
)
from course_utils.exercises.models.common import (
    CHAPTER,
    _DEVICE_MISMATCH,
    _DEVICE_NOTE,
    _META,
    _SUPER_INIT_NOTE,
    _device_run,
    _input,
    _linears,
    _module_batches,
    _module_kind,
    _shaped_as,
)


# ============================================================================================
# M1 — a subclass with a skip connection
# ============================================================================================
class SkipBlock(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.project(torch.relu(self.expand(x)))


_SKIP_SIZES = [(6, 16), (3, 5)]


def _skip_branches(model, width, hidden):
    """The two layers, as the learner's own parameters can make them: Linear modules, or raw
    weights used as F.linear(x, W, b) (W of shape (out, in)) or as x @ W + b (W of shape (in, out))."""
    linears = _linears(model)
    expand = next((m for m in linears if (m.in_features, m.out_features) == (width, hidden)), None)
    project = next((m for m in linears if (m.in_features, m.out_features) == (hidden, width)), None)
    if expand is not None and project is not None:
        return [(expand, project)]
    params = list(model.parameters())

    def only(shape):
        found = [p for p in params if tuple(p.shape) == shape]
        return found[0] if len(found) == 1 else None

    w_hw, w_wh, b_h, b_w = only((hidden, width)), only((width, hidden)), only((hidden,)), only((width,))
    if None in (w_hw, w_wh, b_h, b_w):
        return []
    return [
        (lambda x: F.linear(x, w_hw, b_h), lambda h: F.linear(h, w_wh, b_w)),
        (lambda x: x @ w_wh + b_h, lambda h: h @ w_hw + b_w),
    ]


def _unregistered_tensors(model) -> list[str]:
    """Tensors the block keeps as plain attributes (or in a plain list, tuple or dict), where
    nn.Module does not register them: model.parameters() does not list them and model.to()
    does not move them. (Registered parameters and buffers live in _parameters/_buffers, never
    in the instance's __dict__.)"""
    found = []
    for prefix, module in model.named_modules():
        where = f"self.{prefix + '.' if prefix else ''}"
        for name, value in vars(module).items():
            if name.startswith("_") and name in ("_parameters", "_buffers", "_modules"):
                continue
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                found.append(f"{where}{name}")
            elif isinstance(value, (list, tuple, dict)):
                items = list(value.values()) if isinstance(value, dict) else list(value)
                count = sum(isinstance(v, torch.Tensor) for v in items)
                if count:
                    found.append(f"{where}{name} (a plain {type(value).__name__} of {count} tensors)")
    return found


def _probe_skip_block(answer, run):
    """What the learner's block gives on each batch, the batches themselves, and what the block's
    formula gives with the learner's own layers ("formula": it depends on the answer, not on the
    seeds). The shape and dtype a right answer gives are ``_expect_skip_block``'s to add."""
    cases = []
    for seed, (width, hidden) in enumerate(_SKIP_SIZES):
        on = f"SkipBlock({width}, {hidden})"
        torch.manual_seed(seed)  # the learner's layers draw their initial weights
        model = run(answer, width, hidden, on=on)
        case = {"on": on, "width": width, "hidden": hidden, "kind": _module_kind(model)}
        xs = _module_batches(model, run, case, batch=4, seed=10 + 4 * seed)
        if xs is None:
            cases.append(case)
            return cases
        case["n_parameters"] = sum(p.numel() for p in model.parameters())
        case["unregistered"] = _unregistered_tensors(model)  # as built: before any forward
        if case["hidden_layers"]:  # judged from the count; forward would not survive .to()
            cases.append(case)
            return cases
        case["linear_shapes"] = [[m.in_features, m.out_features] for m in _linears(model)]
        branches = _skip_branches(model, width, hidden)
        calls = []
        for x in xs:
            shape = tuple(x.shape)
            again = " (another batch of the first shape)" if len(calls) == len(xs) - 1 else ""
            call_on = f"{on} called on a batch of shape {shape_text(list(shape))}{again}"
            given_x = x.clone()
            got = run(model, given_x, on=call_on)
            call = {"on": call_on, "got": value_facts(got), "x_changed": not torch.equal(given_x, x)}
            # "formula": what the block gives with the learner's own layers. It depends on the
            # answer, so it is no "expected" entry, which the grader compares with its own run.
            with torch.no_grad():
                for index, (expand, project) in enumerate(branches):
                    inner = expand(x)
                    branch = project(torch.relu(inner))
                    call[f"variants{index}"] = {
                        "formula": value_facts(x + branch)["values"],
                        "without_skip": value_facts(branch)["values"],
                        "relu_after_sum": value_facts(torch.relu(x + branch))["values"],
                        "relu_on_branch_end": value_facts(x + torch.relu(branch))["values"],
                        "without_relu": value_facts(x + project(inner))["values"],
                    }
            call["given"] = {"x": given(x)}
            calls.append(call)
        case["calls"] = calls
        case["n_branches"] = len(branches)
        if not all(_shaped_as(call) for call in calls):
            cases.append(case)  # judged from these calls; moving the model would only raise
            return cases
        case["gradients"] = _skip_gradients(model, branches, xs[0], run, on)
        try:
            case["on_meta"] = _device_run(model, xs[0], run, f"{on} {_META}")
        except LearnerRaised as raised:
            # A plain tensor attribute stays on the CPU when the block moves: that, not a
            # tensor made without device=, is what the judge must name.
            if not case["unregistered"] or not any(c in str(raised.error) for c in _DEVICE_MISMATCH):
                raise
            case["on_meta"] = {"kind": "raised", "device": "cpu"}
            case["meta_left_behind"] = True
        cases.append(case)
    return cases


def _gradient_facts(grads):
    return [None if g is None else value_facts(g)["values"] for g in grads]


def _skip_gradients(model, branches, x, run, on):
    """The gradients backward() gives x and every parameter from the learner's output, and those
    the formula gives with the learner's own layers: a skip made from x.detach(), or a branch
    computed under torch.no_grad(), has the right values but cuts the graph."""
    on = f"{on} called on a batch of shape {shape_text(list(x.shape))} that requires grad, then backward()"
    upstream = _input(x.shape, seed=99)
    params = [p for p in model.parameters() if p.requires_grad]  # autograd.grad refuses the rest
    given = x.clone().requires_grad_(True)
    out = run(model, given, on=on)
    record = {"on": on, "got": None, "formula": []}
    if isinstance(out, torch.Tensor) and out.requires_grad and out.shape == x.shape:
        grads = run(torch.autograd.grad, out, [given] + params, upstream, allow_unused=True, on=on)
        record["got"] = _gradient_facts(grads)
    for expand, project in branches:
        mine = x.clone().requires_grad_(True)
        formula = mine + project(torch.relu(expand(mine)))
        record["formula"].append(_gradient_facts(
            torch.autograd.grad(formula, [mine] + params, upstream, allow_unused=True)))
    record["upstream"] = upstream.numpy().copy()
    return record


def _expect_skip_block(cases):
    """What a right block's output is on each batch the record holds: a float32 tensor shaped
    like the batch, part of the graph (its values are the "formula" of the learner's layers)."""
    for case in cases:
        for call in case.get("calls", []):
            call["expected"] = {"kind": "tensor", "shape": list(call["given"]["x"]["shape"]),
                                "dtype": "torch.float32", "device": "cpu", "requires_grad": True}
    return cases


_SKIP_MISTAKES = [
    ("without_skip", "Your output is the branch alone, project(relu(expand(x))): the "
     "skip connection is missing. Add the input back: return x + ..."),
    ("relu_after_sum", "You applied ReLU after adding x, so negative inputs are cut off "
     "on the skip path too. The skip path carries x unchanged: x + project(relu(expand(x)))."),
    ("relu_on_branch_end", "You put a ReLU at the end of the branch too, so the branch can "
     "only add, never subtract. The ReLU goes between the two layers only."),
    ("without_relu", "Your block has no ReLU between the two layers: two linear layers "
     "in a row are one linear layer. Use project(torch.relu(expand(x)))."),
]


def _judge_skip_block(cases):
    for case in cases:
        on, width, hidden = case["on"], case["width"], case["hidden"]
        if "hidden_layers" not in case:
            return Mistake("not-a-module", not_a_module(case["on"], case["kind"], "SkipBlock"))
        if case["hidden_layers"]:
            return Mistake("layers-in-plain-list", (
                f"Your layers sit in {', '.join(case['hidden_layers'])}, which PyTorch does not "
                "look inside (on " + on + "): assign each layer to its own attribute, "
                "self.expand = nn.Linear(...), or use nn.ModuleList."
            ))
        problem = _unregistered_problem(case)
        if problem:
            return problem
        if "n_parameters" not in case:
            return Mistake("built-off-cpu", (
                f"{on} has its parameters on {', '.join(case['devices'])}; build the layers on "
                "the CPU (the default) — the caller moves the model with .to(device) later."
            ))
        expected_count = width * hidden + hidden + hidden * width + width
        if case["n_parameters"] != expected_count or not case["n_branches"]:
            shapes = ", ".join(f"Linear({i}, {o})" for i, o in case["linear_shapes"]) or "none"
            return Mistake("wrong-layers", (
                f"{on} registers {case['n_parameters']} parameters in these linear layers: "
                f"{shapes}. Expected two layers, Linear({width}, {hidden}) then "
                f"Linear({hidden}, {width}): {expected_count} parameters with their biases."
            ))
        for call in case["calls"]:
            got, on_call, expected = call["got"], call["on"], call["expected"]
            if call["x_changed"]:
                return Mistake("changed-x-in-place", (
                    f"forward changed its input x in place (on {on_call}): the caller's batch is "
                    "not yours to change. Return x + ... as a new tensor (not x += ...)."
                ))
            problem = tensor_problem(got, expected, what="forward's output", on=on_call,
                                     check_device=False)
            if problem:
                return problem
            variants = [call[f"variants{i}"] for i in range(case["n_branches"])]
            values = got["values"]
            if any(same_values(values, v["formula"], rtol=1e-4, atol=1e-5) for v in variants):
                if not got["requires_grad"]:
                    return Mistake("cut-from-graph", (
                        f"forward's output does not require grad (on {on_call}): it is cut off "
                        "from the layers' parameters, so training could not change them. "
                        "Compute it without torch.no_grad(), detach() or .data."
                    ))
                continue
            first = case["calls"][0]["got"]
            if call is not case["calls"][0] and first.get("shape") == got["shape"] and same_values(
                values, first["values"], rtol=0, atol=0
            ):
                return Mistake("cached-output", (
                    f"forward returned the same output as for the first batch (on {on_call}): it "
                    "keeps a result from an earlier call. Compute the output from the x of each call."
                ))
            if same_values(values, call["given"]["x"]["values"], rtol=1e-4, atol=1e-5):
                return Mistake("returned-x",
                               f"forward returned its input x unchanged (on {on_call}); expected x + project(relu(expand(x))).")
            for key, message in _SKIP_MISTAKES:
                if any(same_values(values, v[key], rtol=1e-4, atol=1e-5) for v in variants):
                    return Mistake(key.replace("_", "-"), f"{message} (on {on_call})")
            return tensor_problem(got, {**expected, "values": variants[0]["formula"]},
                                  what="forward's output", on=on_call, rtol=1e-4, atol=1e-5,
                                  check_device=False) + (
                " Expected x + project(relu(expand(x))), with your own two layers."
            )
        problem = _skip_gradient_problem(case)
        if problem:
            return problem
        meta = case.get("on_meta") or {"kind": "tensor", "device": "meta"}
        if meta["kind"] != "tensor" or meta["device"] != "meta":
            return Mistake("output-off-device", (
                f"forward's output is {a_or_an(meta['kind'])} on {meta.get('device', '?')} when the "
                f"model and the batch are on meta ({on} {_META}); expected a tensor on the "
                "batch's device: compute it from x and the layers only."
            ))
    return None


def _unregistered_problem(case):
    """Plain tensor attributes that the block's parameter count misses, or that stayed on the
    CPU when the block moved to meta: named as what they are, not as a tensor made without
    device= (which is advice such an answer already follows: its tensors are made in __init__)."""
    unregistered = case.get("unregistered")
    if not unregistered:
        return None
    width, hidden, on = case["width"], case["hidden"], case["on"]
    expected_count = width * hidden + hidden + hidden * width + width
    if case["n_parameters"] == expected_count and not case.get("meta_left_behind"):
        return None
    return Mistake("tensors-not-registered", (
        f"Your block keeps tensors as plain attributes: {', '.join(unregistered)} (on {on}). "
        "nn.Module registers only nn.Parameter, buffers and submodules, so these are invisible "
        f"to it: model.parameters() lists {case['n_parameters']} numbers instead of "
        f"{expected_count} (an optimizer would never train the rest), and model.to(device) "
        "leaves them behind on the CPU"
        + (" (moved to meta, your forward then mixed devices)" if case.get("meta_left_behind") else "")
        + ". Wrap each weight and bias in nn.Parameter(...) (or use nn.Linear layers)"
        + ("; a plain list or dict hides even parameters: use nn.ParameterList or nn.ParameterDict"
           if any("(a plain" in name for name in unregistered) else "")
        + "; a tensor that must move but not train goes in self.register_buffer(name, tensor)."
    ))


def _grads_agree(got, expected) -> bool:
    if got is None or expected is None:
        return (got is None or not np.any(got)) and (expected is None or not np.any(expected))
    return same_values(got, expected, rtol=1e-4, atol=1e-5)


def _skip_gradient_problem(case):
    record = case.get("gradients")
    if record is None or record["got"] is None or not record["formula"]:
        return None  # an output that does not require grad, or no two layers: judged elsewhere
    got, on = record["got"], record["on"]
    variants = record["formula"]
    if any(all(_grads_agree(g, e) for g, e in zip(got, expected)) for expected in variants):
        return None
    expected = variants[0]
    params_right = any(all(_grads_agree(g, e) for g, e in zip(got[1:], exp[1:])) for exp in variants)
    if not params_right:
        cut = [i for i, (g, e) in enumerate(zip(got[1:], expected[1:]))
               if (g is None or not np.any(g)) and e is not None and np.any(e)]
        if cut:
            which = "your layers' parameters" if len(cut) == len(got) - 1 else (
                f"{len(cut)} of your layers' {len(got) - 1} parameters")
            return Mistake("branch-cut-from-graph", (
                f"backward() from forward's output gives {which} no gradient (on {on}): the "
                "output has the right values, but the graph from it back to the layers is cut, "
                "so training would never change them. Compute the branch with recorded "
                "operations (no torch.no_grad(), detach() or .data on the way)."
            ))
        return Mistake("wrong-param-gradients", (
            f"backward() from forward's output gives your layers' parameters the wrong gradients "
            f"(on {on}), although the output has the right values. Expected those of "
            "x + project(relu(expand(x))), computed with recorded operations."
        ))
    x_grad, right = got[0], expected[0]
    if x_grad is None or same_values(x_grad, np.asarray(right) - record["upstream"], rtol=1e-4, atol=1e-5):
        return Mistake("detached-skip", (
            f"backward() gives x no gradient through the skip path (on {on}): the x you add back "
            "is cut from the graph, so the gradient cannot flow around the branch, which is what "
            "a skip connection is for. Add x itself (no x.detach() or x.data)."
        ))
    return Mistake("wrong-x-gradient", (
        f"backward() gives x the wrong gradient (on {on}), although the output has the right "
        "values. Expected that of x + project(relu(expand(x))), computed with recorded operations."
    ))


SkipBlock = Exercise(
    "SkipBlock",
    chapter=CHAPTER,
    title="A block with a skip connection",
    expects=Function("SkipBlock", ("width", "hidden"), returns="an nn.Module (your class's instance)"),
    probe=_probe_skip_block,
    expect=_expect_skip_block,
    judge=_judge_skip_block,
    reference=SkipBlock,
    passed_message=(
        "Correct: two registered layers, a ReLU between them, and the input added back. "
        "nn.Sequential cannot express that last step; a subclass can."
    ),
    hints=[
        "In __init__, call super().__init__() first, then assign the two layers to attributes: "
        "that is what registers their parameters.",
        "In forward, compute the branch, Linear → ReLU → Linear, and return it plus the input.",
        "self.expand = nn.Linear(width, hidden); self.project = nn.Linear(hidden, width); "
        "forward returns x + self.project(torch.relu(self.expand(x))).",
    ],
    error_notes=[
        _SUPER_INIT_NOTE,
        _DEVICE_NOTE,
        (
            "mat1 and mat2 shapes cannot be multiplied",
            "a layer whose in_features does not match what it is given: expand takes width "
            "features, project takes hidden.",
            "layer-sizes-mismatch",
        ),
        (
            "a leaf Variable that requires grad",
            "an in-place change (+=) of a tensor autograd tracks: write x + ..., a new tensor.",
            "in-place-add",
        ),
    ],
)
