"""Chapter 05's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them (the catalogue below)."""

import copy
import time
from time import perf_counter

import pytest
import torch

from course_utils.bench import optimizer_state_tensors, tensor_bytes
from course_utils.exercises import speed_and_memory as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_references_pass_and_leave_the_session_alone
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

EXERCISES = (
    ex.training_memory_bytes, ex.accumulation_step, ex.split_step_time, ex.scaled_clipped_step
)


def test_every_reference_passes_quickly_and_leaves_the_session_alone():
    ex.accumulation_step.verdict(ex.accumulation_step.reference)  # warm up torch's first calls
    assert_references_pass_and_leave_the_session_alone(EXERCISES)


def test_a_blank_answer_is_not_attempted():
    def blank(*args):
        raise NotImplementedError()

    for exercise in EXERCISES:
        assert exercise.verdict(blank).outcome is Outcome.NOT_ATTEMPTED


def test_every_record_survives_the_graders_round_trip(tmp_path):
    # The grader judges in another process, from what the probe saved to disk.
    from course_utils.exercises import plain
    from course_utils.exercises.core import ProbeResult

    for exercise in EXERCISES:
        path = tmp_path / f"{exercise.name}.json"
        plain.save(exercise.probe(exercise.reference).to_plain(), path)
        again = ProbeResult.from_plain(plain.load(path))
        assert exercise.judge(again).passed, exercise.name


# -- training_memory_bytes (P4) --------------------------------------------------------------
STATES = {"sgd": 0, "momentum": 1, "adam": 2}


def with_nbytes(model, optimizer_name):
    trainable = sum(p.nbytes for p in model.parameters() if p.requires_grad)
    everything = sum(p.nbytes for p in model.parameters())
    return everything + trainable * (1 + STATES[optimizer_name])


def measured(model, optimizer_name):
    # Build the optimizer on a copy, take one step, and count the tensors that exist.
    model = copy.deepcopy(model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    make = {
        "sgd": lambda: torch.optim.SGD(trainable, lr=0.1),
        "momentum": lambda: torch.optim.SGD(trainable, lr=0.1, momentum=0.9),
        "adam": lambda: torch.optim.Adam(trainable),
    }
    optimizer = make[optimizer_name]()
    for p in trainable:
        p.grad = torch.ones_like(p)
    optimizer.step()
    return (
        tensor_bytes(model.parameters())
        + tensor_bytes(p.grad for p in model.parameters() if p.grad is not None)
        + tensor_bytes(optimizer_state_tensors(optimizer))  # Adam's 4-byte step counters too
    )


def by_named_parameters_and_bits(model, optimizer_name):
    copies = 1 + {"sgd": 0, "momentum": 1, "adam": 2}[optimizer_name]
    total = 0
    for _, p in model.named_parameters():
        nbytes = p.numel() * torch.finfo(p.dtype).bits // 8
        total += nbytes * (1 + copies * p.requires_grad)
    return int(total)


def as_a_tensor(model, optimizer_name):
    states = ["sgd", "momentum", "adam"].index(optimizer_name)
    sizes = torch.tensor([p.numel() * p.element_size() for p in model.parameters()])
    trainable = torch.tensor([p.requires_grad for p in model.parameters()])
    return (sizes + sizes * trainable * (1 + states)).sum()


def _memory(parameter_factor, gradient=True, states=STATES, size=None, frozen_too=False):
    def answer(model, optimizer_name):
        total = 0
        for p in model.parameters():
            bytes_ = p.numel() * (p.element_size() if size is None else size)
            total += bytes_ * parameter_factor
            if p.requires_grad or frozen_too:
                total += bytes_ * (int(gradient) + states[optimizer_name])
        return total

    return answer


def size_by_dtype_name(model, optimizer_name):
    states = STATES[optimizer_name]
    total = 0
    for p in model.parameters():
        size = p.numel() * (2 if p.dtype in (torch.float16, torch.bfloat16) else 4)
        total += size + (size * (1 + states) if p.requires_grad else 0)
    return total


def per_module(model, optimizer_name):
    states = STATES[optimizer_name]
    total = 0
    for module in model.modules():
        for p in module.parameters(recurse=False):
            size = p.numel() * p.element_size()
            total += size + (size * (1 + states) if p.requires_grad else 0)
    return total


def from_state_dict(model, optimizer_name):
    per_tensor = 2 + STATES[optimizer_name]
    return sum(t.numel() * t.element_size() * per_tensor for t in model.state_dict().values())


def steps_the_model_itself(model, optimizer_name):
    make = {
        "sgd": lambda: torch.optim.SGD(model.parameters(), lr=0.1),
        "momentum": lambda: torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        "adam": lambda: torch.optim.Adam(model.parameters()),
    }
    optimizer = make[optimizer_name]()
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.ones_like(p)
    optimizer.step()
    return (
        tensor_bytes(model.parameters())
        + tensor_bytes(p.grad for p in model.parameters() if p.grad is not None)
        + tensor_bytes(optimizer_state_tensors(optimizer))
    )


def converts_to_float32(model, optimizer_name):
    model.float()  # "to count in one dtype"
    states = STATES[optimizer_name]
    return sum(p.numel() * 4 * (1 + (1 + states) * p.requires_grad) for p in model.parameters())


# -- accumulation_step (P5) ------------------------------------------------------------------
def zero_both_ends(model, optimizer, loss_fn, batches):
    model.zero_grad(set_to_none=True)
    for x, y in batches:
        (loss_fn(model(x), y) * (1.0 / len(batches))).backward()
    optimizer.step()
    optimizer.zero_grad()


def weighted_by_size(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    total = sum(len(x) for x, _ in batches)
    for x, y in batches:
        loss = loss_fn(model(x), y) * len(x) / total  # equal sizes: the same as / k
        loss.backward()
    optimizer.step()


def with_enumerate_and_autograd_backward(model, optimizer, loss_fn, batches):
    for p in model.parameters():
        p.grad = None
    k = len(batches)
    for i, (x, y) in enumerate(batches):
        torch.autograd.backward(loss_fn(model.forward(x), y) / k)
    optimizer.step()


def zero_to_zeros_and_div(model, optimizer, loss_fn, batches):
    optimizer.zero_grad(set_to_none=False)
    for x, y in batches:
        loss_fn(model(x), y).div(len(batches)).backward()
    optimizer.step()


def _accumulate(divide=True, zero="before", step="after", one_backward=False):
    def answer(model, optimizer, loss_fn, batches):
        if zero == "before":
            optimizer.zero_grad()
        losses = []
        for x, y in batches:
            if zero == "inside":
                optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            if divide:
                loss = loss / len(batches)
            if one_backward:
                losses.append(loss)
            else:
                loss.backward()
            if step == "each":
                optimizer.step()
        if one_backward:
            sum(losses).backward()
        if step == "after":
            optimizer.step()

    return answer


def own_optimizer(model, optimizer, loss_fn, batches):
    mine = torch.optim.SGD(model.parameters(), lr=0.1)
    mine.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    mine.step()


def scales_the_learning_rate(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        loss_fn(model(x), y).backward()
    for group in optimizer.param_groups:
        group["lr"] /= len(batches)  # k times the gradient, a k times smaller step
    optimizer.step()


def scales_the_learning_rate_and_back(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        loss_fn(model(x), y).backward()
    lr = optimizer.param_groups[0]["lr"]
    optimizer.param_groups[0]["lr"] = lr / len(batches)
    optimizer.step()
    optimizer.param_groups[0]["lr"] = lr


def pops_the_batches(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    k = len(batches)
    while batches:
        x, y = batches.pop()
        (loss_fn(model(x), y) / k).backward()
    optimizer.step()


def one_big_batch(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    x = torch.cat([x for x, _ in batches])
    y = torch.cat([y for _, y in batches])
    loss_fn(model(x), y).backward()
    optimizer.step()


def divides_by_the_notebooks_k(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / 4).backward()  # the notebook's k = 4
    optimizer.step()


# -- split_step_time (P7) --------------------------------------------------------------------
def total_minus_compute(loader, step_fn):
    compute = 0.0
    begin = time.monotonic()
    for batch in loader:
        started = time.monotonic()
        step_fn(batch)
        compute += time.monotonic() - started
    return [time.monotonic() - begin - compute, compute]


def with_an_explicit_iterator(loader, step_fn):
    data = compute = 0.0
    batches = iter(loader)
    while True:
        t0 = perf_counter()
        try:
            batch = next(batches)
        except StopIteration:
            break
        t1 = perf_counter()
        step_fn(batch)
        t2 = perf_counter()
        data += t1 - t0
        compute += t2 - t1
    return data, compute


def lists_of_durations_in_ns(loader, step_fn):
    waits, steps = [], []
    mark = time.perf_counter_ns()
    for batch in loader:
        arrived = time.perf_counter_ns()
        step_fn(batch)
        done = time.perf_counter_ns()
        waits.append(arrived - mark)
        steps.append(done - arrived)
        mark = done
    return sum(waits) / 1e9, sum(steps) / 1e9


def _split(mistake):
    def answer(loader, step_fn):
        clock = time.process_time if mistake == "process_time" else time.perf_counter
        data = compute = 0.0
        count = 0
        start = clock()
        for index, batch in enumerate(loader):
            if mistake == "skip_first" and index == 0:
                start = clock()
            got = clock()
            data += got - start
            step_fn(batch)
            done = clock()
            compute += done - got
            start = got if mistake == "restart_at_fetch" else done
            count += 1
        if mistake == "swapped":
            return compute, data
        if mistake == "average":
            return data / max(count, 1), compute / max(count, 1)
        return data, compute

    return answer


def start_inside(loader, step_fn):
    data = compute = 0.0
    start = None
    for batch in loader:
        got = time.perf_counter()
        if start is not None:
            data += got - start
        step_fn(batch)
        start = time.perf_counter()
        compute += start - got
    return data, compute


def compute_until_next_batch(loader, step_fn):
    data = compute = 0.0
    start = time.perf_counter()
    previous = None
    for batch in loader:
        got = time.perf_counter()
        if previous is None:
            data += got - start
        else:
            compute += got - previous  # the step and the next wait
        step_fn(batch)
        previous = got
    if previous is not None:
        compute += time.perf_counter() - previous
    return data, compute


def twice(loader, step_fn):
    n = len(list(loader))
    return _split(None)(loader, step_fn) if n else (0.0, 0.0)


def averages_with_len(loader, step_fn):
    data, compute = _split(None)(loader, step_fn)
    return data / len(loader), compute / len(loader)


def times_in_tensors_sized_by_len(loader, step_fn):
    waits, steps = torch.zeros(len(loader)), torch.zeros(len(loader))
    start = time.perf_counter()
    for i, batch in enumerate(loader):
        got = time.perf_counter()
        waits[i] = got - start
        step_fn(batch)
        start = time.perf_counter()
        steps[i] = start - got
    return float(waits.sum()), float(steps.sum())


def totals_started_in_the_loop(loader, step_fn):
    start = time.perf_counter()
    for i, batch in enumerate(loader):
        if i == 0:
            data = compute = 0.0
        got = time.perf_counter()
        data += got - start
        step_fn(batch)
        start = time.perf_counter()
        compute += start - got
    return data, compute


_totals = {"data": 0.0, "compute": 0.0}


def totals_in_a_global(loader, step_fn):
    start = time.perf_counter()
    for batch in loader:
        got = time.perf_counter()
        _totals["data"] += got - start
        step_fn(batch)
        start = time.perf_counter()
        _totals["compute"] += start - got
    return _totals["data"], _totals["compute"]


def steps_on_the_loader(loader, step_fn):
    data = compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        got = time.perf_counter()
        data += got - start
        step_fn(loader)
        start = time.perf_counter()
        compute += start - got
    return data, compute



# -- round 2: answers outside testers wrote ------------------------------------------------------
def one_element_size_for_all(model, optimizer_name):
    params = list(model.parameters())
    size = params[0].element_size()  # "they all have the model's dtype"
    states = STATES[optimizer_name]
    elements = sum(p.numel() for p in params)
    trainable = sum(p.numel() for p in params if p.requires_grad)
    return (elements + trainable * (1 + states)) * size


def in_numpy(model, optimizer_name):
    import numpy as np

    states = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer_name]
    sizes = np.array([p.numel() * p.element_size() for p in model.parameters()], dtype=np.int64)
    trainable = np.array([p.requires_grad for p in model.parameters()])
    return sizes.sum() + (sizes * trainable).sum() * (1 + states)


def with_if_branches_and_a_float(model, optimizer_name):
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    grads = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    if optimizer_name == "sgd":
        state = 0
    elif optimizer_name == "momentum":
        state = grads
    elif optimizer_name == "adam":
        state = 2 * grads
    else:
        raise ValueError(optimizer_name)
    return float(params + grads + state)


def update_before_step(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.update()
    scaler.step(optimizer)


def with_a_scaler_of_its_own(model, optimizer, scaler, loss_fn, batch, max_norm):
    scaler = torch.amp.GradScaler("cpu")
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


_FIRST_OPTIMIZER = {}


def keeps_the_first_optimizer(model, optimizer, loss_fn, batches):
    optimizer = _FIRST_OPTIMIZER.setdefault("optimizer", optimizer)  # right until a new one comes
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    optimizer.step()


def capitalised_names(model, optimizer_name):
    states = {"SGD": 0, "Momentum": 1, "Adam": 2}[optimizer_name]
    return sum(p.numel() * p.element_size() * (1 + (1 + states) * p.requires_grad)
               for p in model.parameters())


def accumulates_in_eval_mode(model, optimizer, loss_fn, batches):
    model.eval()  # "no dropout noise across micro-batches"
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    optimizer.step()


def divides_by_the_micro_batch_size(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(x)).backward()
    optimizer.step()


def divides_by_len_of_a_pair(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    k = len(batches[0])  # the length of one (x, y) pair: always 2
    for x, y in batches:
        (loss_fn(model(x), y) / k).backward()
    optimizer.step()


def backward_with_a_gradient_of_1_over_k(model, optimizer, loss_fn, batches):
    for p in model.parameters():
        p.grad = None
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss.backward(gradient=torch.tensor(1.0 / len(batches), dtype=loss.dtype))
    optimizer.step()


def sums_autograd_grads(model, optimizer, loss_fn, batches):
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    for x, y in batches:
        for t, g in zip(total, torch.autograd.grad(loss_fn(model(x), y) / len(batches), params)):
            t += g
    for p, t in zip(params, total):
        p.grad = t
    optimizer.step()


def iterator_made_before_the_clock(loader, step_fn):
    data = compute = 0.0
    batches = iter(loader)  # outside the clock: a DataLoader starts its workers here
    while True:
        t0 = perf_counter()
        try:
            batch = next(batches)
        except StopIteration:
            break
        t1 = perf_counter()
        step_fn(batch)
        compute += perf_counter() - t1
        data += t1 - t0
    return data, compute


def iterator_made_on_the_clock(loader, step_fn):
    data = compute = 0.0
    t0 = perf_counter()
    batches = iter(loader)
    for batch in batches:
        t1 = perf_counter()
        step_fn(batch)
        t2 = perf_counter()
        data, compute = data + (t1 - t0), compute + (t2 - t1)
        t0 = t2
    return data, compute


def fetches_everything_first(loader, step_fn):
    start = time.perf_counter()
    batches = list(loader)
    data = time.perf_counter() - start
    compute = 0.0
    for batch in batches:
        t = time.perf_counter()
        step_fn(batch)
        compute += time.perf_counter() - t
    return data, compute


def as_a_numpy_array(loader, step_fn):
    import numpy as np

    times = np.zeros(2)
    start = time.perf_counter()
    for batch in loader:
        fetched = time.perf_counter()
        times[0] += fetched - start
        step_fn(batch)
        start = time.perf_counter()
        times[1] += start - fetched
    return times


def keeps_the_last_times(loader, step_fn):
    data = compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        fetched = time.perf_counter()
        data = fetched - start
        step_fn(batch)
        start = time.perf_counter()
        compute = start - fetched
    return data, compute


def with_time_monotonic_ns_numpy(loader, step_fn):
    import numpy as np

    waits, steps = [], []
    mark = time.monotonic_ns()
    for batch in loader:
        got = time.monotonic_ns()
        step_fn(batch)
        done = time.monotonic_ns()
        waits.append(got - mark)
        steps.append(done - got)
        mark = done
    return np.float64(sum(waits) / 1e9), np.float64(sum(steps) / 1e9)


# -- round 3 -----------------------------------------------------------------------------------
def trainable_and_frozen_with_match(model, optimizer_name):
    match optimizer_name:
        case "sgd":
            states = 0
        case "momentum":
            states = 1
        case "adam":
            states = 2
        case _:
            raise ValueError(optimizer_name)
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() * p.element_size() for p in model.parameters() if not p.requires_grad)
    return frozen + trainable * (2 + states)


def divides_the_gradients_after_the_loop(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        loss_fn(model(x), y).backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.grad /= len(batches)
    optimizer.step()


def with_time_time(loader, step_fn):
    data = compute = 0.0
    start = time.time()
    for batch in loader:
        fetched = time.time()
        data += fetched - start
        step_fn(batch)
        start = time.time()
        compute += start - fetched
    return data, compute


def in_milliseconds(loader, step_fn):
    data = compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        fetched = time.perf_counter()
        data += fetched - start
        step_fn(batch)
        start = time.perf_counter()
        compute += start - fetched
    return data * 1000, compute * 1000  # "ms are easier to read"


def clips_the_accumulated_gradient(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()


def divides_the_loss_in_place(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss /= len(batches)
        loss.backward()
    optimizer.step()


# -- scaled_clipped_step (P11) ---------------------------------------------------------------
def amp_autocast_zero_to_zeros(model, optimizer, scaler, loss_fn, batch, max_norm):
    optimizer.zero_grad(set_to_none=False)
    with torch.amp.autocast(device_type=batch[0].device.type, dtype=torch.float16):
        prediction = model(batch[0])
        loss = loss_fn(prediction, batch[1])
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
    scaler.step(optimizer)
    scaler.update()


def backward_inside_autocast_param_groups(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None
    with torch.autocast("cpu", torch.float16):
        scaler.scale(loss_fn(model(x), y)).backward()
    scaler.unscale_(optimizer)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
    scaler.step(optimizer)
    scaler.update()


def model_zero_grad_and_clip_the_grads_that_exist(model, optimizer, scaler, loss_fn, batch, max_norm):
    model.zero_grad(set_to_none=True)
    inputs, targets = batch
    with torch.autocast(device_type=inputs.device.type, dtype=torch.float16, enabled=True):
        output = model(inputs)
    loss = loss_fn(output.float(), targets)  # the loss outside autocast, in float32
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], max_norm)
    scaler.step(optimizer)
    scaler.update()


def _scaled(order="right", zero="before", autocast=True, own_scaler=False, update=True,
            step="scaler", hard_norm=None):
    def answer(model, optimizer, scaler, loss_fn, batch, max_norm):
        x, y = batch
        scaler_ = torch.amp.GradScaler("cpu", init_scale=1024.0) if own_scaler else scaler
        if zero == "before":
            optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
            loss = loss_fn(model(x), y)
        if order == "unscaled backward":
            scaler_.scale(loss)
            loss.backward()
        else:
            scaler_.scale(loss).backward()
        if zero == "after backward":
            optimizer.zero_grad()
        norm = max_norm if hard_norm is None else hard_norm
        if order == "clip first":
            torch.nn.utils.clip_grad_norm_(model.parameters(), norm)
            scaler_.unscale_(optimizer)
        elif order == "no unscale":
            torch.nn.utils.clip_grad_norm_(model.parameters(), norm)
        elif order == "no clip":
            pass
        elif order == "clip after step":
            pass
        else:
            scaler_.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), norm)
        if step == "scaler":
            scaler_.step(optimizer)
        else:
            if order == "no unscale":
                scaler_.unscale_(optimizer)
            optimizer.step()
        if order == "clip after step":
            torch.nn.utils.clip_grad_norm_(model.parameters(), norm)
        if update:
            scaler_.update()

    return answer


def an_optimizer_of_its_own(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer = torch.optim.SGD(model.parameters(), lr=optimizer.param_groups[0]["lr"])  # a new one
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def nan_to_num_before_the_step(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    for p in model.parameters():
        p.grad = torch.nan_to_num(p.grad, nan=0.0, posinf=1.0, neginf=-1.0)  # "make it finite"
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    scaler.update()


def error_if_nonfinite(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, error_if_nonfinite=True)
    scaler.step(optimizer)
    scaler.update()


def clip_grad_value_instead(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def bfloat16_autocast(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def scales_the_inputs(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    x.mul_(1.0)  # harmless? it writes into the caller's tensor
    y.sub_(y.mean())  # "centre the targets" in place
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


CATALOGUE = Catalogue({
    ex.training_memory_bytes: [
        right("nbytes", with_nbytes),
        right("measured on a copy with a real optimizer", measured),
        right("named_parameters and finfo bits", by_named_parameters_and_bits),
        right("a 0-dim tensor from vectorised sizes", as_a_tensor),
        wrong("counts elements", _memory(1, size=1), "elements, not bytes", "element_size()"),
        wrong("no gradients", _memory(1, gradient=False), "gradients are missing"),
        wrong("Adam as one state", _memory(1, states={"sgd": 0, "momentum": 1, "adam": 1}),
              "one state tensor for Adam", "exp_avg_sq"),
        wrong("no optimizer state", _memory(1, states={"sgd": 0, "momentum": 0, "adam": 0}),
              "optimizer state is missing"),
        wrong("frozen parameters counted", _memory(1, frozen_too=True), "frozen", "requires_grad=False"),
        wrong("4 bytes for bfloat16", _memory(1, size=4), "bfloat16", "counted 4", "element_size()"),
        wrong("returns a str", lambda model, name: f"{name}: a lot", "returned str"),
        wrong("returns None", lambda model, name: None, "returned NoneType"),
        wrong("sizes from the dtype by hand (float64 as 4)", size_by_dtype_name,
              "float64 MLP", "8 bytes per element", "counted 4", kind=EDGE),
        wrong("a shared weight per module", per_module, "shared weight twice", kind=EDGE),
        wrong("state_dict() tensors", from_state_dict, "model.state_dict()", "buffers", kind=EDGE),
        wrong("steps an optimizer on the model itself", steps_the_model_itself,
              "changed the values of its parameters", "copy.deepcopy", kind=STATEFUL),
        wrong("model.float() to count", converts_to_float32,
              "changed the dtype of its parameters", kind=STATEFUL),
        right("NumPy arrays of sizes, a NumPy integer", in_numpy),
        wrong("capitalised optimizer names", capitalised_names, "KeyError: 'sgd'",
              "Likely cause: a lookup of the key 'sgd'", kind=EDGE, outcome=Outcome.RAISED),
        right("if/elif branches, a float", with_if_branches_and_a_float),
        right("match statement, frozen plus trainable times (2 + states)", trainable_and_frozen_with_match),
        wrong("one element size for every parameter", one_element_size_for_all,
              "one element size, 4 bytes", "2 or 4 bytes per element", "p.element_size()", kind=EDGE),
    ],
    ex.accumulation_step: [
        right("zero at both ends, multiply by 1/k", zero_both_ends),
        right("weighted by size", weighted_by_size),
        right("grads to None, enumerate, autograd.backward", with_enumerate_and_autograd_backward),
        right("zero_grad(set_to_none=False), loss.div(k)", zero_to_zeros_and_div),
        wrong("no division by k", _accumulate(divide=False), "4 times too large",
              "Divide each micro-batch's loss by 4"),
        wrong("zero_grad inside the loop", _accumulate(zero="inside"), "Only the last micro-batch",
              "Zero once, before the loop"),
        wrong("a step per micro-batch", _accumulate(step="each", zero="inside"),
              "ran 4 times for 4 micro-batches"),
        wrong("never zeroes", _accumulate(zero="never"), "left over",
              "zero_grad() once, before the first micro-batch", kind=STATEFUL),
        wrong("one backward of the summed losses", _accumulate(one_backward=True), "backward() ran once",
              "keeps all 4 graphs in memory"),
        wrong("one big batch", one_big_batch, "backward() ran once"),
        wrong("no step", _accumulate(step="never"), "never ran"),
        wrong("an optimizer of its own", own_optimizer, "not through the optimizer you were given",
              kind=STATEFUL),
        wrong("divides the learning rate and keeps it", scales_the_learning_rate,
              "learning rate was 0.025", kind=STATEFUL),
        wrong("divides the learning rate, then puts it back", scales_the_learning_rate_and_back,
              ".grad holds 4 times the big batch's gradient", kind=EDGE),
        wrong("pops the caller's batches", pops_the_batches,
              "changed the list of micro-batches", "4 micro-batches before the call and 0 after",
              kind=STATEFUL),
        wrong("divides by the notebook's k=4", divides_by_the_notebooks_k,
              "3 micro-batches", "It should equal the gradient of one big batch", kind=EDGE),
        right("backward(gradient=1/k)", backward_with_a_gradient_of_1_over_k),
        right("torch.autograd.grad summed by hand", sums_autograd_grads),
        right("undivided losses, gradients divided after the loop", divides_the_gradients_after_the_loop),
        right("loss /= len(batches) in place", divides_the_loss_in_place),
        wrong("clips the accumulated gradient to norm 1", clips_the_accumulated_gradient,
              "times its length", "clip_grad_norm_", kind=EDGE),
        wrong("keeps the optimizer of its first call", keeps_the_first_optimizer,
              "the optimizer you were given never ran", kind=STATEFUL),
        wrong("accumulates in eval mode", accumulates_in_eval_mode, "ran with the model in eval mode",
              kind=EDGE),
        wrong("divides by the micro-batch size", divides_by_the_micro_batch_size,
              "It should equal the gradient of one big batch", "micro-batch size (5)"),
        wrong("divides by len() of an (x, y) pair", divides_by_len_of_a_pair,
              "It should equal the gradient of one big batch", kind=EDGE),
    ],
    ex.split_step_time: [
        right("total minus compute, time.monotonic, a list", total_minus_compute),
        right("iter() on the clock, then a for loop", iterator_made_on_the_clock),
        right("time.monotonic_ns, NumPy floats", with_time_monotonic_ns_numpy),
        right("a NumPy array of the two totals", as_a_numpy_array),
        right("lists of durations in nanoseconds", lists_of_durations_in_ns),
        right("time.time()", with_time_time),
        wrong("returns milliseconds", in_milliseconds, "milliseconds, not seconds", "no * 1000"),
        wrong("data time restarts at the fetch", _split("restart_at_fetch"), "data time includes the steps"),
        wrong("the first wait is missed", start_inside, "first batch's wait is missing"),
        wrong("swapped", _split("swapped"), "swapped"),
        wrong("averages per batch", _split("average"), "averages per batch"),
        wrong("time.process_time", _split("process_time"), "time.process_time()", "time.perf_counter()"),
        wrong("returns one number", lambda loader, step_fn: 0.1, "return two numbers"),
        wrong("iterates the loader twice", twice, "iterated more than once"),
        wrong("compute runs until the next batch", compute_until_next_batch,
              "compute time includes waiting"),
        wrong("step_fn given the loader", steps_on_the_loader, "step_fn was not given the loader's batches"),
        wrong("averages with len(loader)", averages_with_len, "averages per batch"),
        wrong("tensors of times sized by len(loader)", times_in_tensors_sized_by_len, "has no len()",
              "Likely cause: a loader may have no length", kind=EDGE, outcome=Outcome.RAISED),
        wrong("totals first set inside the loop", totals_started_in_the_loop,
              "an empty loader", "Likely cause: a variable first set inside the loop", kind=EDGE,
              outcome=Outcome.RAISED),
        wrong("totals kept in a global", totals_in_a_global, "carried over from",
              kind=STATEFUL),
        wrong("iter(loader) before the clock starts", iterator_made_before_the_clock,
              "wait in iter(loader) is missing", kind=EDGE),
        wrong("an explicit iterator made before the clock", with_an_explicit_iterator,
              "wait in iter(loader) is missing", kind=EDGE),
        wrong("fetches every batch first", fetches_everything_first,
              "before stepping on the ones it already had", "as it arrives"),
        wrong("keeps the last batch's times", keeps_the_last_times, "(data_seconds += ...)"),
    ],
    ex.scaled_clipped_step: [
        wrong("update() before step()", update_before_step, "scaler.update() ran before scaler.step(optimizer)"),
        wrong("a default GradScaler of its own (scale 65536)", with_a_scaler_of_its_own,
              "The GradScaler you were given was never used", "65536 by default"),
        right("torch.amp.autocast, zero_grad(set_to_none=False), max_norm=", amp_autocast_zero_to_zeros),
        right("backward inside autocast, the optimizer's parameters, foreach", backward_inside_autocast_param_groups),
        right("model.zero_grad(), the loss in float32 outside autocast", model_zero_grad_and_clip_the_grads_that_exist),
        wrong("clips before unscale_", _scaled(order="clip first"), "clipping the *scaled* gradients",
              "scaler.unscale_(optimizer) right after"),
        wrong("no unscale_ at all", _scaled(order="no unscale"), "clipping the *scaled* gradients"),
        wrong("no clipping", _scaled(order="no clip"), "the unclipped one", "max_norm=0.5"),
        wrong("clips after the step", _scaled(order="clip after step"), "the unclipped one"),
        wrong("backward on the plain loss", _scaled(order="unscaled backward"),
              "backward() ran on the plain loss", "scaler.scale(loss).backward()"),
        wrong("no autocast", _scaled(autocast=False), "did not run under float16 autocast"),
        wrong("bfloat16 autocast", bfloat16_autocast, "torch.bfloat16", "dtype=torch.float16"),
        wrong("never zeroes the gradients", _scaled(zero="never"), ".grad held inf",
              "optimizer.zero_grad()", kind=STATEFUL),
        wrong("zero_grad between backward and step", _scaled(zero="after backward"),
              "No inf checks were recorded", "zero_grad() belongs before backward()",
              outcome=Outcome.RAISED),
        wrong("optimizer.step() instead of scaler.step", _scaled(step="optimizer"),
              "gradients that overflowed was applied", "became inf or nan", kind=EDGE),
        wrong("no scaler.update()", _scaled(update=False), "unscale_() is being called after step()",
              "was not followed by scaler.update()", kind=STATEFUL, outcome=Outcome.RAISED),
        wrong("a GradScaler of its own", _scaled(own_scaler=True), "The GradScaler you were given was never used",
              "Use the scaler passed in", kind=STATEFUL),
        wrong("clips to norm 1.0 always", _scaled(hard_norm=1.0), "times the right length",
              "max_norm you are given (0.5)", kind=EDGE),
        wrong("a new SGD every call", an_optimizer_of_its_own, "The first call was right",
              "Use the optimizer and scaler passed in", kind=STATEFUL),
        wrong("makes inf gradients finite", nan_to_num_before_the_step,
              "gradients that overflowed was applied", "moved", kind=EDGE),
        wrong("error_if_nonfinite=True", error_if_nonfinite, "non-finite",
              "leave error_if_nonfinite at its default", kind=EDGE, outcome=Outcome.RAISED),
        wrong("clip_grad_value_", clip_grad_value_instead, "the weight change of the step"),
        wrong("changes the caller's targets in place", scales_the_inputs,
              "changed the batch it was given", kind=STATEFUL),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
