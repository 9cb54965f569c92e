"""Chapter 03's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them."""

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises import models as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import (
    assert_fails,
    assert_passes,
    assert_references_pass_and_leave_the_session_alone,
)

EXERCISES = (ex.SkipBlock, ex.Tower, ex.cross_entropy_from_logits, ex.decay_groups)


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


# -- SkipBlock (M1) --------------------------------------------------------------------------
def test_skip_block_alternatives_pass():
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

    assert_passes(ex.SkipBlock, WithFunctional)
    assert_passes(ex.SkipBlock, WithInnerSequential)


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


def test_skip_block_classic_mistakes():
    assert_fails(ex.SkipBlock, _block(lambda x, a, b: b(torch.relu(a(x)))), "skip connection is missing")
    assert_fails(ex.SkipBlock, _block(lambda x, a, b: torch.relu(x + b(torch.relu(a(x))))), "ReLU after adding x")
    assert_fails(ex.SkipBlock, _block(lambda x, a, b: x + b(a(x))), "no ReLU between")
    assert_fails(
        ex.SkipBlock, _block(lambda x, a, b: x + b(torch.relu(a(x))), hidden_list=True),
        "self.layers (a plain list of 2 layers)", "nn.ModuleList",
    )

    def sequential(width, hidden):
        return nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, width))

    assert_fails(ex.SkipBlock, sequential, "skip connection is missing")

    class Swapped(nn.Module):
        def __init__(self, width, hidden):
            super().__init__()
            self.a = nn.Linear(hidden, width)
            self.b = nn.Linear(width, hidden)

        def forward(self, x):
            return x + self.a(torch.relu(self.b(x)))

    # Same shapes registered in the other order: still right.
    assert_passes(ex.SkipBlock, Swapped)

    class NoSuper(nn.Module):
        def __init__(self, width, hidden):
            self.a = nn.Linear(width, hidden)

    assert_fails(ex.SkipBlock, NoSuper, "super().__init__() must run", outcome=Outcome.RAISED)


# -- Tower (M2) ------------------------------------------------------------------------------
def test_tower_alternatives_pass():
    class WithSequential(nn.Module):
        def __init__(self, width, depth):
            super().__init__()
            layers = []
            for _ in range(depth):
                layers += [nn.Linear(width, width), nn.ReLU()]
            self.body = nn.Sequential(*layers)

        def forward(self, x):
            return self.body(x)

    class WithAddModule(nn.Module):
        def __init__(self, width, depth):
            super().__init__()
            self.depth = depth
            for i in range(depth):
                self.add_module(f"layer{i}", nn.Linear(width, width))

        def forward(self, x):
            for i in range(self.depth):
                x = F.relu(getattr(self, f"layer{i}")(x))
            return x

    assert_passes(ex.Tower, WithSequential)
    assert_passes(ex.Tower, WithAddModule)


def test_tower_classic_mistakes():
    class PlainList(nn.Module):
        def __init__(self, width, depth):
            super().__init__()
            self.layers = [nn.Linear(width, width) for _ in range(depth)]

        def forward(self, x):
            for layer in self.layers:
                x = torch.relu(layer(x))
            return x

    assert_fails(ex.Tower, PlainList, "finds 0 of the 90 parameters", "plain list of 3 layers", "nn.ModuleList")

    class Repeated(nn.Module):
        def __init__(self, width, depth):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(width, width)] * depth)

        def forward(self, x):
            for layer in self.layers:
                x = torch.relu(layer(x))
            return x

    assert_fails(ex.Tower, Repeated, "the same layer 3 times", "[nn.Linear(width, width)] * depth")

    class NoLastRelu(nn.Module):
        def __init__(self, width, depth):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

        def forward(self, x):
            for layer in self.layers[:-1]:
                x = torch.relu(layer(x))
            return self.layers[-1](x)

    assert_fails(ex.Tower, NoLastRelu, "last layer has no ReLU")

    class OneTooFew(nn.Module):
        def __init__(self, width, depth):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth - 1)])

        def forward(self, x):
            for layer in self.layers:
                x = torch.relu(layer(x))
            return x

    assert_fails(ex.Tower, OneTooFew, "has 2 linear layers", "expected 3 layers")


# -- cross_entropy_from_logits (M5) ------------------------------------------------------------
def test_cross_entropy_alternatives_pass():
    def by_indexing(logits, targets):
        log_probs = logits.log_softmax(dim=-1)
        return -log_probs[torch.arange(len(targets)), targets].mean()

    def by_gather(logits, targets):
        log_probs = logits - torch.logsumexp(logits, dim=1, keepdim=True)
        return -log_probs.gather(1, targets[:, None]).mean()

    def with_nll_module(logits, targets):
        return nn.NLLLoss()(nn.LogSoftmax(dim=1)(logits), targets)

    for answer in (by_indexing, by_gather, with_nll_module):
        assert_passes(ex.cross_entropy_from_logits, answer)


def test_cross_entropy_classic_mistakes():
    assert_fails(ex.cross_entropy_from_logits, lambda logits, t: F.cross_entropy(logits, t), "build yourself")
    assert_fails(ex.cross_entropy_from_logits, lambda logits, t: nn.CrossEntropyLoss()(logits, t), "build yourself")
    assert_fails(
        ex.cross_entropy_from_logits,
        lambda logits, t: F.nll_loss(torch.log_softmax(logits.softmax(dim=1), dim=1), t),
        "You applied softmax, then cross-entropy",
    )
    assert_fails(
        ex.cross_entropy_from_logits, lambda logits, t: F.nll_loss(logits, t), "nll_loss on raw logits",
    )
    assert_fails(
        ex.cross_entropy_from_logits,
        lambda logits, t: F.nll_loss(torch.log(torch.softmax(logits, dim=1)), t),
        "-inf", "torch.log_softmax",
    )
    assert_fails(
        ex.cross_entropy_from_logits,
        lambda logits, t: F.nll_loss(torch.log_softmax(logits, dim=1), t, reduction="sum"),
        "sum over the batch",
    )
    assert_fails(
        ex.cross_entropy_from_logits,
        lambda logits, t: F.nll_loss(torch.log_softmax(logits, dim=0), t),
        "dim=1",
    )
    assert_fails(
        ex.cross_entropy_from_logits,
        lambda logits, t: F.nll_loss(torch.log_softmax(logits, dim=1), t).item(),
        "returned float", "0-d tensor",
    )


# -- decay_groups (M8) -------------------------------------------------------------------------
def test_decay_groups_alternatives_pass():
    def by_dimension(model, weight_decay):
        decay = [p for p in model.parameters() if p.ndim >= 2]
        rest = [p for p in model.parameters() if p.ndim < 2]
        return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]

    def rest_first_as_tuple(model, weight_decay):
        decay_ids = {id(m.weight) for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv1d))}
        rest = [p for p in model.parameters() if id(p) not in decay_ids]
        decay = (p for p in model.parameters() if id(p) in decay_ids)
        return ({"params": rest, "weight_decay": 0}, {"params": decay, "weight_decay": weight_decay})

    assert_passes(ex.decay_groups, by_dimension)
    assert_passes(ex.decay_groups, rest_first_as_tuple)

    groups = ex.decay_groups.reference(nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3)), 0.1)
    torch.optim.AdamW(groups, lr=1e-3)  # what the learner will do with it


def test_decay_groups_classic_mistakes():
    def everything(model, weight_decay):
        return [{"params": list(model.parameters()), "weight_decay": weight_decay}]

    assert_fails(ex.decay_groups, everything, "Every parameter is decayed", "biases")

    def by_name(model, weight_decay):
        named = list(model.named_parameters())
        return [
            {"params": [p for n, p in named if not n.endswith("bias")], "weight_decay": weight_decay},
            {"params": [p for n, p in named if n.endswith("bias")], "weight_decay": 0.0},
        ]

    assert_fails(ex.decay_groups, by_name, "normalisation layers' weights are decayed", "1.weight", "p.ndim >= 2")

    def default_for_rest(model, weight_decay):
        decay = [p for p in model.parameters() if p.ndim >= 2]
        rest = [p for p in model.parameters() if p.ndim < 2]
        return [{"params": decay, "weight_decay": weight_decay}, {"params": rest}]

    assert_fails(ex.decay_groups, default_for_rest, "optimizer's default", "0.0")

    def duplicated(model, weight_decay):
        rest = [p for p in model.parameters() if p.ndim < 2]
        return [{"params": list(model.parameters()), "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]

    assert_fails(ex.decay_groups, duplicated, "in more than one group")

    def forgot_rest(model, weight_decay):
        return [{"params": [p for p in model.parameters() if p.ndim >= 2], "weight_decay": weight_decay}]

    assert_fails(ex.decay_groups, forgot_rest, "in no group", "never update")

    def bare_list(model, weight_decay):
        return [p for p in model.parameters() if p.ndim >= 2]

    assert_fails(ex.decay_groups, bare_list, "not a dict")

    def decays_in_place(model, weight_decay):
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 - weight_decay)
        return ex.decay_groups.reference(model, weight_decay)

    assert_fails(ex.decay_groups, decays_in_place, "changed the model's parameters")


def test_a_function_that_returns_layers_instead_of_a_module_is_told_to_write_a_class():
    def tower_as_list(width, depth):
        return [nn.Linear(width, width) for _ in range(depth)]

    assert_fails(ex.Tower, tower_as_list, "made list, not an nn.Module", "class Tower(nn.Module)")
