"""diagnose: describe() and tensor_summary(), the shape trace, gradient norms, the first nan.

The models here are made up for the tests and appear in no notebook: the helpers must work on
whatever model a learner brings.
"""

import math

import numpy as np
import pytest
import torch
from torch import nn

from course_utils.diagnose import (
    describe,
    first_non_finite,
    gradient_norms,
    shape_trace,
    tensor_summary,
)


def printed(capsys, *args, **kwargs) -> list[str]:
    describe(*args, **kwargs)
    return capsys.readouterr().out.splitlines()


def test_a_single_tensor_gets_no_name_column(capsys):
    assert printed(capsys, torch.zeros(3, 4)) == ["shape (3, 4)  float32  cpu  contiguous"]


def test_a_transposed_tensor_is_not_contiguous(capsys):
    assert printed(capsys, torch.zeros(3, 4).T) == ["shape (4, 3)  float32  cpu  NOT contiguous"]


def test_autograd_state_shows_requires_grad_and_the_grad_fn(capsys):
    w = torch.ones(2, requires_grad=True)
    lines = printed(capsys, w=w, y=w * 2)
    assert lines == [
        "w  shape (2,)  float32  cpu  contiguous  requires_grad",
        "y  shape (2,)  float32  cpu  contiguous  requires_grad  grad_fn=MulBackward0",
    ]


def test_several_positional_tensors_are_numbered_and_aligned(capsys):
    lines = printed(capsys, torch.zeros(3, 4), torch.zeros(10, dtype=torch.int64).view(2, 5).T)
    assert lines == [
        "#0  shape (3, 4)  float32  cpu  contiguous",
        "#1  shape (5, 2)  int64    cpu  NOT contiguous",
    ]


def test_positional_and_named_tensors_together(capsys):
    lines = printed(capsys, torch.zeros(1), target=torch.zeros(1, dtype=torch.float64))
    assert [line.split()[0] for line in lines] == ["#0", "target"]
    assert "float64" in lines[1]


def test_non_tensors_say_what_they_are_and_do_not_widen_the_columns(capsys):
    x = torch.zeros(3, 4)
    lines = printed(capsys, x=x, batch=[x, x, x], mixed=[1, 2, 3], arr=np.zeros((3, 4)), lr=1.5)
    assert lines == [
        "x      shape (3, 4)  float32  cpu  contiguous",
        "batch  list of 3 tensors",
        "mixed  list of 3",
        "arr    numpy.ndarray (3, 4) float64",
        "lr     float 1.5",
    ]


def test_a_non_tensor_alone_is_one_plain_line(capsys):
    assert printed(capsys, [1, 2, 3]) == ["list of 3"]
    assert printed(capsys, None) == ["None"]


def test_tensor_summary_fields():
    w = torch.ones(3, 4, requires_grad=True)
    assert tensor_summary((w * 2).transpose(0, 1)) == {
        "shape": (4, 3),
        "dtype": "float32",
        "device": "cpu",
        "contiguous": False,
        "requires_grad": True,
        "grad_fn": "TransposeBackward0",
        "numel": 12,
        "bytes": 48,
    }
    assert tensor_summary(torch.zeros(2, dtype=torch.float16))["grad_fn"] is None
    assert tensor_summary(torch.zeros(2, dtype=torch.float16))["bytes"] == 4


def test_tensor_summary_refuses_non_tensors_by_naming_them():
    with pytest.raises(TypeError, match="numpy.ndarray"):
        tensor_summary(np.zeros(2))


# --- models no notebook uses ----------------------------------------------------------------


class TinyCNN(nn.Module):
    """Flattens in ``forward``; ``flat`` is what ``fc1`` expects, right or wrong."""

    def __init__(self, flat: int = 16 * 4 * 4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.fc1 = nn.Linear(flat, 12)
        self.fc2 = nn.Linear(12, 10)

    def forward(self, x):
        x = torch.flatten(self.features(x), 1)
        return self.fc2(torch.relu(self.fc1(x)))


class Concat(nn.Module):
    def forward(self, a, b):
        return torch.cat([a, b], dim=0)  # should have been dim=1


class TwoBranches(nn.Module):
    """Joins two branches with a custom module, or with ``torch.cat`` in its own forward."""

    def __init__(self, join_in_forward: bool = False):
        super().__init__()
        self.left = nn.Linear(4, 4)
        self.right = nn.Linear(4, 3)
        self.join = Concat()
        self.join_in_forward = join_in_forward

    def forward(self, x):
        a, b = self.left(x), self.right(x)
        if self.join_in_forward:
            return torch.cat([a, b], dim=0)
        return self.join(a, b)


class SharedAct(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.act = nn.Linear(4, 8), nn.Linear(8, 2), nn.Tanh()
        self.drop = nn.Dropout(0.5)
        self.norm = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.act(self.fc2(self.drop(self.norm(self.act(self.fc1(x))))))


def no_hooks_left(model: nn.Module) -> bool:
    return all(
        not m._forward_hooks
        and not m._forward_pre_hooks
        and not m._forward_hooks_with_kwargs
        and not m._forward_pre_hooks_with_kwargs
        for m in model.modules()
    )


BATCH = torch.randn(8, 3, 32, 32)


# --- shape_trace ----------------------------------------------------------------------------


def test_a_wrong_flatten_size_stops_the_trace_at_the_linear_with_its_input_shape():
    trace = shape_trace(TinyCNN(flat=256), BATCH)  # 32x32 images flatten to 400, not 256
    assert not trace.ok
    assert trace.failed_at == "fc1" and trace.failed_after is None
    last = trace.rows[-1]
    assert (last.name, last.type, last.input_shapes) == ("fc1", "Linear", ((8, 400),))
    assert "mat1 and mat2 shapes cannot be multiplied" in last.error
    assert last.error.startswith("RuntimeError: ")
    assert [r.name for r in trace.rows] == [f"features.{i}" for i in range(6)] + ["fc1"]
    assert trace.rows[5].output_shapes == ((8, 16, 5, 5),)
    assert "fc2" not in [c.name for c in trace.calls]  # the trace stops where it failed
    assert isinstance(trace.error, RuntimeError)
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        trace.raise_error()


def test_the_text_table_lines_up_and_ends_with_the_error():
    lines = str(shape_trace(TinyCNN(flat=256), BATCH)).splitlines()
    assert lines[0].split() == ["#", "layer", "type", "input", "output"]
    assert lines[1] == "1  features.0  Conv2d     (8, 3, 32, 32)   (8, 6, 28, 28)"
    assert lines[7] == (
        "7  fc1         Linear     (8, 400)         ✗ RuntimeError: mat1 and mat2 shapes "
        "cannot be multiplied (8x400 and 256x12)"
    )
    assert lines[8].startswith("failed at fc1 (Linear): RuntimeError: mat1 and mat2")
    assert lines[9] == "tensors: float32 on cpu"


def test_a_model_that_runs_through_shows_leaves_and_its_output():
    trace = shape_trace(TinyCNN(), torch.randn(2, 3, 28, 28))
    assert trace.ok and trace.error is None and trace.failed_at is None
    assert trace.output == "(2, 10)"
    assert [r.name for r in trace.rows][-2:] == ["fc1", "fc2"]
    assert trace.rows[-2].input_shapes == ((2, 256),)
    trace.raise_error()  # nothing to raise
    tree = trace.with_containers()
    assert [(r.name, r.depth) for r in tree.rows[:3]] == [
        ("(model)", 0), ("features", 1), ("features.0", 2)
    ]
    assert "      features.0" in str(tree)


def test_torch_cat_on_the_wrong_dim_in_a_custom_module_is_that_modules_error():
    trace = shape_trace(TwoBranches(), torch.randn(2, 4))
    assert trace.failed_at == "join" and trace.failed.type == "Concat"
    assert trace.failed.input_shapes == ((2, 4), (2, 3))
    assert trace.failed.inputs == "(2, 4), (2, 3)"
    assert "Sizes of tensors must match" in trace.failed.error


def test_an_error_in_code_between_layers_belongs_to_the_parent_after_its_last_layer():
    trace = shape_trace(TwoBranches(join_in_forward=True), torch.randn(2, 4))
    assert trace.failed_at == "(model)" and trace.failed_after == "right"
    assert trace.rows[-1].name == "(model)" and trace.rows[-1].input_shapes == ((2, 4),)
    text = str(trace)
    assert "forward code of TwoBranches (the model) itself" in text
    assert "after right returned" in text and "Sizes of tensors must match" in text


def test_a_shared_layer_appears_once_per_call():
    trace = shape_trace(SharedAct().eval(), torch.randn(5, 4))
    assert [r.label for r in trace.rows] == ["fc1", "act", "norm", "drop", "fc2", "act (call 2)"]
    assert [r.call for r in trace.rows if r.name == "act"] == [1, 2]
    assert [r.output_shapes for r in trace.rows if r.name == "act"] == [((5, 8),), ((5, 2),)]


@pytest.mark.parametrize("broken", [False, True])
def test_hooks_are_removed_and_the_model_left_as_it_was(broken):
    model = SharedAct().train()
    model.drop.eval()  # a mixed state must survive too
    mine = model.fc1.register_forward_hook(lambda *args: None)
    stats = model.norm.running_mean.clone(), int(model.norm.num_batches_tracked)
    x = torch.randn(5, 3 if broken else 4)
    trace = shape_trace(model, x)
    assert trace.ok is not broken
    assert list(model.fc1._forward_hooks) == [mine.id]  # the learner's own hook stays
    mine.remove()
    assert no_hooks_left(model)
    assert model.training and model.norm.training and not model.drop.training
    assert torch.equal(model.norm.running_mean, stats[0])  # a train-mode pass updated it
    assert int(model.norm.num_batches_tracked) == stats[1]
    assert all(p.grad is None for p in model.parameters())


def test_several_inputs_keyword_arguments_and_tuple_or_dict_outputs():
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(4, 6, batch_first=True)
            self.head = nn.Linear(6, 3)

        def forward(self, x, lengths, mask=None, temperature=1.0):
            out, h = self.rnn(x)
            out = out * mask[..., None] / temperature
            return {"tags": self.head(out), "last": h}

    x, mask = torch.randn(2, 5, 4), torch.ones(2, 5)
    trace = shape_trace(Tagger(), x, [5, 3], mask=mask, temperature=2.0)
    assert trace.ok
    rnn = trace.rows[0]
    assert rnn.output == "((2, 5, 6), (1, 2, 6))"
    assert rnn.output_shapes == ((2, 5, 6), (1, 2, 6))
    assert trace.output == "{tags: (2, 5, 3), last: (1, 2, 6)}"
    root = trace.with_containers().rows[0]
    assert root.inputs == "(2, 5, 4), [5, 3], mask=(2, 5), temperature=2.0"


def test_a_dtype_mismatch_shows_the_dtype_column_with_the_weights_dtype():
    trace = shape_trace(nn.Sequential(nn.Linear(4, 3)), torch.randn(2, 4, dtype=torch.float64))
    assert trace.failed.dtype == "float64 (weights float32)"
    assert "float64 (weights float32)" in str(trace).splitlines()[1]


def test_the_html_table_highlights_the_failing_row_only():
    page = shape_trace(TinyCNN(flat=256), BATCH)._repr_html_()
    assert page.startswith("<table>") and page.count("<tr style='background:#fdd'>") == 1
    assert "mat1 and mat2" in page
    assert "#fdd" not in shape_trace(TinyCNN(), torch.randn(1, 3, 28, 28))._repr_html_()


def test_an_exception_the_model_catches_is_shown_but_not_blamed_for_a_later_one():
    class Fallback(nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.fallback, self.last = nn.Linear(3, 2), nn.Linear(4, 2), nn.Linear(5, 1)

        def forward(self, x):
            try:
                y = self.first(x)
            except RuntimeError:
                y = self.fallback(x)
            return self.last(y)

    trace = shape_trace(Fallback(), torch.randn(2, 4))
    assert [r.name for r in trace.rows] == ["first", "fallback", "last"]
    assert trace.rows[0].caught and trace.rows[0].error is None
    assert str(trace).splitlines()[1].endswith("✗ raised (the model caught the exception)")
    assert trace.failed_at == "last" and trace.failed.input_shapes == ((2, 2),)


def test_a_non_module_is_refused_by_name():
    with pytest.raises(TypeError, match="function"):
        shape_trace(torch.relu, torch.zeros(2))


# --- gradient_norms -------------------------------------------------------------------------


class WithUnusedLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        self.forgotten = nn.Linear(8, 8)  # defined, never called
        self.body[0].bias.requires_grad_(False)

    def forward(self, x):
        return self.body(x)


def backward_once(model, scale=1.0):
    torch.manual_seed(0)
    (model(torch.randn(16, 4)).pow(2).mean() * scale).backward()


def test_the_total_is_what_clip_grad_norm_measures_and_nothing_changes():
    model = WithUnusedLayer()
    backward_once(model)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    norms = gradient_norms(model)
    after = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert after.keys() == grads.keys()
    assert all(torch.equal(after[n], grads[n]) for n in grads)
    clipped = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=math.inf)
    assert norms.total == pytest.approx(float(clipped), rel=1e-6)
    assert norms["body.0.weight"].grad_norm == pytest.approx(float(grads["body.0.weight"].norm()))


def test_parameters_without_a_gradient_are_listed_and_explained():
    model = WithUnusedLayer()
    backward_once(model)
    norms = gradient_norms(model)
    assert [p.name for p in norms.parameters] == [n for n, _ in model.named_parameters()]
    assert norms.without_grad == ["body.0.bias", "forgotten.weight", "forgotten.bias"]
    assert norms["body.0.bias"].note == "frozen (requires_grad=False)"
    assert "not used in the forward" in norms["forgotten.weight"].note
    text = str(norms)
    header = ["parameter", "shape", "grad", "norm", "weight", "norm", "note"]
    assert text.splitlines()[0].split() == header
    assert "forgotten.weight  (8, 8)    no grad" in text
    assert text.splitlines()[-1].startswith("total grad norm ")
    assert "over 3 of 6 parameters" in text


def test_nan_inf_and_zero_gradients_are_flagged():
    model = WithUnusedLayer()
    backward_once(model)
    model.body[2].bias.grad.fill_(float("nan"))
    model.body[2].weight.grad[0, 0] = float("inf")
    model.body[0].weight.grad.zero_()
    norms = gradient_norms(model)
    assert norms.not_finite == ["body.2.weight", "body.2.bias"]
    assert norms["body.2.weight"].note == "NOT FINITE: 1 inf"
    assert norms["body.2.bias"].note == "NOT FINITE: 1 nan"
    assert norms.zero == ["body.0.weight"] and "all zero" in norms["body.0.weight"].note
    assert math.isnan(norms.total)
    assert norms._repr_html_().count("background:#fdd") == 2


def test_before_backward_the_table_says_so():
    norms = gradient_norms(WithUnusedLayer())
    assert norms.total == 0.0
    assert str(norms).splitlines()[-1] == "no parameter has a gradient: call loss.backward() first"
    assert "<table>" in norms._repr_html_()


# --- first_non_finite -----------------------------------------------------------------------


class LogOf(nn.Module):
    def forward(self, x):
        return torch.log(x)  # nan for every negative input


class DeepNet(nn.Module):
    def __init__(self, log_in_forward: bool = False):
        super().__init__()
        self.stem = nn.Linear(4, 8)
        self.body = nn.Sequential(nn.Linear(8, 8), LogOf(), nn.Linear(8, 8))
        self.head = nn.Linear(8, 2)
        self.log_in_forward = log_in_forward

    def forward(self, x):
        x = self.stem(x)
        if self.log_in_forward:
            return self.head(torch.log(x))
        return self.head(self.body(x))


def healthy():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def test_finds_the_log_of_negatives_in_a_middle_layer():
    torch.manual_seed(0)
    model, x = DeepNet(), torch.randn(6, 4)
    found = first_non_finite(model, x)
    assert found and found.where == "module"
    assert (found.module, found.module_type, found.tensor) == ("body.1", "LogOf", "output")
    assert not found.own_code and found.shape == (6, 8)
    with torch.no_grad():
        expected = torch.log(model.body[0](model.stem(x)))
    assert found.nan == int(expected.isnan().sum()) > 0 and found.inf == 0
    assert math.isnan(expected[found.first_index])
    assert found.inputs[0].startswith("input #0 (6, 8) in [-")  # the negatives are the reason
    text = str(found)
    assert text.splitlines()[0] == "first nan/inf made by body.1 (LogOf)"
    assert "its inputs were finite" in text
    assert no_hooks_left(model)


def test_code_between_layers_is_blamed_on_the_module_that_holds_it():
    torch.manual_seed(0)
    found = first_non_finite(DeepNet(log_in_forward=True), torch.randn(6, 4))
    assert (found.module, found.own_code) == ("(model)", True)
    assert found.context == "between stem and head"
    assert found.tensor == "input #0 of head"
    assert "forward code of DeepNet (the model) itself" in str(found)


def test_nan_in_the_data_is_blamed_on_the_data():
    x = torch.randn(6, 4)
    x[2, 1] = float("nan")
    found = first_non_finite(DeepNet(), x)
    assert (found.where, found.tensor) == ("input", "input #0")
    assert (found.nan, found.inf, found.first_index) == (1, 0, (2, 1))
    assert "the input data is not finite" in str(found)
    by_keyword = first_non_finite(healthy(), input=x)
    assert by_keyword.where == "input" and by_keyword.tensor == "argument input="


def test_a_nan_parameter_is_reported_before_any_forward():
    model = healthy()
    with torch.no_grad():
        model[2].weight[1, 3] = float("nan")
        model[2].bias[0] = float("inf")
    found = first_non_finite(model, torch.randn(3, 4))
    assert (found.where, found.tensor, found.first_index) == ("parameter", "2.weight", (1, 3))
    assert found.others == ("2.bias",) and found.calls == 0
    assert str(found).startswith("a parameter is not finite before anything runs: 2.weight (2, 8)")


def test_an_inf_in_one_element_of_a_tuple_output_names_that_element():
    class Pair(nn.Module):
        def forward(self, x):
            return x, x / 0.0

    found = first_non_finite(nn.Sequential(Pair()), torch.ones(2, 2))
    assert (found.module, found.tensor, found.inf) == ("0", "output[1]", 4)


def test_a_healthy_model_is_all_finite_and_left_as_it_was():
    model = healthy().train()
    found = first_non_finite(model, torch.randn(3, 4))
    assert not found and found.where is None and found.calls == 4
    assert str(found) == (
        "all finite: the parameters, buffers, inputs and the outputs of 4 module calls"
    )
    assert "all finite" in found._repr_html_()
    assert no_hooks_left(model) and model.training
    assert all(p.grad is None for p in model.parameters())


def test_a_forward_that_raises_is_reported_not_raised():
    found = first_non_finite(healthy(), torch.randn(3, 5))
    assert not found and isinstance(found.error, RuntimeError)
    assert str(found).startswith("no nan or inf before the forward raised RuntimeError: mat1")


# --------------------------------------------------------------------------------------------
# One module per tool; course_utils.diagnose gathers them
# --------------------------------------------------------------------------------------------


def test_each_tool_lives_in_its_own_module_and_diagnose_re_exports_it():
    import course_utils.diagnose as diagnose
    from course_utils import describe as describe_module
    from course_utils import grad_norms, nonfinite
    from course_utils import shape_trace as shape_trace_module

    homes = {
        "describe": describe_module,
        "tensor_summary": describe_module,
        "shape_trace": shape_trace_module,
        "ShapeTrace": shape_trace_module,
        "LayerCall": shape_trace_module,
        "gradient_norms": grad_norms,
        "GradientNorms": grad_norms,
        "ParameterGradient": grad_norms,
        "first_non_finite": nonfinite,
        "NonFinite": nonfinite,
    }
    for name, module in homes.items():
        assert getattr(diagnose, name) is getattr(module, name), name
        assert getattr(module, name).__module__ == module.__name__, name
    assert set(homes) <= set(diagnose.__all__)
