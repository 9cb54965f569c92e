"""Chapter 03 — Models: modules with skips, registered layers, losses from logits (softmax and
multi-label), decay groups.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it. Probes build small models on the CPU with their own seeded generators, so a
check is deterministic, fast, and leaves the learner's random streams alone.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from course_utils.exercises.torch_calls import TorchCallRecorder
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, a_or_an
from course_utils.exercises.running import LearnerRaised, set_up_torch_once
from course_utils.exercises.facts import (
    not_a_module,
    same_values,
    shape_text,
    tensor_problem,
    value_facts,
)

CHAPTER = "models"

# The checks run models on `meta`, which stands in for a GPU: torch's one-time set-up for it is
# paid here, in the notebook's import cell, not by the first check.
set_up_torch_once()


def _input(shape, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _module_kind(value) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _hidden_layers(model: nn.Module) -> list[str]:
    """Attributes holding layers in a plain list, tuple or dict, where PyTorch never looks."""
    registered = {id(m) for m in model.modules()}
    found = []
    for name, value in vars(model).items():
        if not isinstance(value, (list, tuple, dict)):
            continue
        items = list(value.values()) if isinstance(value, dict) else list(value)
        hidden = [v for v in items if isinstance(v, nn.Module) and id(v) not in registered]
        if hidden:
            found.append(f"self.{name} (a plain {type(value).__name__} of {len(hidden)} layers)")
    return found


def _is_lazy(model: nn.Module) -> bool:
    return any(isinstance(p, nn.parameter.UninitializedParameter) for p in model.parameters())


def _parameter_devices(model: nn.Module) -> list[str]:
    return sorted({str(p.device) for p in model.parameters()} | {str(b.device) for b in model.buffers()})


# The exception a subclass raises when it assigns a layer before nn.Module has set itself up.
_SUPER_INIT_NOTE = (
    "cannot assign module before Module.__init__() call",
    "super().__init__() must run before the first layer is assigned to self.",
    "layer-before-super-init",
)
_DEVICE_NOTE = (
    "is not on the expected device",
    "a tensor on the CPU inside your code (made by torch.zeros(...), torch.empty(...) or "
    "torch.tensor(...) without device=, or moved there by .cpu() / .to('cpu')) while the inputs "
    "are on another device: keep it where the inputs are (torch.zeros_like(x), device=x.device).",
    "tensor-made-on-cpu",
)
_META = "moved with .to('meta') (a stand-in for a GPU) and called on a batch there"


def _linears(model: nn.Module) -> list[nn.Linear]:
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


def _shaped_as(call) -> bool:
    got, expected = call["got"], call["expected"]
    return got["kind"] == "tensor" and got["shape"] == expected["shape"] and not call["x_changed"]


_DEVICE_MISMATCH = ("is not on the expected device", "Expected all tensors to be on the same device")


class _CopiesToTheCpu(torch.overrides.TorchFunctionMode):
    """Lets a meta tensor be copied to the CPU as a GPU tensor can be: ``.cpu()``, ``.to('cpu')``
    and ``cpu_tensor.copy_(meta_tensor)`` give CPU tensors of the right shape (zeros: meta has no
    values). Meta refuses such copies outright, which would hide what a GPU shows next: the copy
    lives on the CPU, so it meets the model's tensors on another device, or leaves forward's output
    there."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        source = args[0] if args else None
        if isinstance(source, torch.Tensor) and source.device.type == "meta":
            if func is torch.Tensor.cpu:
                return torch.zeros(source.shape, dtype=source.dtype)
            if func is torch.Tensor.to:
                try:
                    device, dtype, _, _ = torch._C._nn._parse_to(*args[1:], **kwargs)
                except Exception:  # noqa: BLE001 - torch raises the learner's own error below
                    device = dtype = None
                if device is not None and device.type == "cpu":
                    return torch.zeros(source.shape, dtype=dtype or source.dtype)
        if (func is torch.Tensor.copy_ and isinstance(source, torch.Tensor)
                and source.device.type == "cpu" and len(args) > 1
                and isinstance(args[1], torch.Tensor) and args[1].device.type == "meta"):
            return source  # the copy's values are unknown on meta; its device is what matters
        return func(*args, **kwargs)


def _on_meta(call):
    """Run ``call`` on meta tensors. Meta tensors have shapes but no values, so code that reads a
    value (.item(), indexing with a tensor) fails there and would work on a GPU: that is not judged
    (None). A copy to the CPU (.cpu(), .to('cpu')) is made as a GPU would make it (see
    _CopiesToTheCpu). A tensor left on the CPU while the inputs are elsewhere is a real bug."""
    try:
        with _CopiesToTheCpu():
            result = call()
        return value_facts(result)
    except LearnerRaised as raised:
        if any(clue in str(raised.error) for clue in _DEVICE_MISMATCH):
            raise
        return None


def _device_run(model, x, run, on):
    """Move the model and a batch to ``meta`` (where a GPU would be) and record the output."""
    run(model.to, "meta", on=on)
    return _on_meta(lambda: run(model, x.to("meta"), on=on))


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


def _module_batches(model, run, case, *, batch: int, seed: int):
    """The opening both module probes share: record what kind of module came back, its hidden
    layers and devices, and make the batches it is called on (setting up a lazy layer on the
    first). None when the case is already decided: not a module, or parameters not on the CPU.
    """
    if not isinstance(model, nn.Module):
        return None
    case["hidden_layers"] = _hidden_layers(model)
    case["devices"] = _parameter_devices(model)
    if case["devices"] not in ([], ["cpu"]):
        return None
    width, on = case["width"], case["on"]
    # the last batch has the first one's shape and new values: a cache cannot pass
    shapes = [(batch, width), (1, width), (2, 3, width), (batch, width)]
    xs = [_input(shape, seed=seed + i) for i, shape in enumerate(shapes)]
    if _is_lazy(model):  # a lazy layer learns its input size from a first batch
        run(model, xs[0].clone(), on=f"{on} called on a first batch of shape ({batch}, {width})")
    return xs


def _probe_skip_block(answer, run):
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
            given = x.clone()
            got = run(model, given, on=call_on)
            call = {"on": call_on, "got": value_facts(got), "x_changed": not torch.equal(given, x)}
            with torch.no_grad():
                for index, (expand, project) in enumerate(branches):
                    inner = expand(x)
                    branch = project(torch.relu(inner))
                    call[f"variants{index}"] = {
                        "expected": value_facts(x + branch)["values"],
                        "without_skip": value_facts(branch)["values"],
                        "relu_after_sum": value_facts(torch.relu(x + branch))["values"],
                        "relu_on_branch_end": value_facts(x + torch.relu(branch))["values"],
                        "without_relu": value_facts(x + project(inner))["values"],
                    }
            call["expected"] = {"kind": "tensor", "shape": list(shape), "dtype": "torch.float32",
                                "device": "cpu", "requires_grad": True}
            call["x"] = x.numpy().copy()
            calls.append(call)
        case["calls"] = calls
        case["n_branches"] = len(branches)
        if not all(_shaped_as(call) for call in calls):
            cases.append(case)  # judged from these calls; moving the model would only raise
            return cases
        case["gradients"] = _skip_gradients(model, branches, xs[0], run, on)
        case["on_meta"] = _device_run(model, xs[0], run, f"{on} {_META}")
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
    record = {"on": on, "got": None, "expected": []}
    if isinstance(out, torch.Tensor) and out.requires_grad and out.shape == x.shape:
        grads = run(torch.autograd.grad, out, [given] + params, upstream, allow_unused=True, on=on)
        record["got"] = _gradient_facts(grads)
    for expand, project in branches:
        mine = x.clone().requires_grad_(True)
        formula = mine + project(torch.relu(expand(mine)))
        record["expected"].append(_gradient_facts(
            torch.autograd.grad(formula, [mine] + params, upstream, allow_unused=True)))
    record["upstream"] = upstream.numpy().copy()
    return record


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
            if any(same_values(values, v["expected"], rtol=1e-4, atol=1e-5) for v in variants):
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
            if same_values(values, call["x"], rtol=1e-4, atol=1e-5):
                return Mistake("returned-x",
                               f"forward returned its input x unchanged (on {on_call}); expected x + project(relu(expand(x))).")
            for key, message in _SKIP_MISTAKES:
                if any(same_values(values, v[key], rtol=1e-4, atol=1e-5) for v in variants):
                    return Mistake(key.replace("_", "-"), f"{message} (on {on_call})")
            return tensor_problem(got, {**expected, "values": variants[0]["expected"]},
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


def _grads_agree(got, expected) -> bool:
    if got is None or expected is None:
        return (got is None or not np.any(got)) and (expected is None or not np.any(expected))
    return same_values(got, expected, rtol=1e-4, atol=1e-5)


def _skip_gradient_problem(case):
    record = case.get("gradients")
    if record is None or record["got"] is None or not record["expected"]:
        return None  # an output that does not require grad, or no two layers: judged elsewhere
    got, on = record["got"], record["on"]
    variants = record["expected"]
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


# ============================================================================================
# M2 — layers made in a loop must be registered
# ============================================================================================
class Tower(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


_TOWER_SIZES = [(5, 3), (4, 1), (3, 6)]


def _probe_tower(answer, run):
    cases = []
    for seed, (width, depth) in enumerate(_TOWER_SIZES):
        on = f"Tower(width={width}, depth={depth})"
        torch.manual_seed(seed)
        model = run(answer, width, depth, on=on)
        case = {"on": on, "width": width, "depth": depth, "kind": _module_kind(model)}
        xs = _module_batches(model, run, case, batch=2, seed=20 + 4 * seed)
        if xs is None:
            cases.append(case)
            return cases
        linears = _linears(model)
        case["n_parameters"] = sum(p.numel() for p in model.parameters())
        if case["hidden_layers"]:  # judged from the count; forward would not survive .to()
            cases.append(case)
            return cases
        positions = [m for _, m in model.named_modules(remove_duplicate=False) if isinstance(m, nn.Linear)]
        case["n_linears"] = len(positions)
        case["n_distinct_linears"] = len(linears)
        calls = []
        for x in xs:
            shape = tuple(x.shape)
            again = " (another batch of the first shape)" if len(calls) == len(xs) - 1 else ""
            call_on = f"{on} called on a batch of shape {shape_text(list(shape))}{again}"
            given = x.clone()
            got = run(model, given, on=call_on)
            call = {"on": call_on, "got": value_facts(got), "x_changed": not torch.equal(given, x)}
            with torch.no_grad():
                expected, no_final_relu, first_only = x, x, x
                for index, layer in enumerate(linears):
                    expected = torch.relu(layer(expected))
                    first_only = torch.relu(linears[0](first_only))
                    no_final_relu = layer(no_final_relu)
                    if index < len(linears) - 1:
                        no_final_relu = torch.relu(no_final_relu)
            call["expected"] = value_facts(expected)
            call["no_final_relu"] = value_facts(no_final_relu)
            call["first_only"] = value_facts(first_only)
            calls.append(call)
        case["calls"] = calls
        if not all(_shaped_as(call) for call in calls):
            cases.append(case)  # judged from these calls; moving the model would only raise
            return cases
        case["on_meta"] = _device_run(model, xs[0], run, f"{on} {_META}")
        cases.append(case)
    return cases


def _judge_tower(cases):
    for case in cases:
        on, width, depth = case["on"], case["width"], case["depth"]
        if "hidden_layers" not in case:
            return Mistake("not-a-module", not_a_module(case["on"], case["kind"], "Tower"))
        per_layer = width * width + width
        expected_count = depth * per_layer
        if case["hidden_layers"]:
            found = f"finds {case['n_parameters']} of the" if "n_parameters" in case else "misses"
            return Mistake("layers-in-plain-list", (
                f"model.parameters() {found} {expected_count} "
                f"parameters of {on}: your layers sit in {', '.join(case['hidden_layers'])}. "
                "PyTorch only registers modules assigned directly to an attribute or held by "
                "nn.ModuleList / nn.Sequential / nn.ModuleDict, so an optimizer would never "
                "update these layers, .to(device) would not move them and state_dict() would "
                "not save them. Wrap the list: self.layers = nn.ModuleList([...])."
            ))
        if "n_parameters" not in case:
            return Mistake("built-off-cpu", (
                f"{on} has its parameters on {', '.join(case['devices'])}; build the layers on "
                "the CPU (the default) — the caller moves the model with .to(device) later."
            ))
        if case["n_linears"] >= depth and case["n_distinct_linears"] < case["n_linears"]:
            return Mistake("same-layer-repeated", (
                f"{on} holds the same layer {depth} times ({case['n_distinct_linears']} distinct "
                "layer): `[nn.Linear(width, width)] * depth` repeats one object, so every "
                "position shares one weight. Build a new layer per position: "
                "[nn.Linear(width, width) for _ in range(depth)]."
            ))
        if case["n_parameters"] == expected_count and case["n_linears"] == 0:
            return Mistake("no-linear-layers", (
                f"{on} has the right number of parameters, {expected_count}, but none of them "
                f"belongs to an nn.Linear layer. The task asks for {depth} layers "
                f"nn.Linear({width}, {width}), made in a loop and registered (nn.ModuleList)."
            ))
        if case["n_parameters"] != expected_count or case["n_linears"] != depth:
            return Mistake("wrong-layers", (
                f"{on} has {case['n_distinct_linears']} linear layers and {case['n_parameters']} "
                f"parameters; expected {depth} layers of Linear({width}, {width}), "
                f"{expected_count} parameters with their biases."
            ))
        for call in case["calls"]:
            got, expected, on_call = call["got"], call["expected"], call["on"]
            if call["x_changed"]:
                return Mistake("changed-x-in-place", (
                    f"forward changed its input x in place (on {on_call}): the caller's batch is "
                    "not yours to change. Compute new tensors (x = torch.relu(layer(x)))."
                ))
            problem = tensor_problem(got, expected, what="forward's output", on=on_call, rtol=1e-4,
                                     atol=1e-5, check_device=False)
            if problem is None:
                if not got["requires_grad"]:
                    return Mistake("cut-from-graph", (
                        f"forward's output does not require grad (on {on_call}): it is cut off "
                        "from the layers' parameters, so training could not change them."
                    ))
                continue
            if got.get("values") is not None and got["shape"] == expected["shape"]:
                first = case["calls"][0]["got"]
                if call is not case["calls"][0] and first.get("shape") == got["shape"] and same_values(
                    got["values"], first["values"], rtol=0, atol=0
                ):
                    return Mistake("cached-output", (
                        f"forward returned the same output as for the first batch (on {on_call}): "
                        "it keeps a result from an earlier call. Compute the output from the x of "
                        "each call."
                    ))
                if same_values(got["values"], call["no_final_relu"]["values"], rtol=1e-4, atol=1e-5):
                    return Mistake("no-final-relu", (
                        f"Your last layer has no ReLU after it (on {on_call}). This tower puts a "
                        "ReLU after every layer, the last one included."
                    ))
                if depth > 1 and same_values(got["values"], call["first_only"]["values"], rtol=1e-4, atol=1e-5):
                    return Mistake("first-layer-only", (
                        f"Your forward applies the first layer {depth} times (on {on_call}); the "
                        "other layers are registered but never used. Loop over the layers: "
                        "for layer in self.layers: x = torch.relu(layer(x))."
                    ))
            return problem + " Expected each layer in the order it was registered, each followed by ReLU."
        meta = case.get("on_meta") or {"kind": "tensor", "device": "meta"}
        if meta["kind"] != "tensor" or meta["device"] != "meta":
            return Mistake("output-off-device", (
                f"forward's output is {a_or_an(meta['kind'])} on {meta.get('device', '?')} when the "
                f"model and the batch are on meta ({on} {_META}); expected a tensor on the "
                "batch's device."
            ))
    return None


Tower = Exercise(
    "Tower",
    chapter=CHAPTER,
    title="A tower of layers made in a loop",
    expects=Function("Tower", ("width", "depth"), returns="an nn.Module (your class's instance)"),
    probe=_probe_tower,
    judge=_judge_tower,
    reference=Tower,
    passed_message=(
        "Correct: every layer is registered, so model.parameters(), .to(device) and "
        "state_dict() all see it."
    ),
    hints=[
        "A Python list of layers works in forward, but PyTorch does not look inside plain "
        "lists: the optimizer would never see those weights.",
        "nn.ModuleList takes a list of modules and registers each one; you loop over it like "
        "a list.",
        "self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)]); in "
        "forward: for layer in self.layers: x = torch.relu(layer(x)).",
    ],
    error_notes=[
        _SUPER_INIT_NOTE,
        _DEVICE_NOTE,
        (
            "mat1 and mat2 shapes cannot be multiplied",
            "a layer whose in_features is not width: every layer of the tower is "
            "nn.Linear(width, width).",
            "layer-sizes-mismatch",
        ),
    ],
)


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
    ]


def _ce_record(on, logits, targets, got, called, logits_changed, targets_changed):
    probs = logits.softmax(dim=1)
    n = len(targets)
    picked_logits = logits[torch.arange(n), targets]
    return {
        "on": on,
        "dtype": str(logits.dtype),
        "got": value_facts(got),
        "called": sorted(called),
        "logits_changed": logits_changed,
        "targets_changed": targets_changed,
        "expected": value_facts(F.cross_entropy(logits, targets)),
        "softmax_first": value_facts(F.cross_entropy(probs, targets)),
        "nll_on_logits": value_facts(-picked_logits.mean()),
        "summed": value_facts(F.cross_entropy(logits, targets, reduction="sum")),
        "no_minus": value_facts(-F.cross_entropy(logits, targets)),
        "wrong_dim": value_facts(F.nll_loss(torch.log_softmax(logits, dim=0), targets)),
    }


def _probe_cross_entropy(answer, run):
    cases = []
    for on, logits, targets in _ce_cases():
        given, given_targets = logits.clone(), targets.clone()
        if not logits.is_contiguous():
            given = logits.t().clone().t()
        recorder = TorchCallRecorder()
        with recorder:
            got = run(answer, given, given_targets, on=on)
        cases.append(_ce_record(on, logits, targets, got, recorder.names,
                                not torch.equal(given, logits), not torch.equal(given_targets, targets)))
        cases[-1]["logits_tracked"] = bool(given.requires_grad)  # the caller's logits did not
    if any(c["logits_changed"] or c["targets_changed"] or c["logits_tracked"]
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
    probs = logits.softmax(dim=1)
    case["expected_grad"] = ((probs - F.one_hot(targets, logits.shape[1])) / len(targets)).numpy()
    cases.append(case)
    if not (case["got"]["kind"] == "tensor" and case["got"]["requires_grad"]):
        return {"cases": cases, "meta": None}
    meta = _on_meta(lambda: run(answer, logits.to("meta"), targets.to("meta"), on=_META_CASE))
    return {"cases": cases, "meta": meta}


_CE_MISTAKES = [
    ("softmax_first", "You applied softmax, then cross-entropy: cross-entropy applies "
     "log_softmax itself, so the probabilities get squashed twice and the loss can "
     "never get near 0. Give it the raw logits."),
    ("nll_on_logits", "F.nll_loss on raw logits just picks -logit of the target class: "
     "it expects log-probabilities. Take torch.log_softmax(logits, dim=1) first."),
    ("summed", "Your loss is the sum over the batch, not the mean: it grows with the "
     "batch size, and so would your effective learning rate. Average (nll_loss's default)."),
    ("no_minus", "Your loss has the wrong sign: it is the mean log-probability of the "
     "targets, which training would push down. Cross-entropy is its negative."),
    ("wrong_dim", "Your log_softmax normalises over dim=0, the examples: the classes of logits "
     "of shape (N, C) are dim=1."),
]


def _not_a_loss(case, got, on, how_to_reduce: str) -> str | None:
    """What both loss exercises say when the result cannot be a loss to call backward() on."""
    if case.get("logits_tracked"):
        return Mistake("tracks-callers-logits", (
            f"Your function switched on requires_grad of the caller's logits (on {on}): "
            "they come from the model, which decides what is tracked; from then on every "
            "operation on them is recorded. Leave the inputs as they are."
        ))
    if got["kind"] == "NoneType":
        return Mistake("returned-none", f"Your function returned None (on {on}); end it with `return`.")
    if got["kind"] != "tensor":
        return Mistake("not-a-tensor", (
            f"Your function returned {got['kind']} ({got['repr']}, on {on}); return the loss "
            "as a 0-d tensor, so loss.backward() works."
        ))
    if got["shape"] != []:
        return Mistake("not-reduced", (
            f"Your loss has shape {shape_text(got['shape'])} (on {on}); expected one number, "
            f"shape (): {how_to_reduce}."
        ))
    return None


def _loss_on_meta_problem(meta) -> str | None:
    """A loss computed from logits and targets on ``meta`` must be a 0-d tensor there too."""
    if meta is not None and (meta["kind"] != "tensor" or meta["device"] != "meta" or meta["shape"] != []):
        return Mistake("loss-off-device", (
            f"On logits and targets on meta (a stand-in for a GPU), your function returned "
            f"{a_or_an(meta['kind'])}{' on ' + meta['device'] if 'device' in meta else ''}; "
            "expected a 0-d tensor on the logits' device."
        ))
    return None


def _judge_cross_entropy(record):
    for case in record["cases"]:
        on, got, expected = case["on"], case["got"], case["expected"]
        shortcut = _FORBIDDEN_SHORTCUTS & set(case["called"])
        if shortcut:
            return Mistake("called-cross-entropy", (
                "Your function calls F.cross_entropy (or nn.CrossEntropyLoss), which this "
                "exercise asks you to build yourself: log_softmax over the classes, then "
                "F.nll_loss (or pick each target's log-probability and average)."
            ))
        if case["logits_changed"]:
            return Mistake("changed-logits-in-place", (
                f"Your function changed its input logits in place (on {on}): the caller's "
                "tensors are not yours to change. Compute new tensors (logits - m, not logits -= m)."
            ))
        if case["targets_changed"]:
            return Mistake("changed-targets-in-place", (
                f"Your function changed its input targets in place (on {on}): the caller's "
                "tensors are not yours to change. Make new tensors from them (targets[:, None] or "
                "targets.unsqueeze(1), not a method ending in _ such as unsqueeze_)."
            ))
        problem = _not_a_loss(case, got, on, "average over the batch (F.nll_loss does it by default)")
        if problem:
            return problem
        # a float64 loss from float32 logits (log_softmax(..., dtype=torch.float64)) is only
        # more precise; a float32 loss from float64 logits loses digits
        wider = case["dtype"] == "torch.float32" and got["dtype"] == "torch.float64"
        if got["dtype"] != case["dtype"] and not wider:
            return Mistake("lost-logits-dtype",
                           f"Your loss has dtype {got['dtype']}; expected {case['dtype']}, the logits' dtype (on {on}).")
        if "values" not in got:
            return Mistake("loss-off-device",
                           f"Your loss is on {got['device']} for logits on the CPU (on {on}); keep it where the logits are.")
        value = float(np.asarray(got["values"]))
        if not np.isfinite(value):
            return Mistake("unstable-log", (
                f"Your loss is {value} (on {on}): exp() of large logits overflows (or a "
                "probability underflows to 0, whose log is -inf), as in "
                "torch.log(torch.softmax(...)) or a log of a sum of exp(). torch.log_softmax "
                "computes the log-probabilities without forming the probabilities, so it stays finite."
            ))
        if same_values(value, expected["values"], rtol=1e-4, atol=1e-5):
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
                    return Mistake("wrong-gradient" if grad is not None else "cut-from-graph",
                                   problem + " Expected (softmax(logits) - one_hot(targets)) / N.")
            continue
        for key, message in _CE_MISTAKES:
            if same_values(value, case[key]["values"], rtol=1e-4, atol=1e-5):
                return Mistake(key.replace("_", "-"),
                               f"{message} (on {on}: got {value:.4f}, expected {float(expected['values']):.4f})")
        return Mistake("wrong-loss-value",
                       f"Your loss is {value:.4f}; expected {float(expected['values']):.4f} (on {on}).")
    return _loss_on_meta_problem(record["meta"])


cross_entropy_from_logits = Exercise(
    "cross_entropy_from_logits",
    chapter=CHAPTER,
    title="Cross-entropy from raw logits",
    expects=Function("cross_entropy_from_logits", ("logits", "targets"),
                     returns="a 0-d tensor: the mean loss"),
    probe=_probe_cross_entropy,
    judge=_judge_cross_entropy,
    reference=cross_entropy_from_logits,
    passed_message=(
        "Correct, and stable for very large logits: this is exactly what F.cross_entropy "
        "computes, which is why it wants logits, not probabilities."
    ),
    hints=[
        "Cross-entropy is the average over the batch of -log p(target), with p the softmax of "
        "the logits over the classes (dim=1).",
        "Never take torch.log of a softmax: for large logits it gives -inf. torch.log_softmax "
        "computes the log-probabilities directly.",
        "log_probs = torch.log_softmax(logits, dim=1); return F.nll_loss(log_probs, targets)",
    ],
    error_notes=[
        (
            "expected scalar type Long",
            "targets are class indices (int64): pass them as they are, not as floats.",
            "float-targets",
        ),
        (
            "Dimension out of range",
            "logits have shape (N, C): the classes are dim=1.",
            "classes-on-wrong-dim",
        ),
        _DEVICE_NOTE,
        (
            "a leaf Variable that requires grad",
            "an in-place change of logits (-=, sub_): compute a new tensor, logits - m.",
            "in-place-change-of-logits",
        ),
        (
            "view size is not compatible with input tensor's size and stride",
            ".view() needs contiguous memory, and logits may be a transposed tensor: use "
            ".reshape().",
            "view-of-non-contiguous",
        ),
    ],
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
    z = logits.detach().double()
    t = targets.double()
    with torch.no_grad():
        per_entry = F.binary_cross_entropy_with_logits(z, t, reduction="none")
        probs = torch.sigmoid(logits.detach())
        variants = {
            "sigmoid_then_bce": F.binary_cross_entropy(probs, targets.to(probs.dtype)).double(),
            "sigmoid_twice": F.binary_cross_entropy_with_logits(torch.sigmoid(z), t),
            "softmax_ce": F.cross_entropy(z, t),
            "summed": per_entry.sum(),
            "per_example": per_entry.sum(dim=1).mean(),
            "no_minus": -per_entry.mean(),
        }
    record = {
        "on": on,
        "dtype": str(logits.dtype),
        "got": value_facts(got),
        "logits_changed": logits_changed,
        "targets_changed": targets_changed,
        "expected": value_facts(per_entry.mean()),
    }
    record.update({key: value_facts(value) for key, value in variants.items()})
    return record


def _probe_multilabel_loss(answer, run):
    cases = []
    firsts = None
    for on, logits, targets in _ml_cases():
        given, given_targets = logits.clone(), targets.clone()
        if not logits.is_contiguous():  # keep the caller's layout: a transposed view
            given, given_targets = logits.t().clone().t(), targets.t().clone().t()
        if firsts is None:
            firsts = (given, given_targets, logits, targets)
        got = run(answer, given, given_targets, on=on)
        cases.append(_ml_record(on, logits, targets, got, not torch.equal(given, logits),
                                not torch.equal(given_targets, targets)))
        cases[-1]["logits_tracked"] = bool(given.requires_grad)
    # the same tensors again: an answer that changed them, or kept something from the first call
    given, given_targets, logits, targets = firsts
    on = _ml_cases()[0][0] + _ML_AGAIN
    got = run(answer, given, given_targets, on=on)
    cases.append(_ml_record(on, logits, targets, got, not torch.equal(given, logits),
                            not torch.equal(given_targets, targets)))
    cases[-1]["logits_tracked"] = bool(given.requires_grad)
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
    case["expected_grad"] = ((torch.sigmoid(logits) - targets) / targets.numel()).numpy()
    cases.append(case)
    if not (case["got"]["kind"] == "tensor" and case["got"]["requires_grad"]):
        return {"cases": cases, "meta": None}
    _, logits, targets = _ml_cases()[0]
    meta = _on_meta(lambda: run(answer, logits.to("meta"), targets.to("meta"), on=_ML_META_CASE))
    return {"cases": cases, "meta": meta}


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


# ============================================================================================
# M8 — weight decay on weights only
# ============================================================================================
def decay_groups(model, weight_decay):
    decay, no_decay = [], []
    for module in model.modules():
        for name, parameter in module.named_parameters(recurse=False):
            if name == "weight" and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                decay.append(parameter)
            else:
                no_decay.append(parameter)  # biases, norm layers' weights and biases
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


class _ImageHead(nn.Module):
    """Conv2d, GroupNorm, a Linear whose attribute name says "norm", used twice, a block nested
    in a block (only a recursive walk finds its layers: model.children() does not), and a
    parameter of the model itself (model.modules() starts with the model)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, kernel_size=3)
        self.norm = nn.GroupNorm(1, 2)
        self.norm_proj = nn.Linear(4, 4)
        self.head = nn.Sequential(
            self.norm_proj, nn.ReLU(), self.norm_proj,  # one layer, twice
            nn.Sequential(nn.Linear(4, 2), nn.LayerNorm(2)),  # nested
        )
        self.bias = nn.Parameter(torch.zeros(2))  # the model's own: an output bias


class _ScaledLinear(nn.Linear):
    """A subclass of nn.Linear, as many libraries write them (MultiheadAttention's out_proj is
    one): its weight is a Linear's weight, for isinstance, not for type(m) in (...)."""

    def forward(self, x):
        return 0.5 * super().forward(x)


class _TokenHead(nn.Module):
    """An Embedding (a 2-D weight that is a table of vectors, not connections) and a Linear
    subclass: the shape alone (p.ndim >= 2) and the exact type alone both choose wrongly."""

    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(10, 4)
        self.proj = _ScaledLinear(4, 3)

    def forward(self, ids):
        return self.proj(self.tokens(ids))


def _decay_models():
    torch.manual_seed(4)
    mlp = nn.Sequential(
        nn.Linear(8, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 16), nn.BatchNorm1d(16),
        nn.ReLU(), nn.Linear(16, 3),
    )
    conv = nn.Sequential(
        nn.Conv1d(2, 4, kernel_size=3), nn.BatchNorm1d(4), nn.ReLU(), nn.Flatten(),
        nn.Linear(24, 5, bias=False), nn.LayerNorm(5, bias=True),
    )
    return [
        ("an MLP with LayerNorm and BatchNorm1d, weight_decay=0.05", mlp, 0.05),
        ("a Conv1d model with a bias-free Linear, weight_decay=0.1", conv, 0.1),
        ("a Conv2d model with GroupNorm, a Linear named norm_proj used twice, a nested block and "
         "a parameter of its own, weight_decay=0.02", _ImageHead(), 0.02),
        ("a model with an Embedding and a subclass of nn.Linear, weight_decay=0.05", _TokenHead(), 0.05),
        ("the MLP again, a second call on the same model, weight_decay=0.05", mlp, 0.05),
    ]


_NORMS = (nn.LayerNorm, nn.BatchNorm1d, nn.GroupNorm)


def _expected_decay(model) -> set[str]:
    names = {id(p): name for name, p in model.named_parameters()}
    return {
        names[id(p)]
        for module in model.modules()
        for name, p in module.named_parameters(recurse=False)
        if name == "weight" and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d))
    }


def _probe_decay_groups(answer, run):
    cases, earlier = [], {}
    for on, model, weight_decay in _decay_models():
        names = {id(p): name for name, p in model.named_parameters()}
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        flags = {name: p.requires_grad for name, p in model.named_parameters()}
        groups = run(answer, model, weight_decay, on=on)
        case = {
            "on": on,
            "weight_decay": weight_decay,
            "all": sorted(names.values()),
            "decay": sorted(_expected_decay(model)),
            "norm": sorted(
                names[id(p)]
                for module in model.modules()
                if isinstance(module, _NORMS)
                for p in module.parameters(recurse=False)
            ),
            "embedding": sorted(
                names[id(module.weight)] for module in model.modules() if isinstance(module, nn.Embedding)
            ),
            # weights of subclasses of Linear/Conv: what type(m) in (nn.Linear, ...) misses
            "subclass_weights": sorted(
                names[id(module.weight)] for module in model.modules()
                if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d))
                and type(module) not in (nn.Linear, nn.Conv1d, nn.Conv2d)
            ),
            "changed": sorted(
                name for name, p in model.named_parameters() if not torch.equal(p.detach(), before[name])
            ),
            "frozen": sorted(
                name for name, p in model.named_parameters() if p.requires_grad != flags[name]
            ),
            "kind": _module_kind(groups),
            # what a walk over model.children() alone misses: deeper blocks, the model's own
            "one_level_misses": sorted(
                name for name, p in model.named_parameters()
                if id(p) not in {id(q) for child in model.children() for q in child.parameters(recurse=False)}
            ),
        }
        if isinstance(groups, (list, tuple)):
            recorded = []
            for group in groups:
                if not isinstance(group, dict):
                    recorded.append({"kind": _module_kind(group)})
                    continue
                params = group.get("params")
                container = _module_kind(params)
                params = [params] if isinstance(params, torch.Tensor) else list(params or [])
                decay = group.get("weight_decay")
                recorded.append({
                    "kind": "dict",
                    "keys": sorted(str(k) for k in group),
                    "container": container,
                    "params": [
                        names.get(id(p)) or earlier.get(id(p)) or (
                            "<not a parameter of this model>" if isinstance(p, torch.Tensor)
                            else f"<{_module_kind(p)}>")
                        for p in params
                    ],
                    "weight_decay": float(decay)
                    if isinstance(decay, numbers.Real) and not isinstance(decay, bool) else None,
                })
            case["groups"] = recorded
        cases.append(case)
        earlier.update({id(p): f"<{name} of the model of an earlier call>" for name, p in model.named_parameters()})
    return cases


_ADAMW_DEFAULT_DECAY = 0.01


def _judge_decay_groups(cases):
    for case in cases:
        on, weight_decay = case["on"], case["weight_decay"]
        if case["changed"]:
            return Mistake("changed-param-values", (
                f"Your function changed the values of the model's parameters "
                f"({', '.join(case['changed'])}, on {on}); it should only sort them into groups."
            ))
        if case["frozen"]:
            return Mistake("changed-requires-grad", (
                f"Your function changed requires_grad of {', '.join(case['frozen'])} (on {on}): "
                "parameters without decay must still train. Only sort them into groups."
            ))
        groups = case.get("groups")
        if groups is None:
            return Mistake("not-a-list-of-groups", (
                f"Your function returned {case['kind']} (on {on}); return a list of parameter "
                "groups, each a dict: [{'params': [...], 'weight_decay': ...}, ...]."
            ))
        for group in groups:
            if group["kind"] != "dict":
                return Mistake("group-not-a-dict", (
                    f"One of your groups is {group['kind']}, not a dict (on {on}): each group is "
                    "{'params': [...], 'weight_decay': ...}."
                ))
            if "params" not in group["keys"]:
                return Mistake("no-params-key",
                               f"A group has no 'params' key (on {on}): the optimizer looks for 'params'.")
            if group["container"] in ("set", "frozenset"):
                return Mistake("params-as-set", (
                    f"A group's 'params' is a {group['container']} (on {on}): torch.optim refuses "
                    "sets, whose order changes from run to run (so a saved optimizer state would "
                    "not match its parameters). Use a list."
                ))
            unknown = [k for k in group["keys"] if k not in ("params", "weight_decay", "lr", "name")]
            if unknown:
                return Mistake("decay-under-wrong-key", (
                    f"A group has the key {unknown[0]!r} (on {on}), which the optimizer does not "
                    "read: the decay must be under 'weight_decay'."
                ))
        placed = [name for group in groups for name in group["params"]]
        from_earlier = [n for n in placed if n.endswith("of the model of an earlier call>")]
        if from_earlier:
            return Mistake("lists-kept-between-calls", (
                f"Your groups hold parameters of the model of an earlier call, e.g. "
                f"{from_earlier[0].strip('<>')} (on {on}): lists kept between calls (at module "
                "level, or as a default argument) keep growing. Make new lists inside the function."
            ))
        strangers = [n for n in placed if n.startswith("<")]
        if "<NoneType>" in strangers:
            return Mistake("none-in-group", (
                f"A group holds None (on {on}): a layer made with bias=False has .bias None, "
                "which is no parameter. Take the parameters that exist, as "
                "module.named_parameters(recurse=False) lists them."
            ))
        others = [n for n in strangers if n != "<not a parameter of this model>"]
        if others:
            return Mistake("params-not-flat", (
                f"A group's 'params' holds {a_or_an(others[0].strip('<>'))} (on {on}), not a "
                "parameter: 'params' is one flat list of the model's parameters."
            ))
        if strangers:
            return Mistake("not-model-params",
                           f"A group holds {len(strangers)} tensors that are not parameters of the model (on {on}).")
        for group in groups:
            inside = group["params"]
            twice = sorted({n for n in inside if inside.count(n) > 1})
            if twice:
                return Mistake("duplicate-in-group", (
                    f"{twice[0]} appears twice in one group (on {on}): a layer used twice in the "
                    "model is still one parameter, and torch.optim warns that a group with "
                    "duplicate parameters will become an error. Collect parameters once each "
                    "(model.parameters() and model.modules() skip repeats)."
                ))
        twice = sorted({n for n in placed if placed.count(n) > 1})
        if twice:
            return Mistake("in-two-groups", (
                f"{twice[0]} is in more than one group (on {on}); the optimizer refuses that "
                "(\"some parameters appear in more than one parameter group\"). Put every "
                "parameter in exactly one group."
            ))
        missing = sorted(set(case["all"]) - set(placed))
        if missing and missing == case["one_level_misses"]:
            return Mistake("one-level-walk", (
                f"{len(missing)} parameters are in no group, e.g. {missing[0]} (on {on}): exactly "
                "those of a block nested inside another block and of the model itself, which a "
                "walk over model.children() (one level down, the model excluded) never reaches. "
                "model.modules() visits every module, the model included."
            ))
        if missing:
            return Mistake("params-in-no-group", (
                f"{len(missing)} parameters are in no group, e.g. {missing[0]} (on {on}): the "
                "optimizer would never update them. Every parameter goes in exactly one group."
            ))
        decayed, undecayed = set(), set()
        for group in groups:
            value = group["weight_decay"]
            if value is None:
                if "weight_decay" not in group["keys"]:
                    value = _ADAMW_DEFAULT_DECAY
                else:
                    return Mistake("decay-not-a-number", f"A group's weight_decay is not a number (on {on}).")
            (decayed if value > 0 else undecayed).update(group["params"])
            if value > 0 and abs(value - weight_decay) > 1e-12:
                if "weight_decay" not in group["keys"]:
                    return Mistake("no-weight-decay-key", (
                        f"A group without a 'weight_decay' key gets the optimizer's default "
                        f"(AdamW: 0.01), not 0 (on {on}): give every group its value explicitly, "
                        "0.0 for the group that must not decay."
                    ))
                return Mistake("fixed-decay", (
                    f"A group decays with {value:g}; expected the weight_decay you were given, "
                    f"{weight_decay:g} (on {on})."
                ))
        expected = set(case["decay"])
        wrongly_decayed = sorted(decayed - expected)
        norm = set(case["norm"])
        if wrongly_decayed:
            example = wrongly_decayed[0]
            if set(wrongly_decayed) == set(case["all"]) - expected:
                return Mistake("everything-decayed", (
                    f"Every parameter is decayed (on {on}), the biases and the normalisation "
                    f"layers' weights too, e.g. {example}. Decay only the weights of Linear and "
                    "Conv layers; put the rest in a group with weight_decay 0."
                ))
            if all(n in norm for n in wrongly_decayed):
                return Mistake("norm-weights-decayed", (
                    f"The normalisation layers' weights are decayed, e.g. {example} (on {on}). "
                    "They are named 'weight' but they are per-feature scales, not connections: "
                    "decay pulls them towards 0 and shrinks every normalised feature. Choose by "
                    "the kind of layer, not by the name alone."
                ))
            embeddings = [n for n in wrongly_decayed if n in case.get("embedding", [])]
            if embeddings:
                return Mistake("embedding-decayed", (
                    f"{embeddings[0]}, an Embedding's weight, is decayed (on {on}). It is 2-D like "
                    "a Linear's weight, but it is a table of vectors, not connections, and the task "
                    "keeps it out of decay: choose by the kind of layer (isinstance(module, "
                    "(nn.Linear, nn.Conv1d, nn.Conv2d))), not by the shape (p.ndim >= 2)."
                ))
            return Mistake("decays-non-weight", (
                f"{example} is decayed but should not be (on {on}): only the weights of Linear "
                "and Conv layers decay."
            ))
        not_decayed = sorted(expected - decayed)
        subclassed = [n for n in not_decayed if n in case.get("subclass_weights", [])]
        if subclassed:
            return Mistake("subclass-not-decayed", (
                f"{subclassed[0]} is not decayed (on {on}): its layer is a subclass of nn.Linear, "
                "and so a Linear layer. type(module) in (nn.Linear, ...) compares the exact class "
                "and misses subclasses; isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)) "
                "includes them."
            ))
        if not_decayed:
            return Mistake("weight-not-decayed", (
                f"{not_decayed[0]} is not decayed (on {on}): the weights of Linear and Conv layers "
                f"are the ones weight decay is for. Give their group weight_decay={weight_decay:g}."
            ))
        if len(groups) != 2:
            return Mistake("not-two-groups", (
                f"You returned {len(groups)} groups (on {on}); the task asks for two: the weights "
                "with weight_decay, everything else with 0.0."
            ))
    return None


decay_groups = Exercise(
    "decay_groups",
    chapter=CHAPTER,
    title="Weight decay on weights only",
    expects=Function("decay_groups", ("model", "weight_decay"),
                     returns="a list of two dicts, each {'params': [...], 'weight_decay': ...}"),
    probe=_probe_decay_groups,
    judge=_judge_decay_groups,
    reference=decay_groups,
    passed_message=(
        "Correct: Linear and Conv weights decay; biases and normalisation parameters do not. "
        "Pass the list straight to torch.optim.AdamW(groups, lr=...)."
    ),
    hints=[
        "Return two groups: [{'params': decay, 'weight_decay': weight_decay}, "
        "{'params': no_decay, 'weight_decay': 0.0}]. Every parameter goes in exactly one.",
        "A LayerNorm's scale is also called 'weight', so the name alone is not enough. Go "
        "module by module (model.modules(), named_parameters(recurse=False)) and look at the "
        "module's kind with isinstance, which includes subclasses. Not the shape: an "
        "Embedding's weight is 2-D too, and it does not decay here.",
        "for module in model.modules(): for name, p in module.named_parameters(recurse=False): "
        "decay if name == 'weight' and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)), "
        "else no_decay.",
    ],
)
