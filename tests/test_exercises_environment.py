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


KERNEL_ENVIRONMENT = [
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


KNOWN_GRADIENT = [
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

DEVICE_SMOKE_TEST = [
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


SEEDED_DRAW = [
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


SEED_CHECK = [
    right("allclose with zero tolerance", check_with_exact_allclose),
    right("element-wise == then .all()", check_elementwise_then_all),
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
