"""What chapter 01's exercises share: the chapter's name, seeded generators and dtype names,
reading the answer's own source (its loops, its calls), and whether the caller's inputs
were left as they were."""

from __future__ import annotations

import ast

import torch

from course_utils.exercises.answer_source import answer_nodes as _answer_nodes
from course_utils.exercises.core import Mistake
from course_utils.exercises.facts import same_values, shape_text
from course_utils.exercises.messages import Messages

CHAPTER = "tensors"


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


# --------------------------------------------------------------------------------------------
# The answer's own source: read (never run) to check a rule the task states ("without a Python
# loop"), or to name a mistake only when the answer really contains it.
# --------------------------------------------------------------------------------------------
_LOOP_NODES = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
               ast.GeneratorExp)


def _loops_in(answer) -> list[str]:
    """The Python loops (for, while, comprehensions) written in the answer's own source."""
    found = []
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            if isinstance(inner, _LOOP_NODES):
                text = ast.unparse(inner).splitlines()[0]
                found.append(text if len(text) <= 70 else text[:67] + "...")
    return found


def _calls_in(answer) -> list[str]:
    """Names of the functions and methods the answer's own source calls (``squeeze``, ...)."""
    names = []
    for node in _answer_nodes(answer):
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call):
                func = inner.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name:
                    names.append(name + ("()" if not inner.args and not inner.keywords else ""))
    return names


def _left_as_it_was(given, kept) -> bool:
    """Whether the caller's tensor ``given`` still equals ``kept``, a copy made before the call.

    A second call on the same inputs only makes sense when the first call left them alone
    (a changed input is reported from the record of the first call).
    """
    return (
        given.shape == kept.shape and given.dtype == kept.dtype and given.device == kept.device
        and (given.device.type == "meta" or bool(torch.equal(given, kept)))
    )


# What the chapter's shared helpers say, by id: a change to the caller's tensor, in two wordings.
COMMON = Messages("tensors", {
    "changed-input-in-place": (
        "Your function changed its input {name} in place ({on}): the caller's {name} is {after} afterwards "
        "instead of {before}. Methods ending in an underscore (squeeze_, t_, ...) and assignments to "
        "{name}.data change the caller's own tensor; compute a new tensor and leave {name} as it was."),
    "changed-input-numbers": (
        "Your function changed the numbers in its input {name} ({on}). An in-place operation (sub_, -=, ...) "
        "on {name} or on a view of it changes the caller's tensor; compute a new tensor and leave {name} "
        "as it was."),
})


def _input_changed(before: dict, after: dict, name: str, on: str) -> str | None:
    """The message when the learner's function changed the caller's tensor ``name``.

    ``before`` and ``after`` are ``value_facts`` of the tensor before and after the call.
    """
    if after["kind"] != "tensor":  # cannot happen to a tensor: only its attributes can change
        return None
    if after["shape"] != before["shape"] or after["dtype"] != before["dtype"] or (
        after["device"] != before["device"]
    ):
        def looks(facts):
            device = f" on {facts['device']}" if after["device"] != before["device"] else ""
            return f"{shape_text(facts['shape'])} {_dtype_name(facts['dtype'])}{device}"

        return COMMON("changed-input-in-place", name=name, on=on, after=looks(after), before=looks(before))
    if "values" in after and "values" in before and not same_values(
        after["values"], before["values"], rtol=0, atol=0
    ):
        # the same mistake, its numbers changed rather than its shape: another wording, one id
        return Mistake("changed-input-in-place", COMMON.text("changed-input-numbers", name=name, on=on))
    return None
