"""The quick path (course_utils/exercises/quick.py) where the end-to-end test does not reach:
the second call watched as the first, a check's version following its inputs, and the
scaffold's template for a function of several tensors."""

import torch

from course_utils.authoring.new_exercise import module_text
from course_utils.exercises import quick
from course_utils.grading.versions import check_version


def _scale(x):
    return x * 2


def _exercise(shapes=((3, 2),), dtypes=(torch.float32,)):
    return quick.tensor_function(
        "scale", chapter="tensors", title="Twice", reference=_scale, params=("x",), returns="2 x",
        inputs=quick.Inputs(shapes=list(shapes), dtypes=dtypes), hints=["x * 2"],
        known=[((torch.tensor([1.0]),), torch.tensor([2.0]))])


def test_a_right_answer_passes_and_an_answer_that_changes_things_on_its_second_call_fails():
    exercise = _exercise()
    assert exercise.verdict(lambda x: x + x).passed
    calls = []

    def seeds_on_the_second_call(x):
        calls.append(1)
        if len(calls) == 2:
            torch.manual_seed(0)
        return x * 2

    verdict = exercise.verdict(seeds_on_the_second_call)
    assert not verdict.passed and "global random state" in verdict.message

    def halves_its_input_on_the_second_call(x):
        calls.append(1)
        out = x * 2
        if len(calls) % 2 == 0:
            x.mul_(0.5)
        return out

    calls.clear()
    verdict = exercise.verdict(halves_its_input_on_the_second_call)
    assert not verdict.passed and "changed its input x in place" in verdict.message


def test_a_checks_version_changes_with_the_inputs_it_tries():
    assert check_version(_exercise()) == check_version(_exercise())
    assert check_version(_exercise()) != check_version(_exercise(shapes=((3, 2), (0, 2))))
    assert check_version(_exercise()) != check_version(_exercise(dtypes=(torch.float64,)))


def test_the_template_for_several_arguments_builds_an_exercise():
    namespace = {}
    exec(module_text("tensors", "gap", ("a", "b")), namespace)
    exercise = namespace["gap"]
    assert exercise.expects.params == ("a", "b")
    assert [len(case.arguments()) for case in exercise.public.cases] == [2, 2]
