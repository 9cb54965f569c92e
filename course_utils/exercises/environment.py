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

from course_utils.exercises import plain
from course_utils.exercises.core import Exercise, Function, Mistake, a_or_an
from course_utils.exercises.facts import same_values, shape_text, tensor_problem, value_facts
from course_utils.exercises.running import LearnerRaised

CHAPTER = "environment"


def _shown_already(cases, judge) -> bool:
    """True when the calls recorded so far already show a mistake.

    A probe calls the answer on many inputs; when a later call raises, the mistake an earlier
    call showed (an input changed in place, say) is the one to report, not the error it led to.
    """
    try:
        return bool(cases) and judge(plain.to_plain(cases)) is not None
    except Exception:  # a judge that needs every call's record cannot decide on a part
        return False


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
_SYS_FIELDS = ("executable", "prefix", "base_prefix", "exec_prefix", "base_exec_prefix")


def _normal_path(value) -> str | None:
    if not isinstance(value, (str, os.PathLike)):
        return None
    try:
        return os.path.normcase(os.path.abspath(os.fspath(value)))
    except Exception:  # a PathLike of the learner's whose __fspath__ fails or returns no str
        return None


def _make_simulated_kernels(folder: Path) -> list[dict]:
    """Two kernels the check pretends to run in: another virtual environment, and a plain
    installation started from a shell where a virtual environment was activated.

    Real folders, so that answers which look at the disk (pyvenv.cfg, the interpreter's link)
    see what such a kernel would show them."""
    installation = folder / "installation"
    project = folder / "project"
    for place in (installation / "bin", project / "bin"):
        place.mkdir(parents=True)
    (installation / "bin" / "python3").write_bytes(b"")
    windows = folder / "windows-installation"  # python.exe in the top folder, no bin/
    windows.mkdir()
    (windows / "python.exe").write_bytes(b"")
    (project / "pyvenv.cfg").write_text(f"home = {installation / 'bin'}\n")
    link = project / "bin" / "python3"
    try:  # a virtual environment's interpreter is a link to the installation's
        link.symlink_to(installation / "bin" / "python3")
    except OSError:
        link.write_bytes(b"")
    return [
        {
            "on": f"a simulated kernel in another virtual environment ({project})",
            "sys": {"executable": str(link), "prefix": str(project), "exec_prefix": str(project),
                    "base_prefix": str(installation), "base_exec_prefix": str(installation)},
            "virtual_env": None,
            "in_virtualenv": True,
        },
        {
            "on": (f"a simulated kernel outside any virtual environment ({installation}), "
                   "started from a shell that had activated one"),
            "sys": {"executable": str(installation / "bin" / "python3"),
                    "prefix": str(installation), "exec_prefix": str(installation),
                    "base_prefix": str(installation), "base_exec_prefix": str(installation)},
            "virtual_env": str(project),
            "in_virtualenv": False,
        },
        {
            "on": (f"a simulated kernel of an installation laid out as on Windows "
                   f"({windows}), its interpreter in the installation's top folder"),
            "sys": {"executable": str(windows / "python.exe"),
                    "prefix": str(windows), "exec_prefix": str(windows),
                    "base_prefix": str(windows), "base_exec_prefix": str(windows)},
            "virtual_env": None,
            "in_virtualenv": False,
        },
    ]


# What the standard library worked out from sys when it was imported, and a real kernel in
# that environment would have worked out the same way: site.PREFIXES and sysconfig's paths.
_SYSCONFIG_FIELDS = {"_PREFIX": "prefix", "_BASE_PREFIX": "base_prefix",
                     "_EXEC_PREFIX": "exec_prefix", "_BASE_EXEC_PREFIX": "base_exec_prefix"}


def _derived_from_sys(kernel):
    import site
    import sysconfig

    saved = []
    for name, field in _SYSCONFIG_FIELDS.items():
        if hasattr(sysconfig, name):
            saved.append((sysconfig, name, getattr(sysconfig, name), os.path.normpath(kernel["sys"][field])))
    for name, fresh in (("_CONFIG_VARS", None), ("_CONFIG_VARS_INITIALIZED", False)):
        if hasattr(sysconfig, name):  # worked out again, from the values above, on first use
            saved.append((sysconfig, name, getattr(sysconfig, name), fresh))
    if isinstance(getattr(site, "PREFIXES", None), list):
        saved.append((site, "PREFIXES", site.PREFIXES,
                      list(dict.fromkeys([kernel["sys"]["prefix"], kernel["sys"]["exec_prefix"]]))))
    return saved


def _run_in_kernel(answer, run, kernel):
    """Call the answer with sys and VIRTUAL_ENV describing ``kernel``; put everything back."""
    saved = {name: getattr(sys, name) for name in _SYS_FIELDS}
    saved_env = os.environ.get("VIRTUAL_ENV")
    derived = _derived_from_sys(kernel)
    try:
        for module, name, _, value in derived:
            setattr(module, name, value)
        for name, value in kernel["sys"].items():
            setattr(sys, name, value)
        if kernel["virtual_env"] is None:
            os.environ.pop("VIRTUAL_ENV", None)
        else:
            os.environ["VIRTUAL_ENV"] = kernel["virtual_env"]
        return run(answer, on=kernel["on"])
    finally:
        for name, value in saved.items():
            setattr(sys, name, value)
        for module, name, value, _ in derived:
            setattr(module, name, value)
        if saved_env is None:
            os.environ.pop("VIRTUAL_ENV", None)
        else:
            os.environ["VIRTUAL_ENV"] = saved_env


def _environment_record(got, truth, clues, on):
    record = {"on": on, "kind": value_facts(got)["kind"], "truth": truth, "clues": clues,
              "got": {}, "keys": []}
    if isinstance(got, dict):  # an OrderedDict or a defaultdict is a dict too
        got = dict(got)
        record["kind"] = "dict"
        record["keys"] = sorted(str(key) for key in got)
        for key in _ENV_KEYS:
            if key in got:
                value = got[key]
                entry = {"facts": value_facts(value)}
                if key == "in_virtualenv":
                    entry["bool"] = bool(value) if type(value) in (bool, np.bool_) else None
                else:
                    entry["path"] = _normal_path(value)
                record["got"][key] = entry
    return record


def _probe_kernel_environment(answer, run):
    import tempfile

    import torch

    def python_on_path():
        found = shutil.which("python") or shutil.which("python3")
        return _normal_path(found) if found else ""

    torch_dir = _normal_path(Path(torch.__file__).parent)
    clues = {
        "python_on_path": python_on_path(),
        "python_resolved": _normal_path(os.path.realpath(sys.executable)),
        "torch_file": _normal_path(torch.__file__),
        "virtual_env_var_set": "VIRTUAL_ENV" in os.environ,
    }
    truth = {
        "python": _normal_path(sys.executable),
        "prefix": _normal_path(sys.prefix),
        "in_virtualenv": sys.prefix != sys.base_prefix,
        "torch_dir": torch_dir,
    }
    this_kernel = truth
    records = [_environment_record(run(answer, on="kernel_environment()"), truth, clues,
                                   "kernel_environment()")]
    with tempfile.TemporaryDirectory(prefix="kernel-check-") as folder:
        for kernel in _make_simulated_kernels(Path(folder)):
            truth = {
                "python": _normal_path(kernel["sys"]["executable"]),
                "prefix": _normal_path(kernel["sys"]["prefix"]),
                "in_virtualenv": kernel["in_virtualenv"],
                "torch_dir": torch_dir,
            }
            sim_clues = {
                "python_on_path": clues["python_on_path"],
                "python_resolved": _normal_path(os.path.realpath(kernel["sys"]["executable"])),
                "torch_file": clues["torch_file"],
                "virtual_env_var_set": kernel["virtual_env"] is not None,
                "this_kernel": this_kernel,
                "prefix_from_python": _normal_path(Path(kernel["sys"]["executable"]).parent.parent),
            }
            try:
                got = _run_in_kernel(answer, run, kernel)
            except LearnerRaised:
                if _shown_already(records, _judge_kernel_environment):
                    break
                raise
            records.append(_environment_record(got, truth, sim_clues, kernel["on"]))
    return records


def _judge_one_environment(record, everywhere):
    on = record["on"]
    simulated = "this_kernel" in record["clues"]
    where = f" (on {on})" if simulated else ""
    if record["kind"] != "dict":
        return Mistake("not-a-dict", (
            f"kernel_environment() returned {a_or_an(record['kind'])}{where}; it should return a dict."
        ))
    missing = [key for key in _ENV_KEYS if key not in record["got"]]
    if missing:
        return Mistake("missing-keys", (
            f"Your dict lacks the key{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(k) for k in missing)} (it has: {', '.join(record['keys']) or 'none'}){where}."
        ))
    truth, got, clues = record["truth"], record["got"], record["clues"]
    here = clues.get("this_kernel", {})

    def did_not_follow(key, source):
        return Mistake("not-read-in-call", (
            f"'{key}' did not follow the kernel: on {on}, where {source} is "
            f"{truth[key]}, your function still returned {got[key]['facts'].get('repr')}, the "
            f"value of the kernel you ran it in. A path written out, or worked out before the "
            f"call, describes one machine only: read {source} inside the function."
        ))

    python = got["python"]["path"]
    if python != truth["python"]:
        if python is None:
            return Mistake("python-not-a-path", (
                f"'python' should be a path (a str or a Path); got "
                f"{a_or_an(got['python']['facts']['kind'])} ({got['python']['facts'].get('repr')}){where}."
            ))
        if python == clues["python_on_path"]:
            return Mistake("python-from-path", (
                "'python' is the first python on your PATH (what `which python` finds), which "
                "need not be the interpreter running this kernel: JupyterLab can start kernels "
                f"from other environments{where}. Use sys.executable."
            ))
        if python == clues["python_resolved"]:
            return Mistake("resolved-python-link", (
                "'python' is where the environment's python link points (the base installation "
                f"it was made from){where}. The environment is named by the link itself: use "
                "sys.executable as it is, without resolving it."
            ))
        if simulated and python == here.get("python"):
            return did_not_follow("python", "sys.executable")
        return Mistake("wrong-python", (
            f"'python' should be the interpreter running this kernel, sys.executable "
            f"({truth['python']}), not {got['python']['facts'].get('repr')}{where}."
        ))

    prefix = got["prefix"]["path"]
    if prefix != truth["prefix"]:
        if simulated and prefix == here.get("prefix"):
            return did_not_follow("prefix", "sys.prefix")
        if prefix is not None and prefix == clues.get("prefix_from_python"):
            return Mistake("prefix-from-python-path", (
                f"'prefix' is the folder two levels above the interpreter (on {on}, where "
                f"sys.executable is {truth['python']}); that holds only where the interpreter "
                f"lies in a bin/ or Scripts/ folder. Here the environment's folder, sys.prefix, "
                f"is {truth['prefix']}: use sys.prefix rather than working it out from a path."
            ))
        return Mistake("wrong-prefix", (
            f"'prefix' should be the environment's folder, sys.prefix ({truth['prefix']}); "
            f"got {got['prefix']['facts'].get('repr')}{where}. (sys.base_prefix is the "
            "installation the environment was made from.)"
        ))

    flag = got["in_virtualenv"]["bool"]
    if flag is None:
        return Mistake("in-virtualenv-not-bool", (
            f"'in_virtualenv' should be True or False; got {a_or_an(got['in_virtualenv']['facts']['kind'])} "
            f"({got['in_virtualenv']['facts'].get('repr')}){where}."
        ))
    if flag != truth["in_virtualenv"]:
        flags = [(r["flag"], r["virtual_env_var_set"]) for r in everywhere]
        if all(f == var for f, var in flags):
            return Mistake("in-virtualenv-from-virtual-env-var", (
                f"'in_virtualenv' is {flag}{where}, but this kernel "
                f"{'runs' if truth['in_virtualenv'] else 'does not run'} in a virtual "
                "environment. The VIRTUAL_ENV variable only says whether a shell ran "
                "`activate`; a kernel started by JupyterLab usually was not. Compare "
                "sys.prefix with sys.base_prefix: they differ inside a virtual environment."
            ))
        if len({f for f, _ in flags}) == 1:
            return Mistake("in-virtualenv-constant", (
                f"'in_virtualenv' was {flag} in every kernel the check tried, including {on}, "
                f"where it should be {truth['in_virtualenv']}: your value is the same whatever "
                "environment the kernel runs in. Compare sys.prefix with sys.base_prefix inside "
                "the function: they differ inside a virtual environment."
            ))
        return Mistake("wrong-in-virtualenv", (
            f"'in_virtualenv' is {flag}; it should be {truth['in_virtualenv']}{where}. Inside a "
            "virtual environment sys.prefix differs from sys.base_prefix; outside one they are "
            "the same folder."
        ))

    torch_dir = got["torch_dir"]["path"]
    if torch_dir != truth["torch_dir"]:
        if torch_dir == clues["torch_file"]:
            return Mistake("torch-file-not-folder", (
                "'torch_dir' is torch's __init__.py file; the key asks for the folder that "
                "holds it (Path(torch.__file__).parent)."
            ))
        return Mistake("wrong-torch-dir", (
            f"'torch_dir' should be the folder of the torch package this kernel imported "
            f"({truth['torch_dir']}); got {got['torch_dir']['facts'].get('repr')}{where}."
        ))
    return None


def _judge_kernel_environment(records):
    everywhere = [
        {"flag": record["got"].get("in_virtualenv", {}).get("bool"),
         "virtual_env_var_set": record["clues"]["virtual_env_var_set"]}
        for record in records
    ]
    for record in records:
        problem = _judge_one_environment(record, everywhere)
        if problem:
            return problem
    return None


kernel_environment = Exercise(
    "kernel_environment",
    chapter=CHAPTER,
    title="Which Python, which environment, which torch",
    expects=Function("kernel_environment", (), returns="a dict with the keys 'python', "
                     "'prefix', 'in_virtualenv' and 'torch_dir'"),
    probe=_probe_kernel_environment,
    judge=_judge_kernel_environment,
    reference=kernel_environment,
    passed_message=(
        "Correct: these four facts tell you which installation every `import` in this "
        "notebook comes from — and they follow the kernel into any environment."
    ),
    hints=[
        "Everything you need is in the `sys` module and in `torch.__file__`.",
        "sys.executable is the running interpreter; sys.prefix is its environment's folder.",
        "In a virtual environment sys.prefix and sys.base_prefix differ. Environment "
        "variables such as VIRTUAL_ENV only describe the shell that started Jupyter.",
    ],
    error_notes=[
        (
            "is not defined",
            "a name used before it was imported or defined in this notebook: import it "
            "(import sys, import torch, from pathlib import Path) above your function.",
            "name-not-imported",
        ),
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


def _backward_recorder():
    """A dispatch mode that counts the operations the autograd engine runs (a backward pass):
    the proof that the gradient was computed by autograd, not written as a formula."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class RecordBackward(TorchDispatchMode):
        # Entering torch.compile's machinery on first use costs a second; nothing here compiles.
        _should_skip_dynamo = classmethod(lambda cls: False)

        def __init__(self):
            super().__init__()
            self.backward_ops = 0
            self.backward_passes = set()  # one graph task per backward() / autograd.grad call
            # Tensors the backward pass made, and those computed from them afterwards (a
            # clone, a dtype conversion): the gradient returned should be one of them. Also
            # the tensors computed from the caller's x outside a backward pass: a result that
            # is one of those, and not the other, is a formula, not autograd's gradient.
            self._derived = {"backward": ({}, set()), "input": ({}, set())}
            # Every marked tensor is kept alive while the recorder lives: memory freed during
            # the call could otherwise be handed to a new tensor (a right answer's copy of the
            # gradient) whose address would then look derived from x.
            self._kept = []

        def _is_derived(self, tensor, kind):
            objects, memory = self._derived[kind]
            kept = objects.get(id(tensor))
            if kept is not None and kept() is tensor:
                return True
            try:
                pointer = tensor.untyped_storage().data_ptr()
            except Exception:  # no storage to read (meta, a subclass): not known as derived
                return False
            return pointer != 0 and pointer in memory

        def mark(self, out, kind):
            import weakref

            from torch.utils._pytree import tree_flatten

            objects, memory = self._derived[kind]
            for tensor in tree_flatten(out)[0]:
                if isinstance(tensor, torch.Tensor):
                    self._kept.append(tensor)
                    try:
                        objects[id(tensor)] = weakref.ref(tensor)
                        pointer = tensor.untyped_storage().data_ptr()
                    except Exception:  # not weak-referenceable or no storage: skip it
                        continue
                    if pointer:
                        memory.add(pointer)

        def derived(self, value, kind) -> bool:
            return isinstance(value, torch.Tensor) and self._is_derived(value, kind)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            from torch.utils._pytree import tree_flatten

            task = torch._C._current_graph_task_id()
            if task != -1:
                self.backward_ops += 1
                self.backward_passes.add(task)
            out = func(*args, **(kwargs or {}))
            inputs = [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)]
            if task != -1 or any(self._is_derived(t, "backward") for t in inputs):
                self.mark(out, "backward")
            elif any(self._is_derived(t, "input") for t in inputs):
                self.mark(out, "input")
            return out

    return RecordBackward()


def _gradient_inputs(torch):
    """(label, x, leaf behind x or None, rtol) — every kind of "float tensor x of any shape"."""
    generator = torch.Generator().manual_seed(0)

    def uniform(shape, dtype=torch.float32):
        return (torch.rand(shape, generator=generator, dtype=torch.float64) * 4 - 2).to(dtype)

    inputs = [
        ("x of shape (5,)", uniform((5,)), None, 1e-5),
        ("x of shape (2, 3), float64", uniform((2, 3), torch.float64), None, 1e-12),
        ("x of shape (4, 1, 2)", uniform((4, 1, 2)), None, 1e-5),
        ("x of shape () (0-dimensional)", uniform(()), None, 1e-5),
        ("x of shape (2, 3) with requires_grad=True", uniform((2, 3)).requires_grad_(True), None, 1e-5),
    ]
    stale = uniform((3,)).requires_grad_(True)
    stale.grad = torch.ones(3)
    inputs.append(("x of shape (3,) with requires_grad=True that already holds a .grad (ones, "
                   "from an earlier backward)", stale, None, 1e-5))
    leaf = uniform((4,)).requires_grad_(True)
    inputs.append(("x = w * 1 of shape (4,), computed from a tensor w that requires grad",
                   leaf * 1, leaf, 1e-5))
    inputs += [
        ("x of shape (0,) (empty)", uniform((0,)), None, 1e-5),
        ("a transposed (non-contiguous) x of shape (3, 2)", uniform((2, 3)).t(), None, 1e-5),
        ("x of shape (3,), float16", uniform((3,), torch.float16), None, 1e-2),
    ]
    return inputs


def _grad_facts(tensor):
    import torch

    grad = tensor.grad if tensor.is_leaf else None
    if grad is None:
        return None
    try:
        return torch.Tensor.detach(grad).to("cpu", torch.float64).numpy().copy()
    except Exception:  # a .grad the answer put somewhere unreadable (meta): it is there, that is all
        return np.full(1, np.nan)


def _probe_known_gradient(answer, run):
    import torch

    cases = []
    inputs = _gradient_inputs(torch)
    # The first input again, after all others: the same tensor object, called a second time.
    inputs.append((inputs[0][0] + ", a second call with the same x", inputs[0][1], None, 1e-5))
    # And once more after the caller changed x in place (as an optimizer step does): the
    # gradient of the new numbers, not one kept from before.
    changed_in_place = inputs[0][0] + ", a third call after the caller changed x in place"
    inputs.append((changed_in_place, inputs[0][1], None, 1e-5))
    grad_mode = torch.is_grad_enabled()  # what every call should leave behind
    for on, given, leaf, rtol in inputs:
        if on == changed_in_place:
            with torch.no_grad():
                torch.Tensor.add_(given, 0.5)
        before = torch.Tensor.detach(given).to(torch.float64).clone()
        requires_grad = bool(given.requires_grad)
        grad_before = _grad_facts(given)
        recorder = _backward_recorder()
        recorder.mark(given, "input")
        try:
            with recorder:
                got = run(answer, given, on=on)
        except LearnerRaised:
            if _shown_already(cases, _judge_known_gradient):
                break
            raise
        finally:
            grad_mode_after = torch.is_grad_enabled()
            torch.set_grad_enabled(grad_mode)  # so later calls (and the notebook) are not affected
        expected = (3 * before**2).to(given.dtype)
        cases.append(
            {
                "on": on,
                "got": value_facts(got),
                "expected": value_facts(expected),
                "cubed": (before**3).numpy().copy(),
                "rtol": rtol,
                "requires_grad": requires_grad,
                "requires_grad_after": bool(given.requires_grad),
                "grad_mode": grad_mode,
                "grad_mode_after": grad_mode_after,
                "grad_before": grad_before,
                "grad_after": _grad_facts(given),
                "leaf_grad_after": None if leaf is None else _grad_facts(leaf),
                "x_before": before.numpy().copy(),
                "x_after": torch.Tensor.detach(given).to(torch.float64).numpy().copy(),
                "backward_ops": recorder.backward_ops,
                "backward_passes": len(recorder.backward_passes),
                "formula_from_x": (not recorder.derived(got, "backward")
                                   and recorder.derived(got, "input")),
            }
        )
    return cases


def _judge_known_gradient(cases):
    for case in cases:
        got, expected, on = case["got"], case["expected"], case["on"]
        if case["grad_mode_after"] != case["grad_mode"]:
            state = "off" if case["grad_mode"] else "on"
            return Mistake("grad-mode-not-restored", (
                f"Your function left autograd switched {state} for the whole session (on {on}): "
                f"torch.is_grad_enabled() was {case['grad_mode']} before the call and "
                f"{case['grad_mode_after']} after it, so everything computed afterwards (the "
                "next call of your function too) "
                + ("records nothing for backward. " if case["grad_mode"] else "is recorded. ")
                + "Leave the grad mode as you found it: a `with torch.no_grad():` (or "
                "`with torch.enable_grad():`) block switches it back when the block ends; "
                "torch.set_grad_enabled(...) on its own line does not."
            ))
        second_call = "a second call" in on
        if "after the caller changed x in place" in on and got["kind"] == "tensor" and (
                got["shape"] == expected["shape"] and "values" in got and got["values"].size
                and same_values(got["values"], 3 * (case["x_before"] - 0.5) ** 2, rtol=case["rtol"])
                and not same_values(got["values"], expected["values"], rtol=case["rtol"])):
            return Mistake("cached-result", (
                f"After the caller changed x in place, your function returned the gradient of "
                f"x's old numbers (on {on}): it gave back a result kept from an earlier call. "
                "Compute the gradient afresh on every call."
            ))
        if got["kind"] == "NoneType" and case["requires_grad"]:
            return Mistake("copy-not-a-leaf", (
                f"known_gradient returned None on an x that itself requires grad (on "
                f"{on}), though it returned a gradient for plain tensors. A copy made "
                "from such an x (x.clone(), x * 1) is recorded as an operation on x: it is not "
                "a leaf, so its .grad stays None. Copy with x.detach().clone(), a fresh leaf, "
                "then requires_grad_(True)."
            ))
        if got["kind"] == "NoneType":
            return Mistake("returned-none", (
                f"known_gradient returned None (on {on}). x.grad stays None until "
                "backward() runs on a result computed from an x with requires_grad=True — "
                "and check that your function ends with `return`."
            ))
        if case["requires_grad"] and not case["requires_grad_after"]:
            return Mistake("detached-callers-x", (
                f"Your function changed the caller's x in place (on {on}): x required "
                "grad before the call and no longer does after it. x.detach_() (or "
                "x.requires_grad_(False)) detaches the caller's own tensor; use x.detach(), "
                "which returns a new tensor and leaves x as it was."
            ))
        if not same_values(case["x_after"], case["x_before"], rtol=0, atol=0):
            return Mistake("changed-x", (
                f"Your function changed its input x in place (on {on}): the caller's "
                "x holds other numbers afterwards. Compute new tensors; leave x as it was."
            ))
        if not case["requires_grad"] and case["requires_grad_after"]:
            return Mistake("requires-grad-on-callers-x", (
                f"Your function switched on requires_grad for the caller's own x (on {on}): "
                "x did not require grad before the call and does after it, so everything the "
                "caller computes from x afterwards is recorded. Make a copy that records "
                "instead: x.detach().clone().requires_grad_(True)."
            ))
        values = got.get("values") if got["kind"] == "tensor" and got["shape"] == expected["shape"] else None
        grad_before = case["grad_before"]
        if (values is not None and grad_before is not None and values.size
                and same_values(values, expected["values"] + grad_before, rtol=case["rtol"])):
            return Mistake("stale-grad", (
                f"Your gradient is 3x² plus the .grad the caller's x already held (on {on}): "
                "backward() adds to .grad, it does not replace it. Compute on a fresh copy, "
                "x.detach().clone().requires_grad_(True), whose .grad starts empty."
            ))
        if second_call and values is not None and values.size and same_values(
                values, 2 * expected["values"], rtol=case["rtol"]):
            return Mistake("grad-kept-between-calls", (
                f"The second call with the same x returned twice 3x² (on {on}): the first "
                "call's gradient stayed in a .grad and backward() added the new one to it. "
                "Compute on a fresh copy of x on every call."
            ))
        if not _same_grad(case["grad_after"], grad_before):
            before = "no .grad" if grad_before is None else "a .grad"
            after = "none" if case["grad_after"] is None else ("one" if grad_before is None else "another")
            return Mistake("changed-callers-grad", (
                f"Your function changed the caller's x.grad (on {on}): x held {before} before "
                f"the call and {after} after it. Leave the caller's x as it was: compute on a "
                "copy, x.detach().clone().requires_grad_(True)."
            ))
        if case["leaf_grad_after"] is not None:
            return Mistake("no-detach", (
                f"Your backward pass reached the tensors x was computed from (on {on}): the "
                "caller's w now has a .grad. Cut x from its history first with x.detach()."
            ))
        if values is not None and values.size:
            if same_values(values, case["cubed"], rtol=case["rtol"]):
                return Mistake("returned-y", (
                    f"You returned y = x**3 itself (on {on}). The gradient is what "
                    "backward() leaves in x.grad."
                ))
            if same_values(values, 2 * expected["values"], rtol=case["rtol"]):
                if case["backward_passes"] >= 2:
                    return Mistake("backward-twice", (
                        f"Your gradient is twice 3x² (on {on}), and {case['backward_passes']} "
                        "backward passes ran during the call: gradients accumulate in .grad, "
                        "so two backward() calls add up. Call backward() once."
                    ))
                return Mistake("twice-the-gradient", (
                    f"Your gradient is twice 3x² (on {on}); the gradient of (x**3).sum() is 3x²."
                ))
        if (values is not None and values.size and expected["dtype"] == "torch.float64"
                and got["dtype"] == "torch.float64"
                and not same_values(values, expected["values"], rtol=case["rtol"], atol=case["rtol"] / 10)
                and same_values(values, expected["values"], rtol=1e-5, atol=1e-6)):
            return Mistake("float32-detour", (
                f"Your float64 gradient agrees with 3x² to about 7 digits only (on {on}), the "
                "precision of float32: somewhere it went through a lower precision than x's "
                "own. Compute on a copy of x in x's dtype: x.detach().clone().requires_grad_(True)."
            ))
        problem = tensor_problem(got, expected, what="your gradient", on=on,
                                 rtol=case["rtol"], atol=case["rtol"] / 10)
        if problem:
            return problem
        if case["backward_ops"] == 0 and got["shape"] != [0] and (
                "a second call" in on or "a third call" in on) and any(
                earlier["backward_ops"] for earlier in cases if earlier is not case):
            return Mistake("cached-result", (
                f"No backward pass ran during this call (on {on}), though one ran on the "
                "first: your function gave back a result kept from an earlier call. Compute "
                "the gradient afresh, with autograd, on every call."
            ))
        if case["backward_ops"] == 0 and got["shape"] != [0]:
            return Mistake("no-backward", (
                f"Your values are 3x², but no backward pass ran during the call (on {on}): "
                "the task asks for the gradient computed by autograd. Call backward() on "
                "(x**3).sum() (or torch.autograd.grad) and return what it computes."
            ))
        if case.get("formula_from_x") and got["shape"] != [0]:
            return Mistake("formula-after-backward", (
                f"A backward pass ran during the call, but the tensor you returned was computed "
                f"from x outside it, not by it (on {on}): your values are 3x² worked out as a "
                "formula. Return what autograd computes: x.grad after backward(), or the "
                "result of torch.autograd.grad."
            ))
    return None


def _same_grad(after, before) -> bool:
    if after is None or before is None:
        return after is None and before is None
    return same_values(after, before, rtol=0, atol=0)


known_gradient = Exercise(
    "known_gradient",
    chapter=CHAPTER,
    title="Autograd on a known function",
    expects=Function("known_gradient", ("x",), returns="a tensor shaped like x: the gradient 3x²"),
    probe=_probe_known_gradient,
    judge=_judge_known_gradient,
    reference=known_gradient,
    passed_message=(
        "Correct: autograd's gradient matches 3x² on every shape and dtype tried, and the "
        "caller's x is left as it was."
    ),
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
            "x-not-recording",
        ),
        (
            "only for scalar outputs",
            "backward() with no argument needs a single number. Sum first: (x**3).sum().backward().",
            "backward-of-many-values",
        ),
        (
            "a leaf Variable that requires grad",
            "an in-place change of a tensor that requires grad. Compute a new tensor (x**3) instead.",
            "in-place-change-of-x",
        ),
        (
            "view size is not compatible with input tensor's size and stride",
            "x can be non-contiguous (a transposed tensor, for example), and .view() needs "
            "contiguous memory. Use .reshape(), or keep x's own shape: the gradient has it.",
            "view-of-non-contiguous",
        ),
        (
            "Trying to backward through the graph a second time",
            "backward() frees the graph it went through. Compute y again before another "
            "backward(), or call backward() once.",
            "second-backward",
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


_MATMUL_OPS = ("mm", "matmul", "bmm", "addmm", "mv", "dot", "baddbmm", "addmv", "linear")
# What a matrix product written out by hand (a[:, :, None] * a[None], then a sum) runs instead.
_ARITHMETIC_OPS = ("mul", "sum", "add", "prod", "einsum")
# Stands in for a GPU: the check runs every answer there, so that no real GPU is needed to see
# where the work ran and whether the result came back.
_STAND_IN = "meta"
_STAND_IN_TEXT = "device='meta', the check's stand-in for a GPU"


def _device_name(device) -> str:
    """'cuda:1', 'mps:0', 'cpu', 'meta': what a tensor on that device reports."""
    import torch

    device = torch.device(device)
    if device.index is None and device.type not in ("cpu", "meta"):
        device = torch.device(device.type, 0)
    return str(device)


def _device_recorder():
    """A dispatch mode that records where matrix products ran and what was copied back, and
    that gives the stand-in device (meta, which has no memory) real numbers: every operation on
    it is also run on a CPU copy, which is what a copy back returns."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten, tree_map

    aten = torch.ops.aten

    def is_stand_in(value):
        return isinstance(value, torch.Tensor) and value.device.type == _STAND_IN

    class DeviceRecorder(TorchDispatchMode):
        # Entering torch.compile's machinery on first use costs a second; nothing here compiles.
        _should_skip_dynamo = classmethod(lambda cls: False)

        def __init__(self):
            super().__init__()
            self.matmul_devices = set()
            self.arithmetic_ops = set()  # element-wise arithmetic and sums that ran
            self.copied_back_from = set()
            self.values_unknown = False
            self._shadows = {}  # id(stand-in tensor) -> (that tensor, its CPU copy)

        def _shadow(self, value):
            if is_stand_in(value):
                pair = self._shadows.get(id(value))
                if pair is None or pair[0] is not value:
                    raise LookupError
                return pair[1]
            if isinstance(value, torch.device) and value.type == _STAND_IN:
                return torch.device("cpu")
            return value

        def _remember(self, out, shadow_out):
            outs, shadows = tree_flatten(out)[0], tree_flatten(shadow_out)[0]
            for tensor, shadow in zip(outs, shadows):
                if is_stand_in(tensor) and isinstance(shadow, torch.Tensor):
                    self._shadows[id(tensor)] = (tensor, shadow)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            if func.__name__.split(".")[0] in _ARITHMETIC_OPS and tensors:
                self.arithmetic_ops.add(func.__name__.split(".")[0])
            if func.__name__.split(".")[0] in _MATMUL_OPS:
                self.matmul_devices.update(str(t.device) for t in tensors)
            target = kwargs.get("device")
            to_stand_in = target is not None and torch.device(target).type == _STAND_IN
            from_stand_in = any(is_stand_in(t) for t in tensors)
            if func in (aten._to_copy.default, aten.copy_.default):
                source = args[1] if func is aten.copy_.default else args[0]
                destination = args[0].device if func is aten.copy_.default else torch.device(target or args[0].device)
                if source.device.type != "cpu" and destination.type == "cpu":
                    self.copied_back_from.add(str(source.device))
            if func is aten._local_scalar_dense.default and args[0].device.type != "cpu":
                self.copied_back_from.add(str(args[0].device))  # .item(), .tolist()
            if not (from_stand_in or to_stand_in):
                return func(*args, **kwargs)
            mixed = {t.device.type for t in tensors if t.dim() > 0}
            if len(mixed) > 1 and func not in (aten._to_copy.default, aten.copy_.default):
                raise RuntimeError(
                    "Expected all tensors to be on the same device, but found at least two "
                    f"devices, {' and '.join(sorted(mixed))}!"
                )
            try:
                shadow_args, shadow_kwargs = tree_map(self._shadow, (args, kwargs))
            except LookupError:  # made in a way the recorder did not see: numbers unknown
                self.values_unknown = True
                return self._unknown(func, args, kwargs)
            shadow_out = func(*shadow_args, **shadow_kwargs)
            leaves = (
                func is aten._local_scalar_dense.default
                or (func is aten._to_copy.default and target is not None and not to_stand_in)
                or (func is aten.copy_.default and not is_stand_in(args[0]))
            )
            if leaves:
                return shadow_out if func is not aten.copy_.default else args[0]
            if func is aten.copy_.default or torch.Tag.inplace_view in func.tags:
                out = func(*args, **kwargs)
            elif func._schema.is_mutable:
                out = args[0]  # data changed in place: the CPU copy has it
            else:
                out = tree_map(
                    lambda s: torch.empty_strided(s.shape, s.stride(), dtype=s.dtype,
                                                  device=_STAND_IN)
                    if isinstance(s, torch.Tensor) else s,
                    shadow_out,
                )
            self._remember(out, shadow_out)
            return out

        def _unknown(self, func, args, kwargs):
            if func is aten._local_scalar_dense.default:
                return float("nan") if args[0].is_floating_point() else 0
            if (func is aten._to_copy.default and not kwargs.get("device") is None
                    and torch.device(kwargs["device"]).type != _STAND_IN):
                source = args[0]
                dtype = kwargs.get("dtype") or source.dtype
                filled = torch.full(source.shape, float("nan") if dtype.is_floating_point else 0,
                                    dtype=dtype)
                return filled.to(kwargs["device"])
            return func(*args, **kwargs)

    class StandInFactories(TorchFunctionMode):
        """torch.tensor(data, device='meta') builds its tensor below the dispatcher, where the
        recorder cannot see the numbers: build it on the CPU, then copy it over where the
        recorder sees the copy."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            device = kwargs.get("device")
            if (func in (torch.tensor, torch.as_tensor, torch.asarray) and device is not None
                    and torch.device(device).type == _STAND_IN):
                requires_grad = kwargs.get("requires_grad", False)
                on_cpu = func(*args, **dict(kwargs, device="cpu", requires_grad=False))
                return on_cpu.to(_STAND_IN).requires_grad_(requires_grad)
            return func(*args, **kwargs)

    recorder = DeviceRecorder()
    recorder.factories = StandInFactories()
    return recorder


def _smoke_test_calls():
    """(what to pass, how to name it, the device name the work must run on)."""
    import torch

    from course_utils.env import available_accelerators

    calls = [
        ("cpu", "device='cpu'", "cpu"),
        (torch.device("cpu"), "device=torch.device('cpu')", "cpu"),
        (_STAND_IN, _STAND_IN_TEXT, _STAND_IN),
        (torch.device(_STAND_IN), "device=torch.device('meta'), the check's stand-in for a GPU", _STAND_IN),
    ]
    for accelerator in available_accelerators():
        name = _device_name(accelerator)
        calls.append((torch.device(name), f"device=torch.device({name!r})", name))
    calls.append(("cpu", "device='cpu', a second call", "cpu"))
    return calls


def _probe_device_smoke_test(answer, run):
    import torch

    a = torch.arange(1.0, 10.0).reshape(3, 3)
    cases = []
    for device, on, name in _smoke_test_calls():
        context_before = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
        default_before = torch.get_default_device()
        recorder = _device_recorder()
        try:
            with recorder.factories, recorder:
                got = run(answer, device, on=on)
            facts = value_facts(got)
        except LearnerRaised:
            if _shown_already(cases, _judge_device_smoke_test):
                break
            raise
        finally:
            default_after = torch.get_default_device()
            if getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None) is not context_before:
                # torch.set_default_device inside the answer: put the learner's default back
                torch.set_default_device(None if context_before is None else context_before.device)
        cases.append(
            {
                "device": name,
                "on": on,
                "got": facts,
                "matmul_devices": sorted(recorder.matmul_devices),
                "arithmetic_ops": sorted(recorder.arithmetic_ops),
                "copied_back_from": sorted(recorder.copied_back_from),
                "values_unknown": recorder.values_unknown,
                "default_device_after": _device_name(default_after),
                "default_device_before": _device_name(default_before),
                "expected": value_facts(a @ a),
                "elementwise": (a * a).numpy().copy(),
                "transposed": (a @ a.T).numpy().copy(),
            }
        )
    return cases


def _judge_device_smoke_test(cases):
    for case in cases:
        got, expected, device, on = case["got"], case["expected"], case["device"], case["on"]
        if got["kind"] in ("list", "numpy.ndarray", "float", "tuple"):
            return Mistake("not-a-tensor", (
                f"device_smoke_test returned {a_or_an(got['kind'])} (on {on}); return the tensor "
                "itself, copied back to the CPU with .cpu()."
            ))
        if got["kind"] != "tensor":
            return tensor_problem(got, expected, what="your result", on=on)
        if case["default_device_after"] != case["default_device_before"]:
            return Mistake("default-device-left-set", (
                f"Your function left torch's default device set to {case['default_device_after']} "
                f"after the call (on {on}): every tensor the notebook creates afterwards lands "
                "there. Pass device=device to the factory, or use `with torch.device(device):`, "
                "which puts the default back when the block ends."
            ))
        if got["kind"] == "tensor" and got["device"] != "cpu":
            return Mistake("no-copy-back", (
                f"Your result is still on {got['device']} (on {on}). The last step of the smoke "
                "test is the copy back: return product.cpu()."
            ))
        if got["kind"] == "tensor" and got["dtype"].startswith(("torch.int", "torch.uint")):
            return Mistake("integer-matrix", (
                f"Your result has dtype {got['dtype']} (on {on}): torch.arange(1, 10) makes "
                "integers. Use torch.arange(1.0, 10.0) for float32."
            ))
        if got["kind"] == "tensor" and got["shape"] == [3, 3] and "values" in got and not case["values_unknown"]:
            if same_values(got["values"], case["elementwise"]):
                return Mistake("elementwise-product", (
                    f"These are element-wise squares (on {on}): `*` multiplies element by element. "
                    "The matrix product is `@` (or torch.matmul)."
                ))
            if same_values(got["values"], case["transposed"]):
                return Mistake("transposed-product", f"This is a @ a.T (on {on}); the task asks for a @ a.")
        ran_on = case["matmul_devices"]
        if not ran_on and case.get("arithmetic_ops"):
            return Mistake("no-matmul", (
                f"No matrix product ran during this call (on {on}): your result was worked out "
                f"with {', '.join(case['arithmetic_ops'])} instead. A smoke test is there to run "
                "the device's own matrix multiplication: compute a @ a (torch.matmul)."
            ))
        if not ran_on:
            return Mistake("cached-result", (
                f"No matrix product ran during this call (on {on}). The smoke test must "
                "compute a @ a on the device each time it is called: a result known in advance "
                "proves nothing about the device."
            ))
        if device not in ran_on:
            return Mistake("computed-off-device", (
                f"The matrix product ran on {', '.join(ran_on)}, not on {device} (on {on}): "
                "create the tensor with device=device, or move it there with .to(device), "
                "before computing."
            ))
        if device != "cpu" and got["kind"] == "tensor" and device not in case["copied_back_from"]:
            return Mistake("recomputed-on-cpu", (
                f"Your result is on the CPU, but nothing was copied back from {device} (on "
                f"{on}): the product computed there never left it. Return product.cpu()."
            ))
        if case["values_unknown"]:
            expected = {key: value for key, value in expected.items() if key != "values"}
        problem = tensor_problem(got, expected, what="your result", on=on)
        if problem:
            return problem
    return None


device_smoke_test = Exercise(
    "device_smoke_test",
    chapter=CHAPTER,
    title="Allocate, compute and copy back on a device",
    expects=Function("device_smoke_test", ("device",),
                     returns="a 3×3 float32 tensor on the CPU: the product computed on `device`"),
    probe=_probe_device_smoke_test,
    judge=_judge_device_smoke_test,
    reference=device_smoke_test,
    passed_message=(
        "Correct: on every device tried (the CPU, a stand-in GPU, and every accelerator this "
        "machine has), the matrix was made there, multiplied there and copied back."
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
            "operands-on-two-devices",
        ),
        (
            "Torch not compiled with CUDA enabled",
            "the code asks for 'cuda' itself. Use the `device` argument the check passes in: "
            "it may be the CPU, a GPU, or the stand-in 'meta'.",
            "cuda-written-in",
        ),
        (
            "'str' object has no attribute",
            "the check passes the device as a string ('cpu') as well as a torch.device; "
            "torch.device(device) turns either into a torch.device.",
            "device-given-as-string",
        ),
        (
            "to numpy",
            ".numpy() only works on CPU tensors, and the task asks for a tensor anyway: "
            "return product.cpu().",
            "numpy-of-device-tensor",
        ),
    ],
)


# ============================================================================================
# E7 — same seed, same numbers
# ============================================================================================
def seeded_draw(seed, n):
    torch.manual_seed(seed)
    return torch.randn(n)


def _seeded_elsewhere(seed) -> list[str]:
    """Which other generators are exactly in the state that seeding them with ``seed`` leaves."""
    seeded = []
    if random.getstate() == random.Random(seed).getstate():
        seeded.append("Python's random")
    state, fresh = np.random.get_state(), np.random.RandomState(seed).get_state()
    if state[0] == fresh[0] and np.array_equal(state[1], fresh[1]) and state[2] == fresh[2]:
        seeded.append("NumPy's")
    return seeded


def _probe_seeded_draw(answer, run):
    import torch

    calls = [(0, 5), (0, 5), (1, 5), (7, 3), (3, 1), (123457, 2)]
    cases = []
    first = None
    for index, (seed, n) in enumerate(calls):
        torch.rand(1)  # move the global stream on, as other notebook cells would
        on = f"seed={seed}, n={n}" + (", a second call" if index == 1 else "")
        try:
            got = run(answer, seed, n, on=on)
        except LearnerRaised:
            if _shown_already(cases, _judge_seeded_draw):
                break
            raise
        normal = torch.randn(n, generator=torch.Generator().manual_seed(seed))
        uniform = torch.rand(n, generator=torch.Generator().manual_seed(seed))
        cases.append(
            {
                "seed": seed,
                "n": n,
                "on": on,
                "got": value_facts(got),
                "expected": value_facts(normal),
                "uniform": uniform.numpy().copy(),
                "seeded_elsewhere": _seeded_elsewhere(seed),
                "same_object_as_first": index == 1 and got is first and got is not None,
            }
        )
        if index == 0:
            first = got
            if isinstance(got, torch.Tensor):
                # Later code may change a result in place: that must not reach the next draw.
                with torch.no_grad():
                    try:
                        torch.Tensor.add_(got, 100.0)
                    except Exception:  # a dtype or device that cannot take it: nothing to change
                        pass
    return cases


def _judge_seeded_draw(cases):
    for case in cases:
        got = case["got"]
        if got["kind"] != "tensor" or got["shape"] != case["expected"]["shape"] or "values" not in got:
            problem = tensor_problem(got, case["expected"], what="your draw", on=case["on"]) or Mistake(
                "unreadable-draw",
                f"The check could not read the numbers of your draw (on {case['on']}); return "
                f"{seeded_draw.expects.returns}.",
            )
            if got["kind"] == "tensor" and case["n"] == 1 and got["shape"] == []:
                return Mistake("squeezed", problem + (
                    " torch.randn(1) has shape (1,); something in your function dropped that dimension."
                ))
            return problem
    first, again, other = cases[0]["got"]["values"], cases[1]["got"]["values"], cases[2]["got"]["values"]
    if cases[1]["same_object_as_first"]:
        return Mistake("same-tensor-every-call", (
            "Your second call with seed=0 returned the very tensor object the first call "
            "returned, so a change made to one result (the check added 100 to the first) shows "
            "up in the other. Draw fresh numbers on every call."
        ))
    if not same_values(first, again, rtol=0, atol=0):
        elsewhere = cases[1]["seeded_elsewhere"]
        mistake, note = "not-seeded-before-draw", ""
        if elsewhere:
            mistake, note = "seeded-other-library", (
                f" Your function left {' and '.join(elsewhere)} generator seeded with 0, but "
                "those do not seed torch: torch.randn draws from torch's own generator."
            )
        return Mistake(mistake, (
            "Two calls with seed=0 gave different numbers (something ran in between, as other "
            "cells would). Seed torch inside the function, right before drawing, with "
            f"torch.manual_seed(seed).{note}"
        ))
    if same_values(first, other, rtol=0, atol=0):
        return Mistake("fixed-seed", (
            "seed=0 and seed=1 gave the same numbers: your function ignores its seed argument. "
            "Pass `seed` to torch.manual_seed, not a fixed number."
        ))
    for case in cases:
        got = case["got"]
        if same_values(got["values"], case["uniform"]):
            return Mistake("rand-not-randn", (
                "Your numbers repeat, but they are torch.rand's (uniform in [0, 1)); the task "
                "asks for torch.randn (normal, mean 0, std 1)."
            ))
        problem = tensor_problem(got, case["expected"], what="your draw", on=case["on"])
        if problem:
            return problem + " Seed with torch.manual_seed(seed), then call torch.randn(n)."
    return None


seeded_draw = Exercise(
    "seeded_draw",
    chapter=CHAPTER,
    title="Same seed, same numbers",
    expects=Function("seeded_draw", ("seed", "n"), returns="a float32 tensor of shape (n,) from torch.randn"),
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
            "seed-not-manual-seed",
        ),
    ],
)


# ============================================================================================
# E7 — write the seed check
# ============================================================================================
def seed_check(draw):
    first = draw(0)
    again = draw(0)
    other = draw(1)
    return torch.equal(first, again) and not torch.equal(first, other)


# The draws a seed check is given: the learner's code calls them, so a grading kernel must not
# guard them (course_utils.grading.guarded_code).
LEARNER_FACING = ("_seeded_rand", "_seed_ignored", "_never_seeded", "_python_random_seeded",
                  "_seeds_the_wrong_library", "_seeded_integers", "_seeded_float64", "_padded")


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


def _seeded_integers(seed):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 1000, (5,), generator=generator)


def _seeded_float64(seed):
    import torch

    torch.manual_seed(seed)
    return torch.rand(3, dtype=torch.float64)


def _padded(seed):
    import torch

    torch.manual_seed(seed)
    return torch.cat([torch.zeros(1), torch.rand(4)])


def _draws():
    """Fresh draw functions for one probe: (draw, reproducible?, what it does). Those that
    change from call to call count their own calls, so every probe sees the same behaviour."""
    import torch

    calls = {"shuffled": 0, "jitter": 0, "jitter64": 0}
    calls_per_seed = {}
    history = []
    buffer = torch.empty(4)

    def _refilled(seed):
        return torch.rand(4, out=buffer)

    def _shuffled(seed):
        calls["shuffled"] += 1
        torch.manual_seed(seed)
        return torch.roll(torch.rand(5), shifts=calls["shuffled"])

    def _jitter(seed):
        calls["jitter"] += 1
        torch.manual_seed(seed)
        return torch.rand(4) * (1 + 4e-6 * calls["jitter"])

    def _jitter64(seed):
        calls["jitter64"] += 1
        torch.manual_seed(seed)
        return torch.rand(4, dtype=torch.float64) * (1 + 2.0**-38 * calls["jitter64"])

    def _reshaped(seed):
        # Counted per seed, so two calls with one seed differ in shape whatever ran between.
        calls_per_seed[seed] = calls_per_seed.get(seed, 0) + 1
        torch.manual_seed(seed)
        numbers = torch.rand(6)
        return numbers if calls_per_seed[seed] % 2 else numbers.reshape(2, 3)

    def _growing(seed):
        torch.manual_seed(seed)
        history.append(torch.rand(1))
        return torch.cat(history)

    return [
        (_seeded_rand, True, "seeds torch, then draws"),
        (_seed_ignored, False, "ignores its seed (always torch.manual_seed(1234))"),
        (_never_seeded, False, "never seeds at all"),
        (_python_random_seeded, True, "draws from random.Random(seed), shape (2, 3)"),
        (_seeds_the_wrong_library, False, "seeds NumPy, then draws with torch"),
        (_seeded_integers, True, "draws integers (int64) from its own seeded generator"),
        (_seeded_float64, True, "seeds torch, then draws float64 numbers"),
        (_padded, True, "seeds torch and returns a fixed 0 followed by four random numbers"),
        (_shuffled, False, "returns the same numbers for the same seed, but in another order on every call"),
        (_jitter, False, "returns numbers for the same seed that differ in the 6th digit from call "
                         "to call (as a non-deterministic GPU kernel does)"),
        (_jitter64, False, "returns float64 numbers for the same seed that differ in the 12th digit "
                           "from call to call (as a non-deterministic GPU kernel does)"),
        (_refilled, False, "never seeds, and returns one tensor object that it refills in place on "
                           "every call (torch.rand(4, out=buffer))"),
        (_growing, False, "draws one number per call and returns every number it has drawn so far, "
                          "so for the same seed it returns shape (1,), then (2,)"),
        (_reshaped, False, "returns the same six numbers for the same seed, but as shape (6,) on "
                           "one call with that seed and (2, 3) on the next"),
    ]


def _as_bool(value):
    import torch

    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype == torch.bool:
        return bool(value.item())
    if isinstance(value, np.bool_):
        return bool(value)
    return value if type(value) is bool else None


def _probe_seed_check(answer, run):
    draws = _draws()
    # Each draw once, then the first two again: a check must not depend on what it saw before.
    schedule = list(range(len(draws))) + [0, 1]
    cases = []
    for position, index in enumerate(schedule):
        draw, expected, description = draws[index]
        again = position >= len(draws)
        try:
            got = run(answer, draw, on=f"a draw function that {description}" + (", checked again" if again else ""))
        except LearnerRaised:
            if _shown_already(cases, _judge_seed_check):
                break
            raise
        cases.append(
            {
                "index": index,
                "again": again,
                "description": description,
                "expected": expected,
                "got": _as_bool(got),
                "facts": value_facts(got),
            }
        )
    return cases


def _judge_seed_check(cases):
    for case in cases:
        if case["got"] is None:
            facts = case["facts"]
            mistake, tip = "not-a-bool", ""
            shown = facts.get("repr", "")
            if facts["kind"] == "tensor":
                shown = f"shape {shape_text(facts['shape'])}, {facts['dtype']}"
                tip = " Turn your comparison into one bool, e.g. with torch.equal(a, b)."
            if facts["kind"] == "tensor" and facts["dtype"] == "torch.bool":
                mistake, tip = "elementwise-comparison", (
                    " `a == b` compares tensors element by element and gives a tensor of "
                    "booleans; torch.equal(a, b) gives one True or False."
                )
            elif facts["kind"] == "NoneType":
                mistake = "missing-return"
                tip = " A way through your function that ends without `return` gives None."
            return Mistake(mistake, (
                f"seed_check returned {a_or_an(facts['kind'])} ({shown}) for a draw function "
                f"that {case['description']}; it should return True or False.{tip}"
            ))
    first_answers = {case["index"]: case["got"] for case in cases if not case["again"]}
    for case in cases:
        if case["again"] and case["got"] != first_answers[case["index"]]:
            return Mistake("remembers-earlier-calls", (
                f"Your check said {first_answers[case['index']]} for a draw function that "
                f"{case['description']}, then {case['got']} when given the same function again "
                "after checking others: its answer depends on what it checked before. Call draw "
                "afresh inside the function each time and keep nothing between calls."
            ))
    for case in cases:
        if case["got"] != case["expected"]:
            if case["expected"]:
                return Mistake("rejects-reproducible", (
                    f"Your check rejected a draw function that {case['description']}, which is "
                    "reproducible: the same seed gives exactly the same numbers and another seed "
                    "other numbers (compare whole tensors: torch.equal(a, b))."
                ))
            if "ignores its seed" in case["description"]:
                return Mistake("same-seed-only", (
                    "Your check accepted a draw function that ignores its seed: it returns the "
                    "same numbers for every seed. Also call it with two different seeds and "
                    "require different numbers."
                ))
            # Not reproducible, yet accepted; unless a clue below says how, the check never
            # compared two draws made with one seed.
            mistake, why = "different-seeds-only", ""
            if "another order" in case["description"]:
                mistake, why = "order-blind-comparison", (
                    " Your comparison does not look at where each number is (a sum, a mean or "
                    "sorted values are the same in any order); torch.equal compares element by "
                    "element."
                )
            elif "6th digit" in case["description"]:
                mistake, why = "allows-tolerance", (
                    " Your comparison allows a tolerance (as torch.allclose does by default); "
                    "reproducible means exactly the same numbers: torch.equal."
                )
            elif "12th digit" in case["description"]:
                mistake, why = "rounds-differences-away", (
                    " Something in your comparison rounds these differences away: a tolerance, "
                    "however small, or a conversion to a lower precision (float64 to float32). "
                    "Reproducible means exactly the same numbers: torch.equal, on the tensors as "
                    "they are."
                )
            elif "refills in place" in case["description"]:
                mistake, why = "compares-objects", (
                    " Every call returns the same tensor object, so a result compared with "
                    "itself (`a is b`) always looks reproducible. Compare the numbers, not the "
                    "objects: torch.equal(a, b), with a result cloned before the next call "
                    "refills it."
                )
            elif "(6,) on one call with that seed" in case["description"]:
                mistake, why = "ignores-shape", (
                    " The same numbers in a tensor of another shape are not the same numbers in "
                    "the same places: your comparison looks past the shape (flattened values "
                    "or raw bytes). torch.equal(a, b) also requires equal shapes."
                )
            elif "shape (1,), then (2,)" in case["description"]:
                mistake, why = "broadcast-comparison", (
                    " Tensors of different shapes are not the same numbers in the same places, "
                    "but an element-wise comparison broadcasts them: (a == b).all() and "
                    "torch.allclose(a, b) are True for a (1,) tensor against a (2,) one holding "
                    "the same number twice. torch.equal(a, b) also requires equal shapes."
                )
            return Mistake(mistake, (
                f"Your check accepted a draw function that {case['description']}: called twice "
                f"with the same seed it does not give exactly the same tensor.{why}"
            ))
    return None


seed_check = Exercise(
    "seed_check",
    chapter=CHAPTER,
    title="Write the seed check",
    expects=Function("seed_check", ("draw",), returns="True or False (one bool)"),
    probe=_probe_seed_check,
    judge=_judge_seed_check,
    reference=seed_check,
    passed_message="Correct: your check tells reproducible draws from every broken kind tried.",
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
            "tensor-comparison-as-bool",
        ),
        (
            "cannot be converted to Scalar",
            ".item() reads a single number, and a draw may return a tensor of any shape "
            "(this one has more than one number there): compare whole tensors with "
            "torch.equal(a, b).",
            "item-of-many-values",
        ),
    ],
)
