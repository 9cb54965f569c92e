"""Chapter 02, A7 — ``input_gradient``: a gradient as a value; torch.autograd.grad leaves every .grad alone."""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.answer_source import returns_a_value
from course_utils.exercises.autograd.common import CHAPTER
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import same_values, tensor_problem, value_facts


# ============================================================================================
# A7 — a gradient as a value: torch.autograd.grad leaves every .grad alone
# ============================================================================================
def input_gradient(f, x):
    x = x.detach().requires_grad_(True)  # a new leaf on the same numbers; the caller's x is left alone
    (gradient,) = torch.autograd.grad(f(x).sum(), x)
    return gradient


# The functions input_gradient is given: the learner's code calls them, so a grading kernel
# must not guard them (course_utils.grading.guarded_code).
LEARNER_FACING = ("_x_sin_x", "_mean_square")


def _x_sin_x(t):
    """f(t) = t · sin(t), element by element; its derivative is sin(t) + t · cos(t)."""
    return t * torch.sin(t)


def _mean_square(t):
    """f(t) = mean(t²), a single number; its gradient is 2t / t.numel()."""
    return (t * t).mean()


_IG_LINEAR = "linear"  # f is a Linear(3, 2) layer: d sum(x Wᵀ + b) / dx = every row W.sum(0)
_IG_X_SIN_X = "x_sin_x"
_IG_MEAN_SQUARE = "mean_square"
_IG_TWICE = "the same layer and the same x again, a second call"


def _grad_facts(tensor):
    return None if tensor.grad is None else value_facts(tensor.grad)


def _probe_input_gradient(answer, run):
    generator = torch.Generator().manual_seed(5)
    layer = torch.nn.Linear(3, 2)
    with torch.no_grad():
        # Column sums far apart (and none equal to 1), so a wrong reduction shows in every entry.
        layer.weight.copy_(torch.tensor([[0.5, -2.0, 1.5], [1.25, 0.75, -3.0]]))
        layer.bias.copy_(torch.tensor([0.1, -0.2]))
    weight = layer.weight.detach().numpy().copy()
    parameters = dict(layer.named_parameters())

    calls = []

    def call(f, kind, x, on, out_numel):
        if calls and not calls[-1]["grad_enabled_after"]:
            return None  # an earlier call switched autograd off; the judge reports that call
        readable = x.device.type != "meta"
        start = x.detach().clone() if readable else None
        requires_grad_before = bool(x.requires_grad)
        x_grad_before = _grad_facts(x)
        params_before = {name: _grad_facts(p) for name, p in parameters.items()}
        flags_before = {name: p.requires_grad for name, p in parameters.items()}
        training_before = layer.training
        got = run(answer, f, x, on=on)
        grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)  # (the check puts the learner's own mode back at the end)
        calls.append({
            "on": on,
            "kind": kind,
            "shape": [int(n) for n in x.shape],
            "dtype": str(x.dtype),
            "device": str(x.device),
            "x": start.numpy().copy() if readable else None,
            "out_numel": out_numel,
            "got": value_facts(got),
            "returned_x": got is x,
            "grad_enabled_after": grad_enabled_after,
            "x_changed": readable and not torch.equal(x.detach(), start),
            "requires_grad_before": requires_grad_before,
            "requires_grad_after": bool(x.requires_grad),
            "x_grad_before": x_grad_before,
            "x_grad_after": _grad_facts(x),
            "params_before": params_before if f is layer else None,
            "params_after": {name: _grad_facts(p) for name, p in parameters.items()} if f is layer else None,
            # "Leave no trace" covers f too: its parameters' requires_grad and its train/eval mode.
            "frozen_params": sorted(name for name, p in parameters.items()
                                    if flags_before[name] and not p.requires_grad),
            "unfrozen_params": sorted(name for name, p in parameters.items()
                                      if not flags_before[name] and p.requires_grad),
            "mode_changed": layer.training != training_before,
            "training_before": training_before,
        })
        for name, p in parameters.items():  # the next call starts from the flags it should find
            p.requires_grad_(flags_before[name])
        layer.train(training_before)
        return got

    x = torch.randn(4, 3, generator=generator)
    call(layer, _IG_LINEAR, x,
         "a Linear(3, 2) layer whose .grad are None, and an x of shape (4, 3) that does not "
         "require grad", 8)
    # A batch of one that requires grad, with old gradients in x.grad and in the layer's .grad
    # (as in the middle of gradient accumulation); then the very same call again.
    one = torch.randn(1, 3, generator=generator).requires_grad_(True)
    one.grad = torch.randn(1, 3, generator=generator)
    for p in parameters.values():
        p.grad = torch.randn(p.shape, generator=generator)
    call(layer, _IG_LINEAR, one,
         "the same layer and an x of shape (1, 3) that requires grad, with old gradients in "
         "x.grad and in the layer's .grad", 2)
    call(layer, _IG_LINEAR, one, _IG_TWICE, 2)
    # f as a caller may hand it in: in eval mode (measuring), with a parameter frozen
    # (fine-tuning). Afterwards both must be exactly as they were, not put back to the defaults.
    layer.eval()
    layer.bias.requires_grad_(False)
    call(layer, _IG_LINEAR, torch.randn(3, 3, generator=generator),
         "the Linear layer handed in eval mode, with its bias frozen (requires_grad=False), and an "
         "x of shape (3, 3)", 6)
    layer.train()
    layer.bias.requires_grad_(True)
    wide = torch.rand(3, 4, generator=generator, dtype=torch.float64) * 6 - 3
    call(_x_sin_x, _IG_X_SIN_X, wide.t(),
         "f(t) = t * sin(t) on a non-contiguous float64 x of shape (4, 3)", 12)
    call(_mean_square, _IG_MEAN_SQUARE, torch.randn(5, generator=generator),
         "f(t) = (t * t).mean(), a single number, on an x of shape (5,)", 1)
    call(layer, _IG_LINEAR, torch.zeros(0, 3), "the Linear layer on an empty x of shape (0, 3)", 0)
    call(_x_sin_x, _IG_X_SIN_X, torch.empty(2, 3, device="meta"),
         "f(t) = t * sin(t) on an x on the meta device (it stands for a GPU), shape (2, 3)", 6)
    return {"calls": calls, "weight": weight, "returns_a_value": returns_a_value(answer)}


def _expected_input_gradient(call, weight):
    x = call["x"]
    if x is None:
        return None
    if call["kind"] == _IG_LINEAR:
        return np.broadcast_to(weight.sum(axis=0), x.shape)
    if call["kind"] == _IG_X_SIN_X:
        return np.sin(x) + x * np.cos(x)
    return 2 * x / x.size


def _grad_change(before, after):
    """How a .grad changed ("filled", "cleared", "changed") or None when it did not."""
    if before is None and after is None:
        return None
    if before is None:
        return "filled"
    if after is None:
        return "cleared"
    if before.get("shape") != after.get("shape") or not same_values(
        before.get("values", []), after.get("values", []), rtol=0, atol=0
    ):
        return "changed"
    return None


def _judge_input_gradient(record):
    calls, weight = record["calls"], record["weight"]
    previous = None  # the values of the call before, read only on the repeated call
    for call in calls:
        on, got = call["on"], call["got"]
        if got["kind"] == "NoneType" and record.get("returns_a_value"):
            return Mistake("returned-none-grad", (
                f"input_gradient returned None (on {on}), from a `return` that gives a value: "
                "what it returns is None here. If it is a .grad, that stays None unless "
                "backward() reached that very tensor as a leaf: a tensor computed from x (x * 1, "
                "x.clone()) is not a leaf, so its .grad is not kept. Ask for the gradient of the "
                "leaf you made, or use torch.autograd.grad(output, leaf)."
            ))
        if got["kind"] == "NoneType":
            return Mistake("returned-none",
                           f"input_gradient returned None (on {on}); end your function with `return`.")
        if not call["grad_enabled_after"]:
            return Mistake("grad-mode-left-off", (
                f"After input_gradient ran, autograd was switched off for the whole session (on "
                f"{on}): torch.set_grad_enabled(False) stays off, so no later forward pass would "
                "be recorded. Leave the grad mode as it was."
            ))
        if call["x_changed"]:
            return Mistake("changed-x",
                           f"Your function changed the numbers of its input x (on {on}); leave x as it was.")
        before, after = call["requires_grad_before"], call["requires_grad_after"]
        if not before and after:
            return Mistake("tracks-callers-x", (
                f"Your function switched on requires_grad of the caller's x (on {on}) and left it "
                "on: from then on every operation on x is recorded and each backward() adds into "
                "x.grad. Make a new leaf for yourself instead: x.detach().requires_grad_()."
            ))
        if before and not after:
            return Mistake("untracks-callers-x", (
                f"Your function switched off requires_grad of the caller's x (on {on}): the "
                "caller's training would no longer compute its gradient. Work on a new leaf, "
                "x.detach().requires_grad_(), and leave x as it is."
            ))
        change = _grad_change(call["x_grad_before"], call["x_grad_after"])
        if change:
            return Mistake("changed-x-grad", (
                f"Your function {change} x.grad (on {on}); it must hold what it held before. "
                "backward() stores into the .grad of the tensors it reaches; "
                "torch.autograd.grad returns the gradient instead and stores nothing."
            ))
        if call.get("frozen_params"):
            name = call["frozen_params"][0]
            return Mistake("changed-param-flags", (
                f"Your function changed requires_grad of f's parameters (layer.{name}; on {on}): "
                "the caller's training would no longer compute their gradients. Leave no trace "
                "on f either: torch.autograd.grad(f(x).sum(), x) asks for x's gradient alone, "
                "with f as it is."
            ))
        if call.get("unfrozen_params"):
            name = call["unfrozen_params"][0]
            return Mistake("unfroze-params", (
                f"Your function switched requires_grad back on for a parameter the caller had "
                f"frozen (layer.{name} had requires_grad=False; on {on}): the caller's training "
                "would now compute its gradient and its optimizer would change it. Put back what "
                "each parameter had (not True for all), or better leave f alone: "
                "torch.autograd.grad(f(x).sum(), x) asks for x's gradient only."
            ))
        if call.get("mode_changed") and call.get("training_before") is False:
            return Mistake("eval-mode-not-kept", (
                f"f was handed in in eval mode, and your function left it in train mode (on "
                f"{on}): f.train() does not put back the mode you found, it switches to train "
                "mode. Dropout and batch norm would then behave differently in the caller's next "
                "forward pass. Remember f.training before and call f.train(that) afterwards, or "
                "leave the mode alone."
            ))
        if call.get("mode_changed"):
            return Mistake("changed-f-mode", (
                f"Your function switched f between train and eval mode and left it so (on {on}): "
                "dropout and batch norm would then behave differently in the caller's next "
                "forward pass. Leave f's mode as you found it (or put it back before returning)."
            ))
        if call["params_before"] is not None:
            for name, before_grad in call["params_before"].items():
                change = _grad_change(before_grad, call["params_after"][name])
                if change == "filled":
                    return Mistake("filled-param-grads", (
                        f"Your function left a gradient in the .grad of f's parameters "
                        f"(layer.{name}.grad was None, now holds one; on {on}): backward() stores "
                        "into every leaf that requires grad, the layer's weights included, and the "
                        "next optimizer step would use it. torch.autograd.grad(f(x).sum(), x) "
                        "returns the gradient with respect to x alone and stores nothing."
                    ))
                if change:
                    how = ("cleared" if change == "cleared"
                           else "changed (added to, or replaced)")
                    return Mistake("changed-param-grads", (
                        f"Your function {how} the .grad of f's parameters (layer.{name}.grad; "
                        f"on {on}): the old gradient a training loop was accumulating there is "
                        "no longer what it was. Leave it alone: torch.autograd.grad stores "
                        "nothing in any .grad, where backward() adds into them."
                    ))
        template = {"kind": "tensor", "shape": call["shape"], "dtype": call["dtype"], "device": call["device"]}
        problem = tensor_problem(got, template, what="your gradient", on=on)
        if problem:
            return problem + " Expected a gradient shaped like x, with x's dtype and device."
        expected = _expected_input_gradient(call, weight)
        if expected is None or "values" not in got:
            continue
        values = got["values"]
        if call["returned_x"]:
            return Mistake("returned-x",
                           f"Your function returned x itself (on {on}); return the gradient of f(x).sum().")
        if (on == _IG_TWICE and previous is not None and same_values(previous, expected)
                and same_values(values, 2 * expected)):
            return Mistake("grad-kept-between-calls", (
                f"The second call with the same layer and the same x returned twice the right "
                f"gradient ({on}): gradients accumulate in a .grad that your function keeps "
                "from one call to the next. Work on a new leaf every call, and let "
                "torch.autograd.grad return the gradient."
            ))
        if call["out_numel"] > 1 and expected.size and same_values(values, expected / call["out_numel"]):
            return Mistake("mean-not-sum", (
                f"Your gradient is the right one divided by {call['out_numel']}, the number of "
                f"values f(x) has (on {on}): you took the gradient of the mean of f(x). The task "
                "asks for f(x).sum()."
            ))
        problem = tensor_problem(got, {**template, "values": expected}, what="your gradient", on=on)
        if problem:
            return problem + " Expected the gradient of f(x).sum() with respect to x."
        previous = values
    return None


input_gradient = Exercise(
    "input_gradient",
    chapter=CHAPTER,
    title="The gradient with respect to the input",
    expects=Function("input_gradient", ("f", "x"),
                     returns="a tensor shaped like x: the gradient of f(x).sum() with respect to x"),
    probe=_probe_input_gradient,
    judge=_judge_input_gradient,
    reference=input_gradient,
    passed_message=(
        "Correct: the gradient with respect to x, for any f and any x, and every .grad and x "
        "left as they were."
    ),
    hints=[
        "backward() would store gradients into x.grad and into every parameter of f. "
        "torch.autograd.grad(output, inputs) returns them instead, as a tuple, and stores nothing.",
        "autograd.grad needs a single number and an x that requires grad. Reduce with .sum(); "
        "make your own leaf on x's numbers, x.detach().requires_grad_(), so the caller's x is untouched.",
        "x = x.detach().requires_grad_(True)\n"
        "(gradient,) = torch.autograd.grad(f(x).sum(), x)\n"
        "return gradient",
    ],
    error_notes=[
        (
            "grad can be implicitly created only for scalar outputs",
            "a gradient asked of f(x) itself, which holds several numbers: reduce it to one "
            "first, f(x).sum() (or pass grad_outputs=torch.ones_like(output)).",
            "gradient-of-many-values",
        ),
        (
            "One of the differentiated Tensors does not require grad",
            "a gradient asked with respect to an x that does not require grad (the check also "
            "passes such an x). Make a leaf that does, without touching the caller's x: "
            "x = x.detach().requires_grad_(), then call f on it.",
            "x-not-recording",
        ),
        (
            "does not require grad and does not have a grad_fn",
            "a gradient asked of a result autograd did not record: the check also passes an x "
            "that does not require grad. Make a leaf that does, without touching the caller's "
            "x: x = x.detach().requires_grad_(), then call f on it.",
            "result-not-recorded",
        ),
        (
            "appears to not have been used in the graph",
            "the tensor you asked the gradient for is not the one f was called on: call f on "
            "the very leaf you pass to torch.autograd.grad.",
            "gradient-of-another-tensor",
        ),
        (
            "- expected device",
            "the tensor you passed as the gradient of f(x) (grad_outputs= of torch.autograd.grad, "
            "or the tensor given to backward()) is on another device than f(x) itself: the "
            "error names both, f(x)'s as expected and yours as got. torch.ones(shape) and "
            "torch.tensor(...) make a tensor on the CPU unless given device=. Make it from the "
            "output itself, torch.ones_like(out), which takes out's device, dtype and shape.",
            "grad-outputs-on-other-device",
        ),
        (
            "meta",
            "the check passes an x on the meta device, which stands for another device such as "
            "a GPU and holds no numbers: keep x where it is, x.detach().requires_grad_(), rather "
            "than going through .cpu(), .numpy() or torch.tensor(...).",
            "x-moved-off-device",
        ),
        (
            "Trying to backward through the graph a second time",
            "a second backward() or autograd.grad through one graph: compute f(x) anew for "
            "each gradient.",
            "second-backward",
        ),
    ],
)
