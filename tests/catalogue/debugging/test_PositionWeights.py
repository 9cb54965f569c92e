"""Chapter 06's exercise PositionWeights: right answers pass, classic mistakes fail with the message that names them."""

import pytest
import torch
from torch import nn

from course_utils.exercises import debugging as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- PositionWeights (D3) --------------------------------------------------------------------
class PositionsWithBuffer(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.register_buffer("steps", torch.arange(1, max_length + 1), persistent=False)

    def forward(self, x):
        length = x.shape[1]
        weights = self.steps[:length].to(x.dtype) / length
        return x * weights[:, None]


class PositionsFromInput(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device).to(x.dtype) / length
        return x * steps.view(1, length, 1)


class PositionsWithAFrozenParameter(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.steps = nn.Parameter(torch.arange(1.0, max_length + 1), requires_grad=False)

    def forward(self, x):
        length = x.shape[1]
        return x * (self.steps[:length] / length).to(x.dtype).unsqueeze(-1)


class PositionsWithLinspace(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length

    def forward(self, x):
        length = x.size(1)
        weights = torch.linspace(1 / length, 1.0, length, device=x.device, dtype=x.dtype)
        return torch.einsum("blf,l->blf", x, weights)


class PositionsBuggy(nn.Module):  # the notebook's module
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        return x * (torch.arange(1, length + 1) / length)[:, None]


class PositionsDeviceOnly(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        return x * (torch.arange(1, length + 1, device=x.device) / length)[:, None]


class PositionsPlainAttribute(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.steps = torch.arange(1, max_length + 1)

    def forward(self, x):
        length = x.shape[1]
        return x * (self.steps[:length] / length).to(x.dtype)[:, None]


class PositionsFromZero(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        return x * (torch.arange(length, device=x.device, dtype=x.dtype) / length)[:, None]


class PositionsOverMaxLength(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length

    def forward(self, x):
        steps = torch.arange(1, x.shape[1] + 1, device=x.device, dtype=x.dtype)
        return x * (steps / self.max_length)[:, None]


class PositionsCachedOnFirstCall(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.weights = None

    def forward(self, x):
        if self.weights is None:  # computed once, "to save time"
            length = x.shape[1]
            self.weights = torch.arange(1, length + 1, device=x.device, dtype=x.dtype) / length
        return x * self.weights[:, None]


class PositionsInPlace(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
        return x.mul_((steps / length)[:, None])


class PositionsWithView(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        batch, length, features = x.shape
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype) / length
        flat = x.view(batch * length, features) * steps.repeat(batch)[:, None]
        return flat.view(batch, length, features)


class PositionsDetached(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        with torch.no_grad():  # "the weights are constants"
            steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
            return x * (steps / length)[:, None]


class PositionsInFloat32(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=torch.float32)
        return x * (steps / length)[:, None]


class PositionsFromAList(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.size(-2)
        return x * x.new_tensor([(t + 1) / length for t in range(length)]).unsqueeze(-1)


class PositionsMovedWithTo(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        return x * (torch.arange(1, length + 1).to(x) / length)[:, None]


class PositionsInFloat64ThenCast(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        weights = (torch.arange(1, length + 1, dtype=torch.float64) / length).to(x.device)
        return (x.double() * weights[:, None]).to(x.dtype)


class PositionsCachedPerLength(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        length = x.shape[1]
        if length not in self.cache:  # "computed once per length"
            steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
            self.cache[length] = (steps / length)[:, None]
        return x * self.cache[length]


class PositionsCachedPerLengthAndDevice(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = (x.shape[1], x.device)  # "a new device gets new weights"
        if key not in self.cache:
            steps = torch.arange(1, key[0] + 1, device=x.device, dtype=x.dtype)
            self.cache[key] = (steps / key[0])[:, None]
        return x * self.cache[key]


class PositionsDetachedThenMarked(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        out = x * (torch.arange(1, length + 1, device=x.device, dtype=x.dtype) / length)[:, None]
        return out.detach().requires_grad_(x.requires_grad)


class PositionsFixedForFloat64Only(nn.Module):
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        weights = torch.arange(1, length + 1, device=x.device) / length
        if x.dtype == torch.float64:
            weights = weights.double()
        return x * weights[:, None]


class PositionsWithAPersistentBuffer(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length
        self.register_buffer("weights", torch.arange(1, max_length + 1) / max_length)

    def forward(self, x):
        length = x.shape[1]
        return x * (self.weights[:length] * (self.max_length / length))[:, None]


class PositionsWithATrainableParameter(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length
        self.weights = nn.Parameter(torch.arange(1, max_length + 1) / max_length)  # moves with .to()

    def forward(self, x):
        length = x.shape[1]
        return x * (self.weights[:length] * (self.max_length / length))[:, None]


class PositionsByCumsum(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length

    def forward(self, x):
        length = x.shape[1]
        steps = x.new_ones(length).cumsum(0)
        return x * (steps / length).view(1, length, 1)


# -- issue 45, fresh round (from the task text) ---------------------------------------------
class _PW(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length


class PW_IntBuffer(_PW):
    def __init__(self, max_length):
        super().__init__(max_length)
        self.register_buffer("steps", torch.arange(1, max_length + 1))  # int64: .to(dtype) skips it

    def forward(self, x):
        length = x.shape[1]
        return x * (self.steps[:length] / length)[:, None]


class PW_Float32Compute(_PW):
    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=torch.float32)
        return (x.float() * (steps / length)[:, None]).to(x.dtype)


class PW_WeightsOnFeatures(_PW):
    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
        return x * (steps / length)[None, :]


class PW_LenOfX(_PW):
    def forward(self, x):
        length = len(x)
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
        return x * (steps / length)[:, None]


class PW_Reversed(_PW):
    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(length, 0, -1, device=x.device, dtype=x.dtype)
        return x * (steps / length)[:, None]


class PW_OverLengthPlusOne(_PW):
    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
        return x * (steps / (length + 1))[:, None]


class PW_Float64Buffer(_PW):
    def __init__(self, max_length):
        super().__init__(max_length)
        self.register_buffer("steps", torch.arange(1, max_length + 1, dtype=torch.float64))

    def forward(self, x):
        length = x.shape[1]
        return x * (self.steps[:length] / length)[:, None]


class PW_UpcastsHalf(_PW):
    def forward(self, x):
        if x.dtype in (torch.float16, torch.bfloat16):
            x = x.float()  # half precision is too coarse for the weights
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
        return x * (steps / length)[:, None]


class PW_OverFeatures(_PW):
    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
        return x * (steps / x.shape[-1])[:, None]


class PW_FloorDivision(_PW):
    def forward(self, x):
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device)
        return x * (steps // length).to(x.dtype)[:, None]


class PositionsByMul(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length

    def forward(self, x):
        length = x.size(-2)
        weights = torch.arange(length, device=x.device).add(1).to(x.dtype).div(length)
        return torch.mul(x, weights.unsqueeze(-1))


# -- issue 45, second fresh round (from the task text) --------------------------------------
class PW_Float32WeightsCast(nn.Module):
    # The weights worked out in float32 and cast to x's dtype: float64 outputs have float32's
    # precision (1/3 -> 0.3333333432674408).
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length

    def forward(self, x):
        length = x.shape[1]
        weights = (torch.arange(1, length + 1, device=x.device) / length).to(x.dtype)
        return x * weights[:, None]


class PW_BufferDividedInFloat32(nn.Module):
    # Was right("a buffer sliced to the length") before round 2: an int64 buffer divided by the
    # length (float32), then cast to x's dtype.
    def __init__(self, max_length):
        super().__init__()
        self.register_buffer("steps", torch.arange(1, max_length + 1), persistent=False)

    def forward(self, x):
        length = x.shape[1]
        weights = (self.steps[:length] / length).to(x.dtype)
        return x * weights[:, None]


class PW_MadeOnCpuDividedThenTo(nn.Module):
    # Was right("made on the CPU, then .to(x)") before round 2: divided in float32, then .to(x).
    def __init__(self, max_length):
        super().__init__()

    def forward(self, x):
        length = x.shape[1]
        return x * (torch.arange(1, length + 1) / length).to(x)[:, None]


CATALOGUE = Catalogue({
    ex.PositionWeights: [
        right("a buffer sliced to the length", PositionsWithBuffer),
        right("arange on x.device, then .to(x.dtype), view", PositionsFromInput),
        right("a frozen nn.Parameter", PositionsWithAFrozenParameter),
        right("linspace and einsum", PositionsWithLinspace),
        wrong("the notebook's module: arange on the CPU", PositionsBuggy,
              "is not on the expected device meta", "device=x.device", kind=EDGE),
        wrong("device only, no dtype", PositionsDeviceOnly, "float32 for a bfloat16 input", "dtype=x.dtype", kind=EDGE),
        wrong("a plain tensor attribute", PositionsPlainAttribute,
              "self.steps is a plain tensor attribute", "register_buffer", kind=EDGE),
        wrong("weights t / length", PositionsFromZero, "(t + 1) / length"),
        wrong("divides by max_length", PositionsOverMaxLength, "wrong values", "length = x.shape[1]"),
        wrong("weights cached on the first call", PositionsCachedOnFirstCall,
              "second call", "not reuse what an earlier call made", kind=STATEFUL),
        wrong("multiplies x in place", PositionsInPlace, "changed its input x in place", "x * weights",
              kind=STATEFUL),
        wrong("view on a non-contiguous input", PositionsWithView, "view size is not compatible",
              "non-contiguous", outcome=Outcome.RAISED, kind=EDGE),
        wrong("computes under no_grad", PositionsDetached, "does not require grad", "cut off from autograd",
              kind=EDGE),
        wrong("weights always float32", PositionsInFloat32, "float32 for a bfloat16 input", kind=EDGE),
        right("x.new_tensor from a list", PositionsFromAList),
        right("made on the CPU, then .to(x)", PositionsMovedWithTo),
        right("computed in float64, cast back", PositionsInFloat64ThenCast),
        wrong("weights cached per length in a dict", PositionsCachedPerLength,
              "kept tensors from its earlier calls", "A new module moved to meta works", kind=STATEFUL),
        wrong("weights cached per length and device", PositionsCachedPerLengthAndDevice,
              "although a new module moved to bfloat16 gives bfloat16", "earlier call in float32",
              kind=STATEFUL),
        wrong("output detached, then marked requires_grad", PositionsDetachedThenMarked,
              "x.grad is not the weights", kind=EDGE),
        wrong("dtype fixed for float64 only", PositionsFixedForFloat64Only, "float32 for a bfloat16 input",
              kind=EDGE),
        right("a persistent buffer of max_length, rescaled", PositionsWithAPersistentBuffer),
        right("x.new_ones(length).cumsum(0)", PositionsByCumsum),
        wrong("weights in a trainable nn.Parameter", PositionsWithATrainableParameter,
              "trainable parameters (weights, requires_grad=True)", "register_buffer", kind=EDGE),
        # -- issue 45, fresh round (from the task text) --
        wrong('an int64 buffer of steps', PW_IntBuffer,
              "promotion gives the product theirs or the input's, whichever", kind=EDGE),
        wrong('x computed in float32, cast back',
              PW_Float32Compute, "forward's output has wrong values for a", kind=EDGE),
        wrong('weights broadcast over the features', PW_WeightsOnFeatures, 'RuntimeError', outcome=Outcome.RAISED),
        wrong('len(x) as the length', PW_LenOfX, 'RuntimeError', outcome=Outcome.RAISED),
        wrong('weights in reverse order', PW_Reversed,
              'each sequence is multiplied by (t + 1) / length, with length'),
        wrong('divides by length + 1', PW_OverLengthPlusOne,
              'each sequence is multiplied by (t + 1) / length, with length'),
        wrong('a float64 buffer of steps', PW_Float64Buffer,
              "); expected (2, 5, 4) and float32, the input's", kind=EDGE),
        wrong('half precision input upcast to float32', PW_UpcastsHalf,
              "promotion gives the product theirs or the input's, whichever", kind=EDGE),
        wrong('divides by the number of features', PW_OverFeatures,
              'each sequence is multiplied by (t + 1) / length, with length'),
        wrong('floor division of the steps', PW_FloorDivision,
              'each sequence is multiplied by (t + 1) / length, with length'),
        right("arange(length).add(1), torch.mul, unsqueeze(-1)", PositionsByMul),
        # -- issue 45, second fresh round (from the task text) --
        wrong("weights worked out in float32, cast to x.dtype", PW_Float32WeightsCast,
              "has only float32's precision", "worked out in float32", kind=EDGE),
        wrong("an int64 buffer divided in float32, then .to(x.dtype)", PW_BufferDividedInFloat32,
              "has only float32's precision", kind=EDGE),
        wrong("weights divided on the CPU in float32, then .to(x)", PW_MadeOnCpuDividedThenTo,
              "has only float32's precision", kind=EDGE),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
