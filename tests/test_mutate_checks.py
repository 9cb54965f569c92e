"""tools/mutate_checks.py: each operator makes the mutants it should; weak checks are caught."""

import ast
import importlib.util
import json
import linecache
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from course_utils.exercises.core import Exercise, Function
from slow_machine import scaled

_PATH = Path(__file__).resolve().parent.parent / "tools" / "mutate_checks.py"
_spec = importlib.util.spec_from_file_location("mutate_checks", _PATH)
mc = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("mutate_checks", mc)
_spec.loader.exec_module(mc)


def _norm(source: str) -> str:
    return ast.unparse(ast.parse(textwrap.dedent(source)))


def mutants(source: str, operator: str) -> set[str]:
    return {m.source for m in mc.generate_mutants(textwrap.dedent(source), operators=[operator])}


def expect(source: str, operator: str, *expected: str):
    assert mutants(source, operator) == {_norm(e) for e in expected}


# -- each operator ---------------------------------------------------------------------------
def test_compare_flips_each_operator_of_a_comparison():
    expect(
        "def f(a, b):\n    return a < b == 3\n",
        "compare",
        "def f(a, b):\n    return a <= b == 3\n",
        "def f(a, b):\n    return a < b != 3\n",
    )
    expect("def f(a):\n    return a >= 0\n", "compare", "def f(a):\n    return a > 0\n")
    expect("def f(a):\n    return a in (1, 2)\n", "compare")  # `in` is left alone


def test_int_const_moves_by_one_including_dims_and_negative_dims():
    expect(
        "def f(x):\n    return x.sum(dim=1)\n",
        "int_const",
        "def f(x):\n    return x.sum(dim=2)\n",
        "def f(x):\n    return x.sum(dim=0)\n",
    )
    expect(
        "def f(x):\n    return x.reshape(-1)\n",
        "int_const",
        "def f(x):\n    return x.reshape(0)\n",
        "def f(x):\n    return x.reshape(-2)\n",
    )
    # floats and booleans are not integer constants
    expect("def f(x):\n    return x.to(1.0, copy=True)\n", "int_const")


def test_int_const_describes_the_expression_around_the_constant():
    (first, _) = mc.generate_mutants("def f(x):\n    return x.sum(dim=1)\n", "ex", 10, ["int_const"])
    assert (first.before, first.after, first.line) == ("dim=1", "dim=2", 11)


def test_drop_statement_never_empties_a_body_nor_drops_a_docstring():
    source = '''
    def f(x):
        """Doc."""
        y = x + 1
        if y:
            return y
        return x
    '''
    expect(
        source,
        "drop_statement",
        'def f(x):\n    """Doc."""\n    if y:\n        return y\n    return x\n',
        'def f(x):\n    """Doc."""\n    y = x + 1\n    return x\n',
        'def f(x):\n    """Doc."""\n    y = x + 1\n    if y:\n        return y\n',
    )


def test_swap_args_swaps_each_pair_of_positional_arguments_that_differ():
    expect(
        "def f(a, b):\n    return g(a, b, key=1)\n",
        "swap_args",
        "def f(a, b):\n    return g(b, a, key=1)\n",
    )
    expect("def f(a):\n    return g(a, a)\n", "swap_args")  # no change: no mutant
    assert len(mutants("def f(a, b, c):\n    return g(a, b, c)\n", "swap_args")) == 3


def test_sum_mean_swaps_methods_and_torch_functions():
    expect(
        "def f(x):\n    return x.sum() + torch.mean(x)\n",
        "sum_mean",
        "def f(x):\n    return x.mean() + torch.mean(x)\n",
        "def f(x):\n    return x.sum() + torch.sum(x)\n",
    )
    expect("def f(x):\n    return sum(x)\n", "sum_mean")  # the builtin has no mean


def test_remove_break_keeps_the_body_valid():
    expect(
        "def f(xs):\n    for x in xs:\n        if x:\n            break\n    return x\n",
        "remove_break",
        "def f(xs):\n    for x in xs:\n        if x:\n            pass\n    return x\n",
    )
    expect(
        "def f(xs):\n    for x in xs:\n        y = x\n        break\n    return y\n",
        "remove_break",
        "def f(xs):\n    for x in xs:\n        y = x\n    return y\n",
    )


def test_a_mutant_two_operators_make_is_counted_once_under_the_first():
    source = "def f(xs):\n    for x in xs:\n        y = x\n        break\n    return y\n"
    found = mc.generate_mutants(source)
    sources = [m.source for m in found]
    assert len(sources) == len(set(sources))
    removed = _norm("def f(xs):\n    for x in xs:\n        y = x\n    return y\n")
    assert [m.operator for m in found if m.source == removed] == ["remove_break"]


def test_inplace_both_ways_only_where_torch_has_the_other_method():
    expect(
        "def f(x, y):\n    x.add_(y)\n    return x.reshape(2).exp()\n",
        "inplace",
        "def f(x, y):\n    x.add(y)\n    return x.reshape(2).exp()\n",
        "def f(x, y):\n    x.add_(y)\n    return x.reshape(2).exp_()\n",
    )
    expect(
        "class A(B):\n    def __init__(self):\n        super().__init__()\n", "inplace"
    )  # dunders are not in-place methods


def test_bool_op_and_add_sub():
    expect("def f(a, b):\n    return a and b\n", "bool_op", "def f(a, b):\n    return a or b\n")
    expect(
        "def f(a, b):\n    a += b\n    return a - b\n",
        "add_sub",
        "def f(a, b):\n    a -= b\n    return a - b\n",
        "def f(a, b):\n    a += b\n    return a + b\n",
    )


def test_ids_are_stable_and_unique():
    source = "def f(x):\n    return x.sum(dim=1) + 1\n"
    first = [m.id for m in mc.generate_mutants(source, "ch.f", 1)]
    again = [m.id for m in mc.generate_mutants(source, "ch.f", 40)]  # moved in its file
    assert first == again and len(set(first)) == len(first)
    assert first != [m.id for m in mc.generate_mutants(source, "ch.g", 1)]


# -- a deliberately weak exercise ----------------------------------------------------------
def toy_count_up(n):
    i = 0
    while i < n:
        i += 1
    return i


def _weak_exercise():
    return Exercise(
        "toy_count_up",
        chapter="toy",
        title="Count up",
        expects=Function("toy_count_up", ("n",)),
        probe=lambda answer, run: run(answer, 3),  # one input: misses a start other than 0
        judge=lambda data: None if data == 3 else f"expected 3, got {data}",
        hints=("Count.",),
        reference=toy_count_up,
        time_limit_s=scaled(0.3),  # `i -= 1` and `i += 0` never end: the limit stops them
    )


def test_weak_exercise_has_survivors_and_exit_1_until_they_are_listed(tmp_path, capsys):
    torch.manual_seed(7)
    expected_next = torch.rand(2)
    torch.manual_seed(7)
    out = tmp_path / "report.json"
    assert mc.main(["--json", str(out)], exercises=[_weak_exercise()]) == 1
    report = json.loads(out.read_text())
    (entry,) = report["exercises"]
    assert entry["id"] == "toy.toy_count_up"
    assert entry["total"] == entry["killed"] + entry["survived"] > 0
    assert entry["killed_by"].get("failed", 0) >= 2  # the two endless loops were stopped
    survivors = entry["survivors"]
    assert {s["after"] for s in survivors} >= {"i = 1", "i = -1"}  # the start is never checked
    for s in survivors:
        assert set(s) >= {"id", "operator", "line", "before", "after", "description"}
        assert s["equivalent"] is None
    assert report["totals"]["not_equivalent_survivors"] == [s["id"] for s in survivors]
    assert report["chapters"]["toy"]["survived"] == len(survivors)
    printed = capsys.readouterr().out
    assert "toy.toy_count_up" in printed and survivors[0]["id"] in printed

    # the session is as it was: random stream, the module's names, linecache
    assert torch.equal(torch.rand(2), expected_next)
    assert globals()["toy_count_up"] is toy_count_up
    assert not [key for key in linecache.cache if str(key).startswith("<mutant")]
    assert torch.is_grad_enabled()

    equivalent = tmp_path / "equivalent.json"
    equivalent.write_text(json.dumps({s["id"]: "accepted for this test" for s in survivors}))
    assert mc.main(["--equivalent", str(equivalent)], exercises=[_weak_exercise()]) == 0


def test_usage_errors_exit_2(tmp_path, capsys):
    assert mc.main(["no_such_chapter.nothing"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert mc.main(["--equivalent", str(bad), "tensors.outer_sum"]) == 2


# -- real exercises, cheap ones --------------------------------------------------------------
@pytest.mark.parametrize("name", ["tensors.outer_sum", "tensors.checked_mse"])
def test_real_exercise_report_shape(name, tmp_path):
    out = tmp_path / "report.json"
    code = mc.main([name, "--json", str(out)])
    report = json.loads(out.read_text())
    (entry,) = report["exercises"]
    assert entry["id"] == name and entry["error"] is None
    assert entry["total"] == entry["killed"] + entry["survived"] > 0
    assert entry["score"] == round(entry["killed"] / entry["total"], 3)
    assert code == (1 if entry["survived"] else 0)
    assert set(report["totals"]) >= {"total", "killed", "survived", "equivalent"}
