"""Chapter 03, M1 — the catalogue of ``SkipBlock``: right answers, wrong ones and what their message says."""

from collections import OrderedDict

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises import models as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


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


# -- issue 45: tensors kept as plain attributes (not registered) -------------------------------
class SkipWithPlainTensors(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.w1 = (torch.randn(hidden, width) / width ** 0.5).requires_grad_()
        self.b1 = torch.zeros(hidden, requires_grad=True)
        self.w2 = (torch.randn(width, hidden) / hidden ** 0.5).requires_grad_()
        self.b2 = torch.zeros(width, requires_grad=True)

    def forward(self, x):
        return x + F.linear(torch.relu(F.linear(x, self.w1, self.b1)), self.w2, self.b2)


class SkipHalfPlain(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.w = torch.randn(width, hidden, requires_grad=True)
        self.b = torch.zeros(width, requires_grad=True)

    def forward(self, x):
        return x + F.linear(torch.relu(self.expand(x)), self.w, self.b)


class SkipTensorsInADict(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.p = {"w1": torch.randn(width, hidden) * 0.3, "b1": torch.zeros(hidden),
                  "w2": torch.randn(hidden, width) * 0.3, "b2": torch.zeros(width)}

    def forward(self, x):
        p = self.p
        return x + torch.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


class SkipPlainBias(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width, bias=False)
        self.bias = torch.zeros(width)

    def forward(self, x):
        return x + self.project(torch.relu(self.expand(x))) + self.bias


class SkipParameterDictAndBuffer(nn.Module):
    """Raw weights in an nn.ParameterDict, and a constant (not trained) as a buffer."""

    def __init__(self, width, hidden):
        super().__init__()
        self.p = nn.ParameterDict({
            "w1": nn.Parameter(torch.randn(hidden, width) / width ** 0.5), "b1": nn.Parameter(torch.zeros(hidden)),
            "w2": nn.Parameter(torch.randn(width, hidden) / hidden ** 0.5), "b2": nn.Parameter(torch.zeros(width)),
        })
        self.register_buffer("one", torch.ones(()))
        self.name = "skip"

    def forward(self, x):
        p = self.p
        return self.one * x + F.linear(F.relu(F.linear(x, p["w1"], p["b1"])), p["w2"], p["b2"])


_UNREGISTERED = [SkipWithPlainTensors, SkipHalfPlain, SkipTensorsInADict, SkipPlainBias]


@pytest.mark.parametrize("answer", _UNREGISTERED, ids=lambda a: a.__name__)
def test_unregistered_tensors_message_advice_is_not_already_true(answer):
    """The message must not advise device= (these answers make every tensor in __init__, where
    device= would not help) and its advice (register them) must not already hold of the answer."""
    verdict = ex.SkipBlock.verdict(answer)
    assert verdict.mistake.endswith("tensors-not-registered"), verdict
    assert "device=" not in verdict.message and "Likely cause" not in verdict.message
    block = answer(6, 16)
    registered = {id(t) for t in list(block.parameters()) + list(block.buffers())}
    plain = [v for v in vars(block).values() if isinstance(v, torch.Tensor)] + [
        t for v in vars(block).values() if isinstance(v, dict) for t in v.values()]
    assert plain and not any(id(t) in registered for t in plain)  # "not registered" is true


# -- issue 45, fresh round (from the task text) --
class SkipEvalDropsSkip(nn.Module):
    """In eval mode the skip is left out."""

    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = nn.Linear(hidden, width)

    def forward(self, x):
        branch = self.project(torch.relu(self.expand(x)))
        return x + branch if self.training else branch


class SkipRelu6(SkipEvalDropsSkip):
    """ReLU6 instead of ReLU: the same until a hidden value passes 6."""

    def forward(self, x):
        return x + self.project(torch.clamp(self.expand(x), 0, 6))


class SkipNoGradInEval(SkipEvalDropsSkip):
    """Turns gradients off in eval mode ("eval is for inference")."""

    def forward(self, x):
        if not self.training:
            with torch.no_grad():
                return x + self.project(torch.relu(self.expand(x)))
        return x + self.project(torch.relu(self.expand(x)))


class SkipSqueeze(SkipEvalDropsSkip):
    """Squeezes the output: a batch of one loses its batch dimension."""

    def forward(self, x):
        return (x + self.project(torch.relu(self.expand(x)))).squeeze()


class SkipRowLoop(SkipEvalDropsSkip):
    """One example at a time, stacked: an empty batch has nothing to stack."""

    def forward(self, x):
        return torch.stack([row + self.project(torch.relu(self.expand(row))) for row in x])


class SkipSharedWhenSquare(nn.Module):
    """One layer for both when width == hidden."""

    def __init__(self, width, hidden):
        super().__init__()
        self.expand = nn.Linear(width, hidden)
        self.project = self.expand if width == hidden else nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.project(torch.relu(self.expand(x)))


class SkipFloat32(SkipEvalDropsSkip):
    """Always returns float32, whatever dtype the block was moved to."""

    def forward(self, x):
        return (x + self.project(torch.relu(self.expand(x)))).float()


class SkipRequiresGradOnX(SkipEvalDropsSkip):
    """Switches on requires_grad of the caller's x ("so the gradient reaches the input")."""

    def forward(self, x):
        if not x.requires_grad and torch.is_grad_enabled():
            x.requires_grad_(True)
        return x + self.project(torch.relu(self.expand(x)))


class SkipInPlaceNoGrad(SkipEvalDropsSkip):
    """Adds in place into the caller's x when gradients are off (saves memory)."""

    def forward(self, x):
        branch = self.project(torch.relu(self.expand(x)))
        if not torch.is_grad_enabled():
            return x.add_(branch)
        return x + branch


class SkipForcesTrain(SkipEvalDropsSkip):
    """Puts the block back into train mode on every call."""

    def forward(self, x):
        self.train()
        return x + self.project(torch.relu(self.expand(x)))


class _Dense(nn.Linear):
    """A subclass of nn.Linear, as libraries write them."""


class SkipWithLinearSubclass(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.up, self.down = _Dense(width, hidden), _Dense(hidden, width)

    def forward(self, x):
        return torch.add(self.down(F.relu(self.up(x))), x)


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
        wrong("weights and biases as plain tensors", SkipWithPlainTensors, "self.w1, self.b1, self.w2, self.b2",
              "plain attributes", "nn.Parameter", "lists 0 numbers instead of 214", kind=EDGE),
        wrong("the second layer as plain tensors", SkipHalfPlain, "self.w, self.b", "leaves them behind",
              kind=EDGE),
        wrong("tensors in a plain dict", SkipTensorsInADict, "self.p (a plain dict of 4 tensors)",
              "nn.ParameterDict", kind=EDGE),
        wrong("a bias as a plain tensor", SkipPlainBias, "self.bias", "register_buffer", kind=EDGE),
        right("an nn.ParameterDict and a buffer", SkipParameterDictAndBuffer),
        # -- issue 45, fresh round (from the task text) --
        wrong('the skip left out in eval mode', SkipEvalDropsSkip, "skip connection is missing", "eval mode", kind=STATEFUL),
        wrong('ReLU6 (clamp at 6) instead of ReLU', SkipRelu6, "wrong values", "float32 edges", kind=EDGE),
        wrong('no gradients in eval mode', SkipNoGradInEval, "does not require grad", "eval mode", kind=STATEFUL),
        wrong('the output squeezed', SkipSqueeze, "has shape (6,); expected (1, 6)", kind=EDGE),
        wrong('one row at a time, stacked', SkipRowLoop, "stack expects a non-empty TensorList", "empty batch", kind=EDGE, outcome=Outcome.RAISED),
        wrong('one layer for both when width == hidden', SkipSharedWhenSquare, "SkipBlock(4, 4) registers 20 parameters", kind=EDGE),
        wrong('the output always float32', SkipFloat32, "dtype torch.float32; expected torch.float64", "moved to float64", kind=EDGE),
        wrong("requires_grad switched on for the caller's x", SkipRequiresGradOnX, "switched on requires_grad of the caller's x", kind=STATEFUL),
        wrong('adds into x in place under no_grad', SkipInPlaceNoGrad, "changed its input x in place", "torch.no_grad()", kind=STATEFUL),
        wrong('forward calls self.train()', SkipForcesTrain, "left in train mode", "eval mode", kind=STATEFUL),
        right("layers of a subclass of nn.Linear", SkipWithLinearSubclass),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
