"""What a submission's code cannot reach inside its own kernel while it is graded.

The sandbox keeps the machine's files out of a kernel. This keeps the grader's own code and
data out of reach of the submission's code inside it: the checks run in the same Python as the
answers they check, and a reference solution, a probe that computes what a right answer gives,
or the probe's half-built record must not be something an answer can call or read.

It is one audit hook (PEP 578: ``sys.addaudithook``), installed by ``kernel_probe.setup`` in
the first cell, before any code of the submission runs, and never removable. Python raises an
audit event for each way of reaching into code that is not one's own: walking the call stack
(``sys._getframe``, a traceback's or generator's frame), searching the heap (``gc``), tracing
(``sys.settrace``), building code or functions by hand, reading memory (``ctypes``,
``/proc/self/mem``). The hook decides each from the stack alone, and refuses with an
exception, which an answer may catch but which leaves it nothing:

* the chapters' exercise modules are loaded with a first line in every function
  (``guarded_code``) that raises the event ``course.guarded``: such code runs only inside a
  *probe window*, opened by ``kernel_probe.record`` for one check cell, and only when no
  frame of the submission's code, and no call into it (``running.call_learner``), lies between
  it and that window. So an answer cannot call a reference solution, a probe or a judge,
  whatever name or object it found them under;
* a frame is handed to code outside the course's package only when its chain of callers holds
  none of the exercise or grading code (so the probe's locals, which include right answers,
  stay out of reach);
* searching the heap, tracing, building code or functions, ``ctypes`` and ``marshal`` are
  refused to the submission's code; ``/proc/*/mem`` to anyone.

A probe window opens once per check cell, by a name only that cell knows (a random name, of
which the first cell passed only the hash): an answer that calls ``record`` itself opens
nothing. Everything the hook uses is bound when it is made (its own default values), so that
nothing a submission can rebind (a module's globals, ``builtins``, a class's methods) changes
what it does; it touches only frames, code objects, plain strings and sets, so no code of the
submission ever runs inside it.

What it cannot stop: code that rewrites the course's own functions or torch's in memory to
watch the values a probe passes through them, a signal handler given the interrupted frame,
a torch function mode left on, or bytecode rebuilt by hand. That is why no probe computes a
right answer in the kernel (``Exercise(expect=...)`` computes it in the grader's process): what
such code can see there is the inputs and the learner's own results. INSTRUCTORS.md ("What a
submission can reach") says so.
"""

from __future__ import annotations

import _thread
import hashlib
import os
import sys
import sysconfig
import types

GUARDED = "course.guarded"
WINDOW_OPEN = "course.window.open"
WINDOW_CLOSE = "course.window.close"

# Refused to the submission's own code, judged by the frame that asks (not the stack above it):
# libraries the submission calls may use them (importlib unmarshals modules, torch uses ctypes).
_ASKED_BY_CALLER = frozenset({
    "marshal.dumps", "marshal.loads", "marshal.load", "code.__new__", "function.__new__",
})
# Tracing and profiling: refused whenever the submission's code asks, itself or through a library
# (the standard library's debugger, bdb, calls sys.settrace for whoever uses it). No library a
# grade depends on traces.
_TRACING = frozenset({
    "sys.settrace", "sys.setprofile", "sys.monitoring.register_callback", "sys.monitoring.use_tool_id",
})
# Refused unless course code asks: they show every object or every thread's frames.
_HEAP_AND_THREADS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"})
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_RISKY = _ASKED_BY_CALLER | _TRACING | _HEAP_AND_THREADS | frozenset({
    GUARDED, WINDOW_OPEN, WINDOW_CLOSE, "sys._getframe", "object.__getattr__", "object.__setattr__", "open",
    "compile", "exec"})


def record_name_hash(name: str) -> str:
    """How the first cell names a probe window without saying its name."""
    return hashlib.sha256(name.encode()).hexdigest()


def library_prefixes() -> tuple[str, ...]:
    """Where Python's own modules and installed packages lie: code neither the course's nor the
    submission's."""
    paths = sysconfig.get_paths()
    folders = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    prefixes = {os.path.realpath(folder) + os.sep for folder in folders}
    prefixes |= {folder.rstrip(os.sep) + os.sep for folder in folders}
    return tuple(sorted(prefixes)) + ("<frozen ",)


def frame_handing_code() -> frozenset:
    """Library functions that give their caller a frame (or a frame's variables): asked by one
    of these, a frame counts as asked by the code that called it. Other library code may look
    at frames for its own ends (torch notes where an operator was registered, the traceback
    module formats a stack) without handing them on."""
    import inspect
    import logging
    import traceback

    functions = [inspect.currentframe, inspect.stack, inspect.trace, inspect.getouterframes,
                 inspect.getinnerframes, traceback.walk_stack, traceback.walk_tb, logging.currentframe,
                 # hand on each frame's variables (capture_locals=True), not only where it is
                 traceback.extract_stack, traceback.StackSummary.extract]
    functions += [getattr(traceback.StackSummary, name) for name in ("_extract_from_extended_frame_gen",)
                  if hasattr(traceback.StackSummary, name)]
    functions = [getattr(function, "__func__", function) for function in functions]
    try:
        from IPython.utils import frame as ipython_frames

        functions += [value for value in vars(ipython_frames).values() if isinstance(value, types.FunctionType)]
    except ImportError:
        pass
    codes = [function.__code__ for function in functions]
    for code in list(codes):  # and the generators inside them (StackSummary.extract's)
        codes += [const for const in code.co_consts if isinstance(const, types.CodeType)]
    return frozenset(codes)


def install(record_hashes, package: str, boundary, record_code) -> None:
    """Install the hook. ``package`` is the folder of the run's ``course_utils``; ``boundary``
    the code of ``running.call_learner``; ``record_code`` the code of ``kernel_probe.record``."""
    package = os.path.realpath(package) + os.sep
    secret = (package + "exercises" + os.sep, package + "grading" + os.sep)
    sys.addaudithook(_make_hook(frozenset(record_hashes), package, secret, library_prefixes(),
                                boundary, record_code, _thread.get_ident(), frame_handing_code()))


def _make_hook(hashes, package, secret, libraries, boundary, record_code, main_thread, frame_handing):  # noqa: C901
    """The hook and the small functions it uses, each with everything it needs bound as a
    default value: none of them reads a global or a builtin name at run time."""

    def kind_of(frame, _boundary=boundary, _package=package, _libraries=libraries, _type=type,
                _str=str, _startswith=str.startswith):
        """'boundary', 'library', 'course' or 'submission', from the frame's code alone."""
        code = frame.f_code
        if code is _boundary:
            return "boundary"
        name = code.co_filename
        if _type(name) is not _str:
            return "submission"
        if _startswith(name, _libraries):
            return "library"
        if _startswith(name, _package):
            return "course"
        return "submission"

    def asker(frame, _kind_of=kind_of):
        """Who asks, seen from ``frame`` up: the first frame that is not a library's decides."""
        while frame is not None:
            kind = _kind_of(frame)
            if kind != "library":
                return kind
            frame = frame.f_back
        return "library"

    def frame_asker(frame, _kind_of=kind_of, _handing=frame_handing):
        """Who asks for a frame: the code that asked, or, when a library function that hands
        frames on asked (inspect.currentframe), the code that called that function."""
        while frame is not None and frame.f_code in _handing:
            frame = frame.f_back
        return "library" if frame is None else _kind_of(frame)

    def holds_secret(frame, _secret=secret, _type=type, _str=str, _startswith=str.startswith):
        """Whether ``frame`` or a frame below it runs the course's exercise or grading code."""
        while frame is not None:
            name = frame.f_code.co_filename
            if _type(name) is _str and _startswith(name, _secret):
                return True
            frame = frame.f_back
        return False

    def in_window(guarded, roots, _kind_of=kind_of):
        """Whether ``guarded`` (the frame of a guarded function) runs for a probe window: only
        course and library frames between it and the window's root, and no call into the
        learner's code, except that the probe may call guarded code through it directly (a
        probe runs its reference through the same runner, so that its errors are labelled)."""
        below, frame = guarded, guarded.f_back
        while frame is not None:
            for root in roots:
                if root is frame:
                    return True
            kind = _kind_of(frame)
            if kind == "submission" or (kind == "boundary" and below is not guarded):
                return False
            below, frame = frame, frame.f_back
        return False

    def hook(event, args, _risky=RISKY_EVENTS, _by_caller=_ASKED_BY_CALLER, _heap=_HEAP_AND_THREADS,
             _frame_attributes=_FRAME_ATTRIBUTES, _tracing=_TRACING, _getframe=sys._getframe, _get_ident=_thread.get_ident,
             _busy=set(), _roots=[], _used=set(), _hashes=hashes, _sha256=hashlib.sha256,
             _record_code=record_code, _main=main_thread, _kind_of=kind_of, _asker=asker,
             _frame_asker=frame_asker,
             _holds_secret=holds_secret, _in_window=in_window, _package=package, _libraries=libraries,
             _type=type, _str=str, _bytes=bytes, _code_type=types.CodeType,
             _getattr=getattr, _len=len, _range=range, _startswith=str.startswith, _endswith=str.endswith,
             _memory_files=("/mem", "/pagemap"), _encode=str.encode, _PermissionError=PermissionError, _ValueError=ValueError):
        if event not in _risky and not _startswith(event, "ctypes."):
            return
        if event == "object.__getattr__" and args[1] not in _frame_attributes:
            return  # f_code and the like: read all the time, and harmless
        if event == "object.__setattr__" and args[1] != "__code__":
            return
        me = _get_ident()
        if me in _busy:  # the hook's own look at frames raises events too
            return
        _busy.add(me)
        try:
            caller = _getframe(1)
            if event == "object.__getattr__" or event == "sys._getframe":
                exposed = _getattr(args[0], args[1], None) if event == "object.__getattr__" else args[0]
                kind = _frame_asker(caller)
                if (kind == "submission" or kind == "boundary") and exposed is not None and _holds_secret(exposed):
                    raise _ValueError("grading: your code may not look at the grader's frames")
            elif event == GUARDED:
                if not _in_window(caller, _roots):
                    what = args[0] if _type(args[0]) is _str else "code"
                    raise _PermissionError(
                        f"grading: your code called the course's own {what}; a grade comes only from "
                        "code you wrote")
            elif event == WINDOW_OPEN:
                name = args[0]
                if caller.f_code is not _record_code or _type(name) is not _str:
                    raise _PermissionError("grading: only the grader opens a check")
                digest = _sha256(_encode(name)).hexdigest()
                if digest not in _hashes or digest in _used:
                    raise _PermissionError("grading: this check was opened already, or is not one of this run's")
                _used.add(digest)
                _roots.append(caller)
            elif event == WINDOW_CLOSE:
                if caller.f_code is _record_code:
                    for index in _range(_len(_roots) - 1, -1, -1):
                        if _roots[index] is caller:
                            del _roots[index]
            elif event in _heap:
                kind = _asker(caller)
                if kind != "course" and not (kind == "library" and me == _main):
                    raise _PermissionError(f"grading: your code may not search the interpreter ({event})")
            elif event == "object.__setattr__":  # a function's __code__ replaced
                target = _getattr(args[0], "__code__", None)
                filename = _getattr(target, "co_filename", None)
                if _kind_of(caller) != "course" and _type(filename) is _str and _startswith(filename, _package):
                    raise _PermissionError("grading: your code may not replace the course's own code")
            elif event == "open":
                path = args[0]
                if _type(path) is _bytes:
                    path = path.decode("utf-8", "replace")
                # by its last part: "mem" opened relative to /proc/self, or through a dir_fd, too
                if _type(path) is _str and (path == "mem" or path == "pagemap" or _endswith(
                        path, _memory_files)):
                    raise _PermissionError("grading: a kernel's memory cannot be read while it is graded")
            elif event == "compile":
                kind = _kind_of(caller)
                if kind == "submission" or kind == "boundary":
                    filename = args[1]
                    if _type(filename) is not _str or _startswith(filename, _package) or _startswith(
                            filename, _libraries):
                        raise _PermissionError("grading: your code may not compile code under the name of "
                                               "the course's or a library's file")
            elif event == "exec":
                kind = _kind_of(caller)
                code = args[0]
                if (kind == "submission" or kind == "boundary") and _type(code) is _code_type:
                    filename = code.co_filename
                    if _type(filename) is _str and _startswith(filename, _package):
                        raise _PermissionError("grading: your code may not run the course's own code objects")
            else:  # tracing, code and functions by hand, marshal, ctypes
                # ctypes' own Python functions stand between the caller and the event, and so does
                # a debugger's (bdb) for tracing: look past them. The others come straight from the
                # caller, and libraries use them for the learner's code (importlib unmarshals its
                # modules, torch.compile builds code).
                kind = _asker(caller) if _startswith(event, "ctypes.") or event in _tracing else _kind_of(caller)
                if kind == "submission" or kind == "boundary":
                    raise _PermissionError(f"grading: your code may not use {event} while it is graded")
        finally:
            _busy.discard(me)

    return hook


RISKY_EVENTS = _RISKY
