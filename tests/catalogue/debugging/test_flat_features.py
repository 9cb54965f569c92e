"""Chapter 06's exercise flat_features: right answers pass, classic mistakes fail with the message that names them."""

import copy
import math

import numpy as np
import pytest
import torch
from torch import nn

from course_utils.exercises import debugging as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- flat_features (D2) ----------------------------------------------------------------------
def flat_on_a_copy(features, sample_shape):
    dry = copy.deepcopy(features)
    out = dry(torch.zeros(2, *sample_shape))  # train mode is fine on a copy
    return out.flatten(1).shape[1]


def flat_on_meta(features, sample_shape):
    dry = copy.deepcopy(features).to("meta").eval()
    return int(np.prod(dry(torch.empty(1, *sample_shape, device="meta")).shape[1:]))


def flat_every_module_mode_restored(features, sample_shape):
    modes = {m: m.training for m in features.modules()}
    features.eval()
    with torch.inference_mode():
        out = features(torch.randn(1, *sample_shape))
    for module, mode in modes.items():
        module.training = mode
    return math.prod(out.shape[1:])


def flat_counted_with_the_batch(features, sample_shape):
    copy_ = copy.deepcopy(features).eval()
    return copy_(torch.zeros(2, *sample_shape)).numel()


def flat_returns_the_shape(features, sample_shape):
    return copy.deepcopy(features).eval()(torch.zeros(1, *sample_shape)).shape[1:]


def flat_in_train_mode(features, sample_shape):
    with torch.no_grad():
        return features(torch.zeros(2, *sample_shape))[0].numel()


def flat_left_in_eval(features, sample_shape):
    features.eval()
    with torch.no_grad():
        return features(torch.zeros(1, *sample_shape))[0].numel()


def flat_as_a_tensor(features, sample_shape):
    with torch.no_grad():
        out = copy.deepcopy(features).eval()(torch.zeros(1, *sample_shape))
    return torch.tensor(out.shape[1:]).prod()


def flat_always_back_to_train(features, sample_shape):
    features.eval()
    with torch.no_grad():
        out = features(torch.zeros(1, *sample_shape))
    features.train()
    return out[0].numel()


_FLAT_CACHE = {}


def flat_cached_by_shape(features, sample_shape):
    key = tuple(sample_shape)
    if key not in _FLAT_CACHE:
        _FLAT_CACHE[key] = ex.flat_features.reference(features, sample_shape)
    return _FLAT_CACHE[key]


def flat_grad_switched_off(features, sample_shape):
    torch.set_grad_enabled(False)
    return copy.deepcopy(features).eval()(torch.zeros(1, *sample_shape))[0].numel()


def flat_frozen_parameters(features, sample_shape):
    for p in features.parameters():
        p.requires_grad_(False)  # "no gradients needed for a dry run"
    return ex.flat_features.reference(features, sample_shape)


def flat_moves_the_stack_to_meta(features, sample_shape):
    dry = features.to("meta").eval()  # .to() moves the module itself, not a copy
    return dry(torch.empty(1, *sample_shape, device="meta"))[0].numel()


def flat_channels_only(features, sample_shape):
    with torch.no_grad():
        return copy.deepcopy(features).eval()(torch.zeros(1, *sample_shape)).shape[1]


def flat_with_set_grad_enabled(features, sample_shape):
    was_training = features.training
    features.eval()
    with torch.set_grad_enabled(False):
        out = features(torch.zeros((1,) + tuple(sample_shape), dtype=torch.float32, device="cpu"))
    features.train(was_training)
    return int(out[0].numel())


def flat_as_a_numpy_int(features, sample_shape):
    return np.int64(ex.flat_features.reference(features, sample_shape))


def flat_train_mode_then_buffers_put_back(features, sample_shape):
    saved = copy.deepcopy(features.state_dict())
    with torch.no_grad():
        out = features(torch.randn(1, *sample_shape))  # train mode: buffers move, then go back
    features.load_state_dict(saved)
    return out[0].numel()


def flat_grad_switched_on_at_the_end(features, sample_shape):
    was_training = features.training
    features.eval()
    torch.set_grad_enabled(False)
    out = features(torch.zeros(1, *sample_shape))
    torch.set_grad_enabled(True)  # "switch it back on"
    features.train(was_training)
    return out[0].numel()


def flat_unfreezes_after(features, sample_shape):
    features.requires_grad_(False)
    n = ex.flat_features.reference(features, sample_shape)
    features.requires_grad_(True)  # "put it back"
    return n


def flat_by_formula(features, sample_shape):
    channels, height, width = sample_shape
    for layer in features:  # convolutions only: the pooling is forgotten
        if isinstance(layer, nn.Conv2d):
            height = (height + 2 * layer.padding[0] - layer.kernel_size[0]) // layer.stride[0] + 1
            width = (width + 2 * layer.padding[1] - layer.kernel_size[1]) // layer.stride[1] + 1
            channels = layer.out_channels
    return channels * height * width


def flat_top_flag_only(features, sample_shape):
    was_training = features.training
    features.eval()
    with torch.no_grad():
        out = features(torch.zeros(1, *sample_shape))
    features.training = was_training  # the children stay in eval mode
    return out[0].numel()


# -- round 3 (tester Z) ----------------------------------------------------------------------
def flat_with_a_hook_left(features, sample_shape):
    shapes = []
    features.register_forward_hook(lambda module, args, out: shapes.append(out.shape))  # never removed
    was_training = features.training
    features.eval()
    with torch.no_grad():
        features(torch.zeros(1, *sample_shape))
    features.train(was_training)
    return math.prod(shapes[-1][1:])


def flat_with_a_hook_removed(features, sample_shape):
    shapes = []
    handle = features.register_forward_hook(lambda module, args, out: shapes.append(out.shape))
    was_training = features.training
    try:
        features.eval()
        with torch.no_grad():
            features(torch.zeros(1, *sample_shape))
    finally:
        handle.remove()
        features.train(was_training)
    return math.prod(shapes[-1][1:])


def flat_kept_as_a_buffer(features, sample_shape):
    was_training = features.training
    features.eval()
    with torch.no_grad():
        out = features(torch.zeros(1, *sample_shape))
    features.train(was_training)
    features.register_buffer("flat_size", torch.tensor(out[0].numel()))  # "remember it"
    return int(features.flat_size)


def flat_appends_a_flatten(features, sample_shape):
    features.append(nn.Flatten())  # "so the output is already flat"
    was_training = features.training
    features.eval()
    with torch.no_grad():
        out = features(torch.zeros(1, *sample_shape))
    features.train(was_training)
    return out.shape[1]


def flat_appends_a_flatten_then_removes_it(features, sample_shape):
    features.append(nn.Flatten())
    was_training = features.training
    try:
        features.eval()
        with torch.no_grad():
            out = features(torch.zeros(1, *sample_shape))
    finally:
        del features[-1]
        features.train(was_training)
    return out.shape[1]


def flat_dry_run_in_float64(features, sample_shape):
    twin = copy.deepcopy(features).eval()
    with torch.no_grad():
        return twin(torch.zeros(1, *sample_shape, dtype=torch.float64))[0].numel()


def flat_without_a_batch_dimension(features, sample_shape):
    twin = copy.deepcopy(features).eval()
    with torch.no_grad():
        return twin(torch.zeros(*sample_shape))[0].numel()


def flat_with_shape_trace(features, sample_shape):
    from ast import literal_eval

    from course_utils.diagnose import shape_trace
    trace = shape_trace(features, torch.zeros(1, *sample_shape))  # the chapter's tool, in train mode
    return math.prod(literal_eval(trace.output)[1:])


def flat_with_functional_call(features, sample_shape):
    state = {name: t.clone() for name, t in [*features.named_parameters(), *features.named_buffers()]}
    was_training = features.training
    features.eval()
    with torch.no_grad():
        out = torch.func.functional_call(features, state, (torch.zeros(1, *sample_shape),))
    features.train(was_training)
    return out[0].numel()


def flat_inference_mode_in_try(features, sample_shape):
    was_training = features.training
    features.eval()
    try:
        with torch.inference_mode():
            out = features(torch.zeros((1, *sample_shape)))
    finally:
        features.train(was_training)
    return np.prod(out.shape[1:])


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def _dry(features, sample_shape, make=None):
    was = features.training
    features.eval()
    with torch.no_grad():
        out = features(make() if make else torch.zeros(1, *sample_shape))
    features.train(was)
    return out


def ff_float(features, sample_shape):
    return float(_dry(features, sample_shape)[0].numel())


def ff_three_dims(features, sample_shape):
    out = _dry(features, sample_shape)
    return out.shape[1] * out.shape[2] * out.shape[3]


def ff_momentum_zero(features, sample_shape):
    saved = {}
    for m in features.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            saved[m] = m.momentum
            m.momentum = 0.0  # "running statistics stay as they are"
    with torch.no_grad():
        out = features(torch.zeros(2, *sample_shape))
    for m, momentum in saved.items():
        m.momentum = momentum
    return out[0].numel()


def ff_state_dict_not_cloned(features, sample_shape):
    saved = features.state_dict()  # the same tensors, not copies
    with torch.no_grad():
        out = features(torch.zeros(2, *sample_shape))
    features.load_state_dict(saved)
    return out[0].numel()


def ff_half_and_back(features, sample_shape):
    was = features.training
    features.eval().half()  # half the memory for the dry run
    with torch.no_grad():
        out = features(torch.zeros(1, *sample_shape, dtype=torch.float16))
    features.float().train(was)
    return out[0].numel()


def ff_zero_grad_first(features, sample_shape):
    features.zero_grad()  # start clean
    return _dry(features, sample_shape)[0].numel()


def ff_cached_on_the_stack(features, sample_shape):
    if not hasattr(features, "_flat_count"):
        features._flat_count = _dry(features, sample_shape)[0].numel()
    return features._flat_count


def ff_running_stats_only(features, sample_shape):
    saved = {name: b.clone() for name, b in features.named_buffers() if "running" in name}
    with torch.no_grad():
        out = features(torch.zeros(2, *sample_shape))
    with torch.no_grad():
        for name, b in features.named_buffers():
            if name in saved:
                b.copy_(saved[name])
    return out[0].numel()


def ff_h_and_w_swapped(features, sample_shape):
    c, h, w = sample_shape
    return _dry(features, sample_shape, lambda: torch.zeros(1, c, w, h))[0].numel()


def ff_layer_by_layer(features, sample_shape):
    was = features.training
    features.eval()
    out = torch.zeros(1, *sample_shape)
    with torch.no_grad():
        for layer in features:
            out = layer(out)
    features.train(was)
    return out[0].numel()


def flat_on_a_frozen_copy_with_ones(features, sample_shape):
    twin = copy.deepcopy(features).eval()  # the caller's stack is never touched
    with torch.inference_mode():
        out = twin(torch.ones(1, *sample_shape))
    return int(math.prod(out.shape[1:]))


CATALOGUE = Catalogue({
    ex.flat_features: [
        right("a dry run on a deepcopy, in train mode", flat_on_a_copy),
        right("a copy on the meta device", flat_on_meta),
        right("every module's mode saved and put back, inference_mode, math.prod", flat_every_module_mode_restored),
        wrong("counts the batch dimension", flat_counted_with_the_batch, "2 times", "counted the batch dimension"),
        wrong("returns the output's shape", flat_returns_the_shape, "returned a shape", "out[0].numel()"),
        wrong("dry run in train mode", flat_in_train_mode, "running statistics", "eval mode"),
        wrong("leaves the stack in eval mode", flat_left_in_eval, "left the stack in eval mode", kind=STATEFUL),
        wrong("returns a tensor", flat_as_a_tensor, "returned a tensor of shape ()", "Python int"),
        wrong("switches a stack in eval mode to train", flat_always_back_to_train,
              "left the stack in train mode", "it was in eval mode before", kind=STATEFUL),
        wrong("caches the answer by sample_shape", flat_cached_by_shape,
              "the number of the earlier stack with the same sample_shape", "keep nothing", kind=STATEFUL),
        wrong("switches autograd off for good", flat_grad_switched_off,
              "autograd was switched off", "torch.no_grad()", kind=STATEFUL),
        wrong("freezes the parameters", flat_frozen_parameters, "changed requires_grad", kind=STATEFUL),
        wrong("moves the stack itself to meta", flat_moves_the_stack_to_meta,
              "changed the stack's parameters", "moves the stack", kind=EDGE),
        wrong("returns the channels only", flat_channels_only, "Your function returned 16",
              "in_features=64"),
        right("set_grad_enabled(False) as a context, int()", flat_with_set_grad_enabled),
        right("returns a NumPy int64", flat_as_a_numpy_int),
        right("train mode on the stack, buffers put back with load_state_dict", flat_train_mode_then_buffers_put_back),
        wrong("switches autograd on at the end", flat_grad_switched_on_at_the_end,
              "autograd was switched on", "although the caller had it off", kind=STATEFUL),
        wrong("unfreezes every parameter afterwards", flat_unfreezes_after,
              "switched requires_grad on for parameters the caller had frozen", kind=STATEFUL),
        wrong("a formula over the convolutions, pooling forgotten", flat_by_formula,
              "Your function returned 576", "in_features=64", kind=EDGE),
        wrong("puts back the top-level training flag only", flat_top_flag_only,
              "left the stack in eval mode", kind=STATEFUL),
        wrong("leaves a forward hook on the stack", flat_with_a_hook_left, "left a hook",
              "handle.remove()", kind=STATEFUL),
        wrong("keeps the answer as a buffer of the stack", flat_kept_as_a_buffer, "added to the stack",
              "state_dict", kind=STATEFUL),
        right("a forward hook, removed in finally", flat_with_a_hook_removed),
        wrong("a float64 fake input", flat_dry_run_in_float64, "should be the same", "float32 on the CPU",
              outcome=Outcome.RAISED, kind=EDGE),
        wrong("a fake input without the batch dimension", flat_without_a_batch_dimension, "expected 4D input",
              "needs a batch dimension", outcome=Outcome.RAISED),
        wrong("appends an nn.Flatten to the stack and leaves it", flat_appends_a_flatten,
              "added layer 5 to the stack", "copy.deepcopy(features)", kind=STATEFUL),
        right("an nn.Flatten appended, then deleted in finally", flat_appends_a_flatten_then_removes_it),
        right("torch.func.functional_call on cloned tensors", flat_with_functional_call),
        right("the chapter's shape_trace", flat_with_shape_trace),
        right("inference_mode in try/finally, np.prod", flat_inference_mode_in_try),
        # -- issue 45, fresh round (from the task text) --
        wrong('returns a float', ff_float, 'return one Python int, the number of features one example'),
        wrong('multiplies the sizes of dimensions 1 to 3', ff_three_dims,
              'IndexError', kind=EDGE, outcome=Outcome.RAISED),
        wrong('BatchNorm momentum set to 0 for a train-mode run', ff_momentum_zero,
              'running statistics with your fake input. Run it in eval mode', kind=STATEFUL),
        wrong('state_dict() kept without clone, loaded back',
              ff_state_dict_not_cloned, 'running statistics with your fake input. Run it in eval mode', kind=STATEFUL),
        wrong('the stack halved for the dry run, then float() again',
              ff_half_and_back, 'dry run only looks; it never steps an optimizer or moves', kind=STATEFUL),
        wrong('zero_grad() before the dry run', ff_zero_grad_first,
              'are zeroed, not a dry run. Leave .grad alone: a forward pass', kind=STATEFUL),
        wrong('the count cached as an attribute of the stack', ff_cached_on_the_stack,
              'on every call, with the sample_shape given, and keep nothing', kind=STATEFUL),
        wrong('running statistics put back, num_batches_tracked not',
              ff_running_stats_only, 'running statistics with your fake input. Run it in eval mode', kind=STATEFUL),
        wrong('H and W swapped in the fake input', ff_h_and_w_swapped,
              'Run the stack on torch.zeros(1, *sample_shape) and count the', kind=EDGE),
        wrong('the layers called one after the other', ff_layer_by_layer,
              'RuntimeError', kind=EDGE, outcome=Outcome.RAISED),
        right("inference_mode on an eval copy, math.prod of the sizes", flat_on_a_frozen_copy_with_ones),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
