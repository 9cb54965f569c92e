"""Chapter 00 — Environment: know which Python runs, prove the install works, prove seeding works.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.facts import same_values, shape_text, tensor_problem, value_facts

CHAPTER = "environment"


# ============================================================================================
# E4 — which interpreter, which environment, which torch
# ============================================================================================
def kernel_environment():
    return {
        "python": sys.executable,
        "prefix": sys.prefix,
        "in_virtualenv": sys.prefix != sys.base_prefix,
        "torch_dir": str(Path(torch.__file__).parent),
    }

_ENV_KEYS = ("python", "prefix", "in_virtualenv", "torch_dir")


def _normal_path(value) -> str | None:
    if not isinstance(value, (str, os.PathLike)):
        return None
    return os.path.normcase(os.path.abspath(os.fspath(value)))


def _probe_kernel_environment(answer, run):
    import torch

    got = run(answer, on="kernel_environment()")
    truth = {
        "python": _normal_path(sys.executable),
        "prefix": _normal_path(sys.prefix),
        "in_virtualenv": sys.prefix != sys.base_prefix,
        "torch_dir": _normal_path(Path(torch.__file__).parent),
    }
    record = {"kind": value_facts(got)["kind"], "truth": truth, "got": {}, "keys": []}
    if type(got) is dict:
        record["keys"] = sorted(str(key) for key in got)
        for key in _ENV_KEYS:
            if key in got:
                value = got[key]
                entry = {"facts": value_facts(value)}
                if key == "in_virtualenv":
                    entry["bool"] = value if type(value) is bool else None
                else:
                    entry["path"] = _normal_path(value)
                record["got"][key] = entry
    python_on_path = shutil.which("python") or shutil.which("python3")
    record["clues"] = {
        "python_on_path": _normal_path(python_on_path) if python_on_path else "",
        "python_resolved": _normal_path(os.path.realpath(sys.executable)),
        "torch_file": _normal_path(torch.__file__),
        "virtual_env_var_set": "VIRTUAL_ENV" in os.environ,
    }
    return record


def _judge_kernel_environment(record):
    if record["kind"] != "dict":
        return f"kernel_environment() returned a {record['kind']}; it should return a dict."
    missing = [key for key in _ENV_KEYS if key not in record["got"]]
    if missing:
        return (
            f"Your dict lacks the key{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(k) for k in missing)} (it has: {', '.join(record['keys']) or 'none'})."
        )
    truth, got, clues = record["truth"], record["got"], record["clues"]

    python = got["python"]["path"]
    if python != truth["python"]:
        if python and python == clues["python_on_path"]:
            return (
                "'python' is the first python on your PATH (what `which python` finds), which "
                "need not be the interpreter running this kernel: JupyterLab can start kernels "
                "from other environments. Use sys.executable."
            )
        if python and python == clues["python_resolved"]:
            return (
                "'python' is where the environment's python link points (the base installation "
                "it was made from). The environment is named by the link itself: use "
                "sys.executable as it is, without resolving it."
            )
        return f"'python' should be the interpreter running this kernel ({truth['python']}), not {got['python']['facts'].get('repr')}."

    prefix = got["prefix"]["path"]
    if prefix != truth["prefix"]:
        return (
            f"'prefix' should be the environment's folder, sys.prefix ({truth['prefix']}); "
            f"got {got['prefix']['facts'].get('repr')}. (sys.base_prefix is the installation "
            "the environment was made from.)"
        )

    flag = got["in_virtualenv"]["bool"]
    if flag is None:
        return (
            f"'in_virtualenv' should be True or False; got a {got['in_virtualenv']['facts']['kind']} "
            f"({got['in_virtualenv']['facts'].get('repr')})."
        )
    if flag != truth["in_virtualenv"]:
        if flag == clues["virtual_env_var_set"]:
            return (
                f"'in_virtualenv' is {flag}, but this kernel {'runs' if truth['in_virtualenv'] else 'does not run'} "
                "in a virtual environment. The VIRTUAL_ENV variable only says whether a shell "
                "ran `activate`; a kernel started by JupyterLab usually was not. Compare "
                "sys.prefix with sys.base_prefix: they differ inside a virtual environment."
            )
        return (
            f"'in_virtualenv' is {flag}; it should be {truth['in_virtualenv']}. Inside a virtual "
            "environment sys.prefix differs from sys.base_prefix."
        )

    torch_dir = got["torch_dir"]["path"]
    if torch_dir != truth["torch_dir"]:
        if torch_dir == clues["torch_file"]:
            return (
                "'torch_dir' is torch's __init__.py file; the key asks for the folder that "
                "holds it (Path(torch.__file__).parent)."
            )
        return (
            f"'torch_dir' should be the folder of the torch package this kernel imported "
            f"({truth['torch_dir']}); got {got['torch_dir']['facts'].get('repr')}."
        )
    return None


kernel_environment = Exercise(
    "kernel_environment",
    chapter=CHAPTER,
    title="Which Python, which environment, which torch",
    expects=Function("kernel_environment", ()),
    probe=_probe_kernel_environment,
    judge=_judge_kernel_environment,
    reference=kernel_environment,
    passed_message=(
        "Correct: these four facts tell you which installation every `import` in this "
        "notebook comes from."
    ),
    hints=[
        "Everything you need is in the `sys` module and in `torch.__file__`.",
        "sys.executable is the running interpreter; sys.prefix is its environment's folder.",
        "In a virtual environment sys.prefix and sys.base_prefix differ. Environment "
        "variables such as VIRTUAL_ENV only describe the shell that started Jupyter.",
    ],
)


# ============================================================================================
# E6 — autograd on a function whose derivative we know
# ============================================================================================
def known_gradient(x):
    x = x.detach().clone().requires_grad_(True)
    y = (x**3).sum()
    y.backward()
    return x.grad


# (shape, whether the caller's x requires grad): "a float tensor x" may be one the learner
# made with requires_grad=True; the answer must leave the caller's x as it was.
_GRADIENT_SHAPES = [((5,), False), ((2, 3), False), ((4, 1, 2), False), ((), False), ((2, 3), True)]


def _probe_known_gradient(answer, run):
    import torch

    generator = torch.Generator().manual_seed(0)
    cases = []
    for shape, requires_grad in _GRADIENT_SHAPES:
        x = torch.rand(shape, generator=generator) * 4 - 2
        on = f"x of shape {shape_text(list(shape))}"
        if requires_grad:
            on += " with requires_grad=True"
        given = x.clone().requires_grad_(requires_grad)
        got = run(answer, given, on=on)
        cases.append(
            {
                "on": on,
                "x": x.numpy().copy(),
                "got": value_facts(got),
                "expected": value_facts(3 * x**2),
                "requires_grad": requires_grad,
                "requires_grad_after": bool(given.requires_grad),
                "x_after": given.detach().numpy().copy(),
            }
        )
    return cases


def _judge_known_gradient(cases):
    for case in cases:
        got, expected, x = case["got"], case["expected"], case["x"]
        if got["kind"] == "NoneType" and case["requires_grad"]:
            return (
                f"known_gradient returned None on an x that itself requires grad (on "
                f"{case['on']}), though it returned a gradient for plain tensors. A copy made "
                "from such an x (x.clone(), x * 1) is recorded as an operation on x: it is not "
                "a leaf, so its .grad stays None. Copy with x.detach().clone(), a fresh leaf, "
                "then requires_grad_(True)."
            )
        if got["kind"] == "NoneType":
            return (
                f"known_gradient returned None (on {case['on']}). x.grad stays None until "
                "backward() runs on a result computed from an x with requires_grad=True — "
                "and check that your function ends with `return`."
            )
        if case["requires_grad"] and not case["requires_grad_after"]:
            return (
                f"Your function changed the caller's x in place (on {case['on']}): x required "
                "grad before the call and no longer does after it. x.detach_() (or "
                "x.requires_grad_(False)) detaches the caller's own tensor; use x.detach(), "
                "which returns a new tensor and leaves x as it was."
            )
        x_after = case["x_after"]
        if not same_values(x_after, x, rtol=0, atol=0):
            return (
                f"Your function changed its input x in place (on {case['on']}): the caller's "
                "x holds other numbers afterwards. Compute new tensors; leave x as it was."
            )
        if got["kind"] == "tensor" and got["shape"] == expected["shape"] and "values" in got:
            values = got["values"]
            if same_values(values, x**3):
                return (
                    f"You returned y = x**3 itself (on {case['on']}). The gradient is what "
                    "backward() leaves in x.grad."
                )
            if same_values(values, 2 * expected["values"]):
                return (
                    f"Your gradient is twice 3x² (on {case['on']}): gradients accumulate, so "
                    "two backward() calls add up. Call backward() once."
                )
        problem = tensor_problem(got, expected, what="your gradient", on=case["on"])
        if problem:
            return problem
    return None


known_gradient = Exercise(
    "known_gradient",
    chapter=CHAPTER,
    title="Autograd on a known function",
    expects=Function("known_gradient", ("x",)),
    probe=_probe_known_gradient,
    judge=_judge_known_gradient,
    reference=known_gradient,
    passed_message="Correct: autograd's gradient matches 3x² on every shape tried.",
    hints=[
        "Make a copy of x that records operations: x.detach().clone().requires_grad_(True).",
        "y = (x**3).sum() is a single number, so y.backward() needs no arguments.",
        "After y.backward(), the gradient is in x.grad. Return it.",
    ],
    error_notes=[
        (
            "does not require grad",
            "x has requires_grad=False, so nothing was recorded. Make a copy that records: "
            "x = x.detach().clone().requires_grad_(True).",
        ),
        (
            "only for scalar outputs",
            "backward() with no argument needs a single number. Sum first: (x**3).sum().backward().",
        ),
        (
            "a leaf Variable that requires grad",
            "an in-place change of a tensor that requires grad. Compute a new tensor (x**3) instead.",
        ),
    ],
)


# ============================================================================================
# E6 — on each device: allocate, compute, copy back
# ============================================================================================
def device_smoke_test(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    product = a @ a
    return product.cpu()


_MATMUL_OPS = ("mm", "matmul", "bmm", "addmm", "mv", "dot")


def _available_devices():
    from course_utils.env import pick_device

    devices = ["cpu"]
    accelerator = pick_device()
    if accelerator.type != "cpu":
        devices.append(str(accelerator))
    return devices


def _matmul_devices(answer, run, device):
    """Call the answer while recording on which devices its matrix products ran."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:  # the recording is a bonus; the result is checked regardless
        return run(answer, device, on=f"device={device!r}"), None
    import torch

    seen = set()

    class RecordMatmul(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.__name__.split(".")[0] in _MATMUL_OPS:
                for arg in args:
                    if isinstance(arg, torch.Tensor):
                        seen.add(str(arg.device))
            return func(*args, **(kwargs or {}))

    with RecordMatmul():
        result = run(answer, torch.device(device), on=f"device={device!r}")
    return result, sorted(seen)


def _probe_device_smoke_test(answer, run):
    import torch

    a = torch.arange(1.0, 10.0).reshape(3, 3)
    cases = []
    for device in _available_devices():
        got, matmul_devices = _matmul_devices(answer, run, device)
        cases.append(
            {
                "device": device,
                "got": value_facts(got),
                "matmul_devices": matmul_devices,
                "expected": value_facts(a @ a),
                "elementwise": (a * a).numpy().copy(),
                "transposed": (a @ a.T).numpy().copy(),
            }
        )
    return cases


def _judge_device_smoke_test(cases):
    for case in cases:
        got, expected, device = case["got"], case["expected"], case["device"]
        on = f"device={device!r}"
        if got["kind"] in ("list", "numpy.ndarray", "float"):
            return (
                f"device_smoke_test returned a {got['kind']} ({on}); return the tensor itself, "
                "copied back to the CPU with .cpu()."
            )
        if got["kind"] == "tensor" and got["device"] != "cpu":
            return (
                f"Your result is still on {got['device']} ({on}). The last step of the smoke "
                "test is the copy back: return product.cpu()."
            )
        if got["kind"] == "tensor" and got["dtype"].startswith("torch.int"):
            return (
                f"Your result has dtype {got['dtype']} ({on}): torch.arange(1, 10) makes "
                "integers. Use torch.arange(1.0, 10.0) for float32."
            )
        ran_on = case["matmul_devices"]
        if ran_on is not None and ran_on and device not in ran_on:
            return (
                f"The matrix product ran on {', '.join(ran_on)}, not on {device}: create the "
                "tensor with device=device, or move it there with .to(device), before computing."
            )
        if got["kind"] == "tensor" and got["shape"] == [3, 3] and "values" in got:
            if same_values(got["values"], case["elementwise"]):
                return (
                    f"These are element-wise squares ({on}): `*` multiplies element by element. "
                    "The matrix product is `@` (or torch.matmul)."
                )
            if same_values(got["values"], case["transposed"]):
                return f"This is a @ a.T ({on}); the task asks for a @ a."
        problem = tensor_problem(got, expected, what="your result", on=on)
        if problem:
            return problem
    return None


device_smoke_test = Exercise(
    "device_smoke_test",
    chapter=CHAPTER,
    title="Allocate, compute and copy back on a device",
    expects=Function("device_smoke_test", ("device",)),
    probe=_probe_device_smoke_test,
    judge=_judge_device_smoke_test,
    reference=device_smoke_test,
    passed_message=(
        "Correct: on every device this machine has, the matrix was made there, multiplied "
        "there and copied back."
    ),
    hints=[
        "Factories such as torch.arange take a device= argument.",
        "torch.arange(1.0, 10.0, device=device).reshape(3, 3) is the matrix; `@` multiplies matrices.",
        "Return product.cpu(): a result is only proven usable once it is back on the CPU.",
    ],
    error_notes=[
        (
            "Expected all tensors to be on the same device",
            "one operand is on the device and the other on the CPU: create both on `device`.",
        ),
    ],
)


# ============================================================================================
# E7 — same seed, same numbers
# ============================================================================================
def seeded_draw(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n)


def _probe_seeded_draw(answer, run):
    import torch

    calls = [(0, 5), (0, 5), (1, 5), (7, 3)]
    cases = []
    for seed, n in calls:
        torch.rand(1)  # move the global stream on, as other notebook cells would
        got = run(answer, seed, n, on=f"seed={seed}, n={n}")
        normal = torch.randn(n, generator=torch.Generator().manual_seed(seed))
        uniform = torch.rand(n, generator=torch.Generator().manual_seed(seed))
        cases.append(
            {
                "seed": seed,
                "n": n,
                "got": value_facts(got),
                "expected": value_facts(normal),
                "uniform": uniform.numpy().copy(),
            }
        )
    return cases


def _judge_seeded_draw(cases):
    for case in cases:
        got = case["got"]
        on = f"seed={case['seed']}, n={case['n']}"
        if got["kind"] != "tensor" or got["shape"] != case["expected"]["shape"]:
            return tensor_problem(got, case["expected"], what="your draw", on=on)
    first, again, other = cases[0]["got"]["values"], cases[1]["got"]["values"], cases[2]["got"]["values"]
    if not same_values(first, again, rtol=0, atol=0):
        return (
            "Two calls with seed=0 gave different numbers. Seed inside the function, right "
            "before drawing, with torch.manual_seed(seed). (random.seed and np.random.seed do "
            "not seed torch.)"
        )
    if same_values(first, other, rtol=0, atol=0):
        return (
            "seed=0 and seed=1 gave the same numbers: your function ignores its seed argument. "
            "Pass `seed` to torch.manual_seed, not a fixed number."
        )
    for case in cases:
        got = case["got"]
        if same_values(got["values"], case["uniform"]):
            return (
                "Your numbers repeat, but they are torch.rand's (uniform in [0, 1)); the task "
                "asks for torch.randn (normal, mean 0, std 1)."
            )
        problem = tensor_problem(got, case["expected"], what="your draw", on=f"seed={case['seed']}, n={case['n']}")
        if problem:
            return problem + " Seed with torch.manual_seed(seed), then call torch.randn(n)."
    return None


seeded_draw = Exercise(
    "seeded_draw",
    chapter=CHAPTER,
    title="Same seed, same numbers",
    expects=Function("seeded_draw", ("seed", "n")),
    probe=_probe_seeded_draw,
    judge=_judge_seeded_draw,
    reference=seeded_draw,
    passed_message="Correct: the same seed gives the same numbers, a new seed new numbers.",
    hints=[
        "torch.manual_seed(seed) resets torch's random stream on the CPU (and on CUDA devices).",
        "Seed first, then draw: torch.randn(n).",
    ],
    error_notes=[
        (
            "seed() takes 0 positional arguments",
            "torch.seed() sets a fresh, random seed. The function that sets yours is "
            "torch.manual_seed(seed).",
        ),
    ],
)


# ============================================================================================
# E7 — write the seed check itself
# ============================================================================================
def seed_check(draw):
    first = draw(0)
    again = draw(0)
    other = draw(1)
    return torch.equal(first, again) and not torch.equal(first, other)


def _seeded_rand(seed):
    import torch

    torch.manual_seed(seed)
    return torch.rand(4)


def _seed_ignored(seed):
    import torch

    torch.manual_seed(1234)
    return torch.rand(4)


def _never_seeded(seed):
    import torch

    return torch.rand(4)


def _python_random_seeded(seed):
    import torch

    rng = random.Random(seed)
    return torch.tensor([rng.random() for _ in range(6)]).reshape(2, 3)


def _seeds_the_wrong_library(seed):
    import torch

    np.random.seed(seed)
    return torch.rand(4)


_DRAWS = [
    (_seeded_rand, True, "seeds torch, then draws"),
    (_seed_ignored, False, "ignores its seed (always torch.manual_seed(1234))"),
    (_never_seeded, False, "never seeds at all"),
    (_python_random_seeded, True, "draws from random.Random(seed), shape (2, 3)"),
    (_seeds_the_wrong_library, False, "seeds NumPy, then draws with torch"),
]


def _probe_seed_check(answer, run):
    import torch

    cases = []
    for draw, expected, description in _DRAWS:
        got = run(answer, draw, on=f"a draw function that {description}")
        if isinstance(got, torch.Tensor) and got.numel() == 1 and got.dtype == torch.bool:
            got = bool(got.item())
        if isinstance(got, np.bool_):
            got = bool(got)
        cases.append(
            {
                "description": description,
                "expected": expected,
                "got": got if type(got) is bool else None,
                "facts": value_facts(got),
            }
        )
    return cases


def _judge_seed_check(cases):
    for case in cases:
        if case["got"] is None:
            facts = case["facts"]
            tip = ""
            if facts["kind"] == "tensor":
                tip = (
                    " `a == b` compares tensors element by element and gives a tensor of "
                    "booleans; torch.equal(a, b) gives one True or False."
                )
            return (
                f"seed_check returned a {facts['kind']} ({facts.get('repr', '')}) for a draw "
                f"function that {case['description']}; it should return True or False.{tip}"
            )
    for case in cases:
        if case["got"] != case["expected"]:
            if case["expected"]:
                return (
                    f"Your check rejected a draw function that {case['description']}, which is "
                    "reproducible: the same seed gives the same numbers and another seed others."
                )
            if "ignores its seed" in case["description"]:
                return (
                    "Your check accepted a draw function that ignores its seed: it returns the "
                    "same numbers for every seed. Also call it with two different seeds and "
                    "require different numbers."
                )
            return (
                f"Your check accepted a draw function that {case['description']}: called twice "
                "with the same seed it gives different numbers."
            )
    return None


seed_check = Exercise(
    "seed_check",
    chapter=CHAPTER,
    title="Write the seed check",
    expects=Function("seed_check", ("draw",)),
    probe=_probe_seed_check,
    judge=_judge_seed_check,
    reference=seed_check,
    passed_message="Correct: your check tells reproducible draws from the three broken kinds.",
    hints=[
        "Call draw three times: twice with one seed, once with another.",
        "Compare whole tensors with torch.equal(a, b): it returns one bool.",
        "Reproducible means: equal for the same seed AND different for different seeds.",
    ],
    error_notes=[
        (
            "Boolean value of Tensor with more than one value is ambiguous",
            "`if a == b` or `a == b and ...` on tensors: == gives one boolean per element. "
            "Use torch.equal(a, b).",
        ),
    ],
)

