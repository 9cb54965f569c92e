"""Chapter 02's tests about several exercises at once."""

import torch

from course_utils.exercises import autograd as ex
from exercise_asserts import assert_passes


def test_every_check_leaves_grad_mode_alone():
    for exercise in (ex.new_parameter, ex.fresh_gradient, ex.sgd_update, ex.softplus, ex.input_gradient):
        assert_passes(exercise, exercise.reference)
        assert torch.is_grad_enabled()
