"""Chapter 02's public cases (see ``course_utils.exercises.public``).

Autograd's rules show in how a tensor is made and changed, not only in its numbers: these uses
record, beside what the answer returned, whether a result is a leaf, how many times backward()
stored into ``w.grad``, what ``.grad`` holds afterwards and whether autograd is still switched
on. Every input is made here, on the CPU, from seeded generators; nothing here computes what a
right answer gives.
"""

from __future__ import annotations

import torch

from course_utils.exercises.public import PublicCase, PublicCases, describe
from course_utils.exercises.running import set_up_torch_once

# Answers step optimizers: torch's one-time set-up for them is paid here, when the notebook
# imports the exercises, not by the first check.
set_up_torch_once()


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _grad_mode_put_back() -> bool:
    """Whether autograd is on after the answer ran; switched back on for what the use does next
    (the check puts the learner's own mode back at the end)."""
    enabled = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    return enabled


# ============================================================================================
# new_parameter
# ============================================================================================
_NEW_PARAMETER_SEED = 2024


def _made_after_a_seed(answer, arguments, run, on):
    """Called after torch.manual_seed: the numbers torch's generator gives (the same on every
    machine with the course's torch, to rounding), whether the result is a leaf, and a second
    call right after (new numbers, a new tensor)."""
    torch.set_default_dtype(torch.float32)  # the check restores the learner's default dtype
    (shape,) = arguments
    torch.manual_seed(_NEW_PARAMETER_SEED)  # the check restores the learner's random state
    made = run(answer, shape, on=on)
    facts = {"returned": describe(made)}
    facts["autograd enabled after the call"] = describe(_grad_mode_put_back())
    if isinstance(made, torch.Tensor):
        facts["your tensor is a leaf"] = describe(bool(made.is_leaf))
    again = run(answer, shape, on=on + ", called again right after")
    facts["the second call's result"] = describe(again)
    facts["the second call returned the same object"] = describe(again is made)
    return facts


new_parameter = PublicCases(
    cases=[
        PublicCase("shape=(6, 5), after torch.manual_seed(2024)", lambda: ((6, 5),)),
        PublicCase("shape=(2, 3, 4), after torch.manual_seed(2024)", lambda: ((2, 3, 4),)),
    ],
    use=_made_after_a_seed,
    requires_grad=True,  # the task: a tensor that requires grad
)


# ============================================================================================
# fresh_gradient
# ============================================================================================
def _fresh_gradient_first():
    generator = _generator(31)
    w = torch.randn(3, 4, generator=generator, dtype=torch.float32).requires_grad_(True)
    x = torch.randn(3, 4, generator=generator, dtype=torch.float32)
    return w, x  # w.grad is None: no backward() ran yet


def _fresh_gradient_stale():
    generator = _generator(32)
    w = torch.randn(2, 5, generator=generator, dtype=torch.float64).requires_grad_(True)
    w.grad = torch.randn(2, 5, generator=generator, dtype=torch.float64) * 10  # an old gradient
    x = torch.randn(5, 2, generator=generator, dtype=torch.float64).t()  # non-contiguous
    return w, x


def _gradient_and_stores(answer, arguments, run, on):
    """What the answer returned, how many times a backward() stored into w.grad during the
    call (torch.autograd.grad and formulas store nothing), and x and the grad mode afterwards."""
    w, x = arguments
    x_before = x.clone()
    stored = [0]
    handle = w.register_post_accumulate_grad_hook(lambda p: stored.__setitem__(0, stored[0] + 1))
    try:
        returned = run(answer, w, x, on=on)
    finally:
        handle.remove()
    return {
        "returned": describe(returned),
        "your result is x itself": describe(returned is x),
        "backward() calls that stored into w.grad": describe(stored[0]),
        "autograd enabled after the call": describe(_grad_mode_put_back()),
        "x changed": describe(not torch.equal(x, x_before)),
        "x requires grad after the call": describe(bool(x.requires_grad)),
    }


fresh_gradient = PublicCases(
    cases=[
        PublicCase("a float32 w of shape (3, 4) whose .grad is None", _fresh_gradient_first),
        PublicCase("a float64 w of shape (2, 5) whose .grad holds an old gradient, and a "
                   "non-contiguous x", _fresh_gradient_stale),
    ],
    use=_gradient_and_stores,
)


# ============================================================================================
# sgd_update
# ============================================================================================
def _leaf_with_gradient(seed, shape, dtype, lr, transposed=False):
    def make():
        generator = _generator(seed)
        w = torch.randn(shape, generator=generator, dtype=dtype)
        if transposed:
            w = w.t()  # a transposed weight is just as much a leaf
        w.requires_grad_(True)
        w.grad = torch.randn(w.shape, generator=generator, dtype=dtype)
        return w, lr
    return make


def _updated_in_place(answer, arguments, run, on):
    """w after the call (values, dtype, requires_grad), whether it is still a leaf in the same
    memory, whether w.grad was changed (kept or cleared are both fine) and the grad mode."""
    w, lr = arguments
    gradient = w.grad.detach().clone()
    address = w.data_ptr()
    run(answer, w, lr, on=on)
    enabled = _grad_mode_put_back()
    after = w.grad
    grad_changed = not (after is None or not bool(after.detach().any())
                        or (after.shape == gradient.shape and torch.equal(after.detach(), gradient)))
    return {
        "w after your update": describe(w),
        "w is still a leaf (made by no recorded operation)": describe(bool(w.is_leaf and w.grad_fn is None)),
        "w is in the same memory": describe(w.data_ptr() == address),
        "w.grad changed (neither kept nor cleared)": describe(grad_changed),
        "autograd enabled after the call": describe(enabled),
    }


sgd_update = PublicCases(
    cases=[
        PublicCase("a float32 w of shape (3, 5) with its .grad filled, lr=0.3",
                   _leaf_with_gradient(41, (3, 5), torch.float32, 0.3)),
        PublicCase("a non-contiguous float64 w of shape (2, 6) with its .grad filled, lr=0.05",
                   _leaf_with_gradient(42, (6, 2), torch.float64, 0.05, transposed=True)),
    ],
    use=_updated_in_place,
    requires_grad=True,  # w must still require grad after the update
)


# ============================================================================================
# softplus
# ============================================================================================
def _softplus_input(values, dtype, transposed=False):
    def make():
        x = torch.tensor(values, dtype=dtype)
        if transposed:
            x = x.t().contiguous().t()  # the same numbers, stored column by column
        return (x.requires_grad_(True),)
    return make


_SOFTPLUS_UPSTREAM_SEED = 43


def _backward_through(out, x, run, on):
    """x.grad after backward() through ``out`` with a fixed upstream gradient; None when ``out``
    cannot be backpropagated (what was wrong with it shows in the facts before)."""
    if not (isinstance(out, torch.Tensor) and out.requires_grad and out.shape == x.shape):
        return None
    x.grad = None
    upstream = torch.rand(x.shape, generator=_generator(_SOFTPLUS_UPSTREAM_SEED), dtype=x.dtype) + 0.5
    run(out.backward, upstream, on=f"backward() through your result ({on})")
    return x.grad


def _values_and_backward(answer, arguments, run, on):
    """The result, x afterwards, and the gradient backward() through the result (with a fixed
    upstream gradient) leaves in x.grad; whether x.grad was already filled when it returned.
    Then the same x again: a result kept from the first call shows there."""
    (x,) = arguments
    x_before = x.detach().clone()
    out = run(answer, x, on=on)
    facts = {
        "returned": describe(out),
        "x.grad filled before the caller's backward()": describe(x.grad is not None),
        "x changed": describe(not torch.equal(x.detach(), x_before)),
    }
    facts["x.grad after backward() through your result"] = describe(_backward_through(out, x, run, on))
    x.grad = None
    again = on + ", the same x again (x.grad cleared in between)"
    out = run(answer, x, on=again)
    facts["your result on the same x again"] = describe(out)
    facts["x.grad after backward() through that result"] = describe(_backward_through(out, x, run, again))
    return facts


softplus = PublicCases(
    cases=[
        PublicCase("x of shape (2, 5) with requires_grad=True",
                   _softplus_input([[-6.0, -2.5, -0.75, 0.3, 1.2], [2.0, 3.5, 4.25, 6.5, -1.5]],
                                   torch.float32)),
        PublicCase("a non-contiguous float64 x of shape (2, 4) with values up to ±25, "
                   "requires_grad=True",
                   _softplus_input([[-25.0, -7.5, 0.5, 9.0], [25.0, 2.2, -3.3, 18.0]],
                                   torch.float64, transposed=True)),
    ],
    use=_values_and_backward,
    requires_grad=True,  # the task: a result backward() can go through
)


# ============================================================================================
# input_gradient
# ============================================================================================
def _t_cos_t(t):
    """f(t) = t · cos(t), element by element."""
    return t * torch.cos(t)


def _layer():
    layer = torch.nn.Linear(4, 3, dtype=torch.float32)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[0.5, -1.5, 2.0, 0.25], [1.0, 0.75, -2.5, -0.5],
                                         [-1.25, 0.5, 1.5, 3.0]], dtype=torch.float32))
        layer.bias.copy_(torch.tensor([0.2, -0.1, 0.3], dtype=torch.float32))
    return layer


def _layer_fresh():
    x = torch.randn(5, 4, generator=_generator(51), dtype=torch.float32)
    return _layer(), x  # the layer's .grad are None; x does not require grad


def _layer_with_old_gradients():
    generator = _generator(52)
    layer = _layer()
    for p in layer.parameters():  # as in the middle of gradient accumulation
        p.grad = torch.randn(p.shape, generator=generator, dtype=torch.float32)
    x = torch.randn(2, 4, generator=generator, dtype=torch.float32).requires_grad_(True)
    x.grad = torch.randn(2, 4, generator=generator, dtype=torch.float32)
    return layer, x


def _function_on_float64():
    x = torch.rand(4, 3, generator=_generator(53), dtype=torch.float64) * 6 - 3
    return _t_cos_t, x.t()  # non-contiguous, shape (3, 4)


def _gradient_left_alone(answer, arguments, run, on):
    """The gradient returned, and what the call left behind: x (numbers, requires_grad, .grad)
    and the .grad of f's parameters, which must hold what they held before; then the same call
    once more."""
    f, x = arguments
    x_before = x.detach().clone()
    returned = run(answer, f, x, on=on)
    facts = {
        "returned": describe(returned),
        "autograd enabled after the call": describe(_grad_mode_put_back()),
        "x changed": describe(not torch.equal(x.detach(), x_before)),
        "x requires grad after the call": describe(bool(x.requires_grad)),
        "x.grad after the call": describe(x.grad),
    }
    if isinstance(f, torch.nn.Module):
        facts["the .grad of f's parameters after the call"] = describe(
            [p.grad for p in f.parameters()])
    # The very same call again: a leaf or a .grad kept from the first call shows here.
    facts["your result on the same call again"] = describe(
        run(answer, f, x, on=on + ", the same call again"))
    return facts


input_gradient = PublicCases(
    cases=[
        PublicCase("a Linear(4, 3) layer whose .grad are None, and an x of shape (5, 4) that "
                   "does not require grad", _layer_fresh),
        PublicCase("the Linear(4, 3) layer with old gradients in its .grad, and an x of shape "
                   "(2, 4) that requires grad, with an old x.grad", _layer_with_old_gradients),
        PublicCase("f(t) = t * cos(t) on a non-contiguous float64 x of shape (3, 4)",
                   _function_on_float64),
    ],
    use=_gradient_left_alone,
)
