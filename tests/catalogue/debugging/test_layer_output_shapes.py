"""Chapter 06's exercise layer_output_shapes: right answers pass, classic mistakes fail with the message that names them."""

import functools

import pytest
import torch
from torch import nn

from course_utils.exercises import debugging as ex
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- layer_output_shapes (D12) --------------------------------------------------------------------


def shapes_with_handles_in_an_exit_stack(model, x):
    import contextlib

    shapes = []
    with contextlib.ExitStack() as stack:  # a RemovableHandle is a context manager too
        for name, module in model.named_modules():
            if len(list(module.children())) == 0:
                handle = module.register_forward_hook(
                    lambda m, args, out, name=name: shapes.append((name, out.shape)))
                stack.enter_context(handle)
        model(x)
    return shapes


def shapes_with_a_global_hook(model, x):
    names = {module: name for name, module in model.named_modules()}
    leaves = {module for module in names if not any(True for _ in module.children())}
    found = []

    def hook(module, args, output):
        if module in leaves:
            found.append((names[module], tuple(output.size())))

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        model(x)
    finally:
        handle.remove()
    return found


def shapes_with_kwargs_hooks_and_a_class(model, x):
    class Recorder:
        def __init__(self):
            self.rows = []

        def __call__(self, name):
            return lambda module, args, kwargs, output: self.rows.append((name, tuple(output.shape)))

    recorder, handles = Recorder(), []
    for name, module in model.named_modules():
        if not list(module.children()):
            handles.append(module.register_forward_hook(recorder(name), with_kwargs=True))
    try:
        model(x)
    finally:
        while handles:
            handles.pop().remove()
    return recorder.rows


def shapes_then_every_hook_cleared(model, x):
    shapes = []
    for name, module in model.named_modules():
        if not list(module.children()):
            module.register_forward_hook(lambda m, args, out, name=name: shapes.append((name, tuple(out.shape))))
    model(x)
    for module in model.modules():
        module._forward_hooks.clear()  # "no hook left": the caller's go too
    return shapes


def _hooked(record_input=False, remove=True, in_finally=True, containers=False, children_only=False,
            as_dict=False, sort=False, swallow=False, run_twice=False, eval_first=False):
    def answer(model, x):
        shapes, handles = ({} if as_dict else []), []
        modules = model.named_children() if children_only else model.named_modules()
        for name, module in modules:
            if containers or not list(module.children()):
                def hook(m, inputs, output, name=name):
                    shape = tuple((inputs[0] if record_input else output).shape)
                    if as_dict:
                        shapes[name] = shape
                    else:
                        shapes.append((name, shape))
                handles.append(module.register_forward_hook(hook))
        if eval_first:
            model.eval()
        try:
            model(x)
            if run_twice:
                model(x)
        except Exception:
            if not swallow:
                raise
        finally:
            if remove and in_finally:
                for handle in handles:
                    handle.remove()
        if remove and not in_finally:
            for handle in handles:
                handle.remove()
        result = list(shapes.items()) if as_dict else shapes
        return sorted(result) if sort else result
    return answer


# -- issue 45 ----------------------------------------------------------------------------------
def _shapes_issue45(shape_as=tuple, returns=None):
    def answer(model, x):
        shapes, handles = [], []
        for name, module in model.named_modules():
            if not list(module.children()):
                def hook(m, args, out, name=name):
                    shapes.append((name, shape_as(out.shape)))
                    if returns == "pair":
                        return name, tuple(out.shape)
                    if returns == "shape":
                        return out.shape
                    if returns == "list":
                        return shapes
                handles.append(module.register_forward_hook(hook))
        try:
            model(x)
        finally:
            for handle in handles:
                handle.remove()
        return shapes
    return answer


def shapes_as_lists_afterwards(model, x):
    return [[name, list(shape)] for name, shape in _shapes_issue45()(model, x)]


def shapes_hook_returns_its_output(model, x):
    shapes, handles = [], []
    for name, module in model.named_modules():
        if not list(module.children()):
            def hook(m, args, out, name=name):
                shapes.append((name, tuple(out.shape)))
                return out  # the same tensor back: nothing replaced
            handles.append(module.register_forward_hook(hook))
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return [(name, shape) for name, shape in shapes]


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def _run_hooks(model, x, layers, shape_of=lambda o: tuple(o.shape)):
    shapes, handles = [], []
    for name, module in layers:
        handles.append(module.register_forward_hook(lambda m, i, o, name=name: shapes.append((name, shape_of(o)))))
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def _leaves(model):
    return [(n, m) for n, m in model.named_modules() if not list(m.children())]


def l_class_names(model, x):
    return _run_hooks(model, x, [(type(m).__name__.lower(), m) for _, m in _leaves(model)])


def l_with_parameters(model, x):
    return _run_hooks(model, x, [(n, m) for n, m in model.named_modules()
                                 if list(m.parameters(recurse=False))])


def l_known_types(model, x):
    kinds = (nn.Linear, nn.Conv2d, nn.ReLU)
    return _run_hooks(model, x, [(n, m) for n, m in model.named_modules() if isinstance(m, kinds)])


def l_late_binding(model, x):
    shapes, handles = [], []
    for name, module in _leaves(model):
        handles.append(module.register_forward_hook(lambda m, i, o: shapes.append((name, tuple(o.shape)))))
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def l_per_example_shape(model, x):
    return _run_hooks(model, x, _leaves(model), lambda o: tuple(o[0].shape))


def l_last_handle_only(model, x):
    shapes, handle = [], None
    for name, module in _leaves(model):
        handle = module.register_forward_hook(lambda m, i, o, name=name: shapes.append((name, tuple(o.shape))))
    try:
        model(x)
    finally:
        handle.remove()
    return shapes


def l_wrapped_forwards(model, x):
    shapes, originals = [], {}
    for name, module in _leaves(model):
        originals[module] = module.forward

        def wrapped(*args, _f=module.forward, _name=name, **kwargs):
            out = _f(*args, **kwargs)
            shapes.append((_name, tuple(out.shape)))
            return out
        module.forward = wrapped
    try:
        model(x)
    finally:
        for module, forward in originals.items():
            module.forward = forward
    return shapes


def l_global_hook_left(model, x):
    names = {m: n for n, m in _leaves(model)}
    shapes = []

    def hook(module, inputs, output):
        if module in names:
            shapes.append((names[module], tuple(output.shape)))

    torch.nn.modules.module.register_module_forward_hook(hook)
    model(x)
    return shapes


def l_skips_the_top(model, x):
    return _run_hooks(model, x, [(n, m) for n, m in _leaves(model) if n])


def l_calls_forward(model, x):
    shapes, handles = [], []
    for name, module in _leaves(model):
        handles.append(module.register_forward_hook(lambda m, i, o, name=name: shapes.append((name, tuple(o.shape)))))
    try:
        model.forward(x)
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def shapes_with_partial_hooks(model, x):
    shapes = []

    def hook(name, module, inputs, output):
        shapes.append((name, tuple(output.shape)))

    handles = [module.register_forward_hook(functools.partial(hook, name))
               for name, module in model.named_modules() if len(module._modules) == 0]
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def shapes_with_apply_and_a_name_table(model, x):
    names = {module: name for name, module in model.named_modules()}
    shapes, handles = [], []

    def hook(module, inputs, output):
        shapes.append((names[module], tuple(output.shape)))

    def register(module):
        if not list(module.children()):
            handles.append(module.register_forward_hook(hook))

    model.apply(register)
    try:
        model(x)
    finally:
        while handles:
            handles.pop().remove()
    return shapes


# -- issue 45, second fresh round (from the task text) ---------------------------------------
def los_wrap_error(model, x):
    # Re-raises the forward's error wrapped in a RuntimeError of its own: the caller gets
    # another exception (type and message) than the one the forward raised.
    shapes, handles = [], []
    for name, module in _leaves(model):
        handles.append(module.register_forward_hook(
            lambda m, i, o, name=name: shapes.append((name, tuple(o.shape)))))
    try:
        model(x)
    except Exception as error:
        raise RuntimeError(f"layer_output_shapes: the forward failed after {shapes}: {error}") from error
    finally:
        for h in handles:
            h.remove()
    return shapes


def los_grad_switch(model, x):
    # Runs the forward with autograd off, then switches it back on: wrong under torch.no_grad().
    shapes, handles = [], []
    for name, module in _leaves(model):
        handles.append(module.register_forward_hook(
            lambda m, i, o, name=name: shapes.append((name, tuple(o.shape)))))
    torch.set_grad_enabled(False)
    try:
        model(x)
    finally:
        torch.set_grad_enabled(True)
        for h in handles:
            h.remove()
    return shapes


CATALOGUE = Catalogue({
    ex.layer_output_shapes: [
        right("handles as context managers in an ExitStack, torch.Size", shapes_with_handles_in_an_exit_stack),
        right("one global module hook, filtered to the leaves", shapes_with_a_global_hook),
        right("hooks with kwargs from a recorder object", shapes_with_kwargs_hooks_and_a_class),
        wrong("hooks never removed", _hooked(remove=False), "hooks were still on", "handle.remove()",
              kind=STATEFUL),
        wrong("hooks removed only when the forward returns", _hooked(in_finally=False),
              "your hooks stayed on", "finally:", kind=EDGE),
        wrong("the error swallowed", _hooked(swallow=True), "returned normally although the model's forward raised",
              kind=EDGE),
        wrong("input shapes", _hooked(record_input=True), "the layers' *inputs*", "third argument"),
        wrong("containers hooked too", _hooked(containers=True), "which are containers, not layers"),
        wrong("named_children only", _hooked(children_only=True), "model.named_modules() reaches every module"),
        wrong("a dict by name", _hooked(as_dict=True), "A layer called twice appears once"),
        wrong("sorted by name", _hooked(sort=True), "in another order"),
        wrong("the model run twice", _hooked(run_twice=True), "ran the model 2 times"),
        wrong("model.eval() first", _hooked(eval_first=True), "changed the model's train/eval mode"),
        wrong("every hook cleared afterwards", shapes_then_every_hook_cleared, "removed a hook it had not registered",
              kind=EDGE),
        # -- issue 45
        wrong("shapes as lists", _shapes_issue45(shape_as=list), "is a list, not a tuple", kind=EDGE),
        wrong("pairs and shapes as lists", shapes_as_lists_afterwards, "not a tuple", kind=EDGE),
        wrong("the hook returns the pair", _shapes_issue45(returns="pair"), "Your hook returned a value",
              "replaces that layer's output"),
        wrong("the hook returns the shape", _shapes_issue45(returns="shape"), "Your hook returned a value",
              "received torch.Size"),
        wrong("the hook returns the list", _shapes_issue45(returns="list"), "Your hook returned a value"),
        right("the hook returns its output unchanged", shapes_hook_returns_its_output),
        # -- issue 45, fresh round (from the task text) --
        wrong("names from the layers' classes", l_class_names,
              'one (name, shape) pair per layer call, with the name from'),
        wrong('layers are the modules with parameters', l_with_parameters,
              'one (name, shape) pair per layer call, with the name from'),
        wrong('a fixed list of layer types', l_known_types,
              'one (name, shape) pair per layer call, with the name from', kind=EDGE),
        wrong("a lambda that reads the loop's name late", l_late_binding,
              'one (name, shape) pair per layer call, with the name from'),
        wrong('the shape of the first example', l_per_example_shape,
              'one (name, shape) pair per layer call, with the name from'),
        wrong('removes the last handle only', l_last_handle_only,
              'until you remove it: keep the handle register_forward_hook', kind=STATEFUL),
        wrong("wraps each layer's forward", l_wrapped_forwards,
              'hooks, and the layers keep an attribute forward of their own', kind=STATEFUL),
        wrong('a global module hook left on', l_global_hook_left,
              'on. Keep the handle it returns and call handle.remove() in a', kind=STATEFUL),
        wrong("skips the module named ''", l_skips_the_top,
              'one (name, shape) pair per layer call, with the name from', kind=EDGE),
        wrong('model.forward(x) instead of model(x)', l_calls_forward,
              'it once, with the hooks on, and read what they recorded'),
        wrong("model.apply: a layer used twice gets two hooks", shapes_with_apply_and_a_name_table,
              "one Tanh used in both", kind=EDGE),
        right("functools.partial hooks, leaves by len(module._modules)", shapes_with_partial_hooks),
        # -- issue 45, second fresh round (from the task text) --
        wrong("the forward's error wrapped in a RuntimeError", los_wrap_error,
              "the caller got RuntimeError", "Let that very error reach the caller", kind=EDGE),
        wrong("autograd switched off, then on", los_grad_switch,
              "changed torch's global autograd mode", "it was off when", kind=STATEFUL),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
