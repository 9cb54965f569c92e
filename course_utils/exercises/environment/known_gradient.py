"""E6 — known_gradient: autograd on a function whose derivative we know.

Engine: applies edges.edge_tensor (float16, float32 and float64's classic edges, nan and ±inf
among them: the task allows any float tensor), edges.resized (an empty x of shape (0, 3)) and
states' grad states of x (requires grad, a stale .grad, computed from a tensor that records,
grad mode left as found); hand-written because the task's rule "computed by autograd" is checked
by a dispatch record of the backward pass, which a comparison of results cannot see.
"""

from __future__ import annotations

import numpy as np

from course_utils.exercises.core import Exercise, Function, Raised, later_error
from course_utils.exercises.edges import edge_tensor, resized
from course_utils.exercises.environment.common import CHAPTER, _cases_record
from course_utils.exercises.facts import given, same_values, tensor_of, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised

_COPY = "x.detach().clone().requires_grad_(True)"
MESSAGES = Messages("known_gradient", {
    "hint-1": "Make a copy of x that records operations: x.detach().clone().requires_grad_(True).",
    "hint-2": "y = (x**3).sum() is a single number, so y.backward() needs no arguments.",
    "hint-3": "After y.backward(), the gradient is in x.grad. Return it.",
    "passed": ("Correct: autograd's gradient matches 3x² on every shape and dtype tried, and the "
               "caller's x is left as it was."),
    "x-not-recording": (
        "x has requires_grad=False, so nothing was recorded. Make a copy that records: "
        "x = x.detach().clone().requires_grad_(True)."),
    "backward-of-many-values": (
        "backward() with no argument needs a single number. Sum first: (x**3).sum().backward()."),
    "in-place-change-of-x": (
        "an in-place change of a tensor that requires grad. Compute a new tensor (x**3) instead."),
    "view-of-non-contiguous": (
        "x can be non-contiguous (a transposed tensor, for example), and .view() needs "
        "contiguous memory. Use .reshape(), or keep x's own shape: the gradient has it."),
    "second-backward": (
        "backward() frees the graph it went through. Compute y again before another "
        "backward(), or call backward() once."),
    "grad-mode-not-restored": (
        "Your function left autograd switched {state} for the whole session (on {on}): "
        "torch.is_grad_enabled() was {before} before the call and {after} after it, so "
        "everything computed afterwards (the next call of your function too) {consequence}"
        "Leave the grad mode as you found it: a `with torch.no_grad():` (or "
        "`with torch.enable_grad():`) block switches it back when the block ends; "
        "torch.set_grad_enabled(...) on its own line does not."),
    "word-off": "off",
    "word-on": "on",
    "consequence-records-nothing": "records nothing for backward. ",
    "consequence-recorded": "is recorded. ",
    "cached-result-after-change": (
        "After the caller changed x in place, your function returned the gradient of x's old "
        "numbers (on {on}): it gave back a result kept from an earlier call. Compute the "
        "gradient afresh on every call."),
    "copy-not-a-leaf": Message(
        "known_gradient returned None on an x that itself requires grad (on {on}), though it "
        "returned a gradient for plain tensors. A copy made from such an x (x.clone(), x * 1) "
        "is recorded as an operation on x: it is not a leaf, so its .grad stays None. Copy with "
        "x.detach().clone(), a fresh leaf, then requires_grad_(True).", advises=(_COPY,)),
    "returned-none": (
        "known_gradient returned None (on {on}). x.grad stays None until backward() runs on a "
        "result computed from an x with requires_grad=True — and check that your function ends "
        "with `return`."),
    "detached-callers-x": (
        "Your function changed the caller's x in place (on {on}): x required grad before the "
        "call and no longer does after it. x.detach_() (or x.requires_grad_(False)) detaches "
        "the caller's own tensor; use x.detach(), which returns a new tensor and leaves x as it "
        "was."),
    "changed-x": (
        "Your function changed its input x in place (on {on}): the caller's x holds other "
        "numbers afterwards. Compute new tensors; leave x as it was."),
    "requires-grad-on-callers-x": Message(
        "Your function switched on requires_grad for the caller's own x (on {on}): x did not "
        "require grad before the call and does after it, so everything the caller computes from "
        "x afterwards is recorded. Make a copy that records instead: "
        "x.detach().clone().requires_grad_(True).", advises=(_COPY,)),
    "stale-grad": Message(
        "Your gradient is 3x² plus the .grad the caller's x already held (on {on}): backward() "
        "adds to .grad, it does not replace it. Compute on a fresh copy, "
        "x.detach().clone().requires_grad_(True), whose .grad starts empty.", advises=(_COPY,)),
    "grad-kept-between-calls": (
        "The second call with the same x returned twice 3x² (on {on}): the first call's "
        "gradient stayed in a .grad and backward() added the new one to it. Compute on a fresh "
        "copy of x on every call."),
    "changed-callers-grad": (
        "Your function changed the caller's x.grad (on {on}): x held {before} before the call "
        "and {after} after it. Leave the caller's x as it was: {fix}"),
    "held-no-grad": "no .grad",
    "held-a-grad": "a .grad",
    "held-none": "none",
    "held-one": "one",
    "held-another": "another",
    "fix-copy": "compute on a copy, x.detach().clone().requires_grad_(True).",
    "fix-copy-every-x": ("compute on a copy, x.detach().clone().requires_grad_(True), of every x, "
                         "one that already requires grad too."),
    "fix-leave-its-grad": ("its .grad is the caller's to keep or clear; a copy of x starts without "
                           "one anyway."),
    "no-detach": (
        "Your backward pass reached the tensors x was computed from (on {on}): the caller's w "
        "now has a .grad. Cut x from its history first with x.detach()."),
    "returned-y": (
        "You returned y = x**3 itself (on {on}). The gradient is what backward() leaves in "
        "x.grad."),
    "backward-twice": (
        "Your gradient is twice 3x² (on {on}), and {passes} backward passes ran during the call: "
        "gradients accumulate in .grad, so two backward() calls add up. Call backward() once."),
    "twice-the-gradient": "Your gradient is twice 3x² (on {on}); the gradient of (x**3).sum() is 3x².",
    "float32-detour": (
        "Your float64 gradient agrees with 3x² to about 7 digits only (on {on}), the precision "
        "of float32: somewhere it went through a lower precision than x's own. Compute on a "
        "copy of x in x's dtype: x.detach().clone().requires_grad_(True)."),
    "cached-result": (
        "No backward pass ran during this call (on {on}), though one ran on the first: your "
        "function gave back a result kept from an earlier call. Compute the gradient afresh, "
        "with autograd, on every call."),
    "no-backward": (
        "Your values are 3x², but no backward pass ran during the call (on {on}): the task asks "
        "for the gradient computed by autograd. Call backward() on (x**3).sum() (or "
        "torch.autograd.grad) and return what it computes."),
    "formula-after-backward": (
        "A backward pass ran during the call, but the tensor you returned was computed from x "
        "outside it, not by it (on {on}): your values are 3x² worked out as a formula. Return "
        "what autograd computes: x.grad after backward(), or the result of torch.autograd.grad."),
})


# ============================================================================================
# E6 — autograd on a function whose derivative we know
# ============================================================================================
def known_gradient(x):
    x = x.detach().clone().requires_grad_(True)
    y = (x**3).sum()
    y.backward()
    return x.grad


def _backward_recorder():
    """A dispatch mode that counts the operations the autograd engine runs (a backward pass):
    the proof that the gradient was computed by autograd, not written as a formula."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class RecordBackward(TorchDispatchMode):
        # Entering torch.compile's machinery on first use costs a second; nothing here compiles.
        _should_skip_dynamo = classmethod(lambda cls: False)

        def __init__(self):
            super().__init__()
            self.backward_ops = 0
            self.backward_passes = set()  # one graph task per backward() / autograd.grad call
            # Tensors the backward pass made, and those computed from them afterwards (a
            # clone, a dtype conversion): the gradient returned should be one of them. Also
            # the tensors computed from the caller's x outside a backward pass: a result that
            # is one of those, and not the other, is a formula, not autograd's gradient.
            self._derived = {"backward": ({}, set()), "input": ({}, set())}
            # Every marked tensor is kept alive while the recorder lives: memory freed during
            # the call could otherwise be handed to a new tensor (a right answer's copy of the
            # gradient) whose address would then look derived from x.
            self._kept = []

        def _is_derived(self, tensor, kind):
            objects, memory = self._derived[kind]
            kept = objects.get(id(tensor))
            if kept is not None and kept() is tensor:
                return True
            try:
                pointer = tensor.untyped_storage().data_ptr()
            except Exception:  # no storage to read (meta, a subclass): not known as derived
                return False
            return pointer != 0 and pointer in memory

        def mark(self, out, kind):
            import weakref

            from torch.utils._pytree import tree_flatten

            objects, memory = self._derived[kind]
            for tensor in tree_flatten(out)[0]:
                if isinstance(tensor, torch.Tensor):
                    self._kept.append(tensor)
                    try:
                        objects[id(tensor)] = weakref.ref(tensor)
                        pointer = tensor.untyped_storage().data_ptr()
                    except Exception:  # not weak-referenceable or no storage: skip it
                        continue
                    if pointer:
                        memory.add(pointer)

        def derived(self, value, kind) -> bool:
            return isinstance(value, torch.Tensor) and self._is_derived(value, kind)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            from torch.utils._pytree import tree_flatten

            task = torch._C._current_graph_task_id()
            if task != -1:
                self.backward_ops += 1
                self.backward_passes.add(task)
            out = func(*args, **(kwargs or {}))
            inputs = [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)]
            if task != -1 or any(self._is_derived(t, "backward") for t in inputs):
                self.mark(out, "backward")
            elif any(self._is_derived(t, "input") for t in inputs):
                self.mark(out, "input")
            return out

    return RecordBackward()


def _gradient_inputs(torch):
    """(label, x, leaf behind x or None, rtol) — every kind of "float tensor x of any shape"."""
    generator = torch.Generator().manual_seed(0)

    def uniform(shape, dtype=torch.float32):
        return (torch.rand(shape, generator=generator, dtype=torch.float64) * 4 - 2).to(dtype)

    inputs = [
        ("x of shape (5,)", uniform((5,)), None, 1e-5),
        ("x of shape (2, 3), float64", uniform((2, 3), torch.float64), None, 1e-12),
        ("x of shape (4, 1, 2)", uniform((4, 1, 2)), None, 1e-5),
        ("x of shape () (0-dimensional)", uniform(()), None, 1e-5),
        ("x of shape (2, 3) with requires_grad=True", uniform((2, 3)).requires_grad_(True), None, 1e-5),
    ]
    stale = uniform((3,)).requires_grad_(True)
    stale.grad = torch.ones(3)
    inputs.append(("x of shape (3,) with requires_grad=True that already holds a .grad (ones, "
                   "from an earlier backward)", stale, None, 1e-5))
    leaf = uniform((4,)).requires_grad_(True)
    inputs.append(("x = w * 1 of shape (4,), computed from a tensor w that requires grad",
                   leaf * 1, leaf, 1e-5))
    inputs += [
        ("x of shape (0,) (empty)", uniform((0,)), None, 1e-5),
        ("a transposed (non-contiguous) x of shape (3, 2)", uniform((2, 3)).t(), None, 1e-5),
        ("x of shape (3,), float16", uniform((3,), torch.float16), None, 1e-2),
        ("x of shape (0,), float64 (empty)", uniform(resized((3,), 0, 0), torch.float64), None, 1e-12),
    ]
    for dtype, shape, rtol in ((torch.float32, (3, 6), 1e-5), (torch.float64, (18,), 1e-12),
                               (torch.float16, (2, 9), 1e-2)):
        inputs.append((f"x of shape {shape}, {str(dtype)[6:]}, holding its dtype's classic edges "
                       "(±0, subnormals, ±1, huge values, ±inf, nan)", edge_tensor(shape, dtype), None, rtol))
    return inputs


def _grad_facts(tensor):
    import torch

    grad = tensor.grad if tensor.is_leaf else None
    if grad is None:
        return None
    try:
        return torch.Tensor.detach(grad).to("cpu", torch.float64).numpy().copy()
    except Exception:  # a .grad the answer put somewhere unreadable (meta): it is there, that is all
        return np.full(1, np.nan)


def _probe_known_gradient(answer, run):
    """Each x given (as it was before the call) and what the answer did with it: never the
    gradient a right answer gives (``_expect_known_gradient`` adds that, on the judge's side)."""
    import torch

    cases = []
    record = {"cases": cases}
    inputs = _gradient_inputs(torch)
    # The first input again, after all others: the same tensor object, called a second time.
    inputs.append((inputs[0][0] + ", a second call with the same x", inputs[0][1], None, 1e-5))
    # And once more after the caller changed x in place (as an optimizer step does): the
    # gradient of the new numbers, not one kept from before.
    changed_in_place = inputs[0][0] + ", a third call after the caller changed x in place"
    inputs.append((changed_in_place, inputs[0][1], None, 1e-5))
    grad_mode = torch.is_grad_enabled()  # what every call should leave behind
    for on, x, leaf, rtol in inputs:
        if on == changed_in_place:
            with torch.no_grad():
                torch.Tensor.add_(x, 0.5)
        x_given = given(x)
        before = torch.Tensor.detach(x).to(torch.float64).clone()
        requires_grad = bool(x.requires_grad)
        grad_before = _grad_facts(x)
        recorder = _backward_recorder()
        recorder.mark(x, "input")
        try:
            with recorder:
                got = run(answer, x, on=on)
        except LearnerRaised as raised:
            # The judge decides: a mistake the earlier calls already show is the one to report,
            # not the error a later input led to.
            record["raised"] = later_error(raised, answer, cases)
            break
        finally:
            grad_mode_after = torch.is_grad_enabled()
            torch.set_grad_enabled(grad_mode)  # so later calls (and the notebook) are not affected
        cases.append(
            {
                "on": on,
                "got": value_facts(got),
                "given": {"x": x_given},
                "rtol": rtol,
                "requires_grad": requires_grad,
                "requires_grad_after": bool(x.requires_grad),
                "grad_mode": grad_mode,
                "grad_mode_after": grad_mode_after,
                "grad_before": grad_before,
                "grad_after": _grad_facts(x),
                "leaf_grad_after": None if leaf is None else _grad_facts(leaf),
                "x_before": before.numpy().copy(),
                "x_after": torch.Tensor.detach(x).to(torch.float64).numpy().copy(),
                "backward_ops": recorder.backward_ops,
                "backward_passes": len(recorder.backward_passes),
                "formula_from_x": (not recorder.derived(got, "backward")
                                   and recorder.derived(got, "input")),
            }
        )
    return record


def _expect_known_gradient(record):
    """What the reference gives on each x the record holds (the gradient 3x², in x's dtype),
    and x**3 (the classic mistake of returning y), for the judge."""
    import torch

    record = _cases_record(record)
    for case in record["cases"]:
        x = tensor_of(case["given"]["x"])
        with torch.enable_grad():  # whatever grad mode the notebook left on
            case["expected"] = value_facts(known_gradient.reference(x))
        case["cubed"] = (x.to(torch.float64) ** 3).numpy().copy()
    return record


def _judge_known_gradient(record):
    record = _cases_record(record)
    cases = record["cases"]
    for case in cases:
        got, expected, on = case["got"], case["expected"], case["on"]
        if case["grad_mode_after"] != case["grad_mode"]:
            state = MESSAGES.text("word-off" if case["grad_mode"] else "word-on")
            return MESSAGES("grad-mode-not-restored", state=state, on=on,
                            before=case["grad_mode"], after=case["grad_mode_after"],
                            consequence=MESSAGES.text("consequence-records-nothing" if case["grad_mode"]
                                                      else "consequence-recorded"))
        second_call = "a second call" in on
        if "after the caller changed x in place" in on and got["kind"] == "tensor" and (
                got["shape"] == expected["shape"] and "values" in got and got["values"].size
                and same_values(got["values"], 3 * (case["x_before"] - 0.5) ** 2, rtol=case["rtol"])
                and not same_values(got["values"], expected["values"], rtol=case["rtol"])):
            return MESSAGES("cached-result-after-change", on=on)
        if got["kind"] == "NoneType" and case["requires_grad"]:
            return MESSAGES("copy-not-a-leaf", on=on)
        if got["kind"] == "NoneType":
            return MESSAGES("returned-none", on=on)
        if case["requires_grad"] and not case["requires_grad_after"]:
            return MESSAGES("detached-callers-x", on=on)
        if not same_values(case["x_after"], case["x_before"], rtol=0, atol=0):
            return MESSAGES("changed-x", on=on)
        if not case["requires_grad"] and case["requires_grad_after"]:
            return MESSAGES("requires-grad-on-callers-x", on=on)
        values = got.get("values") if got["kind"] == "tensor" and got["shape"] == expected["shape"] else None
        grad_before = case["grad_before"]
        if (values is not None and grad_before is not None and values.size
                and same_values(values, expected["values"] + grad_before, rtol=case["rtol"])):
            return MESSAGES("stale-grad", on=on)
        if second_call and values is not None and values.size and same_values(
                values, 2 * expected["values"], rtol=case["rtol"]):
            return MESSAGES("grad-kept-between-calls", on=on)
        if not _same_grad(case["grad_after"], grad_before):
            before = MESSAGES.text("held-no-grad" if grad_before is None else "held-a-grad")
            after = MESSAGES.text("held-none" if case["grad_after"] is None
                                  else "held-one" if grad_before is None else "held-another")
            fix = ("fix-leave-its-grad" if case["grad_after"] is None
                   else "fix-copy-every-x" if case["requires_grad"] else "fix-copy")
            return MESSAGES("changed-callers-grad", on=on, before=before, after=after, fix=MESSAGES.text(fix))
        if case["leaf_grad_after"] is not None:
            return MESSAGES("no-detach", on=on)
        if values is not None and values.size:
            if same_values(values, case["cubed"], rtol=case["rtol"]):
                return MESSAGES("returned-y", on=on)
            if same_values(values, 2 * expected["values"], rtol=case["rtol"]):
                if case["backward_passes"] >= 2:
                    return MESSAGES("backward-twice", on=on, passes=case["backward_passes"])
                return MESSAGES("twice-the-gradient", on=on)
        if (values is not None and values.size and expected["dtype"] == "torch.float64"
                and got["dtype"] == "torch.float64"
                and not same_values(values, expected["values"], rtol=case["rtol"], atol=case["rtol"] / 10)
                and same_values(values, expected["values"], rtol=1e-5, atol=1e-6)):
            return MESSAGES("float32-detour", on=on)
        problem = tensor_problem(got, expected, what="your gradient", on=on,
                                 rtol=case["rtol"], atol=case["rtol"] / 10)
        if problem:
            return problem
        empty = 0 in got["shape"]
        if case["backward_ops"] == 0 and not empty and (
                "a second call" in on or "a third call" in on) and any(
                earlier["backward_ops"] for earlier in cases if earlier is not case):
            return MESSAGES("cached-result", on=on)
        if case["backward_ops"] == 0 and not empty:
            return MESSAGES("no-backward", on=on)
        if case.get("formula_from_x") and not empty:
            return MESSAGES("formula-after-backward", on=on)
    if record.get("raised"):
        return Raised(record["raised"])
    return None


def _same_grad(after, before) -> bool:
    if after is None or before is None:
        return after is None and before is None
    return same_values(after, before, rtol=0, atol=0)


known_gradient = Exercise(
    "known_gradient",
    chapter=CHAPTER,
    title="Autograd on a known function",
    expects=Function("known_gradient", ("x",), returns="a tensor shaped like x: the gradient 3x²"),
    probe=_probe_known_gradient,
    expect=_expect_known_gradient,
    judge=_judge_known_gradient,
    reference=known_gradient,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "x-not-recording": "does not require grad",
        "backward-of-many-values": "only for scalar outputs",
        "in-place-change-of-x": "a leaf Variable that requires grad",
        "view-of-non-contiguous": "view size is not compatible with input tensor's size and stride",
        "second-backward": "Trying to backward through the graph a second time",
    }),
    messages=MESSAGES,
)
