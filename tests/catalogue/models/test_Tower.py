"""Chapter 03, M2 — the catalogue of ``Tower``: right answers, wrong ones and what their message says."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises import models as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_fails
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


def test_a_function_that_returns_layers_instead_of_a_module_is_told_to_write_a_class():
    def tower_as_list(width, depth):
        return [nn.Linear(width, width) for _ in range(depth)]

    assert_fails(ex.Tower, tower_as_list, "made list, not an nn.Module", "class Tower(nn.Module)")


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


# -- round 2: answers outside testers wrote ----------------------------------------------------
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


# -- round 3 (tester X) ----------------------------------------------------------------------
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


# -- issue 45, fresh round (from the task text) --
class TowerNoReluInEval(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if self.training:
                x = torch.relu(x)
        return x


class TowerNoGradInEval(TowerNoReluInEval):
    def forward(self, x):
        with torch.set_grad_enabled(self.training and torch.is_grad_enabled()):
            for layer in self.layers:
                x = torch.relu(layer(x))
        return x


class TowerSqueeze(TowerNoReluInEval):
    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x.squeeze()


class TowerInitInFirstForward(TowerNoReluInEval):
    def forward(self, x):
        if not getattr(self, "_initialised", False):  # Kaiming's scale for ReLU layers
            for layer in self.layers:
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            self._initialised = True
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class TowerFloat32(TowerNoReluInEval):
    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x.float()


class TowerRelu6(TowerNoReluInEval):
    def forward(self, x):
        for layer in self.layers:
            x = torch.clamp(layer(x), 0, 6)
        return x


class TowerForcesTrain(TowerNoReluInEval):
    def forward(self, x):
        self.train()
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class TowerZeroShortcut(TowerNoReluInEval):
    def forward(self, x):
        if (x == 0).all():  # nothing to propagate
            return x
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class TowerRowLoop(TowerNoReluInEval):
    def forward(self, x):
        rows = []
        for row in x:
            for layer in self.layers:
                row = torch.relu(layer(row))
            rows.append(row)
        return torch.stack(rows)


class TowerDetachBetween(TowerNoReluInEval):
    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x.detach()))
        return x


class _LinearReLU(nn.Linear):
    def forward(self, x):
        return torch.relu(super().forward(x))


class TowerOfLinearReLU(nn.Sequential):
    def __init__(self, width, depth):
        super().__init__(*[_LinearReLU(width, width) for _ in range(depth)])


# -- issue 45, second fresh round (from the task text) --
class TowerFirstPlusRest(nn.Module):
    # a first layer, then depth - 1 more in a loop: depth=0 still gives one layer
    def __init__(self, width, depth):
        super().__init__()
        self.first = nn.Linear(width, width)
        self.rest = nn.ModuleList([nn.Linear(width, width) for _ in range(depth - 1)])

    def forward(self, x):
        x = torch.relu(self.first(x))
        for layer in self.rest:
            x = torch.relu(layer(x))
        return x


class TowerParameterList(nn.Module):
    # layers in a plain list, "fixed" by registering their parameters in a ParameterList
    def __init__(self, width, depth):
        super().__init__()
        self.layers = [nn.Linear(width, width) for _ in range(depth)]
        self.params = nn.ParameterList([p for layer in self.layers for p in layer.parameters()])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class TowerWhileLoop(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList()
        while len(self.layers) < depth:
            self.layers.append(nn.Linear(width, width))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).relu()
        return x


CATALOGUE = Catalogue({
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
        # -- issue 45, fresh round (from the task text) --
        wrong('no ReLU in eval mode', TowerNoReluInEval, "wrong values", "eval mode", kind=STATEFUL),
        wrong('no gradients in eval mode', TowerNoGradInEval, "does not require grad", "eval mode", kind=STATEFUL),
        wrong('the output squeezed', TowerSqueeze, "has shape (5,); expected (1, 5)", kind=EDGE),
        wrong('Kaiming init in the first forward', TowerInitInFirstForward, "forward changed the values of layers.0.weight", kind=STATEFUL),
        wrong('the output always float32', TowerFloat32, "dtype torch.float32; expected torch.float64", kind=EDGE),
        wrong('ReLU6 (clamp at 6) instead of ReLU', TowerRelu6, "wrong values", "float32 edges", kind=EDGE),
        wrong('forward calls self.train()', TowerForcesTrain, "left in train mode", kind=STATEFUL),
        wrong('an all-zero batch returned as it is', TowerZeroShortcut, "wrong values", "batch of zeros", kind=EDGE),
        wrong('one row at a time, stacked', TowerRowLoop, "stack expects a non-empty TensorList", "empty batch", kind=EDGE, outcome=Outcome.RAISED),
        wrong('detach() between the layers', TowerDetachBetween, "no gradient", "graph is cut"),
        right("an nn.Sequential of a Linear subclass with its ReLU", TowerOfLinearReLU),
        # -- issue 45, second fresh round (from the task text) --
        wrong("a first layer, then depth - 1 in a loop", TowerFirstPlusRest, "Tower(width=4, depth=0) has 1 linear layers",
              "expected none", "depth=0", kind=EDGE),
        wrong("layers in a plain list, their parameters in an nn.ParameterList", TowerParameterList,
              "finds all 90 parameters", "not submodules", "model.modules() lists none of them",
              "keep their own weights on the CPU"),
        right("layers appended in a while loop", TowerWhileLoop),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
