"""Chapter 05 — Speed and memory: the fixed memory of training, gradient accumulation, and
finding out whether the data loader is what you wait for.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it. Probes build their own small, seeded models on the CPU and record plain data
only. The timing exercise is checked against what its fake loader measured of its own waits,
with wide margins: a busy machine makes every sleep a little longer, never a wrong answer right.
"""

from __future__ import annotations

import copy
import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.facts import same_values, values_problem

CHAPTER = "speed_and_memory"


def _kind(value) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _number(value):
    """A returned count as a float, or None when it is not a single real number."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_complex():
            return None
        value = torch.Tensor.detach(value).reshape(-1)[0].item()
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


# ============================================================================================
# P4 — the fixed memory of training: parameters, gradients, optimizer state
# ============================================================================================
def training_memory_bytes(model, optimizer_name):
    states_per_parameter = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer_name]
    total = 0
    for p in model.parameters():
        size = p.numel() * p.element_size()  # bytes, not elements
        total += size  # the parameter itself
        if p.requires_grad:  # frozen parameters get no gradient and no optimizer state
            total += size  # its gradient, same shape and dtype
            total += states_per_parameter * size  # momentum buffer, or Adam's two moments
    return total


_STATES = {"sgd": 0, "momentum": 1, "adam": 2}


def _mlp(dtype=torch.float32, frozen_first=False):
    model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5)).to(dtype)
    if frozen_first:
        model[0].requires_grad_(False)
    return model


_MEMORY_CASES = [
    ("a float32 MLP (785 parameters) with plain SGD", "sgd", {}),
    ("the same MLP with SGD and momentum", "momentum", {}),
    ("the same MLP with Adam", "adam", {}),
    ("an MLP whose first layer is frozen (requires_grad=False), with Adam", "adam", {"frozen_first": True}),
    ("a bfloat16 MLP with SGD and momentum", "momentum", {"dtype": torch.bfloat16}),
]


def _probe_training_memory_bytes(answer, run):
    cases = []
    for on, name, options in _MEMORY_CASES:
        torch.manual_seed(0)
        model = _mlp(**options)
        params = list(model.parameters())
        trainable = [p for p in params if p.requires_grad]
        got = run(answer, model, name, on=f"{on}, optimizer_name={name!r}")
        cases.append({
            "on": on,
            "optimizer": name,
            "got": _number(got),
            "got_kind": _kind(got),
            "param_bytes": sum(p.numel() * p.element_size() for p in params),
            "trainable_bytes": sum(p.numel() * p.element_size() for p in trainable),
            "param_elements": sum(p.numel() for p in params),
            "trainable_elements": sum(p.numel() for p in trainable),
            "trainable_tensors": len(trainable),
            "element_size": params[0].element_size(),
        })
    return cases


def _judge_training_memory_bytes(cases):
    for case in cases:
        on, name, got = case["on"], case["optimizer"], case["got"]
        if got is None:
            return (
                f"training_memory_bytes returned {case['got_kind']} (on {on}); return the number "
                "of bytes as an int, e.g. `return total`."
            )
        s = _STATES[name]
        params, trainable = case["param_bytes"], case["trainable_bytes"]
        expected = params + trainable * (1 + s)
        accepted = [expected]
        if name == "adam":  # Adam also keeps a 4-byte step counter per parameter tensor
            accepted.append(expected + 4 * case["trainable_tensors"])
        if any(abs(got - a) < 0.5 for a in accepted):
            continue
        where = f" (on {on}: expected {expected:,} bytes, got {got:,.0f})"
        size = case["element_size"]
        named = [
            (case["param_elements"] + case["trainable_elements"] * (1 + s),
             "You counted elements, not bytes: multiply each tensor's numel() by its "
             "element_size() (4 bytes for float32, 2 for bfloat16)."),
            (expected * 4 / size if size != 4 else None,
             "This model is bfloat16, 2 bytes per element, but you counted 4: use "
             "p.element_size() rather than a fixed 4."),
            (params * (2 + s) if trainable != params else None,
             "You counted a gradient and optimizer state for the frozen parameters too: a "
             "parameter with requires_grad=False gets no gradient, and the optimizer keeps no "
             "state for it."),
            (params + trainable * 2 if name == "adam" else None,
             "You counted one state tensor for Adam; it keeps two per parameter, exp_avg and "
             "exp_avg_sq (the running mean of gradients and of their squares)."),
            (params + trainable if s > 0 else None,
             "The optimizer state is missing: SGD with momentum keeps one buffer per parameter, "
             "Adam keeps two."),
            (params + trainable * 3 if name == "momentum" else None,
             "SGD with momentum keeps one buffer per parameter, not two (two is Adam)."),
            (params + trainable * 2 if name == "sgd" else None,
             "Plain SGD (no momentum) keeps no state at all: parameters plus gradients."),
            (params + trainable * s,
             "The gradients are missing: after backward() every trainable parameter has a "
             ".grad of its own size."),
            (params, "You counted the parameters only; training also holds their gradients and "
             "the optimizer's state."),
        ]
        for value, message in named:
            if value is not None and abs(got - value) < 0.5:
                return message + where
        return (
            "Not the right count" + where + ". Add, for each parameter p: its bytes "
            "(p.numel() * p.element_size()); if p.requires_grad, as much again for the "
            "gradient and that many times 0 (SGD), 1 (momentum) or 2 (Adam) for the state."
        )
    return None


training_memory_bytes = Exercise(
    "training_memory_bytes",
    chapter=CHAPTER,
    title="The fixed memory of training",
    expects=Function("training_memory_bytes", ("model", "optimizer_name")),
    probe=_probe_training_memory_bytes,
    judge=_judge_training_memory_bytes,
    reference=training_memory_bytes,
    passed_message=(
        "Correct: parameters once, and for each trainable one a gradient and 0, 1 or 2 state "
        "tensors of the same size. None of it depends on the batch size."
    ),
    hints=[
        "Loop over model.parameters(). A tensor's bytes are p.numel() * p.element_size().",
        "Every parameter counts once. A parameter with requires_grad=True adds a gradient of the "
        "same size, and the optimizer's state: 0 tensors for 'sgd', 1 for 'momentum', 2 for 'adam'.",
        "states = {'sgd': 0, 'momentum': 1, 'adam': 2}[optimizer_name]; for each p: "
        "size = p.numel() * p.element_size(); total += size; if p.requires_grad: "
        "total += size * (1 + states).",
    ],
    error_notes=[
        ("KeyError", "optimizer_name is one of 'sgd', 'momentum', 'adam' (lower case)."),
    ],
)


# ============================================================================================
# P5 — gradient accumulation that matches one big batch
# ============================================================================================
def accumulation_step(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()  # once, before the first micro-batch
    k = len(batches)
    for x, y in batches:
        loss = loss_fn(model(x), y) / k  # each micro-batch is 1/k of the big batch's mean
        loss.backward()  # adds into .grad; this micro-batch's graph is freed here
    optimizer.step()  # once, after all k micro-batches


_LR = 0.1
_STALE = 0.5  # what .grad holds before the call: a previous step's gradient, left there


def _accumulation_case(seed, k, micro, sizes, loss_name):
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    n_in, n_hidden, n_out = sizes
    model = nn.Sequential(nn.Linear(n_in, n_hidden), nn.Tanh(), nn.Linear(n_hidden, n_out))
    xs = [torch.randn(micro, n_in, generator=generator) for _ in range(k)]
    if loss_name == "cross_entropy":
        ys = [torch.randint(0, n_out, (micro,), generator=generator) for _ in range(k)]
        loss_fn = F.cross_entropy
    else:
        ys = [torch.randn(micro, n_out, generator=generator) for _ in range(k)]
        loss_fn = F.mse_loss
    return model, list(zip(xs, ys)), loss_fn


def _flat(tensors) -> np.ndarray:
    return torch.cat([t.detach().reshape(-1) for t in tensors]).numpy().copy()


def _grads_of(model, loss_fn, batches, divide=True):
    """The gradient accumulated over ``batches`` by a fresh copy, as one flat array."""
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    for x, y in batches:
        loss = loss_fn(model(x), y)
        (loss / len(batches) if divide else loss).backward()
    return _flat(p.grad for p in model.parameters())


def _step_every_batch(model, loss_fn, batches):
    model = copy.deepcopy(model)
    before = _flat(model.parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=_LR)
    for x, y in batches:
        optimizer.zero_grad()
        (loss_fn(model(x), y) / len(batches)).backward()
        optimizer.step()
    return (before - _flat(model.parameters())) / _LR


_ACCUMULATION_CASES = [
    (0, 4, 5, (6, 10, 4), "cross_entropy"),
    (1, 3, 4, (3, 5, 2), "mse_loss"),
]


def _probe_accumulation_step(answer, run):
    cases = []
    for seed, k, micro, sizes, loss_name in _ACCUMULATION_CASES:
        model, batches, loss_fn = _accumulation_case(seed, k, micro, sizes, loss_name)
        reference_model = copy.deepcopy(model)
        big_x = torch.cat([x for x, _ in batches])
        big_y = torch.cat([y for _, y in batches])
        big = copy.deepcopy(model)
        loss_fn(big(big_x), big_y).backward()
        case = {
            "on": f"{k} micro-batches of {micro} examples, loss {loss_name}",
            "k": k,
            "big_batch": _flat(p.grad for p in big.parameters()),
            "summed": _grads_of(reference_model, loss_fn, batches, divide=False),
            "last_only": _grads_of(reference_model, loss_fn, batches[-1:], divide=False) / k,
            "last_only_undivided": _grads_of(reference_model, loss_fn, batches[-1:], divide=False),
            "step_every_batch": _step_every_batch(reference_model, loss_fn, batches),
        }
        for p in model.parameters():
            p.grad = torch.full_like(p, _STALE)
        optimizer = torch.optim.SGD(model.parameters(), lr=_LR)
        steps, backwards = [], []
        optimizer.register_step_post_hook(lambda *args: steps.append(1))
        first = next(model.parameters())
        first.register_hook(lambda grad: backwards.append(1))
        before = _flat(model.parameters())
        learner_batches = [(x.clone(), y.clone()) for x, y in batches]
        run(answer, model, optimizer, loss_fn, learner_batches, on=case["on"])
        case["steps"] = len(steps)
        case["backwards"] = len(backwards)
        case["update"] = (before - _flat(model.parameters())) / _LR
        cases.append(case)
    return cases


_TOL = {"rtol": 1e-4, "atol": 1e-6}


def _judge_accumulation_step(cases):
    for case in cases:
        on, k, update, big = case["on"], case["k"], case["update"], case["big_batch"]
        if case["steps"] == 0 and not same_values(update, np.zeros_like(update)):
            return (
                f"The weights moved, but not through the optimizer you were given (on {on}): "
                "call optimizer.step() on the `optimizer` argument rather than making a new one."
            )
        if case["steps"] == 0:
            return (
                f"optimizer.step() never ran (on {on}), so the weights did not move. Call it once, "
                "after the loop over the micro-batches."
            )
        if case["steps"] > 1:
            return (
                f"optimizer.step() ran {case['steps']} times for {k} micro-batches (on {on}): "
                "stepping every micro-batch is ordinary small-batch training, not accumulation. "
                f"Step once, after all {k} backward() calls."
            )
        if same_values(update, big, **_TOL):
            if case["backwards"] == 1 and k > 1:
                return (
                    f"The gradients are right, but backward() ran once for {k} micro-batches "
                    f"(on {on}): adding the losses and calling backward() on the sum keeps all "
                    f"{k} graphs in memory until then, which is the memory accumulation is meant "
                    "to save. Call backward() on each micro-batch's loss inside the loop."
                )
            continue
        named = [
            (big + _STALE, "Gradients left over from before the call were added in: .grad "
             "already held an old gradient. Call optimizer.zero_grad() once, before the first "
             "micro-batch."),
            (case["summed"], f"Your update is {k} times too large ({k} micro-batches): each "
             "loss is a mean over its micro-batch, so summing k of them gives k times the big "
             f"batch's gradient. Divide each micro-batch's loss by {k} (len(batches)) before "
             "backward()."),
            (case["summed"] + _STALE, f"Two mistakes: the update is {k} times too large (divide "
             "each loss by len(batches)) and old gradients were added in (zero_grad() first)."),
            (case["last_only"], "Only the last micro-batch's gradient reached the step: "
             "zero_grad() inside the loop wipes what the earlier micro-batches accumulated. "
             "Zero once, before the loop."),
            (case["last_only_undivided"], "Only the last micro-batch's gradient reached the "
             "step (zero_grad() inside the loop), and it was not divided by the number of "
             "micro-batches. Zero once before the loop; divide each loss by len(batches)."),
            (big / k, f"Your update is {k} times too small: divide each micro-batch's loss by "
             f"the number of micro-batches ({k}) once, not twice."),
        ]
        for expected, message in named:
            if same_values(update, expected, **_TOL):
                return f"{message} (on {on})"
        return values_problem(
            update, big, what="the step's gradient (weight change / lr)", on=on, rtol=1e-4, atol=1e-6
        ) + " It should equal the gradient of one big batch made of all the micro-batches."
    return None


accumulation_step = Exercise(
    "accumulation_step",
    chapter=CHAPTER,
    title="Gradient accumulation",
    expects=Function("accumulation_step", ("model", "optimizer", "loss_fn", "batches")),
    probe=_probe_accumulation_step,
    judge=_judge_accumulation_step,
    reference=accumulation_step,
    passed_message=(
        "Correct: one step whose gradient equals the big batch's, while only one micro-batch's "
        "activations were in memory at a time."
    ),
    hints=[
        "Three parts: clear the old gradients, run forward and backward on each micro-batch "
        "(backward adds into .grad), then step once.",
        "loss_fn returns a mean over its micro-batch; the big batch's loss is the mean of k such "
        "means, so divide each loss by k = len(batches) before backward().",
        "optimizer.zero_grad(); for x, y in batches: (loss_fn(model(x), y) / len(batches))"
        ".backward(); then optimizer.step().",
    ],
    error_notes=[
        ("Trying to backward through the graph a second time",
         "backward() on a loss whose graph was already used: call it once per micro-batch, on "
         "that micro-batch's loss."),
        ("too many values to unpack", "batches is a list of (x, y) pairs: `for x, y in batches:`."),
    ],
)


# ============================================================================================
# P7 — is the loader the bottleneck?
# ============================================================================================
def split_step_time(loader, step_fn):
    data_seconds = compute_seconds = 0.0
    start = time.perf_counter()  # the clock runs before the first batch: it is often the slowest
    for batch in loader:
        fetched = time.perf_counter()
        data_seconds += fetched - start  # waiting for the loader
        step_fn(batch)
        start = time.perf_counter()
        compute_seconds += start - fetched  # the step itself
    return data_seconds, compute_seconds


class _FakeLoader:
    """Batches that take known times to arrive, each wait measured by the loader itself."""

    def __init__(self, delays):
        self.delays = delays
        self.waited = 0.0
        self.fetched = 0
        self.first = 0.0

    def __len__(self):
        return len(self.delays)

    def __iter__(self):
        for index, delay in enumerate(self.delays):
            start = time.perf_counter()
            time.sleep(delay)
            waited = time.perf_counter() - start
            self.waited += waited
            if index == 0:
                self.first += waited
            self.fetched += 1
            yield torch.full((2, 3), float(index))


class _FakeStep:
    def __init__(self, seconds):
        self.seconds = seconds
        self.spent = 0.0
        self.calls = 0

    def __call__(self, batch):
        start = time.perf_counter()
        time.sleep(self.seconds)
        self.spent += time.perf_counter() - start
        self.calls += 1


_TIMING_CASES = [
    ("a slow loader (15 ms a batch, 40 ms for the first) and a 3 ms step", [0.04] + [0.015] * 5, 0.003),
    ("a fast loader (2 ms a batch, 40 ms for the first) and a 15 ms step", [0.04] + [0.002] * 5, 0.015),
]


def _probe_split_step_time(answer, run):
    cases = []
    for on, delays, step_s in _TIMING_CASES:
        loader, step = _FakeLoader(delays), _FakeStep(step_s)
        got = run(answer, loader, step, on=on)
        case = {
            "on": on,
            "batches": len(delays),
            "fetched": loader.fetched,
            "steps": step.calls,
            "data": loader.waited,
            "compute": step.spent,
            "first": loader.first,
            "got_kind": _kind(got),
        }
        if isinstance(got, (tuple, list)) and len(got) == 2:
            case["got"] = [_number(got[0]), _number(got[1])]
        cases.append(case)
    return cases


def _near(got, truth, slack=0.0):
    """Within a wide margin of the truth: a loaded machine adds a little to each measurement."""
    return truth * 0.9 - 0.003 <= got <= (truth + slack) * 1.3 + 0.015


def _judge_split_step_time(cases):
    for case in cases:
        on, n = case["on"], case["batches"]
        if "got" not in case or None in case["got"]:
            return (
                f"split_step_time returned {case['got_kind']} (on {on}); return two numbers of "
                "seconds: `return data_seconds, compute_seconds`."
            )
        if case["fetched"] > n:
            return (
                f"The loader was iterated more than once ({case['fetched']} batches drawn from a "
                f"loader of {n}) (on {on}): loop over it once, timing as you go."
            )
        if case["fetched"] < n:
            return (
                f"Only {case['fetched']} of the loader's {n} batches were drawn (on {on}): time "
                "the whole loop, every batch."
            )
        if case["steps"] != case["fetched"]:
            return (
                f"step_fn ran {case['steps']} times for {case['fetched']} batches (on {on}): call "
                "it once per batch, inside the loop."
            )
    for case in cases:
        on, n = case["on"], case["batches"]
        data, compute, first = case["data"], case["compute"], case["first"]
        got_data, got_compute = case["got"]
        shown = (
            f" (on {on}: the loader waited {1000 * data:.0f} ms and the steps took "
            f"{1000 * compute:.0f} ms; you returned {1000 * got_data:.0f} ms and "
            f"{1000 * got_compute:.0f} ms)"
        )
        if _near(got_data, data) and _near(got_compute, compute):
            continue
        if _near(got_data, compute) and _near(got_compute, data):
            return "The two numbers are swapped: return (data_seconds, compute_seconds)." + shown
        if _near(got_data * n, data) and _near(got_compute * n, compute):
            return "You returned averages per batch; return the totals over the whole loop." + shown
        if got_data < 0.2 * data and got_compute < 0.2 * compute:
            return (
                "Both times are near zero, yet the loop slept for most of its time: "
                "time.process_time() counts CPU time, not waiting. Use time.perf_counter()." + shown
            )
        if _near(got_data, data + compute):
            return (
                "Your data time includes the steps: the clock for the next batch must restart "
                "after step_fn returns, not at the previous fetch." + shown
            )
        if _near(got_compute, data + compute) and not _near(got_compute, compute):
            return (
                "Your compute time includes waiting for the next batch: stop the step's clock "
                "as soon as step_fn returns." + shown
            )
        if _near(got_data, data - first) and not _near(got_data, data):
            return (
                "The first batch's wait is missing: start the clock before the loop. The first "
                "batch is often the slowest one (a DataLoader starts its workers then)." + shown
            )
        if not _near(got_data, data):
            return "The time spent waiting for data is off." + shown
        return "The time spent in step_fn is off." + shown
    return None


split_step_time = Exercise(
    "split_step_time",
    chapter=CHAPTER,
    title="Waiting for data, or computing?",
    expects=Function("split_step_time", ("loader", "step_fn")),
    probe=_probe_split_step_time,
    judge=_judge_split_step_time,
    reference=split_step_time,
    passed_message=(
        "Correct: every moment of the loop is either waiting for the next batch or inside "
        "step_fn, and you counted each in its place."
    ),
    hints=[
        "Read the clock (time.perf_counter()) at three moments: before asking for a batch, when "
        "it arrives, and when step_fn returns.",
        "Arrival minus asking is data time; return minus arrival is compute time. The `for` "
        "statement itself asks for the batch, so read the clock before the loop and again at "
        "the end of each step.",
        "start = time.perf_counter(); for batch in loader: got = time.perf_counter(); "
        "data += got - start; step_fn(batch); start = time.perf_counter(); compute += start - got.",
    ],
    error_notes=[
        ("not iterable", "loader is something to loop over with `for batch in loader:`."),
    ],
)
