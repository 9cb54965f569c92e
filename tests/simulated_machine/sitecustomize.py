"""Make this Python's torch behave like another build, for the notebook runs of `./course test`.

A learner's machine is often not the CI's: the default `pip install torch` on Linux is a CUDA
build, and most laptops that get it have no NVIDIA driver. This file, put on ``PYTHONPATH``
with ``COURSE_SIMULATED_MACHINE`` set, makes the CPU build on this machine report and fail the
way such a build does, so every notebook can be run as it would run there:

``cuda-build-no-gpu``
    ``torch.version.cuda`` is a CUDA version, ``torch.cuda.is_available()`` is False, and the
    first use of a ``"cuda"`` device raises the RuntimeError a CUDA build raises without a
    driver (instead of the CPU build's ``AssertionError: Torch not compiled with CUDA enabled``).
``rocm-build-no-gpu``
    the same for PyPI's ROCm build on a machine without an AMD GPU: ``torch.version.hip`` is
    set, ``torch.version.cuda`` is None, and "cuda" (ROCm's device name too) raises HIP's error.

torch is patched right after it is first imported, so processes that never import it (pip,
the pytest controller) pay nothing. Python imports ``sitecustomize`` at start-up from the first
folder on ``sys.path`` that has one; tests/test_simulated_machine.py checks the patch takes.
"""

import importlib.abc
import importlib.machinery
import os
import sys

MACHINES = {
    # name: (torch.version.cuda, torch.version.hip, the error the first device use raises)
    "cuda-build-no-gpu": (
        "13.0",
        None,
        "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
        "installed a driver from http://www.nvidia.com/Download/index.aspx",
    ),
    "rocm-build-no-gpu": ("", "7.0.51831", "No HIP GPUs are available"),
}


def simulate(torch, machine: str) -> None:
    """Patch an imported torch to report and fail like ``machine``."""
    cuda_version, hip_version, error = MACHINES[machine]
    torch.version.cuda = cuda_version or None
    torch.version.hip = hip_version

    def lazy_init():  # what torch calls before the first use of a "cuda" device
        raise RuntimeError(error)

    torch.cuda._lazy_init = lazy_init
    torch.cuda.is_available = lambda: False
    torch.cuda.device_count = lambda: 0


class _PatchTorchOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, machine: str):
        self.machine = machine

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, machine = spec.loader, self.machine

        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                simulate(module, machine)

        spec.loader = Loader()
        return spec


_machine = os.environ.get("COURSE_SIMULATED_MACHINE", "")
if _machine:
    if _machine not in MACHINES:
        raise SystemExit(
            f"COURSE_SIMULATED_MACHINE={_machine!r}: expected one of {', '.join(MACHINES)}"
        )
    if "torch" in sys.modules:
        simulate(sys.modules["torch"], _machine)
    else:
        sys.meta_path.insert(0, _PatchTorchOnImport(_machine))
