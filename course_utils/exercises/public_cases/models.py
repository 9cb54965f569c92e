"""Chapter 03's public cases (see ``course_utils.exercises.public``).

The two module exercises are classes whose layers every right answer initialises in its own way
(Linear layers, raw parameters used as ``x @ W``, lazy layers). Their use builds the learner's
module, sets every registered parameter to numbers that depend only on its shape (a matrix of
shape (a, b) is the transpose of the one of shape (b, a), so ``F.linear(x, W)`` and ``x @ W``
compute the same function) and records the module's parameter count and its output on fixed
batches. The losses record which built-in the code called and the gradient backward() gives the
logits; decay_groups records, for each parameter of the model, the weight decay of the groups
that hold it. Nothing here computes what a right answer gives.
"""

from __future__ import annotations

import numbers

import torch
from course_utils.exercises.torch_calls import TorchCallRecorder
from torch import nn

from course_utils.exercises.public import PublicCase, PublicCases, describe


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _kind(value) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


# ============================================================================================
# SkipBlock, Tower: the learner's class, with parameters set by the check
# ============================================================================================
def _values_for(shape, index: int) -> torch.Tensor:
    """Numbers for a parameter of ``shape``, the ``index``-th of that shape in registration
    order: a 2-D shape (a, b) gets the transpose of what (b, a) gets."""
    shape = tuple(int(n) for n in shape)
    flipped = len(shape) == 2 and shape[0] < shape[1]
    canonical = tuple(reversed(shape)) if flipped else shape
    seed = 7919 * index + sum((31 ** i) * n for i, n in enumerate(canonical)) % 100_003
    scale = 1.0 / max(1, canonical[-1]) ** 0.5 if len(canonical) == 2 else 0.5
    values = torch.randn(canonical, generator=_generator(seed), dtype=torch.float32) * scale
    return values.t() if flipped else values


def _set_parameters(model: nn.Module) -> None:
    seen: dict[tuple, int] = {}
    with torch.no_grad():
        for p in model.parameters():
            shape = tuple(p.shape)
            index = seen.get(shape, 0)
            seen[shape] = index + 1
            p.copy_(_values_for(shape, index).to(p.dtype))


def _is_lazy(model: nn.Module) -> bool:
    return any(isinstance(p, nn.parameter.UninitializedParameter) for p in model.parameters())


def _batches(width: int, seed: int):
    generator = _generator(seed)
    return [
        torch.randn(5, width, generator=generator, dtype=torch.float32),
        torch.randn(2, 3, width, generator=generator, dtype=torch.float32),
        torch.randn(5, width, generator=generator, dtype=torch.float32),  # the first shape, new numbers
    ]


def _module_use(*, count_linear_layers: bool):
    def use(answer, arguments, run, on):
        """Build the module (seeded), count what it registers, set its parameters and record
        forward's output on three batches (the last one of the first one's shape), whether it
        changed x, whether the output is part of a graph, and the gradient x gets through it."""
        torch.set_default_dtype(torch.float32)  # the check restores the learner's default dtype
        size, second = arguments
        torch.manual_seed(0)  # the learner's layers draw their first weights (then replaced)
        model = run(answer, size, second, on=on)
        facts = {"your class made an nn.Module": describe(isinstance(model, nn.Module))}
        if not isinstance(model, nn.Module):
            facts["what your class made"] = describe(_kind(model))
            return facts
        xs = _batches(size, seed=100 + size)
        if _is_lazy(model):  # a lazy layer learns its input size from a first batch
            run(model, xs[0].clone(), on=f"{on} called on a first batch, to set up its lazy layers")
        facts["parameters it registers"] = describe(sum(p.numel() for p in model.parameters()))
        if count_linear_layers:
            distinct = sum(isinstance(m, nn.Linear) for m in model.modules())
            positions = sum(isinstance(m, nn.Linear)
                            for _, m in model.named_modules(remove_duplicate=False))
            facts["distinct nn.Linear layers it holds"] = describe(distinct)
            facts["places that hold an nn.Linear layer"] = describe(positions)
        _set_parameters(model)
        for index, x in enumerate(xs):
            shape = ", ".join(str(n) for n in x.shape)
            again = " (another batch of the first shape)" if index == len(xs) - 1 else ""
            call_on = f"{on} called on a batch of shape ({shape}){again}"
            given = x.clone()
            out = run(model, given, on=call_on)
            facts[f"forward's output on a batch of shape ({shape}){again}"] = describe(out)
            facts[f"forward changed x of shape ({shape}){again}"] = describe(not torch.equal(given, x))
            if index == 0:
                facts["forward's output requires grad"] = describe(
                    isinstance(out, torch.Tensor) and bool(out.requires_grad))
        changed_x = any(facts[key]["value"] for key in facts if key.startswith("forward changed x"))
        x = xs[0].clone().requires_grad_(True)
        grad_on = f"{on} called on a batch of shape (5, {size}) that requires grad, then backward()"
        out = None if changed_x else run(model, x, on=grad_on)  # (in place on x would raise here)
        grad = None
        if isinstance(out, torch.Tensor) and out.requires_grad and out.shape == x.shape:
            upstream = torch.randn(x.shape, generator=_generator(200 + size), dtype=x.dtype)
            run(out.backward, upstream, on=grad_on)
            grad = x.grad
        facts["the gradient backward() gives x through forward"] = describe(grad)
        return facts
    return use


_MODULE_NOTE = "with its parameters set by the check from their shapes"

SkipBlock = PublicCases(
    cases=[
        PublicCase(f"SkipBlock(4, 9), {_MODULE_NOTE}", lambda: (4, 9)),
        PublicCase(f"SkipBlock(7, 3), {_MODULE_NOTE}", lambda: (7, 3)),
    ],
    use=_module_use(count_linear_layers=False),
    rtol=1e-4,
    atol=1e-5,
)

Tower = PublicCases(
    cases=[
        PublicCase(f"Tower(width=6, depth=3), {_MODULE_NOTE}", lambda: (6, 3)),
        PublicCase(f"Tower(width=4, depth=2), {_MODULE_NOTE}", lambda: (4, 2)),
    ],
    use=_module_use(count_linear_layers=True),
    rtol=1e-4,
    atol=1e-5,
)


# ============================================================================================
# The two losses
# ============================================================================================


def _as_the_logits_dtype(loss, logits):
    """A float64 loss from float32 logits is only more precise (the practice check accepts it):
    compared in the logits' dtype."""
    if (isinstance(loss, torch.Tensor) and logits.dtype == torch.float32
            and loss.dtype == torch.float64):
        return loss.to(torch.float32)
    return loss


def _loss_use(*, built_in: frozenset = frozenset()):
    def use(answer, arguments, run, on):
        """The loss (in the logits' dtype), which built-in the code called where the task asks
        for its own, whether the inputs changed, and the gradient backward() from the loss
        gives logits that require grad."""
        logits, targets = arguments
        logits_before, targets_before = logits.detach().clone(), targets.clone()
        recorder = TorchCallRecorder()
        with recorder:
            loss = run(answer, logits, targets, on=on)
        facts = {}
        if built_in:
            facts["your function calls torch's own cross-entropy (nn.CrossEntropyLoss or its functional form)"] = describe(
                bool(built_in & recorder.names))
        facts["returned"] = describe(_as_the_logits_dtype(loss, logits))
        facts["your function changed logits"] = describe(not (
            logits.shape == logits_before.shape and torch.equal(logits.detach(), logits_before)))
        facts["your function changed targets"] = describe(not (
            targets.shape == targets_before.shape and torch.equal(targets, targets_before)))
        if logits.requires_grad:
            grad = None
            if isinstance(loss, torch.Tensor) and loss.requires_grad and loss.numel() == 1:
                run(loss.backward, on=f"backward() from your loss ({on})")
                grad = logits.grad
            facts["logits.grad after backward() from your loss"] = describe(grad)
        return facts
    return use


def _class_batch(seed, n, c, *, scale, dtype, transposed=False, requires_grad=False):
    def make():
        generator = _generator(seed)
        shape = (c, n) if transposed else (n, c)
        logits = torch.randn(shape, generator=generator, dtype=dtype) * scale
        if transposed:
            logits = logits.t()  # stored class by class: non-contiguous
        targets = torch.randint(0, c, (n,), generator=generator)
        return logits.requires_grad_(requires_grad), targets
    return make


cross_entropy_from_logits = PublicCases(
    cases=[
        PublicCase("7 examples, 3 classes, float32 logits with requires_grad=True",
                   _class_batch(61, 7, 3, scale=2.0, dtype=torch.float32, requires_grad=True)),
        PublicCase("4 examples, 6 classes, float64 logits up to about ±800, stored transposed "
                   "(non-contiguous)",
                   _class_batch(62, 4, 6, scale=300.0, dtype=torch.float64, transposed=True)),
    ],
    use=_loss_use(built_in=frozenset({"cross_entropy", "cross_entropy_loss"})),
    requires_grad=True,  # the loss is what loss.backward() starts from
    rtol=1e-5,
    atol=1e-6,
)


def _label_batch_float32():
    generator = _generator(71)
    logits = torch.randn(5, 3, generator=generator, dtype=torch.float32) * 2
    logits[1, 0], logits[3, 2] = 100.0, -100.0  # exp() of them overflows float32
    targets = torch.randint(0, 2, (5, 3), generator=generator)  # int64, as the task allows
    return logits.requires_grad_(True), targets


def _label_batch_float64():
    generator = _generator(72)
    # (C, N) in memory, with logits large enough that sigmoid rounds to exactly 0 or 1
    logits = torch.randn(5, 3, generator=generator, dtype=torch.float64) * 2
    logits[0, 0], logits[2, 1], logits[4, 2], logits[1, 2] = 45.0, -60.0, 90.0, -38.0
    targets = torch.tensor([[0, 1, 1], [1, 0, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1]]).bool()
    return logits.t(), targets.t()


multilabel_loss = PublicCases(
    cases=[
        PublicCase("5 examples, 3 labels, float32 logits up to ±100 with requires_grad=True, "
                   "int64 targets",
                   _label_batch_float32),
        PublicCase("3 examples, 5 labels, float64 logits up to ±90 (sigmoid rounds them to "
                   "exactly 0 or 1), bool targets, both stored transposed (non-contiguous)",
                   _label_batch_float64),
    ],
    use=_loss_use(),
    requires_grad=True,  # the loss is what loss.backward() starts from
)


# ============================================================================================
# decay_groups
# ============================================================================================
class _Encoder(nn.Module):
    """A Conv1d, GroupNorm, Linear layers (one without bias, one named norm_proj), a LayerNorm."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 4, kernel_size=3)
        self.norm = nn.GroupNorm(2, 4)
        self.norm_proj = nn.Linear(8, 6)  # a Linear layer whose name says "norm"
        self.ln = nn.LayerNorm(6)
        self.out = nn.Linear(6, 2, bias=False)


class _Head(nn.Module):
    """Conv2d, BatchNorm1d, a Linear used twice, a block nested in a block, a parameter of
    the model itself."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(2, 3, kernel_size=2, bias=False)
        self.shared = nn.Linear(5, 5)
        self.body = nn.Sequential(
            self.shared, nn.BatchNorm1d(5), nn.ReLU(), self.shared,
            nn.Sequential(nn.Linear(5, 3), nn.LayerNorm(3)),
        )
        self.out_bias = nn.Parameter(torch.zeros(3))


def _model_case(make, seed, weight_decay):
    def build():
        model = make().to(torch.float32)
        generator = _generator(seed)
        with torch.no_grad():  # numbers of its own, whatever the global random state
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float32))
        return model, weight_decay
    return build


def _decay_value(group: dict):
    if "weight_decay" not in group:
        return "no weight_decay key (the optimizer's default)"
    value = group["weight_decay"]
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return f"a {_kind(value)}"


def _where_parameters_went(answer, arguments, run, on):
    """For each parameter of the model, the weight decay of every group that holds it (in no
    group: an empty list; twice: two entries); whatever the groups hold that is no parameter
    of this model; and whether the call changed the parameters' values or requires_grad."""
    model, weight_decay = arguments
    names = {id(p): name for name, p in model.named_parameters()}
    values = {name: p.detach().clone() for name, p in model.named_parameters()}
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    groups = run(answer, model, weight_decay, on=on)
    facts = {"your function returned": describe(
        "a list or tuple of groups" if isinstance(groups, (list, tuple)) else _kind(groups))}
    if not isinstance(groups, (list, tuple)):
        return facts
    facts["groups that are not dicts"] = describe(
        [_kind(group) for group in groups if not isinstance(group, dict)])
    groups = [group for group in groups if isinstance(group, dict)]
    facts["number of groups"] = describe(len(groups))
    placed = {name: [] for name in names.values()}
    strangers, in_sets = [], 0
    for group in groups:
        params = group.get("params", [])
        if isinstance(params, (set, frozenset)):
            in_sets += 1
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        decay = _decay_value(group)
        for p in params:
            if isinstance(p, torch.Tensor) and id(p) in names:
                placed[names[id(p)]].append(decay)
            else:
                strangers.append("a tensor that is not a parameter of this model"
                                 if isinstance(p, torch.Tensor) else f"a {_kind(p)}")
    facts["things in 'params' that are not parameters of this model"] = describe(sorted(strangers))
    facts["the weight_decay of the groups that hold each parameter"] = describe(
        {name: sorted(decays, key=repr) for name, decays in sorted(placed.items())})
    facts["groups whose 'params' is a set"] = describe(in_sets)
    facts["parameters whose values your function changed"] = describe(sorted(
        name for name, p in model.named_parameters() if not torch.equal(p.detach(), values[name])))
    facts["parameters whose requires_grad your function changed"] = describe(sorted(
        name for name, p in model.named_parameters() if p.requires_grad != flags[name]))
    return facts


decay_groups = PublicCases(
    cases=[
        PublicCase("an encoder with Conv1d, GroupNorm, LayerNorm and a bias-free Linear, "
                   "weight_decay=0.03", _model_case(_Encoder, 81, 0.03)),
        PublicCase("a head with a bias-free Conv2d, BatchNorm1d, a Linear used twice, a nested "
                   "block and a parameter of its own, weight_decay=0.2", _model_case(_Head, 82, 0.2)),
    ],
    use=_where_parameters_went,
)
