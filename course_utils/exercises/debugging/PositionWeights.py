"""Chapter 06, D3: a tensor created inside forward must follow the input (the exercise
``PositionWeights``).

Engine: applies edges.edge_tensor (float64's edges that weights in (0, 1] keep finite) and
per-dtype tolerances; hand-written because the answer is a module class whose device and dtype
are the task (moved to meta, bfloat16 and float64 with .to(), a second call of another length,
gradients through x), with named mistakes read from each move.
"""

from __future__ import annotations

import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.debugging.common import CHAPTER, _kind, _generator
from course_utils.exercises.running import judge_side
from course_utils.exercises.edges import Allowed, edge_tensor
from course_utils.exercises.facts import given, not_a_module, same_values, shape_text, tensor_of, value_facts
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.messages import Messages


MESSAGES = Messages("PositionWeights", {
    "passed": (
        "Correct: the weights are made where the input lives, in its dtype, so the module works on "
        "the CPU, on a GPU, on meta and in half precision alike."),
    "hint-1": (
        "torch.arange(...) without device= makes a CPU tensor, even when x is on a GPU (or on meta). "
        "Every factory function (arange, zeros, ones, tensor, linspace) takes device= and dtype=."),
    "hint-2": (
        "Take both from the input: device=x.device, dtype=x.dtype. (A fixed tensor made in __init__ "
        "works too, if you register it with self.register_buffer so .to() moves it.)"),
    "hint-3": (
        "steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype); return x * (steps / "
        "length)[:, None]"),
    "tensor-made-off-device": (
        "A tensor made inside forward without device= is created on the default device (the CPU "
        "unless the program set another), with a dtype of its own, wherever the input is; on a GPU "
        'this is the classic "Expected all tensors to be on the same device". Create it where the '
        "input lives: torch.arange(..., device=x.device, dtype=x.dtype)."),
    "operands-on-two-devices": (
        "A tensor made inside forward without device= is created on the default device (the CPU "
        "unless the program set another), with a dtype of its own, wherever the input is; on a GPU "
        'this is the classic "Expected all tensors to be on the same device". Create it where the '
        "input lives: torch.arange(..., device=x.device, dtype=x.dtype)."),
    "not-a-tensor": "forward returned {kind} (on {on}); return the weighted tensor, shaped like x.",
    "in-place-on-input": (
        "forward changed its input x in place (on {on}): the caller's tensor now holds the weighted "
        "values. Return a new tensor, x * weights, instead of x.mul_(...) or x *= ...."),
    "hard-coded-device": (
        "forward's output is on {device} for an input on the CPU (on {on}): keep the output where the"
        " input is; make your tensors on x.device."),
    "wrong-output-shape": (
        "forward's output has shape {shape} (on {on}); expected {shape2}, the input's shape: step t "
        "of each sequence is multiplied by (t + 1) / length."),
    "wrong-weights": (
        "forward's output has the right shape but wrong values (on {on}): step t (counting from 0) of"
        " each sequence is multiplied by (t + 1) / length, with length = x.shape[1], the same weight "
        "for every feature."),
    "cached-weights": (
        "{raised} (on {on}). The first call worked: each call must make the weights for its own "
        "input's length x.shape[1] (and device and dtype), not reuse what an earlier call made."),
    "cached-weights-second-length": (
        "On a second call with another length the output is wrong (on {on}): shape {shape}, expected "
        "{expected_shape} with weights (t + 1) / 4. The first call was right: make the weights from "
        "each call's own x.shape[1], not from what an earlier call kept."),
    "cached-weights-on-meta": (
        "{raised} (on {on}). A new module moved to meta works on the same input: this one kept "
        "tensors from its earlier calls on the CPU (a cache of weights), and .to() moves parameters "
        "and buffers only. Make the weights in every call from x (device=x.device, dtype=x.dtype), or "
        "keep them in a registered buffer."),
    "cached-weights-in-float32": (
        "forward's output is {dtype} for a {want} input (on {on}), although a new module moved to "
        "{want} gives {want}: this one kept tensors from its earlier call in float32 (a cache of "
        "weights), and .to() converts parameters and buffers only. Make the weights in every call "
        "from x (device=x.device, dtype=x.dtype), or keep them in a registered buffer."),
    "tensor-made-off-device": (
        "A tensor made inside forward without device= is created on the default device (the CPU "
        "unless the program set another), with a dtype of its own, wherever the input is; on a GPU "
        "this is the classic \"Expected all tensors to be on the same device\". Create it where the "
        "input lives: torch.arange(..., device=x.device, dtype=x.dtype)."),
    "operands-on-two-devices": (
        "A tensor made inside forward without device= is created on the default device (the CPU "
        "unless the program set another), with a dtype of its own, wherever the input is; on a GPU "
        "this is the classic \"Expected all tensors to be on the same device\". Create it where the "
        "input lives: torch.arange(..., device=x.device, dtype=x.dtype)."),
    "view-of-non-contiguous": (
        "the check's input is non-contiguous (a transposed tensor, as x.transpose(1, 2) or "
        "permute() give): .view() needs a contiguous memory layout; use .reshape(), which copies "
        "only when it must."),
    "moved-to-cpu-in-forward": (
        "the check moves your module to the meta device, which has no values: do not move tensors "
        "to the CPU (.cpu(), .item(), .tolist()) inside forward; keep everything on x.device."),
    "cut-from-autograd": (
        "forward's output does not require grad although x does (on {on}): it is cut off from "
        "autograd, so no gradient reaches the layers before it. Compute it with torch operations on x"
        " itself (no .detach(), torch.no_grad() or NumPy inside forward)."),
    "grad-not-through-x": (
        "After out.sum().backward(), x.grad is not the weights (t + 1) / length (on {on}): the output"
        " must be x times the weights, computed from x by autograd."),
    "no-device-in-forward": (
        "{raised} (on {on}). A tensor made inside forward without device= is created on the default "
        "device (the CPU unless the program set another), with a dtype of its own, wherever the "
        "input is; on a GPU this is the classic \"Expected all tensors to be on the same device\". "
        "Create it where the input lives: torch.arange(..., device=x.device, dtype=x.dtype)."),
    "moved-input-to-weights": (
        "forward's output is on {device} although the module and its input are on meta (on {on}): "
        "never move the input to fit a tensor you made; make the tensor on x.device."),
    "wrong-meta-output": (
        "forward's output has shape {shape} and dtype {value} (on {on}); expected (2, 5, 4) and "
        "float32, the input's."),
    "trainable-weights": (
        "Right outputs, but your module keeps its weights as trainable parameters ({trainable}, "
        "requires_grad=True): an optimizer built with model.parameters() would change them in "
        "training, and the module would stop weighting step t by (t + 1) / length. Keep fixed weights"
        " out of training: register_buffer, an nn.Parameter with requires_grad=False, or make them in"
        " forward."),
    "plain-tensor-attribute": (
        "{raised} (on {on}). {plain_tensors} is a plain tensor attribute: module.to() moves "
        "parameters and buffers, and nothing else. Register it with self.register_buffer(name, "
        "tensor), or create the tensor in forward with device=x.device."),
    "no-dtype-in-forward": (
        "forward's output is {value} for a {want} input (on {on}): the weights you create have a "
        "dtype of their own, and type promotion gives the product theirs or the input's, whichever is"
        " wider; in mixed precision every layer after this one would run in float32 and the memory "
        "doubles, without an error. Create them with dtype=x.dtype (or .to(x.dtype))."),
    "wrong-values-for-dtype": "forward's output has wrong values for a {want} input (on {on}).",
    "weights-in-float32": (
        "forward's output is float64 but has only float32's precision (on {on}): your weights were "
        "worked out in float32 (1/3 becomes 0.3333333432674408, not 0.3333333333333333) and cast "
        "to float64 afterwards, so each value is about 1e-8 off. Make the weights in the input's "
        "dtype before dividing: torch.arange(1, length + 1, device=x.device, dtype=x.dtype) / "
        "length (or steps.to(x.dtype) / length)."),
})


# ============================================================================================
# D3 — a tensor created inside forward must follow the input
# ============================================================================================
class PositionWeights(nn.Module):
    def __init__(self, max_length):
        super().__init__()
        self.max_length = max_length

    def forward(self, x):  # x: (batch, length, features)
        length = x.shape[1]
        steps = torch.arange(1, length + 1, device=x.device, dtype=x.dtype)
        return x * (steps / length)[:, None]


def _plain_tensor_attributes(module: nn.Module) -> list[str]:
    """Tensors kept as plain attributes: ``.to()`` moves parameters and buffers, not these."""
    found = []
    for name, sub in module.named_modules():
        for attribute, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                found.append(f"self.{name + '.' if name else ''}{attribute}")
    return found


def _raised_text(raised: LearnerRaised) -> str:
    lines = str(raised.error).strip().splitlines()
    return f"{type(raised.error).__name__}: {lines[0] if lines else ''}"


def _probe_position_weights(answer, run):
    """What the answer's module gave on each input, and the inputs themselves ("given"): never
    what a right module gives (``_expect_position_weights`` runs the reference on them, on the
    judge's side)."""
    cases = []
    max_length = 16
    made = f"PositionWeights({max_length})"
    # 1. The CPU, float32, a non-contiguous input (a transposed batch): the values, and x unchanged.
    on = "a float32 batch of shape (2, 5, 3) on the CPU (a transposed, non-contiguous tensor)"
    module = run(answer, max_length, on=made)
    if not isinstance(module, nn.Module):
        return [{"on": on, "not_a_module": _kind(module)}]
    x = torch.randn(2, 3, 5, generator=_generator(0)).transpose(1, 2)
    x_in = x.clone()  # clone keeps x's strides: non-contiguous too
    got = run(module, x_in, on=on)
    cases.append({
        "on": on, "got": value_facts(got), "given": {"x": given(x)},
        "changed_input": not torch.equal(x_in, x),
        # Parameters an optimizer given model.parameters() would train: weights that drift.
        "trainable": [name for name, p in module.named_parameters() if p.requires_grad],
    })
    # 2. The same module again, on another length, with an input that requires grad.
    on = ("a second call of the same module, on a float32 batch of shape (3, 4, 2) that "
          "requires grad")
    x = torch.randn(3, 4, 2, generator=_generator(2))
    x_in = x.clone().requires_grad_(True)
    case = {"on": on, "given": {"x": given(x)}}
    try:
        got = run(module, x_in, on=on)
        case["got"] = value_facts(got)
        if isinstance(got, torch.Tensor) and got.requires_grad and got.is_floating_point():
            run(lambda: torch.Tensor.sum(got).backward(), on=f"out.sum().backward() after {on}")
            case["grad"] = None if x_in.grad is None else x_in.grad.detach().numpy().copy()
    except LearnerRaised as raised:
        if isinstance(raised.error, NotImplementedError) and not str(raised.error):
            raise
        case["raised"] = _raised_text(raised)
    cases.append(case)
    # 3. That module (called twice already) and its input moved to the meta device, as to a GPU,
    # with the first call's length: weights kept from the CPU calls (a cache) show here.
    on = ("PositionWeights(16), called twice on the CPU, then .to('meta'), on a batch of shape "
          "(2, 5, 4) on the meta device")
    module = run(lambda: module.to("meta"), on=f"{made}.to('meta')")
    case = {"on": on, "plain_tensors": _plain_tensor_attributes(module)}
    try:
        got = run(module, torch.empty(2, 5, 4, device="meta"), on=on)
        case["got"] = value_facts(got)
    except LearnerRaised as raised:
        if isinstance(raised.error, NotImplementedError) and not str(raised.error):
            raise
        case["raised"] = _raised_text(raised)
        # Does a new module, never called on the CPU, work on meta? Then the moved one kept
        # something from its earlier calls.
        try:
            fresh = run(answer, max_length, on=made)
            fresh = run(lambda: fresh.to("meta"), on=f"{made}.to('meta')")
            fresh_got = run(fresh, torch.empty(2, 5, 4, device="meta"), on=f"a new {made}.to('meta')")
            case["fresh_works"] = isinstance(fresh_got, torch.Tensor) and fresh_got.device.type == "meta"
        except LearnerRaised:
            case["fresh_works"] = False
    cases.append(case)
    # 4. A new module, called once in float32, then it and its input in bfloat16, as in mixed
    # precision: weights kept from the float32 call (a cache) show here.
    on = ("PositionWeights(16), called once on a float32 batch, then .to(torch.bfloat16), on a "
          "bfloat16 batch of shape (3, 6, 2)")
    module = run(answer, max_length, on=made)
    x = torch.randn(3, 6, 2, generator=_generator(1))
    run(module, x.clone(), on="PositionWeights(16) on a float32 batch of shape (3, 6, 2) on the CPU")
    module = run(lambda: module.to(torch.bfloat16), on=f"{made}.to(torch.bfloat16)")
    x = x.to(torch.bfloat16)
    got = run(module, x.clone(), on=on)
    case = {"on": on, "got": value_facts(got), "given": {"x": given(x)}}
    if isinstance(got, torch.Tensor) and got.dtype != torch.bfloat16:
        # Does a new module, never called in float32, give bfloat16? Then this one kept weights.
        try:
            fresh = run(answer, max_length, on=made)
            fresh = run(lambda: fresh.to(torch.bfloat16), on=f"{made}.to(torch.bfloat16)")
            fresh_got = run(fresh, x.clone(), on=f"a new {made}.to(torch.bfloat16)")
            case["fresh_works"] = isinstance(fresh_got, torch.Tensor) and fresh_got.dtype == torch.bfloat16
        except LearnerRaised:
            case["fresh_works"] = False
    cases.append(case)
    # 5. A new module in float64, on a batch of one.
    on = "PositionWeights(16).to(torch.float64) on a float64 batch of one, shape (1, 9, 1)"
    module = run(answer, max_length, on=made)
    module = run(lambda: module.to(torch.float64), on=f"{made}.to(torch.float64)")
    x = torch.randn(1, 9, 1, generator=_generator(3), dtype=torch.float64)
    got = run(module, x.clone(), on=on)
    cases.append({"on": on, "got": value_facts(got), "given": {"x": given(x)}})
    # 6. The float64 edges the weights (at most 1) keep finite: a product computed in float32
    # turns 2.7e154 into inf.
    on = ("PositionWeights(16).to(torch.float64) on a float64 batch of the dtype's edges (±0, "
          "subnormals, 1 and the next float64, 2.7e154), shape (2, 7, 3)")
    module = run(answer, max_length, on=made)
    module = run(lambda: module.to(torch.float64), on=f"{made}.to(torch.float64)")
    x = edge_tensor((2, 7, 3), torch.float64, _FLOAT64_EDGES)
    got = run(module, x.clone(), on=on)
    cases.append({"on": on, "got": value_facts(got), "given": {"x": given(x)}})
    return cases


# The edges of float64 a product with weights in (0, 1] keeps finite, whatever its order.
_FLOAT64_EDGES = Allowed(finite=True, low=-1e300, high=1e300)
# How far a right answer's output may be from the reference's, by the input's dtype (relative;
# the absolute part only forgives a subnormal's last step). Weights made in the input's dtype
# agree to a few of its steps however they are written (arange, linspace, cumsum, x * steps /
# length); weights worked out in float32 and cast to float64 afterwards are 1e-8 off.
_TOLERANCE = {"bfloat16": (2e-2, 2e-2), "float16": (1e-3, 1e-3), "float32": (1e-6, 1e-6),
              "float64": (1e-12, 1e-300)}


def _expect_position_weights(cases):
    """What the reference module gives on each recorded input (computed in float64, the
    values rounded once to the first input's float32), and the gradient out.sum() sends back
    to x; the output's dtype is the input's."""
    if "not_a_module" in cases[0]:
        return cases
    with judge_side():
        module = PositionWeights.reference(16)
        first = cases[0]
        x = tensor_of(first["given"]["x"])
        first["expected"] = value_facts(module(x.double()).float())
        again = cases[1]
        x = tensor_of(again["given"]["x"]).double().requires_grad_(True)
        out = module(x)
        out.sum().backward()
        again["expected"] = value_facts(out.detach())
        again["expected_grad"] = x.grad.numpy().copy()
        for case in cases[3:]:
            x = tensor_of(case["given"]["x"])
            case["expected_values"] = module(x.double()).detach().numpy().copy()
            case["expected_dtype"] = str(x.dtype)
            if x.dtype == torch.float64:
                # The named mistake's output: weights made in float32, cast to float64 after.
                length = x.shape[1]
                weights = (torch.arange(1, length + 1) / length).double()
                case["float32_weights_values"] = (x * weights[:, None]).numpy().copy()
    return cases


def _not_a_tensor(got, on) -> str:
    return MESSAGES("not-a-tensor", kind=got['kind'], on=on)


def _judge_position_weights(cases):
    first = cases[0]
    if "not_a_module" in first:
        return Mistake("not-a-module", not_a_module("PositionWeights(16)", first["not_a_module"], "PositionWeights"))
    on, got, expected = first["on"], first["got"], first["expected"]
    if first["changed_input"]:
        return MESSAGES("in-place-on-input", on=on)
    if got["kind"] != "tensor":
        return _not_a_tensor(got, on)
    if got["device"] != "cpu":
        return MESSAGES("hard-coded-device", device=got['device'], on=on)
    if got["shape"] != expected["shape"]:
        return MESSAGES("wrong-output-shape",
                        shape=shape_text(got['shape']),
                        on=on,
                        shape2=shape_text(expected['shape']))
    if not same_values(got["values"], expected["values"], rtol=1e-5, atol=1e-6):
        return MESSAGES("wrong-weights", on=on)
    again = cases[1]
    on = again["on"]
    if "raised" in again:
        return MESSAGES("cached-weights", raised=again['raised'], on=on)
    got = again["got"]
    if got["kind"] != "tensor":
        return _not_a_tensor(got, on)
    if got["shape"] != again["expected"]["shape"] or "values" not in got or not same_values(
        got["values"], again["expected"]["values"], rtol=1e-5, atol=1e-6
    ):
        return Mistake("cached-weights", MESSAGES.text(
            "cached-weights-second-length", on=on, shape=shape_text(got['shape']),
            expected_shape=shape_text(again['expected']['shape'])))
    if not got["requires_grad"]:
        return MESSAGES("cut-from-autograd", on=on)
    if again.get("grad") is None or not same_values(again["grad"], again["expected_grad"], rtol=1e-5, atol=1e-6):
        return MESSAGES("grad-not-through-x", on=on)
    meta = cases[2]
    on = meta["on"]
    if "raised" in meta:
        if meta["plain_tensors"]:
            return MESSAGES("plain-tensor-attribute",
                            raised=meta['raised'],
                            on=on,
                            plain_tensors=meta['plain_tensors'][0])
        if meta.get("fresh_works"):
            return Mistake("cached-weights", MESSAGES.text("cached-weights-on-meta", raised=meta['raised'], on=on))
        return MESSAGES("no-device-in-forward", raised=meta['raised'], on=on)
    got = meta["got"]
    if got["kind"] != "tensor":
        return _not_a_tensor(got, on)
    if got["device"] != "meta":
        return MESSAGES("moved-input-to-weights", device=got['device'], on=on)
    if got["shape"] != [2, 5, 4] or got["dtype"] != "torch.float32":
        return MESSAGES("wrong-meta-output",
                        shape=shape_text(got['shape']),
                        value=got['dtype'].removeprefix('torch.'),
                        on=on)
    for case in cases[3:]:
        on, got = case["on"], case["got"]
        if got["kind"] != "tensor":
            return _not_a_tensor(got, on)
        want = case["expected_dtype"].removeprefix("torch.")
        if got["dtype"] != case["expected_dtype"] and case.get("fresh_works"):
            return Mistake("cached-weights", MESSAGES.text(
                "cached-weights-in-float32", dtype=got['dtype'].removeprefix('torch.'), want=want, on=on))
        if got["dtype"] != case["expected_dtype"]:
            return MESSAGES("no-dtype-in-forward",
                            value=got['dtype'].removeprefix('torch.'),
                            want=want,
                            on=on)
        rtol, atol = _TOLERANCE.get(want, (1e-6, 1e-6))
        if got["shape"] != list(case["expected_values"].shape) or "values" not in got or not same_values(
            got["values"], case["expected_values"], rtol=rtol, atol=atol
        ):
            if "float32_weights_values" in case and "values" in got and same_values(
                got["values"], case["float32_weights_values"], rtol=rtol, atol=atol
            ):
                return MESSAGES("weights-in-float32", on=on)
            return MESSAGES("wrong-values-for-dtype", want=want, on=on)
    if first.get("trainable"):
        return MESSAGES("trainable-weights", trainable=', '.join(first['trainable'][:3]))
    return None


PositionWeights = Exercise(
    "PositionWeights",
    chapter=CHAPTER,
    title="A forward that follows its input's device and dtype",
    expects=Function("PositionWeights", ("max_length",), returns="an nn.Module whose forward returns a tensor shaped like x"),
    probe=_probe_position_weights,
    expect=_expect_position_weights,
    judge=_judge_position_weights,
    reference=PositionWeights,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "tensor-made-off-device": "is not on the expected device",
        "operands-on-two-devices": "Expected all tensors to be on the same device",
        "view-of-non-contiguous": "view size is not compatible",
        "moved-to-cpu-in-forward": "Cannot copy out of meta tensor",
    }),
    # The first factory call on the meta device in a process loads torch's reference
    # implementations, which takes seconds; the chapter's demonstrations usually did it already.
    time_limit_s=30.0,
    messages=MESSAGES,
)
