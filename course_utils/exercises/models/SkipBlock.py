"""Chapter 03, M1 — ``SkipBlock``: a subclass with a skip connection.

Engine: applies edges.edge_tensor / edges.generated / edges.resized (module_trials: the float32
edges a layer's input may hold, zeros, an empty batch), states.module_states("eval", "no-grad")
and the block in float64, and compares what each call leaves (modes, settings, the caller's x,
the parameters) with the reference's; hand-written because the block is judged against the
formula computed with the learner's own layers (Linear modules or raw parameters), and a block
with width == hidden is built to count its parameters.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function, a_or_an
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.facts import (
    given,
    not_a_module,
    same_values,
    shape_text,
    tensor_of,
    tensor_problem,
    value_facts,
)
from course_utils.exercises.messages import Messages
from course_utils.exercises.models.common import (
    CHAPTER,
    NOTE_CLUES,
    NOTE_TEXTS,
    _DEVICE_MISMATCH,
    _META,
    _device_run,
    _input,
    _is_lazy,
    _linears,
    _module_batches,
    _module_kind,
    _shaped_as,
)
from course_utils.exercises.models.module_trials import (
    LEFT_TEXTS,
    expected_of,
    fresh_instance,
    left_problem,
    parameter_values,
    parameters_changed,
    trial_calls,
)

MESSAGES = Messages("SkipBlock", {
    "passed": (
        "Correct: two registered layers, a ReLU between them, and the input added back. "
        "nn.Sequential cannot express that last step; a subclass can."
    ),
    "hint-1": (
        "In __init__, call super().__init__() first, then assign the two layers to attributes: "
        "that is what registers their parameters."
    ),
    "hint-2": "In forward, compute the branch, Linear → ReLU → Linear, and return it plus the input.",
    "hint-3": (
        "self.expand = nn.Linear(width, hidden); self.project = nn.Linear(hidden, width); "
        "forward returns x + self.project(torch.relu(self.expand(x)))."
    ),
    "not-a-module": "{text}",
    "layers-in-plain-list": (
        "Your layers sit in {where}, which PyTorch does not "
        "look inside (on {on}): assign each layer to its own attribute, "
        "self.expand = nn.Linear(...), or use nn.ModuleList."
    ),
    "tensors-not-registered": (
        "Your block keeps tensors as plain attributes: {names} (on {on}). "
        "nn.Module registers only nn.Parameter, buffers and submodules, so these are invisible "
        "to it: model.parameters() lists {found} numbers instead of "
        "{count} (an optimizer would never train the rest), and model.to(device) "
        "leaves them behind on the CPU{mixed}. Wrap each weight and bias in nn.Parameter(...) "
        "(or use nn.Linear layers){containers}; a tensor that must move but not train goes in "
        "self.register_buffer(name, tensor)."
    ),
    "built-off-cpu": (
        "{on} has its parameters on {devices}; build the layers on "
        "the CPU (the default) — the caller moves the model with .to(device) later."
    ),
    "wrong-layers": (
        "{on} registers {found} parameters in these linear layers: "
        "{shapes}. Expected two layers, Linear({width}, {hidden}) then "
        "Linear({hidden}, {width}): {count} parameters with their biases."
    ),
    "changed-x-in-place": (
        "forward changed its input x in place (on {on}): the caller's batch is "
        "not yours to change. Return x + ... as a new tensor (not x += ...)."
    ),
    "cut-from-graph": (
        "forward's output does not require grad (on {on}): it is cut off "
        "from the layers' parameters, so training could not change them. "
        "Compute it without torch.no_grad(), detach() or .data."
    ),
    "cached-output": (
        "forward returned the same output as for the first batch (on {on}): it "
        "keeps a result from an earlier call. Compute the output from the x of each call."
    ),
    "returned-x": "forward returned its input x unchanged (on {on}); expected x + project(relu(expand(x))).",
    "without-skip": (
        "Your output is the branch alone, project(relu(expand(x))): the "
        "skip connection is missing. Add the input back: return x + ... (on {on})"
    ),
    "relu-after-sum": (
        "You applied ReLU after adding x, so negative inputs are cut off "
        "on the skip path too. The skip path carries x unchanged: x + project(relu(expand(x))). (on {on})"
    ),
    "relu-on-branch-end": (
        "You put a ReLU at the end of the branch too, so the branch can "
        "only add, never subtract. The ReLU goes between the two layers only. (on {on})"
    ),
    "without-relu": (
        "Your block has no ReLU between the two layers: two linear layers "
        "in a row are one linear layer. Use project(torch.relu(expand(x))). (on {on})"
    ),
    # added to the generic comparison's words (facts.tensor_problem)
    "the-formula": "Expected x + project(relu(expand(x))), with your own two layers.",
    "branch-cut-from-graph": (
        "backward() from forward's output gives {which} no gradient (on {on}): the "
        "output has the right values, but the graph from it back to the layers is cut, "
        "so training would never change them. Compute the branch with recorded "
        "operations (no torch.no_grad(), detach() or .data on the way)."
    ),
    "wrong-param-gradients": (
        "backward() from forward's output gives your layers' parameters the wrong gradients "
        "(on {on}), although the output has the right values. Expected those of "
        "x + project(relu(expand(x))), computed with recorded operations."
    ),
    "detached-skip": (
        "backward() gives x no gradient through the skip path (on {on}): the x you add back "
        "is cut from the graph, so the gradient cannot flow around the branch, which is what "
        "a skip connection is for. Add x itself (no x.detach() or x.data)."
    ),
    "wrong-x-gradient": (
        "backward() gives x the wrong gradient (on {on}), although the output has the right "
        "values. Expected that of x + project(relu(expand(x))), computed with recorded operations."
    ),
    **LEFT_TEXTS,
    "output-off-device": (
        "forward's output is {kind_with_article} on {device} when the "
        "model and the batch are on meta ({on} " + _META + "); expected a tensor on the "
        "batch's device: compute it from x and the layers only."
    ),
    "layer-before-super-init": NOTE_TEXTS["layer-before-super-init"],
    **{key: NOTE_TEXTS[key] for key in ("copied-out-of-device", "tensor-made-on-cpu")},
    "layer-sizes-mismatch": (
        "a layer whose in_features does not match what it is given: expand takes width "
        "features, project takes hidden."
    ),
    "in-place-add": "an in-place change (+=) of a tensor autograd tracks: write x + ..., a new tensor.",
})


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
        values = parameter_values(model)
        for x in xs:
            shape = tuple(x.shape)
            again = " (another batch of the first shape)" if len(calls) == len(xs) - 1 else ""
            call_on = f"{on} called on a batch of shape {shape_text(list(shape))}{again}"
            calls.append(_skip_call(model, branches, x, x.clone(), run, call_on))
            if len(calls) == 1:
                case["params_changed"] = parameters_changed(model, values)
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
        # the states, the edges and float64, on a second instance (this one is on meta); not for a
        # block with plain tensor attributes, which .to(torch.float64) leaves behind as .to(meta) does
        if seed == 0 and not case["unregistered"]:
            model = fresh_instance(answer, (width, hidden), run, on, seed=seed, first_batch=xs[0])
            branches = _skip_branches(model, width, hidden)
            case["trials"] = trial_calls(model, xs[0], run, on, lambda m, x, given_x, call_on: _skip_call(
                m, branches, x, given_x, run, call_on), seed=40)
        cases.append(case)
    cases.append(_square_block(answer, run))
    return cases


def _square_block(answer, run):
    """SkipBlock(4, 4): both layers have the same shape, so a block that reuses one layer for
    both (self.project = self.expand) has half the parameters. Only the count is recorded."""
    width = hidden = 4
    on = f"SkipBlock({width}, {hidden})"
    torch.manual_seed(len(_SKIP_SIZES))
    model = run(answer, width, hidden, on=on)
    case = {"on": on, "width": width, "hidden": hidden, "kind": _module_kind(model), "square": True}
    if isinstance(model, nn.Module):
        if _is_lazy(model):
            run(model, _input((2, width), seed=7), on=f"{on} called on a first batch")
        case["n_parameters"] = sum(p.numel() for p in model.parameters())
        case["linear_shapes"] = [[m.in_features, m.out_features] for m in _linears(model)]
    return case


def _skip_call(model, branches, x, given_x, run, call_on):
    """One call of the learner's block on ``given_x`` (a copy of ``x``), and what the block's
    formula gives with the learner's own layers on ``x`` ("formula" and its classic mistakes:
    they depend on the answer, so they are no "expected" entries, which the grader compares
    with its own run)."""
    got = run(model, given_x, on=call_on)
    call = {"on": call_on, "got": value_facts(got), "x_changed": not torch.equal(given_x, x)}
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
    return call


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
        width, hidden = case["width"], case["hidden"]
        with torch.random.fork_rng(devices=[]):  # the reference's layers draw their weights
            for call in case.get("trials", []):
                call["expected"] = expected_of(call, lambda: SkipBlock.reference(width, hidden))
            if "params_changed" in case:
                model = SkipBlock.reference(width, hidden)
                values = parameter_values(model)
                model(tensor_of(case["calls"][0]["given"]["x"]))
                case["expected_params_changed"] = parameters_changed(model, values)
    return cases


_SKIP_MISTAKES = ["without_skip", "relu_after_sum", "relu_on_branch_end", "without_relu"]


def _judge_skip_block(cases):
    for case in cases:
        on, width, hidden = case["on"], case["width"], case["hidden"]
        if "hidden_layers" not in case and not case.get("square"):
            return MESSAGES("not-a-module", text=not_a_module(case["on"], case["kind"], "SkipBlock"))
        if case.get("hidden_layers"):
            return MESSAGES("layers-in-plain-list", where=", ".join(case["hidden_layers"]), on=on)
        problem = _unregistered_problem(case)
        if problem:
            return problem
        if "n_parameters" not in case:
            if case.get("square"):
                return MESSAGES("not-a-module", text=not_a_module(case["on"], case["kind"], "SkipBlock"))
            return MESSAGES("built-off-cpu", on=on, devices=", ".join(case["devices"]))
        expected_count = width * hidden + hidden + hidden * width + width
        if case["n_parameters"] != expected_count or (not case.get("square") and not case["n_branches"]):
            shapes = ", ".join(f"Linear({i}, {o})" for i, o in case["linear_shapes"]) or "none"
            return MESSAGES("wrong-layers", on=on, found=case["n_parameters"], shapes=shapes, width=width,
                            hidden=hidden, count=expected_count)
        if case.get("square"):
            continue
        if case.get("params_changed") and case["params_changed"] != case.get("expected_params_changed"):
            return MESSAGES("forward-changed-params", names=", ".join(case["params_changed"]),
                            on=case["calls"][0]["on"])
        for call in case["calls"]:
            problem = _call_problem(case, call)
            if problem:
                return problem
        problem = _skip_gradient_problem(case)
        if problem:
            return problem
        meta = case.get("on_meta") or {"kind": "tensor", "device": "meta"}
        if meta["kind"] != "tensor" or meta["device"] != "meta":
            return MESSAGES("output-off-device", kind_with_article=a_or_an(meta["kind"]),
                            device=meta.get("device", "?"), on=on)
        for call in case.get("trials", []):
            problem = _call_problem(case, call)
            if problem:
                return problem
    return None


def _call_problem(case, call):
    got, on_call, expected = call["got"], call["on"], call["expected"]
    if call["x_changed"]:
        return MESSAGES("changed-x-in-place", on=on_call)
    problem = tensor_problem(got, expected, what="forward's output", on=on_call, check_device=False)
    if problem:
        return problem
    variants = [call[f"variants{i}"] for i in range(case["n_branches"])]
    values = got["values"]
    if any(same_values(values, v["formula"], rtol=1e-4, atol=1e-5) for v in variants):
        if expected["requires_grad"] and not got["requires_grad"]:
            return MESSAGES("cut-from-graph", on=on_call)
        return left_problem(call, expected, MESSAGES, on_call)
    first = case["calls"][0]["got"]
    if call is not case["calls"][0] and first.get("shape") == got["shape"] and same_values(
        values, first["values"], rtol=0, atol=0
    ):
        return MESSAGES("cached-output", on=on_call)
    if same_values(values, call["given"]["x"]["values"], rtol=1e-4, atol=1e-5):
        return MESSAGES("returned-x", on=on_call)
    for key in _SKIP_MISTAKES:
        if any(same_values(values, v[key], rtol=1e-4, atol=1e-5) for v in variants):
            return MESSAGES(key.replace("_", "-"), on=on_call)
    return tensor_problem(got, {**expected, "values": variants[0]["formula"]},
                          what="forward's output", on=on_call, rtol=1e-4, atol=1e-5,
                          check_device=False) + " " + MESSAGES.text("the-formula")


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
    return MESSAGES(
        "tensors-not-registered", names=", ".join(unregistered), on=on, found=case["n_parameters"],
        count=expected_count,
        mixed=" (moved to meta, your forward then mixed devices)" if case.get("meta_left_behind") else "",
        containers=("; a plain list or dict hides even parameters: use nn.ParameterList or nn.ParameterDict"
                    if any("(a plain" in name for name in unregistered) else ""))


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
            return MESSAGES("branch-cut-from-graph", which=which, on=on)
        return MESSAGES("wrong-param-gradients", on=on)
    x_grad, right = got[0], expected[0]
    if x_grad is None or same_values(x_grad, np.asarray(right) - record["upstream"], rtol=1e-4, atol=1e-5):
        return MESSAGES("detached-skip", on=on)
    return MESSAGES("wrong-x-gradient", on=on)


SkipBlock = Exercise(
    "SkipBlock",
    chapter=CHAPTER,
    title="A block with a skip connection",
    expects=Function("SkipBlock", ("width", "hidden"), returns="an nn.Module (your class's instance)"),
    probe=_probe_skip_block,
    expect=_expect_skip_block,
    judge=_judge_skip_block,
    reference=SkipBlock,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "layer-before-super-init": NOTE_CLUES["layer-before-super-init"],
        **{key: NOTE_CLUES[key] for key in ("copied-out-of-device", "tensor-made-on-cpu")},
        "layer-sizes-mismatch": "mat1 and mat2 shapes cannot be multiplied",
        "in-place-add": "a leaf Variable that requires grad",
    }),
    messages=MESSAGES,
)
