"""Chapter 03, M8 — the catalogue of ``decay_groups``: right answers, wrong ones and what their message says."""

import numpy as np
import pytest
import torch
from torch import nn

from course_utils.exercises import models as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


def test_the_reference_groups_work_with_adamw():
    groups = ex.decay_groups.reference(nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3)), 0.1)
    torch.optim.AdamW(groups, lr=1e-3)  # what the learner will do with it


# -- decay_groups (M8) -------------------------------------------------------------------------
def by_dimension(model, weight_decay):
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def rest_first_as_tuple(model, weight_decay):
    decay_ids = {id(m.weight) for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d))}
    rest = [p for p in model.parameters() if id(p) not in decay_ids]
    decay = (p for p in model.parameters() if id(p) in decay_ids)
    return ({"params": rest, "weight_decay": 0}, {"params": decay, "weight_decay": weight_decay})


def norm_and_bias_by_module(model, weight_decay):
    skip = set()
    for module in model.modules():
        if isinstance(module, (nn.LayerNorm, nn.BatchNorm1d, nn.GroupNorm)):
            skip.update(id(p) for p in module.parameters(recurse=False))
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            skip.add(id(p))
    decay = [p for p in model.parameters() if id(p) not in skip]
    no_decay = [p for p in model.parameters() if id(p) in skip]
    return [dict(params=decay, weight_decay=weight_decay, name="decay"),
            dict(params=no_decay, weight_decay=0.0, name="no_decay")]


def weights_of_layer_types(model, weight_decay):
    layer_types = (nn.Linear, nn.Conv1d, nn.Conv2d)
    weights = {id(m.weight): m.weight for m in model.modules() if isinstance(m, layer_types)}
    others = [p for p in model.parameters() if id(p) not in weights]
    return [{"params": list(weights.values()), "weight_decay": weight_decay},
            {"params": others, "weight_decay": 0.0}]


def everything(model, weight_decay):
    return [{"params": list(model.parameters()), "weight_decay": weight_decay}]


def by_name(model, weight_decay):
    named = list(model.named_parameters())
    return [
        {"params": [p for n, p in named if not n.endswith("bias")], "weight_decay": weight_decay},
        {"params": [p for n, p in named if n.endswith("bias")], "weight_decay": 0.0},
    ]


def default_for_rest(model, weight_decay):
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest}]


def duplicated(model, weight_decay):
    rest = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": list(model.parameters()), "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def forgot_rest(model, weight_decay):
    return [{"params": [p for p in model.parameters() if p.ndim >= 2], "weight_decay": weight_decay}]


def bare_list(model, weight_decay):
    return [p for p in model.parameters() if p.ndim >= 2]


def decays_in_place(model, weight_decay):
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 - weight_decay)
    return ex.decay_groups.reference(model, weight_decay)


_decay, _no_decay = [], []


def lists_kept_between_calls(model, weight_decay):
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if name == "weight" and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                _decay.append(p)
            else:
                _no_decay.append(p)
    return [{"params": _decay, "weight_decay": weight_decay}, {"params": _no_decay, "weight_decay": 0.0}]


def norm_in_the_name(model, weight_decay):
    decay, rest = [], []
    for name, p in model.named_parameters():
        if name.endswith("weight") and "norm" not in name and p.ndim >= 2:
            decay.append(p)
        else:
            rest.append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def without_conv2d(model, weight_decay):
    decay = [m.weight for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv1d))]
    ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if id(p) not in ids]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def per_layer_visit(model, weight_decay):
    decay, rest = [], []
    for module in model.modules():
        for child in module.children():  # a layer used twice is visited twice
            if isinstance(child, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                decay.append(child.weight)
                if child.bias is not None:
                    rest.append(child.bias)
            elif not list(child.children()):
                rest.extend(child.parameters())
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def fixed_decay(model, weight_decay):
    groups = by_dimension(model, weight_decay)
    groups[0]["weight_decay"] = 0.01
    return groups


def freezes_the_rest(model, weight_decay):
    groups = by_dimension(model, weight_decay)
    for p in groups[1]["params"]:
        p.requires_grad_(False)  # "they must not change"
    return groups


# -- round 2: answers outside testers wrote ----------------------------------------------------
def _split(model):
    decay, rest = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            is_weight = name == "weight" and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d))
            (decay if is_weight else rest).append(p)
    return decay, rest


def as_sets(model, weight_decay):
    decay, rest = _split(model)
    return [{"params": set(decay), "weight_decay": weight_decay}, {"params": set(rest), "weight_decay": 0.0}]


def bias_even_when_none(model, weight_decay):
    decay, rest = [], []
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
            decay.append(module.weight)
            rest.append(module.bias)  # None for a layer made with bias=False
        else:
            rest.extend(module.parameters(recurse=False))
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def nested_lists(model, weight_decay):
    decay, rest = _split(model)
    return [{"params": [decay], "weight_decay": weight_decay}, {"params": [rest], "weight_decay": 0.0}]


def by_any_conv(model, weight_decay):
    decay, rest = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            is_weight = name == "weight" and isinstance(module, (nn.Linear, nn.modules.conv._ConvNd))
            (decay if is_weight else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def numpy_zero(model, weight_decay):
    decay, rest = _split(model)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": np.float64(0.0)}]


def by_generators(model, weight_decay):
    def is_weight(module, name):
        return name == "weight" and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d))

    def params(decayed):
        return (p for m in model.modules() for n, p in m.named_parameters(recurse=False)
                if is_weight(m, n) == decayed)

    return [{"params": params(True), "weight_decay": weight_decay}, {"params": params(False), "weight_decay": 0.0}]


# -- round 3 (tester X) ----------------------------------------------------------------------
def one_level_only(model, weight_decay):
    decay, rest = [], []
    for module in model.children():
        for name, p in module.named_parameters(recurse=False):
            is_weight = name == "weight" and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d))
            (decay if is_weight else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def by_parameter_names_of_layers(model, weight_decay):
    names = {f"{m_name}.weight".lstrip(".") for m_name, m in model.named_modules()
             if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d))}
    decay, rest = [], []
    for name, p in model.named_parameters():
        (decay if name in names else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def layer_weights_then_the_rest_by_id(model, weight_decay):
    seen, decay = set(), []
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d)) and id(m.weight) not in seen:
            seen.add(id(m.weight))
            decay.append(m.weight)
    rest = [p for p in model.parameters() if id(p) not in seen]
    return ({"params": rest, "weight_decay": 0}, {"params": decay, "weight_decay": float(weight_decay)})


def model_walked_by_hand(model, weight_decay):
    decay, rest, seen = [], [], set()

    def visit(module):
        if id(module) in seen:
            return
        seen.add(id(module))
        for name, p in module.named_parameters(recurse=False):
            is_weight = name == "weight" and isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d))
            (decay if is_weight else rest).append(p)
        for child in module.children():
            visit(child)

    visit(model)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def walked_by_hand_without_the_model_itself(model, weight_decay):
    decay, rest, seen = [], [], set()

    def visit(module):
        for child in module.children():
            if id(child) in seen:
                continue
            seen.add(id(child))
            for name, p in child.named_parameters(recurse=False):
                is_weight = name == "weight" and isinstance(child, (nn.Linear, nn.Conv1d, nn.Conv2d))
                (decay if is_weight else rest).append(p)
            visit(child)

    visit(model)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def groups_by_membership_in_a_list(model, weight_decay):
    decay = [m.weight for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d))]
    rest = [p for p in model.parameters() if p not in decay]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def groups_by_exact_type(model, weight_decay):
    decay, rest = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            chosen = name == "weight" and type(module) in (nn.Linear, nn.Conv1d, nn.Conv2d)
            (decay if chosen else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


# -- issue 45: every variant of the layer kinds the task names ---------------------------------
def _chosen_by(model, weight_decay, chosen):
    decay, rest = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            (decay if name == "weight" and chosen(module) else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def conv_in_the_class_name(model, weight_decay):
    return _chosen_by(model, weight_decay, lambda m: isinstance(m, nn.Linear) or "Conv" in type(m).__name__)


def conv3d_too(model, weight_decay):
    return _chosen_by(model, weight_decay, lambda m: isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)))


def every_weight_but_the_named_norms(model, weight_decay):
    skipped = (nn.LayerNorm, nn.BatchNorm1d, nn.GroupNorm, nn.Embedding)
    return _chosen_by(model, weight_decay, lambda m: not isinstance(m, skipped))


def two_d_but_not_embedding(model, weight_decay):
    tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    chosen = [p.ndim >= 2 and id(p) not in tables for p in model.parameters()]
    params = list(model.parameters())
    return [{"params": [p for p, c in zip(params, chosen) if c], "weight_decay": weight_decay},
            {"params": [p for p, c in zip(params, chosen) if not c], "weight_decay": 0.0}]


def by_the_class_hierarchy(model, weight_decay):
    """Looks the named classes up in each module's MRO: subclasses in, other convolutions out."""
    named = {nn.Linear, nn.Conv1d, nn.Conv2d}
    decay_ids = {id(m.weight) for m in model.modules() if named & set(type(m).__mro__)}
    params = list(model.parameters())
    return [{"params": [p for p in params if id(p) not in decay_ids], "weight_decay": 0.0},
            {"params": [p for p in params if id(p) in decay_ids], "weight_decay": weight_decay}]


# -- issue 45, fresh round (from the task text) --
_FRESH_DECAYS = (nn.Linear, nn.Conv1d, nn.Conv2d)


def _split_fresh(model):
    decay, rest = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            (decay if name == "weight" and isinstance(module, _FRESH_DECAYS) else rest).append(p)
    return decay, rest


def dg_name_and_ndim(model, weight_decay):
    decay, rest = [], []
    for name, p in model.named_parameters():
        (decay if name.endswith("weight") and p.ndim > 1 and "emb" not in name else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def dg_cached_on_model(model, weight_decay):
    if hasattr(model, "_decay_groups"):
        return model._decay_groups
    decay, rest = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            (decay if name == "weight" and isinstance(module, _FRESH_DECAYS) else rest).append(p)
    model._decay_groups = [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return model._decay_groups


def dg_skip_frozen(model, weight_decay):
    decay, rest = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue  # frozen: nothing to optimise
            (decay if name == "weight" and isinstance(module, _FRESH_DECAYS) else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def dg_bias_or_norm_by_name(model, weight_decay):
    decay = [m.weight for m in model.modules() if isinstance(m, _FRESH_DECAYS)]
    rest = [p for n, p in model.named_parameters() if "bias" in n or "norm" in n]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def dg_attention_in_proj(model, weight_decay):
    decay, rest = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            attention = isinstance(module, nn.MultiheadAttention) and name == "in_proj_weight"
            (decay if (name == "weight" and isinstance(module, _FRESH_DECAYS)) or attention else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def dg_one_group_without_decay(model, weight_decay):
    if not weight_decay:  # nothing to decay: one group is enough
        return [{"params": list(model.parameters()), "weight_decay": 0.0}]
    decay, rest = _split_fresh(model)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def dg_conv_bias_decayed(model, weight_decay):
    decay, rest = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            convolution = isinstance(module, (nn.Conv1d, nn.Conv2d))
            linear_weight = isinstance(module, nn.Linear) and name == "weight"
            (decay if convolution or linear_weight else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def dg_get_submodule_rsplit(model, weight_decay):
    decay, rest = [], []
    for name, p in model.named_parameters():
        owner = model.get_submodule(name.rsplit(".", 1)[0])
        (decay if name.endswith("weight") and isinstance(owner, _FRESH_DECAYS) else rest).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def dg_unfreezes_all(model, weight_decay):
    model.requires_grad_(True)  # "every parameter must be trainable for the optimizer"
    decay, rest = _split_fresh(model)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def dg_zero_grad(model, weight_decay):
    model.zero_grad()  # "a clean start for the new optimizer"
    decay, rest = _split_fresh(model)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def dg_apply_collect(model, weight_decay):
    decayed = set()

    def collect(module):
        if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
            decayed.add(id(module.weight))

    model.apply(collect)
    params = list(model.parameters())
    return [{"params": [p for p in params if id(p) in decayed], "weight_decay": float(weight_decay)},
            {"params": [p for p in params if id(p) not in decayed], "weight_decay": 0.0}]


# -- issue 45, second fresh round (from the task text) --
_DG_KINDS = (nn.Linear, nn.Conv1d, nn.Conv2d)


def dg_drop_empty(model, weight_decay):
    # leave out a group with no parameters ("optimizers dislike empty groups")
    decay, no_decay = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            (decay if name == "weight" and isinstance(module, _DG_KINDS) else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def dg_weight_substring(model, weight_decay):
    # "weight" in the name, within Linear/Conv layers: also takes a weight_scale
    decay, no_decay = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            (decay if "weight" in name and isinstance(module, _DG_KINDS) else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def dg_recurse_other_modules(model, weight_decay):
    # Linear/Conv: weight decays, bias does not; any other module: all its parameters, but
    # parameters() recurses into its children
    decay, no_decay = [], []
    for module in model.modules():
        if isinstance(module, _DG_KINDS):
            decay.append(module.weight)
            if module.bias is not None:
                no_decay.append(module.bias)
        else:
            no_decay.extend(module.parameters())
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def dg_weights_by_identity(model, weight_decay):
    weights = {id(m.weight) for m in model.modules() if isinstance(m, _DG_KINDS)}
    params = list(model.parameters())
    return [{"params": [p for p in params if id(p) in weights], "weight_decay": weight_decay},
            {"params": [p for p in params if id(p) not in weights], "weight_decay": 0.0}]


CATALOGUE = Catalogue({
    ex.decay_groups: [
        wrong("by shape: p.ndim >= 2", by_dimension, "an Embedding's weight, is decayed",
              "not by the shape (p.ndim >= 2)", kind=EDGE),
        wrong("by exact type: type(m) in (...)", groups_by_exact_type, "a subclass of nn.Linear",
              "isinstance", kind=EDGE),
        wrong("p not in a list of tensors", groups_by_membership_in_a_list, "Compare identities instead",
              outcome=Outcome.RAISED),
        right("rest first, a tuple and a generator", rest_first_as_tuple),
        wrong("norm layers and biases collected by module, named groups", norm_and_bias_by_module,
              "an Embedding's weight, is decayed", kind=EDGE),
        right("a dict of the layer types' weights by id", weights_of_layer_types),
        wrong("everything decayed", everything, "Every parameter is decayed", "biases"),
        wrong("by name only", by_name, "normalisation layers' weights are decayed", "1.weight", "not by the name alone"),
        wrong("no weight_decay key for the rest", default_for_rest, "optimizer's default", "0.0"),
        wrong("all parameters plus the rest", duplicated, "in more than one group"),
        wrong("the rest forgotten", forgot_rest, "in no group", "never update"),
        wrong("a bare list of tensors", bare_list, "not a dict"),
        wrong("decays the weights itself", decays_in_place, "changed the values of the model's parameters"),
        wrong("lists kept between calls", lists_kept_between_calls, "model of an earlier call",
              "Make new lists inside the function", kind=STATEFUL),
        wrong("'norm' not in the name", norm_in_the_name, "norm_proj.weight is not decayed", kind=EDGE),
        wrong("Conv2d forgotten", without_conv2d, "conv.weight is not decayed", kind=EDGE),
        wrong("a layer used twice visited twice", per_layer_visit, "appears twice in one group", kind=EDGE),
        wrong("a fixed decay", fixed_decay, "decays with 0.01", "expected the weight_decay you were given"),
        wrong("freezes the undecayed parameters", freezes_the_rest, "changed requires_grad of 0.bias",
              "must still train", kind=STATEFUL),
        # issue 45: the task names nn.Conv1d and nn.Conv2d (and their subclasses), "every other
        # parameter with weight_decay 0.0": a Conv3d's or ConvTranspose2d's weight among them.
        wrong("any convolution (_ConvNd)", by_any_conv, "upsample.weight, the weight of an nn.ConvTranspose2d",
              "is decayed", "nn.Conv1d and nn.Conv2d", kind=EDGE),
        right("numpy's 0.0", numpy_zero),
        right("two generators", by_generators),
        wrong("sets of parameters", as_sets, "'params' is a set", "Use a list", kind=EDGE),
        wrong("a bias that is None appended", bias_even_when_none, "A group holds None", "bias=False", kind=EDGE),
        wrong("each group's list wrapped in a list", nested_lists, "holds a list", "one flat list"),
        wrong("model.children() only", one_level_only, "5 parameters are in no group", "e.g. bias (on",
              "model.children()", "model.modules()", kind=EDGE),
        wrong("a walk by hand that skips the model itself", walked_by_hand_without_the_model_itself,
              "1 parameters are in no group, e.g. bias (on", kind=EDGE),
        right("parameter names of the layers", by_parameter_names_of_layers),
        right("layer weights by id, the rest first, int 0", layer_weights_then_the_rest_by_id),
        right("a recursive walk by hand", model_walked_by_hand),
        wrong("'Conv' in the class name", conv_in_the_class_name, "nn.ConvTranspose2d, is decayed", kind=EDGE),
        wrong("Conv3d added to the layer kinds", conv3d_too, "volume.weight, the weight of an nn.Conv3d",
              kind=EDGE),
        wrong("every weight but those of the norms named in the text", every_weight_but_the_named_norms,
              "is decayed", "ConvTranspose2d", kind=EDGE),
        wrong("2-D parameters that are no nn.Embedding", two_d_but_not_embedding, "is decayed",
              "nn.ConvTranspose2d", kind=EDGE),
        right("the named classes looked up in the MRO", by_the_class_hierarchy),
        # -- issue 45, fresh round (from the task text) --
        wrong("a 2-D weight whose name has no 'emb'", dg_name_and_ndim, "an Embedding's weight, is decayed", kind=EDGE),
        wrong('groups cached on the model', dg_cached_on_model, "group dicts of an earlier call", kind=STATEFUL),
        wrong('frozen parameters left out', dg_skip_frozen, "exactly the frozen ones", kind=STATEFUL),
        wrong("the rest by 'bias' or 'norm' in the name", dg_bias_or_norm_by_name, "in no group", "1.weight"),
        wrong("attention's in_proj_weight decayed too", dg_attention_in_proj, "attention.in_proj_weight is decayed", kind=EDGE),
        wrong('one group when weight_decay is 0', dg_one_group_without_decay, "You returned 1 groups", "weight_decay=0.0", kind=EDGE),
        wrong('every parameter of a convolution decayed', dg_conv_bias_decayed, "0.bias is decayed"),
        wrong('the owner looked up with rsplit', dg_get_submodule_rsplit, "is not an nn.Module", kind=EDGE, outcome=Outcome.RAISED),
        wrong('model.requires_grad_(True) first', dg_unfreezes_all, "switched on requires_grad of 0.weight", kind=STATEFUL),
        wrong('model.zero_grad() first', dg_zero_grad, "0.weight.grad is left as None", kind=STATEFUL),
        right("ids collected with model.apply", dg_apply_collect),
        # -- issue 45, second fresh round (from the task text) --
        wrong("empty groups left out", dg_drop_empty, "You returned 1 group", "Embedding and a LayerNorm",
              "two groups whatever the model", kind=EDGE),
        wrong("'weight' in the name, within Linear/Conv layers", dg_weight_substring, "proj.weight_scale is decayed",
              "not 'weight' in name", kind=EDGE),
        wrong("module.parameters() of every other module", dg_recurse_other_modules, "0.bias appears twice",
              "holds it once", "recurses into the module's children", "recurse=False"),
        right("the weights by identity, the rest in model order", dg_weights_by_identity),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
