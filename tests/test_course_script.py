"""The logic of the `course` script, fast: a copy of the script runs in a temporary course folder.

Nothing is installed: the Pythons it finds on PATH, and the .venv's Python it makes, are stand-ins
(FAKE_PYTHON below) that report the version a test gives them, run the script's own version
check and stamp code under that version, and record every other command they are given.
tests/test_course_setup.py does one real set-up; these tests cover the choices around it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "course"
TORCH_PIN = re.search(r"^torch==(\S+)", (ROOT / "requirements.txt").read_text(), re.M).group(1)

# A stand-in Python. Its version is in the file beside it (NAME.version); "broken" makes it fail
# to start, as a pyenv shim for a version that is not installed does.
FAKE_PYTHON = r'''#!{interpreter} -IS
import json, os, shutil, sys

me, args = sys.argv[0], sys.argv[1:]
with open(me + ".version") as f:
    text = f.read().strip()
if text == "broken":
    sys.exit(os.path.basename(me) + ": command not found")
version = tuple(int(n) for n in text.split("."))
line = " ".join(args)
quiet = args[:1] in (["-"], ["-c"]) or args[:3] in (
    ["-m", "course_utils.torch_build", "key"], ["-m", "pip", "--version"])
if not quiet and os.environ.get("FAKE_PYTHON_LOG"):
    with open(os.environ["FAKE_PYTHON_LOG"], "a") as log:
        log.write(json.dumps({"python": me, "args": args}) + "\n")
if os.environ.get("FAKE_FAIL") and os.environ["FAKE_FAIL"] in line:
    sys.exit("fake failure: " + line)


def run(code, argv):
    """Runs the script's own Python code as this version would."""
    import platform
    sys.version_info = version + ("final", 0)
    platform.python_version = lambda: "%d.%d.%d" % version
    sys.argv = argv
    exec(compile(code, "<course>", "exec"), {"__name__": "__main__"})


if args[:1] == ["-c"]:
    run(args[1], ["-c"] + args[2:])
elif args[:2] == ["-I", "-"]:  # verify_venv
    sys.stdin.read()
    sys.exit(int(os.environ.get("FAKE_VERIFY_RC", "0")))
elif args[:1] == ["-"]:  # venv_stamp
    run(sys.stdin.read(), args)
elif args[:2] == ["-m", "venv"]:
    os.makedirs(os.path.join(args[2], "bin"))
    for suffix in ("", ".version"):
        shutil.copy(me + suffix, os.path.join(args[2], "bin", "python" + suffix))
elif args[:3] == ["-m", "course_utils.torch_build", "key"]:
    # What course_utils.torch_build.key() prints (tests/test_torch_build.py covers it).
    print("COURSE_TORCH=%s TORCH_INDEX_URL=%s"
          % (os.environ.get("COURSE_TORCH", ""), os.environ.get("TORCH_INDEX_URL", "")))
elif args[:2] == ["-m", "course_utils.tool_env"]:
    print(me)  # the tool environment's Python: this stand-in again
elif args[:1] == ["tests/chapter_selection.py"]:  # the paths a chapter's run collects
    print(os.environ.get("FAKE_SELECTED_PATHS", ""))
    sys.exit(int(os.environ.get("FAKE_SELECTION_RC", "0")))
elif args[:1] == ["tests/e2e_groups.py"]:  # the end-to-end groups changed since they passed
    print(os.environ.get("FAKE_STALE", ""))
    sys.exit(int(os.environ.get("FAKE_E2E_RC", "0")))
elif args[:2] == ["-m", "pytest"]:
    if os.environ.get("COURSE_SUMMARY_FILE") and os.environ.get("FAKE_PYTEST_SUMMARY"):
        with open(os.environ["COURSE_SUMMARY_FILE"], "w") as f:
            f.write(os.environ["FAKE_PYTEST_SUMMARY"])
    sys.exit(int(os.environ.get("FAKE_PYTEST_RC", "0")))
'''

# What the script runs besides Python; the real python3 and python3.X are left off PATH.
TOOLS = ("bash", "sed", "cat", "rm", "mkdir", "dirname", "mktemp", "grep", "awk", "date", "id", "git")


def write_fake_python(path: Path, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(FAKE_PYTHON.replace("{interpreter}", sys.executable))
    path.chmod(0o755)
    Path(f"{path}.version").write_text(version)
    return path


class Course:
    """A course folder holding a copy of the script, with stand-in Pythons on PATH."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.root = tmp_path / "pytorch course"  # a space in the path, as learners have
        self.root.mkdir()
        shutil.copy2(SCRIPT, self.root / "course")
        for name in ("requirements.txt", "pyproject.toml"):
            shutil.copy2(ROOT / name, self.root / name)
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        tools = tmp_path / "tools"
        tools.mkdir()
        for tool in TOOLS:
            found = shutil.which(tool)
            if found:
                (tools / tool).symlink_to(found)
        self.log = tmp_path / "python-calls.jsonl"
        (tmp_path / "home").mkdir()
        self.env = {
            "PATH": f"{self.bin}:{tools}", "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path),
            "LANG": "C.UTF-8", "FAKE_PYTHON_LOG": str(self.log),
            "GIT_CEILING_DIRECTORIES": str(tmp_path.parent),
        }

    def python_on_path(self, name: str, version: str) -> Path:
        return write_fake_python(self.bin / name, version)

    def edit_script(self, old: str, new: str) -> None:
        script = self.root / "course"
        text = script.read_text()
        assert old in text, f"the script no longer has {old!r}"
        script.write_text(text.replace(old, new, 1))

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        self.log.unlink(missing_ok=True)
        return subprocess.run([str(self.root / "course"), *args], capture_output=True, text=True,
                              env={**self.env, **env}, cwd=self.tmp, timeout=60,
                              stdin=subprocess.DEVNULL)

    def calls(self) -> list[str]:
        """The commands the Pythons were given in the last run (version checks and stamps left out)."""
        if not self.log.exists():
            return []
        return [" ".join(json.loads(line)["args"]) for line in self.log.read_text().splitlines()]

    def installs(self) -> list[str]:
        return [c for c in self.calls() if "install" in c]

    @property
    def stamp(self) -> Path:
        return self.root / ".venv" / ".course-stamp"

    @property
    def venv_python(self) -> Path:
        return self.root / ".venv" / "bin" / "python"


def out(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"


@pytest.fixture
def course(tmp_path) -> Course:
    return Course(tmp_path)


@pytest.fixture(scope="module")
def set_up_venv(tmp_path_factory) -> Path:
    """The .venv of a course set up with python3 3.12.3 (made once: set-up takes a dozen processes)."""
    course = Course(tmp_path_factory.mktemp("set-up"))
    course.python_on_path("python3", "3.12.3")
    first = course.run("setup")
    assert first.returncode == 0 and "Set-up done." in first.stdout, out(first)
    return course.root / ".venv"


@pytest.fixture
def set_up(course, set_up_venv) -> Course:
    """A course set up with python3 3.12.3: a copy of set_up_venv, its stamp naming this folder
    (the stamp's hash does not depend on the folder), as ./course setup here would leave it."""
    course.python_on_path("python3", "3.12.3")
    shutil.copytree(set_up_venv, course.root / ".venv", symlinks=True)
    stamp_hash = course.stamp.read_text().splitlines()[0]
    course.stamp.write_text(f"{stamp_hash}\n{course.root.resolve()}\n")
    return course


# -- set-up, and when it runs again -----------------------------------------------------------
def test_first_setup_makes_the_venv_installs_everything_and_records_the_stamp(course):
    course.python_on_path("python3", "3.12.3")
    result = course.run("setup")
    assert result.returncode == 0, out(result)
    root = str(course.root.resolve())
    assert f"Creating .venv with Python 3.12.3 ({course.bin}/python3) …" in result.stdout
    assert "Installing requirements.txt into .venv (Python 3.12.3) …" in result.stdout
    assert result.stdout.endswith("Set-up done.\n")
    assert course.calls() == [
        f"-m venv {root}/.venv",
        f"-m course_utils.torch_build install torch=={TORCH_PIN}",
        f"-m pip install -r {root}/requirements.txt",
        f"-m pip install --quiet --no-deps -e {root}",
        "-m ipykernel install --sys-prefix --name pytorch-course --display-name Python (PyTorch course)",
        f"-I - {root} pytorch-course",
    ]
    assert course.stamp.read_text().splitlines()[1] == root
    assert json.loads((course.root / ".venv/etc/jupyter/jupyter_server_config.json").read_text()) == {
        "KernelManager": {"transport": "ipc"},
        # a closed tab's kernel goes after 30 idle minutes; an open tab's never does
        "MappingKernelManager": {"cull_idle_timeout": 1800, "cull_interval": 300,
                                 "cull_connected": False, "cull_busy": False}}
    again = course.run("setup")
    assert (again.returncode, again.stdout, again.stderr) == (0, "", ""), out(again)
    assert course.calls() == []


def test_a_second_setup_reuses_the_venv_and_does_nothing(set_up):
    again = set_up.run("setup")
    assert (again.returncode, again.stdout, again.stderr) == (0, "", ""), out(again)
    assert set_up.calls() == []


def _bump_setup_rev(course: Course, env: dict) -> None:
    rev = int(re.search(r"^SETUP_REV=(\d+)$", (course.root / "course").read_text(), re.M).group(1))
    course.edit_script(f"SETUP_REV={rev}\n", f"SETUP_REV={rev + 1}\n")


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


CHANGES = {
    "requirements.txt": lambda c, env: _append(c.root / "requirements.txt", "rich==14.0.0\n"),
    "pyproject.toml": lambda c, env: _append(c.root / "pyproject.toml", "\n# changed\n"),
    "python patch release": lambda c, env: Path(f"{c.venv_python}.version").write_text("3.12.4"),
    "COURSE_TORCH": lambda c, env: env.update(COURSE_TORCH="cpu"),
    "TORCH_INDEX_URL": lambda c, env: env.update(TORCH_INDEX_URL="https://download.pytorch.org/whl/cu128"),
    "SETUP_REV": _bump_setup_rev,
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_that_setup_depends_on_makes_it_run_again_in_the_same_venv(set_up, change):
    env: dict = {}
    CHANGES[change](set_up, env)
    again = set_up.run("setup", **env)
    assert again.returncode == 0, out(again)
    assert "Set-up done." in again.stdout, f"set-up did not run again after a change of {change}\n" + out(again)
    assert "Creating .venv" not in again.stdout, out(again)
    assert f"-m course_utils.torch_build install torch=={TORCH_PIN}" in set_up.calls()
    third = set_up.run("setup", **env)
    assert (third.returncode, third.stdout) == (0, ""), "the new stamp was not recorded\n" + out(third)


def test_a_venv_whose_python_is_out_of_range_is_made_anew(set_up):
    Path(f"{set_up.venv_python}.version").write_text("3.15.0")
    again = set_up.run("setup")
    assert again.returncode == 0, out(again)
    assert ".venv is missing its Python, or its Python is not 3.10 to 3.14; making it anew." in again.stdout
    assert "Creating .venv with Python 3.12.3" in again.stdout
    assert "Set-up done." in again.stdout


def test_a_venv_without_its_python_is_made_anew(set_up):
    set_up.venv_python.unlink()
    again = set_up.run("setup")
    assert again.returncode == 0, out(again)
    assert ".venv is missing its Python" in again.stdout
    assert "Set-up done." in again.stdout
    assert set_up.run("setup").stdout == ""


@pytest.mark.parametrize("env", [{"FAKE_FAIL": "pip install -r"}, {"FAKE_VERIFY_RC": "1"}],
                         ids=["an install fails", "the check after installing fails"])
def test_a_failed_setup_exits_1_and_is_tried_again_next_time(course, env):
    course.python_on_path("python3", "3.12.3")
    failed = course.run("setup", **env)
    assert failed.returncode == 1, out(failed)
    assert "course: set-up failed (see above). Fix what it says and run ./course setup again." in failed.stderr
    assert "Set-up done." not in failed.stdout
    retried = course.run("setup")
    assert retried.returncode == 0 and "Set-up done." in retried.stdout, out(retried)
    assert f"-m course_utils.torch_build install torch=={TORCH_PIN}" in course.calls()


def test_a_course_moved_elsewhere_whose_venv_cannot_be_moved_is_made_anew(set_up):
    lines = set_up.stamp.read_text().splitlines()
    set_up.stamp.write_text(f"{lines[0]}\n/somewhere/else\n")
    again = set_up.run("setup", FAKE_FAIL="course_utils.venv_move")
    assert again.returncode == 0, out(again)
    assert "The course was moved or copied here from /somewhere/else: updating .venv's paths …" in again.stdout
    assert "could not update them; making .venv anew." in again.stdout
    assert "Creating .venv with Python 3.12.3" in again.stdout and "Set-up done." in again.stdout
    assert set_up.stamp.read_text().splitlines()[1] == str(set_up.root.resolve())


# -- which Python .venv is made with ----------------------------------------------------------
@pytest.mark.parametrize("on_path, chosen", [
    ({"python3": "3.12.3", "python3.14": "3.14.0"}, "python3"),
    ({"python3": "3.9.18", "python3.11": "3.11.9", "python3.13": "3.13.1"}, "python3.13"),
    ({"python3": "3.15.0", "python3.14": "3.14.2", "python3.10": "3.10.4"}, "python3.14"),
    ({"python3.10": "3.10.14"}, "python3.10"),
    ({"python3": "broken", "python3.13": "broken", "python3.12": "3.12.1"}, "python3.12"),
], ids=["python3 fits", "python3 too old", "python3 too new", "only the oldest", "broken shims"])
def test_setup_takes_python3_if_it_fits_else_the_newest_python3_x_that_fits(course, on_path, chosen):
    for name, version in on_path.items():
        course.python_on_path(name, version)
    result = course.run("setup")
    assert result.returncode == 0, out(result)
    version = on_path[chosen]
    assert f"Creating .venv with Python {version} ({course.bin}/{chosen}) …" in result.stdout, out(result)
    assert Path(f"{course.venv_python}.version").read_text() == version


def test_without_a_fitting_python_setup_says_which_it_looked_for(course):
    course.python_on_path("python3", "3.9.18")
    course.python_on_path("python3.15", "3.15.0")
    course.python_on_path("python3.11", "broken")
    result = course.run("setup")
    assert result.returncode == 1, out(result)
    assert result.stderr == (
        "course: the course needs a Python from 3.10 to 3.14, and none of python3 python3.14 python3.13 "
        "python3.12 python3.11 python3.10 on PATH is one; install one, or set PYTHON=/path/to/python3.X.\n")
    assert not (course.root / ".venv").exists()


def test_python_override_is_used_instead_of_the_one_on_path(course):
    course.python_on_path("python3", "3.12.3")
    chosen = write_fake_python(course.tmp / "elsewhere" / "python3.11", "3.11.9")
    result = course.run("setup", PYTHON=str(chosen))
    assert result.returncode == 0, out(result)
    assert f"Creating .venv with Python 3.11.9 ({chosen}) …" in result.stdout
    assert course.calls()[0] == f"-m venv {course.root.resolve()}/.venv"
    assert json.loads(course.log.read_text().splitlines()[0])["python"] == str(chosen)


@pytest.mark.parametrize("version", ["3.9.18", "broken", None], ids=["too old", "broken", "missing"])
def test_python_override_that_does_not_fit_is_refused_by_name(course, version):
    course.python_on_path("python3", "3.12.3")
    python = course.tmp / "old" / "python3"
    if version is not None:
        write_fake_python(python, version)
    result = course.run("setup", PYTHON=str(python))
    assert result.returncode == 1, out(result)
    which = "is Python 3.9.18, which " if version == "3.9.18" else ""
    assert result.stderr == (
        f"course: PYTHON={python} {which}is not a Python 3.10 to 3.14 (the versions torch {TORCH_PIN} "
        "has wheels for); point PYTHON at one, or unset it.\n")
    assert not (course.root / ".venv").exists()


def test_python_override_of_another_minor_version_remakes_the_venv_and_of_the_same_keeps_it(set_up):
    other = write_fake_python(set_up.tmp / "elsewhere" / "python3.11", "3.11.9")
    changed = set_up.run("setup", PYTHON=str(other))
    assert changed.returncode == 0, out(changed)
    assert f".venv has Python 3.12.3 but PYTHON={other} is 3.11.9; making it anew." in changed.stdout
    assert f"Creating .venv with Python 3.11.9 ({other}) …" in changed.stdout
    assert "Set-up done." in changed.stdout
    same_minor = write_fake_python(set_up.tmp / "again" / "python3.11", "3.11.4")
    kept = set_up.run("setup", PYTHON=str(same_minor))
    assert (kept.returncode, kept.stdout, kept.stderr) == (0, "", ""), out(kept)


# -- the torch pin ----------------------------------------------------------------------------
@pytest.mark.parametrize("requirements, pin", [
    ("numpy==2.4.6\ntorch==2.9.1\ntorch==2.8.0\n", "torch==2.9.1"),
    ("# torch==1.0.0 was the old pin\ntorchvision==0.24.1\n"
     "  torch == 2.9.1 ; sys_platform == 'linux'  # the pin\n", "torch==2.9.1"),
    ("torch==2.7.0; python_version >= '3.10'\n", "torch==2.7.0"),
    ("torch==2.6.0  # the CPU wheels\ntorch==2.5.0\n", "torch==2.6.0"),
], ids=["first of two", "comments and markers", "marker", "comment"])
def test_setup_installs_the_first_torch_pin_of_requirements(course, requirements, pin):
    (course.root / "requirements.txt").write_text(requirements)
    course.python_on_path("python3", "3.12.3")
    result = course.run("setup")
    assert result.returncode == 0, out(result)
    assert [c for c in course.calls() if "torch_build" in c] == [f"-m course_utils.torch_build install {pin}"]


@pytest.mark.parametrize("requirements", ["numpy==2.4.6\n", "torch>=2.6\n# torch==2.9.1\n", "torchvision==0.24.1\n"],
                         ids=["no torch", "a range and a comment", "torchvision only"])
def test_requirements_without_a_torch_pin_stop_setup_with_a_message(course, requirements):
    (course.root / "requirements.txt").write_text(requirements)
    course.python_on_path("python3", "3.12.3")
    result = course.run("setup")
    assert result.returncode == 1, out(result)
    assert "course: requirements.txt pins no torch==VERSION." in result.stderr
    assert course.installs() == []


def test_the_refusal_of_a_python_names_the_pinned_torch_version(course):
    (course.root / "requirements.txt").write_text("# torch==1.0.0\ntorch == 2.9.1 ; python_version >= '3.10'\n")
    python = write_fake_python(course.tmp / "old" / "python3", "3.9.18")
    result = course.run("setup", PYTHON=str(python))
    assert result.returncode == 1, out(result)
    assert "(the versions torch 2.9.1 has wheels for)" in result.stderr


# -- the commands and their exit codes --------------------------------------------------------
@pytest.mark.parametrize("args", [[], ["help"], ["-h"], ["--help"]], ids=["none", "help", "-h", "--help"])
def test_help_prints_the_usage_and_exits_0(course, args):
    result = course.run(*args)
    assert (result.returncode, result.stderr) == (0, ""), out(result)
    assert result.stdout.startswith("Usage: ./course COMMAND [ARGS...]")
    assert "Python 3.10 to 3.14" in result.stdout
    assert not (course.root / ".venv").exists()


def test_an_unknown_command_prints_the_usage_and_exits_1(course):
    result = course.run("stup")
    assert result.returncode == 1, out(result)
    assert result.stdout == ""
    assert result.stderr.startswith("Usage: ./course COMMAND")
    assert result.stderr.endswith("course: unknown command 'stup'.\n")
    assert not (course.root / ".venv").exists()


# What conftest.py writes to COURSE_SUMMARY_FILE: a line per part, then the total; when no test
# ran, only the total.
SUMMARY = "tests/  3 passed, 0 failed, 0 skipped\ntotal: 3 passed, 0 failed, 0 skipped\n"
NOTHING_RAN = "total: 0 passed, 0 failed, 0 skipped\n"


@pytest.mark.parametrize("pytest_rc, summary, says", [
    (0, SUMMARY, "course test: all passed in "),
    (1, SUMMARY, "course test: FAILED (pytest exit 1) after "),
    (2, SUMMARY, "course test: FAILED (pytest exit 2) after "),
    (5, NOTHING_RAN, "course test: no tests ran\n"),
    (4, NOTHING_RAN, "course test: FAILED (pytest exit 4) after "),
    (0, "", "course test: all passed in "),
], ids=["passed", "failed", "interrupted", "no tests ran", "usage error", "no summary"])
def test_course_test_reports_and_passes_on_pytests_exit_code(set_up, pytest_rc, summary, says):
    result = set_up.run("test", "-x", "-k", "two words", FAKE_PYTEST_RC=str(pytest_rc),
                        FAKE_PYTEST_SUMMARY=summary)
    assert result.returncode == pytest_rc, out(result)
    assert says in result.stdout, out(result)
    if summary == SUMMARY:
        assert "course test: tests/  3 passed, 0 failed, 0 skipped\n" in result.stdout
    assert result.stdout.endswith(summary.splitlines()[-1] + "\n" if summary else "\n"), out(result)
    runs = f"{set_up.root.resolve()}/.course/test-runs"
    assert set_up.calls() == [
        f"tests/notebook_runs.py {runs}",
        f"-m pytest -n auto --dist loadscope tests notebooks solutions {runs} "
        "--nbval-lax --nbval-current-env --landing -x -k two words",
        "tests/e2e_groups.py stale",
    ]


def test_course_test_passes_leading_chapter_names_as_a_selection_and_the_rest_to_pytest(set_up):
    """./course test 03 models -k models: the chapters become --chapter, "models" after -k stays
    pytest's; pytest collects only the paths tests/chapter_selection.py lists for them
    (tests/test_chapter_selection.py tests what a chapter selects)."""
    result = set_up.run("test", "03", "models", "--changed", "-k", "models", FAKE_PYTEST_RC="0",
                        FAKE_PYTEST_SUMMARY=SUMMARY, FAKE_SELECTED_PATHS="notebooks/03_models.ipynb\ntests/catalogue/models")
    assert result.returncode == 0, out(result)
    runs = f"{set_up.root.resolve()}/.course/test-runs"
    assert set_up.calls()[-2:] == [
        f"tests/chapter_selection.py {runs} --chapter 03 --chapter models --changed",
        "-m pytest -n auto --dist loadscope notebooks/03_models.ipynb tests/catalogue/models "
        "--nbval-lax --nbval-current-env --chapter 03 --chapter models --changed -k models"]


def test_course_test_collects_everything_when_the_selection_lists_nothing(set_up):
    """--changed with a change to the framework: the selection prints nothing, all is collected."""
    result = set_up.run("test", "--changed", FAKE_PYTEST_RC="0", FAKE_PYTEST_SUMMARY=SUMMARY)
    assert result.returncode == 0, out(result)
    runs = f"{set_up.root.resolve()}/.course/test-runs"
    assert set_up.calls()[-2] == (f"-m pytest -n auto --dist loadscope tests notebooks solutions {runs} "
                                  "--nbval-lax --nbval-current-env --landing --changed")


@pytest.mark.parametrize("stale, says", [
    ("grader hosted", "course test: not run here, changed since they last passed: the end-to-end groups "
                          "grader hosted; ./course test-e2e --if-changed runs them\n"),
    ("", "course test: not run here: the end-to-end groups, unchanged since they last passed (./course test-e2e)\n"),
    ("", "course test: not run here: the end-to-end groups (./course test-e2e); could not tell which changed\n"),
], ids=["stale", "current", "cannot tell"])
def test_the_whole_command_says_which_end_to_end_groups_it_left_out(set_up, stale, says):
    result = set_up.run("test", FAKE_PYTEST_RC="0", FAKE_PYTEST_SUMMARY=SUMMARY, FAKE_STALE=stale,
                        FAKE_E2E_RC="1" if "could not tell" in says else "0")
    assert result.returncode == 0, out(result)
    assert says in result.stdout, out(result)
    assert result.stdout.endswith("total: 3 passed, 0 failed, 0 skipped\n"), out(result)


def test_a_chapters_run_says_nothing_of_the_end_to_end_groups(set_up):
    result = set_up.run("test", "03", FAKE_PYTEST_RC="0", FAKE_PYTEST_SUMMARY=SUMMARY,
                        FAKE_SELECTED_PATHS="notebooks/03_models.ipynb", FAKE_STALE="grader")
    assert "end-to-end" not in result.stdout and "tests/e2e_groups.py stale" not in set_up.calls(), out(result)


@pytest.mark.parametrize("rc, says", [(0, "course test-e2e: all passed in "),
                                      (1, "course test-e2e: FAILED (exit 1) after ")])
def test_course_test_e2e_passes_its_arguments_to_the_groups_runner(set_up, rc, says):
    result = set_up.run("test-e2e", "grader", "--if-changed", "--", "-x", FAKE_E2E_RC=str(rc))
    assert result.returncode == rc, out(result)
    assert says in result.stdout, out(result)
    assert set_up.calls() == ["tests/e2e_groups.py run grader --if-changed -- -x"]


def test_course_test_stops_when_a_chapter_name_is_unknown(set_up):
    result = set_up.run("test", "03", FAKE_SELECTION_RC="2")
    assert result.returncode == 2, out(result)
    assert not any(c.startswith("-m pytest") for c in set_up.calls())


def test_course_test_sets_up_first_when_needed(course):
    course.python_on_path("python3", "3.12.3")
    result = course.run("test")
    assert result.returncode == 0, out(result)
    assert result.stdout.index("Set-up done.") < result.stdout.index("== course test:")


def test_course_test_stops_when_the_notebook_runs_cannot_be_prepared(set_up):
    result = set_up.run("test", FAKE_FAIL="tests/notebook_runs.py")
    assert result.returncode == 1, out(result)
    assert "course: could not prepare the notebook runs in " in result.stderr
    assert not any(c.startswith("-m pytest") for c in set_up.calls())


def test_course_lab_opens_jupyterlab_on_my_work_and_exits_with_its_code(set_up):
    result = set_up.run("lab", "--no-browser", "--port", "8899")
    assert result.returncode == 0, out(result)
    root = str(set_up.root.resolve())
    root_flag = ["--allow-root"] if os.getuid() == 0 else []
    assert result.stdout == ("Running as root (a container?): passing --allow-root to Jupyter.\n"
                             if root_flag else "")
    assert set_up.calls() == [
        f"-m course_utils.workspace sync --root {root}",
        " ".join([f"-m jupyterlab --ServerApp.root_dir={root} --LabApp.default_url=/lab/tree/my-work",
                  *root_flag, "--no-browser --port 8899"]),
    ]
    failed = set_up.run("lab", FAKE_FAIL="-m jupyterlab")
    assert failed.returncode == 1, out(failed)


def test_course_lab_opens_the_workspace_as_it_is_when_it_cannot_be_synced(set_up):
    result = set_up.run("lab", FAKE_FAIL="course_utils.workspace")
    assert result.returncode == 0, out(result)
    assert "course: could not bring my-work/ up to date (see above); opening it as it is." in result.stdout
    assert any(c.startswith("-m jupyterlab") for c in set_up.calls())


def test_course_book_builds_the_site_with_the_venvs_python_and_passes_its_options(set_up):
    result = set_up.run("book", "--out", "my site")
    assert result.returncode == 0, out(result)
    root = str(set_up.root.resolve())
    assert set_up.calls() == [f"-m course_utils.book --root {root} --out my site"]
    assert set_up.run("book", FAKE_FAIL="course_utils.book").returncode == 1


def test_course_test_browser_builds_a_missing_site_then_runs_the_browser_tests_apart(set_up):
    root = set_up.root.resolve()
    result = set_up.run("test-browser", "-k", "site", FAKE_PYTEST_RC="3")
    assert result.returncode == 3, out(result)
    assert "No website in _site/ yet: building it first" in result.stdout
    assert set_up.calls() == [
        f"-m course_utils.book --root {root}",
        f"-m course_utils.tool_env --root {root} browser {root}/requirements-browser.txt",
        f"-m pytest -p no:cacheprovider -n 2 --dist loadfile -c {root}/tests/browser/pytest.ini --rootdir {root}/tests/browser "
        f"{root}/tests/browser --site {root}/_site --course-python {root}/.venv/bin/python -k site",
    ]
    (root / "_site").mkdir()
    (root / "_site" / "index.html").write_text("<html></html>")
    again = set_up.run("test-browser")
    assert again.returncode == 0, out(again)
    assert not any("course_utils.book" in call for call in set_up.calls())
    no_tools = set_up.run("test-browser", FAKE_FAIL="course_utils.tool_env")
    assert no_tools.returncode == 1 and "could not make the browser tests' environment" in no_tools.stderr


def test_course_update_outside_a_git_clone_explains_and_exits_1(course):
    result = course.run("update")
    assert result.returncode == 1, out(result)
    assert result.stdout == (
        "This course folder is not a git clone, so it cannot pull a new version itself.\n"
        "Download the new version, copy your my-work/ folder into it, and run ./course lab there.\n")
    assert not (course.root / ".venv").exists()


def test_setup_exits_0_and_a_failing_setup_stops_lab_and_test_with_1(course):
    course.python_on_path("python3", "3.12.3")
    for command in ("lab", "test"):
        result = course.run(command, FAKE_FAIL="ipykernel install")
        assert result.returncode == 1, out(result)
        assert "course: set-up failed" in result.stderr
        assert not any(c.startswith(("-m jupyterlab", "-m pytest")) for c in course.calls()), command
