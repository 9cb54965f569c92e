"""The package as notebooks use it: cheap to import, and it shows results in the right form."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import course_utils
from course_utils import display


def test_importing_the_course_does_not_pull_in_plotting_or_widgets():
    code = (
        "import sys, course_utils, course_utils.env, course_utils.exercises.environment, "
        "course_utils.demo, course_utils.progress_store\n"
        "heavy = [m for m in ('matplotlib', 'ipywidgets') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


class Shown:
    def __str__(self):
        return "plain text"

    def _repr_html_(self):
        return "<b>html</b>"


def test_outside_a_kernel_show_prints_plain_text(capsys):
    assert not display.in_notebook_kernel()
    display.show(Shown())
    assert capsys.readouterr().out == "plain text\n"


def test_inside_a_kernel_show_sends_html_with_plain_text_beside_it(monkeypatch):
    sent = []
    monkeypatch.setattr(display, "in_notebook_kernel", lambda: True)
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda data, raw: sent.append((data, raw)))
    display.show(Shown())
    assert sent == [({"text/plain": "plain text", "text/html": "<b>html</b>"}, True)]


# --------------------------------------------------------------------------------------------
# The package's own import graph
# --------------------------------------------------------------------------------------------
PACKAGE = Path(course_utils.__file__).parent


def _course_modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking_block(node) -> bool:
    test = getattr(node, "test", None) if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, modules: dict[str, Path], deferred: bool) -> set[str]:
    """The course modules ``module`` imports: at import time only, or also inside functions.

    ``from package import name`` depends on the submodule ``package.name`` when there is one
    (Python imports it even while the package is half initialised), else on the package.
    Blocks under ``if TYPE_CHECKING:`` never run and are left out.
    """
    path = modules[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            in_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and not deferred:
                continue
            if _is_type_checking_block(child):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names if alias.name in modules)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package
                    for _ in range(child.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                for alias in child.names:
                    if f"{base}.{alias.name}" in modules:
                        found.add(f"{base}.{alias.name}")
                    elif base in modules:
                        found.add(base)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    found.discard(module)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def connect(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return cycles


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize(
    "deferred", [False, True], ids=["at import time", "with imports inside functions"]
)
def test_no_course_modules_import_each_other_in_a_circle(deferred):
    """A circle works only as long as the order of imports happens to suit it.

    An import deferred into a function (to keep importing cheap) still ties the two modules:
    the module it is in must not be one that the imported module needs, directly or not.
    """
    modules = _course_modules()
    graph = {module: _imports(module, modules, deferred) for module in modules}
    assert "course_utils.exercises.core" in graph["course_utils.exercises"]  # the graph is read
    assert _cycles(graph) == []
