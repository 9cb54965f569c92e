"""The engine's catalogues (edges.py, states.py, messages.py) and the quick path built on them:
what each promises a check, and the wrong answers their edges catch on a task nobody wrote a
probe for."""

import math

import pytest
import torch
from torch import nn

from course_utils.exercises import edges, quick, states
from course_utils.exercises.core import Mistake
from course_utils.exercises.messages import Message, Messages, advice_already_followed, fields_of

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# -- edges --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_the_float_edges_hold_what_each_dtype_has_at_its_edges(dtype):
    values = edges.edge_values(dtype)
    info = torch.finfo(dtype)
    finite = [v for v in values if math.isfinite(v)]
    assert info.max in finite and -info.max in finite
    assert any(0 < v < info.tiny for v in finite), "a subnormal"
    assert any(v == 0 and math.copysign(1, v) < 0 for v in finite), "-0.0"
    assert math.inf in values and -math.inf in values and any(math.isnan(v) for v in values)
    assert any(abs(v) < 1e3 and torch.exp(torch.tensor(v, dtype=dtype)).isinf() for v in finite), \
        "a magnitude whose exp overflows"
    assert all(float(torch.tensor(v, dtype=dtype)) == v for v in finite), "each value exact in the dtype"


@pytest.mark.parametrize("dtype", (torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool, torch.uint32),
                         ids=str)
def test_the_integer_edges_are_the_dtypes_extremes_and_the_floats_first_inexact_integers(dtype):
    values = edges.edge_values(dtype)
    assert len(values) == len(set(values)), "each edge once"
    torch.tensor(values, dtype=dtype)  # every one fits
    if dtype == torch.bool:
        assert values == [False, True]
        return
    info = torch.iinfo(dtype)
    assert info.max in values and info.min in values and 0 in values
    if dtype == torch.int64:
        assert 2 ** 53 + 1 in values and 2 ** 24 + 1 in values


def test_what_a_task_allows_filters_the_edges():
    finite = edges.edge_values(torch.float32, edges.Allowed(finite=True))
    assert all(math.isfinite(v) for v in finite) and finite
    nonnegative = edges.edge_values(torch.float32, edges.Allowed(nonnegative=True))
    numbers = [v for v in nonnegative if not math.isnan(v)]
    assert all(v >= 0 and math.copysign(1, v) > 0 for v in numbers) and math.inf in numbers
    no_nan = edges.edge_values(torch.float32, edges.Allowed(nan=False))
    assert math.inf in no_nan and -math.inf in no_nan and not any(math.isnan(v) for v in no_nan)
    ranged = edges.edge_values(torch.float64, edges.Allowed(low=-1, high=1))
    assert ranged and all(-1 <= v <= 1 for v in ranged)


def test_an_edge_tensor_cycles_the_edges_so_rows_meet_several_and_shift_pairs_them_otherwise():
    a = edges.edge_tensor((4, 5), torch.float32)
    b = edges.edge_tensor((4, 5), torch.float32, shift=5)
    assert a.shape == (4, 5) and not torch.equal(a.nan_to_num(), b.nan_to_num())
    assert torch.equal(a.nan_to_num(), edges.edge_tensor((4, 5), torch.float32).nan_to_num())
    rows_with_both_infinities = [(row == math.inf).any() and (row == -math.inf).any()
                                 for shift in range(20)
                                 for row in edges.edge_tensor((4, 5), torch.float32, shift=shift)]
    assert any(rows_with_both_infinities)


def test_near_ties_are_one_and_two_steps_apart():
    ties = edges.near_ties((8,), torch.float64)
    distinct = sorted(set(ties.tolist()))
    assert len(distinct) == 3 and distinct[0] == 1.0
    assert distinct[1] == math.nextafter(1.0, 2.0)
    assert ties.to(torch.float32).unique().numel() == 1  # float32 cannot tell them apart


def test_generated_inputs_are_the_same_every_time_and_leave_the_callers_random_state():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    first = edges.generated((3, 4), torch.float32, seed=5, low=-2, high=2)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert torch.equal(first, edges.generated((3, 4), torch.float32, seed=5, low=-2, high=2))
    assert not torch.equal(first, edges.generated((3, 4), torch.float32, seed=6, low=-2, high=2))
    assert first.min() >= -2 and first.max() <= 2


def test_not_contiguous_keeps_the_values_and_breaks_view():
    x = torch.arange(12.0).reshape(3, 4)
    y = edges.not_contiguous(x)
    assert torch.equal(x, y) and not y.is_contiguous()
    with pytest.raises(RuntimeError):
        y.view(-1)


# -- states -------------------------------------------------------------------------------------
def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.5), nn.Linear(2, 1))


def test_each_module_state_puts_the_module_where_its_name_says():
    named = {name: state for name, state in states.MODULE_STATES.items()}
    model = _model()
    with named["eval"].put(model):
        assert not model.training and not model[1].training
    model = _model()
    named["first-frozen"].put(model)
    assert [p.requires_grad for p in model.parameters()] == [False, True, True, True]
    model = _model()
    named["grad-large"].put(model)
    assert all(float(p.grad.abs().min()) == states.LARGE_GRAD for p in model.parameters())
    with named["no-grad"].put(_model()):
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()
    with pytest.raises(ValueError, match="no module state"):
        states.module_states("frozen")


def test_differences_name_what_an_answer_left_otherwise_than_the_reference():
    def reference(model):
        was = model.training
        model.eval()
        out = model(torch.ones(1, 3))
        model.train(was)
        return out

    def leaves_train_mode_and_unfreezes(model):
        model.eval()
        out = model(torch.ones(1, 3))
        model.train()
        model.requires_grad_(True)
        return out

    chosen = states.module_states("eval", "first-frozen")
    expected = states.run_in_states(reference, _model, chosen)
    got = states.run_in_states(leaves_train_mode_and_unfreezes, _model, chosen)
    in_eval = states.differences(got[0]["left"], expected[0]["left"])
    frozen = states.differences(got[1]["left"], expected[1]["left"])
    assert any("left in train mode" in line for line in in_eval)
    assert frozen == ["parameter 0.weight is left with requires_grad=True; the task leaves requires_grad=False"]
    right = states.run_in_states(reference, _model, chosen)
    assert all(states.differences(a["left"], b["left"]) == [] for a, b in zip(right, expected))


def test_a_grad_subtracted_instead_of_cleared_is_a_difference():
    def clears(model):
        model.zero_grad(set_to_none=True)

    def subtracts(model):
        for p in model.parameters():
            if p.grad is not None:
                p.grad -= p.grad.clone()

    chosen = states.module_states("grad-large")
    got = states.run_in_states(subtracts, _model, chosen)[0]["left"]
    expected = states.run_in_states(clears, _model, chosen)[0]["left"]
    assert any(".grad is left as a tensor" in line and "leaves None" in line
               for line in states.differences(got, expected))


# -- messages -----------------------------------------------------------------------------------
def test_a_table_words_a_mistake_from_its_named_fields_and_refuses_missing_or_unknown_ones():
    table = Messages("demo", {"python-loop": "Your function has a loop: `{line}`.", "hint-1": "one",
                              "hint-2": "two {{not a field}}"})
    mistake = table("python-loop", line="for row in x:")
    assert isinstance(mistake, Mistake) and mistake.id == "python-loop"
    assert mistake == "Your function has a loop: `for row in x:`."
    assert table.hints() == ["one", "two {not a field}"]
    with pytest.raises(TypeError, match="fills"):
        table("python-loop")
    with pytest.raises(TypeError, match="fills"):
        table("python-loop", line="x", extra=1)
    with pytest.raises(KeyError):
        table("no-such-id")
    with pytest.raises(ValueError, match="plain name"):
        Messages("demo", {"bad": "index {a[0]}"})
    assert fields_of("{on} and {got!r:>8}") == {"on", "got"}


def test_advice_already_followed_compares_calls_not_text():
    seed = Message("Seed with torch.manual_seed(seed).", advises=("torch.manual_seed(seed)",))
    assert advice_already_followed(seed, "def f(seed, n):\n    torch.manual_seed( seed )\n    return 1\n")
    assert not advice_already_followed(seed, "def f(seed, n):\n    torch.manual_seed(0)\n")
    assert not advice_already_followed(seed, "# torch.manual_seed(seed)\n")
    assert not advice_already_followed(Message("No advice."), "anything()")
    with pytest.raises(SyntaxError):
        Message("bad", advises=("not code(",))


# -- the quick path on the edges ----------------------------------------------------------------
def _add(a, b):
    return a + b


def _add_exercise(**allowed):
    return quick.tensor_function(
        "add", chapter="tensors", title="Add", reference=_add, params=("a", "b"), returns="a + b",
        inputs=quick.Inputs(shapes=[((3, 4), (3, 4))], **allowed), hints=["a + b"])


@pytest.mark.parametrize("wrong", [
    lambda a, b: torch.log(torch.exp(a) * torch.exp(b)),          # overflows at large magnitudes
    lambda a, b: torch.nan_to_num(a + b),                          # hides inf and nan
    lambda a, b: (a.float() + b.float()).to(a.dtype),             # float64 subnormals flush in float32
    lambda a, b: torch.where((a + b).isnan(), torch.zeros_like(a), a + b),
    lambda a, b: (a + b).clamp(-1e30, 1e30),
], ids=["log-of-exp", "nan_to_num", "through-float32", "nan-to-zero", "clamped"])
def test_wrong_answers_that_agree_on_ordinary_numbers_fail_at_the_edges(wrong):
    verdict = _add_exercise().verdict(wrong)
    assert not verdict.passed and "at the edges of" in verdict.message, verdict.message


@pytest.mark.parametrize("right", [
    lambda a, b: torch.add(a, b), lambda a, b: b + a, lambda a, b: a - (-b), lambda a, b: torch.stack([a, b]).sum(0),
], ids=["add", "commuted", "minus-negated", "stacked-sum"])
def test_right_answers_pass_the_edges(right):
    assert _add_exercise().verdict(right).passed


def test_a_task_that_allows_finite_values_only_is_not_tried_on_inf_or_nan():
    finite = _add_exercise(allowed=edges.Allowed(finite=True))
    assert finite.verdict(lambda a, b: torch.nan_to_num(a + b, posinf=3e38, neginf=-3e38)).passed is False
    assert finite.verdict(lambda a, b: torch.where((a + b).isnan(), 0.0, a + b)).passed


def test_a_quick_exercise_words_its_verdicts_from_its_table():
    exercise = _add_exercise()
    assert set(quick.GENERIC_MESSAGES) <= set(exercise.messages)
    verdict = exercise.verdict(lambda a, b: a.add_(b))
    assert "changed its input a in place" in verdict.message and verdict.mistake == "changed-input"


def test_a_check_puts_back_deterministic_algorithms_and_global_hooks_an_answer_left():
    from torch.nn.modules import module

    calls = []

    def leaves_switches_on(a, b):
        torch.use_deterministic_algorithms(True, warn_only=True)
        module.register_module_forward_hook(lambda *args: calls.append(1))
        return a + b

    verdict = _add_exercise().verdict(leaves_switches_on)
    assert not verdict.passed and "deterministic algorithms" in verdict.message
    assert not torch.are_deterministic_algorithms_enabled()
    nn.Linear(2, 2)(torch.ones(2))
    assert calls == [], "a global hook the answer registered still runs after the check"


def _exercises():
    from course_utils.exercises import all_exercises

    return [exercise for exercises in all_exercises().values() for exercise in exercises]


@pytest.mark.parametrize("exercise", _exercises(), ids=lambda e: e.id)
def test_each_exercise_says_which_catalogues_it_applies_or_runs_on_the_quick_path(exercise):
    """An exercise runs on the quick path (its check derived from ``quick.Inputs``) or its
    hand-written probe applies the catalogues and its module says which, and why by hand."""
    import importlib

    if getattr(exercise, "inputs", None) is not None:
        return  # quick.tensor_function: the engine derives the whole check
    module = importlib.import_module(f"course_utils.exercises.{exercise.chapter}.{exercise.name}")
    doc = " ".join((module.__doc__ or "").split())
    assert "Engine:" in doc, f"{exercise.id}: its module does not say which of the engine's catalogues it applies"
    said = doc[doc.index("Engine:"):].lower()
    assert "applies" in said or "do not apply" in said, said
    assert "hand-written because" in said or "do not apply" in said, said


def test_the_edges_find_every_wrong_answer_the_measurement_of_generators_uses():
    """tools/edges_vs_generators.py backs edges.py's choice; its wrong answers must stay found."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "edges_vs_generators.py"
    spec = importlib.util.spec_from_file_location("edges_vs_generators", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert all(tool.finds(tool.edge_pairs, wrong)[0] for wrong in tool.WRONG.values())
    assert not tool.differs(lambda a, b: b + a, *next(iter(tool.edge_pairs())))
