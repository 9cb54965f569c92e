"""bench: the structure and units of what is measured, never which of two things is faster."""

import subprocess
import sys

import time

import pytest
import torch

from course_utils import bench
from course_utils.bench import (
    Comparison,
    MemoryPeak,
    SavedTensors,
    Timing,
    compare,
    format_bytes,
    format_seconds,
    peak_memory,
    saved_for_backward,
    time_it,
)

QUICK = 0.01  # seconds per timing: enough to get a number, too short to mean much



def test_importing_bench_and_diagnose_does_not_pull_in_plotting():
    code = (
        "import sys, course_utils.bench, course_utils.diagnose\n"
        "print('matplotlib' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


# --- units ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "seconds, text",
    [
        (5e-9, "5.0 ns"),
        (1.234e-5, "12.3 µs"),
        (0.25, "250.0 ms"),
        (0.99999, "1.0 s"),
        (12, "12.0 s"),
    ],
)
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


@pytest.mark.parametrize(
    "n, text",
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1536, "1.5 KB"),
        (4_000_000, "3.8 MB"),
        (3 * 1024**3, "3.0 GB"),
    ],
)
def test_format_bytes_counts_1024_bytes_to_the_kilobyte(n, text):
    assert format_bytes(n) == text


# --- timing ---------------------------------------------------------------------------------


def test_time_it_measures_something_positive():
    x = torch.ones(100)
    timing = time_it(lambda: x * 2, label="double", min_run_time=QUICK)
    assert isinstance(timing, Timing)
    assert timing.label == "double"
    assert timing.median > 0
    assert timing.iqr >= 0
    assert timing.runs >= timing.measurements >= 1


def test_time_it_waits_for_the_accelerator_before_reading_the_clock(monkeypatch):
    events = []
    monkeypatch.setattr(bench, "_accelerator_synchronize", lambda: lambda: events.append("wait"))

    class LoggedTimeit:  # the clock bench reads: the real one, logged
        @staticmethod
        def default_timer():
            events.append("read")
            return time.perf_counter()

    monkeypatch.setattr(bench, "timeit", LoggedTimeit)
    time_it(lambda: None, min_run_time=QUICK)
    reads = [i for i, event in enumerate(events) if event == "read"]
    assert reads, "time_it never read the course's clock"
    # every reading comes straight after a wait: queued GPU work is finished before the clock
    assert all(i > 0 and events[i - 1] == "wait" for i in reads), events[:8]


def test_timing_prints_label_median_iqr_and_runs_in_readable_units():
    timing = Timing(label="no_grad", median=1.23e-5, iqr=4e-7, runs=1234, measurements=12)
    assert str(timing) == "no_grad: 12.3 µs (IQR 0.4 µs, 1,234 runs)"
    assert str(Timing("", 0.5, 0.01, 3, 3)) == "500.0 ms (IQR 10.0 ms, 3 runs)"
    assert format_seconds(4e-7, unit_of=1.23e-5) == "0.4 µs"


def test_compare_tables_every_name_against_the_first():
    x = torch.ones(100)
    comparison = compare({"add": lambda: x + 1, "mul": lambda: x * 2}, min_run_time=QUICK)
    assert list(comparison.timings) == ["add", "mul"]
    assert comparison.ratio("add", "add") == 1.0
    lines = str(comparison).splitlines()
    assert lines[0].split() == ["name", "median", "IQR", "spread", "×", "vs", "first"]
    assert lines[1].startswith("add") and lines[1].endswith("1.00×")
    assert lines[2].startswith("mul")
    assert len({len(line) for line in lines[:3]}) == 1  # aligned columns
    assert "<table>" in comparison._repr_html_() and "mul" in comparison._repr_html_()


def test_comparison_ratio_divides_medians():
    slow, fast = Timing("slow", 2e-3, 0, 1, 1), Timing("fast", 1e-3, 0, 1, 1)
    comparison = Comparison({"slow": slow, "fast": fast})
    assert comparison.ratio("slow", "fast") == 2.0
    assert str(comparison).splitlines()[2].endswith("0.50×")


# --- memory that autograd keeps -------------------------------------------------------------


def test_a_graph_saves_tensors_and_no_grad_saves_none():
    x = torch.ones(100, 100)
    w = torch.ones(100, 100, requires_grad=True)
    with_graph = saved_for_backward(lambda: (x * w).sum())
    assert with_graph.count == 1  # x, needed for the gradient of w; sum() saves only a shape
    assert with_graph.bytes == x.numel() * x.element_size()
    with torch.no_grad():
        assert saved_for_backward(lambda: (x * w).sum()) == SavedTensors(count=0, bytes=0)


def test_sin_saves_its_input_and_a_tensor_saved_twice_counts_once():
    x = torch.ones(10, requires_grad=True)
    assert saved_for_backward(lambda: torch.sin(x)) == SavedTensors(count=1, bytes=40)
    assert saved_for_backward(lambda: x * x) == SavedTensors(count=1, bytes=40)


def test_a_saved_view_counts_the_whole_storage_it_keeps_alive():
    big = torch.ones(1000, requires_grad=True)
    assert saved_for_backward(lambda: torch.sin(big[:10])).bytes == 4000


def test_saved_tensors_print():
    assert str(SavedTensors(count=3, bytes=1536 * 1024)) == "3 tensors, 1.5 MB kept for backward"
    assert str(SavedTensors(count=1, bytes=40)) == "1 tensor, 40 B kept for backward"


# --- peak memory ----------------------------------------------------------------------------


def test_cpu_peak_sees_a_tensor_allocated_inside_fn():
    peak = peak_memory(lambda: torch.ones(1000, 1000), device="cpu")
    assert peak.bytes >= 4_000_000
    assert peak.method == "CPU memory events recorded by torch.profiler"
    assert str(peak).endswith("at peak (CPU memory events recorded by torch.profiler)")


def test_cpu_peak_counts_memory_freed_before_fn_returns():
    def temporary_then_small():
        big = torch.ones(1000, 1000)
        return big.sum()

    assert peak_memory(temporary_then_small, device="cpu").bytes >= 4_000_000


def test_cpu_peak_does_not_count_what_existed_before():
    existing = torch.ones(1000, 1000)
    assert peak_memory(lambda: existing.view(-1), device="cpu").bytes < 1_000


def test_allocator_statistics_are_read_around_fn(monkeypatch):
    allocated = {"now": 1000, "peak": 1000}
    calls = []

    def allocate():
        calls.append("fn")
        allocated["peak"] = 5000

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: allocated["now"])
    monkeypatch.setattr(
        torch.cuda, "reset_peak_memory_stats", lambda device=None: calls.append("reset")
    )
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: allocated["peak"])
    peak = peak_memory(allocate, device="cuda")
    assert calls == ["sync", "reset", "fn", "sync"]
    assert peak == MemoryPeak(4000, "CUDA allocator statistics (max_memory_allocated)")


def test_mps_reports_a_difference_and_says_it_is_no_peak(monkeypatch):
    allocated = iter([1000, 3048])
    monkeypatch.setattr(torch.mps, "synchronize", lambda: None)
    monkeypatch.setattr(torch.mps, "current_allocated_memory", lambda: next(allocated))
    peak = peak_memory(lambda: None, device="mps")
    assert peak.bytes == 2048 and not peak.is_peak
    assert str(peak).startswith("2.0 KB (MPS keeps no peak")


def test_a_device_without_statistics_says_so():
    peak = peak_memory(lambda: None, device="meta")
    assert peak.bytes is None
    assert str(peak).startswith("not measurable:")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_peak_sees_a_tensor_allocated_inside_fn():
    peak = peak_memory(lambda: torch.ones(1000, 1000, device="cuda"), device="cuda")
    assert peak.bytes >= 4_000_000


def test_the_default_device_is_the_course_device(monkeypatch):
    monkeypatch.setattr(bench, "_course_device", lambda: torch.device("meta"))
    assert peak_memory(lambda: None).bytes is None


# --- where the memory of training goes ------------------------------------------------------

from torch import nn  # noqa: E402

from course_utils.bench import MemoryBudget, memory_budget, optimizer_state_tensors, tensor_bytes  # noqa: E402


def test_a_1000_by_1000_float32_tensor_counts_4_000_000_bytes():
    assert tensor_bytes([torch.zeros(1000, 1000)]) == 4_000_000
    assert tensor_bytes([torch.zeros(1000, 1000, dtype=torch.bfloat16)]) == 2_000_000
    assert tensor_bytes([None, torch.zeros(10)]) == 40


def test_a_shared_tensor_counts_once():
    shared = torch.zeros(100)
    assert tensor_bytes([shared, shared, shared[:10]]) == 400


def test_budget_before_any_backward_gives_the_gradients_it_will_make():
    model = nn.Linear(1000, 1000, bias=False)
    budget = memory_budget(model)
    assert budget == MemoryBudget(parameters=4_000_000, gradients=4_000_000, optimizer_state=0,
                                  activations=0, not_yet=("gradients",))
    assert "gradients (not yet)" in str(budget) and "gradients by the first backward()" in str(budget)


@pytest.mark.parametrize(
    "make_optimizer, state_bytes",
    [
        (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), 4_000_000),
        (lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01), 2 * 4_000_000 + 4),
    ],
    ids=["momentum", "adamw"],
)
def test_budget_before_the_first_step_gives_the_state_that_step_will_make(make_optimizer, state_bytes):
    """Adam makes its state lazily: before the first step() there is nothing to count, and a
    budget that said "optimizer state 0 B" would mislead. The size given is what step() makes."""
    model = nn.Linear(1000, 1000, bias=False)
    optimizer = make_optimizer(model.parameters())
    before = model.weight.detach().clone()
    budget = memory_budget(model, optimizer)
    assert budget.optimizer_state == state_bytes and "optimizer state" in budget.not_yet
    assert "optimizer state (not yet)" in str(budget) and "by the first step()" in str(budget)
    assert not optimizer.state and model.weight.grad is None  # nothing was touched
    assert torch.equal(model.weight, before)
    model(torch.ones(2, 1000)).sum().backward()
    optimizer.step()
    assert tensor_bytes(optimizer_state_tensors(optimizer)) == state_bytes  # the prediction held
    after = memory_budget(model, optimizer)
    assert after.not_yet == () and after.optimizer_state == state_bytes and "not yet" not in str(after)


def test_plain_sgd_keeps_no_state_and_nothing_is_said_to_be_missing():
    model = nn.Linear(10, 10)
    model(torch.ones(1, 10)).sum().backward()
    budget = memory_budget(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert budget.optimizer_state == 0 and budget.not_yet == ()


@pytest.mark.parametrize(
    "make_optimizer, state_bytes",
    [
        (lambda ps: torch.optim.SGD(ps, lr=0.1), 0),
        (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), 4_000_000),
        (lambda ps: torch.optim.Adam(ps), 2 * 4_000_000 + 4),  # exp_avg, exp_avg_sq, a 4-byte step
    ],
    ids=["sgd", "momentum", "adam"],
)
def test_budget_of_one_training_step_counts_each_part(make_optimizer, state_bytes):
    model = nn.Linear(1000, 1000, bias=False)
    optimizer = make_optimizer(model.parameters())
    x = torch.ones(8, 1000)
    weight = model.weight.detach().clone()
    budget = memory_budget(model, optimizer, lambda: model(x).sum())
    assert torch.equal(model.weight, weight)
    assert budget.parameters == 4_000_000
    assert budget.gradients == 4_000_000
    assert budget.optimizer_state == state_bytes
    assert budget.activations == x.numel() * 4  # the input, for the weight's gradient
    assert budget.fixed == 8_000_000 + state_bytes
    assert budget.total == budget.fixed + budget.activations
    # Worked out, not taken: no gradient, no optimizer state, the same weights.
    assert model.weight.grad is None and optimizer_state_tensors(optimizer) == []
    assert "gradients" in budget.not_yet


def test_activations_grow_with_the_batch_and_exclude_parameters():
    model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    small = memory_budget(model, None, lambda: model(torch.ones(4, 10)).sum()).activations
    large = memory_budget(model, None, lambda: model(torch.ones(40, 10)).sum()).activations
    assert large == 10 * small
    # The input (4×10, for the first weight's gradient) and ReLU's output (4×20), which ReLU
    # saves for its own backward and the second linear saves as its input: one storage.
    assert small == 4 * (4 * 10 + 4 * 20)


def test_budget_table_prints_every_part_and_the_total():
    budget = MemoryBudget(parameters=1024, gradients=1024, optimizer_state=2048, activations=0)
    lines = str(budget).splitlines()
    assert lines[0].split()[:3] == ["part", "size", "bytes"]
    assert [line.split()[0] for line in lines[1:]] == ["parameters", "gradients", "optimizer", "activations", "total"]
    assert "1.0 KB" in lines[1] and "25.0 %" in lines[1] and lines[1].endswith("no")
    assert lines[4].endswith("yes")
    assert "4,096" in lines[5]
    assert "<table>" in budget._repr_html_() and "optimizer state" in budget._repr_html_()
    assert budget.parts() == {"parameters": 1024, "gradients": 1024, "optimizer state": 2048, "activations": 0}


# --- what a timing may be said to show -------------------------------------------------------


def _t(label, q1, median, q3, fastest=None, slowest=None):
    return Timing(label, median, q3 - q1, 100, 10, q1, q3, fastest, slowest)


def test_a_timing_whose_quartiles_spread_past_ten_percent_is_not_steady():
    assert _t("a", 0.96, 1.0, 1.04).steady
    noisy = _t("a", 0.8, 1.0, 1.3)
    assert not noisy.steady and noisy.spread == pytest.approx(0.5)
    assert "too noisy to trust: spread 50%" in str(noisy)


@pytest.mark.parametrize(
    "a, b, verdict",
    [
        (_t("a", 0.48, 0.5, 0.52), _t("b", 0.97, 1.0, 1.03), "faster"),
        (_t("a", 1.95, 2.0, 2.05), _t("b", 0.97, 1.0, 1.03), "slower"),
        (_t("a", 0.97, 1.01, 1.04), _t("b", 0.97, 1.0, 1.03), "same within noise"),
        (_t("a", 0.03, 0.05, 0.09, 0.02, 0.98), _t("b", 0.97, 1.0, 1.03), "too noisy"),  # one slow run overlaps
        (_t("a", 0.03, 0.05, 0.09, 0.02, 0.2), _t("b", 0.97, 1.0, 1.03, 0.9, 1.2), "faster"),  # noisy, 20× apart
        (_t("a", 0.9, 1.0, 1.5, 0.8, 1.9), _t("b", 0.45, 0.5, 0.7, 0.4, 0.75), "slower"),
    ],
    ids=["faster", "slower", "overlapping", "noisy-overlapping", "noisy-apart", "noisy-slower"],
)
def test_a_verdict_claims_no_more_than_the_quartiles_show(a, b, verdict):
    comparison = Comparison({"a": a, "b": b})
    assert comparison.verdict("a", "b") == verdict
    sentence = comparison.conclusion("a", "b")
    if verdict == "too noisy":
        assert "too noisy to conclude on this machine" in sentence
        assert "faster" not in sentence and "slower" not in sentence
    elif verdict == "same within noise":
        assert "same time within the noise" in sentence
    else:
        assert f"a is {verdict} than b here: {a.median / b.median:.2f}× the time" in sentence
        if a.steady and b.steady:
            assert f"between {a.q1 / b.q3:.2f}× and {a.q3 / b.q1:.2f}× over the middle half" in sentence
        else:
            assert f"between {a.fastest / b.slowest:.2f}× and {a.slowest / b.fastest:.2f}× over all" in sentence


def test_a_comparison_marks_noisy_rows_and_says_what_they_can_prove():
    comparison = Comparison({"base": _t("base", 0.97, 1.0, 1.03), "odd": _t("odd", 0.5, 1.0, 2.0)})
    text = str(comparison)
    assert "150% noisy" in text.splitlines()[2]
    assert text.splitlines()[-1].startswith("noisy: odd (spread above 10%)")
    assert "the ratio alone proves nothing" in comparison._repr_html_()
    steady = Comparison({"base": _t("base", 0.97, 1.0, 1.03)})
    assert "noisy" not in str(steady)


def test_a_noisy_table_and_its_conclusion_never_contradict_each_other():
    """Chapter 04 once printed "do not read a conclusion into those rows" above "num_workers=2
    is slower … 16.63× the time": the note and the verdict now follow one rule."""
    separated = Comparison({"0 workers": _t("0 workers", 0.9, 1.0, 1.6, 0.8, 2.0),
                            "2 workers": _t("2 workers", 14.0, 16.6, 25.0, 12.0, 30.0)})
    note = str(separated).splitlines()[-1]
    assert "a difference counts only where every measurement of one lies beyond every measurement" in note
    assert separated.verdict("2 workers", "0 workers") == "slower"  # 12 s > 2 s: beyond every run
    overlapping = Comparison({"0 workers": _t("0 workers", 0.9, 1.0, 1.6, 0.8, 2.0),
                              "2 workers": _t("2 workers", 1.2, 1.5, 2.5, 1.1, 3.0)})
    assert overlapping.verdict("2 workers", "0 workers") == "too noisy"
    assert "too noisy to conclude" in overlapping.conclusion("2 workers", "0 workers")


def test_compare_interleaves_the_functions_round_by_round(monkeypatch):
    """A burst of load from elsewhere should fall on every function, not on one of them."""
    calls = []
    compare({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, min_run_time=QUICK)
    switches = sum(1 for x, y in zip(calls, calls[1:]) if x != y)
    assert switches >= 7, "a and b were timed one after the other, not in rounds"


class FakeClock:
    """Time that passes only when the timed function says so: steadiness without a real clock."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def function_taking(self, *durations):
        import itertools

        cycle = itertools.cycle(durations)

        def fn():
            self.now += next(cycle)
            if self.now > 1000:  # a compare that ignores its cap fails here instead of hanging
                raise RuntimeError("timed on past any cap")

        return fn


def test_compare_stops_at_max_run_time_when_the_measurements_never_agree(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(bench, "_synchronized_clock", lambda: clock)
    erratic = clock.function_taking(0.001, 0.001, 0.001, 0.008)  # every fourth call is slow
    timing = time_it(erratic, min_run_time=0.02, max_run_time=0.1)
    assert not timing.steady and timing.measurements >= 4
    assert 0.1 <= clock.now < 0.2, (clock.now, timing)  # it stopped at the cap, not before or long after


def test_compare_stops_as_soon_as_the_measurements_agree(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(bench, "_synchronized_clock", lambda: clock)
    timing = time_it(clock.function_taking(0.002), min_run_time=0.02, max_run_time=30)
    assert timing.steady and timing.median == pytest.approx(0.002)
    assert clock.now < 0.1, "it kept measuring a steady function towards its 30 s cap"


# --- one rule for every timing verdict, on fixed sequences -----------------------------------

from course_utils.bench import by_epoch  # noqa: E402

_CLAIMS = ("faster", "slower", "same time")


def _jitter(value, n, spread=0.02):
    """n fixed measurements around value, spread ±spread: steady, and the same every run."""
    return [value * (1 + spread * ((i % 5) - 2) / 2) for i in range(n)]


def test_times_measured_elsewhere_are_judged_by_comparess_rule():
    steady = bench.Comparison.from_samples({"base": _jitter(1.0, 8), "fast": _jitter(0.5, 8)})
    assert steady.verdict("fast", "base") == "faster"
    assert steady.timings["fast"].measurements == 8 and steady.timings["fast"].steady
    # one slow batch in eight leaves the quartiles alone: the median rule is robust to it
    outlier = bench.Comparison.from_samples({"base": _jitter(1.0, 8), "spiky": [0.1] * 7 + [2.0]})
    assert outlier.verdict("spiky", "base") == "faster"
    # half of them slow: noisy, and its range overlaps the baseline's
    noisy = bench.Comparison.from_samples({"base": _jitter(1.0, 8), "spiky": [0.1, 2.0] * 4})
    assert noisy.verdict("spiky", "base") == "too noisy"
    assert "noisy: spiky" in str(noisy)
    assert not any(claim in noisy.conclusion("spiky", "base") for claim in _CLAIMS)
    with pytest.raises(ValueError, match="no times"):
        bench.Comparison.from_samples({"a": []})


def test_two_measurements_give_no_verdict_whatever_their_medians():
    few = bench.Comparison.from_samples({"a": [1.0, 1.01], "b": [9.0, 9.1]})
    assert few.verdict("a", "b") == "too few measurements"
    sentence = few.conclusion("a", "b")
    assert "too few measurements to conclude (2 and 2" in sentence
    assert not any(claim in sentence for claim in _CLAIMS)
    assert "unknown" in str(few).splitlines()[1]


def test_first_epoch_and_later_epochs_are_judged_apart():
    batches = 8
    baseline = _jitter(0.010, batches) * 2  # every epoch alike
    cache = _jitter(0.010, batches) + _jitter(0.0001, batches)  # the second epoch reads the cache
    workers = ([0.3] * 3 + _jitter(0.001, batches - 3)) * 2  # new workers start every epoch
    persistent = [0.3] * 3 + _jitter(0.001, batches - 3) + _jitter(0.001, batches)  # once
    samples = {"baseline": baseline, "cache": cache, "workers": workers, "persistent": persistent}
    # Both epochs in one list: the quick second epoch and the slow first one overlap the baseline.
    mixed = bench.Comparison.from_samples(samples)
    assert mixed.verdict("cache", "baseline") == "too noisy"
    first, second = by_epoch(samples, epochs=2)
    assert first.verdict("cache", "baseline") == "same within noise"
    assert second.verdict("cache", "baseline") == "faster"
    for epoch in (first, second):  # three start-up batches of eight: noisy, overlapping
        assert epoch.verdict("workers", "baseline") == "too noisy"
    assert first.verdict("persistent", "baseline") == "too noisy"
    assert second.verdict("persistent", "baseline") == "faster"
    with pytest.raises(ValueError, match="do not split into 3 epochs"):
        by_epoch(samples, epochs=3)


def test_no_printed_verdict_contradicts_its_own_table():
    """Over many fixed sequences: a claim appears only where the numbers the table shows allow it."""
    import random

    rng = random.Random(0)
    for _ in range(300):
        samples = {
            name: [rng.uniform(0.5, 1.5) * scale * (1 + rng.choice([0, 0, 0, 3])) for _ in range(rng.randint(1, 9))]
            for name, scale in (("a", rng.choice([0.3, 1, 3])), ("b", 1))
        }
        comparison = bench.Comparison.from_samples(samples)
        ta, tb = comparison.timings["a"], comparison.timings["b"]
        sentence = comparison.conclusion("a", "b")
        table = str(comparison)
        claims = any(claim in sentence for claim in _CLAIMS)
        if not (ta.spread_known and tb.spread_known):
            assert not claims and "unknown" in table
        elif not (ta.steady and tb.steady):
            assert "noisy" in table
            apart = ta.slowest < tb.fastest or ta.fastest > tb.slowest
            assert claims == apart, (samples, sentence)
            assert "same time" not in sentence
        else:
            apart = ta.q3 < tb.q1 or ta.q1 > tb.q3
            assert ("faster" in sentence or "slower" in sentence) == apart
