"""requirements.txt and environment.yml pin the same versions; pyproject.toml admits them."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PYPI = {"pytorch": "torch"}
# In environment.yml but not requirements.txt, on purpose: the interpreter and pip itself.
CONDA_ONLY = {"python", "pip"}


def read_requirements() -> list[Requirement]:
    reqs = []
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            reqs.append(Requirement(line))
    return reqs


def read_environment_yml() -> tuple[dict[str, str | None], list[str]]:
    """(conda package -> version or None when unpinned, the entries of the pip: section).

    Parsed by hand: a list of "- name==version" (or "=version") under "dependencies:", and a
    nested "- pip:" list.
    """
    conda: dict[str, str | None] = {}
    pip: list[str] = []
    section = None
    pip_indent = None
    for raw in (ROOT / "environment.yml").read_text(encoding="utf-8").splitlines():
        line = re.sub(r"(^|\s)#.*", "", raw).rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            section = line.split(":", 1)[0].strip()
            continue
        if section != "dependencies" or not line.lstrip().startswith("- "):
            continue
        entry = line.strip()[2:].strip()
        if pip_indent is not None and indent > pip_indent:
            pip.append(entry)
            continue
        pip_indent = None
        if entry == "pip:":
            pip_indent = indent
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(?:={1,2}\s*(\S+))?", entry)
        assert match, f"environment.yml: cannot read the entry {entry!r}; write it as name==version"
        conda[match[1]] = match[2]
    return conda, pip


ENV_CONDA, ENV_PIP = read_environment_yml()
REQUIREMENTS = read_requirements()


def marker_environment() -> dict[str, str]:
    """Marker values for the Python that environment.yml pins (python=3.11)."""
    version = ENV_CONDA.get("python")
    assert version, "environment.yml pins no python version"
    version = version.rstrip(".*")
    short = ".".join(version.split(".")[:2])
    full = version if version.count(".") >= 2 else version + ".0"
    env = dict(default_environment())
    env.update(python_version=short, python_full_version=full)
    return env


def pinned_version(req: Requirement) -> str | None:
    """The version of "name==version"; None for anything else (the test below reports it)."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version:
        return specs[0].version
    return None


def test_every_requirement_is_pinned_exactly():
    loose = [str(req) for req in REQUIREMENTS if pinned_version(req) is None]
    assert not loose, "requirements.txt: pin these to one exact version with ==: " + ", ".join(loose)


def test_requirements_and_environment_yml_agree():
    env = marker_environment()
    from_requirements: dict[str, str] = {}
    for req in REQUIREMENTS:
        if req.marker is None or req.marker.evaluate(env):
            name = canonicalize_name(req.name)
            assert name not in from_requirements, f"requirements.txt pins {req.name} twice"
            from_requirements[name] = pinned_version(req) or str(req.specifier)
    from_conda = {
        canonicalize_name(CONDA_TO_PYPI.get(name, name)): (name, version)
        for name, version in ENV_CONDA.items()
        if name not in CONDA_ONLY
    }

    problems = []
    for name, version in sorted(from_requirements.items()):
        if name not in from_conda:
            problems.append(f"{name}: requirements.txt pins {version}, environment.yml lacks it")
            continue
        conda_name, conda_version = from_conda[name]
        if conda_version != version:
            problems.append(
                f"{name}: requirements.txt pins {version}, "
                f"environment.yml pins {conda_name} {conda_version or '(no version)'}"
            )
    for name, (conda_name, conda_version) in sorted(from_conda.items()):
        if name not in from_requirements:
            problems.append(
                f"{conda_name}: environment.yml pins {conda_version or '(no version)'}, "
                "requirements.txt lacks it (for this Python)"
            )
    assert not problems, "requirements.txt and environment.yml disagree:\n" + "\n".join(problems)


def test_environment_yml_pip_section_is_only_the_course():
    assert ENV_PIP == ["-e ."], (
        f"environment.yml's pip: section should hold only '-e .', not {ENV_PIP}; "
        "put dependencies in the conda list (and requirements.txt)"
    )


def pyproject_dependencies() -> list[Requirement]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # Python 3.10: the requirement strings that look like "name>=x"
        names = re.findall(r'"([A-Za-z0-9_.\-]+\s*[<>=!~][^"]*)"', text)
        return [Requirement(n) for n in names if not n.startswith(("setuptools", "python"))]
    project = tomllib.loads(text)["project"]
    deps = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        deps += extra
    return [Requirement(d) for d in deps]


def test_pyproject_ranges_admit_the_pins():
    """pyproject.toml's ranges (torch>=...) admit every version requirements.txt pins."""
    ranges: dict[str, SpecifierSet] = {
        canonicalize_name(r.name): r.specifier for r in pyproject_dependencies()
    }
    assert "torch" in ranges, "pyproject.toml lists no torch dependency"
    problems = []
    for req in REQUIREMENTS:
        name = canonicalize_name(req.name)
        version = pinned_version(req)
        if version and name in ranges and not ranges[name].contains(version, prereleases=True):
            problems.append(
                f"{req.name}: requirements.txt pins {version}, pyproject.toml asks {ranges[name]}"
            )
    assert not problems, "\n".join(problems)


def test_the_tools_requirements_pin_one_exact_version_of_each_package_for_every_python():
    """requirements-book.txt and requirements-browser.txt: tools installed apart from .venv."""
    for name in ("requirements-book.txt", "requirements-browser.txt"):
        reqs = [Requirement(line.split("#", 1)[0].strip())
                for line in (ROOT / name).read_text(encoding="utf-8").splitlines()
                if line.split("#", 1)[0].strip()]
        assert reqs, name
        for minor in range(10, 15):
            env = {**default_environment(), "python_version": f"3.{minor}",
                   "python_full_version": f"3.{minor}.0"}
            applying = [req for req in reqs if req.marker is None or req.marker.evaluate(env)]
            names = [canonicalize_name(req.name) for req in applying]
            assert len(names) == len(set(names)), (name, minor, names)
            for req in applying:
                assert len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==", (name, str(req))
