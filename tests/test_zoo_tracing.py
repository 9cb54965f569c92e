"""shape_trace and first_non_finite on a zoo of real architectures, checked against hooks of our own.

Each model is small and written for the tests (tests/zoo.py). For every model the shapes shape_trace
records are compared with those our own forward hooks record in a separate pass; for
first_non_finite, a finite model must give "nothing non-finite", and a model with a nan or inf
planted at a known module must name that module (found independently by our hooks too).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

import course_utils.shape_trace
from course_utils.diagnose import first_non_finite, shape_trace
from zoo import (
    B,
    D,
    MASKS,
    MHA_MASKS,
    MODES,
    TRANSFORMER_MASKS,
    ZOO,
    Attention,
    EncoderWithHead,
    InPlaceNet,
    LazyNet,
    LSTMLanguageModel,
    Noisy,
    Prediction,
    Returns,
    Rude,
    T,
    TinyGPT,
    TinyResNet,
    TransformerWithHead,
    float_causal_mask,
    padding_mask,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning"),
    pytest.mark.filterwarnings("ignore:Support for mismatched:UserWarning"),
]



def build(case, mode):
    name, make, args, kwargs = case
    torch.manual_seed(0)
    model = make()
    model.train(mode == "train")
    return model, args(), kwargs()


def grad_mode(mode):
    return torch.no_grad() if mode == "eval+no_grad" else torch.enable_grad()


# --- the independent figure: our own hooks --------------------------------------------------


def shapes_of(value):
    """Every tensor's shape in a result, walked on our own; -1 where a nested tensor's sizes differ."""
    if isinstance(value, torch.Tensor):
        if value.is_nested:
            sizes = [tuple(c.shape) for c in value.unbind()]
            return [(len(sizes), *(d[0] if len(set(d)) == 1 else -1 for d in zip(*sizes)))]
        return [tuple(value.shape)]
    if isinstance(value, PackedSequence):
        return [tuple(value.data.shape)]
    if dataclasses.is_dataclass(value):
        return [s for f in dataclasses.fields(value) for s in shapes_of(getattr(value, f.name))]
    if isinstance(value, dict):
        return [s for v in value.values() for s in shapes_of(v)]
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in shapes_of(v)]
    return []


def has_non_finite(value) -> bool:
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point():
            return False
        parts = value.unbind() if value.is_nested else [value]
        return any(not bool(torch.isfinite(p).all()) for p in parts)
    if isinstance(value, PackedSequence):
        return has_non_finite(value.data)
    if dataclasses.is_dataclass(value):
        return any(has_non_finite(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return any(has_non_finite(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return any(has_non_finite(v) for v in value)
    return False


def watched(model, *args, **kwargs):
    """Run the model with our hooks: [(name, output shapes)] in the order the calls started,
    and the first leaf module (in the order calls returned) whose output is not finite."""
    calls, first_bad, handles = [], [], []
    for name, module in model.named_modules():
        def pre(module, a, name=name or "(model)"):
            calls.append([name, None])
            module._zoo_open = getattr(module, "_zoo_open", []) + [len(calls) - 1]

        def post(module, a, out, name=name or "(model)"):
            calls[module._zoo_open.pop()][1] = shapes_of(out)
            leaf = not any(True for _ in module.children())
            if leaf and not first_bad and has_non_finite(out):
                first_bad.append(name)

        handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    try:
        model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
        for module in model.modules():
            module.__dict__.pop("_zoo_open", None)
    return [(n, tuple(s)) for n, s in calls], (first_bad[0] if first_bad else None)


def traced(trace):
    return [(c.name, c.output_shapes) for c in trace.calls]


# --- shape_trace on the zoo -----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", ZOO, ids=[c[0] for c in ZOO])
def test_shape_trace_matches_our_own_hooks(case, mode):
    model, args, kwargs = build(case, mode)
    with grad_mode(mode):
        trace = shape_trace(model, *args, **kwargs)
        assert trace.ok, str(trace)
        str(trace), trace._repr_html_(), str(trace.with_containers())  # renders without error
        expected, _ = watched(model, *args, **kwargs)
    assert traced(trace) == expected


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", ZOO, ids=[c[0] for c in ZOO])
def test_first_non_finite_finds_nothing_in_a_finite_model(case, mode):
    model, args, kwargs = build(case, mode)
    with grad_mode(mode):
        found = first_non_finite(model, *args, **kwargs)
        assert found.error is None, str(found)
        assert not found, str(found)
        assert "all finite" in str(found)
        _, bad = watched(model, *args, **kwargs)
    assert bad is None


# --- the findings, one by one ---------------------------------------------------------------


def test_the_encoders_fast_path_shows_nested_tensors_and_neither_tool_fails():
    model, args, kwargs = build(("", EncoderWithHead, lambda: (torch.randn(B, T, D),), MASKS["bool padding mask"]), "eval")
    with torch.no_grad():
        trace = shape_trace(model, *args, **kwargs)
        found = first_non_finite(model, *args, **kwargs)
    assert trace.ok, str(trace)
    layer = next(c for c in trace.calls if c.name == "encoder.layers.0")
    assert layer.inputs.startswith("nested [(5, 16), (3, 16)]")
    assert layer.input_shapes[0] == (2, -1, 16)
    assert not found and found.error is None, str(found)


def test_nn_transformer_in_eval_mode_under_no_grad():
    model = TransformerWithHead().eval()
    src, tgt = torch.randn(B, T, D), torch.randn(B, T, D)
    masks = TRANSFORMER_MASKS["bool padding mask"]()
    with torch.no_grad():
        assert shape_trace(model, src, tgt, **masks).ok
        found = first_non_finite(model, src, tgt, **masks)
    assert not found and found.error is None, str(found)


def test_the_tools_keep_the_callers_grad_mode():
    model, args, kwargs = build(ZOO[0], "eval")
    for enabled in (True, False):
        with torch.set_grad_enabled(enabled):
            seen = []
            handle = model.register_forward_pre_hook(lambda m, a: seen.append(torch.is_grad_enabled()))
            try:
                shape_trace(model, *args)
                first_non_finite(model, *args)
            finally:
                handle.remove()
            assert seen == [enabled, enabled]
            assert torch.is_grad_enabled() is enabled


def planted(model_name, mode):
    """A zoo model with an overflow planted at a known module, and that module's name."""
    torch.manual_seed(0)
    if model_name.startswith("encoder"):
        kind = model_name.split(", ", 1)[1]
        model, inputs, masks = EncoderWithHead(), (torch.randn(B, T, D),), MASKS[kind]()
        target = "head"
        weight = model.head.weight
    elif model_name.startswith("transformer"):
        kind = model_name.split(", ", 1)[1]
        model = TransformerWithHead()
        inputs, masks = (torch.randn(B, T, D), torch.randn(B, T, D)), TRANSFORMER_MASKS[kind]()
        target = "head"
        weight = model.head.weight
    elif model_name == "gpt":
        model, inputs, masks = TinyGPT(), (torch.randint(0, 40, (B, 8)),), {}
        target = "blocks.1.mlp.2"
        weight = model.blocks[1].mlp[2].weight
    else:
        model, inputs, masks = Attention(), (10 * torch.randn(B, T, D),), MHA_MASKS[model_name.split(", ", 1)[1]]()
        target = "out"
        weight = model.out.weight
    with torch.no_grad():
        weight.copy_(weight.sign() * 3e38)  # finite, but what it multiplies overflows
    model.train(mode == "train")
    return model, inputs, masks, target


PLANTED = (
    [f"encoder, {k}" for k in MASKS]
    + [f"transformer, {k}" for k in TRANSFORMER_MASKS]
    + [f"mha, {k}" for k in MHA_MASKS]
    + ["gpt"]
)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", PLANTED)
def test_masks_are_passed_over_and_a_real_overflow_after_them_is_named(name, mode):
    model, inputs, masks, target = planted(name, mode)
    with grad_mode(mode):
        found = first_non_finite(model, *inputs, **masks)
        _, bad = watched(model, *inputs, **masks)
    assert bad == target  # our own hooks see the overflow there
    assert found.where == "module" and found.module == target and not found.own_code, str(found)
    assert "the input data" not in str(found) and "itself" not in str(found)


def test_a_mask_given_by_name_is_listed_not_blamed():
    model = EncoderWithHead().eval()
    found = first_non_finite(model, torch.randn(B, T, D), **MASKS["causal and padding"]())
    assert not found
    assert "argument mask=" in str(found) and "on purpose" in str(found)


def test_a_nan_in_a_mask_is_still_reported():
    mask = nn.Transformer.generate_square_subsequent_mask(T)
    mask[0, 0] = float("nan")
    found = first_non_finite(EncoderWithHead(), torch.randn(B, T, D), mask=mask)
    assert found.where == "input" and found.tensor == "argument mask="


def test_the_softmax_of_a_fully_masked_row_is_still_a_nan():
    class FullyMasked(nn.Module):
        def __init__(self):
            super().__init__()
            self.softmax = nn.Softmax(-1)

        def forward(self, x):
            return self.softmax(x + torch.full_like(x, float("-inf")))

    found = first_non_finite(FullyMasked(), torch.randn(2, 3))
    assert found.module == "softmax" and found.nan == 6


@pytest.mark.parametrize("tool", [shape_trace, first_non_finite])
def test_lazy_modules_before_their_first_forward(tool):
    torch.manual_seed(0)
    model = LazyNet()
    x = torch.randn(4, 7)
    result = tool(model, x)
    if tool is shape_trace:
        assert result.ok, str(result)
        assert [c.output_shapes for c in result.calls if c.leaf] == [((4, 10),), ((4, 10),), ((4, 3),)]
    else:
        assert not result and result.error is None, str(result)
    # Initialised by the pass, as a first forward would; its statistics start afresh.
    assert model.fc1.weight.shape == (10, 7)
    assert torch.equal(model.bn.running_mean, torch.zeros(10))
    assert torch.equal(model.bn.running_var, torch.ones(10))
    assert int(model.bn.num_batches_tracked) == 0


@pytest.mark.parametrize("kind", ["tuple", "dict", "namedtuple", "dataclass"])
def test_a_nan_in_a_returned_container_is_found(kind):
    torch.manual_seed(0)
    found = first_non_finite(Returns(kind, bad=True), torch.randn(3, 4))
    assert found.where == "module" and found.module == "(model)" and found.own_code, str(found)
    label = {"tuple": "output[1][0]", "dict": "output['score']", "namedtuple": "output.hidden",
             "dataclass": "output.score"}[kind]
    assert found.tensor == label


def test_a_dataclass_result_shows_its_fields():
    trace = shape_trace(Returns("dataclass"), torch.randn(3, 4))
    assert trace.output == "Prediction(logits=(3, 3), score=(3,))"


def test_input_ranges_are_read_before_an_in_place_change():
    torch.manual_seed(0)
    found = first_non_finite(InPlaceNet(), torch.randn(8, 4))
    assert found.module == "log" and not found.own_code, str(found)
    assert "nan, nan" not in str(found)
    low = float(found.inputs[0].split("in [")[1].split(",")[0])
    assert low < 0  # the range the log was given: negative numbers, hence the nan


@pytest.mark.parametrize("tool", [shape_trace, first_non_finite])
@pytest.mark.parametrize("make", [Noisy, TinyGPT], ids=["randn_like", "dropout"])
def test_the_random_generator_is_left_as_it_was(tool, make):
    model = make().train()
    x = torch.randn(3, 4) if make is Noisy else torch.randint(0, 40, (B, 8))
    torch.manual_seed(123)
    expected = torch.rand(5)
    torch.manual_seed(123)
    tool(model, x)
    assert torch.equal(torch.rand(5), expected)


@pytest.mark.parametrize("tool", [shape_trace, first_non_finite])
def test_modes_are_left_as_they_were(tool):
    model = Rude().train()
    with torch.enable_grad():
        tool(model, torch.randn(3, 4))
        assert torch.is_grad_enabled()
    assert model.training and model.drop.training


def test_a_packed_sequence_is_shown_as_one():
    model = LSTMLanguageModel()
    trace = shape_trace(model, torch.randint(0, 30, (3, 6)), torch.tensor([6, 2, 4]))
    lstm = next(c for c in trace.calls if c.name == "lstm")
    assert lstm.inputs == "PackedSequence(data=(12, 12), batch_sizes=[3, 3, 2, 2, 1, 1])"
    assert lstm.output.startswith("(PackedSequence(data=(12, 12), batch_sizes=[3, 3, 2, 2, 1, 1]), ((1, 3, 12), (1, 3, 12)))")
    assert lstm.input_shapes == ((12, 12),)


def test_a_shared_buffer_mask_is_not_a_broken_buffer():
    model = TinyGPT()
    assert not bool(torch.isfinite(model.blocks[0].attn.causal_mask).all())
    found = first_non_finite(model, torch.randint(0, 40, (B, 8)))
    assert not found, str(found)
    assert "blocks.0.attn.causal_mask" in str(found)


def test_a_failure_of_the_tool_itself_is_warned_about_and_never_breaks_the_model(monkeypatch):
    def broken(self, call, output):
        raise RuntimeError("the tool's own bug")

    monkeypatch.setattr(course_utils.shape_trace._ShapeTracer, "exit", broken)
    with pytest.warns(RuntimeWarning, match="the tool's own bug"):
        trace = shape_trace(TinyResNet(), torch.randn(B, 3, 8, 8))
    assert trace.ok
    str(trace)
