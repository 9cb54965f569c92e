"""Chapter 03, M2 — ``Tower``: layers made in a loop must be registered."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, a_or_an
from course_utils.exercises.facts import (
    given,
    not_a_module,
    same_values,
    shape_text,
    tensor_of,
    tensor_problem,
    value_facts,
)
from course_utils.exercises.models.common import (
    CHAPTER,
    _DEVICE_NOTE,
    _META,
    _SUPER_INIT_NOTE,
    _device_run,
    _linears,
    _module_batches,
    _module_kind,
    _shaped_as,
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
        for x in xs:
            shape = tuple(x.shape)
            again = " (another batch of the first shape)" if len(calls) == len(xs) - 1 else ""
            call_on = f"{on} called on a batch of shape {shape_text(list(shape))}{again}"
            given_x = x.clone()
            got = run(model, given_x, on=call_on)
            call = {"on": call_on, "got": value_facts(got), "x_changed": not torch.equal(given_x, x),
                    "given": {"x": given(x)}, "layers": _layer_facts(linears)}
            calls.append(call)
        case["calls"] = calls
        if not all(_shaped_as(call) for call in calls):
            cases.append(case)  # judged from these calls; moving the model would only raise
            return cases
        case["on_meta"] = _device_run(model, xs[0], run, f"{on} {_META}")
        cases.append(case)
    return cases


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
                if call["no_final_relu"] and same_values(got["values"], call["no_final_relu"]["values"],
                                                         rtol=1e-4, atol=1e-5):
                    return Mistake("no-final-relu", (
                        f"Your last layer has no ReLU after it (on {on_call}). This tower puts a "
                        "ReLU after every layer, the last one included."
                    ))
                if depth > 1 and call["first_only"] and same_values(
                        got["values"], call["first_only"]["values"], rtol=1e-4, atol=1e-5):
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
    expect=_expect_tower,
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
