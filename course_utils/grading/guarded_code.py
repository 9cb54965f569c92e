"""The chapters' exercise modules as a grading kernel loads them: every function guarded.

A chapter's exercise module holds its reference solutions, its probes (which compute what a
right answer gives) and its judges. In a grading kernel the probes must run, and nothing else
may call any of it. So the kernel's first cell loads each module from this run's copy of the
package through ``ChapterFinder``, which compiles it with one statement put first in every
module-level function and in every method of the reference classes:

    sys.audit("course.guarded", "tensors._probe_best_match")

where ``sys.audit`` is not looked up by name but stored in the compiled code as a constant
(nothing a submission rebinds reaches it, and replacing a function's code is itself refused).
``kernel_guard``'s hook receives the event and lets the function run only for the grader's
own check. Docstrings are left out too.

Not guarded, because the course hands them to the learner's code or torch calls them while it
runs: classes that are not a reference solution (input models and data, torch function modes),
and the module-level names a chapter lists in ``LEARNER_FACING``.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.util
import marshal
import sys
import types
import warnings
from pathlib import Path

from course_utils.grading.kernel_guard import GUARDED

# Beside a chapter's source in a prepared package (``package_copy``): its guarded code, marshalled.
GUARDED_SUFFIX = ".guarded-code"

# Compiled as a call of this number, then the number is replaced by ``sys.audit`` in the code's
# constants. It must appear nowhere else in a chapter's code (``guard`` checks).
_PLACEHOLDER = 0x5EC_C0DE_A0D17


def _names_given(tree: ast.Module, keyword: str) -> set[str]:
    """The names passed as ``keyword=NAME`` to any call: ``reference=``, ``probe=``, ``judge=``."""
    return {kw.value.id for node in ast.walk(tree) if isinstance(node, ast.Call)
            for kw in node.keywords if kw.arg == keyword and isinstance(kw.value, ast.Name)}


def _learner_facing(tree: ast.Module) -> set[str]:
    """The names of ``LEARNER_FACING = ("name", ...)`` at the module's top level."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "LEARNER_FACING" for target in node.targets):
            return {element.value for element in node.value.elts if isinstance(element, ast.Constant)}
    return set()


def _strip_docstring(body: list) -> None:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(
            body[0].value.value, str):
        del body[0]
        if not body:
            body.append(ast.Pass())


def _prologue(name: str) -> ast.stmt:
    call = ast.Call(ast.Constant(_PLACEHOLDER), [ast.Constant(GUARDED), ast.Constant(name)], [])
    return ast.Expr(call)


def guard(source: str, module: str) -> ast.Module:
    """``source`` with docstrings removed and the guard put first in every function that is
    not learner-facing (see the module's docstring)."""
    tree = ast.parse(source)
    if any(isinstance(node, ast.Constant) and node.value == _PLACEHOLDER for node in ast.walk(tree)):
        raise ValueError(f"{module} uses the guard's placeholder constant {_PLACEHOLDER}")
    references = _names_given(tree, "reference")
    open_names = _learner_facing(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            _strip_docstring(node.body)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in open_names:
            node.body.insert(0, _prologue(f"{module}.{node.name}"))
        elif isinstance(node, ast.ClassDef) and node.name in references and node.name not in open_names:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    item.body.insert(0, _prologue(f"{module}.{node.name}.{item.name}"))
    return ast.fix_missing_locations(tree)


def _with_audit(code: types.CodeType, filename: str) -> types.CodeType:
    """``code`` (and the code inside it) with the placeholder constant replaced by sys.audit,
    compiled as if from ``filename`` (``kernel_guard`` tells the course's frames by it)."""
    constants = tuple(
        sys.audit if type(const) is int and const == _PLACEHOLDER
        else _with_audit(const, filename) if isinstance(const, types.CodeType)
        else const
        for const in code.co_consts)
    return code.replace(co_consts=constants, co_filename=filename)


def guarded_code_object(source: str, filename: str, module: str) -> types.CodeType:
    """The guarded module compiled, with the placeholder still in it (so it can be marshalled:
    ``package_copy`` keeps it beside the source)."""
    with warnings.catch_warnings():  # "'int' object is not callable": it will be sys.audit
        warnings.simplefilter("ignore", SyntaxWarning)
        return compile(guard(source, module), filename, "exec", dont_inherit=True)


def guarded_code(source: str, filename: str, module: str) -> types.CodeType:
    return _with_audit(guarded_code_object(source, filename, module), filename)


class _ChapterLoader(importlib.abc.Loader):
    """Loads the guarded code that ``package_copy`` prepared, or else compiles the source."""

    def __init__(self, path: Path, module: str):
        self.path, self.module = path, module

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        prepared = self.path.with_suffix(GUARDED_SUFFIX)
        if prepared.exists():
            code = _with_audit(marshal.loads(prepared.read_bytes()), str(self.path))
        else:
            code = guarded_code(self.path.read_text(encoding="utf-8"), str(self.path), self.module)
        exec(code, module.__dict__)


class ChapterFinder(importlib.abc.MetaPathFinder):
    """Loads ``course_utils.exercises.CHAPTER`` guarded, from ``package`` (the run's copy): a
    chapter module, or a chapter package and every module in it. Guarded names keep the
    chapter's name (``tensors._probe_outer_sum``) whichever module of the package holds them."""

    def __init__(self, package: Path, chapters):
        self.package, self.chapters = Path(package), set(chapters)

    def find_spec(self, fullname, path=None, target=None):
        prefix = "course_utils.exercises."
        if not fullname.startswith(prefix):
            return None
        chapter, *inside = fullname[len(prefix):].split(".")
        if chapter not in self.chapters or len(inside) > 1:
            return None
        folder = self.package / "course_utils" / "exercises"
        if inside:
            location = folder / chapter / f"{inside[0]}.py"
        elif (folder / chapter / "__init__.py").exists():
            location = folder / chapter / "__init__.py"
            return importlib.util.spec_from_file_location(
                fullname, location, loader=_ChapterLoader(location, chapter),
                submodule_search_locations=[str(folder / chapter)])
        else:
            location = folder / f"{chapter}.py"
        return importlib.util.spec_from_file_location(fullname, location,
                                                      loader=_ChapterLoader(location, chapter))


def load_chapters(package: Path, chapters) -> dict[str, types.ModuleType]:
    """Import every chapter's exercise module guarded (none may have been imported before)."""
    already = sorted({name for name in chapters for loaded in sys.modules
                      if loaded == f"course_utils.exercises.{name}"
                      or loaded.startswith(f"course_utils.exercises.{name}.")})
    if already:
        raise RuntimeError(f"already imported unguarded: {', '.join(already)}")
    finder = ChapterFinder(package, chapters)
    sys.meta_path.insert(0, finder)
    try:
        return {name: importlib.import_module(f"course_utils.exercises.{name}") for name in chapters}
    finally:
        sys.meta_path.remove(finder)
