"""Session-wide pytest hooks for tests/, notebooks/ and solutions/.

- The report header names the device the tests run on.
- REQUIRE_GPU=1 (the GPU CI job) stops the session at once when torch sees no accelerator,
  instead of quietly testing on the CPU.
- The test modules that take longest are handed out first (``LONGEST_FIRST``), so that no
  worker is left with one of them at the end while the others wait.
- COURSE_SUMMARY_FILE=PATH (set by ./course test) receives the counts of passed, failed and
  skipped tests.
- Each notebook's kernel starts with the settings of the run it belongs to (`notebook_run_env`):
  notebooks/ must report every exercise "not attempted", solutions/ must pass every one, and a
  folder that `./course test` prepares under .course/test-runs/ says in its run-env.json how
  its copies run (strict or not, on which simulated torch build). One pytest session can then
  run them all, spread over the cores.

torch is imported only inside the hooks, on the controlling process, so that collecting tests
on pytest-xdist workers stays cheap.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
# Settings a notebook's kernel inherits; cleared before each notebook's own are applied.
RUN_SETTINGS = ("COURSE_STRICT", "COURSE_EXPECT", "COURSE_SIMULATED_MACHINE", "PYTHONPATH")
RUN_ENV_FILE = "run-env.json"
# A fixed copy of two chapters that the grader's tests grade (tests/grading_course/README.md):
# test data, not notebooks to run. The browser tests run apart, in an environment of their own
# (./course test-browser), since Playwright is not in the learner's .venv.
collect_ignore = ["tests/grading_course", "tests/browser"]


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _gpu_required() -> bool:
    return os.environ.get("REQUIRE_GPU", "").strip().lower() in {"1", "true", "yes"}


def _device():
    """(torch module, torch.device); (None, None) when torch is not installed."""
    try:
        import torch
    except ImportError:
        return None, None
    from course_utils.env import pick_device

    return torch, pick_device()


def _describe(torch, device) -> str:
    if torch is None:
        return "torch is not installed"
    name = str(device)
    if device.type == "cuda":
        name += f" ({torch.cuda.get_device_name(device)})"
    return f"{name}, torch {torch.__version__}, {_build(torch)}"


def _build(torch) -> str:
    if torch.version.hip:
        return f"built for ROCm {torch.version.hip}"
    if torch.version.cuda:
        return f"built for CUDA {torch.version.cuda}"
    return "a build without CUDA or ROCm"


def pytest_report_header(config: pytest.Config) -> str:
    torch, device = _device()
    return f"course device: {_describe(torch, device)}"


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _gpu_required() or _is_xdist_worker(session.config):
        return
    torch, device = _device()
    if torch is None:
        pytest.exit("REQUIRE_GPU=1 but torch is not installed.", returncode=3)
    if device.type == "cpu":
        if torch.version.hip:
            advice = "check that ROCm sees the GPU (rocminfo) and HIP_VISIBLE_DEVICES."
        elif torch.version.cuda:
            advice = "check the NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES."
        else:
            advice = ("this torch is a CPU-only build; install a GPU build "
                      "(COURSE_TORCH=cuda ./course setup, see ./course -h).")
        pytest.exit(
            f"REQUIRE_GPU=1 but torch sees no accelerator ({_describe(torch, device)}): {advice}",
            returncode=3,
        )


# Modules whose tests together take 25 s or more (./course test --durations=60 on two cores),
# longest first. pytest-xdist's --dist loadscope hands a worker one module at a time, in
# collection order (pyproject.toml turns off its own order, by number of tests, which put these
# few-test, long-fixture modules last: two workers then spent minutes on the last two). A module
# not named here keeps its place after them, those with more tests first.
LONGEST_FIRST = (
    "tests/test_hosted.py",  # one scope per chapter class: handed out early, run side by side
    "tests/test_grading_hostile.py",
    "tests/test_grading_options.py",
    "tests/test_grading_class.py",
    "tests/test_grading_stops.py",
    "tests/test_exam_release.py",
    "tests/test_grading_hardening.py",
    "tests/test_grading_exam.py",
    "tests/test_time_checks.py",
    "tests/test_digits_project.py",
    "tests/test_gradescope.py",
    "tests/test_widgets.py",
    "tests/test_grading_guard.py",
    "tests/test_start_method.py",
    "tests/test_course_setup.py",
    "tests/test_course_update.py",
    "tests/test_nbgitpuller.py",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("course", "the course's test selection (tests/chapter_selection.py)")
    group.addoption("--chapter", action="append", default=[], metavar="CHAPTER",
                    help="only what concerns this chapter (03, 03_models or models); repeatable")
    group.addoption("--changed", action="store_true",
                    help="only what concerns the files changed since the last commit")
    group.addoption("--landing", action="store_true",
                    help="leave out the end-to-end groups (tests/e2e_groups.py): ./course test")
    group.addoption("--e2e-group", action="append", default=[], metavar="GROUP",
                    help="only the tests of this end-to-end group: ./course test-e2e; repeatable")


@functools.cache
def _tests_helper(name: str):
    """A helper module of tests/ (no package there; the root conftest loads before tests/ is on the path).

    Registered in sys.modules before it runs, as dataclasses need, and loaded once."""
    import importlib.util
    import sys

    if name in sys.modules:  # a test file imported it first
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _e2e_groups():
    return _tests_helper("e2e_groups")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With --landing, files whose every test is end to end are not even imported."""
    if not config.getoption("--landing"):
        return None
    try:
        relative = collection_path.relative_to(ROOT).as_posix()
    except ValueError:
        return None
    return True if relative in _e2e_groups().whole_files() else None


def _select_tier(config: pytest.Config, items: list) -> None:
    """--landing drops the end-to-end groups' tests; --e2e-group keeps only the groups named."""
    if config is None:  # called to sort a list of items, outside a session
        return
    landing, wanted = config.getoption("--landing"), set(config.getoption("--e2e-group"))
    if not landing and not wanted:
        return
    group_of = _e2e_groups().group_of
    kept, dropped = [], []
    for item in items:
        group = group_of(item.nodeid)
        keep = group is None if landing else group in wanted
        (kept if keep else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _select(config: pytest.Config, items: list) -> None:
    """Keep what ``--chapter`` and ``--changed`` ask for (tests/chapter_selection.py)."""
    if config is None:  # called to sort a list of items, outside a session
        return
    named, changed = config.getoption("--chapter"), config.getoption("--changed")
    if not named and not changed:
        return
    selection = _tests_helper("chapter_selection")
    try:
        chapters = {selection.chapter_named(name) for name in named}
    except ValueError as error:
        raise pytest.UsageError(f"--chapter: {error}") from None
    files: set[str] = set()
    if changed:
        more, files, everything = selection.what_changed_concerns(selection.changed_files(ROOT))
        if everything:
            return
        chapters |= more
    kept, dropped = [], []
    for item in items:
        nodeid = item.nodeid
        wanted = nodeid.split("::", 1)[0] in files or any(selection.concerns(nodeid, stem) for stem in chapters)
        (kept if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    _select(config, items)
    _select_tier(config, items)
    counts: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        counts[module] = counts.get(module, 0) + 1

    def rank(item) -> tuple:
        module = item.nodeid.split("::", 1)[0]
        if module in LONGEST_FIRST:
            return (0, LONGEST_FIRST.index(module))
        return (1, -counts[module])

    items.sort(key=rank)  # stable: a module's own tests keep their order


def _part_of(nodeid: str) -> str:
    """The part of the test command a test belongs to, as the summary names it."""
    top = nodeid.split("/", 1)[0].split("::", 1)[0]
    if top == "notebooks":
        return "learner notebooks (every exercise not attempted)"
    if top == "solutions":
        return "solution notebooks (every exercise passed)"
    if top == ".course":
        parts = nodeid.split("/")
        settings = ROOT.joinpath(*parts[:3], RUN_ENV_FILE)
        try:
            return json.loads(settings.read_text(encoding="utf-8")).get("LABEL", parts[2])
        except (OSError, ValueError):
            return parts[2] if len(parts) > 2 else top
    if nodeid.startswith("tests/test_hosted.py::TestChapter"):
        return "each chapter alone on a simulated Colab, Kaggle or hub (a CUDA build, no GPU), solutions pasted in"
    return "unit tests"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("COURSE_SUMMARY_FILE")
    if not path or _is_xdist_worker(session.config):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = getattr(reporter, "stats", {})
    counts: dict[str, dict[str, int]] = {}
    for key, outcome in (("passed", "passed"), ("failed", "failed"), ("error", "failed"),
                         ("skipped", "skipped")):
        for report in stats.get(key, []):
            if not getattr(report, "count_towards_summary", True):
                continue
            part = counts.setdefault(_part_of(getattr(report, "nodeid", "")),
                                     {"passed": 0, "failed": 0, "skipped": 0})
            part[outcome] += 1
    width = max((len(name) for name in counts), default=0)
    with open(path, "w", encoding="utf-8") as f:
        for name, c in counts.items():
            f.write(f"{name:<{width}}  {c['passed']} passed, {c['failed']} failed, "
                    f"{c['skipped']} skipped\n")
        total = {k: sum(c[k] for c in counts.values()) for k in ("passed", "failed", "skipped")}
        f.write(f"total: {total['passed']} passed, {total['failed']} failed, "
                f"{total['skipped']} skipped\n")


def notebook_run_env(notebook: Path) -> dict[str, str]:
    """The settings a notebook runs under, from where it lies (see the module docstring)."""
    folder = notebook.resolve().parent
    # The course's own chapters import this checkout's course_utils, also in a copy of the
    # course whose Python has another checkout installed in editable mode.
    if folder == ROOT / "notebooks":
        return {"COURSE_EXPECT": "not_attempted", "PYTHONPATH": str(ROOT)}
    if folder == ROOT / "solutions":
        return {"COURSE_STRICT": "1", "PYTHONPATH": str(ROOT)}
    settings_file = folder / RUN_ENV_FILE
    if settings_file.is_file():
        settings = json.loads(settings_file.read_text(encoding="utf-8"))
        if "PYTHONPATH" in settings:  # relative to the course, so a moved course still works
            settings["PYTHONPATH"] = str(ROOT / settings["PYTHONPATH"])
        settings.pop("LABEL", None)
        return settings
    return {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """Start a notebook's kernel with its run's settings, then give the process its own back.

    nbval starts the kernel while setting up a notebook's first cell, with this process's
    environment; the unit tests that run in the same worker afterwards must not inherit it.
    """
    path = Path(str(item.fspath))
    if path.suffix != ".ipynb":
        yield
        return
    saved = {name: os.environ.get(name) for name in RUN_SETTINGS}
    for name in RUN_SETTINGS:
        os.environ.pop(name, None)
    os.environ.update(notebook_run_env(path))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
