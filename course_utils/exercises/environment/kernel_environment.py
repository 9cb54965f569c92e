"""E4 — kernel_environment: which interpreter, which environment, which torch.

Engine: applies states.session_settings' idea to the interpreter's own state: the answer runs in
simulated kernels (sys, sysconfig, site and the shell's variables describing each); hand-written
because the answer takes no input at all, and what it may read is the state of the process.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

from course_utils.exercises.core import Exercise, Function, a_or_an
from course_utils.exercises.environment.common import CHAPTER, _shown_already
from course_utils.exercises.facts import value_facts
from course_utils.exercises.messages import Messages
from course_utils.exercises.running import LearnerRaised

MESSAGES = Messages("kernel_environment", {
    "hint-1": "Everything you need is in the `sys` module and in `torch.__file__`.",
    "hint-2": "sys.executable is the running interpreter; sys.prefix is its environment's folder.",
    "hint-3": ("In a virtual environment sys.prefix and sys.base_prefix differ. Environment "
               "variables such as VIRTUAL_ENV only describe the shell that started Jupyter."),
    "passed": ("Correct: these four facts tell you which installation every `import` in this "
               "notebook comes from — and they follow the kernel into any environment."),
    "name-not-imported": (
        "a name used before it was imported or defined in this notebook: import it "
        "(import sys, import torch, from pathlib import Path) above your function."),
    "not-a-dict": "kernel_environment() returned {kind}{where}; it should return a dict.",
    "missing-keys": "Your dict lacks the key{plural} {missing} (it has: {has}){where}.",
    "not-read-in-call": (
        "'{key}' did not follow the kernel: on {on}, where {source} is {truth}, your function "
        "still returned {got}, the value of the kernel you ran it in. A path written out, or "
        "worked out before the call, describes one machine only: read {source} inside the "
        "function."),
    "python-not-a-path": "'python' should be a path (a str or a Path); got {kind} ({got}){where}.",
    "python-from-path": (
        "'python' is the first python on your PATH (what `which python` finds), which need not "
        "be the interpreter running this kernel: JupyterLab can start kernels from other "
        "environments{where}. Use sys.executable."),
    "resolved-python-link": (
        "'python' is where the environment's python link points (the base installation it was "
        "made from){where}. The environment is named by the link itself: use sys.executable as "
        "it is, without resolving it."),
    "wrong-python": (
        "'python' should be the interpreter running this kernel, sys.executable ({truth}), "
        "not {got}{where}."),
    "prefix-from-python-path": (
        "'prefix' is the folder two levels above the interpreter (on {on}, where sys.executable "
        "is {python}); that holds only where the interpreter lies in a bin/ or Scripts/ folder. "
        "Here the environment's folder, sys.prefix, is {truth}: use sys.prefix rather than "
        "working it out from a path."),
    "prefix-is-exec-prefix": (
        "'prefix' is sys.exec_prefix (on {on}), the folder an installation keeps its "
        "platform-specific files in; the environment's folder is sys.prefix ({truth}). The two "
        "are one folder in most installations and in every virtual environment, not in all."),
    "wrong-prefix": (
        "'prefix' should be the environment's folder, sys.prefix ({truth}); got {got}{where}. "
        "(sys.base_prefix is the installation the environment was made from.)"),
    "in-virtualenv-not-bool": "'in_virtualenv' should be True or False; got {kind} ({got}){where}.",
    "in-virtualenv-from-virtual-env-var": (
        "'in_virtualenv' is {flag}{where}, but this kernel {runs} in a virtual environment. The "
        "VIRTUAL_ENV variable only says whether a shell ran `activate`; a kernel started by "
        "JupyterLab usually was not. Compare sys.prefix with sys.base_prefix: they differ "
        "inside a virtual environment."),
    "word-runs": "runs",
    "word-does-not-run": "does not run",
    "in-virtualenv-from-conda-var": (
        "'in_virtualenv' is True (on {on}), but a conda environment is not a virtual "
        "environment: its sys.prefix is its own sys.base_prefix. The CONDA_PREFIX variable "
        "only says that a shell ran `conda activate`. Compare sys.prefix with sys.base_prefix, "
        "and nothing else."),
    "in-virtualenv-constant": (
        "'in_virtualenv' was {flag} in every kernel the check tried, including {on}, where it "
        "should be {truth}: your value is the same whatever environment the kernel runs in. "
        "Compare sys.prefix with sys.base_prefix inside the function: they differ inside a "
        "virtual environment."),
    "wrong-in-virtualenv": (
        "'in_virtualenv' is {flag}; it should be {truth}{where}. Inside a virtual environment "
        "sys.prefix differs from sys.base_prefix; outside one they are the same folder."),
    "torch-file-not-folder": (
        "'torch_dir' is torch's __init__.py file; the key asks for the folder that holds it "
        "(Path(torch.__file__).parent)."),
    "wrong-torch-dir": (
        "'torch_dir' should be the folder of the torch package this kernel imported ({truth}); "
        "got {got}{where}."),
})


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
    inside = installation / "envs" / "work"  # a venv in its installation's folder (pyenv-virtualenv)
    (inside / "bin").mkdir(parents=True)
    (inside / "pyvenv.cfg").write_text(f"home = {installation / 'bin'}\n")
    for made in (link, inside / "bin" / "python3"):
        try:  # a virtual environment's interpreter is a link to the installation's
            made.symlink_to(installation / "bin" / "python3")
        except OSError:
            made.write_bytes(b"")
    conda = folder / "miniforge" / "envs" / "course"  # a conda environment: a whole installation
    split, split_exec = folder / "split", folder / "split-exec"  # ./configure --exec-prefix=...
    for place in (conda / "bin", split / "lib", split_exec / "bin"):
        place.mkdir(parents=True)
    (conda / "bin" / "python3").write_bytes(b"")
    (split_exec / "bin" / "python3").write_bytes(b"")
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
        {
            "on": (f"a simulated kernel in a virtual environment made inside its installation's "
                   f"folder ({inside}), as pyenv-virtualenv makes them"),
            "sys": {"executable": str(inside / "bin" / "python3"), "prefix": str(inside),
                    "exec_prefix": str(inside), "base_prefix": str(installation),
                    "base_exec_prefix": str(installation)},
            "virtual_env": None,
            "in_virtualenv": True,
        },
        {
            "on": (f"a simulated kernel in a conda environment ({conda}), started from a shell "
                   "where `conda activate` set CONDA_PREFIX"),
            "sys": {"executable": str(conda / "bin" / "python3"), "prefix": str(conda),
                    "exec_prefix": str(conda), "base_prefix": str(conda), "base_exec_prefix": str(conda)},
            "virtual_env": None,
            "conda_prefix": str(conda),
            "in_virtualenv": False,
        },
        {
            "on": (f"a simulated kernel of an installation built with its own exec_prefix "
                   f"({split}, its compiled files in {split_exec})"),
            "sys": {"executable": str(split_exec / "bin" / "python3"), "prefix": str(split),
                    "exec_prefix": str(split_exec), "base_prefix": str(split),
                    "base_exec_prefix": str(split_exec)},
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
    variables = {"VIRTUAL_ENV": kernel["virtual_env"], "CONDA_PREFIX": kernel.get("conda_prefix")}
    saved_env = {name: os.environ.get(name) for name in variables}
    derived = _derived_from_sys(kernel)

    def put(values):
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    try:
        for module, name, _, value in derived:
            setattr(module, name, value)
        for name, value in kernel["sys"].items():
            setattr(sys, name, value)
        put(variables)
        return run(answer, on=kernel["on"])
    finally:
        for name, value in saved.items():
            setattr(sys, name, value)
        for module, name, value, _ in derived:
            setattr(module, name, value)
        put(saved_env)


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
                "exec_prefix": _normal_path(kernel["sys"]["exec_prefix"]),
                "conda_prefix_set": kernel.get("conda_prefix") is not None,
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
        return MESSAGES("not-a-dict", kind=a_or_an(record["kind"]), where=where)
    missing = [key for key in _ENV_KEYS if key not in record["got"]]
    if missing:
        return MESSAGES("missing-keys", plural="s" if len(missing) > 1 else "",
                        missing=", ".join(repr(k) for k in missing), has=", ".join(record["keys"]) or "none",
                        where=where)
    truth, got, clues = record["truth"], record["got"], record["clues"]
    here = clues.get("this_kernel", {})

    def shown(key):
        return got[key]["facts"].get("repr")

    def did_not_follow(key, source):
        return MESSAGES("not-read-in-call", key=key, on=on, source=source, truth=truth[key], got=shown(key))

    python = got["python"]["path"]
    if python != truth["python"]:
        if python is None:
            return MESSAGES("python-not-a-path", kind=a_or_an(got["python"]["facts"]["kind"]),
                            got=shown("python"), where=where)
        if python == clues["python_on_path"]:
            return MESSAGES("python-from-path", where=where)
        if python == clues["python_resolved"]:
            return MESSAGES("resolved-python-link", where=where)
        if simulated and python == here.get("python"):
            return did_not_follow("python", "sys.executable")
        return MESSAGES("wrong-python", truth=truth["python"], got=shown("python"), where=where)

    prefix = got["prefix"]["path"]
    if prefix != truth["prefix"]:
        if simulated and prefix == here.get("prefix"):
            return did_not_follow("prefix", "sys.prefix")
        if prefix is not None and prefix == clues.get("exec_prefix"):
            return MESSAGES("prefix-is-exec-prefix", on=on, truth=truth["prefix"])
        if prefix is not None and prefix == clues.get("prefix_from_python"):
            return MESSAGES("prefix-from-python-path", on=on, python=truth["python"], truth=truth["prefix"])
        return MESSAGES("wrong-prefix", truth=truth["prefix"], got=shown("prefix"), where=where)

    flag = got["in_virtualenv"]["bool"]
    if flag is None:
        return MESSAGES("in-virtualenv-not-bool", kind=a_or_an(got["in_virtualenv"]["facts"]["kind"]),
                        got=shown("in_virtualenv"), where=where)
    if flag != truth["in_virtualenv"]:
        flags = [(r["flag"], r["virtual_env_var_set"]) for r in everywhere]
        if all(f == var for f, var in flags):
            return MESSAGES("in-virtualenv-from-virtual-env-var", flag=flag, where=where,
                            runs=MESSAGES.text("word-runs" if truth["in_virtualenv"] else "word-does-not-run"))
        if len({f for f, _ in flags}) == 1:
            return MESSAGES("in-virtualenv-constant", flag=flag, on=on, truth=truth["in_virtualenv"])
        if flag and clues.get("conda_prefix_set"):
            return MESSAGES("in-virtualenv-from-conda-var", on=on)
        return MESSAGES("wrong-in-virtualenv", flag=flag, truth=truth["in_virtualenv"], where=where)

    torch_dir = got["torch_dir"]["path"]
    if torch_dir != truth["torch_dir"]:
        if torch_dir == clues["torch_file"]:
            return MESSAGES("torch-file-not-folder")
        return MESSAGES("wrong-torch-dir", truth=truth["torch_dir"], got=shown("torch_dir"), where=where)
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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({"name-not-imported": "is not defined"}),
    messages=MESSAGES,
)
