"""A reference solution as a learner can paste it: its source, preceded by the imports it needs."""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import symtable
import sys
import textwrap
from dataclasses import dataclass
from typing import Callable


def _source_of(function: Callable) -> str:
    try:
        return textwrap.dedent(inspect.getsource(function)).strip()
    except (OSError, TypeError):  # pragma: no cover - source files ship with the package
        return f"# the source of {function.__name__} is not available"


def solution_source(reference: Callable) -> str:
    """``reference``'s source, preceded by the imports of its module that it needs.

    A reference uses names its exercise module imports at the top (``math``, ``Path``,
    ``DataLoader``); shown alone, it fails with NameError in a notebook that has not imported
    them. The names it reads from outside itself are found with ``symtable``, and each one
    that the module binds with a top-level ``import`` brings that import, in the module's
    order and grouping. Names the module defines itself are left alone: a reference must not
    use them (tests/test_pasted_solutions.py checks that every solution is self-contained).
    """
    source = _source_of(reference)
    try:
        needed = _global_names(source)
        module_imports = _module_imports(getattr(reference, "__module__", None) or "")
    except (SyntaxError, ValueError, OSError, TypeError):  # pragma: no cover - defensive
        return source
    groups: dict[int, list[str]] = {}
    for statement in module_imports:
        text = statement.text_for(needed)
        if text is not None:
            groups.setdefault(statement.group, []).append(text)
            needed -= statement.binds()  # a name imported twice is imported once
    if not groups:
        return source
    imports = "\n\n".join("\n".join(group) for group in groups.values())
    return f"{imports}\n\n\n{source}"


def _global_names(source: str) -> set[str]:
    """Names ``source`` reads from its module's globals (or builtins) and does not bind."""
    top = symtable.symtable(source, "<solution>", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    used: set[str] = set()
    tables = [top]
    while tables:
        table = tables.pop()
        used.update(
            symbol.get_name()
            for symbol in table.get_symbols()
            if symbol.is_referenced() and symbol.is_global()
        )
        tables.extend(table.get_children())
    return used - bound


@dataclass(frozen=True)
class _ImportStatement:
    """One top-level import of a module: what it binds, and how to write it for some names."""

    from_module: str | None  # None for ``import a.b as c``
    names: tuple[tuple[str, str | None], ...]  # (imported name, as-name)
    group: int  # the module's imports, numbered by blank-line-separated block

    def bound(self, name: str, asname: str | None) -> str:
        if asname:
            return asname
        return name if self.from_module is not None else name.split(".")[0]

    def binds(self) -> set[str]:
        return {self.bound(name, asname) for name, asname in self.names}

    def text_for(self, needed: set[str]) -> str | None:
        kept = [(n, a) for n, a in self.names if self.bound(n, a) in needed]
        if not kept:
            return None
        parts = [f"{n} as {a}" if a else n for n, a in kept]
        if self.from_module is None:
            return "\n".join(f"import {part}" for part in parts)
        return f"from {self.from_module} import {', '.join(parts)}"


@functools.lru_cache(maxsize=None)
def _module_imports(module_name: str) -> tuple[_ImportStatement, ...]:
    module = sys.modules.get(module_name)
    if module is None:
        return ()
    text = inspect.getsource(module)
    blank = [i for i, line in enumerate(text.splitlines(), 1) if not line.strip()]
    statements = []
    group, previous_end = 0, 0
    for node in ast.parse(text).body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if any(previous_end < line < node.lineno for line in blank):
            group += 1
        previous_end = node.end_lineno
        if isinstance(node, ast.Import):
            names = tuple((alias.name, alias.asname) for alias in node.names)
            statements.append(_ImportStatement(None, names, group))
        else:
            source_module = node.module or ""
            if node.level:  # written as it would be outside the package
                package = module.__package__ or module_name.rpartition(".")[0]
                relative = "." * node.level + source_module
                source_module = importlib.util.resolve_name(relative, package)
            names = tuple((alias.name, alias.asname) for alias in node.names if alias.name != "*")
            statements.append(_ImportStatement(source_module, names, group))
    return tuple(statements)
