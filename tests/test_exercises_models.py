"""Chapter 03's exercises: the catalogue of right answers (other styles than the reference) and
wrong answers (classic mistakes, and answers right only on the first call or the easy input),
each with the words its message must contain."""

from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises import models as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import (
    assert_fails,
    assert_references_pass_and_leave_the_session_alone,
)
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

EXERCISES = (ex.SkipBlock, ex.Tower, ex.cross_entropy_from_logits, ex.multilabel_loss, ex.decay_groups)


def test_every_reference_passes_quickly_and_leaves_the_session_alone():
    assert_references_pass_and_leave_the_session_alone(EXERCISES)


def test_a_blank_answer_is_not_attempted():
    def blank(*args):
        raise NotImplementedError()

    class Blank(nn.Module):
        def __init__(self, a, b):
            raise NotImplementedError()

    for exercise in EXERCISES:
        answer = Blank if exercise.name in ("SkipBlock", "Tower") else blank
        assert exercise.verdict(answer).outcome is Outcome.NOT_ATTEMPTED


def test_the_reference_groups_work_with_adamw():
    groups = ex.decay_groups.reference(nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3)), 0.1)
    torch.optim.AdamW(groups, lr=1e-3)  # what the learner will do with it


def test_a_function_that_returns_layers_instead_of_a_module_is_told_to_write_a_class():
    def tower_as_list(width, depth):
        return [nn.Linear(width, width) for _ in range(depth)]

    assert_fails(ex.Tower, tower_as_list, "made list, not an nn.Module", "class Tower(nn.Module)")


# -- SkipBlock (M1) --------------------------------------------------------------------------
class WithFunctional(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x))) + x


class WithInnerSequential(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.branch = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, width))

    def forward(self, x):
        return x + self.branch(x)


class Swapped(nn.Module):  # the same shapes registered in the other order
    def __init__(self, width, hidden):
        super().__init__()
        self.a = nn.Linear(hidden, width)
        self.b = nn.Linear(width, hidden)

    def forward(self, x):
        return x + self.a(torch.relu(self.b(x)))


class RawParameters(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(width, hidden) / width ** 0.5)
        self.b1 = nn.Parameter(torch.zeros(hidden))
        self.w2 = nn.Parameter(torch.randn(hidden, width) / hidden ** 0.5)
        self.b2 = nn.Parameter(torch.zeros(width))

    def forward(self, x):
        return x + torch.relu(x @ self.w1 + self.b1) @ self.w2 + self.b2


class WithLazyLayers(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.LazyLinear(hidden)
        self.project = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.project(self.expand(x).clamp(min=0))


def _block(forward, hidden_list=False):
    class Block(nn.Module):
        def __init__(self, width, hidden):
            super().__init__()
            layers = [nn.Linear(width, hidden), nn.Linear(hidden, width)]
            if hidden_list:
                self.layers = layers
            else:
                self.a, self.b = layers

        def forward(self, x):
            a, b = self.layers if hidden_list else (self.a, self.b)
            return forward(x, a, b)

    return Block


def skip_as_sequential(width, hidden):
    return nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, width))


class NoSuper(nn.Module):
    def __init__(self, width, hidden):
        self.a = nn.Linear(width, hidden)


class AddsInPlace(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width)

    def forward(self, x):
        x += self.project(torch.relu(self.expand(x)))  # "saves memory"
        return x


class CachesFirstOutput(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width)
        self.out = None

    def forward(self, x):
        if self.out is None:  # "compute once"
            self.out = x + self.project(torch.relu(self.expand(x)))
        return self.out


class CachesPerShape(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width)
        self.seen = {}

    def forward(self, x):
        if x.shape not in self.seen:  # "reuse the result for a batch of the same shape"
            self.seen[x.shape] = x + self.project(torch.relu(self.expand(x)))
        return self.seen[x.shape]


class ZerosOnTheCpu(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width)

    def forward(self, x):
        h = self.expand(x)
        h = torch.maximum(h, torch.zeros(h.shape))
        return x + self.project(h)


class TwoDimOnly(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width)

    def forward(self, x):
        h = torch.relu(self.expand(x))
        return x + (h @ self.project.weight.T + self.project.bias).reshape(x.shape[0], -1)


class NoGradForward(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width)

    def forward(self, x):
        with torch.no_grad():  # "forward doesn't need gradients"
            return x + self.project(torch.relu(self.expand(x)))


class SkipOnMeta(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden, device="meta")
        self.project = nn.Linear(hidden, width, device="meta")

    def forward(self, x):
        return x + self.project(torch.relu(self.expand(x)))


class WithReluModule(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.act = nn.ReLU()
        self.project = nn.Linear(hidden, width)

    def forward(self, x):
        return self.project(self.act(self.expand(x))).add(x)


# -- Tower (M2) ------------------------------------------------------------------------------
class TowerWithSequential(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


class TowerWithAddModule(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.depth = depth
        for i in range(depth):
            self.add_module(f"layer{i}", nn.Linear(width, width))

    def forward(self, x):
        for i in range(self.depth):
            x = F.relu(getattr(self, f"layer{i}")(x))
        return x


class TowerWithModuleDict(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.blocks = nn.ModuleDict({f"block{i}": nn.Linear(width, width) for i in range(depth)})

    def forward(self, x):
        for block in self.blocks.values():
            x = block(x).relu()
        return x


class TowerLazy(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.LazyLinear(width) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class TowerOfBlocks(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        blocks = [nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(depth)]
        self.net = nn.Sequential(*blocks)

    def forward(self, x):
        return self.net(x)


def _tower(make_layers, forward):
    class Built(nn.Module):
        def __init__(self, width, depth):
            super().__init__()
            make_layers(self, width, depth)

        def forward(self, x):
            return forward(self, x)

    return Built


def _layers_in_module_list(self, width, depth):
    self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])


def _relu_each(self, x):
    for layer in self.layers:
        x = torch.relu(layer(x))
    return x


PlainList = _tower(
    lambda self, width, depth: setattr(self, "layers", [nn.Linear(width, width) for _ in range(depth)]),
    _relu_each,
)
Repeated = _tower(
    lambda self, width, depth: setattr(self, "layers", nn.ModuleList([nn.Linear(width, width)] * depth)),
    _relu_each,
)


def _no_last_relu(self, x):
    for layer in self.layers[:-1]:
        x = torch.relu(layer(x))
    return self.layers[-1](x)


def _first_layer_each_time(self, x):
    for _ in range(len(self.layers)):
        x = torch.relu(self.layers[0](x))
    return x


def _relu_in_place_on_input(self, x):
    x.relu_()  # "inputs are activations anyway"
    for layer in self.layers:
        x = torch.relu(layer(x))
    return x


def _detached_output(self, x):
    for layer in self.layers:
        x = torch.relu(layer(x))
    return x.detach()


def _cpu_mask(self, x):
    for layer in self.layers:
        h = layer(x)
        x = h * (h > torch.zeros(h.shape[-1]))
    return x


def _cached_per_shape(self, x):
    if not hasattr(self, "_seen"):
        self._seen = {}
    if x.shape not in self._seen:  # "the same input size gives the same output"
        self._seen[x.shape] = _relu_each(self, x)
    return self._seen[x.shape]


NoLastRelu = _tower(_layers_in_module_list, _no_last_relu)
CachedPerShape = _tower(_layers_in_module_list, _cached_per_shape)
OneTooFew = _tower(
    lambda self, width, depth: setattr(self, "layers", nn.ModuleList([nn.Linear(width, width) for _ in range(depth - 1)])),
    _relu_each,
)
FirstLayerOnly = _tower(_layers_in_module_list, _first_layer_each_time)
ReluOnInput = _tower(_layers_in_module_list, _relu_in_place_on_input)
Detached = _tower(_layers_in_module_list, _detached_output)
CpuMask = _tower(_layers_in_module_list, _cpu_mask)
FixedThree = _tower(
    lambda self, width, depth: setattr(self, "layers", nn.ModuleList([nn.Linear(width, width) for _ in range(3)])),
    _relu_each,
)


# -- cross_entropy_from_logits (M5) ------------------------------------------------------------
def by_indexing(logits, targets):
    log_probs = logits.log_softmax(dim=-1)
    return -log_probs[torch.arange(len(targets)), targets].mean()


def by_gather(logits, targets):
    log_probs = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    return -log_probs.gather(1, targets[:, None]).mean()


def with_nll_module(logits, targets):
    return nn.NLLLoss()(nn.LogSoftmax(dim=1)(logits), targets)


def by_one_hot(logits, targets):
    one_hot = F.one_hot(targets, num_classes=logits.shape[1]).to(logits.dtype)
    return -(one_hot * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def loop_over_examples(logits, targets):
    losses = []
    for i in range(len(targets)):
        log_probs = F.log_softmax(logits[i], dim=0)
        losses.append(-log_probs[targets[i]])
    return torch.stack(losses).mean()


def subtracts_max_in_place(logits, targets):
    logits -= logits.max(dim=1, keepdim=True).values  # "for stability"
    return F.nll_loss(torch.log_softmax(logits, dim=1), targets)


def log_of_sum_of_exp(logits, targets):
    log_z = torch.log(torch.exp(logits).sum(dim=1))
    return (log_z - logits[torch.arange(len(targets)), targets]).mean()


def as_python_float(logits, targets):
    return F.nll_loss(torch.log_softmax(logits, dim=1), targets).item()


def detached_loss(logits, targets):
    loss = F.nll_loss(torch.log_softmax(logits, dim=1), targets)
    return loss.detach()  # "so the graph is freed"


def one_hot_on_cpu(logits, targets):
    one_hot = torch.zeros(logits.shape)
    one_hot[torch.arange(len(targets)), targets] = 1
    return -(one_hot * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()


def casts_to_float32(logits, targets):
    return F.nll_loss(torch.log_softmax(logits.float(), dim=1), targets)


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
class SkipOfDetachedX(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width)

    def forward(self, x):
        return x.detach() + self.project(torch.relu(self.expand(x)))  # "x is only added back"


class HalfBranchUnderNoGrad(SkipOfDetachedX):
    def forward(self, x):
        with torch.no_grad():  # "the first half needs no graph"
            hidden = torch.relu(self.expand(x))
        return x + self.project(hidden)


class SkipWithOrderedDict(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.mlp = nn.Sequential(OrderedDict(
            fc1=nn.Linear(width, hidden), act=nn.ReLU(inplace=True), fc2=nn.Linear(hidden, width)))

    def forward(self, x):
        return self.mlp(x).add(x)


class SkipWithFLinear(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        first, second = nn.Linear(width, hidden), nn.Linear(hidden, width)
        self.w1, self.b1 = nn.Parameter(first.weight.detach().clone()), nn.Parameter(first.bias.detach().clone())
        self.w2, self.b2 = nn.Parameter(second.weight.detach().clone()), nn.Parameter(second.bias.detach().clone())

    def forward(self, x):
        return x + F.linear(F.relu(F.linear(x, self.w1, self.b1)), self.w2, self.b2)


class SkipInACopy(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.up, self.down = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x):
        out = x.clone()
        out.add_(self.down(torch.relu(self.up(x))))
        return out


class TowerAppendInPlaceRelu(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.net = nn.Sequential()
        for _ in range(depth):
            self.net.append(nn.Linear(width, width))
            self.net.append(nn.ReLU(inplace=True))

    def forward(self, x):
        return self.net(x)


class TowerRelu_OnOutputs(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).relu_()  # in place on each layer's fresh output, not on the caller's x
        return x


class TowerOfRawParameters(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        layers = [nn.Linear(width, width) for _ in range(depth)]
        self.weights = nn.ParameterList([layer.weight for layer in layers])
        self.biases = nn.ParameterList([layer.bias for layer in layers])

    def forward(self, x):
        for weight, bias in zip(self.weights, self.biases):
            x = F.relu(F.linear(x, weight, bias))
        return x


class TowerInReverse(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        for layer in reversed(self.layers):
            x = torch.relu(layer(x))
        return x


def unsqueezes_targets_in_place(logits, targets):
    return -torch.log_softmax(logits, dim=1).gather(1, targets.unsqueeze_(1)).mean()


def tracks_the_logits(logits, targets):
    logits.requires_grad_(True)  # "the loss must be differentiable"
    return F.nll_loss(torch.log_softmax(logits, dim=1), targets)


def loop_with_item(logits, targets):
    log_probs = logits.log_softmax(1)
    return -sum(log_probs[i, targets[i].item()] for i in range(len(targets))) / len(targets)


def by_take_along_dim(logits, targets):
    return -torch.take_along_dim(logits.log_softmax(1), targets[:, None], 1).mean()


def by_einsum(logits, targets):
    one_hot = F.one_hot(targets, logits.shape[1]).to(logits.dtype)
    return -torch.einsum("nc,nc->n", one_hot, logits.log_softmax(1)).mean()


def label_smoothed(logits, targets):
    log_probs = torch.log_softmax(logits, dim=1)
    picked = log_probs.gather(1, targets[:, None]).squeeze(1)
    return -(0.99 * picked + 0.01 * log_probs.mean(1)).mean()


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
class _Pair(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width)


class SkipBranchToCpu(_Pair):
    def forward(self, x):
        return x + self.project(torch.relu(self.expand(x))).to("cpu")


class SkipWithGelu(_Pair):
    def forward(self, x):
        return x + self.project(F.gelu(self.expand(x)))


class SkipWithDropout(_Pair):
    def forward(self, x):
        return x + self.project(F.dropout(torch.relu(self.expand(x)), 0.1, training=True))


class SkipAveraged(_Pair):
    def forward(self, x):
        return 0.5 * (x + self.project(torch.relu(self.expand(x))))


class SkipLayersMadeInForward(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.width, self.hidden = width, hidden

    def forward(self, x):
        if not hasattr(self, "expand"):
            self.expand = nn.Linear(self.width, self.hidden)
            self.project = nn.Linear(self.hidden, self.width)
        return x + self.project(torch.relu(self.expand(x)))


class SkipWithEinsum(_Pair):
    def forward(self, x):
        h = torch.relu(torch.einsum("...i,oi->...o", x, self.expand.weight) + self.expand.bias)
        return x + h @ self.project.weight.T + self.project.bias


class SkipUpDownWithWhere(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        h = self.up(x)
        return x + self.down(torch.where(h > 0, h, torch.zeros_like(h)))


class SkipModuleListTorchAdd(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, hidden), nn.Linear(hidden, width)])

    def forward(self, x):
        return torch.add(x, self.layers[1](self.layers[0](x).clamp(min=0)))


class _Layers(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])


class TowerCopiedIntoCpuBuffer(_Layers):
    def forward(self, x):
        out = torch.empty(x.shape)
        out.copy_(x)
        for layer in self.layers:
            out = torch.relu(layer(out))
        return out


class TowerOutputToCpu(_Layers):
    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x.cpu()


class TowerWithSigmoid(_Layers):
    def forward(self, x):
        for layer in self.layers:
            x = torch.sigmoid(layer(x))
        return x


class TowerReluBefore(_Layers):
    def forward(self, x):
        for layer in self.layers:
            x = layer(torch.relu(x))
        return x


class TowerWithResiduals(_Layers):
    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x)) + x
        return x


class TowerFlattened(_Layers):
    def forward(self, x):
        x = x.reshape(-1, x.shape[-1])
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class TowerWithSetattr(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.depth = depth
        for i in range(depth):
            setattr(self, f"fc{i}", nn.Linear(width, width))

    def forward(self, x):
        for i in range(self.depth):
            x = F.relu(getattr(self, f"fc{i}")(x))
        return x


class TowerAsSequentialSubclass(nn.Sequential):
    def __init__(self, width, depth):
        super().__init__(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())])


class TowerFunctionalInPlaceRelu(_Layers):
    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x), inplace=True)
        return x


def every_pair_of_classes(logits, targets):
    return -torch.log_softmax(logits, 1)[:, targets].mean()


def one_hot_mean_over_all(logits, targets):
    return -(F.one_hot(targets, logits.shape[1]) * torch.log_softmax(logits, 1)).mean()


def divided_by_classes(logits, targets):
    return -torch.log_softmax(logits, 1).gather(1, targets[:, None]).sum() / logits.shape[1]


def log_of_softmax_plus_eps(logits, targets):
    return -torch.log(torch.softmax(logits, 1) + 1e-9).gather(1, targets[:, None]).mean()


def shifts_the_callers_logits_through_data(logits, targets):
    logits.data -= logits.data.max(1, keepdim=True).values
    return F.nll_loss(torch.log_softmax(logits, 1), targets)


def arange_on_the_default_device(logits, targets):
    # CPU indices are allowed for indexing a GPU tensor, so this is fine on a GPU too
    return -torch.log_softmax(logits, 1)[torch.arange(len(targets)), targets].mean()


def range_indices(logits, targets):
    return -torch.log_softmax(logits, 1)[range(len(targets)), targets].mean()


def log_softmax_and_nll_modules(logits, targets):
    return nn.NLLLoss()(nn.LogSoftmax(dim=1)(logits), targets)


def max_shift_by_hand(logits, targets):
    z = logits - logits.max(dim=1, keepdim=True).values
    log_probs = z - torch.log(torch.exp(z).sum(1, keepdim=True))
    return -log_probs.gather(1, targets.view(-1, 1)).mean()


def nll_sum_over_n(logits, targets):
    return F.nll_loss(F.log_softmax(logits, dim=1), targets, reduction="sum") / targets.shape[0]


def log_softmax_in_float64(logits, targets):
    return F.nll_loss(F.log_softmax(logits, dim=1, dtype=torch.float64), targets)


def mean_over_dim_zero(logits, targets):
    return -torch.log_softmax(logits, 1).gather(1, targets[:, None]).mean(0)


def one_hot_by_scatter(logits, targets):
    mask = torch.zeros_like(logits).scatter_(1, targets[:, None], 1.0)
    return -(mask * torch.log_softmax(logits, 1)).sum() / logits.shape[0]


def loss_moved_to_the_cpu(logits, targets):
    return F.nll_loss(torch.log_softmax(logits, 1), targets).cpu()


def targets_moved_to_the_cpu(logits, targets):
    return F.nll_loss(torch.log_softmax(logits, 1), targets.cpu())


def cpu_targets_as_indices(logits, targets):
    # indexing a GPU tensor with CPU index tensors is allowed
    return -torch.log_softmax(logits, 1)[torch.arange(len(targets)), targets.cpu()].mean()


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


# -- multilabel_loss (M9) ----------------------------------------------------------------------
def ml_bce_module(logits, targets):
    return nn.BCEWithLogitsLoss()(logits, targets.type_as(logits))


def ml_softplus(logits, targets):
    targets = targets.to(logits.dtype)
    return (F.softplus(logits) - logits * targets).mean()


def ml_logsigmoid(logits, targets):
    targets = targets.to(logits.dtype)
    return -(targets * F.logsigmoid(logits) + (1 - targets) * F.logsigmoid(-logits)).mean()


def ml_clamped_formula(logits, targets):
    t = targets.to(logits.dtype)
    per_entry = logits.clamp(min=0) - logits * t + torch.log1p(torch.exp(-logits.abs()))
    return per_entry.sum() / t.numel()


def ml_summed_then_divided(logits, targets):
    loss = F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), reduction="none")
    return loss.mean(dim=1).mean()


def ml_sigmoid_then_bce(logits, targets):
    return F.binary_cross_entropy(torch.sigmoid(logits), targets.to(logits.dtype))


def ml_targets_as_they_are(logits, targets):
    return F.binary_cross_entropy_with_logits(logits, targets)


def ml_targets_float(logits, targets):
    return F.binary_cross_entropy_with_logits(logits, targets.float())


def ml_softmax_cross_entropy(logits, targets):
    return F.cross_entropy(logits, targets.to(logits.dtype))


def ml_summed(logits, targets):
    return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), reduction="sum")


def ml_per_example(logits, targets):
    per_entry = F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), reduction="none")
    return per_entry.sum(dim=1).mean()


def ml_sigmoid_twice(logits, targets):
    probs = torch.sigmoid(logits)  # "the model's outputs as probabilities"
    return nn.BCEWithLogitsLoss()(probs, targets.to(logits.dtype))


def ml_sigmoid_in_place(logits, targets):
    return F.binary_cross_entropy(logits.sigmoid_(), targets.to(logits.dtype))


def ml_log_of_sigmoid(logits, targets):
    t = targets.to(logits.dtype)
    p = torch.sigmoid(logits)
    return -(t * torch.log(p) + (1 - t) * torch.log(1 - p)).mean()


def ml_where_two_formulas(logits, targets):
    t = targets.to(logits.dtype)
    positive = logits - logits * t + torch.log1p(torch.exp(-logits))
    negative = -logits * t + torch.log1p(torch.exp(logits))
    return torch.where(logits >= 0, positive, negative).mean()


def ml_detached(logits, targets):
    return F.binary_cross_entropy_with_logits(logits.detach(), targets.to(logits.dtype))


def ml_tracks_the_logits(logits, targets):
    logits.requires_grad_(True)  # "so backward works"
    return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype))


def ml_ones_on_the_cpu(logits, targets):
    t = targets.to(logits.dtype)
    ones = torch.ones(t.shape)
    return -(t * F.logsigmoid(logits) + (ones - t) * F.logsigmoid(-logits)).mean()


def ml_formula_without_converting(logits, targets):
    return -(targets * F.logsigmoid(logits) + (1 - targets) * F.logsigmoid(-logits)).mean()


def ml_flattened_by_view(logits, targets):
    return F.binary_cross_entropy_with_logits(logits.view(-1), targets.to(logits.dtype).view(-1))


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


_ML_FIRST_WEIGHTS = {}


def ml_label_weights_of_the_first_batch(logits, targets):
    # pos_weight from the label frequencies, computed once "for speed"
    if "pos_weight" not in _ML_FIRST_WEIGHTS:
        _ML_FIRST_WEIGHTS["pos_weight"] = torch.ones(logits.shape[1], dtype=logits.dtype)
    return F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype),
                                              pos_weight=_ML_FIRST_WEIGHTS["pos_weight"])


CATALOGUE = Catalogue({
    ex.SkipBlock: [
        right("F.relu and the skip added last", WithFunctional),
        right("an inner nn.Sequential", WithInnerSequential),
        right("layers registered in the other order", Swapped),
        right("raw nn.Parameter weights used with @", RawParameters),
        right("a LazyLinear and clamp", WithLazyLayers),
        right("an nn.ReLU module and .add", WithReluModule),
        wrong("no skip", _block(lambda x, a, b: b(torch.relu(a(x)))), "skip connection is missing"),
        wrong("ReLU after the sum", _block(lambda x, a, b: torch.relu(x + b(torch.relu(a(x))))),
              "ReLU after adding x"),
        wrong("no ReLU", _block(lambda x, a, b: x + b(a(x))), "no ReLU between"),
        wrong("ReLU at the end of the branch", _block(lambda x, a, b: x + torch.relu(b(torch.relu(a(x))))),
              "ReLU at the end of the branch"),
        wrong("layers in a plain list", _block(lambda x, a, b: x + b(torch.relu(a(x))), hidden_list=True),
              "self.layers (a plain list of 2 layers)", "nn.ModuleList"),
        wrong("an nn.Sequential", skip_as_sequential, "skip connection is missing"),
        wrong("no super().__init__()", NoSuper, "super().__init__() must run", outcome=Outcome.RAISED),
        wrong("adds into the caller's x", AddsInPlace, "changed its input x in place", kind=STATEFUL),
        wrong("caches its first output", CachesFirstOutput, "has shape (4, 6); expected (1, 6)", kind=STATEFUL),
        wrong("caches its output per batch shape", CachesPerShape, "same output as for the first batch",
              "another batch of the first shape", kind=STATEFUL),
        wrong("zeros made on the CPU", ZerosOnTheCpu, "not on the expected device",
              "Likely cause: a tensor on the CPU inside your code", kind=EDGE, outcome=Outcome.RAISED),
        wrong("reshapes to two dimensions", TwoDimOnly, "on SkipBlock(6, 16) called on a batch of shape (2, 3, 6)",
              kind=EDGE, outcome=Outcome.RAISED),
        wrong("forward under no_grad", NoGradForward, "does not require grad"),
        right("an OrderedDict Sequential with an in-place ReLU", SkipWithOrderedDict),
        right("raw nn.Parameter weights used with F.linear", SkipWithFLinear),
        right("added into a copy of x", SkipInACopy),
        wrong("the skip made from x.detach()", SkipOfDetachedX, "no gradient through the skip path",
              kind=EDGE),
        wrong("the branch's first half under no_grad", HalfBranchUnderNoGrad,
              "2 of your layers' 4 parameters no gradient", "graph from it back to the layers is cut",
              kind=EDGE),
        wrong("layers built on meta", SkipOnMeta, "parameters on meta", "build the layers on the CPU",
              kind=EDGE),
        wrong("the branch moved to the CPU", SkipBranchToCpu, "not on the expected device",
              "Likely cause: a tensor on the CPU inside your code", ".to('cpu')", kind=EDGE,
              outcome=Outcome.RAISED),
        wrong("GELU instead of ReLU", SkipWithGelu, "wrong values", "x + project(relu(expand(x)))"),
        wrong("dropout in the branch", SkipWithDropout, "wrong values"),
        wrong("the sum halved", SkipAveraged, "wrong values"),
        wrong("layers made in the first forward", SkipLayersMadeInForward, "registers 0 parameters"),
        right("an einsum with the layers' weights", SkipWithEinsum),
        right("up/down layers and torch.where as ReLU", SkipUpDownWithWhere),
        right("a ModuleList, clamp and torch.add", SkipModuleListTorchAdd),
    ],
    ex.Tower: [
        right("an nn.Sequential with ReLU modules", TowerWithSequential),
        right("add_module in a loop", TowerWithAddModule),
        right("an nn.ModuleDict and .relu()", TowerWithModuleDict),
        right("LazyLinear layers", TowerLazy),
        right("nested Sequential blocks", TowerOfBlocks),
        wrong("a plain list", PlainList, "finds 0 of the 90 parameters", "plain list of 3 layers", "nn.ModuleList"),
        wrong("one layer repeated", Repeated, "the same layer 3 times", "[nn.Linear(width, width)] * depth"),
        wrong("no ReLU after the last layer", NoLastRelu, "last layer has no ReLU"),
        wrong("one layer too few", OneTooFew, "has 2 linear layers", "expected 3 layers"),
        wrong("the first layer applied depth times", FirstLayerOnly, "applies the first layer 3 times"),
        wrong("ReLU in place on the caller's x", ReluOnInput, "changed its input x in place", kind=STATEFUL),
        wrong("a detached output", Detached, "does not require grad"),
        wrong("an output kept per batch shape", CachedPerShape, "same output as for the first batch",
              kind=STATEFUL),
        wrong("a mask made on the CPU", CpuMask, "not on the expected device",
              "Likely cause: a tensor on the CPU inside your code", kind=EDGE, outcome=Outcome.RAISED),
        wrong("always three layers", FixedThree, "Tower(width=4, depth=1) has 3 linear layers", kind=EDGE),
        right("Sequential.append with in-place ReLU modules", TowerAppendInPlaceRelu),
        right("relu_ on each layer's output", TowerRelu_OnOutputs),
        wrong("raw weights in ParameterLists", TowerOfRawParameters, "none of them belongs to an nn.Linear layer"),
        wrong("the layers in reverse order", TowerInReverse, "wrong values", "in the order it was registered"),
        wrong("a CPU buffer filled with copy_", TowerCopiedIntoCpuBuffer, "not on the expected device",
              "Likely cause: a tensor on the CPU inside your code", "torch.empty(...)", kind=EDGE,
              outcome=Outcome.RAISED),
        wrong("the output moved to the CPU", TowerOutputToCpu, "forward's output is a tensor on cpu",
              "model and the batch are on meta", kind=EDGE),
        wrong("sigmoid instead of ReLU", TowerWithSigmoid, "wrong values"),
        wrong("ReLU before each layer", TowerReluBefore, "wrong values"),
        wrong("a residual around each layer", TowerWithResiduals, "wrong values"),
        wrong("flattened to two dimensions", TowerFlattened, "shape (6, 5); expected (2, 3, 5)", kind=EDGE),
        right("setattr in a loop", TowerWithSetattr),
        right("an nn.Sequential subclass", TowerAsSequentialSubclass),
        right("F.relu(inplace=True)", TowerFunctionalInPlaceRelu),
    ],
    ex.cross_entropy_from_logits: [
        right("indexing the log-probabilities", by_indexing),
        right("logsumexp and gather", by_gather),
        right("nn.NLLLoss and nn.LogSoftmax modules", with_nll_module),
        right("a one-hot mask", by_one_hot),
        right("a Python loop over the examples", loop_over_examples),
        wrong("F.cross_entropy", lambda logits, t: F.cross_entropy(logits, t), "build yourself"),
        wrong("nn.CrossEntropyLoss", lambda logits, t: nn.CrossEntropyLoss()(logits, t), "build yourself"),
        wrong("softmax first", lambda logits, t: F.nll_loss(torch.log_softmax(logits.softmax(dim=1), dim=1), t),
              "You applied softmax, then cross-entropy"),
        wrong("nll_loss on raw logits", lambda logits, t: F.nll_loss(logits, t), "nll_loss on raw logits"),
        wrong("log of softmax", lambda logits, t: F.nll_loss(torch.log(torch.softmax(logits, dim=1)), t),
              "-inf", "torch.log_softmax", kind=EDGE),
        wrong("summed", lambda logits, t: F.nll_loss(torch.log_softmax(logits, dim=1), t, reduction="sum"),
              "sum over the batch"),
        wrong("log_softmax over dim=0", lambda logits, t: F.nll_loss(torch.log_softmax(logits, dim=0), t),
              "normalises over dim=0", "dim=1"),
        wrong("a Python float", as_python_float, "returned float", "0-d tensor"),
        wrong("the max subtracted in place", subtracts_max_in_place, "changed its input logits in place",
              kind=STATEFUL),
        wrong("log of a sum of exp", log_of_sum_of_exp, "Your loss is nan", "exp() of large logits",
              kind=EDGE),
        wrong("a detached loss", detached_loss, "does not require grad", "detach()"),
        wrong("a one-hot mask made on the CPU", one_hot_on_cpu, "not on the expected device",
              "Likely cause: a tensor on the CPU inside your code", kind=EDGE, outcome=Outcome.RAISED),
        wrong("casts to float32", casts_to_float32, "dtype torch.float32; expected torch.float64", kind=EDGE),
        right("a Python loop with .item() indices", loop_with_item),
        right("take_along_dim", by_take_along_dim),
        right("an einsum with a one-hot mask", by_einsum),
        wrong("unsqueeze_ on the caller's targets", unsqueezes_targets_in_place, "changed its input targets",
              "unsqueeze_", kind=STATEFUL),
        wrong("switches on requires_grad of the logits", tracks_the_logits, "requires_grad of the caller's logits",
              kind=STATEFUL),
        wrong("label smoothing", label_smoothed, "Your loss is 1.8975; expected 1.8994"),
        wrong("[:, targets] picks every pair", every_pair_of_classes, "Your loss is 1.7095; expected 1.8994"),
        wrong("one-hot mean over N * C", one_hot_mean_over_all, "Your loss is 0.4749; expected 1.8994"),
        wrong("the sum divided by the classes", divided_by_classes, "expected 1.8994"),
        wrong("log of softmax plus an epsilon", log_of_softmax_plus_eps, "very large logits", kind=EDGE),
        wrong("shifts the caller's logits through .data", shifts_the_callers_logits_through_data,
              "changed its input logits", kind=STATEFUL),
        right("an arange on the default device", arange_on_the_default_device),
        right("range() indices", range_indices),
        right("nn.LogSoftmax and nn.NLLLoss", log_softmax_and_nll_modules),
        right("the max shift by hand", max_shift_by_hand),
        right("nll_loss summed, divided by N", nll_sum_over_n),
        right("log_softmax computed in float64", log_softmax_in_float64),
        right("a one-hot mask by scatter_", one_hot_by_scatter),
        right("CPU index tensors", cpu_targets_as_indices),
        wrong("the loss moved to the CPU", loss_moved_to_the_cpu, "returned a tensor on cpu",
              "on the logits' device", kind=EDGE),
        wrong("nll_loss with the targets moved to the CPU", targets_moved_to_the_cpu, "not on the expected device",
              "Likely cause: a tensor on the CPU inside your code", kind=EDGE, outcome=Outcome.RAISED),
        wrong("mean(0) leaves shape (1,)", mean_over_dim_zero, "shape (1,)", "expected one number, shape ()",
              kind=EDGE),
    ],
    ex.multilabel_loss: [
        right("nn.BCEWithLogitsLoss with type_as", ml_bce_module),
        right("softplus(z) - z * t", ml_softplus),
        right("logsigmoid of both sides", ml_logsigmoid),
        right("the clamped formula, summed and divided", ml_clamped_formula),
        right("per-example means, then their mean", ml_summed_then_divided),
        wrong("sigmoid, then BCELoss", ml_sigmoid_then_bce, "You applied sigmoid, then binary cross-entropy",
              "clamps it to -100", "logits up to 95", kind=EDGE),
        wrong("integer targets as they are", ml_targets_as_they_are, "can't be cast", "int64",
              "targets.to(logits.dtype)", outcome=Outcome.RAISED),
        wrong("targets.float() with float64 logits", ml_targets_float, "dtype torch.float32; expected torch.float64",
              "not .float()", kind=EDGE),
        wrong("cross-entropy over the labels", ml_softmax_cross_entropy, "softmax over the labels",
              "binary cross-entropy"),
        wrong("summed", ml_summed, "sum over all entries"),
        wrong("summed over labels, mean over examples", ml_per_example, "averages over the examples only",
              "N × C"),
        wrong("sigmoid before BCEWithLogitsLoss", ml_sigmoid_twice, "already probabilities", "raw logits"),
        wrong("sigmoid_ on the caller's logits", ml_sigmoid_in_place, "changed its input logits in place",
              kind=STATEFUL),
        wrong("log of sigmoid by hand", ml_log_of_sigmoid, "Your loss is nan", "logits up to 95",
              "binary_cross_entropy_with_logits", kind=EDGE),
        wrong("torch.where between two formulas", ml_where_two_formulas, "gradient is nan",
              "exp(100) is inf", kind=EDGE),
        wrong("a detached loss", ml_detached, "does not require grad", "detach()"),
        wrong("switches on requires_grad of the logits", ml_tracks_the_logits,
              "requires_grad of the caller's logits", kind=STATEFUL),
        wrong("a tensor of ones made on the CPU", ml_ones_on_the_cpu, "not on the expected device",
              "Likely cause: a tensor on the CPU inside your code", kind=EDGE, outcome=Outcome.RAISED),
        wrong("a formula on bool targets", ml_formula_without_converting, "bool", "targets.to(logits.dtype)",
              kind=EDGE, outcome=Outcome.RAISED),
        wrong("view(-1) on transposed logits", ml_flattened_by_view, "view size is not compatible", ".reshape()",
              kind=EDGE, outcome=Outcome.RAISED),
        wrong("pos_weight kept from the first batch", ml_label_weights_of_the_first_batch,
              "must match the size", "on 5 examples, 4 labels", kind=STATEFUL, outcome=Outcome.RAISED),
    ],
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
        right("any convolution (_ConvNd)", by_any_conv),
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
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
