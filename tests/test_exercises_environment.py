"""Chapter 00's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them."""

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
from exercise_asserts import assert_fails, assert_passes


# -- kernel_environment (E4) ------------------------------------------------------------------
def test_kernel_environment_reference_and_alternatives_pass():
    assert_passes(ex.kernel_environment, ex.kernel_environment.reference)

    def alternative():
        import importlib.util

        return {
            "python": Path(sys.executable),
            "prefix": Path(sys.prefix),
            "in_virtualenv": hasattr(sys, "real_prefix") or sys.base_prefix != sys.prefix,
            "torch_dir": os.path.dirname(importlib.util.find_spec("torch").origin),
        }

    assert_passes(ex.kernel_environment, alternative)


def _environment_with(**changes):
    def answer():
        facts = ex.kernel_environment.reference()
        facts.update(changes)
        return facts

    return answer


def test_python_on_path_is_named_as_the_mistake(monkeypatch, tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert_fails(
        ex.kernel_environment,
        _environment_with(python=shutil.which("python")),
        "first python on your PATH",
        "sys.executable",
    )


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs a virtual environment")
def test_resolved_interpreter_link_is_named_as_the_mistake():
    assert_fails(
        ex.kernel_environment,
        _environment_with(python=os.path.realpath(sys.executable)),
        "where the environment's python link points",
    )


def test_virtual_env_variable_is_named_as_the_mistake(monkeypatch):
    in_venv = sys.prefix != sys.base_prefix
    if in_venv:
        monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    else:
        monkeypatch.setenv("VIRTUAL_ENV", "/somewhere/.venv")
    assert_fails(
        ex.kernel_environment,
        _environment_with(in_virtualenv="VIRTUAL_ENV" in os.environ),
        "The VIRTUAL_ENV variable only says whether a shell ran `activate`",
    )


def test_other_kernel_environment_mistakes():
    assert_fails(ex.kernel_environment, _environment_with(torch_dir=torch.__file__), "__init__.py file")
    assert_fails(ex.kernel_environment, _environment_with(prefix=sys.base_prefix + "x"), "sys.prefix")
    assert_fails(ex.kernel_environment, _environment_with(in_virtualenv="yes"), "True or False")
    assert_fails(ex.kernel_environment, lambda: {"python": sys.executable}, "lacks the keys 'prefix'")
    assert_fails(ex.kernel_environment, lambda: sys.executable, "returned a str")


# -- known_gradient (E6) -----------------------------------------------------------------------
def test_known_gradient_reference_and_alternatives_pass():
    assert_passes(ex.known_gradient, ex.known_gradient.reference)

    def with_autograd_grad(x):
        x = x.clone().requires_grad_()
        (gradient,) = torch.autograd.grad((x**3).sum(), x)
        return gradient

    def in_place_flag(x):
        x.requires_grad_(True)
        torch.sum(torch.pow(x, 3)).backward()
        return x.grad

    assert_passes(ex.known_gradient, with_autograd_grad)
    assert_passes(ex.known_gradient, in_place_flag)


def test_known_gradient_classic_mistakes():
    def forgot_requires_grad(x):
        (x**3).sum().backward()
        return x.grad

    assert_fails(
        ex.known_gradient, forgot_requires_grad,
        "RuntimeError: element 0 of tensors does not require grad",
        "Likely cause: x has requires_grad=False",
        outcome=Outcome.RAISED,
    )

    def backward_on_a_vector(x):
        x = x.clone().requires_grad_()
        (x**3).backward()
        return x.grad

    assert_fails(
        ex.known_gradient, backward_on_a_vector,
        "grad can be implicitly created only for scalar outputs",
        "Sum first",
        outcome=Outcome.RAISED,
    )

    def returns_y(x):
        return x**3

    assert_fails(ex.known_gradient, returns_y, "You returned y = x**3 itself")

    def backward_twice(x):
        x = x.clone().requires_grad_()
        y = (x**3).sum()
        y.backward(retain_graph=True)
        y.backward()
        return x.grad

    assert_fails(ex.known_gradient, backward_twice, "twice 3x²", "accumulate")

    def forgot_return(x):
        x = x.clone().requires_grad_()
        (x**3).sum().backward()

    assert_fails(ex.known_gradient, forgot_return, "returned None")

    def detaches_the_callers_x(x):
        x = x.detach_().clone().requires_grad_(True)
        (x**3).sum().backward()
        return x.grad

    assert_fails(
        ex.known_gradient, detaches_the_callers_x,
        "changed the caller's x in place", "with requires_grad=True", "x.detach_()",
        "use x.detach(), which returns a new tensor",
    )

    def clones_without_detach(x):
        x = x.clone().requires_grad_(True)
        (x**3).sum().backward()
        return x.grad

    assert_fails(
        ex.known_gradient, clones_without_detach,
        "returned None on an x that itself requires grad", "Copy with x.detach().clone()",
    )

    def also_takes_a_step(x):
        x.requires_grad_(True)
        (x**3).sum().backward()
        with torch.no_grad():
            x -= 0.1 * x.grad
        return x.grad

    assert_fails(ex.known_gradient, also_takes_a_step, "changed its input x in place", "leave x as it was")


# -- device_smoke_test (E6) --------------------------------------------------------------------
def test_device_smoke_test_reference_and_alternatives_pass():
    assert_passes(ex.device_smoke_test, ex.device_smoke_test.reference)

    def moved_there(device):
        a = torch.arange(1, 10, dtype=torch.float32).view(3, 3).to(device)
        return torch.matmul(a, a).to("cpu")

    assert_passes(ex.device_smoke_test, moved_there)


def test_device_smoke_test_classic_mistakes():
    def elementwise(device):
        a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
        return (a * a).cpu()

    assert_fails(ex.device_smoke_test, elementwise, "element-wise squares", "`@`")

    def integers(device):
        a = torch.arange(1, 10, device=device).reshape(3, 3)
        return (a @ a).cpu()

    assert_fails(ex.device_smoke_test, integers, "dtype torch.int64", "torch.arange(1.0, 10.0)")

    def as_list(device):
        a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
        return (a @ a).tolist()

    assert_fails(ex.device_smoke_test, as_list, "returned a list")


def _device_record(got_device="cpu", matmul_devices=("cuda:0",), device="cuda:0"):
    a = np.arange(1.0, 10.0, dtype=np.float32).reshape(3, 3)
    tensor = {"kind": "tensor", "shape": [3, 3], "dtype": "torch.float32", "requires_grad": False}
    return [
        {
            "device": device,
            "got": dict(tensor, device=got_device, values=a @ a),
            "matmul_devices": list(matmul_devices),
            "expected": dict(tensor, device="cpu", values=a @ a),
            "elementwise": a * a,
            "transposed": a @ a.T,
        }
    ]


def test_device_smoke_test_mistakes_only_a_gpu_shows_are_judged_from_the_record():
    """On a CPU-only runner these can only be produced as records, which is what the judge reads."""
    judge = ex.device_smoke_test.judge
    right = judge(ProbeResult(Status.OK, _device_record()))
    assert right.passed
    stayed = judge(ProbeResult(Status.OK, _device_record(got_device="cuda:0")))
    assert "still on cuda:0" in stayed.message and ".cpu()" in stayed.message
    ignored = judge(ProbeResult(Status.OK, _device_record(matmul_devices=("cpu",))))
    assert "ran on cpu, not on cuda:0" in ignored.message


# -- seeded_draw (E7) --------------------------------------------------------------------------
def test_seeded_draw_reference_and_alternatives_pass():
    assert_passes(ex.seeded_draw, ex.seeded_draw.reference)

    def own_generator(seed, n):
        generator = torch.Generator().manual_seed(seed)
        return torch.randn(n, generator=generator)

    def everything(seed, n):
        seed_everything(seed)
        return torch.randn(n)

    assert_passes(ex.seeded_draw, own_generator)
    assert_passes(ex.seeded_draw, everything)


def test_seeded_draw_classic_mistakes():
    def python_seed_only(seed, n):
        random.seed(seed)
        np.random.seed(seed)
        return torch.randn(n)

    assert_fails(ex.seeded_draw, python_seed_only, "different numbers", "do not seed torch")

    def fixed_seed(seed, n):
        torch.manual_seed(42)
        return torch.randn(n)

    assert_fails(ex.seeded_draw, fixed_seed, "ignores its seed argument")

    def uniform(seed, n):
        torch.manual_seed(seed)
        return torch.rand(n)

    assert_fails(ex.seeded_draw, uniform, "torch.rand's")

    def torch_seed(seed, n):
        torch.seed(seed)
        return torch.randn(n)

    assert_fails(ex.seeded_draw, torch_seed, "torch.seed() sets a fresh, random seed", outcome=Outcome.RAISED)


# -- seed_check (E7) ---------------------------------------------------------------------------
def test_seed_check_reference_and_alternatives_pass():
    assert_passes(ex.seed_check, ex.seed_check.reference)

    def with_allclose(draw):
        runs = [draw(s) for s in (3, 3, 4)]
        same = torch.allclose(runs[0], runs[1], rtol=0, atol=0)
        return bool(same and not torch.allclose(runs[0], runs[2]))

    def elementwise_then_all(draw):
        a, b, c = draw(0), draw(0), draw(1)
        return (a == b).all() and not (a == c).all()

    assert_passes(ex.seed_check, with_allclose)
    assert_passes(ex.seed_check, elementwise_then_all)


def test_seed_check_classic_mistakes():
    def same_seed_only(draw):
        return torch.equal(draw(0), draw(0))

    assert_fails(ex.seed_check, same_seed_only, "accepted a draw function that ignores its seed")

    def ambiguous(draw):
        return bool(draw(0) == draw(0))

    assert_fails(
        ex.seed_check, ambiguous,
        "Boolean value of Tensor with more than one value is ambiguous",
        "Use torch.equal(a, b)",
        outcome=Outcome.RAISED,
    )

    def returns_tensor(draw):
        return draw(0) == draw(0)

    assert_fails(ex.seed_check, returns_tensor, "returned a tensor", "torch.equal(a, b) gives one True or False")

    def different_seeds_only(draw):
        return not torch.equal(draw(0), draw(1))

    assert_fails(ex.seed_check, different_seeds_only, "accepted a draw function that never seeds at all")

