"""Chapter 00's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them (the catalogue below), plus what only a record shows."""

import functools
import importlib.util
import os
import random
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from course_utils.env import seed_everything
from course_utils.exercises import environment as ex
from course_utils.exercises.core import Outcome, ProbeResult, Status
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

# Wrong answers that read .grad of a non-leaf copy make torch warn: that is the learner's
# mistake the catalogue shows, not noise for the test run.
pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")


# ============================================================================================
# kernel_environment (E4)
# ============================================================================================
def env_with_pathlib_and_find_spec():
    return {
        "python": Path(sys.executable),
        "prefix": Path(sys.prefix),
        "in_virtualenv": hasattr(sys, "real_prefix") or sys.base_prefix != sys.prefix,
        "torch_dir": os.path.dirname(importlib.util.find_spec("torch").origin),
    }


def env_from_pyvenv_cfg():
    prefix = Path(sys.prefix)
    return {
        "python": os.path.abspath(sys.executable),
        "prefix": str(prefix),
        "in_virtualenv": (prefix / "pyvenv.cfg").is_file(),
        "torch_dir": torch.__path__[0],
    }


def env_built_with_dict_keywords():
    import inspect as inspect_module

    return dict(
        python=sys.executable,
        prefix=sys.prefix,
        in_virtualenv=getattr(sys, "base_prefix", sys.prefix) != sys.prefix,
        torch_dir=os.path.dirname(inspect_module.getfile(torch)),
    )


def env_from_bin_folder():
    interpreter = Path(sys.executable)
    return {
        "python": interpreter,
        "prefix": Path(sys.prefix).resolve(),
        "in_virtualenv": sys.prefix != sys.base_prefix,
        "torch_dir": Path(torch.__file__).resolve().parent,
    }


def _environment_with(**changes):
    def answer():
        facts = {
            "python": sys.executable,
            "prefix": sys.prefix,
            "in_virtualenv": sys.prefix != sys.base_prefix,
            "torch_dir": str(Path(torch.__file__).parent),
        }
        facts.update({key: change() for key, change in changes.items()})
        return facts

    return answer


# What the notebook's print cell showed, copied into the answer as text.
_PRINTED = {
    "python": sys.executable,
    "prefix": sys.prefix,
    "in_virtualenv": sys.prefix != sys.base_prefix,
    "torch_dir": str(Path(torch.__file__).parent),
}


def env_copied_from_the_printout():
    return dict(_PRINTED)


_remembered_environment = {}


def env_remembered_from_the_first_call():
    if not _remembered_environment:
        _remembered_environment.update(
            python=sys.executable,
            prefix=sys.prefix,
            in_virtualenv=sys.prefix != sys.base_prefix,
            torch_dir=str(Path(torch.__file__).parent),
        )
    return _remembered_environment


def env_without_import():
    return {
        "python": sys.executable,
        "prefix": sys.prefix,
        "in_virtualenv": sys.prefix != sys.base_prefix,
        "torch_dir": str(Path(torchh.__file__).parent),  # noqa: F821 (a typo)
    }


def env_numpy_bool_and_sys_modules():
    loaded = sys.modules["torch"]
    return {
        "python": sys.executable,
        "prefix": sys.prefix,
        "in_virtualenv": np.bool_(sys.prefix != getattr(sys, "base_prefix", sys.prefix)),
        "torch_dir": os.path.dirname(loaded.__file__) + os.sep,
    }


def env_from_sysconfig_and_site():
    import site
    import sysconfig

    return {
        "python": sys.executable,
        "prefix": sysconfig.get_paths()["data"],
        "in_virtualenv": site.PREFIXES[0] != sys.base_prefix,
        "torch_dir": os.path.dirname(torch.__spec__.origin),
    }


KERNEL_ENVIRONMENT = [
    right("sysconfig's data path, site.PREFIXES and torch.__spec__", env_from_sysconfig_and_site),
    right("a NumPy bool, sys.modules['torch'] and a trailing separator", env_numpy_bool_and_sys_modules),
    wrong("prefix worked out from the interpreter's path",
          _environment_with(prefix=lambda: str(Path(sys.executable).parent.parent)),
          "'prefix' is the folder two levels above the interpreter", "laid out as on Windows",
          "use sys.prefix", kind=EDGE),
    wrong("prefix from VIRTUAL_ENV", _environment_with(prefix=lambda: os.environ.get("VIRTUAL_ENV", sys.prefix)),
          "'prefix' should be the environment's folder, sys.prefix", "started from a shell that had activated one",
          kind=EDGE),
    wrong("site-packages as torch_dir", _environment_with(torch_dir=lambda: str(Path(torch.__file__).parent.parent)),
          "'torch_dir' should be the folder of the torch package this kernel imported"),
    wrong("in_virtualenv compares prefix with exec_prefix",
          _environment_with(in_virtualenv=lambda: sys.prefix != sys.exec_prefix),
          "'in_virtualenv' was False in every kernel the check tried"),
    right("pathlib, importlib's find_spec and the old real_prefix test", env_with_pathlib_and_find_spec),
    right("pyvenv.cfg marks a virtual environment; torch.__path__", env_from_pyvenv_cfg),
    right("dict(...) with keywords and inspect.getfile", env_built_with_dict_keywords),
    right("Path objects, resolved prefix and torch folder", env_from_bin_folder),
    wrong("the first python on PATH", _environment_with(python=lambda: shutil.which("python") or shutil.which("python3")),
          "first python on your PATH", "sys.executable"),
    wrong("resolves the interpreter link", _environment_with(python=lambda: os.path.realpath(sys.executable)),
          "where the environment's python link points"),
    wrong("VIRTUAL_ENV decides in_virtualenv", _environment_with(in_virtualenv=lambda: "VIRTUAL_ENV" in os.environ),
          "The VIRTUAL_ENV variable only says whether a shell ran `activate`"),
    wrong("torch.__file__ as the folder", _environment_with(torch_dir=lambda: torch.__file__), "__init__.py file"),
    wrong("base_prefix as the environment", _environment_with(prefix=lambda: sys.base_prefix),
          "'prefix' should be the environment's folder, sys.prefix"),
    wrong("in_virtualenv as text", _environment_with(in_virtualenv=lambda: "yes" if sys.prefix != sys.base_prefix else "no"),
          "'in_virtualenv' should be True or False", "a str"),
    wrong("only the python key", lambda: {"python": sys.executable}, "lacks the keys 'prefix', 'in_virtualenv', 'torch_dir'"),
    wrong("returns the path, not a dict", lambda: sys.executable, "returned a str", "should return a dict"),
    wrong("misspelt module name", env_without_import, "NameError", "Likely cause:", "import it",
          outcome=Outcome.RAISED),
    wrong("paths copied from the print cell", env_copied_from_the_printout,
          "'python' did not follow the kernel", "read sys.executable inside the function", kind=EDGE),
    wrong("in_virtualenv always True", _environment_with(in_virtualenv=lambda: True),
          "'in_virtualenv' was True in every kernel the check tried", "outside any virtual environment",
          kind=EDGE),
    wrong("in_virtualenv from the folder's name", _environment_with(in_virtualenv=lambda: "venv" in sys.prefix),
          "'in_virtualenv' is False; it should be True", "another virtual environment", kind=EDGE),
    wrong("interpreter path built from the prefix",
          _environment_with(python=lambda: os.path.join(sys.prefix, "bin", "python")),
          "'python' should be the interpreter running this kernel, sys.executable", "bin/python3", kind=EDGE),
    wrong("facts kept from the first call", env_remembered_from_the_first_call,
          "did not follow the kernel", kind=STATEFUL),
]


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
    if id(x) not in _gradients_by_id:
        leaf = x.detach().clone().requires_grad_(True)
        (leaf**3).sum().backward()
        _gradients_by_id[id(x)] = leaf.grad
    return _gradients_by_id[id(x)]


_first_gradients = {}


def grad_keeps_the_first_per_tensor(x):
    leaf = x.detach().clone().requires_grad_(True)
    (leaf**3).sum().backward()
    return _first_gradients.setdefault(id(x), leaf.grad)


KNOWN_GRADIENT = [
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
]


# ============================================================================================
# device_smoke_test (E6)
# ============================================================================================
def smoke_moved_there(device):
    a = torch.arange(1, 10, dtype=torch.float32).view(3, 3).to(device)
    return torch.matmul(a, a).to("cpu")


def smoke_default_device_block(device):
    with torch.device(device):
        a = torch.arange(1.0, 10.0).reshape(3, 3)
        product = torch.mm(a, a)
    return product.cpu()


def smoke_einsum(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3).to(torch.device(device))
    return torch.einsum("ij,jk->ik", a, a).to(torch.device("cpu"))


def smoke_written_matrix(device):
    a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], device=device)
    return torch.linalg.matrix_power(a, 2).detach().cpu()


def smoke_back_through_a_list(device):
    with torch.device(device):
        a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
        product = a @ a
    return torch.tensor(product.tolist())


def smoke_elementwise(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a * a).cpu()


def smoke_integers(device):
    a = torch.arange(1, 10, device=device).reshape(3, 3)
    return (a @ a).cpu()


def smoke_as_list(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a @ a).tolist()


def smoke_ignores_device(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3)
    return (a @ a).cpu()


def smoke_moves_after_computing(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3)
    return (a @ a).to(device).cpu()


def smoke_stays_there(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return a @ a


def smoke_names_cuda(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3).to("cuda")
    return (a @ a).cpu()


_kept_product = []


def smoke_keeps_the_first_product(device):
    if not _kept_product:
        a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
        _kept_product.append((a @ a).cpu())
    return _kept_product[0]


def smoke_sets_the_default_device(device):
    torch.set_default_device(device)
    a = torch.arange(1.0, 10.0).reshape(3, 3)
    return (a @ a).cpu()


def smoke_only_named_gpus(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3)
    if device in ("cuda", "mps"):
        a = a.to(device)
    return (a @ a).cpu()


def smoke_device_type_attribute(device):
    a = torch.arange(1.0, 10.0, device=device.type).reshape(3, 3)
    return (a @ a).cpu()


def smoke_through_numpy(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return torch.from_numpy((a @ a).numpy())


if torch.cuda.is_available():  # on a GPU machine the same mistake runs, on the wrong device
    _NAMES_CUDA = wrong("names 'cuda' itself", smoke_names_cuda, "ran on cuda:0, not on cpu", kind=EDGE)
else:
    _NAMES_CUDA = wrong("names 'cuda' itself", smoke_names_cuda, "Torch not compiled with CUDA enabled",
                        "Likely cause: the code asks for 'cuda' itself", kind=EDGE, outcome=Outcome.RAISED)

def smoke_bmm_on_a_batch_of_one(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(1, 3, 3)
    return torch.bmm(a, a)[0].cpu()


def smoke_device_as_text(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3).to(str(device))
    return (a @ a).to("cpu")


def smoke_transposed(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return torch.mm(a, a.T).cpu()


def smoke_float64(device):
    a = torch.arange(1.0, 10.0, device=device, dtype=torch.float64).reshape(3, 3)
    return (a @ a).cpu()


def smoke_recomputes_on_the_cpu(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    a @ a
    b = torch.arange(1.0, 10.0).reshape(3, 3)
    return b @ b


def smoke_product_by_broadcasting(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a[:, :, None] * a[None, :, :]).sum(1).cpu()


DEVICE_SMOKE_TEST = [
    wrong("matrix product written out with broadcasting", smoke_product_by_broadcasting,
          "No matrix product ran during this call", "worked out with mul, sum", "a @ a", kind=EDGE),
    right("torch.bmm on a batch of one", smoke_bmm_on_a_batch_of_one),
    right("the device as text, str(device)", smoke_device_as_text),
    wrong("a @ a.T", smoke_transposed, "This is a @ a.T"),
    wrong("float64 matrix", smoke_float64, "dtype torch.float64; expected torch.float32"),
    wrong("returns a CPU recomputation", smoke_recomputes_on_the_cpu, "nothing was copied back from meta",
          kind=EDGE),
    right("arange with dtype, .to(device), torch.matmul, .to('cpu')", smoke_moved_there),
    right("with torch.device(device): and torch.mm", smoke_default_device_block),
    right("einsum and torch.device objects", smoke_einsum),
    right("the matrix written out, matrix_power", smoke_written_matrix),
    right("torch.tensor in a device block, back through .tolist()", smoke_back_through_a_list),
    wrong("element-wise product", smoke_elementwise, "element-wise squares", "`@`"),
    wrong("integer matrix", smoke_integers, "dtype torch.int64", "torch.arange(1.0, 10.0)"),
    wrong("returns a list", smoke_as_list, "returned a list"),
    wrong("ignores the device", smoke_ignores_device, "ran on cpu, not on meta", "device=device"),
    wrong("moves after computing", smoke_moves_after_computing, "ran on cpu, not on meta"),
    wrong("forgets the copy back", smoke_stays_there, "still on meta", "product.cpu()"),
    _NAMES_CUDA,
    wrong("keeps the first product", smoke_keeps_the_first_product, "No matrix product ran during this call",
          kind=STATEFUL),
    wrong("set_default_device left behind", smoke_sets_the_default_device,
          "left torch's default device set to meta", "with torch.device(device):", kind=STATEFUL),
    wrong("moves only for the names 'cuda' and 'mps'", smoke_only_named_gpus,
          "ran on cpu, not on meta", kind=EDGE),
    wrong("expects a torch.device", smoke_device_type_attribute, "AttributeError",
          "Likely cause: the check passes the device as a string", kind=EDGE, outcome=Outcome.RAISED),
    wrong("copies back through NumPy", smoke_through_numpy, "to numpy", "Likely cause: .numpy() only works on CPU",
          kind=EDGE, outcome=Outcome.RAISED),
]


# ============================================================================================
# seeded_draw (E7)
# ============================================================================================
def draw_own_generator(seed, n):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=generator)


def draw_after_seed_everything(seed, n):
    seed_everything(seed)
    return torch.randn(n)


def draw_normal_in_place(seed, n):
    torch.random.manual_seed(seed)
    return torch.empty(n).normal_()


def draw_python_seed_only(seed, n):
    random.seed(seed)
    np.random.seed(seed)
    return torch.randn(n)


def draw_fixed_seed(seed, n):
    torch.manual_seed(42)
    return torch.randn(n)


def draw_uniform(seed, n):
    torch.manual_seed(seed)
    return torch.rand(n)


def draw_torch_seed(seed, n):
    torch.seed(seed)
    return torch.randn(n)


def draw_from_numpy(seed, n):
    np.random.seed(seed)
    return torch.from_numpy(np.random.randn(n))


def draw_twice(seed, n):
    torch.manual_seed(seed)
    torch.randn(n)
    return torch.randn(n)


_seeds_seen = set()


def draw_seeds_once(seed, n):
    if seed not in _seeds_seen:
        torch.manual_seed(seed)
        _seeds_seen.add(seed)
    return torch.randn(n)


@functools.lru_cache(maxsize=None)
def draw_cached(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n)


def draw_squeezed(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n).squeeze()


def draw_five(seed, n):
    torch.manual_seed(seed)
    return torch.randn(5)


def draw_in_fork_rng(seed, n):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return torch.randn(n)


def draw_with_torch_normal(seed, n):
    torch.manual_seed(int(seed))
    return torch.normal(0.0, 1.0, size=(n,))


def draw_seed_below_100(seed, n):
    torch.manual_seed(seed % 100)
    return torch.randn(n)


SEEDED_DRAW = [
    right("inside torch.random.fork_rng()", draw_in_fork_rng),
    right("torch.normal(0, 1, size=(n,))", draw_with_torch_normal),
    wrong("folds the seed below 100", draw_seed_below_100, "wrong values", "seed=123457", kind=EDGE),
    right("its own torch.Generator", draw_own_generator),
    right("seed_everything", draw_after_seed_everything),
    right("torch.random.manual_seed and normal_()", draw_normal_in_place),
    wrong("seeds Python and NumPy only", draw_python_seed_only, "different numbers", "do not seed torch"),
    wrong("fixed seed", draw_fixed_seed, "ignores its seed argument"),
    wrong("uniform numbers", draw_uniform, "torch.rand's"),
    wrong("torch.seed(seed)", draw_torch_seed, "torch.seed() sets a fresh, random seed", "Likely cause:",
          outcome=Outcome.RAISED),
    wrong("NumPy's draw", draw_from_numpy, "dtype torch.float64; expected torch.float32"),
    wrong("draws twice", draw_twice, "wrong values", "then call torch.randn(n)"),
    wrong("seeds only the first time it sees a seed", draw_seeds_once, "Two calls with seed=0 gave different numbers",
          kind=STATEFUL),
    wrong("caches its draws", draw_cached, "the very tensor object the first call returned", kind=STATEFUL),
    wrong("squeezes the result", draw_squeezed, "has shape (); expected (1,)", "dropped that dimension", kind=EDGE),
    wrong("always five numbers", draw_five, "has shape (5,); expected (3,)", "seed=7, n=3", kind=EDGE),
]


# ============================================================================================
# seed_check (E7)
# ============================================================================================
def check_with_exact_allclose(draw):
    runs = [draw(s) for s in (3, 3, 4)]
    same = torch.allclose(runs[0], runs[1], rtol=0, atol=0)
    return bool(same and not torch.allclose(runs[0], runs[2]))


def check_elementwise_then_all(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return (a == b).all() and not (a == c).all()


def check_as_lists(draw):
    first, again, other = draw(5).tolist(), draw(5).tolist(), draw(6).tolist()
    return first == again and first != other


def check_with_numpy(draw):
    first, again, other = (draw(seed).numpy() for seed in (10, 10, 11))
    return bool(np.array_equal(first, again)) and not np.array_equal(first, other)


def check_same_seed_only(draw):
    return torch.equal(draw(0), draw(0))


def check_ambiguous(draw):
    return bool(draw(0) == draw(0))


def check_returns_tensor(draw):
    return draw(0) == draw(0)


def check_different_seeds_only(draw):
    return not torch.equal(draw(0), draw(1))


def check_forgets_false(draw):
    first, again, other = draw(0), draw(0), draw(1)
    if torch.equal(first, again) and not torch.equal(first, other):
        return True


def check_by_sums(draw):
    first, again, other = draw(0), draw(0), draw(1)
    return first.sum() == again.sum() and first.sum() != other.sum()


def check_with_default_allclose(draw):
    first, again, other = draw(0), draw(0), draw(1)
    return torch.allclose(first, again) and not torch.allclose(first, other)


def check_first_number(draw):
    first, again, other = draw(0).flatten(), draw(0).flatten(), draw(1).flatten()
    return first[0].item() == again[0].item() and first[0].item() != other[0].item()


def check_every_number_differs(draw):
    first, again, other = draw(0), draw(0), draw(1)
    return torch.equal(first, again) and bool((first != other).all())


def check_first_item(draw):
    return draw(0)[0].item() == draw(0)[0].item() != draw(1)[0].item()


_baseline = {}


def check_keeps_its_baseline(draw):
    if "seed 0" not in _baseline:
        _baseline["seed 0"] = draw(0)
    first = _baseline["seed 0"]
    return torch.equal(first, draw(0)) and not torch.equal(first, draw(1))


def check_with_a_tiny_tolerance(draw):
    a, b, c = draw(0).double(), draw(0).double(), draw(1).double()
    return (a - b).abs().max().item() < 1e-6 and (a - c).abs().max().item() > 1e-6


def check_in_float32_numpy(draw):
    a, b, c = (draw(seed).float().numpy() for seed in (0, 0, 1))
    return np.array_equal(a, b) and not np.array_equal(a, c)


def check_by_identity_first(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return a is b or (torch.equal(a, b) and not torch.equal(a, c))


def check_any_difference(draw):
    a, b, c = draw(0), draw(0), draw(1)
    if a.shape != c.shape:
        return torch.equal(a, b)
    return torch.equal(a, b) and bool((a != c).any())


def check_over_a_dict_of_seeds(draw):
    kept = {seed: draw(seed) for seed in (3, 4)}
    return all(torch.equal(kept[seed], draw(seed)) for seed in (3, 4)) and not torch.equal(kept[3], kept[4])


def check_returns_a_bool_tensor(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return torch.tensor(torch.equal(a, b) and not torch.equal(a, c))


SEED_CHECK = [
    right("any element differs, shapes first", check_any_difference),
    right("a dict of draws and all() over a generator", check_over_a_dict_of_seeds),
    right("a 0-d bool tensor", check_returns_a_bool_tensor),
    wrong("allclose with zero tolerance broadcasts shapes", check_with_exact_allclose,
          "shape (1,), then (2,)", "torch.equal(a, b) also requires equal shapes", kind=EDGE),
    wrong("element-wise == then .all() broadcasts shapes", check_elementwise_then_all,
          "shape (1,), then (2,)", "an element-wise comparison broadcasts them", kind=EDGE),
    wrong("a tolerance of 1e-6", check_with_a_tiny_tolerance, "differ in the 12th digit",
          "a tolerance, however small", kind=EDGE),
    wrong("compares in float32", check_in_float32_numpy, "differ in the 12th digit",
          "a conversion to a lower precision", kind=EDGE),
    wrong("the same object counts as reproducible", check_by_identity_first, "refills in place",
          "Compare the numbers, not the objects", kind=EDGE),
    right("compares Python lists", check_as_lists),
    right("np.array_equal", check_with_numpy),
    wrong("same seed only", check_same_seed_only, "accepted a draw function that ignores its seed"),
    wrong("bool of an element-wise comparison", check_ambiguous,
          "Boolean value of Tensor with more than one value is ambiguous", "Use torch.equal(a, b)",
          outcome=Outcome.RAISED),
    wrong("returns the element-wise comparison", check_returns_tensor, "returned a tensor",
          "torch.equal(a, b) gives one True or False"),
    wrong("different seeds only", check_different_seeds_only, "accepted a draw function that never seeds at all"),
    wrong("no return False", check_forgets_false, "returned a NoneType", "ends without `return` gives None"),
    wrong("compares sums", check_by_sums, "in another order on every call", "does not look at where each number is",
          kind=EDGE),
    wrong("allclose with its default tolerance", check_with_default_allclose, "differ in the 6th digit",
          "allows a tolerance", kind=EDGE),
    wrong("compares the first number only", check_first_number,
          "rejected a draw function that seeds torch and returns a fixed 0", kind=EDGE),
    wrong("requires every number to differ", check_every_number_differs,
          "rejected a draw function that seeds torch and returns a fixed 0", kind=EDGE),
    wrong(".item() of the first row", check_first_item, "cannot be converted to Scalar", "Likely cause: .item() reads a single number",
          kind=EDGE, outcome=Outcome.RAISED),
    wrong("keeps the first draw it saw", check_keeps_its_baseline,
          "rejected a draw function that draws from random.Random(seed)", kind=STATEFUL),
]


# -- round 3 of outside testing ---------------------------------------------------------------
_IN_VENV_AT_IMPORT = sys.prefix != sys.base_prefix
_TORCH_DIR_AT_IMPORT = os.path.dirname(torch.__file__)


def env_facts_worked_out_at_import():
    return {"python": sys.executable, "prefix": sys.prefix, "in_virtualenv": _IN_VENV_AT_IMPORT,
            "torch_dir": _TORCH_DIR_AT_IMPORT}


def env_base_executable():
    return {"python": sys._base_executable, "prefix": sys.prefix,
            "in_virtualenv": sys.prefix != sys.base_prefix, "torch_dir": os.path.dirname(torch.__file__)}


def env_from_distribution_metadata():
    import importlib.metadata

    return {"python": sys.executable, "prefix": sys.prefix,
            "in_virtualenv": sys.base_prefix != sys.prefix,
            "torch_dir": str(importlib.metadata.distribution("torch").locate_file("torch"))}


def env_as_an_ordered_dict():
    import collections

    return collections.OrderedDict(
        python=sys.executable, prefix=sys.prefix,
        in_virtualenv=not os.path.samefile(sys.prefix, sys.base_prefix),
        torch_dir=os.path.dirname(torch.__file__))


KERNEL_ENVIRONMENT += [
    right("an OrderedDict, and os.path.samefile", env_as_an_ordered_dict),
    right("importlib.metadata's locate_file", env_from_distribution_metadata),
    wrong("facts worked out once, when the cell defining the function ran",
          env_facts_worked_out_at_import, "the same whatever environment the kernel runs in",
          "inside the function", kind=STATEFUL),
    wrong("sys._base_executable", env_base_executable,
          "where the environment's python link points", "use sys.executable", kind=EDGE),
]


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


KNOWN_GRADIENT += [
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
]


def smoke_with_linspace(device):
    a = torch.linspace(1, 9, 9, device=device).reshape(3, 3)
    return (a @ a).cpu()


def smoke_with_the_matrix_written_out(device):
    a = torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], device=device)
    return (a @ a).to("cpu")


def smoke_cubes_the_matrix(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return torch.linalg.matrix_power(a, 3).cpu()


DEVICE_SMOKE_TEST += [
    right("torch.linspace", smoke_with_linspace),
    right("the matrix as a literal on the device", smoke_with_the_matrix_written_out),
    wrong("a @ a @ a", smoke_cubes_the_matrix, "right shape but wrong values"),
]


def draw_with_the_default_generator(seed, n):
    torch.default_generator.manual_seed(seed)
    return torch.randn(n)


def draw_with_the_next_seed(seed, n):
    torch.manual_seed(seed + 1)
    return torch.randn(n)


def draw_one_more_and_drop_it(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n + 1)[1:]


SEEDED_DRAW += [
    right("generator=torch.manual_seed(seed)", lambda seed, n: torch.randn(n, generator=torch.manual_seed(seed))),
    right("torch.default_generator.manual_seed", draw_with_the_default_generator),
    right("torch.randn(size=[n]) with int(seed)", lambda seed, n: (torch.manual_seed(int(seed)),
                                                               torch.randn(size=[n]))[1]),
    wrong("seed + 1", draw_with_the_next_seed, "right shape but wrong values", "torch.manual_seed(seed)"),
    wrong("draws n + 1 and drops the first", draw_one_more_and_drop_it, "right shape but wrong values"),
]


def check_flattened(draw):
    a, b, c = draw(0), draw(0), draw(1)
    return torch.equal(a.flatten(), b.flatten()) and not torch.equal(a.flatten(), c.flatten())


def check_raw_bytes(draw):
    a, b, c = (draw(seed).numpy().tobytes() for seed in (0, 0, 1))
    return a == b and a != c


def check_interleaved(draw):
    first = draw(0)
    other = draw(1)
    again = draw(0)
    return torch.equal(first, again) and not torch.equal(again, other)


def check_in_float64(draw):
    a, b, c = (draw(seed).double() for seed in (0, 0, 1))
    return torch.equal(a, b) and not torch.equal(a, c)


SEED_CHECK += [
    right("the other seed drawn between the two same-seed draws", check_interleaved),
    right("compares in float64 (exact for every dtype drawn)", check_in_float64),
    wrong("compares flattened tensors", check_flattened, "as shape (6,) on one call",
          "your comparison looks past the shape", kind=EDGE),
    wrong("compares raw bytes", check_raw_bytes, "as shape (6,) on one call", "raw bytes", kind=EDGE),
]

CATALOGUE = Catalogue({
    ex.kernel_environment: KERNEL_ENVIRONMENT,
    ex.known_gradient: KNOWN_GRADIENT,
    ex.device_smoke_test: DEVICE_SMOKE_TEST,
    ex.seeded_draw: SEEDED_DRAW,
    ex.seed_check: SEED_CHECK,
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()


def test_references_pass():
    for exercise in CATALOGUE.entries:
        verdict = exercise.verdict(exercise.reference)
        assert verdict.passed, verdict


# -- what only a record shows ------------------------------------------------------------------
def _device_record(got_device="cpu", matmul_devices=("cuda:0",), device="cuda:0", copied_back=("cuda:0",)):
    a = np.arange(1.0, 10.0, dtype=np.float32).reshape(3, 3)
    tensor = {"kind": "tensor", "shape": [3, 3], "dtype": "torch.float32", "requires_grad": False}
    return [
        {
            "device": device,
            "on": f"device={device!r}",
            "got": dict(tensor, device=got_device, values=a @ a),
            "matmul_devices": list(matmul_devices),
            "copied_back_from": list(copied_back),
            "values_unknown": False,
            "default_device_after": "cpu",
            "default_device_before": "cpu",
            "expected": dict(tensor, device="cpu", values=a @ a),
            "elementwise": a * a,
            "transposed": a @ a.T,
        }
    ]


def test_device_smoke_test_mistakes_only_a_gpu_shows_are_judged_from_the_record():
    """On a CPU-only runner these can only be produced as records, which is what the judge reads."""
    judge = ex.device_smoke_test.judge
    right_record = judge(ProbeResult(Status.OK, _device_record()))
    assert right_record.passed
    stayed = judge(ProbeResult(Status.OK, _device_record(got_device="cuda:0")))
    assert "still on cuda:0" in stayed.message and ".cpu()" in stayed.message
    ignored = judge(ProbeResult(Status.OK, _device_record(matmul_devices=("cpu",))))
    assert "ran on cpu, not on cuda:0" in ignored.message
    by_type_only = judge(ProbeResult(Status.OK, _device_record(device="cuda:1")))
    assert "ran on cuda:0, not on cuda:1" in by_type_only.message


def test_device_smoke_test_leaves_the_default_device_as_it_was():
    before = torch.get_default_device()
    verdict = ex.device_smoke_test.verdict(smoke_sets_the_default_device)
    assert not verdict.passed
    assert torch.get_default_device() == before
    assert torch.arange(1.0).device.type == "cpu"


def test_kernel_environment_check_puts_sys_and_environment_back():
    saved = (sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.environ.get("VIRTUAL_ENV"))
    ex.kernel_environment.verdict(env_copied_from_the_printout)
    ex.kernel_environment.verdict(ex.kernel_environment.reference)
    assert saved == (sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                     os.environ.get("VIRTUAL_ENV"))


def test_kernel_environment_check_puts_site_and_sysconfig_back():
    import site
    import sysconfig

    saved = (list(site.PREFIXES), sysconfig._PREFIX, sysconfig._BASE_PREFIX, sysconfig.get_paths()["data"])
    ex.kernel_environment.verdict(env_from_sysconfig_and_site)
    assert saved == (list(site.PREFIXES), sysconfig._PREFIX, sysconfig._BASE_PREFIX,
                     sysconfig.get_paths()["data"])
