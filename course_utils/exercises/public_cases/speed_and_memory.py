"""Chapter 05's public cases (see ``course_utils.exercises.public``).

Inputs only: small models, optimizers, micro-batches and fake loaders built from seeds other
than the practice probes' ones (no global random stream is used or left moved); the facts a
right answer gives on them come from the reference, at release time. Each exercise's answer is
called once per case, on exactly the case's inputs. Where the task asks for more than what
comes out (a backward pass per micro-batch, one optimizer step, a float16 forward pass, a loop
that draws each batch once), the ``use`` records how the learner's code behaved; the timing
exercise records its two times in units of the times the fake loader and step measured of
themselves, to the nearest half, so that the facts are the same on a fast and a busy machine.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.public import PublicCase, PublicCases, describe


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _seeded(module: nn.Module, seed: int, scale: float = 0.5) -> nn.Module:
    """``module`` with every parameter drawn from its own seed, whatever the global stream."""
    generator = _generator(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            values = torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * scale
            parameter.copy_(values.to(parameter.dtype))
    return module


def _built(make, seed: int, scale: float = 0.5) -> nn.Module:
    """A module made by ``make()``, its initialisation drawn without moving the global stream."""
    with torch.random.fork_rng(devices=[]):
        module = make()
    return _seeded(module, seed, scale)


def _flat(tensors) -> torch.Tensor:
    return torch.cat([torch.Tensor.detach(t).reshape(-1).to(torch.float64) for t in tensors])


def _a_number(value):
    """One real number as a Python float, as the practice checks accept it (an int, a float,
    a NumPy number or array of one value, a tensor of one value); anything else as it is."""
    if isinstance(value, (bool, np.bool_)):
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.device.type != "meta" \
            and not value.is_complex() and value.dtype != torch.bool:
        return float(torch.Tensor.detach(value).reshape(-1)[0].cpu().item())
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iuf":
        return float(value.reshape(-1)[0])
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    return value


# ============================================================================================
# training_memory_bytes
# ============================================================================================
def _memory_inputs(make, seed, optimizer_name, dtype=torch.float32, frozen_first=False):
    def arguments():
        model = _built(make, seed).to(dtype)
        if frozen_first:
            model[0].requires_grad_(False)
        return model, optimizer_name
    return arguments


# Adam also keeps a 4-byte step counter per parameter tensor, which the practice check accepts
# counted or not: the Adam case is compared within that many bytes.
_WITH_ADAM = "your_result_(Adam's 4-byte step counters may count or not)"
_ADAM_TRAINABLE_TENSORS = 4  # the frozen-first model below: two trainable Linear layers


def _bytes_counted(answer, arguments, run, on):
    """The count as a number (an int, a float, a NumPy integer or a 0-d tensor alike), and the
    model afterwards: counting must leave it as it was."""
    model, optimizer_name = arguments
    returned = _a_number(run(answer, model, optimizer_name, on=on))
    key = _WITH_ADAM if optimizer_name == "adam" else "returned"
    return {key: describe(returned), "the_model_after_the_call": describe(model)}


training_memory_bytes = PublicCases(
    use=_bytes_counted,
    rtol=0, atol=0,
    loose={_WITH_ADAM: (0.0, 4 * _ADAM_TRAINABLE_TENSORS + 0.5)},
    cases=[
        PublicCase("a float32 Sequential(Linear(7, 9), ReLU, Linear(9, 4)), optimizer_name='momentum'",
                   _memory_inputs(lambda: nn.Sequential(nn.Linear(7, 9), nn.ReLU(), nn.Linear(9, 4)),
                                  301, "momentum")),
        PublicCase("a float32 Sequential(Linear(5, 6), ReLU, Linear(6, 3), ReLU, Linear(3, 2)) whose "
                   "first layer is frozen (requires_grad=False), optimizer_name='adam'",
                   _memory_inputs(lambda: nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3),
                                                        nn.ReLU(), nn.Linear(3, 2)),
                                  302, "adam", frozen_first=True)),
        PublicCase("a bfloat16 Sequential(Linear(8, 5), Tanh, Linear(5, 5)), optimizer_name='sgd'",
                   _memory_inputs(lambda: nn.Sequential(nn.Linear(8, 5), nn.Tanh(), nn.Linear(5, 5)),
                                  303, "sgd", dtype=torch.bfloat16)),
    ],
)


# ============================================================================================
# accumulation_step
# ============================================================================================
def _accumulation_inputs(seed, k, micro, sizes, loss_fn, lr, momentum, stale):
    n_in, n_hidden, n_out = sizes

    def arguments():
        model = _built(lambda: nn.Sequential(nn.Linear(n_in, n_hidden), nn.Tanh(),
                                             nn.Linear(n_hidden, n_out)), seed)
        for parameter in model.parameters():  # a previous step's gradient, left in .grad
            parameter.grad = torch.full_like(parameter, stale)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
        generator = _generator(seed + 1)
        xs = [torch.randn(micro, n_in, generator=generator) for _ in range(k)]
        if loss_fn is F.cross_entropy:
            ys = [torch.randint(0, n_out, (micro,), generator=generator) for _ in range(k)]
        else:
            ys = [3 * torch.randn(micro, n_out, generator=generator) for _ in range(k)]
        return model, optimizer, loss_fn, list(zip(xs, ys))
    return arguments


_BACKWARD_PASSES = "backward_passes_that_reached_the_first_weight"


def _one_accumulation_step(answer, arguments, run, on):
    """The model after the call, the optimizer's momentum buffers and learning rate, the
    micro-batches as the caller has them afterwards, and how many backward passes ran (one per
    micro-batch keeps one graph in memory at a time)."""
    model, optimizer, loss_fn, batches = arguments
    parameters = list(model.parameters())
    passes = []
    handle = parameters[0].register_hook(lambda grad: passes.append(1))
    try:
        run(answer, model, optimizer, loss_fn, batches, on=on)
    finally:
        handle.remove()
    buffers = [optimizer.state.get(p, {}).get("momentum_buffer") for p in parameters]
    return {
        "the_model_after_the_step": describe(model),
        "the_optimizer's_momentum_buffers": describe(buffers),
        "the_optimizer's_learning_rate_after_the_step": describe(
            _a_number(optimizer.param_groups[0]["lr"])),
        _BACKWARD_PASSES: describe(len(passes)),
        "the_micro-batches_after_the_step": describe(batches),
    }


accumulation_step = PublicCases(
    use=_one_accumulation_step,
    rtol=1e-4, atol=1e-6,
    cases=[
        PublicCase("3 micro-batches of 2 examples, F.cross_entropy, a Sequential(Linear(5, 6), "
                   "Tanh, Linear(6, 4)), SGD(lr=0.2, momentum=0.9), .grad holding 0.3 from an "
                   "earlier step",
                   _accumulation_inputs(311, 3, 2, (5, 6, 4), F.cross_entropy, 0.2, 0.9, 0.3)),
        PublicCase("4 micro-batches of 3 examples, F.mse_loss, a Sequential(Linear(3, 4), Tanh, "
                   "Linear(4, 2)), plain SGD(lr=0.1), .grad holding -0.2 from an earlier step",
                   _accumulation_inputs(312, 4, 3, (3, 4, 2), F.mse_loss, 0.1, 0.0, -0.2)),
    ],
)


# ============================================================================================
# split_step_time
# ============================================================================================
class _SlowLoader:
    """Batches that take known times to arrive, each wait measured by the loader itself."""

    def __init__(self, delays):
        self.delays = delays
        self.waited = 0.0
        self.fetched = 0

    def __len__(self):
        return len(self.delays)

    def __iter__(self):
        return self._batches()

    def _batches(self):
        for index, delay in enumerate(self.delays):
            start = time.perf_counter()
            time.sleep(delay)
            self.waited += time.perf_counter() - start
            self.fetched += 1
            yield torch.full((2, 3), float(index))

    def __repr__(self):
        waits = ", ".join(f"{1000 * delay:g}" for delay in self.delays)
        return f"a loader of {len(self.delays)} batches that arrive after {waits} ms"


class _SlowStep:
    """A step_fn that takes a known time, measured by itself, and notes what it was given."""

    def __init__(self, seconds, loader):
        self.seconds = seconds
        self.loader = loader
        self.spent = 0.0
        self.seen = []
        self.fetched_before = []

    def __call__(self, batch):
        start = time.perf_counter()
        self.fetched_before.append(self.loader.fetched)
        self.seen.append(
            float(batch[0, 0]) if isinstance(batch, torch.Tensor) and batch.shape == (2, 3) else None)
        time.sleep(self.seconds)
        self.spent += time.perf_counter() - start

    def __repr__(self):
        return f"a step_fn that takes {1000 * self.seconds:g} ms"


def _timing_inputs(delays, step_seconds):
    def arguments():
        loader = _SlowLoader(delays)
        return loader, _SlowStep(step_seconds, loader)
    return arguments


def _two_numbers(value):
    if isinstance(value, (np.ndarray, torch.Tensor)) and tuple(value.shape) == (2,):
        value = list(value)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        numbers = [_a_number(item) for item in value]
        if all(type(n) is float and math.isfinite(n) for n in numbers):
            return numbers
    return None


def _to_the_nearest_half(seconds, measured):
    return None if measured <= 0 else round(2 * seconds / measured) / 2


_DATA = "your_data_seconds_in_units_of_the_loader's_own_waits_(to_the_nearest_half)"
_COMPUTE = "your_compute_seconds_in_units_of_the_time_inside_step_fn_(to_the_nearest_half)"


def _timed(answer, arguments, run, on):
    """Whether it returned two numbers; how it drew the batches and called step_fn; and its two
    times as multiples of what the loader and step_fn measured of themselves (1.0 when each
    moment is counted in its place, whatever the machine's speed)."""
    loader, step = arguments
    returned = run(answer, loader, step, on=on)
    pair = _two_numbers(returned)
    facts = {
        "returned": describe("two numbers" if pair else returned),
        "batches_drawn_from_the_loader": describe(loader.fetched),
        "the_batch_each_step_fn_call_was_given": describe(step.seen),
        "batches_drawn_before_each_step_fn_call": describe(step.fetched_before),
    }
    if pair:
        facts[_DATA] = describe(_to_the_nearest_half(pair[0], loader.waited))
        facts[_COMPUTE] = describe(_to_the_nearest_half(pair[1], step.spent))
    return facts


# The sleeps are chosen so that each classic slip lands at least a quarter away from 1.0 (the
# first wait missed: 0.6; the steps counted as data: 1.4; swapped: 0.53 and 1.9; averages:
# 0.25), while a right answer stays within a quarter of 1.0 unless the machine stalls for tens
# of milliseconds inside the loop.
split_step_time = PublicCases(
    use=_timed,
    cases=[
        PublicCase("a loader of 4 batches (60 ms for the first, 30 ms for each other) and a 20 ms "
                   "step", _timing_inputs([0.06, 0.03, 0.03, 0.03], 0.02)),
    ],
)


# ============================================================================================
# scaled_clipped_step
# ============================================================================================
class _Scaler(torch.amp.GradScaler):
    """A GradScaler whose repr says how it was made (an address would differ on every run)."""

    def __repr__(self):
        return f"torch.amp.GradScaler('cpu', init_scale={self._init_scale:g})"


def _scaled_inputs(seed, momentum, max_norm, overflow):
    def arguments():
        model = _built(lambda: nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)), seed)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)
        scaler = _Scaler("cpu", init_scale=256.0)
        generator = _generator(seed + 1)
        x = torch.randn(6, 5, generator=generator)
        y = 4 * torch.randn(6, 3, generator=generator)
        if overflow:  # targets this far make the float16 gradients overflow to inf
            y = y * 1e4
        return model, optimizer, scaler, F.mse_loss, (x, y), max_norm
    return arguments


_MOVED = "how_far_the_weights_moved_(before_minus_after)"


def _scaled_step(answer, arguments, run, on):
    """How far the weights moved, how many optimizer steps ran, the dtype the first layer
    computed in, whether loss_fn ran under autocast, the scale afterwards, and the batch as the
    caller has it afterwards."""
    model, optimizer, scaler, given_loss_fn, batch, max_norm = arguments
    parameters = list(model.parameters())
    before = _flat(parameters)
    steps, dtypes, autocast = [], [], []

    def loss_fn(input, target, *args, **kwargs):
        device = getattr(input, "device", torch.device("cpu")).type
        autocast.append(bool(torch.is_autocast_enabled(device)))
        return given_loss_fn(input, target, *args, **kwargs)

    loss_fn.__qualname__ = given_loss_fn.__qualname__  # known by the given loss's name

    step_hook = optimizer.register_step_post_hook(lambda *args: steps.append(1))
    forward_hook = model[0].register_forward_hook(
        lambda module, inputs, output: dtypes.append(str(output.dtype)))
    try:
        run(answer, model, optimizer, scaler, loss_fn, batch, max_norm, on=on)
    finally:
        step_hook.remove()
        forward_hook.remove()
    return {
        "the_dtype_the_first_layer_computed_in": describe(sorted(set(dtypes))),
        "whether_loss_fn_ran_under_autocast": describe(sorted(set(autocast))),
        "optimizer_steps_taken": describe(len(steps)),
        _MOVED: describe(before - _flat(parameters)),
        "the_scaler's_scale_after_the_step": describe(float(scaler.get_scale())),
        "the_batch_after_the_step": describe(batch),
    }


# float16 matrix products may round differently on another CPU: the weight change is compared
# to within 1 %, far closer than any wrong order of the steps comes.
scaled_clipped_step = PublicCases(
    use=_scaled_step,
    loose={_MOVED: (1e-2, 1e-4)},
    cases=[
        PublicCase("SGD(lr=0.1, momentum=0.9), F.mse_loss, max_norm=0.4 (the gradients' norm is "
                   "far above it), a GradScaler with init_scale=256",
                   _scaled_inputs(321, 0.9, 0.4, overflow=False)),
        PublicCase("plain SGD(lr=0.1), F.mse_loss, max_norm=1.0, a batch whose targets are 10000 "
                   "times larger (its float16 gradients overflow to inf), a GradScaler with "
                   "init_scale=256", _scaled_inputs(322, 0.0, 1.0, overflow=True)),
    ],
)
