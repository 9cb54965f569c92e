"""The models ``decay_groups`` is checked on (chapter 03, M8), rebuilt the same on both sides: the
probe's in the learner's kernel, the judge's in its own process. Each state a model may be in
when the answer gets it comes from ``states.py`` (a frozen parameter, a ``.grad`` left from
the last step)."""

from __future__ import annotations

import torch
from torch import nn

from course_utils.exercises import states


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
    one): its weight is a Linear's weight, for isinstance, not for type(m) in (...). It adds a
    parameter of its own, a per-output scale named like the weight (weight_scale): not the
    layer's weight, so it does not decay ("weight" in name takes it)."""

    def __init__(self, in_features, out_features):
        super().__init__(in_features, out_features)
        self.weight_scale = nn.Parameter(torch.ones(out_features))

    def forward(self, x):
        return super().forward(x) * self.weight_scale


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


_STATES = ("first-frozen", "grad-large")


def _mlp():
    return nn.Sequential(
        nn.Linear(8, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 16), nn.BatchNorm1d(16),
        nn.ReLU(), nn.Linear(16, 3),
    )


def _decay_models():
    """(description, model, weight_decay, state): the state (a ``states.MODULE_STATES`` name, or
    None) is put on the model just before the call, by the probe and by the judge alike."""
    torch.manual_seed(4)
    mlp = _mlp()
    conv = nn.Sequential(
        nn.Conv1d(2, 4, kernel_size=3), nn.BatchNorm1d(4), nn.ReLU(), nn.Flatten(),
        nn.Linear(24, 5, bias=False), nn.LayerNorm(5, bias=True),
    )
    return [
        ("an MLP with LayerNorm and BatchNorm1d, weight_decay=0.05", mlp, 0.05, None),
        ("a Conv1d model with a bias-free Linear, weight_decay=0.1", conv, 0.1, None),
        ("a Conv2d model with GroupNorm, a Linear named norm_proj used twice, a nested block and "
         "a parameter of its own, weight_decay=0.02", _ImageHead(), 0.02, None),
        ("a model with an Embedding and a subclass of nn.Linear with a parameter weight_scale of its "
         "own, weight_decay=0.05", _TokenHead(), 0.05, None),
        ("the MLP again, a second call on the same model, weight_decay=0.05", mlp, 0.05, None),
        ("a model with Conv3d, ConvTranspose2d, a subclass of Conv2d, BatchNorm2d, "
         "InstanceNorm1d(affine=True), RMSNorm, a LayerNorm without bias, an EmbeddingBag and a "
         "MultiheadAttention, weight_decay=0.03", _LayerZoo(), 0.03, None),
        # what the task allows besides: a second call with another decay, a decay of 0.0, and
        # the states a model is in during training
        ("the MLP a third time, weight_decay=0.2", mlp, 0.2, None),
        ("the Conv1d model again, weight_decay=0.0 (a run without decay)", conv, 0.0, None),
        *((f"an MLP with {states.MODULE_STATES[name].on}, weight_decay=0.05", _mlp(), 0.05, name)
          for name in _STATES),
        # a model with nothing to decay: the two groups still, the first one empty
        ("a model without Linear or Conv layers (an Embedding and a LayerNorm), weight_decay=0.05",
         nn.Sequential(nn.Embedding(10, 4), nn.LayerNorm(4)), 0.05, None),
    ]
