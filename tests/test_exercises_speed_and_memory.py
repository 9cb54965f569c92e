"""Chapter 05's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them."""

import copy
import time

import torch

from course_utils.bench import optimizer_state_tensors, tensor_bytes
from course_utils.exercises import speed_and_memory as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import (
    assert_fails,
    assert_passes,
    assert_references_pass_and_leave_the_session_alone,
)

EXERCISES = (ex.training_memory_bytes, ex.accumulation_step, ex.split_step_time)


def test_every_reference_passes_quickly_and_leaves_the_session_alone():
    ex.accumulation_step.verdict(ex.accumulation_step.reference)  # warm up torch's first calls
    assert_references_pass_and_leave_the_session_alone(EXERCISES)


def test_a_blank_answer_is_not_attempted():
    def blank(*args):
        raise NotImplementedError()

    for exercise in EXERCISES:
        assert exercise.verdict(blank).outcome is Outcome.NOT_ATTEMPTED


# -- training_memory_bytes (P4) --------------------------------------------------------------
STATES = {"sgd": 0, "momentum": 1, "adam": 2}


def test_memory_alternatives_pass():
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
            + tensor_bytes(p.grad for p in model.parameters())
            + tensor_bytes(optimizer_state_tensors(optimizer))  # Adam's 4-byte step counters too
        )

    assert_passes(ex.training_memory_bytes, with_nbytes)
    assert_passes(ex.training_memory_bytes, measured)


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


def test_memory_counted_in_elements_fails():
    assert_fails(ex.training_memory_bytes, _memory(1, size=1), "elements, not bytes", "element_size()")


def test_memory_without_gradients_fails():
    assert_fails(ex.training_memory_bytes, _memory(1, gradient=False), "gradients are missing")


def test_memory_with_adam_as_one_state_fails():
    assert_fails(ex.training_memory_bytes, _memory(1, states={"sgd": 0, "momentum": 1, "adam": 1}),
                 "one state tensor for Adam", "exp_avg_sq")


def test_memory_without_optimizer_state_fails():
    assert_fails(ex.training_memory_bytes, _memory(1, states={"sgd": 0, "momentum": 0, "adam": 0}),
                 "optimizer state is missing")


def test_memory_of_frozen_parameters_fails():
    assert_fails(ex.training_memory_bytes, _memory(1, frozen_too=True), "frozen", "requires_grad=False")


def test_memory_with_four_bytes_for_bfloat16_fails():
    assert_fails(ex.training_memory_bytes, _memory(1, size=4), "bfloat16", "element_size()")


def test_memory_that_is_not_a_number_fails():
    assert_fails(ex.training_memory_bytes, lambda model, name: f"{name}: a lot", "returned str")
    assert_fails(ex.training_memory_bytes, lambda model, name: None, "returned NoneType")


# -- accumulation_step (P5) ------------------------------------------------------------------
def test_accumulation_alternatives_pass():
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

    assert_passes(ex.accumulation_step, zero_both_ends)
    assert_passes(ex.accumulation_step, weighted_by_size)


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


def test_accumulation_without_dividing_fails_as_k_times_too_large():
    assert_fails(ex.accumulation_step, _accumulate(divide=False), "4 times too large",
                 "Divide each micro-batch's loss by 4")


def test_accumulation_zeroing_inside_the_loop_fails():
    assert_fails(ex.accumulation_step, _accumulate(zero="inside"), "Only the last micro-batch",
                 "Zero once, before the loop")


def test_accumulation_stepping_every_micro_batch_fails():
    assert_fails(ex.accumulation_step, _accumulate(step="each", zero="inside"),
                 "ran 4 times for 4 micro-batches")


def test_accumulation_without_zeroing_first_fails():
    assert_fails(ex.accumulation_step, _accumulate(zero="never"), "left over",
                 "zero_grad() once, before the first micro-batch")


def test_accumulation_with_one_backward_of_the_sum_fails():
    assert_fails(ex.accumulation_step, _accumulate(one_backward=True), "backward() ran once",
                 "keeps all 4 graphs in memory")


def test_accumulation_without_a_step_fails():
    assert_fails(ex.accumulation_step, _accumulate(step="never"), "never ran")


# -- split_step_time (P7) --------------------------------------------------------------------
def test_split_alternative_passes():
    def total_minus_compute(loader, step_fn):
        compute = 0.0
        begin = time.monotonic()
        for batch in loader:
            started = time.monotonic()
            step_fn(batch)
            compute += time.monotonic() - started
        return [time.monotonic() - begin - compute, compute]

    assert_passes(ex.split_step_time, total_minus_compute)


def _split(mistake):
    def answer(loader, step_fn):
        clock = time.process_time if mistake == "process_time" else time.perf_counter
        data = compute = 0.0
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
        if mistake == "swapped":
            return compute, data
        if mistake == "average":
            return data / len(loader), compute / len(loader)
        return data, compute

    return answer


def test_split_counting_the_whole_loop_as_data_fails():
    assert_fails(ex.split_step_time, _split("restart_at_fetch"), "data time includes the steps")


def test_split_missing_the_first_batch_fails():
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

    assert_fails(ex.split_step_time, start_inside, "first batch's wait is missing")


def test_split_swapped_fails():
    assert_fails(ex.split_step_time, _split("swapped"), "swapped")


def test_split_averages_fail():
    assert_fails(ex.split_step_time, _split("average"), "averages per batch")


def test_split_with_process_time_fails():
    assert_fails(ex.split_step_time, _split("process_time"), "time.perf_counter()")


def test_split_that_returns_one_number_or_iterates_twice_fails():
    assert_fails(ex.split_step_time, lambda loader, step_fn: 0.1, "return two numbers")

    def twice(loader, step_fn):
        n = len(list(loader))
        return _split(None)(loader, step_fn) if n else (0.0, 0.0)

    assert_fails(ex.split_step_time, twice, "iterated more than once")


def test_accumulation_with_an_optimizer_of_its_own_fails():
    def own_optimizer(model, optimizer, loss_fn, batches):
        mine = torch.optim.SGD(model.parameters(), lr=0.1)
        mine.zero_grad()
        for x, y in batches:
            (loss_fn(model(x), y) / len(batches)).backward()
        mine.step()

    assert_fails(ex.accumulation_step, own_optimizer, "not through the optimizer you were given")


def test_every_record_survives_the_graders_round_trip(tmp_path):
    # The grader judges in another process, from what the probe saved to disk.
    from course_utils.exercises import plain
    from course_utils.exercises.core import ProbeResult

    for exercise in EXERCISES:
        path = tmp_path / f"{exercise.name}.json"
        plain.save(exercise.probe(exercise.reference).to_plain(), path)
        again = ProbeResult.from_plain(plain.load(path))
        assert exercise.judge(again).passed, exercise.name
