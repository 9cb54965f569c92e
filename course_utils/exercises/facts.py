"""Recording what a learner's code returned (probe side) and comparing records (judge side).

A record is plain data: ``{"kind": "tensor", "shape": [...], "dtype": "torch.float32",
"device": "cpu", "requires_grad": False, "values": ndarray}`` for a tensor, and
``{"kind": "list", "repr": "[1, 2]"}`` for anything else.
"""

from __future__ import annotations

import numpy as np

from course_utils.exercises.core import a_or_an
from course_utils.exercises.messages import Messages

_REPR_LIMIT = 80

_NOT_A_TENSOR = "{what} is {kind} ({repr}); expected a torch.Tensor{where}."
# The generic comparisons every check shares: their words, by the id a class report counts.
COMPARISON = Messages("comparison", {
    "where": " (on {on})",
    "at-index": " at index {index}",
    "returned-none": _NOT_A_TENSOR,
    "returned-numpy": _NOT_A_TENSOR,
    "returned-python-number": _NOT_A_TENSOR,
    "not-a-tensor": _NOT_A_TENSOR,
    "shape": "{what} has shape {got}; expected {expected}{where}.",
    "dtype": "{what} has dtype {got}; expected {expected}{where}.",
    "device": "{what} is on {got}; expected {expected}{where}.",
    "values": ("{what} has the right shape but wrong values{where}: {differ} of {size} differ; first{at}: "
               "got {got:.6g}, expected {expected:.6g}."),
    "not-a-module": ("{made} made {kind}, not an nn.Module. Write a class: `class {class_name}(nn.Module):` "
                     "with __init__ (call super().__init__() first) and forward."),
})


def value_facts(value) -> dict:
    """Describe ``value`` as plain data, reading a tensor's numbers without trusting its type."""
    import torch

    if isinstance(value, torch.Tensor):
        with _subclass_overrides_disabled():
            return _tensor_facts(value)
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    try:
        text = repr(value)
    except Exception:  # a learner's object whose repr is broken
        text = f"<{name}>"
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return {"kind": name, "repr": text}


def _subclass_overrides_disabled():
    """A tensor subclass could fake its numbers through ``__torch_function__``, and a
    ``TorchFunctionMode`` the learner's code left on would see every tensor a probe reads (and
    could change what it reads): read past both."""
    import torch

    return torch._C.DisableTorchFunction()


def _tensor_facts(value) -> dict:
    import torch

    tensor = torch.Tensor.detach(value)
    facts = {
        "kind": "tensor",
        "shape": [int(n) for n in tensor.shape],
        "dtype": str(tensor.dtype),
        "device": str(tensor.device),
        "requires_grad": bool(value.requires_grad),
    }
    if tensor.device.type != "meta":
        readable = tensor.to("cpu")
        if readable.dtype in (torch.bfloat16, torch.float16):
            readable = readable.float()
        facts["values"] = readable.numpy().copy()
    return facts


def given(value) -> dict:
    """An input a probe hands the learner's code, as plain data the judge can rebuild it from
    (``tensor_of``): the probe records what it gave, never what the right answer is."""
    return value_facts(value)


def tensor_of(facts: dict):
    """The tensor ``given`` (or ``value_facts``) recorded: same shape, dtype and values, on the
    CPU (a meta tensor stays on meta: it has no values), contiguous and not requiring grad."""
    import torch

    dtype = getattr(torch, facts["dtype"].removeprefix("torch."))
    if "values" not in facts:
        return torch.empty(facts["shape"], dtype=dtype, device="meta")
    return torch.from_numpy(np.array(facts["values"], copy=True)).to(dtype).reshape(facts["shape"])


def load_given(model, parameters, grads=None):
    """``model`` with the parameters (and ``.grad``, where given) that a probe recorded with
    ``given``, in order: how an ``expect`` starts the reference from the probe's state."""
    import torch

    with torch.no_grad():
        for index, (p, facts) in enumerate(zip(model.parameters(), parameters, strict=True)):
            p.copy_(tensor_of(facts))
            if grads is not None:
                p.grad = None if grads[index] is None else tensor_of(grads[index])
    return model


def shape_text(shape) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def not_a_tensor(kind: str) -> str:
    """The mistake id of a result that is no tensor at all, by what the function returned."""
    if kind == "NoneType":
        return "returned-none"
    if kind.startswith("numpy."):
        return "returned-numpy"
    if kind in ("int", "float", "bool"):
        return "returned-python-number"
    return "not-a-tensor"


def tensor_problem(
    got: dict,
    expected: dict,
    *,
    what: str = "your result",
    on: str | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    check_device: bool = True,
) -> str | None:
    """The first way ``got`` differs from ``expected`` (kind, shape, dtype, device, values)."""
    where = COMPARISON.text("where", on=on) if on else ""
    if got["kind"] != "tensor":
        return COMPARISON(not_a_tensor(got["kind"]), what=what, kind=a_or_an(got["kind"]), repr=got["repr"],
                          where=where)
    if got["shape"] != expected["shape"]:  # plain words: generic comparisons, counted by their kind
        return COMPARISON.text("shape", what=what, got=shape_text(got["shape"]),
                               expected=shape_text(expected["shape"]), where=where)
    if got["dtype"] != expected["dtype"]:
        return COMPARISON.text("dtype", what=what, got=got["dtype"], expected=expected["dtype"], where=where)
    if check_device and got["device"] != expected["device"]:
        return COMPARISON.text("device", what=what, got=got["device"], expected=expected["device"], where=where)
    if "values" in got and "values" in expected:
        return values_problem(got["values"], expected["values"], what=what, on=on, rtol=rtol, atol=atol)
    return None


def values_problem(got, expected, *, what="your result", on=None, rtol=1e-5, atol=1e-6):
    """None when the numbers agree within tolerance, else where they first differ."""
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    close = np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    index = tuple(int(i) for i in np.argwhere(~close)[0])
    return COMPARISON.text("values", what=what, where=COMPARISON.text("where", on=on) if on else "",
                           differ=int(np.count_nonzero(~close)), size=int(close.size),
                           at=COMPARISON.text("at-index", index=index) if index else "",
                           got=float(got[index]), expected=float(expected[index]))


def same_values(a, b, rtol=1e-5, atol=1e-6) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def not_a_module(made: str, kind: str, class_name: str) -> str:
    """The message for a class exercise whose constructor returned something else."""
    return COMPARISON.text("not-a-module", made=made, kind=kind, class_name=class_name)
