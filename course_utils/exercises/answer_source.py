"""The answer's own source, read (never run): to check a rule the task states ("without a
Python loop"), or to name a mistake only when the answer really contains it."""

from __future__ import annotations

import ast
import inspect
import textwrap


def answer_nodes(answer) -> list:
    """The ast nodes of ``answer``'s own definition, or [] when its source cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(answer))
    except (OSError, TypeError):
        return []
    tree = None
    for attempt in (source, source.strip().rstrip(",;"), f"(\n{source}\n)"):
        try:
            tree = ast.parse(attempt)
            break
        except SyntaxError:
            continue
    if tree is None:
        return []
    name = getattr(answer, "__name__", "")
    if name == "<lambda>":
        return [node for node in ast.walk(tree) if isinstance(node, ast.Lambda)]
    return [
        node for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
    ][:1]



_RECORDING_OFF = {
    "no_grad": "torch.no_grad()",
    "inference_mode": "torch.inference_mode()",
}


def recording_switched_off(answer) -> list[str]:
    """The ways the answer's source switches autograd's recording off: ``torch.no_grad()``,
    ``torch.inference_mode()``, ``torch.set_grad_enabled(False)`` (block, decorator or call)."""
    found = []
    for node in answer_nodes(answer):
        for inner in ast.walk(node):
            if not isinstance(inner, ast.Call):
                continue
            name = getattr(inner.func, "attr", getattr(inner.func, "id", ""))
            if name in _RECORDING_OFF:
                found.append(_RECORDING_OFF[name])
            elif name == "set_grad_enabled" and inner.args and isinstance(inner.args[0], ast.Constant) \
                    and inner.args[0].value is False:
                found.append("torch.set_grad_enabled(False)")
    return sorted(set(found))


def returns_a_value(answer) -> bool | None:
    """Whether the answer's source has a ``return`` with a value (a lambda always has one);
    None when the source cannot be read. Tells "forgot return" from "returned a None"."""
    nodes = answer_nodes(answer)
    if not nodes:
        return None
    if isinstance(nodes[0], ast.Lambda):
        return True
    return any(
        isinstance(inner, ast.Return) and inner.value is not None
        and not (isinstance(inner.value, ast.Constant) and inner.value.value is None)
        for inner in ast.walk(nodes[0])
    )
