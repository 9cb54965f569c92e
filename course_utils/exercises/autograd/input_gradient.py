"""Chapter 02, A7 — ``input_gradient``: a gradient as a value; torch.autograd.grad leaves every .grad alone.

Engine: applies states.MODULE_STATES "eval", "first-frozen", "all-frozen", "grad-large" and
"no-grad" to f's Linear layer, besides its own cases (eval mode with the bias frozen, old
gradients in x.grad and the layer's .grad); under torch.no_grad() the answer may raise, as the
reference does, but must not switch the mode, and what it returns must be right. It applies
edges.edge_tensor to x (the edges of float64, ±inf and nan included, non-contiguous), an empty
float64 x, an empty meta x and a 0-d one. Besides the Linear layer it hands in layers whose mode
matters (input_gradient_modules): a batch norm in train mode, and a model whose Dropout is in
eval mode while the model trains (each sub-module's mode must be left as it was). The reference
runs on the judge's side on the recorded f (rebuilt from its numbers and modes) and x
(``expect``). Hand-written because
"leave no trace" is judged on the caller's own x and f (their .grad, flags and mode, compared
with what they held before: what the reference leaves), which a pure function of tensors has not.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from course_utils.exercises.answer_source import returns_a_value
from course_utils.exercises.autograd.common import CHAPTER
from course_utils.exercises.autograd.input_gradient_modules import (
    BATCH_NORM, DROPOUT_OFF, KINDS, build, changed_submodules, modes, numbers, one_thread, put_modes, rebuild)
from course_utils.exercises.autograd.input_gradient_trace import trace_problem
from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.edges import edge_tensor, not_contiguous
from course_utils.exercises.facts import given, same_values, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.states import LARGE_GRAD, MODULE_STATES

MESSAGES = Messages("input_gradient", {
    "returned-none-grad": (
        "input_gradient returned None (on {on}), from a `return` that gives a value: "
        "what it returns is None here. If it is a .grad, that stays None unless "
        "backward() reached that very tensor as a leaf: a tensor computed from x (x * 1, "
        "x.clone()) is not a leaf, so its .grad is not kept. Ask for the gradient of the "
        "leaf you made, or use torch.autograd.grad(output, leaf)."),
    "returned-none": "input_gradient returned None (on {on}); end your function with `return`.",
    "grad-mode-left-off": (
        "After input_gradient ran, autograd was switched off for the whole session (on "
        "{on}): torch.set_grad_enabled(False) stays off, so no later forward pass would "
        "be recorded. Leave the grad mode as it was."),
    "grad-mode-switched-on": Message(
        "input_gradient was called with autograd switched off (on {on}), and left it switched on "
        "for the whole session: torch.set_grad_enabled(True) does not put back the mode it found, "
        "so the caller's code after it (an evaluation under torch.no_grad()) records a graph "
        "again. Switch it on for your own lines only, `with torch.enable_grad():`, which puts "
        "back the mode it found.",
        advises=("torch.enable_grad()",)),
    "changed-x": "Your function changed the numbers of its input x (on {on}); leave x as it was.",
    "tracks-callers-x": Message(
        "Your function switched on requires_grad of the caller's x (on {on}) and left it "
        "on: from then on every operation on x is recorded and each backward() adds into "
        "x.grad. Make a new leaf for yourself instead: x.detach().requires_grad_().",
        advises=("x.detach().requires_grad_()",)),
    "untracks-callers-x": (
        "Your function switched off requires_grad of the caller's x (on {on}): the "
        "caller's training would no longer compute its gradient. Work on a new leaf, "
        "x.detach().requires_grad_(), and leave x as it is."),
    "changed-x-grad": (
        "Your function {change} x.grad (on {on}); it must hold what it held before. "
        "backward() stores into the .grad of the tensors it reaches; "
        "torch.autograd.grad returns the gradient instead and stores nothing."),
    "changed-param-flags": (
        "Your function changed requires_grad of f's parameters (layer.{name}; on {on}): "
        "the caller's training would no longer compute their gradients. Leave no trace "
        "on f either: torch.autograd.grad(f(x).sum(), x) asks for x's gradient alone, "
        "with f as it is."),
    "unfroze-params": (
        "Your function switched requires_grad back on for a parameter the caller had "
        "frozen (layer.{name} had requires_grad=False; on {on}): the caller's training "
        "would now compute its gradient and its optimizer would change it. Put back what "
        "each parameter had (not True for all), or better leave f alone: "
        "torch.autograd.grad(f(x).sum(), x) asks for x's gradient only."),
    "eval-mode-not-kept": (
        "f was handed in in eval mode, and your function left it in train mode (on "
        "{on}): f.train() does not put back the mode you found, it switches to train "
        "mode. Dropout and batch norm would then behave differently in the caller's next "
        "forward pass. Remember f.training before and call f.train(that) afterwards, or "
        "leave the mode alone."),
    "changed-f-mode": (
        "Your function switched f between train and eval mode and left it so (on {on}): "
        "dropout and batch norm would then behave differently in the caller's next "
        "forward pass. Leave f's mode as you found it (or put it back before returning)."),
    "changed-submodule-mode": (
        "Your function left f's sub-module f.{name} in {now} mode; it was handed in in {was} "
        "mode while f itself is in {parent} mode (on {on}). A sub-module may be in another mode "
        "than the model (a Dropout switched off while the rest trains, a frozen batch norm), "
        "and f.train(flag) or f.eval() sets the mode of every sub-module: putting back "
        "f.training alone does not put back theirs. Leave f's mode alone: the gradient asked "
        "for is the one of f as it was handed in."),
    "computed-in-eval-mode": (
        "Your gradient is the one f gives in eval mode, but f was handed in in train mode (on "
        "{on}): a batch norm in train mode normalises with the batch's own mean and variance, so "
        "its output, and the gradient, differ from eval mode's. Leave f's mode as it is: the "
        "task asks for the gradient of f(x).sum() with f as it was handed in."),
    "filled-param-grads": (
        "Your function left a gradient in the .grad of f's parameters "
        "(layer.{name}.grad was None, now holds one; on {on}): backward() stores "
        "into every leaf that requires grad, the layer's weights included, and the "
        "next optimizer step would use it. torch.autograd.grad(f(x).sum(), x) "
        "returns the gradient with respect to x alone and stores nothing."),
    "how-cleared": "cleared",
    "how-changed": "changed (added to, or replaced)",
    "changed-param-grads": (
        "Your function {how} the .grad of f's parameters (layer.{name}.grad; "
        "on {on}): the old gradient a training loop was accumulating there is "
        "no longer what it was. Leave it alone: torch.autograd.grad stores "
        "nothing in any .grad, where backward() adds into them."),
    "shape-dtype-device": "{problem} Expected a gradient shaped like x, with x's dtype and device.",
    "returned-x": "Your function returned x itself (on {on}); return the gradient of f(x).sum().",
    "grad-kept-between-calls": (
        "The second call with the same layer and the same x returned twice the right "
        "gradient ({on}): gradients accumulate in a .grad that your function keeps "
        "from one call to the next. Work on a new leaf every call, and let "
        "torch.autograd.grad return the gradient."),
    "mean-not-sum": (
        "Your gradient is the right one divided by {numel}, the number of "
        "values f(x) has (on {on}): you took the gradient of the mean of f(x). The task "
        "asks for f(x).sum()."),
    "values-problem": "{problem} Expected the gradient of f(x).sum() with respect to x.",
    "passed": (
        "Correct: the gradient with respect to x, for any f and any x, and every .grad and x "
        "left as they were."),
    "hint-1": (
        "backward() would store gradients into x.grad and into every parameter of f. "
        "torch.autograd.grad(output, inputs) returns them instead, as a tuple, and stores nothing."),
    "hint-2": (
        "autograd.grad needs a single number and an x that requires grad. Reduce with .sum(); "
        "make your own leaf on x's numbers, x.detach().requires_grad_(), so the caller's x is untouched."),
    "hint-3": (
        "x = x.detach().requires_grad_(True)\n"
        "(gradient,) = torch.autograd.grad(f(x).sum(), x)\n"
        "return gradient"),
    "gradient-of-many-values": (
        "a gradient asked of f(x) itself, which holds several numbers: reduce it to one "
        "first, f(x).sum() (or pass grad_outputs=torch.ones_like(output))."),
    "x-not-recording": (
        "a gradient asked with respect to an x that does not require grad (the check also "
        "passes such an x). Make a leaf that does, without touching the caller's x: "
        "x = x.detach().requires_grad_(), then call f on it."),
    "result-not-recorded": (
        "a gradient asked of a result autograd did not record: the check also passes an x "
        "that does not require grad. Make a leaf that does, without touching the caller's "
        "x: x = x.detach().requires_grad_(), then call f on it."),
    "gradient-of-another-tensor": (
        "the tensor you asked the gradient for is not the one f was called on: call f on "
        "the very leaf you pass to torch.autograd.grad."),
    "grad-outputs-on-other-device": (
        "the tensor you passed as the gradient of f(x) (grad_outputs= of torch.autograd.grad, "
        "or the tensor given to backward()) is on another device than f(x) itself: the "
        "error names both, f(x)'s as expected and yours as got. torch.ones(shape) and "
        "torch.tensor(...) make a tensor on the CPU unless given device=. Make it from the "
        "output itself, torch.ones_like(out), which takes out's device, dtype and shape."),
    "x-moved-off-device": (
        "the check passes an x on the meta device, which stands for another device such as "
        "a GPU and holds no numbers: keep x where it is, x.detach().requires_grad_(), rather "
        "than going through .cpu(), .numpy() or torch.tensor(...)."),
    "func-transform-and-batch-norm": (
        "torch.func's transforms (grad, vjp) refuse a layer that changes its own buffers in "
        "place, as a batch norm in train mode updates its running mean and variance; f may be "
        "any layer, and the check hands in such one. torch.autograd.grad(f(x).sum(), x), on a "
        "leaf of your own, x.detach().requires_grad_(), works with every layer."),
    "second-backward": (
        "a second backward() or autograd.grad through one graph: compute f(x) anew for "
        "each gradient."),
})


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
_FUNCTIONS = {_IG_X_SIN_X: _x_sin_x, _IG_MEAN_SQUARE: _mean_square}


def _grad_facts(tensor):
    return None if tensor.grad is None else value_facts(tensor.grad)


def _probe_input_gradient(answer, run):
    calls = []
    record = {"calls": calls, "returns_a_value": returns_a_value(answer), "raised": None}
    try:
        _try_calls(answer, run, record)
    except LearnerRaised as raised:
        # The judge decides: a mistake an earlier call already shows is the one to report, not
        # an error a later input (the edges of float64, a 0-d x) led to.
        record["raised"] = later_error(raised, answer, earlier=bool(calls))
    return record


def _try_calls(answer, run, record):
    calls = record["calls"]
    generator = torch.Generator().manual_seed(5)
    layer = torch.nn.Linear(3, 2)
    with torch.no_grad():
        # Column sums far apart (and none equal to 1), so a wrong reduction shows in every entry.
        layer.weight.copy_(torch.tensor([[0.5, -2.0, 1.5], [1.25, 0.75, -3.0]]))
        layer.bias.copy_(torch.tensor([0.1, -0.2]))
    parameters = dict(layer.named_parameters())
    # The layer as the calls find it, for the judge's side to rebuild (``expect``).
    record["weight"], record["bias"] = layer.weight.detach().numpy().copy(), layer.bias.detach().numpy().copy()

    def call(f, kind, x, on, out_numel, state=None, module=None):
        if calls and calls[-1]["grad_enabled_after"] != calls[-1]["grad_enabled_before"]:
            return None  # an earlier call switched the grad mode; the judge reports that call
        tracked = layer if module is None else module  # the module whose trace is judged
        parameters = dict(tracked.named_parameters())
        readable = x.device.type != "meta"
        start = x.detach().clone() if readable else None
        requires_grad_before = bool(x.requires_grad)
        x_grad_before = _grad_facts(x)
        flags_before = {name: p.requires_grad for name, p in parameters.items()}
        modes_before = modes(tracked)
        context = state.put(tracked) if state is not None else contextlib.nullcontext()
        flags_put = {name: p.requires_grad for name, p in parameters.items()}  # what the state froze
        params_before = {name: _grad_facts(p) for name, p in parameters.items()}
        modes_put = modes(tracked)
        module_numbers = numbers(tracked) if module is not None else None  # for the judge's side
        raised_here = False
        with context, one_thread() if module is not None else contextlib.nullcontext():
            grad_enabled_before = torch.is_grad_enabled()
            try:
                got = run(answer, f, x, on=on)
            except LearnerRaised:
                if state is not MODULE_STATES["no-grad"]:
                    raise
                got, raised_here = None, True  # the reference raises under no_grad too: allowed
            grad_enabled_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)  # (the check puts the learner's own mode back at the end)
        calls.append({
            "on": on,
            "kind": kind,
            "raised_here": raised_here,
            "shape": [int(n) for n in x.shape],
            "dtype": str(x.dtype),
            "device": str(x.device),
            "x": start.numpy().copy() if readable else None,
            "given": given(start) if readable else None,
            "out_numel": out_numel,
            "got": value_facts(got),
            "returned_x": got is x,
            "grad_enabled_before": grad_enabled_before,
            "grad_enabled_after": grad_enabled_after,
            "x_changed": readable and not _same_tensor(x.detach(), start),
            "requires_grad_before": requires_grad_before,
            "requires_grad_after": bool(x.requires_grad),
            "x_grad_before": x_grad_before,
            "x_grad_after": _grad_facts(x),
            "params_before": params_before if f is tracked else None,
            "params_after": {name: _grad_facts(p) for name, p in parameters.items()} if f is tracked else None,
            # "Leave no trace" covers f too: its parameters' requires_grad and its train/eval mode.
            "frozen_params": sorted(name for name, p in parameters.items()
                                    if flags_put[name] and not p.requires_grad),
            "unfrozen_params": sorted(name for name, p in parameters.items()
                                      if not flags_put[name] and p.requires_grad),
            "mode_changed": tracked.training != modes_put[""],
            "training_before": modes_put[""],
            # ... and the mode of each sub-module, which may differ from f's own
            "submodules_changed": changed_submodules(tracked, modes_put),
            "module": None if module is None else {"numbers": module_numbers, "modes": modes_put},
        })
        for name, p in parameters.items():  # the next call starts from the flags it should find
            p.requires_grad_(flags_before[name])
        put_modes(tracked, modes_before)
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
    # The states a caller may hand f in (states.MODULE_STATES), each on a fresh x.
    for name, on in (("eval", "the Linear layer in eval mode (all else as made)"),
                     ("first-frozen", "the Linear layer with its weight frozen (requires_grad=False)"),
                     ("all-frozen", "the Linear layer with every parameter frozen (requires_grad=False)"),
                     ("grad-large", f"the Linear layer whose .grad hold {LARGE_GRAD:g} (an old gradient)"),
                     ("no-grad", f"the Linear layer, {MODULE_STATES['no-grad'].on},")):
        call(layer, _IG_LINEAR, torch.randn(2, 3, generator=generator), f"{on} and an x of shape (2, 3)", 4,
             state=MODULE_STATES[name])
    for p in parameters.values():
        p.grad = None
    # The edges of x's dtype (the task allows any floating-point x), a 0-d x and an empty one.
    call(_x_sin_x, _IG_X_SIN_X, not_contiguous(edge_tensor((3, 6), torch.float64, shift=0)),
         "f(t) = t * sin(t) on a non-contiguous float64 x holding the edges of float64 (±0, "
         "subnormals, huge values, ±inf, nan)", 18)
    call(_x_sin_x, _IG_X_SIN_X, torch.tensor(1.5, dtype=torch.float64),
         "f(t) = t * sin(t) on a 0-d float64 x (a single number), 1.5", 1)
    call(_x_sin_x, _IG_X_SIN_X, torch.zeros(0, 4, dtype=torch.float64),
         "f(t) = t * sin(t) on an empty float64 x of shape (0, 4)", 0)
    call(_x_sin_x, _IG_X_SIN_X, torch.empty(0, 3, device="meta"),
         "f(t) = t * sin(t) on an empty x on the meta device (it stands for a GPU), shape (0, 3)", 0)
    # Layers whose mode matters: a batch norm in train mode (its output, and so its gradient,
    # differ in eval mode), and a model whose Dropout is switched off while the model trains.
    net = build(BATCH_NORM)
    call(net, BATCH_NORM, torch.randn(4, 3, generator=generator) * 2 + 0.5,
         "f = nn.Sequential(nn.BatchNorm1d(3), nn.Tanh()) in train mode, and an x of shape (4, 3)", 12,
         module=net)
    net = build(DROPOUT_OFF)
    call(net, DROPOUT_OFF, torch.randn(2, 3, generator=generator),
         "f = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)) in train mode with its Dropout in eval "
         "mode (f[1].eval()), and an x of shape (2, 3)", 6, module=net)


def _same_tensor(a, b) -> bool:
    """Equal shapes and numbers, nan where the other has nan (torch.equal calls nan unequal)."""
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


def _expect_input_gradient(record):
    """What the reference returns on each call's recorded f and x, with autograd on (under
    torch.no_grad() it raises; an answer that returns there must return this)."""
    reference = input_gradient.reference
    with torch.random.fork_rng(devices=[]):  # a new layer draws its weights: not from the caller's stream
        layer = torch.nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(record["weight"]))
        layer.bias.copy_(torch.from_numpy(record["bias"]))
    for call in record["calls"]:
        call["expected"] = None
        if call["given"] is None:
            continue
        with one_thread() if call["kind"] in KINDS else contextlib.nullcontext():
            _expect_call(call, layer, reference)
    return record


def _expect_call(call, layer, reference):
    """The reference's gradient on one recorded call (and, for a batch norm, f's in eval mode)."""
    if call["kind"] in KINDS:  # a layer of its own, rebuilt from the numbers and modes it had
        module = call["module"]
        f = rebuild(call["kind"], module["numbers"], module["modes"])
        if call["kind"] == BATCH_NORM:  # what f gives in eval mode: a named mistake
            in_eval = rebuild(call["kind"], module["numbers"], module["modes"]).eval()
            with torch.enable_grad():
                call["expected_eval"] = value_facts(reference(in_eval, tensor_of(call["given"])))["values"]
    else:
        f = layer if call["kind"] == _IG_LINEAR else _FUNCTIONS[call["kind"]]
    with torch.enable_grad():
        call["expected"] = value_facts(reference(f, tensor_of(call["given"])))["values"]


def _explained(problem, id):
    text = MESSAGES.text(id, problem=problem)
    return Mistake(problem.id, text) if isinstance(problem, Mistake) else text


def _judge_input_gradient(record):
    calls = record["calls"]
    previous = None  # the values of the call before, read only on the repeated call
    for call in calls:
        on, got = call["on"], call["got"]
        if call["raised_here"]:
            if call["grad_enabled_after"] != call["grad_enabled_before"]:
                return trace_problem(call, MESSAGES)
            continue  # under torch.no_grad() the reference raises too: an error there is allowed
        if got["kind"] == "NoneType" and record.get("returns_a_value"):
            return MESSAGES("returned-none-grad", on=on)
        if got["kind"] == "NoneType":
            return MESSAGES("returned-none", on=on)
        problem = trace_problem(call, MESSAGES)
        if problem:
            return problem
        template = {"kind": "tensor", "shape": call["shape"], "dtype": call["dtype"], "device": call["device"]}
        problem = tensor_problem(got, template, what="your gradient", on=on)
        if problem:
            return _explained(problem, "shape-dtype-device")
        expected = call["expected"]
        if expected is None or "values" not in got:
            continue
        values = got["values"]
        if call["returned_x"]:
            return MESSAGES("returned-x", on=on)
        with np.errstate(all="ignore"):
            if (on == _IG_TWICE and previous is not None and same_values(previous, expected)
                    and same_values(values, 2 * expected)):
                return MESSAGES("grad-kept-between-calls", on=on)
            if call["out_numel"] > 1 and expected.size and same_values(values, expected / call["out_numel"]):
                return MESSAGES("mean-not-sum", numel=call["out_numel"], on=on)
            in_eval = call.get("expected_eval")
            if in_eval is not None and not same_values(values, expected) and same_values(values, in_eval):
                return MESSAGES("computed-in-eval-mode", on=on)
        tolerance = {"rtol": 1e-7, "atol": 1e-9} if call["dtype"] == "torch.float64" else {}
        problem = tensor_problem(got, {**template, "values": expected}, what="your gradient", on=on, **tolerance)
        if problem:
            return _explained(problem, "values-problem")
        previous = values
    if record["raised"]:
        return Raised(record["raised"])
    return None


input_gradient = Exercise(
    "input_gradient",
    chapter=CHAPTER,
    title="The gradient with respect to the input",
    expects=Function("input_gradient", ("f", "x"),
                     returns="a tensor shaped like x: the gradient of f(x).sum() with respect to x"),
    probe=_probe_input_gradient,
    judge=_judge_input_gradient,
    expect=_expect_input_gradient,
    reference=input_gradient,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "gradient-of-many-values": "grad can be implicitly created only for scalar outputs",
        "x-not-recording": "One of the differentiated Tensors does not require grad",
        "result-not-recorded": "does not require grad and does not have a grad_fn",
        "gradient-of-another-tensor": "appears to not have been used in the graph",
        "grad-outputs-on-other-device": "- expected device",
        "x-moved-off-device": "meta",
        "second-backward": "Trying to backward through the graph a second time",
        "func-transform-and-batch-norm": "that would mutate a captured Tensor",
    }),
    messages=MESSAGES,
)
