"""SlowDataset: each kind of slowness is a switch, and each fix removes the work it should."""

import pickle
import time

import pytest
import torch
from torch.utils.data import DataLoader

from course_utils.data import SlowDataset


def test_items_are_normalised_images_and_labels_the_same_on_every_run():
    data = SlowDataset(8, read_s=0, setup_s=0)
    image, label = data[3]
    assert len(data) == 8
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32
    assert label.dtype == torch.int64 and 0 <= int(label) < 10
    assert -2.0 < image.mean().item() < 2.0
    again, _ = SlowDataset(8, read_s=0, setup_s=0)[3]
    assert torch.equal(image, again)


def test_light_transform_gives_the_same_shape_and_scale():
    heavy, _ = SlowDataset(4, read_s=0, setup_s=0)[0]
    light, _ = SlowDataset(4, read_s=0, setup_s=0, transform="light")[0]
    assert light.shape == heavy.shape and light.dtype == heavy.dtype
    assert (light - heavy).abs().mean().item() < 0.5
    with pytest.raises(ValueError, match="heavy"):
        SlowDataset(4, transform="fancy")


def test_setup_runs_per_item_unless_moved_into_init():
    per_item = SlowDataset(4, read_s=0, setup_s=0)
    for i in range(4):
        per_item[i]
    assert per_item.setup_calls == 4
    once = SlowDataset(4, read_s=0, setup_s=0, setup_in_init=True)
    for i in range(4):
        once[i]
    assert once.setup_calls == 1


def test_each_item_waits_at_least_read_s():
    data = SlowDataset(4, read_s=0.02, setup_s=0, setup_in_init=True, transform="light")
    start = time.perf_counter()
    data[0], data[1]
    assert time.perf_counter() - start >= 0.04


def test_the_cache_returns_a_finished_item_without_reading_again(monkeypatch):
    import course_utils.data

    waits = []
    monkeypatch.setattr(course_utils.data.time, "sleep", waits.append)  # every "read", logged
    data = SlowDataset(4, read_s=0.05, setup_s=0, cache=True)
    first = data[2]
    reads = len(waits)
    assert reads >= 1 and 0.05 in waits
    second = data[2]
    assert len(waits) == reads, "the cached item was read again"
    assert second is first
    assert data.setup_calls == 1


def test_it_pickles_and_loads_in_worker_processes():
    data = SlowDataset(8, read_s=0, setup_s=0, setup_in_init=True, transform="light")
    assert torch.equal(pickle.loads(pickle.dumps(data))[5][0], data[5][0])
    batches = list(DataLoader(data, batch_size=4, num_workers=2))
    assert [tuple(x.shape) for x, _ in batches] == [(4, 3, 32, 32), (4, 3, 32, 32)]
    assert torch.equal(batches[1][0][1], data[5][0])
