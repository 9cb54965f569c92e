"""Chapter 06, D12: a forward hook of your own (the exercise ``layer_output_shapes``).

Engine: applies states.MODULE_STATES "eval" and "no-grad", a second call on the same model, a
model that is itself one layer, a forward that raises, and what the answer leaves behind (hooks
on the layers and global module hooks, the caller's own hook, each layer's forward, the mode and
grad mode); hand-written because the rule (hooks, all removed, also on an error) and its named
mistakes are read from the hooks the answer left, not from a value to compare.
"""

from __future__ import annotations

import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Raised, later_error
from course_utils.exercises.debugging.common import CHAPTER, _kind, _generator
from course_utils.exercises.running import judge_side
from course_utils.exercises.facts import given, tensor_of
from course_utils.exercises.running import LearnerRaised
from course_utils.exercises.messages import Messages


MESSAGES = Messages("layer_output_shapes", {
    "passed": (
        "Correct: one (name, shape) pair per layer call, in order, from hooks on the leaf modules, "
        "every hook removed afterwards, also when the forward raised."),
    "hint-1": (
        "module.register_forward_hook(hook) makes torch call hook(module, inputs, output) after each "
        "forward of that module; it returns a handle whose .remove() takes the hook off."),
    "hint-2": (
        "model.named_modules() gives every module with its full name; the layers are those without "
        "children (not list(module.children())). Make one hook per layer that knows its name (a "
        "function that returns the hook), appending to one list."),
    "hint-3": (
        "Keep every handle; run the model in try:, and remove the handles in finally:, so they go "
        "even when the forward raises."),
    "wrong-pairs": (
        "Your function returned {pairs}; expected {expected} (on {on}): one (name, shape) pair per "
        "layer call, with the name from model.named_modules() and the output's shape."),
    "hooks-left": (
        "After your function returned, hooks were still on {hooks_left} (on {on}){second}. A hook "
        "stays until you remove it: keep the handle register_forward_hook returns, and call "
        "handle.remove() on each before returning."),
    "hooks-left-second-call": ": this second call recorded every layer twice, once for each hook",
    "ran-model-twice": (
        "Your function ran the model {forwards} times (on {on}); run it once, with the hooks on, and "
        "read what they recorded."),
    "never-ran-model": (
        "Your function ran the model {forwards} times (on {on}); run it once, with the hooks on, and "
        "read what they recorded."),
    "global-hook-left": (
        "After your function returned, {global_hooks_left} global module hook(s) were still "
        "registered (on {on}): a hook from register_module_forward_hook runs on every module of every"
        " model from then on. Keep the handle it returns and call handle.remove() in a finally: "
        "block, or hook each layer with module.register_forward_hook."),
    "forward-replaced": (
        "Your function replaced the forward of {forwards_replaced} (on {on}) instead of registering "
        "forward hooks, and the layers keep an attribute forward of their own afterwards. Watch the "
        "layers without changing them: module.register_forward_hook(hook), then handle.remove()."),
    "removed-others-hooks": (
        "Your function removed a hook it had not registered: the caller's own hook on a layer was "
        "gone afterwards (on {on}). Clearing module._forward_hooks takes every hook off, other code's"
        " too; remove only your own, with the handles register_forward_hook returned."),
    "train-eval-mode": "train/eval mode",
    "changed-grad-mode": (
        "Your function changed torch's global autograd mode (on {on}): it was {before} when your "
        "function was called and {after} afterwards, for all the caller's code, not just this model. "
        "torch.set_grad_enabled(...) switches it for the whole program; to run the forward without "
        "gradients, use `with torch.no_grad():`, which puts the caller's mode back on leaving. Hooks "
        "only watch: running the model as the caller called you needs neither."),
    "error-replaced": (
        "When the model's forward raised {want_type}: {want_message} (on {on}), the caller got "
        "{type}: {message} instead. Let that very error reach the caller: remove the hooks in a "
        "`finally:` (or re-raise with a bare `raise`), without catching it into another exception."),
    "changed-mode": (
        "Your function changed the model's {what} (on {on}). Hooks only watch: run the model as it "
        "was given, in the mode and grad mode the caller chose."),
    "not-pairs": (
        "Your function returned {kind} (on {on}); return a list of (name, shape) pairs, one per layer"
        " call, e.g. [('0', (5, 16)), ('1', (5, 16)), ...]."),
    "shape-not-tuple": (
        "Your shapes hold the right numbers, but the one for {name!r} is a {kind}, not a tuple (on "
        "{on}): the task asks for each shape as a tuple, tuple(output.shape) (output.shape, a "
        "torch.Size, is a tuple too)."),
    "input-shapes": (
        "Your shapes are the layers' *inputs* (on {on}): a forward hook is called as hook(module, "
        "inputs, output), and the output is its third argument."),
    "containers-included": (
        "Your list has entries for {n_containers}, which are containers, not layers (on {on}): their "
        "output is a layer's output again. Hook only modules without children: not "
        "list(module.children())."),
    "wrong-order": (
        "Your pairs are all there but in another order (on {on}): {names}; expected the order the "
        "layers ran in, {expected_names}. Append in the hook, as each call happens."),
    "one-entry-per-layer": (
        "A layer called twice appears once in your result (on {on}): {names}; expected "
        "{expected_names}. Record every call (a list, appended in the hook), not one entry per layer "
        "(a dict keyed by name)."),
    "children-only": (
        "Your names are {names}; expected {expected_names} (on {on}): the layers inside the nested "
        "block are missing, or named by their own short names. model.named_children() goes one level "
        "down; model.named_modules() reaches every module and names it by its full path "
        "(block.body.0)."),
    "hook-returned-value": (
        "Your code raised {type}: {message} (on {on}). Your hook returned a value ({kind}) after "
        "layer {layer!r}: a forward hook that returns something other than None replaces that layer's"
        " output, so the next layer, {next!r}, received {kind} instead of a tensor. A hook that only "
        "watches returns nothing: append to your list, and leave out the `return`."),
    "swallowed-error": (
        "Your function returned normally although the model's forward raised (on {on}): the caller "
        "must see that error. Remove the hooks in a `finally:` and let the error go on."),
    "hooks-left-after-error": (
        "When the model's forward raised, your hooks stayed on {hooks_left} (on {on}): the removal "
        "never ran. Put it in a `finally:` block (try: model(x) / finally: remove every handle), "
        "which runs whether the forward returns or raises."),
})


# ============================================================================================
# D12 — a forward hook of your own
# ============================================================================================
def layer_output_shapes(model, x):
    shapes, handles = [], []

    def record(name):
        def hook(module, inputs, output):
            shapes.append((name, tuple(output.shape)))
        return hook

    for name, module in model.named_modules():
        if not list(module.children()):  # a leaf: a layer that does the work itself
            handles.append(module.register_forward_hook(record(name)))
    try:
        model(x)
    finally:
        for handle in handles:  # also when the forward raised: no hook stays behind
            handle.remove()
    return shapes


class _Block(nn.Module):
    """A block inside the model: its layers are named block.0, block.1, ..., not 0, 1."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 6), nn.Tanh())

    def forward(self, x):
        return self.body(x)


class _Nested(nn.Module):
    """A nested block, a layer called twice, and a layer that is never called."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 6)
        self.block = _Block()
        self.act = nn.ReLU()
        self.unused = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        h = self.act(self.embed(x))
        h = self.act(self.block(h))  # act runs twice: it appears twice
        return self.head(h)


class _Breaks(nn.Module):
    """A forward that raises after its first layer ran: the hooks must go all the same, and its
    own error (a ValueError, not torch's RuntimeError) must reach the caller as it is."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 5)
        self.second = nn.Linear(6, 2)  # expects 6 features, gets 5

    def forward(self, x):
        h = self.first(x)
        if h.shape[-1] != self.second.in_features:
            raise ValueError(f"_Breaks: the second layer expects {self.second.in_features} "
                             f"features, got {h.shape[-1]}")
        return self.second(h)


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""


def _hooks_left(model) -> list[str]:
    return [name or "(the model)" for name, module in model.named_modules()
            if module._forward_hooks or module._forward_pre_hooks]


def _shapes_facts(value):
    """A list of (name, shape) pairs as plain data, or the kind of what came back."""
    if not isinstance(value, (list, tuple)):
        return {"kind": _kind(value)}
    pairs, not_tuple = [], None
    for item in value:
        if not (isinstance(item, (list, tuple)) and len(item) == 2):
            return {"kind": f"a list holding {_kind(item)}"}
        name, shape = item
        try:
            ints = [int(n) for n in shape]
        except (TypeError, ValueError):
            return {"kind": f"a pair holding {_kind(shape)} as its shape"}
        if not isinstance(shape, tuple) and not_tuple is None:  # torch.Size is a tuple too
            not_tuple = {"name": str(name), "kind": type(shape).__name__}
        pairs.append([str(name), ints])
    facts = {"kind": "pairs", "pairs": pairs}
    if not_tuple is not None:
        facts["shape_not_tuple"] = not_tuple
    return facts


_LAYER_SEED = 12  # the seed the models are built with


def _layer_cases():
    torch.manual_seed(_LAYER_SEED)
    straight = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    return [
        ("an nn.Sequential of Linear(8, 16), ReLU, Linear(16, 4) and x of shape (5, 8)",
         straight, torch.randn(5, 8, generator=_generator(13))),
        ("a model with a nested block, a layer called twice and one never called, x of shape (3, 4)",
         _Nested(), torch.randn(3, 4, generator=_generator(14))),
        ("the same Sequential again, a second call on the same model",
         straight, torch.randn(2, 8, generator=_generator(15))),
        ("the nested model in eval mode, inside torch.no_grad(), x of shape (1, 4)",
         _Nested().eval(), torch.randn(1, 4, generator=_generator(16))),
        # One Tanh used in two places: named_modules() names it once, so one hook sees both calls.
        ("a Sequential holding a Sequential, with one Tanh used in both, and x of shape (2, 3)",
         _with_a_shared_layer(), torch.randn(2, 3, generator=_generator(19))),
        # A model with no children is a layer itself: its name in named_modules() is "".
        ("a model that is one layer, nn.Linear(3, 2), and x of shape (4, 3)",
         nn.Linear(3, 2), torch.randn(4, 3, generator=_generator(18))),
    ]


def _with_a_shared_layer() -> nn.Module:
    tanh = nn.Tanh()
    return nn.Sequential(nn.Linear(3, 4), tanh, nn.Sequential(nn.Linear(4, 3), tanh))


def _global_hooks() -> set:
    """The ids of the global module hooks (register_module_forward_hook and its pre hook)."""
    from torch.nn.modules import module as torch_module
    return set(torch_module._global_forward_hooks) | {("pre", key) for key in torch_module._global_forward_pre_hooks}


def _remove_global_hooks(keys) -> None:
    from torch.nn.modules import module as torch_module
    for key in keys:
        if isinstance(key, tuple):
            torch_module._global_forward_pre_hooks.pop(key[1], None)
        else:
            torch_module._global_forward_hooks.pop(key, None)


def _forwards_replaced(model) -> list[str]:
    """The modules whose forward is an attribute of the object itself (a wrapper set on it)."""
    return [name or "(the model)" for name, module in model.named_modules() if "forward" in vars(module)]


def _probe_layer_output_shapes(answer, run):
    """What the answer returned for each model and what it left on it, and which model and x it
    was given ("given"): never the shapes a right answer records (``_expect_layer_output_shapes``
    rebuilds the model and runs the reference, on the judge's side)."""
    cases = []
    record = {"cases": cases}
    for index, (on, model, x) in enumerate(_layer_cases()):
        no_grad = "no_grad" in on
        modes = [m.training for m in model.modules()]
        calls = []
        counter = model.register_forward_pre_hook(lambda module, inputs: calls.append(1))
        # The caller's own hook on a layer: the answer must remove its hooks, not every hook.
        first_leaf = next(m for m in model.modules() if not list(m.children()))
        callers = first_leaf.register_forward_hook(lambda module, inputs, output: None)
        # What each layer receives: a non-tensor means a hook replaced the layer before's output.
        received, watchers = [], []
        for name, module in model.named_modules():
            if not list(module.children()):
                watchers.append(module.register_forward_pre_hook(
                    lambda module, inputs, name=name: received.append(
                        (name, inputs[0] if inputs and not isinstance(inputs[0], torch.Tensor) else None))))
        raised = None
        global_before, forwards_before = _global_hooks(), _forwards_replaced(model)
        try:
            with torch.no_grad() if no_grad else torch.enable_grad():
                got = run(answer, model, x, on=on)
                grad_after = torch.is_grad_enabled()
        except LearnerRaised as error:
            # The judge decides: a mistake the earlier models already show is the one to
            # report, not the error a later one led to.
            replaced = _replaced_output(received)
            raised = later_error(error, answer, cases or replaced is not None)
            if replaced is not None:
                record["replaced_output"] = dict(replaced, on=on)
        finally:
            for watcher in watchers:
                watcher.remove()
            counter.remove()
            callers_kept = callers.id in first_leaf._forward_hooks
            callers.remove()
            global_left = _global_hooks() - global_before
            _remove_global_hooks(global_left)  # the next case starts clean
        if raised is not None:
            record["raised"] = raised
            return record
        cases.append({
            "on": on,
            # The model, by its place among _layer_cases() (built from the seed), and x.
            "given": {"model": index, "seed": _LAYER_SEED, "x": given(x)},
            "got": _shapes_facts(got),
            "containers": [name or "(the model)" for name, m in model.named_modules() if list(m.children())],
            "forwards": len(calls),
            "hooks_left": _hooks_left(model),
            "callers_hook_removed": not callers_kept,
            "global_hooks_left": len(global_left),
            "forwards_replaced": [n for n in _forwards_replaced(model) if n not in forwards_before],
            "mode_changed": modes != [m.training for m in model.modules()],
            "grad_changed": grad_after != (not no_grad),
        })
        for module in model.modules():  # the next case starts clean, whatever this answer left
            module._forward_hooks.clear()
            module._forward_pre_hooks.clear()
    broken = _Breaks()
    on = ("a model whose forward raises a ValueError of its own after its first layer (its second "
          "Linear expects 6 features, gets 5)")
    global_before = _global_hooks()
    try:
        run(answer, broken, torch.randn(2, 4, generator=_generator(17)), on=on)
        raised = None
    except LearnerRaised as error:
        raised = {"type": type(error.error).__name__, "message": _first_line(error.error)}
    finally:
        _remove_global_hooks(_global_hooks() - global_before)  # the session as the answer found it
    record["broken"] = {"on": on, "raised": raised, "hooks_left": _hooks_left(broken)}
    return record


def _replaced_output(received):
    """The layer whose output a hook replaced, and by what, from what each layer received in
    the order they ran; None when every layer received a tensor."""
    for index, (name, value) in enumerate(received):
        if value is not None and index > 0:
            return {"layer": received[index - 1][0], "next": name, "kind": _kind(value)}
    return None


def _expect_layer_output_shapes(record):
    """The (name, shape) pairs the reference records on each model, rebuilt from its recorded
    place and seed, with the recorded x, and the layers' input shapes (what an answer that
    reads the inputs records), for the judge."""
    with judge_side():
        models = _layer_cases()
        for case in record["cases"]:
            _, model, _ = models[case["given"]["model"]]
            x = tensor_of(case["given"]["x"])
            case["expected"] = [[name, list(shape)] for name, shape in layer_output_shapes.reference(model, x)]
            case["inputs"] = [[name, list(shape)] for name, shape in _input_shapes(model, x)]
        broken = record.get("broken")
        if broken is not None:  # the error the reference lets through: the forward's own
            try:
                layer_output_shapes.reference(_Breaks(), torch.randn(2, 4, generator=_generator(17)))
            except Exception as error:
                broken["expected_raised"] = {"type": type(error).__name__, "message": _first_line(error)}
    return record


def _input_shapes(model, x):
    """(name, shape of the first input) per leaf call: what an answer reading inputs records."""
    shapes, handles = [], []
    for name, module in model.named_modules():
        if not list(module.children()):
            handles.append(module.register_forward_pre_hook(
                lambda m, inputs, name=name: shapes.append((name, tuple(inputs[0].shape)))))
    try:
        with torch.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def _judge_layer_output_shapes(record):
    for case in record["cases"]:
        on, got, expected = case["on"], case["got"], case["expected"]
        if case["hooks_left"]:
            second = "second call" in on
            return MESSAGES("hooks-left",
                            hooks_left=', '.join(case['hooks_left'][:3]),
                            on=on,
                            second=MESSAGES.text("hooks-left-second-call") if second else '')
        if case.get("global_hooks_left"):
            return MESSAGES("global-hook-left", global_hooks_left=case['global_hooks_left'], on=on)
        if case.get("forwards_replaced"):
            return MESSAGES("forward-replaced",
                            forwards_replaced=', '.join(case['forwards_replaced'][:3]),
                            on=on)
        if case.get("callers_hook_removed"):
            return MESSAGES("removed-others-hooks", on=on)
        if case["forwards"] != 1:
            return MESSAGES("ran-model-twice" if case["forwards"] > 1 else "never-ran-model",
                            forwards=case['forwards'], on=on)
        if case["mode_changed"]:
            return MESSAGES("changed-mode", what=MESSAGES.text("train-eval-mode"), on=on)
        if case["grad_changed"]:
            before, after = ("off", "on") if "no_grad" in on else ("on", "off")
            return MESSAGES("changed-grad-mode", on=on, before=before, after=after)
        if got["kind"] != "pairs":
            return MESSAGES("not-pairs", kind=got['kind'], on=on)
        pairs = got["pairs"]
        if pairs == expected and got.get("shape_not_tuple"):
            wrong = got["shape_not_tuple"]
            return MESSAGES("shape-not-tuple", name=wrong['name'], kind=wrong['kind'], on=on)
        if pairs == expected:
            continue
        if pairs == case["inputs"]:
            return MESSAGES("input-shapes", on=on)
        names = [name for name, _ in pairs]
        containers = [name for name in names if name in case["containers"]
                      or (name == "" and "(the model)" in case["containers"])]
        if containers:
            return MESSAGES("containers-included",
                            n_containers=', '.join(repr(n) for n in containers[:3]),
                            on=on)
        expected_names = [name for name, _ in expected]
        if sorted(names) == sorted(expected_names) and names != expected_names:
            return MESSAGES("wrong-order", on=on, names=names, expected_names=expected_names)
        if set(names) == set(expected_names) and len(names) < len(expected_names):
            return MESSAGES("one-entry-per-layer", on=on, names=names, expected_names=expected_names)
        if any("." in name for name in expected_names) and not any("." in name for name in names):
            return MESSAGES("children-only", names=names, expected_names=expected_names, on=on)
        return MESSAGES("wrong-pairs", pairs=pairs, expected=expected, on=on)
    if record.get("raised"):
        replaced = record.get("replaced_output")
        if replaced:
            error = record["raised"]
            return MESSAGES("hook-returned-value",
                            type=error['type'],
                            message=error['message'],
                            on=replaced['on'],
                            kind=replaced['kind'],
                            layer=replaced['layer'],
                            next=replaced['next'])
        return Raised(record["raised"])
    broken = record.get("broken")
    if broken is not None:
        on = broken["on"]
        if broken["raised"] is None:
            return MESSAGES("swallowed-error", on=on)
        if broken["hooks_left"]:
            return MESSAGES("hooks-left-after-error", hooks_left=', '.join(broken['hooks_left'][:3]), on=on)
        want = broken.get("expected_raised")
        if want is not None and broken["raised"] != want:
            return MESSAGES("error-replaced", on=on, type=broken["raised"]["type"],
                            message=broken["raised"]["message"], want_type=want["type"],
                            want_message=want["message"])
    return None


layer_output_shapes = Exercise(
    "layer_output_shapes",
    chapter=CHAPTER,
    title="A forward hook of your own",
    expects=Function("layer_output_shapes", ("model", "x"),
                     returns="a list of (name, shape) pairs, one per layer call"),
    probe=_probe_layer_output_shapes,
    expect=_expect_layer_output_shapes,
    judge=_judge_layer_output_shapes,
    reference=layer_output_shapes,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    messages=MESSAGES,
)
