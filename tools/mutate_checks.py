#!/usr/bin/env python
"""Mutation testing for the exercise checks: does every small mistake in a reference fail?

    .venv/bin/python tools/mutate_checks.py                         # every exercise
    .venv/bin/python tools/mutate_checks.py tensors.outer_sum models  # an exercise, a chapter
    .venv/bin/python tools/mutate_checks.py --equivalent equivalent_mutants.json --json out.json

For each exercise, the reference solution's source (``inspect.getsource(ex.reference)``, a
function or a class) is parsed with ``ast`` and changed in one place at a time:

=================  ===========================================================================
operator           change
=================  ===========================================================================
``compare``        ``<`` ↔ ``<=``, ``>`` ↔ ``>=``, ``==`` ↔ ``!=``
``int_const``      an integer constant ±1 (``dim=1``, ``x.shape[1]``, ``-1`` as one number)
``remove_break``   a ``break`` removed (``pass`` where it is the only statement)
``drop_statement`` one statement removed (never the only one of a body, never a docstring)
``swap_args``      two positional arguments of a call swapped
``sum_mean``       ``.sum(`` ↔ ``.mean(`` (methods and ``torch.sum`` / ``torch.mean``)
``inplace``        ``x.add_(`` → ``x.add(``, and ``x.add(`` → ``x.add_(`` where torch has it
``bool_op``        ``and`` ↔ ``or``
``add_sub``        ``+`` ↔ ``-`` (also ``+=`` ↔ ``-=``)
=================  ===========================================================================

Each mutant is compiled in a copy of the reference's module globals (it sees the same names;
the module itself is never changed), gets the reference's name, and goes through
``ex.verdict(mutant)``, under the exercise's own time limit. A mutant is **killed** when the
verdict is anything but *passed*, and **survives** when it passes: then either the check misses
a case, or the mutant is equivalent (it computes the same thing). Mutants that do not compile,
or are identical to the reference or to an earlier mutant, are dropped and not counted.

Every survivor has a stable id (a short hash of exercise id, operator, location inside the
reference and replacement). ``--equivalent FILE`` (or a folder of such files) reads a JSON object mapping such ids to the
reason the mutant is equivalent, e.g. ``{"3f2a9c01d4": "x.sum() > 0 and x.mean() > 0 agree"}``;
listed survivors count as equivalent. Exit status: 1 when a survivor is not listed as
equivalent, 2 on a usage error, else 0.

Running mutants leaves the session as it was: ``verdict`` restores random streams and grad
mode; this tool also puts back the thread count, the working directory, environment variables,
``sys.path``, the reference module's globals and ``linecache`` after every mutant, and checks
at the end of each exercise that its reference still passes.
"""

from __future__ import annotations

import argparse
import ast
import copy
import contextlib
import hashlib
import inspect
import io
import json
import linecache
import os
import sys
import textwrap
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# --------------------------------------------------------------------------------------------
# Mutation sites
# --------------------------------------------------------------------------------------------
@dataclass
class Site:
    """One single change: the node (by its place in ``ast.walk`` order) and how to change it."""

    operator: str
    index: int  # position of the node to change in list(ast.walk(tree))
    line: int  # line inside the reference's source (1 = its first line)
    col: int
    before: str
    after: str
    apply: Callable[[ast.AST, "ast.AST | None"], None]  # (node, its parent) in a copy of the tree
    context: int | None = None  # index of the node whose text before/after shows the change


@dataclass
class Mutant:
    id: str
    operator: str
    line: int  # line in the reference's file
    col: int  # 1-based column of the change
    before: str
    after: str
    source: str

    def describe(self) -> str:
        return f"{self.operator} L{self.line}:{self.col}: {self.before} → {self.after}"


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unparse(node: ast.AST) -> str:
    return _short(ast.unparse(node))


def _replace_child(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for name, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, name, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return
    raise ValueError("node not found in its parent")  # pragma: no cover


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


_COMPARE_FLIPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}


def _compare_sites(node, index, parent):
    if not isinstance(node, ast.Compare):
        return
    for k, op in enumerate(node.ops):
        flipped = _COMPARE_FLIPS.get(type(op))
        if flipped is None:
            continue
        mutated = copy.deepcopy(node)
        mutated.ops[k] = flipped()

        def apply(n, p, k=k, flipped=flipped):
            n.ops[k] = flipped()

        yield Site("compare", index, node.lineno, node.col_offset, _unparse(node),
                   _unparse(mutated), apply)


def _int_const_sites(node, index, parent):
    negative = (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _is_int(node.operand)
    )
    if negative:
        value = -node.operand.value
    elif _is_int(node) and not (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub)):
        value = node.value
    else:
        return
    for delta in (+1, -1):
        new_value = value + delta

        def apply(n, p, new_value=new_value):
            _replace_child(p, n, ast.Constant(new_value))

        yield Site("int_const", index, node.lineno, node.col_offset, str(value), str(new_value),
                   apply)


def _body_fields(node):
    for name in ("body", "orelse", "finalbody"):
        value = getattr(node, name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield name, value


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _drop_statement_sites(node, index, parent):
    if isinstance(node, ast.Module):
        return
    for name, body in _body_fields(node):
        real = [s for s in body if not _is_docstring(s)]
        if len(real) < 2:
            continue
        for k, statement in enumerate(body):
            if _is_docstring(statement):
                continue

            def apply(n, p, name=name, k=k):
                del getattr(n, name)[k]

            first_line = ast.unparse(statement).splitlines()[0]
            yield Site("drop_statement", index, statement.lineno, statement.col_offset,
                       _short(first_line), "(removed)", apply)


def _remove_break_sites(node, index, parent):
    for name, body in _body_fields(node):
        for k, statement in enumerate(body):
            if not isinstance(statement, ast.Break):
                continue

            def apply(n, p, name=name, k=k):
                body = getattr(n, name)
                if len(body) > 1:
                    del body[k]
                else:
                    body[k] = ast.Pass()

            yield Site("remove_break", index, statement.lineno, statement.col_offset, "break",
                       "(removed)", apply)


def _swap_args_sites(node, index, parent):
    if not isinstance(node, ast.Call):
        return
    count = len(node.args)
    for i in range(count):
        for j in range(i + 1, count):
            if ast.dump(node.args[i]) == ast.dump(node.args[j]):
                continue  # swapping equal arguments changes nothing
            mutated = copy.deepcopy(node)
            mutated.args[i], mutated.args[j] = mutated.args[j], mutated.args[i]

            def apply(n, p, i=i, j=j):
                n.args[i], n.args[j] = n.args[j], n.args[i]

            yield Site("swap_args", index, node.lineno, node.col_offset, _unparse(node),
                       _unparse(mutated), apply)


def _called_attribute(node) -> "ast.Attribute | None":
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func
    return None


def _sum_mean_sites(node, index, parent):
    attribute = _called_attribute(node)
    if attribute is None or attribute.attr not in ("sum", "mean"):
        return
    other = "mean" if attribute.attr == "sum" else "sum"

    def apply(n, p, other=other):
        n.func.attr = other

    yield Site("sum_mean", index, node.lineno, node.col_offset, f".{attribute.attr}(",
               f".{other}(", apply)


def _has_inplace_variant(name: str) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return hasattr(torch.Tensor, name + "_") or hasattr(torch, name + "_")


def _inplace_sites(node, index, parent):
    attribute = _called_attribute(node)
    if attribute is None:
        return
    name = attribute.attr
    if name.startswith("__") or name.strip("_") == "":
        return
    if name.endswith("_") and not name.endswith("__"):
        new_name = name[:-1]
    elif not name.startswith("_") and _has_inplace_variant(name):
        new_name = name + "_"
    else:
        return

    def apply(n, p, new_name=new_name):
        n.func.attr = new_name

    yield Site("inplace", index, node.lineno, node.col_offset, f".{name}(", f".{new_name}(",
               apply)


def _operator_swap_site(kind, node, index, new_op):
    """One site that replaces ``node.op`` (and/or, +/-) by ``new_op``."""
    mutated = copy.deepcopy(node)
    mutated.op = new_op()

    def apply(n, p, new_op=new_op):
        n.op = new_op()

    return Site(kind, index, node.lineno, node.col_offset, _unparse(node), _unparse(mutated),
                apply)


def _bool_op_sites(node, index, parent):
    if isinstance(node, ast.BoolOp):
        new_op = ast.Or if isinstance(node.op, ast.And) else ast.And
        yield _operator_swap_site("bool_op", node, index, new_op)


def _add_sub_sites(node, index, parent):
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, (ast.Add, ast.Sub)):
        new_op = ast.Sub if isinstance(node.op, ast.Add) else ast.Add
        yield _operator_swap_site("add_sub", node, index, new_op)


# In this order: a mutant two operators make alike is counted once, under the first.
OPERATORS: dict[str, Callable] = {
    "compare": _compare_sites,
    "int_const": _int_const_sites,
    "remove_break": _remove_break_sites,
    "drop_statement": _drop_statement_sites,
    "swap_args": _swap_args_sites,
    "sum_mean": _sum_mean_sites,
    "inplace": _inplace_sites,
    "bool_op": _bool_op_sites,
    "add_sub": _add_sub_sites,
}


def _walk_with_parents(tree: ast.AST):
    parents: dict[int, ast.AST | None] = {id(tree): None}
    nodes = list(ast.walk(tree))
    for node in nodes:
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return nodes, parents


# An integer constant is shown with the expression (or simple statement) around it.
_CONTEXTS = (ast.expr, ast.keyword, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)


def mutation_sites(tree: ast.AST, operators: Iterable[str] | None = None) -> list[Site]:
    nodes, parents = _walk_with_parents(tree)
    sites = []
    index_of = {id(node): index for index, node in enumerate(nodes)}
    for name in operators or OPERATORS:
        for index, node in enumerate(nodes):
            parent = parents[id(node)]
            for site in OPERATORS[name](node, index, parent):
                if name == "int_const" and isinstance(parent, _CONTEXTS):
                    site.context = index_of[id(parent)]  # show `dim=1 → dim=2`, not `1 → 2`
                sites.append(site)
    return sites


def apply_site(tree: ast.AST, site: Site) -> ast.AST:
    """A copy of ``tree`` with the one change of ``site``."""
    mutated = copy.deepcopy(tree)
    nodes, parents = _walk_with_parents(mutated)
    node = nodes[site.index]
    site.apply(node, parents[id(node)])
    return ast.fix_missing_locations(mutated)


def mutant_id(exercise_id: str, site: Site) -> str:
    key = f"{exercise_id}|{site.operator}|{site.line}:{site.col}|{site.before}|{site.after}"
    return hashlib.sha1(key.encode()).hexdigest()[:10]


def generate_mutants(
    source: str, exercise_id: str = "", first_line: int = 1, operators=None
) -> list[Mutant]:
    """Every single-change mutant of ``source`` that compiles, each once, in operator order."""
    source = textwrap.dedent(source)
    tree = ast.parse(source)
    original = ast.unparse(tree)
    seen = {original}
    mutants = []
    ids: set[str] = set()
    for site in mutation_sites(tree, operators):
        try:
            mutated = apply_site(tree, site)
            text = ast.unparse(mutated)
            compile(text, "<mutant>", "exec")
        except (SyntaxError, ValueError, TypeError):
            continue  # not a program: discarded, not counted
        if site.context is not None:
            site.before = _unparse(list(ast.walk(tree))[site.context])
            site.after = _unparse(list(ast.walk(mutated))[site.context])
        if text in seen:
            continue
        seen.add(text)
        identifier = mutant_id(exercise_id, site)
        suffix = 1
        while identifier in ids:  # two sites alike in every part of the key: keep ids unique
            suffix += 1
            identifier = mutant_id(exercise_id, site) + f"-{suffix}"
        ids.add(identifier)
        mutants.append(
            Mutant(identifier, site.operator, first_line + site.line - 1, site.col + 1,
                   site.before, site.after, text)
        )
    return mutants


# --------------------------------------------------------------------------------------------
# Running mutants
# --------------------------------------------------------------------------------------------
def reference_source(reference) -> tuple[str, int]:
    lines, start = inspect.getsourcelines(reference)
    return textwrap.dedent("".join(lines)), max(start, 1)


def build_mutant(reference, mutant: Mutant):
    """The mutant's function or class, defined in a copy of the reference's module globals."""
    module = sys.modules.get(reference.__module__)
    namespace = dict(vars(module)) if module is not None else {"__name__": reference.__module__}
    code_object = getattr(reference, "__code__", None)
    if code_object is not None and code_object.co_freevars and reference.__closure__:
        for name, cell in zip(code_object.co_freevars, reference.__closure__):
            with contextlib.suppress(ValueError):
                namespace[name] = cell.cell_contents
    filename = f"<mutant {mutant.id}>"
    lines = mutant.source.splitlines(keepends=True)
    linecache.cache[filename] = (len(mutant.source), None, lines, filename)  # getsource works
    exec(compile(mutant.source, filename, "exec"), namespace)
    return namespace[reference.__name__], filename


@contextlib.contextmanager
def session_preserved(module_names: Iterable[str] = ()):
    """Whatever a mutant changes in this process outside what ``verdict`` restores, put back."""
    import torch

    threads = torch.get_num_threads()
    cwd = os.getcwd()
    environ = dict(os.environ)
    path = list(sys.path)
    deterministic = torch.are_deterministic_algorithms_enabled()
    modules = {name: dict(vars(sys.modules[name])) for name in module_names if name in sys.modules}
    cached = set(linecache.cache)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if os.getcwd() != cwd:
            os.chdir(cwd)
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        sys.path[:] = path
        if torch.are_deterministic_algorithms_enabled() != deterministic:
            torch.use_deterministic_algorithms(deterministic)
        for name, saved in modules.items():
            current = vars(sys.modules[name])
            if current.keys() != saved.keys() or any(current[k] is not v for k, v in saved.items()):
                current.clear()
                current.update(saved)
        for key in set(linecache.cache) - cached:
            del linecache.cache[key]


@dataclass
class ExerciseReport:
    id: str
    chapter: str
    total: int = 0
    killed: int = 0
    survived: int = 0
    equivalent: int = 0
    score: float | None = None
    seconds: float = 0.0
    killed_by: dict = field(default_factory=dict)
    survivors: list = field(default_factory=list)
    error: str | None = None


def run_exercise(exercise, equivalent: dict | None = None, operators=None) -> ExerciseReport:
    """Generate and judge every mutant of ``exercise``'s reference."""
    equivalent = equivalent or {}
    report = ExerciseReport(exercise.id, exercise.chapter)
    start = time.perf_counter()
    reference = exercise.reference
    try:
        source, first_line = reference_source(reference)
        mutants = generate_mutants(source, exercise.id, first_line, operators)
    except (OSError, TypeError, SyntaxError) as error:
        report.error = f"no source to mutate ({type(error).__name__}: {error})"
        report.seconds = time.perf_counter() - start
        return report
    module_names = [reference.__module__]
    for mutant in mutants:
        with session_preserved(module_names):
            try:
                answer, _ = build_mutant(reference, mutant)
            except Exception as error:  # defining it raised: a program that cannot even start
                outcome = f"definition raised {type(error).__name__}"
            else:
                outcome = exercise.verdict(answer).outcome.value
        report.total += 1
        if outcome == "passed":
            report.survived += 1
            reason = equivalent.get(mutant.id)
            report.equivalent += reason is not None
            report.survivors.append(
                {
                    "id": mutant.id,
                    "operator": mutant.operator,
                    "line": mutant.line,
                    "col": mutant.col,
                    "before": mutant.before,
                    "after": mutant.after,
                    "description": mutant.describe(),
                    "equivalent": reason,
                }
            )
        else:
            report.killed += 1
            report.killed_by[outcome] = report.killed_by.get(outcome, 0) + 1
    if report.total:
        report.score = round(report.killed / report.total, 3)
    if not exercise.verdict(reference).passed:  # a mutant must not have changed the session
        report.error = "the reference no longer passes after its mutants ran"
    report.seconds = round(time.perf_counter() - start, 3)
    return report


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------
def select_exercises(names: list[str]) -> list:
    from course_utils.exercises import all_exercises

    everything = [exercise for exercises in all_exercises().values() for exercise in exercises]
    if not names:
        return everything
    chosen, unknown = [], []
    for name in names:
        matches = [e for e in everything if name in (e.id, e.chapter, e.name)]
        if not matches:
            unknown.append(name)
        chosen.extend(e for e in matches if e not in chosen)
    if unknown:
        raise SystemExit(f"unknown exercise or chapter: {', '.join(unknown)}")
    return chosen


def load_equivalent(path: str | None) -> dict:
    """Reviewed equivalent mutants: one JSON file, or a folder of them (one per chapter)."""
    if not path:
        return {}
    folder = Path(path)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else [folder]
    merged: dict = {}
    for file in files:
        data = json.loads(file.read_text())
        if not isinstance(data, dict) or not all(isinstance(v, str) and v for v in data.values()):
            raise SystemExit(f"{file}: expected a JSON object mapping mutant id → reason (text)")
        merged.update(data)
    return merged


def format_table(reports: list[ExerciseReport]) -> str:
    width = max([len(r.id) for r in reports] + [8])
    lines = [f"{'exercise':<{width}}  mutants  killed  survived  equiv.  score   seconds"]
    for r in reports:
        score = "-" if r.score is None else f"{r.score:.2f}"
        lines.append(
            f"{r.id:<{width}}  {r.total:>7}  {r.killed:>6}  {r.survived:>8}  {r.equivalent:>6}"
            f"  {score:>5}  {r.seconds:>8.2f}"
        )
    total = sum(r.total for r in reports)
    killed = sum(r.killed for r in reports)
    score = f"{killed / total:.2f}" if total else "-"
    lines.append(
        f"{'total':<{width}}  {total:>7}  {killed:>6}  {sum(r.survived for r in reports):>8}"
        f"  {sum(r.equivalent for r in reports):>6}  {score:>5}"
        f"  {sum(r.seconds for r in reports):>8.2f}"
    )
    for r in reports:
        if r.error:
            lines.append(f"{r.id}: ERROR {r.error}")
        for s in r.survivors:
            mark = f"equivalent: {s['equivalent']}" if s["equivalent"] else "SURVIVED"
            lines.append(f"  {r.id} [{s['id']}] {s['description']}  ({mark})")
    return "\n".join(lines)


def summary(reports: list[ExerciseReport], seconds: float) -> dict:
    chapters: dict[str, dict] = {}
    for r in reports:
        chapter = chapters.setdefault(
            r.chapter, {"total": 0, "killed": 0, "survived": 0, "equivalent": 0, "seconds": 0.0}
        )
        for key in ("total", "killed", "survived", "equivalent"):
            chapter[key] += getattr(r, key)
        chapter["seconds"] = round(chapter["seconds"] + r.seconds, 3)
    failing = [
        s["id"] for r in reports for s in r.survivors if not s["equivalent"]
    ]
    return {
        "exercises": [asdict(r) for r in reports],
        "chapters": chapters,
        "totals": {
            "total": sum(r.total for r in reports),
            "killed": sum(r.killed for r in reports),
            "survived": sum(r.survived for r in reports),
            "equivalent": sum(r.equivalent for r in reports),
            "not_equivalent_survivors": failing,
            "errors": [r.id for r in reports if r.error],
        },
        "seconds": round(seconds, 3),
    }


def main(argv: list[str] | None = None, exercises: list | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Mutation testing of the exercise checks (see the module docstring)."
    )
    parser.add_argument("exercises", nargs="*",
                        help="exercise ids (tensors.outer_sum), names or chapters; default all")
    parser.add_argument("--equivalent", metavar="FILE",
                        help="JSON object: mutant id → why the mutant is equivalent")
    parser.add_argument("--json", metavar="OUT", help="write the full report as JSON")
    parser.add_argument("--operators", help=f"comma-separated subset of {', '.join(OPERATORS)}")
    args = parser.parse_args(argv)
    operators = None
    if args.operators:
        operators = [name.strip() for name in args.operators.split(",") if name.strip()]
        unknown = [name for name in operators if name not in OPERATORS]
        if unknown:
            parser.error(f"unknown operator: {', '.join(unknown)}")
    try:
        equivalent = load_equivalent(args.equivalent)
        chosen = exercises if exercises is not None else select_exercises(args.exercises)
    except (SystemExit, OSError, json.JSONDecodeError) as error:
        print(f"mutate_checks: {error}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    reports = []
    for exercise in chosen:
        reports.append(run_exercise(exercise, equivalent, operators))
        r = reports[-1]
        print(f"{r.id}: {r.killed}/{r.total} killed, {r.survived} survived ({r.seconds:.1f} s)",
              file=sys.stderr, flush=True)
    seconds = time.perf_counter() - start
    print(format_table(reports))
    result = summary(reports, seconds)
    print(f"wall time: {seconds:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    bad = result["totals"]["not_equivalent_survivors"] or result["totals"]["errors"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
