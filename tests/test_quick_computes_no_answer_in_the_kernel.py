"""The quick path's probe computes no right answer (issue 43).

When a notebook is graded, the probe runs in the learner's kernel, where the learner's code can
read what the probe holds and computes (a tracer, ``traceback.walk_stack(capture_locals=True)``,
a signal handler given the interrupted frame). So the probe of a ``quick.tensor_function``
exercise records the inputs it gave and what the learner's function returned and did, and the
judge's side (``Exercise(expect=...)``, then the judge) works out what the reference and each
slip give on those inputs, rebuilt from the record:

* the probe object (its closure, defaults, the module it is defined in) holds neither the
  reference nor a slip, and, once grading has withheld the reference (``kernel_probe``), nothing
  reachable from the exercise holds it;
* while the probe runs, neither the reference nor a slip is called, an answer that watches its
  own check (tests/probe_spy.py) sees no right answer, and the record holds no value the
  reference or a slip gives;
* the judge, given only the record (through the grader's byte format), still passes a right
  answer and names each slip and each generic mistake: on ``meta`` and non-contiguous inputs too.
"""

from __future__ import annotations

import dataclasses
import functools
import types

import numpy as np
import pytest
import torch

from course_utils.exercises import plain, quick
from course_utils.exercises.core import ProbeResult, Status

# Written as an instructor's module is (the reference defined, then its name rebound to the
# exercise), with a record of every call of the reference and of the slip.
EXAMPLE = '''
import torch

from course_utils.exercises import quick

CALLS = []


def normalize(x):
    CALLS.append("reference")
    return (x - x.mean(0)) / x.std(0, correction=0)


def _sample_std(x):
    CALLS.append("sample-std")
    return (x - x.mean(0)) / x.std(0)


normalize = quick.tensor_function(
    "normalize",
    chapter="tensors",
    title="Standardise each column",
    reference=normalize,
    params=("x",),
    returns="x standardised: each column with mean 0 and population std 1",
    inputs=quick.Inputs(shapes=[(6, 3), (4, 2), (5,)], batch_dim=None, edge_cases={
        "a constant column": lambda: (torch.tensor([[1.0, 2.0], [1.0, 4.0]]),),
        "x on the meta device": lambda: (torch.empty(5, 3, device="meta"),),
    }),
    hints=["x.mean(0) and x.std(0, correction=0) hold one number per column."],
    passed_message="Correct: each column has mean 0 and population std 1.",
    slips=[quick.Slip("sample-std", _sample_std, "Your result divides by the sample std (by n - 1, not n).")],
)
'''


def _right(x):
    return (x - x.mean(0, keepdim=True)) / x.var(0, unbiased=False, keepdim=True).sqrt()


def _build():
    """A fresh copy of the example: (the exercise, its reference, its slips, the module's calls)."""
    namespace = {"__name__": "quick_example"}
    exec(compile(EXAMPLE, "quick_example.py", "exec"), namespace)
    exercise = namespace["normalize"]
    return exercise, exercise.reference, [namespace["_sample_std"]], namespace["CALLS"]


def _reachable(start, *, through_globals: bool):
    """Every object reachable from ``start`` through closures, defaults, attributes and
    containers (and a function's module namespace where ``through_globals``); not into
    modules, classes, tensors or arrays, which hold no exercise's code or answers."""
    seen, queue, found = set(), [start], []
    while queue:
        value = queue.pop()
        if id(value) in seen or isinstance(value, (types.ModuleType, type, torch.Tensor, np.ndarray, str,
                                                   bytes, int, float, complex, bool, type(None))):
            continue
        seen.add(id(value))
        found.append(value)
        if isinstance(value, types.FunctionType):
            queue += [cell.cell_contents for cell in value.__closure__ or () if _filled(cell)]
            queue += list(value.__defaults__ or ()) + list((value.__kwdefaults__ or {}).values())
            if through_globals:
                queue.append({k: v for k, v in value.__globals__.items() if k != "__builtins__"})
        elif isinstance(value, types.MethodType):
            queue += [value.__func__, value.__self__]
        elif isinstance(value, functools.partial):
            queue += [value.func, *value.args, *value.keywords.values()]
        elif isinstance(value, dict):
            queue += list(value.keys()) + list(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            queue += list(value)
        elif dataclasses.is_dataclass(value):
            queue += [getattr(value, f.name) for f in dataclasses.fields(value)]
        elif hasattr(value, "__dict__"):
            queue += list(vars(value).values())
    return found


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _holds(objects, targets) -> list:
    return [value for value in objects if any(value is target for target in targets)
            or isinstance(value, quick.Slip)]


def test_the_probe_holds_neither_the_reference_nor_a_slip():
    exercise, reference, slips, _ = _build()
    probe = exercise._probe
    assert not probe.__defaults__ and not probe.__kwdefaults__
    assert probe.__globals__ is vars(quick), "the probe is module-level code of the quick path"
    # its closure, and the quick path's module it reads names from
    assert _holds(_reachable(probe, through_globals=False), [reference, *slips]) == []
    assert _holds(_reachable(dict(vars(quick)), through_globals=False), [reference, *slips]) == []


def test_once_grading_withholds_the_reference_nothing_of_the_exercise_reaches_it():
    """``kernel_probe.setup`` replaces ``exercise.reference`` by a stub in the kernel; nothing
    else of the exercise (its probe, judge, public cases, the module its lambdas see) may still
    hold the reference."""
    exercise, reference, _, _ = _build()

    def withheld(*args):
        raise PermissionError("not while grading")

    exercise.reference = withheld
    assert not any(value is reference for value in _reachable(exercise, through_globals=True))


def test_while_the_probe_runs_neither_the_reference_nor_a_slip_is_called():
    exercise, _, _, calls = _build()
    result = exercise.probe(_right)
    assert result.status is Status.OK and calls == []
    assert exercise.judge(result).passed and "reference" in calls  # the judge is who works it out


def test_an_answer_that_watches_its_own_check_sees_no_right_answer():
    from probe_spy import seen_right_answers

    exercise, _, _, _ = _build()
    leaked, rights = seen_right_answers(exercise)
    assert rights > 5 and leaked == 0, (leaked, rights)


def test_a_record_holds_the_inputs_and_what_the_answer_did_and_no_value_the_reference_or_a_slip_gives():
    exercise, reference, slips, _ = _build()
    result = exercise.probe(lambda x: x.clone())  # wrong: returns its input
    assert result.status is Status.OK
    for case in result.data:
        assert set(case) == {"on", "given", "got", "again", "changed", "settings"}, case.keys()
    recorded = [value for value in _reachable(result.data, through_globals=False) if isinstance(value, dict)
                for value in value.values() if isinstance(value, np.ndarray) and value.size]
    assert recorded, "the inputs and results are in the record"
    for case in quick.cases(exercise.inputs, ("x",), quick.PRACTICE_SEED):
        for function in (reference, *slips):
            worked = function(*case.make())
            if worked.device.type == "meta":
                continue
            worked = worked.detach().numpy()
            assert not any(array.shape == worked.shape and np.allclose(array, worked, equal_nan=True)
                           for array in recorded), f"{function.__name__}'s result on {case.on} is in the record"


def test_the_record_says_how_each_input_was_given():
    exercise, _, _, _ = _build()
    record = {case["on"]: case["given"]["x"] for case in exercise.probe(_right).data}
    not_contiguous = next(facts for on, facts in record.items() if on.endswith("not contiguous"))
    assert not_contiguous["contiguous"] is False and not_contiguous["shape"] == [6, 3]
    assert not_contiguous["stride"] == [1, 6]
    meta = record["x on the meta device"]
    assert meta["device"] == "meta" and meta["shape"] == [5, 3] and "values" not in meta
    first = next(iter(record.values()))
    assert first["dtype"] == "torch.float32" and first["values"].shape == (6, 3) and first["contiguous"] is True


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int64,
                                   torch.uint8, torch.bool, torch.complex64])
def test_an_input_is_rebuilt_from_its_record_exactly(dtype):
    made = (torch.rand(4, 3, generator=torch.Generator().manual_seed(0)) * 10 - 5).to(dtype)
    for given in (made, made.mT.contiguous().mT, made[:, ::2], made[:0]):
        facts = plain.loads(plain.dumps(quick._given(given)))
        rebuilt = quick._rebuilt_input(facts)
        assert rebuilt.dtype == dtype and rebuilt.shape == given.shape and rebuilt.device.type == "cpu"
        assert torch.equal(rebuilt, given)
    on_meta = quick._rebuilt_input(quick._given(torch.empty(2, 5, dtype=dtype, device="meta")))
    assert on_meta.device.type == "meta" and on_meta.shape == (2, 5) and on_meta.dtype == dtype
    if dtype.is_floating_point:
        assert quick._rebuilt_input(quick._given(made.requires_grad_())).requires_grad


def _judged_from_the_record_alone(exercise, calls, answer):
    """As grading does it: the probe where the reference must not run (any call of it or of a
    slip fails the test), the record through the grader's byte format, then the judge."""
    result = exercise.probe(answer)
    assert calls == [], "the probe ran the reference or a slip"
    sent = ProbeResult.from_plain(plain.loads(plain.dumps(result.to_plain())))
    return exercise.judge(sent)


def _seeds_the_global_generator(x):
    torch.manual_seed(0)
    return _right(x)


class _KeepsState:
    """Right on every first call, wrong on every second (made afresh for each test)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return _right(x) + (1 if self.calls % 2 == 0 else 0)


def _changes_its_input(x):
    out = _right(x).clone()
    x.zero_()
    return out


def _not_on_meta(x):
    return torch.zeros(x.shape) if x.device.type == "meta" else _right(x)


WRONG = [
    # (answer, the mistake id the verdict names (a named one with the exercise's name), words
    # its message holds)
    (lambda x: (x - x.mean(0)) / x.std(0), "normalize.sample-std", "sample std (by n - 1, not n)"),
    (lambda x: None, "normalize.returned-none", "expected a torch.Tensor"),
    (lambda x: _right(x).unsqueeze(0), "shape", "has shape (1, 6, 3); expected (6, 3)"),
    (lambda x: _right(x) + 1, "values", "wrong values"),
    (lambda x: _right(x.float()), "dtype", "has dtype torch.float32; expected torch.float64"),
    (_changes_its_input, "changed-input", "changed its input x in place"),
    (_KeepsState, "normalize.wrong-on-second-call", "not on a second call"),
    (_seeds_the_global_generator, "normalize.changed-global-state", "global random state"),
    (_not_on_meta, "device", "is on cpu; expected meta (on x on the meta device)"),
]


def test_the_judge_passes_a_right_answer_from_the_record_alone():
    exercise, _, _, calls = _build()
    verdict = _judged_from_the_record_alone(exercise, calls, _right)
    assert verdict.passed and verdict.message == "Correct: each column has mean 0 and population std 1."


@pytest.mark.parametrize("answer, mistake, words", WRONG, ids=[mistake for _, mistake, _ in WRONG])
def test_the_judge_names_the_slip_and_each_generic_mistake_from_the_record_alone(answer, mistake, words):
    exercise, _, _, calls = _build()
    verdict = _judged_from_the_record_alone(exercise, calls, answer() if isinstance(answer, type) else answer)
    assert not verdict.passed and verdict.mistake == mistake, verdict
    assert words in verdict.message, verdict.message


def test_a_view_on_the_non_contiguous_input_still_raises_in_the_learners_code():
    exercise, _, _, calls = _build()
    verdict = _judged_from_the_record_alone(exercise, calls, lambda x: _right(x.view(-1).view(x.shape)))
    assert verdict.outcome.value == "your code raised" and "not contiguous" in verdict.message, verdict


def test_a_record_whose_cases_or_inputs_were_changed_is_not_judged_as_passed():
    exercise, _, _, _ = _build()
    record = exercise.probe(_right).to_plain()
    for change in (lambda data: data.pop(), lambda data: data[0].update(on="another input"),
                   lambda data: data[0]["given"]["x"].update(shape=[2, 2]),
                   lambda data: data[0]["given"]["x"].update(dtype="torch.nonsense")):
        changed = plain.loads(plain.dumps(record))
        change(changed["data"])
        verdict = exercise.judge(ProbeResult.from_plain(changed))
        assert not verdict.passed and "could not read the record" in verdict.message, verdict
