"""The shipped digits data and its helpers in course_utils.data."""

from __future__ import annotations

import hashlib
import multiprocessing
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from course_utils import data
from course_utils.data import DigitsDataset, load_digits, train_val_split

REPO = Path(__file__).resolve().parents[1]


def test_load_digits_shapes_dtypes_and_range():
    images, labels = load_digits()
    assert images.shape == (1797, 64)
    assert images.dtype == torch.float32
    assert labels.shape == (1797,)
    assert labels.dtype == torch.int64
    assert images.min().item() == 0.0
    assert images.max().item() == 1.0
    # Pixels were integers 0..16 before the division, so images * 16 is whole.
    assert torch.equal(images * 16, (images * 16).round())


def test_load_digits_labels_cover_every_digit():
    _, labels = load_digits()
    assert set(labels.tolist()) == set(range(10))
    counts = torch.bincount(labels, minlength=10)
    assert counts.tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def test_shipped_file_matches_sha256_in_readme():
    readme = (REPO / "course_utils" / "files" / "data" / "README.md").read_text(encoding="utf-8")
    match = re.search(r"sha256:\s*`?([0-9a-f]{64})`?", readme)
    assert match, "course_utils/files/data/README.md must state the sha256 of digits.csv.gz"
    actual = hashlib.sha256(data.DIGITS_FILE.read_bytes()).hexdigest()
    assert actual == match.group(1)
    assert data.DIGITS_FILE == REPO / "course_utils" / "files" / "data" / "digits.csv.gz"
    assert data.DIGITS_FILE.stat().st_size < 300_000


def test_cache_returns_equal_but_independent_tensors():
    images1, labels1 = load_digits()
    images1[0, 0] = 123.0
    labels1[0] = -1
    images2, labels2 = load_digits()
    assert images2[0, 0].item() != 123.0
    assert labels2[0].item() != -1
    images3, labels3 = load_digits()
    assert torch.equal(images2, images3) and torch.equal(labels2, labels3)
    assert images2.data_ptr() != images3.data_ptr()
    assert labels2.data_ptr() != labels3.data_ptr()


def test_missing_file_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "DIGITS_FILE", tmp_path / "nope.csv.gz")
    monkeypatch.setattr(data, "_digits_cache", {})
    with pytest.raises(FileNotFoundError, match="missing"):
        load_digits()


def test_split_sizes_no_overlap_and_determinism():
    n = 1797
    x = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    y = torch.arange(n)
    x_tr, y_tr, x_va, y_va = train_val_split(x, y, val_fraction=0.2, seed=0)
    assert len(x_tr) + len(x_va) == n
    assert len(x_tr) == len(y_tr) and len(x_va) == len(y_va)
    assert len(x_va) == round(0.2 * n)
    # Rows stay paired with their labels.
    assert torch.equal(x_tr[:, 0].long(), y_tr) and torch.equal(x_va[:, 0].long(), y_va)
    train_ids, val_ids = set(y_tr.tolist()), set(y_va.tolist())
    assert not train_ids & val_ids
    assert train_ids | val_ids == set(range(n))

    again = train_val_split(x, y, val_fraction=0.2, seed=0)
    assert all(torch.equal(a, b) for a, b in zip((x_tr, y_tr, x_va, y_va), again))
    other = train_val_split(x, y, val_fraction=0.2, seed=1)
    assert not torch.equal(y_va, other[3])


def test_split_leaves_global_rng_alone_and_rejects_bad_fractions():
    x, y = torch.zeros(10, 2), torch.arange(10)
    torch.manual_seed(42)
    expected = torch.rand(3)
    torch.manual_seed(42)
    train_val_split(x, y, seed=7)
    assert torch.equal(torch.rand(3), expected)
    for bad in (0.0, 1.0, -0.1, 0.01):
        with pytest.raises(ValueError):
            train_val_split(x, y, val_fraction=bad)
    with pytest.raises(ValueError):
        train_val_split(x, y[:5])


def test_split_of_real_digits_has_every_class_in_both_parts():
    x_tr, y_tr, x_va, y_va = train_val_split(*load_digits())
    assert x_tr.shape == (1438, 64) and x_va.shape == (359, 64)
    assert set(y_tr.tolist()) == set(range(10)) == set(y_va.tolist())


def test_dataset_items_and_transform():
    images, labels = load_digits()
    ds = DigitsDataset(images, labels)
    assert len(ds) == 1797
    image, label = ds[5]
    assert torch.equal(image, images[5]) and label.item() == labels[5].item()
    shaped = DigitsDataset(images, labels, transform=lambda t: t.view(1, 8, 8))
    assert shaped[0][0].shape == (1, 8, 8)
    with pytest.raises(ValueError):
        DigitsDataset(images, labels[:10])


def _all_batches(loader):
    xs, ys = zip(*loader)
    return torch.cat(xs), torch.cat(ys)


def test_dataloader_without_workers():
    images, labels = load_digits()
    loader = DataLoader(DigitsDataset(images, labels), batch_size=256, shuffle=False)
    first_x, first_y = next(iter(loader))
    assert first_x.shape == (256, 64) and first_x.dtype == torch.float32
    assert first_y.shape == (256,) and first_y.dtype == torch.int64
    xs, ys = _all_batches(loader)
    assert torch.equal(xs, images) and torch.equal(ys, labels)


def test_dataloader_with_spawned_workers_pickles_the_dataset():
    images, labels = load_digits()
    loader = DataLoader(
        DigitsDataset(images[:200], labels[:200]),
        batch_size=50,
        shuffle=False,
        num_workers=2,
        multiprocessing_context=multiprocessing.get_context("spawn"),
    )
    xs, ys = _all_batches(loader)
    assert torch.equal(xs, images[:200]) and torch.equal(ys, labels[:200])


def test_import_does_not_load_matplotlib():
    code = "import sys, course_utils.data; print('matplotlib' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
