"""Chapter 03 — Models: modules with skips, registered layers, losses from logits, decay groups.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it. Probes build small models on the CPU with their own seeded generators, so a
check is deterministic, fast, and leaves the learner's random streams alone.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.facts import (
    not_a_module,
    same_values,
    shape_text,
    tensor_problem,
    value_facts,
)

CHAPTER = "models"


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


# The exception a subclass raises when it assigns a layer before nn.Module has set itself up.
_SUPER_INIT_NOTE = (
    "cannot assign module before Module.__init__() call",
    "super().__init__() must run before the first layer is assigned to self.",
)


def _linears(model: nn.Module) -> list[nn.Linear]:
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


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


def _probe_skip_block(answer, run):
    cases = []
    for seed, (width, hidden) in enumerate(_SKIP_SIZES):
        on = f"SkipBlock({width}, {hidden})"
        torch.manual_seed(seed)  # the learner's layers draw their initial weights
        model = run(answer, width, hidden, on=on)
        case = {"on": on, "width": width, "hidden": hidden, "kind": _module_kind(model)}
        if not isinstance(model, nn.Module):
            cases.append(case)
            return cases
        case["hidden_layers"] = _hidden_layers(model)
        case["n_parameters"] = sum(p.numel() for p in model.parameters())
        linears = _linears(model)
        case["linear_shapes"] = [[m.in_features, m.out_features] for m in linears]
        expand = next((m for m in linears if (m.in_features, m.out_features) == (width, hidden)), None)
        project = next((m for m in linears if (m.in_features, m.out_features) == (hidden, width)), None)
        x = _input((4, width), seed=10 + seed)
        with torch.no_grad():
            got = run(model, x.clone(), on=f"{on} called on a batch of shape (4, {width})")
            case["got"] = value_facts(got)
            if expand is not None and project is not None:
                inner = expand(x)
                branch = project(torch.relu(inner))
                case["expected"] = value_facts(x + branch)
                case["without_skip"] = value_facts(branch)
                case["relu_after_sum"] = value_facts(torch.relu(x + branch))
                case["relu_on_branch_end"] = value_facts(x + torch.relu(branch))
                case["without_relu"] = value_facts(x + project(inner))
        cases.append(case)
    return cases


def _judge_skip_block(cases):
    for case in cases:
        on, width, hidden = case["on"], case["width"], case["hidden"]
        if "n_parameters" not in case:
            return not_a_module(case["on"], case["kind"], "SkipBlock")
        if case["hidden_layers"]:
            return (
                f"Your layers sit in {', '.join(case['hidden_layers'])}, which PyTorch does not "
                "look inside (on " + on + "): assign each layer to its own attribute, "
                "self.expand = nn.Linear(...), or use nn.ModuleList."
            )
        expected_count = width * hidden + hidden + hidden * width + width
        if case["n_parameters"] != expected_count or "expected" not in case:
            shapes = ", ".join(f"Linear({i}, {o})" for i, o in case["linear_shapes"]) or "none"
            return (
                f"{on} registers {case['n_parameters']} parameters in these linear layers: "
                f"{shapes}. Expected two layers, Linear({width}, {hidden}) then "
                f"Linear({hidden}, {width}): {expected_count} parameters with their biases."
            )
        got, on_call = case["got"], f"{on}, a batch of shape (4, {width})"
        expected = case["expected"]
        if got["kind"] != "tensor" or got["shape"] != expected["shape"] or got["dtype"] != expected["dtype"]:
            return tensor_problem(got, expected, what="forward's output", on=on_call, check_device=False)
        values = got["values"]
        if same_values(values, expected["values"], rtol=1e-4, atol=1e-5):
            continue
        named = [
            ("without_skip", "Your output is the branch alone, project(relu(expand(x))): the "
             "skip connection is missing. Add the input back: return x + ..."),
            ("relu_after_sum", "You applied ReLU after adding x, so negative inputs are cut off "
             "on the skip path too. The skip path carries x unchanged: x + project(relu(expand(x)))."),
            ("relu_on_branch_end", "You put a ReLU at the end of the branch too, so the branch can "
             "only add, never subtract. The ReLU goes between the two layers only."),
            ("without_relu", "Your block has no ReLU between the two layers: two linear layers "
             "in a row are one linear layer. Use project(torch.relu(expand(x)))."),
        ]
        for key, message in named:
            if same_values(values, case[key]["values"], rtol=1e-4, atol=1e-5):
                return f"{message} (on {on_call})"
        return tensor_problem(got, expected, what="forward's output", on=on_call, rtol=1e-4,
                              atol=1e-5, check_device=False) + (
            " Expected x + project(relu(expand(x))), with your own two layers."
        )
    return None


SkipBlock = Exercise(
    "SkipBlock",
    chapter=CHAPTER,
    title="A block with a skip connection",
    expects=Function("SkipBlock", ("width", "hidden")),
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
        (
            "mat1 and mat2 shapes cannot be multiplied",
            "a layer whose in_features does not match what it is given: expand takes width "
            "features, project takes hidden.",
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
        if not isinstance(model, nn.Module):
            cases.append(case)
            return cases
        linears = _linears(model)
        case["hidden_layers"] = _hidden_layers(model)
        case["n_parameters"] = sum(p.numel() for p in model.parameters())
        positions = [m for _, m in model.named_modules(remove_duplicate=False) if isinstance(m, nn.Linear)]
        case["n_linears"] = len(positions)
        case["n_distinct_linears"] = len(linears)
        case["state_dict_keys"] = len(model.state_dict())
        x = _input((2, width), seed=20 + seed)
        with torch.no_grad():
            got = run(model, x.clone(), on=f"{on} called on a batch of shape (2, {width})")
            case["got"] = value_facts(got)
            expected, no_final_relu = x, x
            for index, layer in enumerate(linears):
                expected = torch.relu(layer(expected))
                no_final_relu = layer(no_final_relu)
                if index < len(linears) - 1:
                    no_final_relu = torch.relu(no_final_relu)
            case["expected"] = value_facts(expected)
            case["no_final_relu"] = value_facts(no_final_relu)
        cases.append(case)
    return cases


def _judge_tower(cases):
    for case in cases:
        on, width, depth = case["on"], case["width"], case["depth"]
        if "n_parameters" not in case:
            return not_a_module(case["on"], case["kind"], "Tower")
        per_layer = width * width + width
        expected_count = depth * per_layer
        if case["hidden_layers"]:
            return (
                f"model.parameters() finds {case['n_parameters']} of the {expected_count} "
                f"parameters of {on}: your layers sit in {', '.join(case['hidden_layers'])}. "
                "PyTorch only registers modules assigned directly to an attribute or held by "
                "nn.ModuleList / nn.Sequential / nn.ModuleDict, so an optimizer would never "
                "update these layers, .to(device) would not move them and state_dict() would "
                "not save them. Wrap the list: self.layers = nn.ModuleList([...])."
            )
        if case["n_linears"] >= depth and case["n_distinct_linears"] < case["n_linears"]:
            return (
                f"{on} holds the same layer {depth} times ({case['n_distinct_linears']} distinct "
                "layer): `[nn.Linear(width, width)] * depth` repeats one object, so every "
                "position shares one weight. Build a new layer per position: "
                "[nn.Linear(width, width) for _ in range(depth)]."
            )
        if case["n_parameters"] != expected_count or case["n_linears"] != depth:
            return (
                f"{on} has {case['n_distinct_linears']} linear layers and {case['n_parameters']} "
                f"parameters; expected {depth} layers of Linear({width}, {width}), "
                f"{expected_count} parameters with their biases."
            )
        got, expected = case["got"], case["expected"]
        on_call = f"{on}, a batch of shape (2, {width})"
        problem = tensor_problem(got, expected, what="forward's output", on=on_call, rtol=1e-4,
                                 atol=1e-5, check_device=False)
        if problem is None:
            continue
        if got.get("values") is not None and got["shape"] == expected["shape"] and same_values(
            got["values"], case["no_final_relu"]["values"], rtol=1e-4, atol=1e-5
        ):
            return (
                f"Your last layer has no ReLU after it (on {on_call}). This tower puts a ReLU "
                "after every layer, the last one included."
            )
        return problem + " Expected each layer in order, each followed by ReLU."
    return None


Tower = Exercise(
    "Tower",
    chapter=CHAPTER,
    title="A tower of layers made in a loop",
    expects=Function("Tower", ("width", "depth")),
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
    error_notes=[_SUPER_INIT_NOTE],
)


# ============================================================================================
# M5 — cross-entropy from raw logits, built from log_softmax
# ============================================================================================
def cross_entropy_from_logits(logits, targets):
    log_probs = torch.log_softmax(logits, dim=1)
    return F.nll_loss(log_probs, targets)


class _CallRecorder(torch.overrides.TorchFunctionMode):
    """Notes which torch functions the learner's code calls (by name), and changes nothing."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.add(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


_FORBIDDEN_SHORTCUTS = {"cross_entropy", "cross_entropy_loss"}


def _ce_cases():
    generator = torch.Generator().manual_seed(3)
    small = torch.randn(6, 4, generator=generator)
    digits = torch.randn(8, 10, generator=generator) * 3
    large = torch.randn(5, 3, generator=generator) * 400  # confident logits: exp() overflows
    return [
        ("6 examples, 4 classes", small, torch.randint(0, 4, (6,), generator=generator)),
        ("8 examples, 10 classes", digits, torch.randint(0, 10, (8,), generator=generator)),
        ("5 examples with very large logits (up to about ±1000)", large,
         torch.randint(0, 3, (5,), generator=generator)),
    ]


def _probe_cross_entropy(answer, run):
    cases = []
    for on, logits, targets in _ce_cases():
        recorder = _CallRecorder()
        with recorder:
            got = run(answer, logits.clone(), targets.clone(), on=on)
        probs = logits.softmax(dim=1)
        n = len(targets)
        picked_logits = logits[torch.arange(n), targets]
        cases.append({
            "on": on,
            "got": value_facts(got),
            "called": sorted(recorder.names),
            "expected": value_facts(F.cross_entropy(logits, targets)),
            "softmax_first": value_facts(F.cross_entropy(probs, targets)),
            "nll_on_logits": value_facts(-picked_logits.mean()),
            "summed": value_facts(F.cross_entropy(logits, targets, reduction="sum")),
            "no_minus": value_facts(-F.cross_entropy(logits, targets)),
        })
    return cases


def _judge_cross_entropy(cases):
    for case in cases:
        on, got, expected = case["on"], case["got"], case["expected"]
        shortcut = _FORBIDDEN_SHORTCUTS & set(case["called"])
        if shortcut:
            return (
                "Your function calls F.cross_entropy (or nn.CrossEntropyLoss), which this "
                "exercise asks you to build yourself: log_softmax over the classes, then "
                "F.nll_loss (or pick each target's log-probability and average)."
            )
        if got["kind"] == "NoneType":
            return f"Your function returned None (on {on}); end it with `return`."
        if got["kind"] != "tensor":
            return (
                f"Your function returned {got['kind']} ({got['repr']}); return the loss as a "
                "0-d tensor, so loss.backward() works."
            )
        if got["shape"] != []:
            return (
                f"Your loss has shape {shape_text(got['shape'])} (on {on}); expected one number, "
                "shape (): average over the batch (F.nll_loss does it by default)."
            )
        value = float(np.asarray(got["values"]))
        if not np.isfinite(value):
            return (
                f"Your loss is {value} (on {on}). torch.log(torch.softmax(...)) computes "
                "exp() of large logits, which overflows (or underflows to a probability of 0, "
                "whose log is -inf). torch.log_softmax computes the same thing without "
                "forming the probabilities, so it stays finite."
            )
        if same_values(value, expected["values"], rtol=1e-4, atol=1e-5):
            continue
        named = [
            ("softmax_first", "You applied softmax, then cross-entropy: cross-entropy applies "
             "log_softmax itself, so the probabilities get squashed twice and the loss can "
             "never get near 0. Give it the raw logits."),
            ("nll_on_logits", "F.nll_loss on raw logits just picks -logit of the target class: "
             "it expects log-probabilities. Take torch.log_softmax(logits, dim=1) first."),
            ("summed", "Your loss is the sum over the batch, not the mean: it grows with the "
             "batch size, and so would your effective learning rate. Average (nll_loss's default)."),
            ("no_minus", "Your loss has the wrong sign: it is the mean log-probability of the "
             "targets, which training would push down. Cross-entropy is its negative."),
        ]
        for key, message in named:
            if same_values(value, case[key]["values"], rtol=1e-4, atol=1e-5):
                return f"{message} (on {on}: got {value:.4f}, expected {float(expected['values']):.4f})"
        return (
            f"Your loss is {value:.4f}; expected {float(expected['values']):.4f} (on {on}). "
            "Check the dimension of log_softmax: classes are dim=1 for logits of shape (N, C)."
        )
    return None


cross_entropy_from_logits = Exercise(
    "cross_entropy_from_logits",
    chapter=CHAPTER,
    title="Cross-entropy from raw logits",
    expects=Function("cross_entropy_from_logits", ("logits", "targets")),
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
        ),
        (
            "Dimension out of range",
            "logits have shape (N, C): the classes are dim=1.",
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
    ]


def _expected_decay(model) -> set[str]:
    return {
        f"{module_name}.{name}" if module_name else name
        for module_name, module in model.named_modules()
        for name, _ in module.named_parameters(recurse=False)
        if name == "weight" and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d))
    }


def _probe_decay_groups(answer, run):
    cases = []
    for on, model, weight_decay in _decay_models():
        names = {id(p): name for name, p in model.named_parameters()}
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        groups = run(answer, model, weight_decay, on=on)
        case = {
            "on": on,
            "weight_decay": weight_decay,
            "all": sorted(names.values()),
            "decay": sorted(_expected_decay(model)),
            "norm": sorted(
                f"{module_name}.{name}"
                for module_name, module in model.named_modules()
                if isinstance(module, (nn.LayerNorm, nn.BatchNorm1d))
                for name, _ in module.named_parameters(recurse=False)
            ),
            "changed": sorted(
                name for name, p in model.named_parameters() if not torch.equal(p.detach(), before[name])
            ),
            "kind": _module_kind(groups),
        }
        if isinstance(groups, (list, tuple)):
            recorded = []
            for group in groups:
                if not isinstance(group, dict):
                    recorded.append({"kind": _module_kind(group)})
                    continue
                params = group.get("params")
                params = [params] if isinstance(params, torch.Tensor) else list(params or [])
                recorded.append({
                    "kind": "dict",
                    "keys": sorted(str(k) for k in group),
                    "params": [names.get(id(p), "<not a parameter of this model>") for p in params],
                    "weight_decay": float(group["weight_decay"])
                    if isinstance(group.get("weight_decay"), (int, float)) else None,
                })
            case["groups"] = recorded
        cases.append(case)
    return cases


_ADAMW_DEFAULT_DECAY = 0.01


def _judge_decay_groups(cases):
    for case in cases:
        on, weight_decay = case["on"], case["weight_decay"]
        if case["changed"]:
            return f"Your function changed the model's parameters ({', '.join(case['changed'])}, on {on}); it should only sort them."
        groups = case.get("groups")
        if groups is None:
            return (
                f"Your function returned {case['kind']} (on {on}); return a list of parameter "
                "groups, each a dict: [{'params': [...], 'weight_decay': ...}, ...]."
            )
        for group in groups:
            if group["kind"] != "dict":
                return (
                    f"One of your groups is {group['kind']}, not a dict (on {on}): each group is "
                    "{'params': [...], 'weight_decay': ...}."
                )
            if "params" not in group["keys"]:
                return f"A group has no 'params' key (on {on}): the optimizer looks for 'params'."
            unknown = [k for k in group["keys"] if k not in ("params", "weight_decay", "lr", "name")]
            if unknown:
                return (
                    f"A group has the key {unknown[0]!r} (on {on}), which the optimizer does not "
                    "read: the decay must be under 'weight_decay'."
                )
        placed = [name for group in groups for name in group["params"]]
        strangers = [n for n in placed if n.startswith("<")]
        if strangers:
            return f"A group holds a tensor that is not a parameter of the model (on {on})."
        twice = sorted({n for n in placed if placed.count(n) > 1})
        if twice:
            return (
                f"{twice[0]} is in more than one group (on {on}); the optimizer refuses that "
                "(\"some parameters appear in more than one parameter group\"). Put every "
                "parameter in exactly one group."
            )
        missing = sorted(set(case["all"]) - set(placed))
        if missing:
            return (
                f"{len(missing)} parameters are in no group, e.g. {missing[0]} (on {on}): the "
                "optimizer would never update them. Every parameter goes in exactly one group."
            )
        decayed, undecayed = set(), set()
        for group in groups:
            value = group["weight_decay"]
            if value is None:
                if "weight_decay" not in group["keys"]:
                    value = _ADAMW_DEFAULT_DECAY
                else:
                    return f"A group's weight_decay is not a number (on {on})."
            (decayed if value > 0 else undecayed).update(group["params"])
            if value > 0 and abs(value - weight_decay) > 1e-12:
                if "weight_decay" not in group["keys"]:
                    return (
                        f"A group without a 'weight_decay' key gets the optimizer's default "
                        f"(AdamW: 0.01), not 0 (on {on}): give every group its value explicitly, "
                        "0.0 for the group that must not decay."
                    )
                return (
                    f"A group decays with {value:g}; expected the weight_decay you were given, "
                    f"{weight_decay:g} (on {on})."
                )
        expected = set(case["decay"])
        wrongly_decayed = sorted(decayed - expected)
        norm = set(case["norm"])
        if wrongly_decayed:
            example = wrongly_decayed[0]
            if set(wrongly_decayed) == set(case["all"]) - expected:
                return (
                    f"Every parameter is decayed (on {on}), the biases and the normalisation "
                    f"layers' weights too, e.g. {example}. Decay only the weights of Linear and "
                    "Conv layers; put the rest in a group with weight_decay 0."
                )
            if all(n in norm for n in wrongly_decayed):
                return (
                    f"The normalisation layers' weights are decayed, e.g. {example} (on {on}). "
                    "They are named 'weight' but they are per-feature scales, not connections: "
                    "decay pulls them towards 0 and shrinks every normalised feature. Choose by "
                    "the kind of layer (or by p.ndim >= 2), not by the name alone."
                )
            return (
                f"{example} is decayed but should not be (on {on}): only the weights of Linear "
                "and Conv layers decay."
            )
        not_decayed = sorted(expected - decayed)
        if not_decayed:
            return (
                f"{not_decayed[0]} is not decayed (on {on}): the weights of Linear and Conv layers "
                f"are the ones weight decay is for. Give their group weight_decay={weight_decay:g}."
            )
    return None


decay_groups = Exercise(
    "decay_groups",
    chapter=CHAPTER,
    title="Weight decay on weights only",
    expects=Function("decay_groups", ("model", "weight_decay")),
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
        "module's type, or use the shape: connection weights have p.ndim >= 2.",
        "for module in model.modules(): for name, p in module.named_parameters(recurse=False): "
        "decay if name == 'weight' and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)), "
        "else no_decay.",
    ],
)
