"""What chapter 03's two module checks (``SkipBlock``, ``Tower``) try besides the notebook's
batches, from the engine's catalogues: the edges of float32 that a layer's input may hold
(``edges.py``), the states the module may be in when it is called (``states.py``: eval mode,
grad mode off), the module moved to float64, and what each call leaves behind (the modes of the
submodules, the session's settings, the caller's ``x``). Each exercise says how it records one
call (``call``); the right answer's side of each trial (its output's dtype and grad, the mode
and settings the reference leaves) is computed on the judge's side (``expected_of``)."""

from __future__ import annotations

import contextlib

import torch

from course_utils.exercises import edges, states
from course_utils.exercises.facts import shape_text, tensor_of

# A layer's input is an activation: finite, and small enough that a layer's sums hold it
# exactly as well in one order as in another (a sum near the float32 maximum overflows in one
# order and not in another, which would fail right answers written with einsum or @).
LAYER_INPUT = edges.Allowed(finite=True, low=-1e4, high=1e4)
ZEROS = edges.Allowed(low=0.0, high=0.0)
TRIAL_STATES = ("eval", "no-grad")


def trial_batches(width: int, seed: int) -> list[tuple[str, torch.Tensor]]:
    return [
        ("a batch of the float32 edges a layer's input may hold (±0, subnormals, ±1 and the next "
         "float32, ±89)", edges.edge_tensor((4, width), torch.float32, LAYER_INPUT)),
        ("a batch of large values (up to ±1000)",
         edges.generated((3, width), torch.float32, seed=seed, low=-1000, high=1000)),
        ("a batch of zeros", edges.edge_tensor((2, width), torch.float32, ZEROS)),
        ("an empty batch (0 rows)", torch.zeros(edges.resized((2, width), 0, 0))),
    ]


def fresh_instance(answer, args, run, on: str, *, seed: int, first_batch: torch.Tensor):
    """Another instance of the learner's class, built as the first one was (its layers drawn
    from ``seed``), a lazy layer set up on ``first_batch``: the trials run on it, since the
    first instance went to ``meta``."""
    from course_utils.exercises.models.common import _is_lazy

    torch.manual_seed(seed)
    model = run(answer, *args, on=on)
    if _is_lazy(model):
        run(model, first_batch.clone(), on=f"{on} called on a first batch")
    return model


def _modes(model) -> dict:
    return {name or "(the module)": module.training for name, module in model.named_modules()}


def _one(model, x, run, call_on, call, state):
    """One call of ``model`` on a copy of ``x`` (in ``state``), recorded by ``call``, with what it
    left: the caller's copy of ``x`` tracked or not, the modes, the session's settings."""
    context = run(states.MODULE_STATES[state].put, model, on=call_on) if state else contextlib.nullcontext()
    given_x = x.clone()
    with context:
        before = states.session_settings()
        record = call(model, x, given_x, call_on)
        record["settings_changed"] = states.changed_settings(before, states.session_settings())
    record["x_tracked"] = bool(given_x.requires_grad)
    record["modes"] = _modes(model)
    record["state"] = state
    if state:
        run(model.train, on=call_on)
    return record


def trial_calls(model, x, run, on: str, call, *, seed: int) -> list[dict]:
    """The trials, each recorded by ``call(model, x, given_x, call_on)`` (which runs the model on
    ``given_x``, a copy of ``x``): the edge batches, ``x`` in each state, ``x`` in float64."""
    width = x.shape[-1]
    found = [_one(model, batch, run, f"{on} called on {label}", call, None)
             for label, batch in trial_batches(width, seed)]
    shape = shape_text(list(x.shape))
    for name in TRIAL_STATES:
        found.append(_one(model, x, run, f"{on}, {states.MODULE_STATES[name].on}, on a batch of shape {shape}",
                          call, name))
    wide_on = f"{on} moved to float64 with .to(torch.float64), on a float64 batch of shape {shape}"
    run(model.to, torch.float64, on=wide_on)
    found.append(_one(model, x.double(), run, wide_on, call, None))
    run(model.to, torch.float32, on=wide_on)
    return found


def expected_of(call: dict, reference_module) -> dict:
    """What a right module gives on the trial ``call`` records (run as the reference, in the same
    state, on the judge's side): its output's kind, shape, dtype and grad, and what it leaves."""
    x = tensor_of(call["given"]["x"])
    module = reference_module().to(x.dtype)
    state = call.get("state")
    context = states.MODULE_STATES[state].put(module) if state else contextlib.nullcontext()
    with context:
        before = states.session_settings()
        out = module(x)
        settings = states.changed_settings(before, states.session_settings())
    return {"kind": "tensor", "shape": list(out.shape), "dtype": str(out.dtype), "device": "cpu",
            "requires_grad": bool(out.requires_grad), "mode": module.training, "settings_changed": settings}


def left_problem(call: dict, expected: dict, messages, on: str):
    """What a call left that the reference does not leave: the caller's x tracked, a submodule
    in another mode, a session setting changed."""
    if call.get("x_tracked"):
        return messages("tracks-callers-x", on=on)
    modes = call.get("modes")
    if modes is not None and "mode" in expected:
        wanted = expected["mode"]
        found = states.differences({"modes": modes, "requires_grad": {}, "grads": {}, "values": {}, "buffers": {}},
                                   {"modes": {name: wanted for name in modes}, "requires_grad": {}, "grads": {},
                                    "values": {}, "buffers": {}})
        if found:
            return messages("mode-changed", on=on, difference=found[0])
    changed = [name for name in call.get("settings_changed", []) if name not in expected.get("settings_changed", [])]
    if changed:
        return messages("changed-settings", settings=" and ".join(changed), on=on)
    return None


# The words of what ``left_problem`` finds: each module exercise's table holds them.
LEFT_TEXTS = {
    "tracks-callers-x": (
        "forward switched on requires_grad of the caller's x (on {on}): the caller decides what is "
        "tracked, and from then on every operation on x is recorded. Leave the input as it is: the "
        "gradient reaches x through your operations whenever the caller asks for it."
    ),
    "mode-changed": (
        "forward changed the module's mode (on {on}): {difference}. model.train() and "
        "model.eval() are the caller's switches; forward only reads self.training."
    ),
    "changed-settings": (
        "forward changed {settings} (on {on}) and left it changed: the caller set it for its own "
        "loop. Leave the session's settings as they were."
    ),
    "forward-changed-params": (
        "forward changed the values of {names} (on {on}): a forward pass only reads the "
        "parameters (the optimizer changes them), so weights loaded with load_state_dict would "
        "be overwritten. Set the parameters up in __init__."
    ),
}


def parameters_changed(model, before: dict) -> list[str]:
    return sorted(name for name, p in model.named_parameters()
                  if name in before and not torch.equal(p.detach(), before[name]))


def parameter_values(model) -> dict:
    return {name: p.detach().clone() for name, p in model.named_parameters()}
