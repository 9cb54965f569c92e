"""The exercise framework as a learner meets it: four outcomes, clear messages, no tracebacks."""

import os
import random

import numpy as np
import pytest
import torch

from course_utils.exercises import plain
from course_utils.exercises.core import (
    ____,
    Exercise,
    ExerciseNotPassed,
    Function,
    Outcome,
    ProbeResult,
    Status,
)
from course_utils.exercises.facts import tensor_problem, value_facts
from slow_machine import scaled


def reference_double(x):
    return x * 2


def _probe(answer, run):
    cases = []
    for shape in [(3,), (2, 2)]:
        x = torch.arange(float(np.prod(shape))).reshape(shape)
        cases.append(
            {"on": str(shape), "got": value_facts(run(answer, x.clone())), "expected": value_facts(x * 2)}
        )
    return cases


def _judge(cases):
    for case in cases:
        problem = tensor_problem(case["got"], case["expected"], on=case["on"])
        if problem:
            return problem
    return None


def make_exercise(**overrides):
    settings = dict(
        chapter="testing",
        title="Double it",
        expects=Function("double", ("x",)),
        probe=_probe,
        judge=_judge,
        hints=["Multiply.", "By two."],
        reference=reference_double,
        error_notes=[("unsupported operand", "you added a string")],
        time_limit_s=scaled(0.5),
    )
    settings.update(overrides)
    return Exercise("double", **settings)


@pytest.fixture
def double():
    return make_exercise()


def test_reference_and_an_alternative_pass(double):
    assert double.verdict(reference_double).outcome is Outcome.PASSED
    assert double.verdict(lambda x: x + x).outcome is Outcome.PASSED


def test_wrong_values_say_where_they_differ(double):
    verdict = double.verdict(lambda x: x * 3)
    assert verdict.outcome is Outcome.FAILED
    assert "wrong values" in verdict.message and "got 3, expected 2" in verdict.message


def test_wrong_shape_and_kind_are_named(double):
    assert "shape (1, 3); expected (3,)" in double.verdict(lambda x: (x * 2)[None]).message
    assert "is a list" in double.verdict(lambda x: (x * 2).tolist()).message


def test_stub_and_placeholder_are_not_attempted(double):
    def stub(x):
        # YOUR CODE HERE
        raise NotImplementedError()

    def half_filled(x):
        return x * ____

    for answer in (stub, half_filled, ____):
        verdict = double.verdict(answer)
        assert verdict.outcome is Outcome.NOT_ATTEMPTED, answer
        assert "Not attempted" in verdict.message
    assert double.verdict().outcome is Outcome.NOT_ATTEMPTED


def test_a_not_implemented_error_with_a_message_is_the_learners_error(double):
    def uses_missing_kernel(x):
        raise NotImplementedError("Could not run 'aten::foo' with arguments from the 'MPS' backend")

    verdict = double.verdict(uses_missing_kernel)
    assert verdict.outcome is Outcome.RAISED and "aten::foo" in verdict.message


def test_learner_exception_shows_type_message_input_and_likely_cause(double):
    verdict = double.verdict(lambda x: x + "2")
    assert verdict.outcome is Outcome.RAISED
    assert verdict.message.startswith("TypeError: unsupported operand")
    assert "(on a tensor of shape (3,) (torch.float32, cpu))" in verdict.message
    assert "Likely cause: you added a string" in verdict.message
    assert "Traceback" not in str(verdict) and "course_utils" not in str(verdict)


@pytest.mark.parametrize(
    "answer, expected",
    [
        (None, "check() got None; it needs your function double(x)"),
        (torch.ones(3), "check() got a torch.Tensor; it needs your function double(x), not its result"),
        (lambda a, b: a, "takes 1 argument, like double(x); yours takes (a, b)"),
        (lambda: 1, "yours takes (no arguments)"),
        (3, "check() got an int"),
    ],
    ids=["None", "tensor", "two args", "no args", "int"],
)
def test_wrong_things_passed_to_check_get_one_sentence(double, answer, expected):
    verdict = double.verdict(answer)
    assert verdict.outcome is Outcome.FAILED
    assert expected in verdict.message
    assert "\n" not in verdict.message


def test_endless_loop_is_stopped_with_a_clear_message(double):
    def spins(x):
        while True:
            pass

    verdict = double.verdict(spins)
    assert verdict.outcome is Outcome.FAILED
    assert "stopped after 0.5 s" in verdict.message


def test_endless_loop_cannot_swallow_the_stop(double):
    def stubborn(x):
        while True:
            try:
                while True:
                    pass
            except Exception:
                pass

    assert "stopped after" in double.verdict(stubborn).message


def test_checking_leaves_the_learners_session_as_it_was(double):
    def meddles(x):
        torch.manual_seed(0)
        random.seed(0)
        np.random.seed(0)
        torch.set_grad_enabled(False)
        return x * 2

    torch.manual_seed(123)
    random.seed(123)
    np.random.seed(123)
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(123)
    random.seed(123)
    np.random.seed(123)
    assert double.verdict(meddles).passed
    assert torch.is_grad_enabled()
    got = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]


def test_a_rigged_result_cannot_fool_the_judge(double, monkeypatch):
    class AlwaysEqual(torch.Tensor):
        def __eq__(self, other):
            return True

    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(torch.testing, "assert_close", lambda *a, **k: None)
    verdict = double.verdict(lambda x: torch.zeros_like(x).as_subclass(AlwaysEqual))
    assert verdict.outcome is Outcome.FAILED


def test_check_shows_and_returns_verdict_and_verdict_shows_nothing(double, capsys):
    quiet = double.verdict(reference_double)
    assert capsys.readouterr().out == ""
    shown = double.check(reference_double)
    assert shown.passed and "✅ Double it: passed" in capsys.readouterr().out
    assert quiet.to_dict() == shown.to_dict()


def test_check_does_not_raise_outside_strict_mode(double):
    assert double.check(lambda x: x).outcome is Outcome.FAILED


@pytest.mark.parametrize("variable, value", [("COURSE_STRICT", "1"), ("NBGRADER_EXECUTION", "autograde")])
def test_strict_mode_raises_unless_passed(double, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ExerciseNotPassed, match="Double it: failed"):
        double.check(lambda x: x)
    with pytest.raises(ExerciseNotPassed, match="not attempted"):
        double.check()
    assert double.check(reference_double).passed


@pytest.mark.parametrize("mode", ["autograde", "validate"])
def test_an_answer_cell_cannot_switch_nbgrader_grading_off(mode):
    """As nbgrader runs a notebook: the variable is set when the kernel starts and imports the
    course; an answer cell then deletes it before a check runs."""
    import subprocess
    import sys

    code = (
        "import os\n"
        "from course_utils.exercises import tensors as ex\n"
        "del os.environ['NBGRADER_EXECUTION']  # what a hostile answer cell does\n"
        "from course_utils.exercises.core import ExerciseNotPassed\n"
        "try:\n"
        "    ex.outer_sum.check(lambda a, b: a + b)\n"
        "except ExerciseNotPassed:\n"
        "    print('raised')\n"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "NBGRADER"))}
    environ.update(NBGRADER_EXECUTION=mode, COURSE_NO_PROGRESS="1")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=environ, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("raised"), run.stdout + run.stderr


def test_the_learner_notebook_run_requires_not_attempted(double, monkeypatch):
    monkeypatch.setenv("COURSE_EXPECT", "not_attempted")
    assert double.check().outcome is Outcome.NOT_ATTEMPTED
    with pytest.raises(ExerciseNotPassed, match="requires 'not attempted'"):
        double.check(lambda x: x)


def test_verdict_renders_as_html_and_text(double):
    verdict = double.verdict(lambda x: x * 3)
    assert "<div" in verdict._repr_html_() and "❌ Double it: failed" in verdict._repr_html_()
    assert str(verdict).startswith("❌ Double it: failed\n   ")
    evil = make_exercise(title="<script>")
    assert "<script>" not in evil.verdict(reference_double)._repr_html_()


def test_hints_advance_and_can_be_chosen(double, capsys):
    double.hint()
    double.hint()
    double.hint()
    double.hint(1)
    double.hint(7)
    out = capsys.readouterr().out
    assert out.count("Hint 1 of 2") == 2 and out.count("Hint 2 of 2") == 1
    # the third call does not pass the last hint off as a new one
    assert "That was the last hint (2 of 2). ex.double.hint(2) shows it again" in out
    assert "hints 1 to 2" in out


def test_solution_shows_the_reference_source(double, capsys):
    double.solution()
    out = capsys.readouterr().out
    assert "def reference_double(x):" in out and "return x * 2" in out


def test_probe_results_survive_the_trip_to_another_process(double, tmp_path):
    """What the grader does: probe in the kernel, save, load elsewhere, judge."""
    for answer in (reference_double, lambda x: x * 3, lambda x: x + "2", None):
        result = double.probe(answer)
        plain.save(result.to_plain(), tmp_path / "r.json")
        again = ProbeResult.from_plain(plain.load(tmp_path / "r.json"))
        assert double.judge(again).to_dict() == double.judge(result).to_dict()


def test_a_malformed_probe_record_is_refused():
    with pytest.raises(ValueError):
        ProbeResult.from_plain({"status": "ok"})
    with pytest.raises(ValueError):
        ProbeResult.from_plain({"status": "raised", "data": None, "error": {"type": 3}})
    with pytest.raises(ValueError):
        ProbeResult.from_plain({"status": "passed!", "data": None, "error": None})


def test_a_record_the_judge_cannot_read_fails_closed(double):
    verdict = double.judge(ProbeResult(Status.OK, data=[{"nonsense": 1}]))
    assert verdict.outcome is Outcome.FAILED and "could not read" in verdict.message


def test_passing_check_records_progress_but_verdict_does_not(double, tmp_path):
    from course_utils import progress_store

    double.verdict(reference_double)
    assert "testing.double" not in progress_store.load()["passed"]
    double.check(reference_double)
    assert "testing.double" in progress_store.load()["passed"]


def test_a_tensor_subclass_cannot_fake_its_numbers(double):
    class Liar(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is torch.Tensor.detach or func is torch.Tensor.to:
                return torch.arange(3.0) * 2
            return super().__torch_function__(func, types, args, kwargs or {})

    verdict = double.verdict(lambda x: torch.zeros(3).as_subclass(Liar))
    assert verdict.outcome is Outcome.FAILED


def test_a_result_the_probe_cannot_handle_gets_a_sentence_not_a_traceback():
    class BrokenKey:
        def __str__(self):
            raise RuntimeError("no text for you")

    from course_utils.exercises import environment as ex

    verdict = ex.kernel_environment.verdict(lambda: {BrokenKey(): 1})
    assert verdict.outcome is Outcome.FAILED
    assert verdict.message.startswith("The check could not handle what your function returned")
    assert "Traceback" not in verdict.message


# -- what a learner reads when their code raised, or returned something the check cannot use --
def test_every_error_from_learner_code_names_its_line_and_a_likely_cause(double):
    def doubles_with_a_helper(x):
        return scale(x)

    def scale(x):
        return x * torch.ones(4)  # (3,) meets (4,)

    verdict = double.verdict(doubles_with_a_helper)
    assert verdict.outcome is Outcome.RAISED
    # the deepest line of the learner's own code, not torch's internals
    assert "Raised at: `return x * torch.ones(4)  # (3,) meets (4,)` in scale" in verdict.message
    assert "Likely cause: two tensors met in one element-wise operation with sizes 3 and 4" in verdict.message


def test_the_exercise_own_note_comes_before_the_general_cause(double):
    verdict = double.verdict(lambda x: x + "2")
    assert "Likely cause: you added a string" in verdict.message


def test_an_error_with_no_known_clue_still_says_what_to_look_at(double):
    def raises_something_rare(x):
        raise RuntimeError("the flux capacitor is empty")

    verdict = double.verdict(raises_something_rare)
    assert verdict.outcome is Outcome.RAISED
    assert "Likely cause: run your function in a cell of its own on the input named above" in verdict.message
    assert "Raised at: `raise RuntimeError(\"the flux capacitor is empty\")`" in verdict.message


def test_a_record_without_a_line_from_an_older_grader_still_reads(double):
    record = ProbeResult.from_plain({
        "status": "raised", "data": None,
        "error": {"type": "KeyError", "message": "'fc.weight'", "on": "x of shape (3,)"},
    })
    verdict = double.judge(record)
    assert verdict.outcome is Outcome.RAISED and "Raised at" not in verdict.message
    assert "Likely cause: a lookup of the key 'fc.weight'" in verdict.message


@pytest.mark.parametrize(
    "error, says",
    [
        (lambda: torch.zeros(2, 3) @ torch.zeros(5, 2), "must equal the second's first (5)"),
        (lambda: torch.zeros(3, device="meta").tolist(), "'meta' device"),
        (lambda: torch.zeros(3, device="meta") + torch.zeros(3), "live on different devices"),
        (lambda: torch.nn.Linear(3, 2)(torch.zeros(2, 3, dtype=torch.float64)), "different dtypes"),
        (lambda: torch.nn.functional.cross_entropy(torch.zeros(2, 3), torch.zeros(2)), ".long()"),
        (lambda: torch.zeros(3).sum(dim=2), "a dim argument of 2"),
        (lambda: torch.zeros(3).reshape(2), "must multiply to 3"),
        (lambda: torch.zeros(3, requires_grad=True).numpy(), ".detach() first"),
        (lambda: torch.zeros(3).item(), "more than one number"),
        (lambda: bool(torch.zeros(3)), ".any(), .all()"),
        (lambda: torch.zeros(3).sum().backward(), "autograd did not record"),
        (lambda: None.grad, "a value was None where your code used .grad"),
        (lambda: torch.zeros(3)(), "as if it were a function"),
        (lambda: {}["fc.weight"], "the key 'fc.weight'"),
        (lambda: torch.zeros(3)[torch.tensor([])], "dtype=torch.long"),
        (lambda: torch.nn.Linear(2, 2).train(0.5), "takes True or False"),
        (lambda: 0.5 < None, "one side is still None"),
        (lambda: torch.nn.Conv2d(1, 1, 1)(torch.zeros(1, 1, 2, 2, dtype=torch.float64)), "differ in dtype or device"),
        (lambda: torch.arange(3).mean(), "averages need a float tensor"),
        (lambda: torch.zeros(2, dtype=torch.long).requires_grad_(), "only floating-point tensors"),
        (lambda: torch.from_numpy(np.zeros(()) + 0), "a NumPy scalar"),
        (lambda: setattr(torch.zeros(2, dtype=torch.float64, requires_grad=True), "grad", torch.zeros(2)),
         "torch.zeros_like(w)"),
        (lambda: torch.zeros(1).reshape(*torch.zeros(1).shape[1:]), "pass the shape as one tuple"),
        (lambda: setattr(torch.zeros(2), "data", torch.zeros(2, device="meta")), "cannot move a tensor"),
    ],
)
def test_general_causes_read_the_error_text(error, says):
    from course_utils.exercises.likely_cause import GENERAL, likely_cause

    with pytest.raises(Exception) as raised:
        error()
    cause = likely_cause(type(raised.value).__name__, str(raised.value))
    assert cause != GENERAL and says in cause, cause


def test_the_checker_failing_on_a_returned_value_says_what_came_back_and_what_was_expected():
    class Opaque:  # a result the probe cannot turn into numbers
        def __getattr__(self, name):
            raise RuntimeError("no attributes here")

    def probe(answer, run):
        return {"shape": list(run(answer, torch.zeros(3)).shape)}

    exercise = make_exercise(
        probe=probe, judge=lambda data: None,
        expects=Function("double", ("x",), returns="a tensor shaped like x"),
    )
    verdict = exercise.verdict(lambda x: Opaque())
    assert verdict.outcome is Outcome.FAILED
    assert "your code raised" not in verdict.message.lower()
    assert "The check could not handle what your function returned" in verdict.message
    assert "It expects a tensor shaped like x." in verdict.message
    verdict = exercise.verdict(lambda x: (x, x))
    assert "a tuple of 2 items" in verdict.message


def test_a_returned_value_is_described_as_it_is():
    from course_utils.exercises.running import describe_returned

    assert describe_returned(torch.zeros(2, 3).to_sparse()) == (
        "a tensor of shape (2, 3) (torch.float32, cpu, torch.sparse_coo)")
    assert describe_returned(torch.zeros(1, requires_grad=True)).endswith("requires grad)")
    assert describe_returned(torch.nn.Linear(1, 1)) == "an nn.Module (Linear)"
    assert describe_returned({"a": 1, 2: 3}) == "a dict with keys 'a', an int"
    assert describe_returned([]) == "a list of 0 items"
    assert describe_returned(None) == "None"


def test_an_answer_that_sets_the_default_device_leaves_the_session_as_it_was(double):
    def sets_the_default_device(x):
        torch.set_default_device("meta")
        return x * 2

    try:
        double.verdict(sets_the_default_device)
        assert torch.get_default_device() == torch.device("cpu")
        assert torch.zeros(1).device.type == "cpu"
    finally:
        torch.set_default_device(None)


def test_a_warning_the_answer_raises_on_every_input_is_said_once_at_the_learners_line(capsys):
    import warnings

    def warns(x):
        warnings.warn("this answer is noisy", UserWarning)
        return x * 2

    exercise = make_exercise()
    exercise.verdict(warns)
    said = capsys.readouterr().err
    assert said.count("this answer is noisy") == 1
    assert "UserWarning at test_exercises_core.py:" in said


def test_a_warning_raised_inside_the_course_or_torch_names_no_course_file(capsys):
    from course_utils.exercises import environment as env

    def reads_a_non_leaf_grad(x):
        y = x.detach().requires_grad_(True) * 1
        (y ** 3).sum().backward()
        return y.grad

    env.known_gradient.verdict(reads_a_non_leaf_grad)
    said = capsys.readouterr().err
    assert said.count("is not a leaf Tensor is being accessed") == 1
    assert "course_utils" not in said and "Triggered internally" not in said


def test_checks_read_the_default_device_as_a_torch_before_2_10_allows(monkeypatch):
    """Chapter 06 runs torch.set_default_device("meta") then (None); on torch 2.6 to 2.9,
    torch.get_default_device() then raises AttributeError, and every later check failed with
    "could not handle your answer", the worked answers too. Here torch's function as it was
    before 2.10 (it reads the thread's device context without looking for None)."""
    from course_utils.exercises import debugging, tensors

    def get_default_device_before_2_10():
        context = torch._GLOBAL_DEVICE_CONTEXT
        if hasattr(context, "device_context"):
            device = context.device_context.device  # None after set_default_device(None)
            return device if device.index is not None else torch.tensor([]).device
        return torch.device("cpu")

    monkeypatch.setattr(torch, "get_default_device", get_default_device_before_2_10)
    torch.set_default_device("meta")
    torch.set_default_device(None)
    with pytest.raises(AttributeError):
        torch.get_default_device()
    for exercise in (debugging.layer_output_shapes, debugging.drop_non_finite, debugging.flat_features,
                     tensors.outer_sum):
        verdict = exercise.verdict(exercise.reference)
        assert verdict.passed, verdict
    assert torch.zeros(1).device.type == "cpu"


def test_a_check_that_cannot_run_on_this_torch_says_so_instead_of_blaming_the_answer():
    """A probe that trips over the worked answer too (a torch it was not written for) names the
    machine, not the answer; one that trips only over the answer's odd result still names that."""
    def probe_of_another_torch(answer, run):
        run(answer, torch.ones(3))
        return torch.an_api_this_torch_lacks()

    exercise = make_exercise(probe=probe_of_another_torch)
    verdict = exercise.verdict(lambda x: x * 2)
    assert verdict.outcome is Outcome.FAILED
    assert verdict.message.startswith(f"This check cannot run on this machine (torch {torch.__version__}")
    assert "it fails on the worked answer too" in verdict.message and "could not handle" not in verdict.message

    def probe_of_the_result(answer, run):
        return {"sum": float(run(answer, torch.ones(3)).sum())}

    odd = make_exercise(probe=probe_of_the_result, judge=lambda data: None).verdict(lambda x: "not a tensor")
    assert "could not handle what your function returned" in odd.message, odd.message
