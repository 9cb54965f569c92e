"""What chapter 03's exercises share: the chapter's name, torch's one-time set-up, facts about a
learner's module (its hidden layers, devices, linears), runs on ``meta`` where a GPU would be, and
what a loss that is not one number shows."""

from __future__ import annotations

import torch
from torch import nn

from course_utils.exercises.core import a_or_an
from course_utils.exercises.running import LearnerRaised, set_up_torch_once
from course_utils.exercises.facts import shape_text, value_facts

CHAPTER = "models"

# The checks run models on `meta`, which stands in for a GPU: torch's one-time set-up for it is
# paid here, in the notebook's import cell, not by the first check.
set_up_torch_once()


def _input(shape, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _module_kind(value) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _hidden_layers(model: nn.Module) -> list[str]:
    """Attributes holding layers in a plain list, tuple or dict, where PyTorch never looks."""
    registered = {id(m) for m in model.modules()}
    found = []
    for name, value in vars(model).items():
        if not isinstance(value, (list, tuple, dict)):
            continue
        items = list(value.values()) if isinstance(value, dict) else list(value)
        hidden = [v for v in items if isinstance(v, nn.Module) and id(v) not in registered]
        if hidden:
            found.append(f"self.{name} (a plain {type(value).__name__} of {len(hidden)} layers)")
    return found


def _is_lazy(model: nn.Module) -> bool:
    return any(isinstance(p, nn.parameter.UninitializedParameter) for p in model.parameters())


def _parameter_devices(model: nn.Module) -> list[str]:
    return sorted({str(p.device) for p in model.parameters()} | {str(b.device) for b in model.buffers()})


# The error notes every module exercise of the chapter has, by note id: the clue each looks for
# in an exception's message, and its words (each exercise's table holds them: ``NOTE_TEXTS``).
NOTE_CLUES = {
    # the exception a subclass raises when it assigns a layer before nn.Module has set itself up
    "layer-before-super-init": "cannot assign module before Module.__init__() call",
    # _on_meta's words after a copy out of a device (.tolist()), or NumPy's refusal, as on a GPU
    "copied-out-of-device": "[copied out of its device",
    "tensor-made-on-cpu": "is not on the expected device",
}
NOTE_TEXTS = {
    "layer-before-super-init": "super().__init__() must run before the first layer is assigned to self.",
    "copied-out-of-device": (
        "your code copies a tensor out of its device, to Python numbers (.tolist()) or to NumPy "
        "(.numpy()), and makes a new tensor from the copy: torch.tensor(...) and "
        "torch.from_numpy(...) put it on the CPU whatever device the inputs are on, so on a GPU it "
        "meets them on another device and raises (and .numpy() of a GPU tensor raises at once), "
        "as here on meta, a stand-in for a GPU. Convert the tensor where it is, with tensor "
        "operations (.to(dtype), indexing), never through a Python list or NumPy."
    ),
    "tensor-made-on-cpu": (
        "a tensor on the CPU inside your code (made by torch.zeros(...), torch.empty(...) or "
        "torch.tensor(...) without device=, or moved there by .cpu() / .to('cpu')) while the inputs "
        "are on another device: keep it where the inputs are (torch.zeros_like(x), device=x.device)."
    ),
}
_META = "moved with .to('meta') (a stand-in for a GPU) and called on a batch there"


def _linears(model: nn.Module) -> list[nn.Linear]:
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


def _shaped_as(call) -> bool:
    """Whether forward's output has the batch's shape (a module probe's record of one call, the
    batch under "given"), and left the batch as it was: a block of width -> width layers."""
    got = call["got"]
    return got["kind"] == "tensor" and got["shape"] == call["given"]["x"]["shape"] and not call["x_changed"]


_DEVICE_MISMATCH = ("is not on the expected device", "Expected all tensors to be on the same device")


class _CopiesToTheCpu(torch.overrides.TorchFunctionMode):
    """Lets a meta tensor be copied to the CPU as a GPU tensor can be: ``.cpu()``, ``.to('cpu')``
    and ``cpu_tensor.copy_(meta_tensor)`` give CPU tensors of the right shape (zeros: meta has no
    values), ``.tolist()`` a Python list of zeros. Meta refuses such copies outright, which would
    hide what a GPU shows next: the copy lives on the CPU, so it meets the model's tensors on
    another device, or leaves forward's output there. ``copied_out`` says whether a ``.tolist()``
    happened, for the words of the error that may follow."""

    copied_out = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        source = args[0] if args else None
        if isinstance(source, torch.Tensor) and source.device.type == "meta":
            if func is torch.Tensor.tolist:
                self.copied_out = True
                return torch.zeros(source.shape, dtype=source.dtype).tolist()
            if func is torch.Tensor.cpu:
                return torch.zeros(source.shape, dtype=source.dtype)
            if func is torch.Tensor.to:
                try:
                    device, dtype, _, _ = torch._C._nn._parse_to(*args[1:], **kwargs)
                except Exception:  # noqa: BLE001 - torch raises the learner's own error below
                    device = dtype = None
                if device is not None and device.type == "cpu":
                    return torch.zeros(source.shape, dtype=dtype or source.dtype)
        if (func is torch.Tensor.copy_ and isinstance(source, torch.Tensor)
                and source.device.type == "cpu" and len(args) > 1
                and isinstance(args[1], torch.Tensor) and args[1].device.type == "meta"):
            return source  # the copy's values are unknown on meta; its device is what matters
        return func(*args, **kwargs)


# NumPy's refusal of a tensor that is not on the CPU: meta says it as a GPU does
_NUMPY_REFUSED = "device type tensor to numpy"



def _on_meta(call):
    """Run ``call`` on meta tensors. Meta tensors have shapes but no values, so code that reads a
    value (.item(), indexing with a tensor) fails there and would work on a GPU: that is not judged
    (None). A copy to the CPU (.cpu(), .to('cpu'), .tolist()) is made as a GPU would make it (see
    _CopiesToTheCpu). A tensor left on the CPU while the inputs are elsewhere is a real bug, and
    so is .numpy(), which a GPU tensor refuses as meta does."""
    mode = _CopiesToTheCpu()
    try:
        with mode:
            result = call()
        return value_facts(result)
    except LearnerRaised as raised:
        text = str(raised.error)
        if _NUMPY_REFUSED in text:
            raise LearnerRaised(_reworded(raised.error, text + " [copied out of its device by .numpy()]"), raised.on) from None
        if any(clue in text for clue in _DEVICE_MISMATCH):
            if mode.copied_out:
                raise LearnerRaised(_reworded(raised.error, text + " [copied out of its device by .tolist()]"), raised.on) from None
            raise
        return None


def _reworded(error: BaseException, text: str) -> BaseException:
    """``error`` with ``text`` for its words, raised from where it was (its traceback kept, for the
    line that raised)."""
    try:
        new = type(error)(text)
    except Exception:  # noqa: BLE001 - an exception type that takes other arguments
        new = RuntimeError(text)
    return new.with_traceback(error.__traceback__)


def _device_run(model, x, run, on):
    """Move the model and a batch to ``meta`` (where a GPU would be) and record the output."""
    run(model.to, "meta", on=on)
    return _on_meta(lambda: run(model, x.to("meta"), on=on))


def _module_batches(model, run, case, *, batch: int, seed: int):
    """The opening both module probes share: record what kind of module came back, its hidden
    layers and devices, and make the batches it is called on (setting up a lazy layer on the
    first). None when the case is already decided: not a module, or parameters not on the CPU.
    """
    if not isinstance(model, nn.Module):
        return None
    case["hidden_layers"] = _hidden_layers(model)
    case["devices"] = _parameter_devices(model)
    if case["devices"] not in ([], ["cpu"]):
        return None
    width, on = case["width"], case["on"]
    # the last batch has the first one's shape and new values: a cache cannot pass
    shapes = [(batch, width), (1, width), (2, 3, width), (batch, width)]
    xs = [_input(shape, seed=seed + i) for i, shape in enumerate(shapes)]
    if _is_lazy(model):  # a lazy layer learns its input size from a first batch
        run(model, xs[0].clone(), on=f"{on} called on a first batch of shape ({batch}, {width})")
    return xs


# What both loss exercises say when the result cannot be a loss (each table adds its own
# "not-reduced", which says how to reduce).
LOSS_TEXTS = {
    "tracks-callers-logits": (
        "Your function switched on requires_grad of the caller's logits (on {on}): "
        "they come from the model, which decides what is tracked; from then on every "
        "operation on them is recorded. Leave the inputs as they are."
    ),
    "returned-none": "Your function returned None (on {on}); end it with `return`.",
    "not-a-tensor": (
        "Your function returned {kind} ({got_repr}, on {on}); return the loss "
        "as a 0-d tensor, so loss.backward() works."
    ),
    "loss-off-device": (
        "On logits and targets on meta (a stand-in for a GPU), your function returned "
        "{kind_with_article}{where}; expected a 0-d tensor on the logits' device."
    ),
    "changed-settings": (
        "Your function changed {settings} (on {on}) and left it changed: a loss is called inside "
        "the caller's loop, which set these for itself. Leave the session's settings as they were."
    ),
}


def _not_a_loss(case, got, on, messages) -> str | None:
    """What both loss exercises say when the result cannot be a loss to call backward() on."""
    if case.get("logits_tracked"):
        return messages("tracks-callers-logits", on=on)
    if got["kind"] == "NoneType":
        return messages("returned-none", on=on)
    if got["kind"] != "tensor":
        return messages("not-a-tensor", kind=got["kind"], got_repr=got["repr"], on=on)
    if got["shape"] != []:
        return messages("not-reduced", shape=shape_text(got["shape"]), on=on)
    if case.get("settings_changed"):
        return messages("changed-settings", settings=" and ".join(case["settings_changed"]), on=on)
    return None


def _loss_on_meta_problem(meta, messages) -> str | None:
    """A loss computed from logits and targets on ``meta`` must be a 0-d tensor there too."""
    if meta is not None and (meta["kind"] != "tensor" or meta["device"] != "meta" or meta["shape"] != []):
        return messages("loss-off-device", kind_with_article=a_or_an(meta["kind"]),
                        where=" on " + meta["device"] if "device" in meta else "")
    return None


def narrower_or_other(got_dtype: str, logits_dtype: str) -> bool:
    """Whether a loss of ``got_dtype`` loses what ``logits_dtype`` holds: another dtype that is
    not a wider float (float64 for float32 logits is only more precise)."""
    if got_dtype == logits_dtype:
        return False
    try:
        got, logits = getattr(torch, got_dtype.removeprefix("torch.")), getattr(torch, logits_dtype.removeprefix("torch."))
    except AttributeError:
        return True
    if not (got.is_floating_point and logits.is_floating_point):
        return True
    return not (torch.finfo(got).bits > torch.finfo(logits).bits and torch.finfo(got).max >= torch.finfo(logits).max)


# Per-dtype tolerance of a loss (rtol, atol): a right answer computed in another order rounds
# differently, by about the dtype's step.
LOSS_TOLERANCE = {"torch.float16": (2e-3, 2e-3), "torch.bfloat16": (1.6e-2, 1.6e-2),
                  "torch.float32": (1e-4, 1e-5), "torch.float64": (1e-4, 1e-5)}
