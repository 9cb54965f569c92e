"""Build submissions for the batch grader's tests and benchmark: right, wrong, hostile, broken.

Every submission starts from one of the course's own notebooks (``solutions/`` for right
answers, ``notebooks/`` for the blank learner version); helpers replace the source of chosen
answer cells, edit check cells, paste fake outputs, or damage the file itself. Nothing here
runs a notebook: this module only writes files (into folders the caller chooses, always
temporary ones) and inspects the machine afterwards (files, processes).

Every hostile snippet is bounded: a few dozen processes, a few GB of memory at most even if
the grader's memory cap failed, a few tens of MB of output, and writes only to paths the
test removes again.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import signal
import textwrap
import uuid
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"  # the real ones: what the sandbox must keep out of sight
# The course the grader's tests grade (see its README): a fixed copy of two chapters, so that a
# chapter gaining an exercise does not change what these tests expect of the grader.
GRADING_COURSE = ROOT / "tests" / "grading_course"
NOTEBOOKS = GRADING_COURSE / "notebooks"

TENSORS = "01_tensors"
TENSOR_EXERCISES = (
    "match_reference",
    "independent_copy",
    "flatten_transposed",
    "remove_batch_dim",
    "outer_sum",
    "residuals",
    "checked_mse",
)

# Typical wrong answers (see tests/catalogue/tensors/): each fails its check, none raises
# on every input, none loops.
WRONG = {
    "match_reference": "def match_reference(x, reference):\n    return x.to(reference.device)\n",
    "independent_copy": "def independent_copy(array):\n    return torch.from_numpy(array)\n",
    "flatten_transposed": "def flatten_transposed(x):\n    return x.reshape(-1)\n",
    "remove_batch_dim": "def remove_batch_dim(x):\n    return x.squeeze()\n",
    "outer_sum": "def outer_sum(a, b):\n    return a[None, :] + b[:, None]\n",
    "residuals": "def residuals(pred, target):\n    return pred - target\n",
    "checked_mse": "def checked_mse(pred, target):\n    return ((pred - target) ** 2).mean()\n",
}


# --------------------------------------------------------------------------------------------
# Notebooks
# --------------------------------------------------------------------------------------------
def course_notebook(chapter: str = TENSORS, kind: str = "solutions") -> nbformat.NotebookNode:
    """A fresh copy of the graded course's ``solutions/`` or ``notebooks/`` (blank) notebook."""
    folder = {"solutions": GRADING_COURSE / "solutions", "notebooks": NOTEBOOKS}[kind]
    return nbformat.read(folder / f"{chapter}.ipynb", as_version=4)


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def answer_ids(nb) -> list[str]:
    """The grade_ids of the answer cells, in notebook order."""
    return [
        _grade_id(cell) for cell in nb.cells
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution")
    ]


def cell_by_grade_id(nb, grade_id: str):
    for cell in nb.cells:
        if _grade_id(cell) == grade_id:
            return cell
    raise KeyError(grade_id)


def answer_source(grade_id: str, chapter: str = TENSORS) -> str:
    """The reference answer: the solution cell's source in ``solutions/``."""
    return cell_by_grade_id(course_notebook(chapter), grade_id).source


def submission(
    chapter: str = TENSORS,
    *,
    base: str = "solutions",
    answers: dict[str, str] | None = None,
    prepend: dict[str, str] | None = None,
    append: dict[str, str] | None = None,
) -> nbformat.NotebookNode:
    """A learner's notebook: ``base`` with some answer cells' sources replaced or extended.

    ``answers`` replaces a cell's source; ``prepend`` / ``append`` add code before / after
    whatever the cell then holds.
    """
    nb = course_notebook(chapter, base)
    for grade_id, source in (answers or {}).items():
        cell_by_grade_id(nb, grade_id).source = source
    for grade_id, code in (prepend or {}).items():
        cell = cell_by_grade_id(nb, grade_id)
        cell.source = code.rstrip("\n") + "\n" + cell.source
    for grade_id, code in (append or {}).items():
        cell = cell_by_grade_id(nb, grade_id)
        cell.source = cell.source.rstrip("\n") + "\n" + code
    return nb


def all_wrong(chapter: str = TENSORS) -> dict[str, str]:
    assert chapter == TENSORS, "typical wrong answers exist only for 01_tensors"
    return dict(WRONG)


def check_cells(nb) -> list:
    return [cell for cell in nb.cells if cell.get("metadata", {}).get("nbgrader", {}).get("grade")]


def edit_check_cells(nb, *, new_source: str | None = None, delete: tuple[str, ...] = ()) -> None:
    """Rewrite every check cell's source (``{name}`` is the exercise) and delete some of them."""
    for cell in check_cells(nb):
        name = _grade_id(cell).removeprefix("check_")
        if new_source is not None:
            cell.source = new_source.format(name=name)
    nb.cells = [cell for cell in nb.cells if _grade_id(cell) not in {f"check_{n}" for n in delete}]


def paste_fake_outputs(nb, *, points: int = 100) -> None:
    """Give every check cell a pasted "passed" verdict, a count and more points than it has."""
    for count, cell in enumerate(check_cells(nb), start=1):
        name = _grade_id(cell).removeprefix("check_")
        text = f"✅ {name}: passed\n   Correct."
        cell.execution_count = count
        cell.outputs = [
            nbformat.v4.new_output(
                "display_data",
                data={
                    "text/plain": text,
                    "text/html": f"<div><b>✅ {name}: passed</b><br>Correct.</div>",
                },
            ),
            nbformat.v4.new_output("stream", name="stdout", text="All checks passed\n"),
            nbformat.v4.new_output(
                "execute_result", data={"text/plain": "True"}, execution_count=count
            ),
        ]
        cell.metadata["nbgrader"]["points"] = points
        cell.metadata["nbgrader"]["grade"] = True


# --------------------------------------------------------------------------------------------
# Writing a batch
# --------------------------------------------------------------------------------------------
def write_submission(
    submissions: Path, learner: str, nb, *, chapter: str = TENSORS, layout: str = "folder"
) -> Path:
    """``SUBMISSIONS/learner/chapter.ipynb`` (layout "folder") or ``SUBMISSIONS/learner.ipynb``."""
    path = _path_for(submissions, learner, chapter, layout)
    nbformat.write(nb, path, version=4)
    return path


def write_bytes(
    submissions: Path, learner: str, data: bytes, *, chapter: str = TENSORS, layout: str = "folder"
) -> Path:
    path = _path_for(submissions, learner, chapter, layout)
    path.write_bytes(data)
    return path


def _path_for(submissions: Path, learner: str, chapter: str, layout: str) -> Path:
    if layout == "folder":
        folder = submissions / learner
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{chapter}.ipynb"
    if layout == "file":
        submissions.mkdir(parents=True, exist_ok=True)
        return submissions / f"{learner}.ipynb"
    raise ValueError(layout)


def truncated(nb, keep: float = 0.6) -> bytes:
    """The notebook's JSON cut off part-way: what a crashed upload leaves."""
    data = nbformat.writes(nb, version=4).encode("utf-8")
    return data[: int(len(data) * keep)]


def as_nbformat3(nb) -> bytes:
    """The same notebook written in nbformat 3 (worksheets, ``input``, no cell ids)."""
    return nbformat.writes(nbformat.convert(copy.deepcopy(nb), 3), version=3).encode("utf-8")


def tree_digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (and the list of entries), by relative path."""
    digest = {}
    for path in sorted(folder.rglob("*")):
        relative = str(path.relative_to(folder))
        if path.is_symlink():
            digest[relative] = "link:" + os.readlink(path)
        elif path.is_file():
            digest[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            digest[relative] = "dir"
    return digest


def new_marker(prefix: str = "hostile") -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


# --------------------------------------------------------------------------------------------
# The machine afterwards
# --------------------------------------------------------------------------------------------
def processes_with_marker(marker: str) -> dict[int, str]:
    """pid → command line of every process whose command line or environment holds ``marker``.

    Reads /proc directly (as root every process's environ is readable), so it also finds
    processes in another pid namespace and ones that renamed themselves.
    """
    found = {}
    needle = marker.encode()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                environ = b""
        except OSError:
            continue
        if needle in cmdline or needle in environ:
            found[int(entry)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def kill_pids(pids) -> None:
    """SIGKILL exactly these pids (processes a hostile submission left behind)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# --------------------------------------------------------------------------------------------
# Hostile code for answer cells (01_tensors)
# --------------------------------------------------------------------------------------------
def loop_in_function(name: str = "flatten_transposed", params: str = "x") -> str:
    return f"def {name}({params}):\n    while True:\n        pass\n"


def stubborn_loop_in_function(name: str = "residuals", params: str = "pred, target") -> str:
    """A loop that swallows every exception, the check's own time limit and ^C included. It
    sleeps rather than computes (as does ``TOP_LEVEL_LOOP``), so that it costs the other tests no
    CPU; a loop that computes is stopped the same way."""
    return textwrap.dedent(
        f"""\
        def {name}({params}):
            while True:
                try:
                    while True:
                        __import__("time").sleep(0.5)
                except BaseException:
                    pass
        """
    )


TOP_LEVEL_LOOP = "while True:\n    __import__(\"time\").sleep(0.5)\n"

# Allocates 100 MB blocks (touched, so a cgroup limit sees them too) until MemoryError; held in
# a local, so memory is freed when the error propagates. Stops at 6 GB even if nothing caps it.
MEMORY_HOG = textwrap.dedent(
    """\
    def _eat_memory():
        blocks = []
        for _ in range(60):
            blocks.append(b"\\x01" * (100 * 1024 * 1024))
        return len(blocks)
    _eat_memory()
    """
)

SYS_EXIT = "import sys\nsys.exit()\n"
OS_EXIT = "import os\nos._exit(1)\n"


def spawn_processes(marker: str, count: int = 40) -> str:
    """``count`` sleepers that carry ``marker`` in their environment; every other one in a
    new session (so killing the kernel's process group alone misses it), plus one that
    double-forks through a shell (its parent exits at once, so it is re-parented)."""
    return textwrap.dedent(
        f"""\
        import os as _os, subprocess as _subprocess
        _env = dict(_os.environ, HOSTILE_MARKER={marker!r})
        for _i in range({count - 1}):
            try:
                _subprocess.Popen(["sleep", "300"], env=_env, start_new_session=_i % 2 == 0,
                                  stdin=_subprocess.DEVNULL, stdout=_subprocess.DEVNULL,
                                  stderr=_subprocess.DEVNULL)
            except OSError:
                break
        try:
            _subprocess.run(["sh", "-c", "(sleep 300 &) ; exit 0"], env=_env, timeout=10,
                            stdin=_subprocess.DEVNULL, stdout=_subprocess.DEVNULL,
                            stderr=_subprocess.DEVNULL)
        except (OSError, _subprocess.SubprocessError):
            pass
        import time as _time
        _time.sleep(1.5)  # long enough for the test's half-second sampler to count them all
        """
    )


PATCH_TORCH = textwrap.dedent(
    """\
    import numpy as _np
    import torch as _torch
    import torch.testing as _testing
    _torch.allclose = lambda *args, **kwargs: True
    _torch.equal = lambda *args, **kwargs: True
    _torch.Tensor.allclose = lambda *args, **kwargs: True
    _torch.Tensor.equal = lambda *args, **kwargs: True
    _testing.assert_close = lambda *args, **kwargs: None
    _np.allclose = lambda *args, **kwargs: True
    _np.array_equal = lambda *args, **kwargs: True
    _np.testing.assert_allclose = lambda *args, **kwargs: None
    """
)

PATCH_COURSE_UTILS = textwrap.dedent(
    """\
    import sys as _sys
    import course_utils.exercises.core as _core
    import course_utils.exercises.facts as _facts
    import course_utils.exercises.tensors as _tensors
    # every module of the chapter's package: each exercise's own, and common.py
    _chapter = [_m for _n, _m in list(_sys.modules.items()) if _n.startswith("course_utils.exercises.tensors")]
    _always = lambda self, *args, **kwargs: _core.Verdict(
        self.id, self.title, _core.Outcome.PASSED, "Correct.")
    _core.Exercise.judge = lambda self, result: _always(self)
    _core.Exercise.verdict = _always
    _core.Exercise.check = _always
    for _name in dir(_tensors):
        if isinstance(getattr(_tensors, _name), _core.Exercise):
            getattr(_tensors, _name).check = lambda *args, **kwargs: True
            getattr(_tensors, _name)._judge = lambda data: None
    for _module in (_facts, *_chapter):
        _module.tensor_problem = lambda *args, **kwargs: None
        _module.same_values = lambda *args, **kwargs: True
    ex.outer_sum.check = lambda f: True
    """
)

# The probe runs in the kernel: replace what it runs with the course's reference answers.
FORGE_PROBE = textwrap.dedent(
    """\
    import course_utils.exercises.core as _core
    _real_probe = _core.Exercise.probe
    _core.Exercise.probe = lambda self, answer: _real_probe(self, self.reference)
    """
)

# Make every fact the probe records the same, the inputs it gave included, so that whatever
# the answer, its results look like the right answer for those inputs (the grader computes the
# right answer from the recorded inputs, and compares those with its own run of the probe).
REWRITE_EXPECTED = textwrap.dedent(
    """\
    import sys as _sys
    import course_utils.exercises.facts as _facts
    import course_utils.exercises.tensors
    _same_facts = lambda *args, **kwargs: {"kind": "tensor", "shape": [1], "dtype": "torch.float32",
                                           "device": "cpu", "values": [0.0]}
    _facts.value_facts = _same_facts
    for _name, _module in list(_sys.modules.items()):  # each exercise's module, and common.py
        if _name.startswith("course_utils.exercises.tensors"):
            _module.value_facts = _same_facts
    """
)

# Watching the check from inside the kernel (issue 43), to copy what a right answer gives:
# a tracer through the standard library's debugger that makes each record's result its
# expectation; the stack's variables (traceback's capture_locals); a signal handler given the
# interrupted frame; a torch function mode left on. Each answer then returns what it saw of a
# right answer for its inputs, or its wrong value when it saw none.
WATCH_WITH_A_DEBUGGER = textwrap.dedent(
    """\
    import bdb as _bdb
    class _Rewriter(_bdb.Bdb):
        def user_line(self, frame):
            for _value in list(frame.f_locals.values()):
                if isinstance(_value, dict) and "got" in _value and "expected" in _value:
                    _value["got"] = _value["expected"]
    _Rewriter().set_trace()
    """
)

WATCH_THE_STACK = textwrap.dedent(
    """\
    import traceback as _traceback
    def _look():
        return _traceback.StackSummary.extract(_traceback.walk_stack(None), capture_locals=True)
    """
)

WATCH_WITH_A_SIGNAL = textwrap.dedent(
    """\
    import os as _os, signal as _signal
    _frames_seen = []
    def _peek(signum, frame):
        while frame is not None:
            _frames_seen.append(dict(frame.f_locals))
            frame = frame.f_back
    _signal.signal(_signal.SIGUSR1, _peek)
    def _look():
        _os.kill(_os.getpid(), _signal.SIGUSR1)
    """
)

WATCH_WITH_A_MODE = textwrap.dedent(
    """\
    import torch as _torch
    from torch.overrides import TorchFunctionMode as _Mode
    _tensors_seen = []
    class _Watch(_Mode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, _torch.Tensor) and len(_tensors_seen) < 100000:
                _tensors_seen.append(out)
            return out
    _Watch().__enter__()
    def _look():
        pass
    """
)


def watching_answers(wrong: dict[str, str]) -> dict[str, str]:
    """Each wrong answer, made to look around first (``_look``, from one of the WATCH_ cells)
    and to return a tensor it saw with the shape the right answer has, when there is one."""
    answers = {}
    for name, source in wrong.items():
        header, body = source.split("\n", 1)
        answers[name] = (
            f"{header}\n"
            "    _look()\n"
            "    for _seen in reversed(globals().get('_tensors_seen', [])):\n"
            "        if isinstance(_seen, torch.Tensor) and _seen.dim() == 2:\n"
            "            return _seen.clone()\n"
            f"{body}"
        )
    return answers


# A probe cell that reads the learner's answers through globals() gets the references instead.
FORGE_GLOBALS = textwrap.dedent(
    """\
    import builtins as _builtins
    def globals():
        namespace = dict(_builtins.globals())
        for name in list(namespace):
            exercise = getattr(ex, name, None)
            if callable(namespace[name]) and hasattr(exercise, "reference"):
                namespace[name] = exercise.reference
        return namespace
    """
)

# Names a grader's probe cell might use, rebound to junk.
GRADER_NAMES = textwrap.dedent(
    """\
    import types as _types
    ex = _types.SimpleNamespace()
    __import__ = None
    importlib = None
    course_utils = None
    record = None
    plain = None
    Path = None
    probe = None
    result = None
    json = None
    np = None
    os = None
    sys = None
    """
)


def rigged_eq_answers() -> dict[str, str]:
    """outer_sum returns a non-tensor that equals everything; residuals a tensor subclass whose
    comparisons all say True around wrong values."""
    return {
        "outer_sum": textwrap.dedent(
            """\
            class _EqualsEverything:
                shape = property(lambda self: self)
                dtype = property(lambda self: self)
                device = property(lambda self: self)
                def __eq__(self, other): return True
                def __ne__(self, other): return False
                __hash__ = object.__hash__
                def __bool__(self): return True
                def __len__(self): return 3
                def __iter__(self): return iter(())
                def __getattr__(self, name): return self
                def __call__(self, *args, **kwargs): return self
            def outer_sum(a, b):
                return _EqualsEverything()
            """
        ),
        "residuals": textwrap.dedent(
            """\
            class _LyingTensor(torch.Tensor):
                def __eq__(self, other): return True
                def __ne__(self, other): return False
                __hash__ = torch.Tensor.__hash__
                def equal(self, other): return True
                def allclose(self, other, *args, **kwargs): return True
            def residuals(pred, target):
                return torch.zeros_like(target).as_subclass(_LyingTensor)
            """
        ),
    }


def fake_output_prints(mb: int = 20) -> str:
    """Print ``mb`` MiB to stdout, in 1 MiB lines, then more in many small writes."""
    return textwrap.dedent(
        f"""\
        import sys as _sys
        for _i in range({mb}):
            print("x" * (1024 * 1024))
        for _i in range(20000):
            _sys.stdout.write("y" * 50 + "\\n")
        """
    )


def write_outside(paths: list[str], guarded: list[str], course_file: str) -> str:
    """Try to create each of ``paths`` (the test looks for them afterwards). Inside the sandbox
    /tmp, /dev/shm and the instructor's folders are private and empty, so writing there may
    succeed and vanish; ``guarded`` paths (in the course folder) and opening ``course_file`` for
    writing (append mode, nothing written) must fail there. ``_escaped`` lists those that did
    not fail."""
    return textwrap.dedent(
        f"""\
        _escaped = []
        for _path in {paths!r}:
            try:
                with open(_path, "w") as _file:
                    _file.write("written by a submission")
                if _path in {guarded!r}:
                    _escaped.append(_path)
            except OSError:
                pass
        try:
            with open({course_file!r}, "a"):   # append mode, nothing written
                _escaped.append({course_file!r})
        except OSError:
            pass
        """
    )


def read_solutions(solutions_file: str, repo: str) -> str:
    """Copy the course's solutions, by two routes: opening the file ("open"), and asking git for
    it from the repository's history ("git"). ``_stolen[route]`` maps grade_id to source."""
    return textwrap.dedent(
        f"""\
        import json as _json, subprocess as _subprocess
        _stolen = {{"open": {{}}, "git": {{}}}}
        def _take(route, text):
            try:
                for cell in _json.loads(text)["cells"]:
                    meta = cell.get("metadata", {{}}).get("nbgrader", {{}})
                    if meta.get("solution"):
                        _stolen[route][meta["grade_id"]] = "".join(cell["source"])
            except Exception:
                pass
        try:
            with open({solutions_file!r}) as _file:
                _take("open", _file.read())
        except OSError:
            pass
        try:
            _take("git", _subprocess.run(
                ["git", "-C", {repo!r}, "show", "HEAD:solutions/01_tensors.ipynb"],
                capture_output=True, text=True, timeout=20).stdout)
        except Exception:
            pass
        """
    )


def use_stolen(grade_id: str, route: str) -> str:
    """The answer cell's code: run the solution stolen by ``route``, if there is one."""
    return textwrap.dedent(
        f"""\
        if {grade_id!r} in _stolen[{route!r}]:
            exec(_stolen[{route!r}][{grade_id!r}])
        """
    )


def results_json(results: Path, learner: str) -> dict:
    return json.loads((results / f"{learner}.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------
# Answers that reach for the grader's own code, data or memory (issue 25): each computes its
# result only through what it reached for, so that being refused fails it with the reason.
# --------------------------------------------------------------------------------------------
REACH_FOR_CODE = {
    # the worked answer, through the notebook's `ex` and through an import of the exercise module
    "match_reference": "def match_reference(x, reference):\n    return ex.match_reference.reference(x, reference)\n",
    "independent_copy": textwrap.dedent(
        """\
        def independent_copy(array):
            import course_utils.exercises.tensors as T
            return T.independent_copy.reference(array)
        """),
    # the probe itself, run on a right answer, to read what it expects
    "flatten_transposed": textwrap.dedent(
        """\
        def flatten_transposed(x):
            from course_utils.exercises.running import Runner
            import course_utils.exercises.tensors as T
            T.flatten_transposed._probe(lambda y: y.mT.reshape(-1), Runner())
            return x.mT.reshape(-1)
        """),
    # the module's source, to run its reference as one's own code
    "remove_batch_dim": textwrap.dedent(
        """\
        def remove_batch_dim(x):
            import inspect
            import sys
            import course_utils.exercises.tensors
            namespace = {}
            exec(inspect.getsource(sys.modules["course_utils.exercises.tensors.remove_batch_dim"]), namespace)
            return namespace["remove_batch_dim"].reference(x)
        """),
    # another chapter's module (not loaded in a chapter 01 kernel), then this one's source file
    "outer_sum": textwrap.dedent(
        """\
        def outer_sum(a, b):
            import importlib
            import sys
            import course_utils.exercises.tensors
            T = sys.modules["course_utils.exercises.tensors.outer_sum"]
            try:
                importlib.import_module("course_utils.exercises.models")
            except ImportError as error:
                other = str(error)
            try:
                source = open(T.__file__).read()
            except OSError as error:
                raise FileNotFoundError(f"{other}; {error}") from None
            namespace = {}
            exec(source, namespace)
            return namespace["outer_sum"].reference(a, b)
        """),
    # a check opened by the answer itself
    "residuals": textwrap.dedent(
        """\
        def residuals(pred, target):
            import course_utils.grading.kernel_probe as kp
            kp.record("tensors", "residuals", "residuals", "a name of my own")
            return pred.squeeze(1) - target
        """),
    # a judge called to try answers out
    "checked_mse": textwrap.dedent(
        """\
        def checked_mse(pred, target):
            import course_utils.exercises.tensors as T
            T.checked_mse._judge({})
            return ((pred - target) ** 2).mean()
        """),
}

REACH_FOR_MEMORY = {
    # every object in the interpreter: the probe's expected values among them
    "match_reference": textwrap.dedent(
        """\
        def match_reference(x, reference):
            import gc
            gc.get_objects()
            return x.to(dtype=reference.dtype, device=reference.device)
        """),
    # the frames of the check that called the answer: its locals hold the right answers
    "independent_copy": textwrap.dedent(
        """\
        def independent_copy(array):
            import inspect
            inspect.currentframe().f_back.f_locals
            return torch.tensor(array)
        """),
    "flatten_transposed": textwrap.dedent(
        """\
        def flatten_transposed(x):
            try:
                raise RuntimeError("look up")
            except RuntimeError as error:
                error.__traceback__.tb_frame.f_back.f_locals
            return x.mT.reshape(-1)
        """),
    "remove_batch_dim": textwrap.dedent(
        """\
        def remove_batch_dim(x):
            import sys
            sys.settrace(lambda frame, event, arg: None)
            return x[0]
        """),
    "outer_sum": textwrap.dedent(
        """\
        def outer_sum(a, b):
            import ctypes
            ctypes.string_at(id(a), 16)
            return a[:, None] + b[None, :]
        """),
    "residuals": textwrap.dedent(
        """\
        def residuals(pred, target):
            with open("/proc/self/mem", "rb"):
                pass
            return pred.squeeze(1) - target
        """),
    "checked_mse": textwrap.dedent(
        """\
        def checked_mse(pred, target):
            import sys
            sys._current_frames()
            return ((pred - target) ** 2).mean()
        """),
}

# The exercise's texts: hints and worked answer as code to run.
REACH_FOR_TEXTS = textwrap.dedent(
    """\
    def outer_sum(a, b):
        namespace = {}
        exec(ex.outer_sum.solution_text(), namespace)
        return namespace["outer_sum"](a, b)
    """
)

# A thread that waits for each check's record beside the answers and copies what the probe
# expected into what the answer gave, before the grader reads it (records used to be files in
# the kernel's folder; now they leave through a pipe the kernel cannot read).
FORGE_RECORDS = textwrap.dedent(
    """\
    import glob as _glob, json as _json, os as _os, threading as _threading, time as _time
    def _forge(node):
        if isinstance(node, dict):
            if "got" in node and "expected" in node:
                for key in ("got", "again"):  # the result of the first call, and of a second
                    if key in node:
                        node[key] = node["expected"]
            for value in node.values():
                _forge(value)
        elif isinstance(node, list):
            for value in node:
                _forge(value)
    def _watch(seen=set()):
        end = _time.time() + 120
        while _time.time() < end:
            for path in _glob.glob("probes/*.json"):
                if path in seen:
                    continue
                try:
                    with open(path) as file:
                        record = _json.load(file)
                    _forge(record)
                    with open(path, "w") as file:
                        _json.dump(record, file)
                    seen.add(path)
                except Exception:
                    pass
            _time.sleep(0.0005)
    _threading.Thread(target=_watch, daemon=True).start()
    """
)

# Junk written where a kernel sends its records (course_utils.grading.records.RECORDS_FD).
WRITE_TO_THE_CHANNEL = textwrap.dedent(
    """\
    import os as _os
    try:
        _os.write(190, b"not a record")
    except OSError:
        pass
    """
)


def read_these(paths: list[str]) -> str:
    """An answer cell for match_reference that is right only if none of ``paths`` (files the
    sandbox must hide) can be read; otherwise it raises, naming those it could read."""
    return textwrap.dedent(
        f"""\
        _readable = []
        for _path in {paths!r}:
            try:
                with open(_path, "rb") as _file:
                    _file.read(1)
                _readable.append(_path)
            except OSError:
                pass
        def match_reference(x, reference):
            if _readable:
                raise PermissionError("read: " + ", ".join(_readable))
            return x.to(dtype=reference.dtype, device=reference.device)
        """
    )
