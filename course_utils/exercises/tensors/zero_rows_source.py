"""What zero_negative_rows' judge reads of the answer's own source (never runs it): the names it
assigns, whether it can compare with "or equal" or negates a mask, and a chained write
x[m][...] = v. A message then gives advice only where the answer's code shows it fits."""

from __future__ import annotations

import ast

from course_utils.exercises.answer_source import answer_nodes as _answer_nodes
from course_utils.exercises.tensors.common import _calls_in


def _assigned_names(answer) -> set:
    """Names the answer's own source assigns to (x = ..., x += ...)."""
    names = set()
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            targets = inner.targets if isinstance(inner, ast.Assign) else (
                [inner.target] if isinstance(inner, (ast.AugAssign, ast.AnnAssign)) else [])
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


_OR_EQUAL_CALLS = {"le", "le_", "ge", "ge_", "less_equal", "greater_equal", "logical_not", "bitwise_not",
                   "nonpositive", "signbit", "sign", "clamp", "clip", "relu", "minimum", "maximum",
                   "min", "max"}


def _or_equal_in(answer) -> bool:
    """Whether the answer's own source could compare with "or equal" (<=, >=, a negation, ...):
    where it compares only strictly, "< 0, not <= 0" is no advice for it."""
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            if isinstance(inner, ast.Compare) and any(
                    isinstance(op, (ast.LtE, ast.GtE, ast.Eq, ast.NotEq)) for op in inner.ops):
                return True
            if isinstance(inner, ast.UnaryOp) and isinstance(inner.op, (ast.Invert, ast.Not)):
                return True
    return any(name.removesuffix("()") in _OR_EQUAL_CALLS for name in _calls_in(answer))


def _negates(answer) -> bool:
    """Whether the answer's own source negates a mask (~m, not m, logical_not, bitwise_not)."""
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            if isinstance(inner, ast.UnaryOp) and isinstance(inner.op, (ast.Invert, ast.Not)):
                return True
    return any(name.removesuffix("()") in ("logical_not", "bitwise_not", "logical_not_", "bitwise_not_")
               for name in _calls_in(answer))


def _chained_write(answer) -> str | None:
    """The first assignment in the answer's source to an index of an index, x[m][...] = v."""
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            targets = inner.targets if isinstance(inner, ast.Assign) else (
                [inner.target] if isinstance(inner, ast.AugAssign) else [])
            for target in targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript):
                    return ast.unparse(target)
    return None
