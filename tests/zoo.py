"""A zoo of real architectures, small enough to run in a test, written here for the tests.

A GPT-style decoder with tied embeddings and a causal mask, a ResNet-style net with BatchNorm,
an LSTM language model with packed sequences and tied weights, ``nn.TransformerEncoder`` and
``nn.Transformer`` with every kind of mask, ``MultiheadAttention``, a model with ``Lazy*``
layers, and models that return a tuple, a dict, a namedtuple and a dataclass. ``ZOO`` lists
them as (name, model factory, args factory, kwargs factory); the tests of every tool use it
(``test_zoo_tracing``, ``test_zoo_memory``, ``test_zoo_checkpoints``, ``test_zoo_every_tool``).
"""

from __future__ import annotations

import dataclasses
import math
from collections import namedtuple

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

# --- the zoo --------------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, heads: int, context: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.softmax = nn.Softmax(dim=-1)
        self.drop = nn.Dropout(0.1)
        # An additive float mask kept as a buffer: 0 on and below the diagonal, -inf above.
        self.register_buffer("causal_mask", nn.Transformer.generate_square_subsequent_mask(context))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) + self.causal_mask[:t, :t]
        weights = self.drop(self.softmax(scores))
        return self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))


class GPTBlock(nn.Module):
    def __init__(self, d, heads, context):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, context)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=40, d=16, heads=2, context=8, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(context, d)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.Sequential(*[GPTBlock(d, heads, context) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied

    def forward(self, idx):
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(positions))
        return self.head(self.ln(self.blocks(x)))


class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class TinyResNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nn.Sequential(ResBlock(8), ResBlock(8))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        return self.fc(self.pool(self.blocks(self.stem(x))).flatten(1))


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab=30, d=12):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d, batch_first=True)
        self.decoder = nn.Linear(d, vocab)
        self.decoder.weight = self.embed.weight  # tied

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.embed(tokens), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        padded, _ = pad_packed_sequence(out, batch_first=True)
        return self.decoder(padded)


class EncoderWithHead(nn.Module):
    def __init__(self, d=16, classes=6):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, 2, dim_feedforward=32, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(d, classes)

    def forward(self, x, **masks):
        return self.head(self.encoder(x, **masks))


class TransformerWithHead(nn.Module):
    def __init__(self, d=16, classes=6):
        super().__init__()
        self.transformer = nn.Transformer(
            d, 2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32, dropout=0.1,
            batch_first=True,
        )
        self.head = nn.Linear(d, classes)

    def forward(self, src, tgt, **masks):
        return self.head(self.transformer(src, tgt, **masks))


class Attention(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, 2, batch_first=True)
        self.out = nn.Linear(d, 3)

    def forward(self, x, **masks):
        y, _ = self.mha(x, x, x, **masks)
        return self.out(y)


class LazyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.LazyLinear(10)
        self.bn = nn.LazyBatchNorm1d()
        self.fc2 = nn.LazyLinear(3)

    def forward(self, x):
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


@dataclasses.dataclass
class Prediction:
    logits: torch.Tensor
    score: torch.Tensor


Pair = namedtuple("Pair", ["logits", "hidden"])


class Returns(nn.Module):
    """Returns its results in a tuple, dict, namedtuple or dataclass."""

    def __init__(self, kind: str, bad: bool = False):
        super().__init__()
        self.kind, self.bad = kind, bad
        self.fc = nn.Linear(4, 3)
        self.act = nn.Tanh()

    def forward(self, x):
        hidden = self.act(self.fc(x))
        # The model's own code makes the nan (sqrt of a negative number) when bad.
        score = torch.sqrt(hidden.sum(-1) - 10) if self.bad else hidden.sum(-1)
        if self.kind == "tuple":
            return hidden, (score, [score])
        if self.kind == "dict":
            return {"hidden": hidden, "score": score}
        if self.kind == "namedtuple":
            return Pair(hidden, score)
        return Prediction(hidden, score)


class LogInPlace(nn.Module):
    def forward(self, x):
        return x.log_()


class InPlaceNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.log = LogInPlace()

    def forward(self, x):
        return self.log(self.fc(x))


class Noisy(nn.Module):
    """Draws random numbers in its forward, as a VAE or noise injection does."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        h = self.fc(x)
        return self.drop(h + torch.randn_like(h))


class Rude(nn.Module):
    """A forward that changes modes and never puts them back."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        self.drop.eval()
        torch.set_grad_enabled(False)
        return self.drop(self.fc(x))


class SparseEmbeddingNet(nn.Module):
    """A large vocabulary with sparse gradients: backward gives only the rows the batch used."""

    def __init__(self, vocab=1000, d=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, sparse=True)
        self.head = nn.Linear(d, 3)

    def forward(self, ids):
        return self.head(self.embed(ids).mean(dim=1))


# --- the zoo's inputs -----------------------------------------------------------------------

B, T, D = 2, 5, 16


def padding_mask():
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[1, 3:] = True  # the second sequence is 3 long: its last positions are padding
    return mask


def float_causal_mask():
    return torch.triu(torch.full((T, T), float("-inf")), diagonal=1)


MASKS = {
    "no mask": lambda: {},
    "bool padding mask": lambda: {"src_key_padding_mask": padding_mask()},
    "float -inf causal mask": lambda: {"mask": float_causal_mask()},
    "generate_square_subsequent_mask": lambda: {
        "mask": nn.Transformer.generate_square_subsequent_mask(T)
    },
    "is_causal=True": lambda: {"mask": float_causal_mask(), "is_causal": True},
    "causal and padding": lambda: {
        "mask": nn.Transformer.generate_square_subsequent_mask(T),
        "src_key_padding_mask": padding_mask(),
    },
}

TRANSFORMER_MASKS = {
    "no mask": lambda: {},
    "bool padding mask": lambda: {
        "src_key_padding_mask": padding_mask(), "memory_key_padding_mask": padding_mask()
    },
    "float -inf causal mask": lambda: {"tgt_mask": float_causal_mask()},
    "generate_square_subsequent_mask": lambda: {
        "tgt_mask": nn.Transformer.generate_square_subsequent_mask(T)
    },
    "is_causal=True": lambda: {"tgt_mask": float_causal_mask(), "tgt_is_causal": True},
}

MHA_MASKS = {
    "no mask": lambda: {},
    "bool padding mask": lambda: {"key_padding_mask": padding_mask()},
    "float -inf causal mask": lambda: {"attn_mask": float_causal_mask()},
    "generate_square_subsequent_mask": lambda: {
        "attn_mask": nn.Transformer.generate_square_subsequent_mask(T)
    },
    "is_causal=True": lambda: {"attn_mask": float_causal_mask(), "is_causal": True},
}


def zoo():
    """(name, model factory, args factory, kwargs factory) for every zoo model and mask kind."""
    cases = [
        ("gpt", TinyGPT, lambda: (torch.randint(0, 40, (B, 8)),), dict),
        ("resnet", TinyResNet, lambda: (torch.randn(B, 3, 8, 8),), dict),
        (
            "lstm",
            LSTMLanguageModel,
            lambda: (torch.randint(0, 30, (3, 6)), torch.tensor([6, 2, 4])),
            dict,
        ),
        ("lazy", LazyNet, lambda: (torch.randn(4, 7),), dict),
        ("sparse embedding", SparseEmbeddingNet, lambda: (torch.randint(0, 1000, (B, T)),), dict),
    ]
    cases += [(f"encoder, {k}", EncoderWithHead, lambda: (torch.randn(B, T, D),), m) for k, m in MASKS.items()]
    cases += [
        (f"transformer, {k}", TransformerWithHead, lambda: (torch.randn(B, T, D), torch.randn(B, T, D)), m)
        for k, m in TRANSFORMER_MASKS.items()
    ]
    cases += [(f"mha, {k}", Attention, lambda: (torch.randn(B, T, D),), m) for k, m in MHA_MASKS.items()]
    cases += [
        (f"returns {kind}", (lambda kind=kind: Returns(kind)), lambda: (torch.randn(3, 4),), dict)
        for kind in ("tuple", "dict", "namedtuple", "dataclass")
    ]
    return cases


ZOO = zoo()
MODES = ["train", "eval", "eval+no_grad"]


def saved_by_a_real_forward(model, loss_fn):
    """Our own count, independent of the tools: the bytes of each storage autograd saves while
    ``loss_fn()`` runs, parameters and buffers left out; and the loss, for a backward."""
    fixed = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    saved = {}

    def pack(t):
        if t.layout == torch.strided:  # a sparse tensor has no single storage to count
            address = t.untyped_storage().data_ptr()
            if address not in fixed:
                saved[address] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn()
    return sum(saved.values()), loss
