"""Chapter 03, M8 — ``decay_groups``: weight decay on weights only.

Engine: applies states.module_states("first-frozen", "grad-large") (via decay_groups_models),
states.snapshot / states.differences for what the call leaves behind, and a second call with
another decay and a decay of 0.0; hand-written because the answer is parameter groups, judged by
the parameters' names, not a tensor.
"""

from __future__ import annotations

import contextlib
import numbers

import torch
from torch import nn

from course_utils.exercises import states
from course_utils.exercises.core import Exercise, Function, a_or_an
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.models.common import CHAPTER, _module_kind
from course_utils.exercises.models.decay_groups_models import _decay_models

_BY_KIND = "isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d))"

MESSAGES = Messages("decay_groups", {
    "passed": (
        "Correct: Linear and Conv weights decay; biases and normalisation parameters do not. "
        "Pass the list straight to torch.optim.AdamW(groups, lr=...)."
    ),
    "hint-1": (
        "Return two groups: [{{'params': decay, 'weight_decay': weight_decay}}, "
        "{{'params': no_decay, 'weight_decay': 0.0}}]. Every parameter goes in exactly one."
    ),
    "hint-2": (
        "A LayerNorm's scale is also called 'weight', so the name alone is not enough. Go "
        "module by module (model.modules(), named_parameters(recurse=False)) and look at the "
        "module's kind with isinstance, which includes subclasses. Not the shape: an "
        "Embedding's weight is 2-D too, and it does not decay here."
    ),
    "hint-3": (
        "for module in model.modules(): for name, p in module.named_parameters(recurse=False): "
        "decay if name == 'weight' and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)), "
        "else no_decay."
    ),
    "changed-param-values": (
        "Your function changed the values of the model's parameters "
        "({names}, on {on}); it should only sort them into groups."
    ),
    "changed-requires-grad": (
        "Your function changed requires_grad of {names} (on {on}): "
        "parameters without decay must still train. Only sort them into groups."
    ),
    "unfroze-params": (
        "Your function switched on requires_grad of {names} (on {on}), which the caller had "
        "frozen: whether a parameter trains is the caller's choice (a frozen layer stays frozen "
        "while fine-tuning the rest). Only sort the parameters into groups."
    ),
    "left-model-changed": (
        "Your function changed the model it was given (on {on}): {difference}. It should only "
        "sort the parameters into groups (model.zero_grad() and the like are the training loop's to call)."
    ),
    "not-a-list-of-groups": (
        "Your function returned {kind} (on {on}); return a list of parameter "
        "groups, each a dict: [{{'params': [...], 'weight_decay': ...}}, ...]."
    ),
    "group-not-a-dict": (
        "One of your groups is {kind}, not a dict (on {on}): each group is "
        "{{'params': [...], 'weight_decay': ...}}."
    ),
    "no-params-key": "A group has no 'params' key (on {on}): the optimizer looks for 'params'.",
    "params-as-set": (
        "A group's 'params' is a {container} (on {on}): torch.optim refuses "
        "sets, whose order changes from run to run (so a saved optimizer state would "
        "not match its parameters). Use a list."
    ),
    "decay-under-wrong-key": (
        "A group has the key {key!r} (on {on}), which the optimizer does not "
        "read: the decay must be under 'weight_decay'."
    ),
    "cached-groups": (
        "Your function returned the group dicts of an earlier call again (on {on}): groups kept "
        "from one call to the next keep that call's weight_decay and parameters. Build new "
        "groups on every call."
    ),
    "lists-kept-between-calls": (
        "Your groups hold parameters of the model of an earlier call, e.g. "
        "{example} (on {on}): lists kept between calls (at module "
        "level, or as a default argument) keep growing. Make new lists inside the function."
    ),
    "none-in-group": (
        "A group holds None (on {on}): a layer made with bias=False has .bias None, "
        "which is no parameter. Take the parameters that exist, as "
        "module.named_parameters(recurse=False) lists them."
    ),
    "params-not-flat": (
        "A group's 'params' holds {kind_with_article} (on {on}), not a "
        "parameter: 'params' is one flat list of the model's parameters."
    ),
    "not-model-params": "A group holds {count} tensors that are not parameters of the model (on {on}).",
    "duplicate-in-group": (
        "{name} appears twice in one group (on {on}): a layer used twice in the "
        "model is still one parameter, and torch.optim warns that a group with "
        "duplicate parameters will become an error. Collect parameters once each "
        "(model.parameters() and model.modules() skip repeats)."
    ),
    "duplicate-not-shared": (
        "{name} appears twice in one group (on {on}), though the model holds it once (its layer "
        "is not used twice): your code collects it twice. module.parameters() recurses "
        "into the module's children, so called on a container (the model, a Sequential) as well "
        "as on the layers inside it, it takes their parameters once more. Take each module's own: "
        "module.named_parameters(recurse=False) over model.modules(). torch.optim warns that a "
        "group with duplicate parameters will become an error."
    ),
    "in-two-groups": (
        "{name} is in more than one group (on {on}); the optimizer refuses that "
        "(\"some parameters appear in more than one parameter group\"). Put every "
        "parameter in exactly one group."
    ),
    "one-level-walk": Message(
        "{count} parameters are in no group, e.g. {name} (on {on}): exactly "
        "those of a block nested inside another block and of the model itself, which a "
        "walk over model.children() (one level down, the model excluded) never reaches. "
        "model.modules() visits every module, the model included.", advises=("model.modules()",)),
    "frozen-in-no-group": (
        "{count} parameters are in no group, e.g. {name} (on {on}), exactly the frozen ones "
        "(requires_grad=False): every parameter goes in a group, frozen or not. The optimizer "
        "skips a frozen parameter while it has no gradient, and trains it with its group's decay "
        "once the caller unfreezes it (as fine-tuning does)."
    ),
    "params-in-no-group": (
        "{count} parameters are in no group, e.g. {name} (on {on}): the "
        "optimizer would never update them. Every parameter goes in exactly one group."
    ),
    "decay-not-a-number": "A group's weight_decay is not a number (on {on}).",
    "no-weight-decay-key": (
        "A group without a 'weight_decay' key gets the optimizer's default "
        "(AdamW: 0.01), not 0 (on {on}): give every group its value explicitly, "
        "0.0 for the group that must not decay."
    ),
    "fixed-decay": "A group decays with {value:g}; expected the weight_decay you were given, {weight_decay:g} (on {on}).",
    "everything-decayed": (
        "Every parameter is decayed (on {on}), the biases and the normalisation "
        "layers' weights too, e.g. {example}. Decay only the weights of Linear and "
        "Conv layers; put the rest in a group with weight_decay 0."
    ),
    "norm-weights-decayed": (
        "The normalisation layers' weights are decayed, e.g. {example} (on {on}). "
        "They are named 'weight' but they are per-feature scales, not connections: "
        "decay pulls them towards 0 and shrinks every normalised feature. Choose by "
        "the kind of layer, not by the name alone."
    ),
    "other-conv-decayed": Message(
        "{name}, the weight of an nn.{kind}, is decayed (on {on}). "
        "The task decays the weights of nn.Linear, nn.Conv1d and nn.Conv2d (and their "
        "subclasses) and nothing else: Conv3d and the ConvTranspose layers are "
        "convolutions of other classes, which nn.modules.conv._ConvNd or 'Conv' in the "
        "class name takes too. Test isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)).",
        advises=(_BY_KIND,)),
    "embedding-decayed": Message(
        "{name}, an Embedding's weight, is decayed (on {on}). It is 2-D like "
        "a Linear's weight, but it is a table of vectors, not connections, and the task "
        "keeps it out of decay: choose by the kind of layer (isinstance(module, "
        "(nn.Linear, nn.Conv1d, nn.Conv2d))), not by the shape (p.ndim >= 2).", advises=(_BY_KIND,)),
    "decays-non-weight": (
        "{name} is decayed but should not be (on {on}): only the weights of Linear "
        "and Conv layers decay."
    ),
    "subclass-not-decayed": Message(
        "{name} is not decayed (on {on}): its layer is a subclass of "
        "{base}, and so {kind_with_article} layer. type(module) in "
        "(nn.Linear, ...) compares the exact class "
        "and misses subclasses; isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)) "
        "includes them.", advises=(_BY_KIND,)),
    "weight-not-decayed": (
        "{name} is not decayed (on {on}): the weights of Linear and Conv layers "
        "are the ones weight decay is for. Give their group weight_decay={weight_decay:g}."
    ),
    "empty-group-dropped": (
        "You returned {count} group (on {on}), for a model with no weight of a Linear or Conv "
        "layer: the task asks for two groups whatever the model, the one with weight_decay then "
        "empty ({{'params': [], 'weight_decay': {weight_decay:g}}}). torch.optim accepts an "
        "empty group, and a caller may read groups[0] and groups[1]."
    ),
    "named-like-weight": (
        "{name} is decayed (on {on}): it belongs to a subclass of nn.Linear (or Conv), named "
        "like a weight but not the layer's weight. Only the parameter named exactly 'weight' "
        "decays (name == 'weight', not 'weight' in name); every other parameter goes in the "
        "group with weight_decay 0.0."
    ),
    "not-two-groups": (
        "You returned {count} groups (on {on}); the task asks for two: the weights "
        "with weight_decay, everything else with 0.0."
    ),
    "zero-decay-mixed": (
        "With weight_decay=0.0 your groups mix the weights of Linear and Conv layers with the "
        "rest, e.g. {name} (on {on}): the two groups are the same whatever the decay, the "
        "weights in one, everything else in the other, so that a run without decay differs "
        "from one with it by the number only."
    ),
})


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


# Every kind of normalisation layer (_NormBase: the BatchNorms and InstanceNorms), every kind of
# embedding table, and the layer kinds whose weights decay (isinstance: subclasses included).
_NORMS = (nn.LayerNorm, nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.RMSNorm, nn.LocalResponseNorm)
_EMBEDDINGS = (nn.Embedding, nn.EmbeddingBag)
_DECAYED_KINDS = (nn.Linear, nn.Conv1d, nn.Conv2d)


def _probe_decay_groups(answer, run):
    """Where the answer put each parameter of each model (by name), and what it changed: never
    which parameters a right answer decays (``_expect_decay_groups`` adds that, and the names
    each classic mistake picks, from the same models rebuilt on the judge's side)."""
    cases, earlier, returned = [], {}, []
    for on, model, weight_decay, state in _decay_models():
        context = states.MODULE_STATES[state].put(model) if state else None
        names = {id(p): name for name, p in model.named_parameters()}
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        flags = {name: p.requires_grad for name, p in model.named_parameters()}
        with context or contextlib.nullcontext():
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
            "unfrozen": sorted(
                name for name, p in model.named_parameters() if p.requires_grad and not flags[name]
            ),
            "kind": _module_kind(groups),
        }
        if state:  # what the call left: compared with what the reference leaves, on the judge's side
            case["state"], case["left"] = state, states.snapshot(model)
        if isinstance(groups, (list, tuple)):
            case["reused_groups"] = any(group is old for group in groups for old in returned)
            returned.extend(group for group in groups if isinstance(group, dict))
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
        models = {on: (model, state) for on, model, _, state in _decay_models()}
    for case in cases:
        model, state = models[case["on"]]
        names = {id(p): name for name, p in model.named_parameters()}
        if state:
            with states.MODULE_STATES[state].put(model):
                decayed = decay_groups.reference(model, case["weight_decay"])[0]["params"]
            case["expected_left"] = states.snapshot(model)
        else:
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
        # parameters the model holds more than once (a layer used twice); the others' names
        # of parameters of Linear/Conv layers: what "weight" in name takes besides the weight
        counts = {}
        for name, p in model.named_parameters(remove_duplicate=False):
            counts[id(p)] = counts.get(id(p), 0) + 1
        case["shared"] = sorted(name for name, p in model.named_parameters() if counts[id(p)] > 1)
        case["layer_others"] = sorted(
            names[id(p)] for module in model.modules() if isinstance(module, _DECAYED_KINDS)
            for name, p in module.named_parameters(recurse=False) if name != "weight")
        # what a walk over model.children() alone misses: deeper blocks, the model's own
        case["one_level_misses"] = sorted(
            name for name, p in model.named_parameters()
            if id(p) not in {id(q) for child in model.children() for q in child.parameters(recurse=False)}
        )
    return cases


_ADAMW_DEFAULT_DECAY = 0.01


def _judge_decay_groups(cases):
    for case in cases:
        problem = _what_the_call_changed(case) or _group_shape_problem(case) or _placement_problem(case)
        if problem:
            return problem
    return None


def _what_the_call_changed(case):
    on = case["on"]
    if case["changed"]:
        return MESSAGES("changed-param-values", names=", ".join(case["changed"]), on=on)
    if case.get("unfrozen"):
        return MESSAGES("unfroze-params", names=", ".join(case["unfrozen"]), on=on)
    if case["frozen"]:
        return MESSAGES("changed-requires-grad", names=", ".join(case["frozen"]), on=on)
    if "left" in case:
        found = states.differences(case["left"], case["expected_left"])
        if found:
            return MESSAGES("left-model-changed", on=on, difference=found[0])
    return None


def _group_shape_problem(case):
    on = case["on"]
    groups = case.get("groups")
    if groups is None:
        return MESSAGES("not-a-list-of-groups", kind=case["kind"], on=on)
    for group in groups:
        if group["kind"] != "dict":
            return MESSAGES("group-not-a-dict", kind=group["kind"], on=on)
        if "params" not in group["keys"]:
            return MESSAGES("no-params-key", on=on)
        if group["container"] in ("set", "frozenset"):
            return MESSAGES("params-as-set", container=group["container"], on=on)
        unknown = [k for k in group["keys"] if k not in ("params", "weight_decay", "lr", "name")]
        if unknown:
            return MESSAGES("decay-under-wrong-key", key=unknown[0], on=on)
    if case.get("reused_groups"):
        return MESSAGES("cached-groups", on=on)
    placed = [name for group in groups for name in group["params"]]
    from_earlier = [n for n in placed if n.endswith("of the model of an earlier call>")]
    if from_earlier:
        return MESSAGES("lists-kept-between-calls", example=from_earlier[0].strip("<>"), on=on)
    strangers = [n for n in placed if n.startswith("<")]
    if "<NoneType>" in strangers:
        return MESSAGES("none-in-group", on=on)
    others = [n for n in strangers if n != "<not a parameter of this model>"]
    if others:
        return MESSAGES("params-not-flat", kind_with_article=a_or_an(others[0].strip("<>")), on=on)
    if strangers:
        return MESSAGES("not-model-params", count=len(strangers), on=on)
    for group in groups:
        inside = group["params"]
        twice = sorted({n for n in inside if inside.count(n) > 1})
        if twice:
            shared = twice[0] in case.get("shared", [twice[0]])
            return MESSAGES("duplicate-in-group" if shared else "duplicate-not-shared", name=twice[0], on=on)
    twice = sorted({n for n in placed if placed.count(n) > 1})
    if twice:
        return MESSAGES("in-two-groups", name=twice[0], on=on)
    missing = sorted(set(case["all"]) - set(placed))
    if missing and missing == case["one_level_misses"]:
        return MESSAGES("one-level-walk", count=len(missing), name=missing[0], on=on)
    if missing and case.get("state") == "first-frozen" and len(missing) == 1:
        return MESSAGES("frozen-in-no-group", count=len(missing), name=missing[0], on=on)
    if missing:
        return MESSAGES("params-in-no-group", count=len(missing), name=missing[0], on=on)
    return None


def _placement_problem(case):
    on, weight_decay, groups = case["on"], case["weight_decay"], case["groups"]
    decayed, undecayed = set(), set()
    for group in groups:
        value = group["weight_decay"]
        if value is None:
            if "weight_decay" not in group["keys"]:
                value = _ADAMW_DEFAULT_DECAY
            else:
                return MESSAGES("decay-not-a-number", on=on)
        (decayed if value > 0 else undecayed).update(group["params"])
        if value > 0 and abs(value - weight_decay) > 1e-12:
            if "weight_decay" not in group["keys"]:
                return MESSAGES("no-weight-decay-key", on=on)
            return MESSAGES("fixed-decay", value=value, weight_decay=weight_decay, on=on)
    expected = set(case["decay"])
    if weight_decay == 0:  # no group decays: the groups must still split as they would
        if len(groups) != 2:
            return MESSAGES("not-two-groups", count=len(groups), on=on)
        for group in groups:
            inside = set(group["params"])
            if inside & expected and inside != expected:
                return MESSAGES("zero-decay-mixed", name=sorted(inside - expected)[0], on=on)
        return None
    wrongly_decayed = sorted(decayed - expected)
    norm = set(case["norm"])
    if wrongly_decayed:
        example = wrongly_decayed[0]
        if set(wrongly_decayed) == set(case["all"]) - expected:
            return MESSAGES("everything-decayed", example=example, on=on)
        if all(n in norm for n in wrongly_decayed):
            return MESSAGES("norm-weights-decayed", example=example, on=on)
        other_convs = case.get("other_conv_weights", {})
        convs = [n for n in wrongly_decayed if n in other_convs]
        if convs:
            return MESSAGES("other-conv-decayed", name=convs[0], kind=other_convs[convs[0]], on=on)
        embeddings = [n for n in wrongly_decayed if n in case.get("embedding", [])]
        if embeddings:
            return MESSAGES("embedding-decayed", name=embeddings[0], on=on)
        named_like = [n for n in wrongly_decayed if n in case.get("layer_others", []) and "weight" in n.split(".")[-1]]
        if named_like:
            return MESSAGES("named-like-weight", name=named_like[0], on=on)
        return MESSAGES("decays-non-weight", name=example, on=on)
    not_decayed = sorted(expected - decayed)
    subclassed = [n for n in not_decayed if n in case.get("subclass_weights", [])]
    if subclassed:
        base = case.get("subclass_of", {}).get(subclassed[0], "nn.Linear")
        return MESSAGES("subclass-not-decayed", name=subclassed[0], base=base,
                        kind_with_article=a_or_an(base.removeprefix("nn.")), on=on)
    if not_decayed:
        return MESSAGES("weight-not-decayed", name=not_decayed[0], weight_decay=weight_decay, on=on)
    if len(groups) != 2:
        if not expected and len(groups) == 1:
            return MESSAGES("empty-group-dropped", count=len(groups), weight_decay=weight_decay, on=on)
        return MESSAGES("not-two-groups", count=len(groups), on=on)
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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    messages=MESSAGES,
)
