"""Chapter 00's kernel_environment (E4): its catalogue of answers, and what only a record shows."""

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from course_utils.exercises import environment as ex
from course_utils.exercises.core import Outcome
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


# -- issue 45, fresh round (from the task text) ------------------------------------------
def env_torch_dir_by_os_path():
    return {
        "python": os.fspath(Path(sys.executable)),
        "prefix": os.fspath(sys.prefix),
        "in_virtualenv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "torch_dir": os.path.dirname(torch.__file__),
    }


def env_with_a_misspelt_key():
    return {"python": sys.executable, "prefix": sys.prefix, "in_virtualenv": sys.prefix != sys.base_prefix,
            "torch_path": str(Path(torch.__file__).parent)}


CATALOGUE = Catalogue({
    ex.kernel_environment: [
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
              "'in_virtualenv' is False; it should be True", "sys.base_prefix"),
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
        # -- round 3 of outside testing
        right("an OrderedDict, and os.path.samefile", env_as_an_ordered_dict),
        right("importlib.metadata's locate_file", env_from_distribution_metadata),
        wrong("facts worked out once, when the cell defining the function ran",
              env_facts_worked_out_at_import, "the same whatever environment the kernel runs in",
              "inside the function", kind=STATEFUL),
        wrong("sys._base_executable", env_base_executable,
              "where the environment's python link points", "use sys.executable", kind=EDGE),
        # -- issue 45, fresh round (from the task text) --

        wrong("sys.argv[0] as the interpreter", _environment_with(python=lambda: sys.argv[0]),
              "'python' should be the interpreter running this kernel"),
        wrong("sys.exec_prefix as the environment", _environment_with(prefix=lambda: sys.exec_prefix),
              "'prefix' is sys.exec_prefix", kind=EDGE),
        wrong("CONDA_PREFIX also counts as a virtual environment",
              _environment_with(in_virtualenv=lambda: sys.prefix != sys.base_prefix or "CONDA_PREFIX" in os.environ),
              "a conda environment is not a virtual environment", kind=EDGE),
        wrong("only the old real_prefix test", _environment_with(in_virtualenv=lambda: hasattr(sys, "real_prefix")),
              "was False in every kernel the check tried"),
        wrong("torch_dir built from site.getsitepackages()",
              _environment_with(torch_dir=lambda: os.path.join(__import__("site").getsitepackages()[0], "torch")),
              "'torch_dir' should be the folder of the torch package this kernel imported", kind=EDGE),
        wrong("torch_dir as the folder's name", _environment_with(torch_dir=lambda: Path(torch.__file__).parent.name),
              "got 'torch'"),
        wrong("the interpreter's file name only", _environment_with(python=lambda: os.path.basename(sys.executable)),
              "not 'python"),
        wrong("a misspelt key", env_with_a_misspelt_key, "lacks the key 'torch_dir'", "torch_path"),
        wrong("in_virtualenv: the interpreter lies outside base_prefix",
              _environment_with(in_virtualenv=lambda: not sys.executable.startswith(sys.base_prefix)),
              "made inside its installation's folder", kind=EDGE),
        wrong("site.getsitepackages()[0] as the environment",
              _environment_with(prefix=lambda: __import__("site").getsitepackages()[0]),
              "'prefix' should be the environment's folder"),
        right("os.fspath, getattr(sys, 'base_prefix') and os.path.dirname", env_torch_dir_by_os_path),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()


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
