"""Chapter 00's known_gradient (E6): its catalogue of right and wrong answers."""

import pytest
import torch

from course_utils.exercises import environment as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# Wrong answers that read .grad of a non-leaf copy make torch warn: that is the learner's
# mistake the catalogue shows, not noise for the test run.
pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")


# ============================================================================================
# known_gradient (E6)
# ============================================================================================
def grad_with_autograd_grad(x):
    x = x.clone().requires_grad_()
    (gradient,) = torch.autograd.grad((x**3).sum(), x)
    return gradient


def grad_with_torch_func(x):
    return torch.func.grad(lambda t: (t**3).sum())(x.detach())


def grad_detached_alias(x):
    leaf = x.detach().requires_grad_(True)
    y = leaf**3
    y.backward(torch.ones_like(y))
    return leaf.grad


def grad_forgot_requires_grad(x):
    (x**3).sum().backward()
    return x.grad


def grad_backward_on_a_vector(x):
    x = x.clone().requires_grad_()
    (x**3).backward()
    return x.grad


def grad_returns_y(x):
    return x**3


def grad_backward_twice(x):
    x = x.clone().requires_grad_()
    y = (x**3).sum()
    y.backward(retain_graph=True)
    y.backward()
    return x.grad


def grad_forgot_return(x):
    x = x.clone().requires_grad_()
    (x**3).sum().backward()


def grad_detaches_the_callers_x(x):
    x = x.detach_().clone().requires_grad_(True)
    (x**3).sum().backward()
    return x.grad


def grad_clones_without_detach(x):
    x = x.clone().requires_grad_(True)
    (x**3).sum().backward()
    return x.grad


def grad_also_takes_a_step(x):
    x.requires_grad_(True)
    (x**3).sum().backward()
    with torch.no_grad():
        x -= 0.1 * x.grad
    return x.grad


def grad_on_the_callers_x(x):
    x.requires_grad_(True)
    torch.sum(torch.pow(x, 3)).backward()
    return x.grad


def grad_by_formula(x):
    return 3 * x**2


def grad_in_float32(x):
    x = x.detach().float().requires_grad_(True)
    (x**3).sum().backward()
    return x.grad


def grad_flattens_with_view(x):
    flat = x.detach().clone().view(-1).requires_grad_(True)
    (flat**3).sum().backward()
    return flat.grad.view(x.shape)


def grad_reuses_an_x_that_records(x):
    if not x.requires_grad:
        x = x.detach().clone().requires_grad_(True)
    (x**3).sum().backward()
    return x.grad


def grad_float32_then_back(x):
    leaf = x.detach().float().requires_grad_(True)
    (leaf**3).sum().backward()
    return leaf.grad.to(x.dtype)


def grad_backward_then_formula(x):
    leaf = x.detach().clone().requires_grad_(True)
    (leaf**3).sum().backward()  # "autograd ran"
    return 3 * leaf.detach() ** 2


def grad_of_the_cubed_sum(x):
    leaf = x.detach().clone().requires_grad_(True)
    (leaf.sum() ** 3).backward()
    return leaf.grad


def grad_of_the_mean(x):
    leaf = x.detach().clone().requires_grad_(True)
    (leaf**3).mean().backward()
    return leaf.grad


_kept_leaves = {}


def grad_reuses_one_leaf_per_shape(x):
    key = (tuple(x.shape), x.dtype)
    if key not in _kept_leaves:
        _kept_leaves[key] = torch.zeros_like(x).requires_grad_(True)
    leaf = _kept_leaves[key]
    with torch.no_grad():
        leaf.copy_(x)
    (leaf**3).sum().backward()
    return leaf.grad


def grad_autograd_grad_on_x_when_it_records(x):
    if not x.requires_grad:
        x = x.detach().requires_grad_(True)
    (gradient,) = torch.autograd.grad((x**3).sum(), x)
    return gradient


def grad_from_a_hook(x):
    leaf = x.detach().clone().requires_grad_(True)
    seen = []
    leaf.register_hook(seen.append)
    (leaf**3).sum().backward()
    return seen[0]


def grad_through_a_list(x):
    leaf = x.detach().clone().requires_grad_(True)
    (leaf**3).sum().backward()
    return torch.tensor(leaf.grad.tolist(), dtype=x.dtype)


def grad_with_functional_vjp(x):
    _, gradient = torch.autograd.functional.vjp(lambda t: (t**3).sum(), x.detach())
    return gradient


_gradients_by_id = {}


def grad_cached_by_id(x):
    if id(x) not in _gradients_by_id or _gradients_by_id[id(x)][0] is not x:  # x kept: ids are reused
        leaf = x.detach().clone().requires_grad_(True)
        (leaf**3).sum().backward()
        _gradients_by_id[id(x)] = (x, leaf.grad)
    return _gradients_by_id[id(x)][1]


_first_gradients = {}


def grad_keeps_the_first_per_tensor(x):
    leaf = x.detach().clone().requires_grad_(True)
    (leaf**3).sum().backward()
    return _first_gradients.setdefault(id(x), leaf.grad)


# -- round 3 of outside testing ---------------------------------------------------------------
def gradient_then_grad_mode_off(x):
    x = x.detach().clone().requires_grad_(True)
    (x**3).sum().backward()
    torch.set_grad_enabled(False)  # "done with autograd"
    return x.grad


def gradient_drops_the_callers_grad(x):
    if x.grad is not None:
        x.grad = None  # "start from a clean gradient"
    x = x.detach().clone().requires_grad_(True)
    (x**3).sum().backward()
    return x.grad


def gradient_with_create_graph(x):
    x = x.detach().clone().requires_grad_(True)
    return torch.autograd.grad((x**3).sum(), x, create_graph=True)[0]


def gradient_through_x_data(x):
    leaf = x.data.clone()
    leaf.requires_grad_()
    torch.sum(torch.pow(leaf, 3)).backward()
    return leaf.grad


def gradient_by_autograd_backward_with_inputs(x):
    leaf = x.detach().clone().requires_grad_()
    torch.autograd.backward((leaf**3).sum(), inputs=[leaf])
    return leaf.grad


def gradient_under_no_grad(x):
    leaf = x.detach().clone().requires_grad_(True)  # a leaf that requires grad, as advised
    with torch.no_grad():
        total = (leaf ** 3).sum()
    total.backward()
    return leaf.grad


# -- issue 45, fresh round (from the task text) ------------------------------------------
def grad_flattened(x):
    x = x.detach().reshape(-1).clone().requires_grad_(True)
    (x ** 3).sum().backward()
    return x.grad


def grad_of_a_copy_through_tolist(x):
    x = torch.tensor(x.tolist(), requires_grad=True)
    (x ** 3).sum().backward()
    return x.grad


def grad_as_numpy(x):
    x = x.detach().clone().requires_grad_(True)
    (x ** 3).sum().backward()
    return x.grad.numpy()


def grad_formula_for_a_scalar(x):
    if x.dim() == 0:
        return torch.tensor(3 * x.item() ** 2)
    x = x.detach().clone().requires_grad_(True)
    (x ** 3).sum().backward()
    return x.grad


def grad_of_abs_cubed(x):
    x = x.detach().clone().requires_grad_(True)
    (x.abs() ** 3).sum().backward()
    return x.grad


def grad_of_exp_3_log(x):
    x = x.detach().clone().requires_grad_(True)
    torch.exp(3 * torch.log(x)).sum().backward()
    return x.grad


def grad_squeezed(x):
    x = x.detach().clone().squeeze().requires_grad_(True)
    (x ** 3).sum().backward()
    return x.grad


def grad_zeroed_after_reading(x):
    x = x.detach().clone().requires_grad_(True)
    (x ** 3).sum().backward()
    grad = x.grad
    x.grad.zero_()  # tidy up after backward
    return grad


def grad_empty_shortcut(x):
    if x.numel() == 0:
        return torch.zeros(0)
    x = x.detach().clone().requires_grad_(True)
    (x ** 3).sum().backward()
    return x.grad


def grad_tuple_from_autograd_grad(x):
    x = x.detach().clone().requires_grad_(True)
    return torch.autograd.grad((x ** 3).sum(), x)


def grad_of_a_product_with_a_seed_gradient(x):
    with torch.enable_grad():
        leaf = x.detach().clone().requires_grad_()
        (leaf * leaf * leaf).sum().backward(gradient=torch.tensor(1.0, dtype=x.dtype))
    return leaf.grad


CATALOGUE = Catalogue({
    ex.known_gradient: [
        wrong("caches the gradient by id(x)", grad_cached_by_id, "No backward pass ran during this call",
              "a result kept from an earlier call", kind=STATEFUL),
        wrong("runs backward but returns the first gradient kept per tensor", grad_keeps_the_first_per_tensor,
              "after the caller changed x in place", "gradient of x's old numbers", kind=STATEFUL),
        right("autograd.grad on x itself when it already records", grad_autograd_grad_on_x_when_it_records),
        right("a tensor hook catches the gradient", grad_from_a_hook),
        right("gradient copied through a Python list", grad_through_a_list),
        right("torch.autograd.functional.vjp", grad_with_functional_vjp),
        wrong("computes in float32, converts back", grad_float32_then_back,
              "agrees with 3x² to about 7 digits only", "float64", kind=EDGE),
        wrong("runs backward, returns the formula", grad_backward_then_formula,
              "computed from x outside it, not by it", "x.grad after backward()"),
        wrong("(x.sum())**3", grad_of_the_cubed_sum, "wrong values"),
        wrong("(x**3).mean()", grad_of_the_mean, "wrong values"),
        wrong("one leaf per shape, reused", grad_reuses_one_leaf_per_shape, "returned twice 3x²",
              "a second call with the same x", kind=STATEFUL),
        right("torch.autograd.grad on a clone", grad_with_autograd_grad),
        right("torch.func.grad", grad_with_torch_func),
        right("backward(ones) on a detached alias", grad_detached_alias),
        wrong("forgot requires_grad", grad_forgot_requires_grad,
              "RuntimeError: element 0 of tensors does not require grad", "Likely cause: x has requires_grad=False",
              outcome=Outcome.RAISED),
        wrong("backward on a vector", grad_backward_on_a_vector,
              "grad can be implicitly created only for scalar outputs", "Sum first", outcome=Outcome.RAISED),
        wrong("returns y", grad_returns_y, "You returned y = x**3 itself"),
        wrong("backward twice", grad_backward_twice, "twice 3x²", "2 backward passes ran", "accumulate"),
        wrong("forgot return", grad_forgot_return, "returned None"),
        wrong("3x² written out", grad_by_formula, "no backward pass ran during the call", "computed by autograd"),
        wrong("detaches the caller's x", grad_detaches_the_callers_x,
              "changed the caller's x in place", "with requires_grad=True", "x.detach_()",
              "use x.detach(), which returns a new tensor", kind=STATEFUL),
        wrong("clones an x that records", grad_clones_without_detach,
              "returned None on an x that itself requires grad", "Copy with x.detach().clone()", kind=EDGE),
        wrong("also takes a step", grad_also_takes_a_step, "changed its input x in place", "leave x as it was",
              kind=STATEFUL),
        wrong("requires_grad_ on the caller's x", grad_on_the_callers_x,
              "switched on requires_grad for the caller's own x", kind=STATEFUL),
        wrong("backward into an x that already records", grad_reuses_an_x_that_records,
              "changed the caller's x.grad", "with requires_grad=True", kind=STATEFUL),
        wrong("copies x as float32", grad_in_float32, "dtype torch.float32; expected torch.float64", "float64",
              kind=EDGE),
        wrong(".view on a transposed x", grad_flattens_with_view, "view size is not compatible",
              "Likely cause: x can be non-contiguous", "transposed", kind=EDGE, outcome=Outcome.RAISED),
        # -- round 3 of outside testing
        wrong("a leaf, but computed under no_grad", gradient_under_no_grad,
              "Likely cause: your function computes under torch.no_grad()", outcome=Outcome.RAISED),
        right("torch.autograd.backward(..., inputs=[leaf])", gradient_by_autograd_backward_with_inputs),
        right("autograd.grad with create_graph=True: the result records", gradient_with_create_graph),
        right("x.data.clone() and torch.pow", gradient_through_x_data),
        wrong("switches grad mode off after backward", gradient_then_grad_mode_off,
              "left autograd switched off for the whole session", "with torch.no_grad():",
              kind=STATEFUL),
        wrong("clears the caller's .grad first", gradient_drops_the_callers_grad,
              "changed the caller's x.grad", "held a .grad before the call and none after it",
              kind=STATEFUL),
        # -- issue 45, fresh round (from the task text) --

        wrong("flattens x", grad_flattened, "has shape (6,); expected (2, 3)"),
        wrong("copies x through tolist()", grad_of_a_copy_through_tolist, "dtype torch.float32; expected torch.float64",
              kind=EDGE),
        wrong("returns a NumPy array", grad_as_numpy, "is a numpy.ndarray", "expected a torch.Tensor"),
        wrong("3x² by hand for a 0-d x", grad_formula_for_a_scalar, "no backward pass ran", "0-dimensional", kind=EDGE),
        wrong("(x.abs()**3).sum()", grad_of_abs_cubed, "right shape but wrong values"),
        wrong("x**3 as exp(3 log x)", grad_of_exp_3_log, "right shape but wrong values", "got nan", kind=EDGE),
        wrong("squeezes x", grad_squeezed, "has shape (4, 2); expected (4, 1, 2)", kind=EDGE),
        wrong("zeroes the .grad it returns", grad_zeroed_after_reading, "right shape but wrong values", "got 0"),
        wrong("torch.zeros(0) for an empty x", grad_empty_shortcut, "dtype torch.float32; expected torch.float64",
              "(empty)", kind=EDGE),
        wrong("returns autograd.grad's tuple", grad_tuple_from_autograd_grad, "is a tuple", "expected a torch.Tensor"),
        right("leaf * leaf * leaf, backward(gradient=1) under enable_grad", grad_of_a_product_with_a_seed_gradient),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
