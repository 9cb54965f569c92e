"""E4 — kernel_environment: which interpreter, which environment, which torch."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, Mistake, a_or_an
from course_utils.exercises.environment.common import CHAPTER, _shown_already
from course_utils.exercises.facts import value_facts
from course_utils.exercises.running import LearnerRaised


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
