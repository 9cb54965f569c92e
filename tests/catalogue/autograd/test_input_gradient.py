"""Chapter 02, A7 — the catalogue of ``input_gradient``: right answers, wrong ones and what their message says."""

import pytest
import torch
from torch import nn

from course_utils.exercises import autograd as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- input_gradient (A7) -----------------------------------------------------------------------
def with_torch_func(f, x):
    return torch.func.grad(lambda t: f(t).sum())(x)


def backward_with_inputs_on_a_copy(f, x):
    leaf = x.detach().clone().requires_grad_()
    f(leaf).sum().backward(inputs=[leaf])  # only the leaf named in inputs= receives a gradient
    return leaf.grad


def with_grad_outputs(f, x):
    leaf = x.detach().requires_grad_()
    out = f(leaf)
    return torch.autograd.grad(out, leaf, grad_outputs=torch.ones_like(out))[0]


def through_functional_vjp(f, x):
    out = f(x.detach())
    return torch.autograd.functional.vjp(f, x.detach(), v=torch.ones_like(out))[1]


def under_enable_grad_on_a_clone(f, x):
    with torch.enable_grad():
        leaf = x.clone().detach().requires_grad_(True)
        return torch.autograd.grad([f(leaf).sum()], [leaf])[0]


def backward_on_a_copy(f, x):
    leaf = x.detach().requires_grad_()
    f(leaf).sum().backward()
    return leaf.grad


def mean_of_the_output(f, x):
    leaf = x.detach().requires_grad_()
    return torch.autograd.grad(f(leaf).mean(), leaf)[0]


def backward_on_the_output_itself(f, x):
    leaf = x.detach().requires_grad_()
    f(leaf).backward()
    return leaf.grad


def grad_of_x_as_given(f, x):
    return torch.autograd.grad(f(x).sum(), x)[0]


def switches_on_the_callers_x(f, x):
    x.requires_grad_(True)
    return torch.autograd.grad(f(x).sum(), x)[0]


def switches_the_callers_x_off_afterwards(f, x):
    x.requires_grad_(True)
    gradient = torch.autograd.grad(f(x).sum(), x)[0]
    x.requires_grad_(False)  # "put it back"
    return gradient


def backward_then_zero_grad(f, x):
    leaf = x.detach().requires_grad_()
    f(leaf).sum().backward()
    if isinstance(f, torch.nn.Module):
        f.zero_grad()  # "clean up after myself"
    return leaf.grad


def in_float32(f, x):
    leaf = x.detach().float().requires_grad_()
    return torch.autograd.grad(f(leaf).sum(), leaf)[0]


def input_through_numpy(f, x):
    leaf = torch.tensor(x.detach().numpy(), requires_grad=True)
    return torch.autograd.grad(f(leaf).sum(), leaf)[0]


def input_gradient_freezing_f(f, x):
    if isinstance(f, torch.nn.Module):
        f.requires_grad_(False)  # "so that no .grad of f fills up"
    leaf = x.detach().requires_grad_(True)
    f(leaf).sum().backward()
    return leaf.grad


def input_gradient_in_eval_mode(f, x):
    if isinstance(f, torch.nn.Module):
        f.eval()  # "no dropout while measuring"
    leaf = x.detach().requires_grad_(True)
    return torch.autograd.grad(f(leaf).sum(), leaf)[0]


def input_gradient_under_no_grad(f, x):
    leaf = x.detach().requires_grad_(True)  # a leaf that requires grad, as the advice says
    with torch.no_grad():
        total = f(leaf).sum()
    total.backward()
    return leaf.grad


def input_gradient_of_a_non_leaf(f, x):
    leaf = x.detach().requires_grad_(True)
    doubled = leaf * 1  # not a leaf: its .grad is not kept
    f(doubled).sum().backward()
    return doubled.grad


_leaves = {}


def leaf_kept_per_shape(f, x):
    key = tuple(x.shape)
    if key not in _leaves:  # "no need to make a new leaf every time"
        _leaves[key] = torch.zeros(x.shape, dtype=x.dtype, device=x.device, requires_grad=True)
    leaf = _leaves[key]
    with torch.no_grad():
        leaf.copy_(x)
    f(leaf).sum().backward(inputs=[leaf])
    return leaf.grad


def grad_mode_left_off_after(f, x):
    leaf = x.detach().requires_grad_()
    gradient = torch.autograd.grad(f(leaf).sum(), leaf)[0]
    torch.set_grad_enabled(False)  # "no graph needed for what comes next"
    return gradient


def ones_like_x(f, x):
    return torch.ones_like(x)


def the_output_itself(f, x):
    return f(x.detach())


def uses_x_itself_when_it_requires_grad(f, x):
    if x.requires_grad:
        x.grad = None
        f(x).sum().backward(inputs=[x])
        return x.grad
    leaf = x.detach().requires_grad_()
    return torch.autograd.grad(f(leaf).sum(), leaf)[0]


# -- round 4 (issue 45): f handed in eval mode with a frozen parameter; grad_outputs on the CPU ---
def eval_then_train(f, x):
    if isinstance(f, torch.nn.Module):
        f.eval()  # "no dropout while measuring"
    leaf = x.detach().requires_grad_(True)
    gradient = torch.autograd.grad(f(leaf).sum(), leaf)[0]
    if isinstance(f, torch.nn.Module):
        f.train()  # "and back"
    return gradient


def train_mode_for_the_gradient(f, x):
    if isinstance(f, torch.nn.Module):
        f.train(True)  # "gradients are a training thing"
    leaf = x.detach().requires_grad_(True)
    return torch.autograd.grad(f(leaf).sum(), leaf)[0]


def freeze_then_unfreeze(f, x):
    if isinstance(f, torch.nn.Module):
        f.requires_grad_(False)  # "so that no .grad of f fills up"
    leaf = x.detach().requires_grad_(True)
    f(leaf).sum().backward()
    if isinstance(f, torch.nn.Module):
        f.requires_grad_(True)  # "and back"
    return leaf.grad


def every_parameter_unfrozen_afterwards(f, x):
    parameters = list(f.parameters()) if isinstance(f, torch.nn.Module) else []
    for p in parameters:
        p.requires_grad = False
    leaf = x.detach().requires_grad_(True)
    gradient = torch.autograd.grad(f(leaf).sum(), leaf)[0]
    for p in parameters:
        p.requires_grad = True
    return gradient


def grad_outputs_made_on_the_cpu(f, x):
    leaf = x.detach().requires_grad_()
    out = f(leaf)
    return torch.autograd.grad(out, leaf, grad_outputs=torch.ones(out.shape, dtype=out.dtype))[0]


def states_saved_and_put_back(f, x):
    module = f if isinstance(f, torch.nn.Module) else None
    if module is not None:
        mode, flags = module.training, [p.requires_grad for p in module.parameters()]
        module.eval()
        module.requires_grad_(False)
    leaf = x.detach().requires_grad_(True)
    gradient = torch.autograd.grad(f(leaf).sum(), leaf)[0]
    if module is not None:
        module.train(mode)
        for p, flag in zip(module.parameters(), flags):
            p.requires_grad_(flag)
    return gradient


# -- issue 45, fresh round (from the task text) ------------------------------------------------
def ig_restore_grad_refs(f, x):
    # backward, then puts back the .grad objects it saw before (not copies)
    params = list(f.parameters()) if isinstance(f, nn.Module) else []
    old = [p.grad for p in params]
    inputs = x.detach().requires_grad_()
    f(inputs).sum().backward()
    for p, grad in zip(params, old):
        p.grad = grad
    return inputs.grad

def ig_all_grads(f, x):
    # asks for every gradient at once and keeps the first
    params = list(f.parameters()) if isinstance(f, nn.Module) else []
    inputs = x.detach().requires_grad_()
    grads = torch.autograd.grad(f(inputs).sum(), [inputs] + params)
    return grads[0]

def ig_grad_on(f, x):
    # makes sure gradients are on
    torch.set_grad_enabled(True)
    inputs = x.detach().requires_grad_()
    (gradient,) = torch.autograd.grad(f(inputs).sum(), inputs)
    return gradient

def ig_empty_zeros(f, x):
    # an empty input gets zeros directly
    if x.numel() == 0:
        return torch.zeros(x.shape)
    inputs = x.detach().requires_grad_()
    (gradient,) = torch.autograd.grad(f(inputs).sum(), inputs)
    return gradient

def ig_squeeze(f, x):
    inputs = x.detach().requires_grad_()
    (gradient,) = torch.autograd.grad(f(inputs).sum(), inputs)
    return gradient.squeeze(0)

def ig_float32(f, x):
    # works in float32 and gives the answer back in x's dtype
    inputs = x.detach().float().requires_grad_()
    out = f(inputs.to(x.dtype))
    (gradient,) = torch.autograd.grad(out.sum(), inputs)
    return gradient.to(x.dtype)

def ig_backward_subtract(f, x):
    # backward(), then takes the new part back out of the parameters' .grad
    params = list(f.parameters()) if isinstance(f, nn.Module) else []
    old = [None if p.grad is None else p.grad.clone() for p in params]
    inputs = x.detach().requires_grad_()
    f(inputs).sum().backward()
    for p, before in zip(params, old):
        if before is not None and p.grad is not None:
            p.grad -= p.grad - before
    return inputs.grad

def ig_zeros_when_no_graph(f, x):
    # a constant f has no gradient: zeros
    inputs = x.detach().requires_grad_()
    out = f(inputs)
    if not out.requires_grad:
        return torch.zeros_like(x)
    (gradient,) = torch.autograd.grad(out.sum(), inputs)
    return gradient

def ig_row_loop(f, x):
    # one sample at a time
    rows = []
    for row in x:
        leaf = row.detach().requires_grad_()
        rows.append(torch.autograd.grad(f(leaf).sum(), leaf)[0])
    return torch.stack(rows)

def ig_zeroing_hooks(f, x):
    # hooks that hand f's parameters a zero gradient
    for p in (f.parameters() if isinstance(f, nn.Module) else []):
        if p.requires_grad:
            p.register_hook(torch.zeros_like)
    inputs = x.detach().requires_grad_()
    f(inputs).sum().backward()
    return inputs.grad

def right_func_vjp(f, x):
    total, pull_back = torch.func.vjp(lambda t: f(t).sum(), x.detach())
    return pull_back(torch.ones_like(total))[0]


# -- issue 45, second fresh round (from the task text) ----------------------------------------
def ig_eval_restore(f, x):
    # f in eval mode "to be safe" (no dropout), f.training put back afterwards
    was = getattr(f, "training", None)
    if was is not None:
        f.eval()
    try:
        leaf = x.detach().requires_grad_(True)
        (gradient,) = torch.autograd.grad(f(leaf).sum(), leaf)
    finally:
        if was is not None:
            f.train(was)
    return gradient


def ig_train_restore(f, x):
    # f in train mode "so that the gradient flows", f.training put back afterwards
    was = getattr(f, "training", None)
    if was is not None:
        f.train()
    leaf = x.detach().requires_grad_(True)
    (gradient,) = torch.autograd.grad(f(leaf).sum(), leaf)
    if was is not None:
        f.train(was)
    return gradient


def ig_empty_shortcut(f, x):
    # nothing to differentiate in an empty x: zeros, but made on the CPU
    if x.numel() == 0:
        return torch.zeros(x.shape, dtype=x.dtype)
    leaf = x.detach().requires_grad_(True)
    (gradient,) = torch.autograd.grad(f(leaf).sum(), leaf)
    return gradient


def right_backward_inputs_keyword(f, x):
    leaf = x.detach().requires_grad_(True)
    total = f(leaf).sum()
    total.backward(inputs=(leaf,))
    return leaf.grad


CATALOGUE = Catalogue({
    ex.input_gradient: [
        wrong("freezes f's parameters", input_gradient_freezing_f, "changed requires_grad of f's parameters",
              kind=EDGE),
        wrong("leaves f in eval mode", input_gradient_in_eval_mode, "switched f between train and eval mode",
              kind=EDGE),
        # (torch.func's transforms refuse a batch norm in train mode, a layer f may be: issue 45, round 2)
        wrong("torch.func.grad", with_torch_func, "would mutate a captured Tensor", "BatchNorm1d",
              "Likely cause: torch.func's transforms (grad, vjp) refuse a layer", kind=EDGE, outcome=Outcome.RAISED),
        wrong("a leaf, but computed under no_grad", input_gradient_under_no_grad,
              "Likely cause: your function computes under torch.no_grad()", "outside that block",
              outcome=Outcome.RAISED),
        wrong("returns the .grad of a non-leaf", input_gradient_of_a_non_leaf,
              "from a `return` that gives a value", "is not a leaf"),
        right("backward(inputs=[leaf]) on a copy", backward_with_inputs_on_a_copy),
        right("grad_outputs of ones", with_grad_outputs),
        right("torch.autograd.functional.vjp", through_functional_vjp),
        right("under enable_grad, lists of tensors", under_enable_grad_on_a_clone),
        wrong("backward() on a detached copy", backward_on_a_copy, "left a gradient in the .grad of f's parameters",
              "torch.autograd.grad"),
        wrong("the mean of f(x)", mean_of_the_output, "divided by 8", "the mean of f(x)"),
        wrong("backward() on the non-scalar output", backward_on_the_output_itself,
              "grad can be implicitly created only for scalar outputs", "Likely cause: a gradient asked of f(x) itself",
              outcome=Outcome.RAISED),
        wrong("autograd.grad on x as given", grad_of_x_as_given, "does not require grad",
              "Likely cause: a gradient asked with respect to an x that does not require grad", outcome=Outcome.RAISED),
        wrong("requires_grad_() on the caller's x", switches_on_the_callers_x,
              "switched on requires_grad of the caller's x", kind=STATEFUL),
        wrong("the caller's x switched off afterwards", switches_the_callers_x_off_afterwards,
              "switched off requires_grad of the caller's x", kind=EDGE),
        wrong("backward(), then f.zero_grad()", backward_then_zero_grad, "cleared the .grad of f's parameters",
              "layer.weight.grad", kind=EDGE),
        wrong("a float32 copy of x", in_float32, "dtype torch.float32; expected torch.float64", kind=EDGE),
        wrong("through NumPy", input_through_numpy, "meta device", "Likely cause: the check passes an x on the meta device",
              kind=EDGE, outcome=Outcome.RAISED),
        wrong("a leaf kept per shape", leaf_kept_per_shape, "second call", "twice the right gradient",
              kind=STATEFUL),
        wrong("grad mode switched off and left off", grad_mode_left_off_after, "switched off for the whole session",
              kind=STATEFUL),
        wrong("ones_like(x)", ones_like_x, "wrong values", "f(x).sum()"),
        wrong("f(x) itself", the_output_itself, "shape (4, 2); expected (4, 3)"),
        wrong("x itself used when it requires grad", uses_x_itself_when_it_requires_grad, "changed x.grad",
              kind=EDGE),
        wrong("eval() for the gradient, then train()", eval_then_train, "handed in in eval mode",
              "left it in train mode", kind=EDGE),
        wrong("train(True) for the gradient", train_mode_for_the_gradient, "left it in train mode", kind=EDGE),
        wrong("frozen, then requires_grad_(True) for all", freeze_then_unfreeze,
              "switched requires_grad back on", "layer.bias had requires_grad=False", kind=EDGE),
        wrong("every parameter's requires_grad set to True afterwards", every_parameter_unfrozen_afterwards,
              "switched requires_grad back on", "not True for all", kind=EDGE),
        wrong("grad_outputs made on the CPU", grad_outputs_made_on_the_cpu, "expected device meta but got cpu",
              "Likely cause: the tensor you passed as the gradient of f(x)", "torch.ones_like(out)",
              kind=EDGE, outcome=Outcome.RAISED),
        # (eval mode for the gradient is another f's gradient when f holds a batch norm: issue 45, round 2)
        wrong("mode and requires_grad saved and put back", states_saved_and_put_back,
              "the one f gives in eval mode", "BatchNorm1d(3)", kind=EDGE),
        # -- issue 45, fresh round (from the task text) --
        wrong('the old .grad objects put back after backward()', ig_restore_grad_refs, "changed (added to, or replaced) the .grad of f's parameters",
              kind=STATEFUL),
        wrong('the gradients of x and every parameter asked at once', ig_all_grads, 'One of the differentiated Tensors does not require grad', 'bias frozen',
              kind=EDGE, outcome=Outcome.RAISED),
        wrong('grad mode switched on and left on', ig_grad_on, 'called under torch.no_grad()', 'left it switched on', 'torch.enable_grad()',
              kind=STATEFUL),
        wrong('float32 zeros for an empty x', ig_empty_zeros, 'dtype torch.float32; expected torch.float64', 'empty float64 x',
              kind=EDGE),
        wrong('the gradient squeezed', ig_squeeze, 'shape (3,); expected (1, 3)',
              kind=EDGE),
        wrong("a float32 leaf, returned in x's dtype", ig_float32, 'wrong values', 'edges of float64',
              kind=EDGE),
        wrong('backward(), then the new part taken out of the .grad', ig_backward_subtract, "left a gradient in the .grad of f's parameters"),
        wrong('zeros when f(x) is not recorded', ig_zeros_when_no_graph, 'wrong values', 'called under torch.no_grad()',
              kind=EDGE),
        wrong('one row at a time', ig_row_loop, 'wrong values', '(t * t).mean()',
              kind=EDGE),
        wrong("hooks that give f's parameters zeros", ig_zeroing_hooks, "left a gradient in the .grad of f's parameters"),
        wrong('torch.func.vjp of the sum', right_func_vjp, "would mutate a captured Tensor",
              "Likely cause: torch.func's transforms (grad, vjp) refuse a layer", kind=EDGE, outcome=Outcome.RAISED),
        # -- issue 45, second fresh round (from the task text) --
        wrong("f.eval() for the gradient, f.train(was) afterwards", ig_eval_restore, "the one f gives in eval mode",
              "BatchNorm1d(3)", kind=EDGE),
        wrong("f.train() for the gradient, f.train(was) afterwards", ig_train_restore,
              "sub-module f.1 in train mode", "handed in in eval mode", "f.train(flag) or f.eval() sets the mode",
              kind=STATEFUL),
        wrong("zeros on the CPU for an empty x", ig_empty_shortcut, "on cpu; expected meta", "empty x on the meta device",
              kind=EDGE),
        right("backward(inputs=(leaf,)) on the sum", right_backward_inputs_keyword),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()


def test_grad_outputs_on_the_cpu_is_not_blamed_on_moving_x():
    """The answer keeps x where it is (x.detach().requires_grad_()): advice to do just that, or
    not to go through .cpu()/.numpy(), would already be true of it; the message names the
    tensor that is on the other device."""
    message = ex.input_gradient.verdict(grad_outputs_made_on_the_cpu).message
    assert "keep x where it is" not in message and ".numpy()" not in message, message
    assert "grad_outputs=" in message and "on another device than f(x)" in message, message
