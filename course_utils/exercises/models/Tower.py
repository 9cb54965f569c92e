"""Chapter 03, M2 — ``Tower``: layers made in a loop must be registered.

Engine: applies edges.edge_tensor / edges.generated / edges.resized (module_trials: the float32
edges a layer's input may hold, zeros, an empty batch), states.module_states("eval", "no-grad")
and the module in float64, and compares what each call leaves (modes, settings, the caller's x,
the parameters) with the reference's; hand-written because the task is a module whose layers
must be registered, judged against its own layers.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function, a_or_an
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
    _META,
    _device_run,
    _hidden_layers,
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

MESSAGES = Messages("Tower", {
    "passed": (
        "Correct: every layer is registered, so model.parameters(), .to(device) and "
        "state_dict() all see it."
    ),
    "hint-1": (
        "A Python list of layers works in forward, but PyTorch does not look inside plain "
        "lists: the optimizer would never see those weights."
    ),
    "hint-2": (
        "nn.ModuleList takes a list of modules and registers each one; you loop over it like "
        "a list."
    ),
    "hint-3": (
        "self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)]); in "
        "forward: for layer in self.layers: x = torch.relu(layer(x))."
    ),
    "not-a-module": "{text}",
    "layers-in-plain-list": (
        "model.parameters() {found} {count} "
        "parameters of {on}: your layers sit in {where}. "
        "PyTorch only registers modules assigned directly to an attribute or held by "
        "nn.ModuleList / nn.Sequential / nn.ModuleDict, so an optimizer would never "
        "update these layers, .to(device) would not move them and state_dict() would "
        "not save them. Wrap the list: self.layers = nn.ModuleList([...])."
    ),
    "layers-hidden-params-registered": (
        "model.parameters() finds all {count} parameters of {on}, since you registered them "
        "one by one, but the layers themselves sit in {where}, so they are not submodules: "
        "model.modules() lists none of them, state_dict() names their weights params.0, "
        "params.1, ... instead of layers.0.weight, and .to('meta') (a stand-in for a GPU) puts "
        "moved copies in your list of parameters while the layers keep their own weights on the "
        "CPU, where forward uses them. Register the layers themselves: self.layers = "
        "nn.ModuleList([...]), which registers their parameters too."
    ),
    "depth-zero-layers": (
        "{on} has {linears} linear layers and {found} parameters; expected none: the tower has "
        "depth layers, so depth=0 makes an empty tower whose forward returns x as it is. A "
        "first layer made before the loop (and depth - 1 in it) is one layer too many there; "
        "make all of them in one loop over range(depth)."
    ),
    "built-off-cpu": (
        "{on} has its parameters on {devices}; build the layers on "
        "the CPU (the default) — the caller moves the model with .to(device) later."
    ),
    "same-layer-repeated": (
        "{on} holds the same layer {depth} times ({distinct} distinct "
        "layer): `[nn.Linear(width, width)] * depth` repeats one object, so every "
        "position shares one weight. Build a new layer per position: "
        "[nn.Linear(width, width) for _ in range(depth)]."
    ),
    "no-linear-layers": (
        "{on} has the right number of parameters, {count}, but none of them "
        "belongs to an nn.Linear layer. The task asks for {depth} layers "
        "nn.Linear({width}, {width}), made in a loop and registered (nn.ModuleList)."
    ),
    "wrong-layers": (
        "{on} has {linears} linear layers and {found} "
        "parameters; expected {depth} layers of Linear({width}, {width}), "
        "{count} parameters with their biases."
    ),
    "changed-x-in-place": (
        "forward changed its input x in place (on {on}): the caller's batch is "
        "not yours to change. Compute new tensors (x = torch.relu(layer(x)))."
    ),
    "cut-from-graph": (
        "forward's output does not require grad (on {on}): it is cut off "
        "from the layers' parameters, so training could not change them."
    ),
    "cached-output": (
        "forward returned the same output as for the first batch (on {on}): "
        "it keeps a result from an earlier call. Compute the output from the x of "
        "each call."
    ),
    "no-final-relu": (
        "Your last layer has no ReLU after it (on {on}). This tower puts a "
        "ReLU after every layer, the last one included."
    ),
    "first-layer-only": (
        "Your forward applies the first layer {depth} times (on {on}); the "
        "other layers are registered but never used. Loop over the layers: "
        "for layer in self.layers: x = torch.relu(layer(x))."
    ),
    # added to the generic comparison's words (facts.tensor_problem)
    "in-order": "Expected each layer in the order it was registered, each followed by ReLU.",
    "graph-cut-between-layers": (
        "backward() from forward's output gives {count} of the {total} tensors it should reach "
        "(x, then each layer's weight and bias) no gradient (on {on}): the output has the right "
        "values, but the graph is cut on the way (detach(), .data or torch.no_grad() between "
        "the layers), so training would never change the layers before the cut."
    ),
    "wrong-gradients": (
        "backward() from forward's output gives x or the layers the wrong gradients (on {on}), "
        "although the output has the right values. Expected those of the layers in order, "
        "each followed by torch.relu, computed with recorded operations."
    ),
    **LEFT_TEXTS,
    "output-off-device": (
        "forward's output is {kind_with_article} on {device} when the "
        "model and the batch are on meta ({on} " + _META + "); expected a tensor on the "
        "batch's device."
    ),
    "layer-before-super-init": NOTE_TEXTS["layer-before-super-init"],
    **{key: NOTE_TEXTS[key] for key in ("copied-out-of-device", "tensor-made-on-cpu")},
    "layer-sizes-mismatch": (
        "a layer whose in_features is not width: every layer of the tower is "
        "nn.Linear(width, width)."
    ),
})


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
_EMPTY = (4, 0)  # depth=0: "depth layers" is none, counted only (its forward returns x itself)


def _layer_facts(linears) -> list[dict]:
    """The learner's linear layers as plain data, in the order the model registers them: what
    ``_expect_tower`` computes the tower's formula with."""
    return [{"weight": value_facts(layer.weight),
             "bias": None if layer.bias is None else value_facts(layer.bias)} for layer in linears]


def _probe_tower(answer, run):
    """What the learner's tower gives on each batch, the batches, and the learner's own layers
    as they are after each call: never what the formula gives with them (``_expect_tower``
    computes that, and each classic mistake's, on the judge's side)."""
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
        values = parameter_values(model)
        for x in xs:
            shape = tuple(x.shape)
            again = " (another batch of the first shape)" if len(calls) == len(xs) - 1 else ""
            call_on = f"{on} called on a batch of shape {shape_text(list(shape))}{again}"
            calls.append(_tower_call(model, linears, x, x.clone(), run, call_on))
            if len(calls) == 1:
                case["params_changed"] = parameters_changed(model, values)
        case["calls"] = calls
        if not all(_shaped_as(call) for call in calls):
            cases.append(case)  # judged from these calls; moving the model would only raise
            return cases
        case["on_meta"] = _device_run(model, xs[0], run, f"{on} {_META}")
        if seed == 0:  # the states, the edges and float64, and the gradients, on the first size
            model = fresh_instance(answer, (width, depth), run, on, seed=seed, first_batch=xs[0])
            linears = _linears(model)
            case["trials"] = trial_calls(model, xs[0], run, on, lambda m, x, given_x, call_on: _tower_call(
                m, linears, x, given_x, run, call_on), seed=30)
            case["gradients"] = _tower_gradients(model, linears, xs[0], run, on)
        cases.append(case)
    width, depth = _EMPTY
    on = f"Tower(width={width}, depth={depth})"
    model = run(answer, width, depth, on=on)
    case = {"on": on, "width": width, "depth": depth, "kind": _module_kind(model), "count_only": True}
    if isinstance(model, nn.Module):
        case.update(hidden_layers=_hidden_layers(model), devices=["cpu"], n_distinct_linears=len(_linears(model)),
                    n_parameters=sum(p.numel() for p in model.parameters()),
                    n_linears=sum(isinstance(m, nn.Linear) for _, m in model.named_modules(remove_duplicate=False)))
    cases.append(case)
    return cases


def _tower_call(model, linears, x, given_x, run, call_on):
    got = run(model, given_x, on=call_on)
    return {"on": call_on, "got": value_facts(got), "x_changed": not torch.equal(given_x, x),
            "given": {"x": given(x)}, "layers": _layer_facts(linears)}


def _tower_gradients(model, linears, x, run, on):
    """The gradients backward() gives x and every layer's weight and bias from the learner's
    output, with the layers and the upstream gradient they came from (``_expect_tower`` adds
    those of the tower's formula with these layers)."""
    on = f"{on} called on a batch of shape {shape_text(list(x.shape))} that requires grad, then backward()"
    upstream = torch.randn(x.shape, generator=torch.Generator().manual_seed(98))
    params = [p for layer in linears for p in (layer.weight, layer.bias) if p is not None]
    leaf = x.clone().requires_grad_(True)
    out = run(model, leaf, on=on)
    record = {"on": on, "got": None, "upstream": upstream.numpy().copy(), "layers": _layer_facts(linears),
              "given": {"x": given(x)}}
    if isinstance(out, torch.Tensor) and out.requires_grad and tuple(out.shape) == tuple(x.shape):
        grads = run(torch.autograd.grad, out, [leaf] + params, upstream, allow_unused=True, on=on)
        record["got"] = [None if g is None else value_facts(g)["values"] for g in grads]
    return record


def _formula_gradients(record):
    """What backward() gives x and each layer's weight and bias through the tower's formula."""
    x = tensor_of(record["given"]["x"]).requires_grad_(True)
    layers, leaves = [], []
    for layer in record["layers"]:
        weight = tensor_of(layer["weight"]).clone().requires_grad_(True)
        bias = None if layer["bias"] is None else tensor_of(layer["bias"]).clone().requires_grad_(True)
        layers.append((weight, bias))
        leaves += [weight] + ([bias] if bias is not None else [])
    with torch.enable_grad():
        h = x
        for weight, bias in layers:
            h = torch.relu(F.linear(h, weight, bias))
        grads = torch.autograd.grad(h, [x] + leaves, torch.as_tensor(record["upstream"]), allow_unused=True)
    return [None if g is None else g.numpy().copy() for g in grads]


def _through(x, layers, *, last_relu=True, first_only=False):
    """x through the layers (each followed by ReLU, the last one too unless ``last_relu`` is
    False; the first layer every time where ``first_only``), as value facts; None where layers
    of other sizes do not compose."""
    try:
        for index, (weight, bias) in enumerate(layers):
            weight, bias = layers[0] if first_only else (weight, bias)
            x = F.linear(x, weight, bias)
            if last_relu or index < len(layers) - 1:
                x = torch.relu(x)
    except RuntimeError:
        return None
    return value_facts(x)


def _expect_tower(cases):
    """What the tower's formula gives on each recorded batch with the learner's own layers (each
    in the order registered, each followed by ReLU), and what the classic mistakes give: no ReLU
    after the last layer, the first layer applied every time."""
    for case in cases:
        for call in case.get("calls", []):
            x = tensor_of(call["given"]["x"])
            layers = [(tensor_of(layer["weight"]).to(x.dtype),
                       None if layer["bias"] is None else tensor_of(layer["bias"]).to(x.dtype))
                      for layer in call["layers"]]
            call["expected"] = _through(x, layers)
            call["no_final_relu"] = _through(x, layers, last_relu=False)
            call["first_only"] = _through(x, layers, first_only=True)
        width, depth = case["width"], case["depth"]
        with torch.random.fork_rng(devices=[]):  # the reference's layers draw their weights
            for call in case.get("trials", []):
                x = tensor_of(call["given"]["x"])
                layers = [(tensor_of(layer["weight"]).to(x.dtype),
                           None if layer["bias"] is None else tensor_of(layer["bias"]).to(x.dtype))
                          for layer in call["layers"]]
                call["expected"] = _through(x, layers)
                call["expected_left"] = expected_of(call, lambda: Tower.reference(width, depth))
            if "params_changed" in case:
                model = Tower.reference(width, depth)
                values = parameter_values(model)
                model(tensor_of(case["calls"][0]["given"]["x"]))
                case["expected_params_changed"] = parameters_changed(model, values)
        if case.get("gradients"):
            case["gradients"]["expected"] = _formula_gradients(case["gradients"])
    return cases


def _judge_tower(cases):
    for case in cases:
        problem = _layers_problem(case)
        if problem or case.get("count_only"):
            return problem
        on = case["on"]
        if case.get("params_changed") and case["params_changed"] != case.get("expected_params_changed"):
            return MESSAGES("forward-changed-params", names=", ".join(case["params_changed"]),
                            on=case["calls"][0]["on"])
        for call in case["calls"] + case.get("trials", []):
            problem = _call_problem(case, call)
            if problem:
                return problem
        problem = _gradient_problem(case.get("gradients"))
        if problem:
            return problem
        meta = case.get("on_meta") or {"kind": "tensor", "device": "meta"}
        if meta["kind"] != "tensor" or meta["device"] != "meta":
            return MESSAGES("output-off-device", kind_with_article=a_or_an(meta["kind"]),
                            device=meta.get("device", "?"), on=on)
    return None


def _layers_problem(case):
    on, width, depth = case["on"], case["width"], case["depth"]
    if "hidden_layers" not in case:
        return MESSAGES("not-a-module", text=not_a_module(case["on"], case["kind"], "Tower"))
    per_layer = width * width + width
    expected_count = depth * per_layer
    if case["hidden_layers"]:
        if case.get("n_parameters") == expected_count and expected_count:
            return MESSAGES("layers-hidden-params-registered", count=expected_count, on=on,
                            where=", ".join(case["hidden_layers"]))
        found = f"finds {case['n_parameters']} of the" if "n_parameters" in case else "misses"
        return MESSAGES("layers-in-plain-list", found=found, count=expected_count, on=on,
                        where=", ".join(case["hidden_layers"]))
    if "n_parameters" not in case:
        return MESSAGES("built-off-cpu", on=on, devices=", ".join(case["devices"]))
    if case["n_linears"] >= depth and case["n_distinct_linears"] < case["n_linears"]:
        return MESSAGES("same-layer-repeated", on=on, depth=depth, distinct=case["n_distinct_linears"])
    if case["n_parameters"] == expected_count and expected_count and case["n_linears"] == 0:
        return MESSAGES("no-linear-layers", on=on, count=expected_count, depth=depth, width=width)
    if depth == 0 and (case["n_parameters"] or case["n_linears"]):
        return MESSAGES("depth-zero-layers", on=on, linears=case["n_distinct_linears"], found=case["n_parameters"])
    if case["n_parameters"] != expected_count or case["n_linears"] != depth:
        return MESSAGES("wrong-layers", on=on, linears=case["n_distinct_linears"], found=case["n_parameters"],
                        depth=depth, width=width, count=expected_count)
    return None


def _call_problem(case, call):
    got, expected, on_call = call["got"], call["expected"], call["on"]
    depth = case["depth"]
    if call["x_changed"]:
        return MESSAGES("changed-x-in-place", on=on_call)
    if expected is None:  # the learner's layers do not compose on this batch: only the shape is known
        expected = {"kind": "tensor", "shape": call["given"]["x"]["shape"], "dtype": call["given"]["x"]["dtype"]}
    problem = tensor_problem(got, expected, what="forward's output", on=on_call, rtol=1e-4,
                             atol=1e-5, check_device=False)
    if problem is None:
        left = call.get("expected_left", {"requires_grad": True})
        if left["requires_grad"] and not got["requires_grad"]:
            return MESSAGES("cut-from-graph", on=on_call)
        return left_problem(call, left, MESSAGES, on_call)
    if got.get("values") is not None and got["shape"] == expected["shape"]:
        first = case["calls"][0]["got"]
        if call is not case["calls"][0] and first.get("shape") == got["shape"] and same_values(
            got["values"], first["values"], rtol=0, atol=0
        ):
            return MESSAGES("cached-output", on=on_call)
        if call.get("no_final_relu") and same_values(got["values"], call["no_final_relu"]["values"],
                                                     rtol=1e-4, atol=1e-5):
            return MESSAGES("no-final-relu", on=on_call)
        if depth > 1 and call.get("first_only") and same_values(
                got["values"], call["first_only"]["values"], rtol=1e-4, atol=1e-5):
            return MESSAGES("first-layer-only", on=on_call, depth=depth)
    return problem + " " + MESSAGES.text("in-order")


def _gradient_problem(record):
    if not record or record["got"] is None:
        return None  # an output that does not require grad: judged from the calls
    got, expected, on = record["got"], record["expected"], record["on"]
    agree = [(g is None and (e is None or not np.any(e))) or (
        g is not None and e is not None and same_values(g, e, rtol=1e-4, atol=1e-5)) for g, e in zip(got, expected)]
    if all(agree):
        return None
    cut = [i for i, (g, e) in enumerate(zip(got, expected)) if (g is None or not np.any(g)) and e is not None and np.any(e)]
    if cut:
        return MESSAGES("graph-cut-between-layers", on=on, count=len(cut), total=len(got))
    return MESSAGES("wrong-gradients", on=on)


Tower = Exercise(
    "Tower",
    chapter=CHAPTER,
    title="A tower of layers made in a loop",
    expects=Function("Tower", ("width", "depth"), returns="an nn.Module (your class's instance)"),
    probe=_probe_tower,
    expect=_expect_tower,
    judge=_judge_tower,
    reference=Tower,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "layer-before-super-init": NOTE_CLUES["layer-before-super-init"],
        **{key: NOTE_CLUES[key] for key in ("copied-out-of-device", "tensor-made-on-cpu")},
        "layer-sizes-mismatch": "mat1 and mat2 shapes cannot be multiplied",
    }),
    messages=MESSAGES,
)
