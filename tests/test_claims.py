"""What the chapters claim about PyTorch, checked against what PyTorch does here.

Each test computes the truth with torch (or reads it from torch's own source) and asserts that
the chapter's text agrees with it: a claim that is true on one device or version only says so.
"""

from __future__ import annotations

import json
import sys
import types
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]


def cells(chapter: str) -> list[dict]:
    path = next((ROOT / "solutions").glob(f"{chapter}*.ipynb"))
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def text(chapter: str) -> str:
    """All of a chapter's cells, markdown and code, joined (line breaks as spaces)."""
    return " ".join("".join(c["source"]).replace("\n", " ") for c in cells(chapter))


def test_autocast_on_the_cpu_leaves_softmax_and_sums_in_16_bits_and_chapter_05_says_so():
    h = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        product = h @ torch.randn(8, 8)
        on_cpu = {product.softmax(-1).dtype, product.sum().dtype, F.layer_norm(product, (8,)).dtype}
        loss = F.cross_entropy(product, torch.zeros(4, dtype=torch.long)).dtype
    assert on_cpu == {torch.bfloat16} and loss == torch.float32
    chapter = text("05")
    assert "losses, softmax and reductions stay in float32" not in chapter
    assert "which is why autocast keeps sums and losses in float32" not in chapter
    assert "on the CPU only the losses and some linear algebra are on autocast's float32 list" in chapter
    assert 'torch.autocast("cpu", enabled=False)' in chapter  # the fix is shown running


def test_an_inference_tensor_can_enter_a_graph_but_never_be_saved_and_chapter_07_says_so():
    with torch.inference_mode():
        features = torch.ones(3)
    shift = torch.zeros(3, requires_grad=True)
    (features + shift).sum().backward()  # an addition saves nothing: allowed
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        features * shift
    chapter = text("07")
    assert "can never enter a graph later" not in chapter
    assert "cannot take part in training later" not in chapter
    assert "never be *saved* by autograd for a backward pass" in chapter


def test_a_0d_integer_index_gives_a_view_and_chapter_01_says_so():
    x = torch.arange(12.0).reshape(3, 4)
    picked = x[torch.tensor(1)]
    assert picked.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert "a 0-d integer tensor (an index from `argmax()`, say) counts as an integer" in text("01")


def test_torch_softmax_does_not_overflow_and_chapter_03_does_not_say_it_does():
    big = torch.tensor([1000.0, 0.0])
    assert torch.softmax(big, 0).isfinite().all() and torch.log(torch.softmax(big, 0))[1] == -torch.inf
    chapter = text("03")
    assert "with large logits, `exp` overflows" not in chapter
    assert "`torch.softmax` itself does not overflow" in chapter


def test_bce_with_logits_gradient_is_divided_by_the_entries_the_mean_averages():
    logits, labels = torch.tensor([2.0, -1.0, 0.5], requires_grad=True), torch.tensor([1.0, 0.0, 1.0])
    F.binary_cross_entropy_with_logits(logits, labels).backward()
    torch.testing.assert_close(logits.grad, (torch.sigmoid(logits.detach()) - labels) / 3)
    assert 'divided by the number of entries the default `reduction="mean"`' in text("03")


def test_persistent_workers_draw_their_seeds_once_and_chapter_07_says_so():
    from torch.utils.data import DataLoader, TensorDataset

    def next_draw(persistent, epochs):
        g = torch.Generator().manual_seed(0)
        loader = DataLoader(TensorDataset(torch.arange(8)), batch_size=4, shuffle=True, generator=g,
                            num_workers=1, persistent_workers=persistent)
        for _ in range(epochs):
            list(loader)
        return torch.randint(0, 10**9, (1,), generator=g).item()

    assert next_draw(True, 1) == next_draw(False, 1)  # the first epoch draws the same
    assert next_draw(True, 2) != next_draw(False, 2)  # later ones: persistent workers draw no seeds
    assert "With\n`persistent_workers=True` the workers, and so their seeds, are made once".replace("\n", " ") in text("07")


def test_the_loose_wordings_are_gone():
    assert "keep gradients at one scale whatever happens" not in text("06")
    assert "messages and numbers are the same on every machine" not in text("06")
    assert "the same numbers on every machine" not in text("03")
    assert "nothing underflows" not in text("05") and "about three significant digits" not in text("05")
    chapter_00 = text("00")
    assert "is not compatible with the current PyTorch installation" in chapter_00
    assert "which is of compute capability (CC)" in chapter_00  # torch's other message, quoted too


def test_torchs_two_capability_messages_are_the_ones_chapter_00_quotes():
    source = Path(torch.cuda.__file__).read_text(encoding="utf-8")
    assert "with CUDA capability sm_{} is not compatible with the current PyTorch installation" in source
    if "which is of compute capability (CC)" not in source:  # older torch words it otherwise
        pytest.skip(f"torch {torch.__version__} words its other capability warning differently")


def test_the_jit_trace_cell_says_so_when_it_breaks_on_python_3_14(monkeypatch, capsys):
    chapter = cells("03")
    gate_cell = next("".join(c["source"]) for c in chapter if "class DataGate(nn.Module)" in "".join(c["source"]))
    trace_cell = next("".join(c["source"]) for c in chapter if "traced = torch.jit.trace(gate" in "".join(c["source"]))

    def broken_trace(*args, **kwargs):
        warnings.warn("`torch.jit.trace` is not supported in Python 3.14+ and may break.", DeprecationWarning)
        raise RuntimeError("TorchScript cannot read this Python")

    monkeypatch.setattr(torch.jit, "trace", broken_trace)
    import contextlib
    import io
    import logging

    from course_utils.demo import expect_error

    namespace = {"torch": torch, "nn": torch.nn, "warnings": warnings, "logging": logging,
                 "contextlib": contextlib, "io": io, "expect_error": expect_error,
                 "sys": types.SimpleNamespace(version_info=(3, 14, 0))}
    exec(gate_cell, namespace)  # noqa: S102 - the chapter's own code
    exec(trace_cell, namespace)  # noqa: S102
    assert "torch.jit.trace broke on Python 3.14" in capsys.readouterr().out
    namespace["sys"] = sys  # on the Python this course runs here, the same error is not hidden
    with pytest.raises(RuntimeError, match="TorchScript cannot read"):
        exec(trace_cell, namespace)  # noqa: S102


def test_early_stoppings_text_reference_and_check_agree_on_losses_that_are_all_inf():
    from course_utils.exercises import training_loop as ex

    stopper = ex.EarlyStopping.reference(patience=2)
    said = [stopper.step(float("inf")) for _ in range(3)]
    assert said == [False, True, True] and stopper.best_epoch is None  # the worked answer
    chapter = text("04")
    assert "leave `best_epoch` at `None` and count every epoch as one without improvement" in chapter
    assert "The check accepts either reading, not a mix of the two." in chapter

    class FirstIsBest(ex.EarlyStopping.reference):
        def step(self, val_loss):
            if self.best_epoch is None and val_loss == float("inf"):  # the other reading
                self.epoch += 1
                self.best_epoch = self.epoch
                return False
            return super().step(val_loss)

    assert ex.EarlyStopping.verdict(ex.EarlyStopping.reference).passed
    assert ex.EarlyStopping.verdict(FirstIsBest).passed


@pytest.mark.parametrize("chapter", ["01", "06"])
def test_the_first_meta_operation_is_paid_in_the_imports_cell(chapter):
    """The first meta operation imports sympy (seconds on a slow disk): in a cell that looks
    trivial the wait is a surprise; in the imports cell it is expected."""
    code = [("".join(c["source"])) for c in cells(chapter) if c["cell_type"] == "code"]
    first_meta = next(i for i, source in enumerate(code) if '"meta"' in source)
    imports = next(i for i, source in enumerate(code) if "import torch" in source)
    assert first_meta == imports, (first_meta, imports)


def test_chapter_07_says_once_what_persistent_workers_draw():
    sentence = "(With `persistent_workers=True` the workers, and so their seeds, are made once"
    assert text("07").count(sentence) == 1


def test_an_inference_tensor_cannot_be_changed_in_place_later_and_chapters_02_and_07_say_so():
    with torch.inference_mode():
        made = torch.ones(3)
        made.add_(1)  # inside inference mode: allowed
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        made.add_(1)
    with torch.no_grad(), pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        made[0] = 0.0  # no_grad is not inference mode
    copy = made.clone()
    copy.add_(1)
    assert not copy.is_inference()
    for chapter in ("02", "07"):
        assert 'match="Inplace update to inference tensor outside InferenceMode"' in text(chapter)
    assert "an inference tensor cannot be changed in place" in text("07")


def test_reordering_a_float32_sum_changes_its_last_digits_and_chapter_06_shows_an_order_not_a_precision():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1_000_000, generator=g) * 10.0 ** torch.randint(-3, 7, (1_000_000,), generator=g)
    assert not torch.equal(x.sum(), x.flip(0).sum())
    # cumsum on the CPU accumulates float32 in float64: not a float32 order, so the chapter avoids it
    y = torch.tensor([1e8, 1.0, -1e8])
    assert y.cumsum(0)[-1].item() == 1.0 and y.sum().item() == 0.0
    chapter = text("06")
    assert "x.cumsum(0)" not in chapter and "assert not all(same)" in chapter
    assert "(more precision, not another order)" in chapter
    assert "so a seeded GPU run repeats only with the deterministic settings above" in chapter


def test_chapter_04_gives_the_thread_count_as_a_count_not_a_measured_share():
    chapter = text("04")
    assert "2 cores' worth" not in chapter
    assert "That is a count, not a measurement" in chapter


def test_chapter_06_says_what_cudnn_benchmark_loses_under_deterministic_algorithms():
    chapter = text("06")
    assert "With `benchmark` on, deterministic algorithms stay deterministic" in chapter
    assert "defeats" not in chapter
