"""Chapter 03, M8 — ``decay_groups``: weight decay on weights only."""

from __future__ import annotations

import numbers

import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, a_or_an
from course_utils.exercises.models.common import CHAPTER, _module_kind


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


class _Conv2dSame(nn.Conv2d):
    """A subclass of nn.Conv2d (padding kept as the input's size): a Conv2d for isinstance."""

    def __init__(self, channels):
        super().__init__(channels, channels, kernel_size=3, padding=1)


class _LayerZoo(nn.Module):
    """The variants of the layer kinds the task names, and what is not among them: Conv3d and
    ConvTranspose2d (convolutions, but neither nn.Conv1d nor nn.Conv2d: their weights do not
    decay here), a subclass of Conv2d (it does), BatchNorm2d, InstanceNorm1d with affine
    parameters, RMSNorm and a LayerNorm without bias (normalisation layers of other kinds), an
    EmbeddingBag (a table of vectors, like an Embedding), and a MultiheadAttention: its out_proj
    is a subclass of nn.Linear, its in_proj_weight a 2-D parameter of no Linear."""

    def __init__(self):
        super().__init__()
        self.volume = nn.Conv3d(1, 2, kernel_size=2)
        self.upsample = nn.ConvTranspose2d(2, 2, kernel_size=2)
        self.same = _Conv2dSame(2)
        self.bn2d = nn.BatchNorm2d(2)
        self.instance = nn.InstanceNorm1d(2, affine=True)
        self.rms = nn.RMSNorm(4)
        self.ln = nn.LayerNorm(4, bias=False)
        self.bag = nn.EmbeddingBag(10, 4)
        self.attention = nn.MultiheadAttention(4, num_heads=1)


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
        ("a model with Conv3d, ConvTranspose2d, a subclass of Conv2d, BatchNorm2d, "
         "InstanceNorm1d(affine=True), RMSNorm, a LayerNorm without bias, an EmbeddingBag and a "
         "MultiheadAttention, weight_decay=0.03", _LayerZoo(), 0.03),
    ]


# Every kind of normalisation layer (_NormBase: the BatchNorms and InstanceNorms), every kind of
# embedding table, and the layer kinds whose weights decay (isinstance: subclasses included).
_NORMS = (nn.LayerNorm, nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.RMSNorm, nn.LocalResponseNorm)
_EMBEDDINGS = (nn.Embedding, nn.EmbeddingBag)
_DECAYED_KINDS = (nn.Linear, nn.Conv1d, nn.Conv2d)


def _probe_decay_groups(answer, run):
    """Where the answer put each parameter of each model (by name), and what it changed: never
    which parameters a right answer decays (``_expect_decay_groups`` adds that, and the names
    each classic mistake picks, from the same models rebuilt on the judge's side)."""
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
            "changed": sorted(
                name for name, p in model.named_parameters() if not torch.equal(p.detach(), before[name])
            ),
            "frozen": sorted(
                name for name, p in model.named_parameters() if p.requires_grad != flags[name]
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


def _expect_decay_groups(cases):
    """Which parameters of each model (rebuilt as the probe built it) the reference decays, and
    the names each classic mistake goes by: the normalisation layers' parameters, the Embeddings'
    weights, the weights of subclasses of Linear/Conv, what a walk over model.children() misses."""
    with torch.random.fork_rng(devices=[]):  # _decay_models seeds torch's generator
        models = {on: model for on, model, _ in _decay_models()}
    for case in cases:
        model = models[case["on"]]
        names = {id(p): name for name, p in model.named_parameters()}
        decayed = decay_groups.reference(model, case["weight_decay"])[0]["params"]
        case["decay"] = sorted({names[id(p)] for p in decayed})
        case["norm"] = sorted(
            names[id(p)]
            for module in model.modules()
            if isinstance(module, _NORMS)
            for p in module.parameters(recurse=False)
        )
        case["embedding"] = sorted(
            names[id(module.weight)] for module in model.modules() if isinstance(module, _EMBEDDINGS)
        )
        # weights of subclasses of Linear/Conv: what type(m) in (nn.Linear, ...) misses
        case["subclass_weights"] = sorted(
            names[id(module.weight)] for module in model.modules()
            if isinstance(module, _DECAYED_KINDS) and type(module) not in _DECAYED_KINDS
        )
        case["subclass_of"] = {
            names[id(module.weight)]: next(f"nn.{k.__name__}" for k in _DECAYED_KINDS if isinstance(module, k))
            for module in model.modules()
            if isinstance(module, _DECAYED_KINDS) and type(module) not in _DECAYED_KINDS
        }
        # weights of convolutions of other kinds (Conv3d, ConvTranspose*): what _ConvNd or
        # "Conv" in the class name takes too
        case["other_conv_weights"] = {
            names[id(module.weight)]: type(module).__name__ for module in model.modules()
            if isinstance(module, nn.modules.conv._ConvNd) and not isinstance(module, _DECAYED_KINDS)
        }
        # what a walk over model.children() alone misses: deeper blocks, the model's own
        case["one_level_misses"] = sorted(
            name for name, p in model.named_parameters()
            if id(p) not in {id(q) for child in model.children() for q in child.parameters(recurse=False)}
        )
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
            other_convs = case.get("other_conv_weights", {})
            convs = [n for n in wrongly_decayed if n in other_convs]
            if convs:
                return Mistake("other-conv-decayed", (
                    f"{convs[0]}, the weight of an nn.{other_convs[convs[0]]}, is decayed (on {on}). "
                    "The task decays the weights of nn.Linear, nn.Conv1d and nn.Conv2d (and their "
                    "subclasses) and nothing else: Conv3d and the ConvTranspose layers are "
                    "convolutions of other classes, which nn.modules.conv._ConvNd or 'Conv' in the "
                    "class name takes too. Test isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d))."
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
            base = case.get("subclass_of", {}).get(subclassed[0], "nn.Linear")
            return Mistake("subclass-not-decayed", (
                f"{subclassed[0]} is not decayed (on {on}): its layer is a subclass of "
                f"{base}, and so {a_or_an(base.removeprefix('nn.'))} layer. type(module) in "
                "(nn.Linear, ...) compares the exact class "
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
    expect=_expect_decay_groups,
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
