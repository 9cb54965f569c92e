"""Whether the answer that was checked is code of the learner's answer cell.

The kernel sends, with each check's record, the fingerprints of the code the checked answer
runs (``kernel_probe.answer_code``); here each must be the fingerprint of a function compiled
from the answer cell's source. That refuses an answer taken from elsewhere (the course's own
tools, a function another exercise's check holds) while accepting every way of writing the
cell.

The source is compiled as the kernel compiled it, never run: IPython turns the cell into
Python (``%magic`` lines, ``!shell``), then compiles each top-level statement on its own, and
the bytecode of a function depends on that (Python 3.11 and later call a method of a module
that the same compile unit imported, ``import torch`` then ``torch.add(...)``, differently).
So each statement is compiled alone, as IPython does, and the whole cell too (a cell run some
other way), with and without the ``__future__`` flags an earlier cell may have turned on.
"""

from __future__ import annotations

import __future__
import ast
import functools
import types

from course_utils.grading.kernel_probe import code_fingerprint

# Flags a cell may be compiled under: ``from __future__ import annotations`` in an earlier cell
# stays on for the rest of the notebook; IPython allows a top-level ``await``.
_FUTURE_FLAGS = (0, __future__.annotations.compiler_flag)
_TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


def written_in_cell(code, source: str) -> bool:
    """Whether every fingerprint in ``code`` (one, or a list) is of code written in ``source``.
    ``None`` (no code of anyone's: a builtin, a functools.partial) and an empty list (a class
    that defines nothing itself) are not."""
    if code is None:
        return False
    fingerprints = [code] if isinstance(code, str) else code
    if not isinstance(fingerprints, list) or not fingerprints or not all(isinstance(f, str) for f in fingerprints):
        return False
    found = fingerprints_in(source)
    if found is None:  # not Python that can be compiled here: the benefit of the doubt
        return True
    return all(fingerprint in found for fingerprint in fingerprints)


def defined_in(fingerprint: str, source: str) -> bool:
    """Whether a function with this fingerprint is written in ``source``."""
    return written_in_cell(fingerprint, source)


@functools.lru_cache(maxsize=256)
def fingerprints_in(source: str) -> frozenset[str] | None:
    """The fingerprints of every function and class body ``source`` can compile to, or None
    when none of its readings compiles."""
    found: set[str] = set()
    compiled_any = False
    for text in _readings(source):
        for unit, mode in _compile_units(text):
            for flags in _FUTURE_FLAGS:
                try:
                    code = compile(unit, "<answer>", mode, flags=flags | _TOP_LEVEL_AWAIT, dont_inherit=True)
                except (SyntaxError, ValueError, TypeError):
                    continue
                compiled_any = True
                found.update(code_fingerprint(inner) for inner in _code_objects(code))
    return frozenset(found) if compiled_any else None


def _readings(source: str) -> list[str]:
    """The cell as written, and as IPython turns it into Python (magics, shell escapes); a
    cell magic's body (``%%time``) is compiled by the magic as a cell of its own."""
    readings = [source]
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        transformed = TransformerManager().transform_cell(source)
    except Exception:  # IPython's own transformation failed: the kernel's would too
        transformed = source
    if transformed != source:
        readings.append(transformed)
    stripped = source.lstrip()
    if stripped.startswith("%%"):
        readings.append(stripped.split("\n", 1)[1] if "\n" in stripped else "")
    return readings


def _compile_units(text: str):
    """(unit, mode) pairs: the whole text, then each top-level statement on its own as IPython
    compiles it (a last expression statement also in ``single`` mode, as IPython shows it)."""
    yield text, "exec"
    try:
        tree = compile(text, "<answer>", "exec", flags=ast.PyCF_ONLY_AST | _TOP_LEVEL_AWAIT, dont_inherit=True)
    except (SyntaxError, ValueError, TypeError):
        return
    for index, node in enumerate(tree.body):
        yield ast.Module([node], type_ignores=[]), "exec"
        if index == len(tree.body) - 1 and isinstance(node, ast.Expr):
            yield ast.Interactive([node]), "single"


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)
