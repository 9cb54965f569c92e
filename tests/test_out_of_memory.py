"""Reading out-of-memory messages (course_utils.out_of_memory), on messages real users captured.

Each message below was pasted by someone who hit it, on a GPU this machine does not have; the
reading must follow from its numbers: the situation, and each number the reading quotes.
"""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest
import torch

from course_utils.out_of_memory import OutOfMemory, gib, read_out_of_memory
from course_utils.pictures.gpu_memory import out_of_memory_bars

GiB, MiB = 2**30, 2**20

# https://github.com/Tianhao-Qi/Mask2DiT/issues/4 (2026): 26.16 + 40.69 GiB could hold 35.60.
FRAGMENTED = (
    "CUDA out of memory. Tried to allocate 35.60 GiB. GPU 0 has a total capacity of 79.33 GiB of "
    "which 26.16 GiB is free. Process 76883 has 53.16 GiB memory in use. Of the allocated memory "
    "11.97 GiB is allocated by PyTorch, and 40.69 GiB is reserved by PyTorch but unallocated. If "
    "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "to avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
# https://github.com/murong-xu/CADS/issues/4: 12.73 + 9.35 GiB = 22.08 GiB < 22.78 GiB.
FULL = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. GPU 0 has a total "
    "capacity of 31.47 GiB of which 12.73 GiB is free. Including non-PyTorch memory, this process "
    "has 18.73 GiB memory in use. Of the allocated memory 9.08 GiB is allocated by PyTorch, and "
    "9.35 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
    "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)
# https://github.com/pytorch/pytorch/issues/16417 (comment, 2024): fragmented, but the cache's
# pieces are under 1 % of the device: live tensors hold 22.90 of 23.65 GiB.
NEARLY_FULL = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a "
    "total capacity of 23.65 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this "
    "process has 23.60 GiB memory in use. Of the allocated memory 22.90 GiB is allocated by "
    "PyTorch, and 194.87 MiB is reserved by PyTorch but unallocated."
)
# https://github.com/QwenLM/Qwen2.5-Omni/issues/240: larger than the 95.22 GiB device; two
# processes listed.
TOO_LARGE = (
    "CUDA out of memory. Tried to allocate 124.68 GiB. GPU 0 has a total capacity of 95.22 GiB of "
    "which 51.23 GiB is free. Process 608946 has 14.91 GiB memory in use. Process 734147 has "
    "29.07 GiB memory in use. Of the allocated memory 25.50 GiB is allocated by PyTorch, and 3.14 "
    "GiB is reserved by PyTorch but unallocated."
)
# https://github.com/pytorch/pytorch/issues/16417 (torch < 2.1 wording)
OLD_WORDING = (
    "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total "
    "capacity; 8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)"
)
# https://github.com/carolchenyx/MGFN./issues/35 (torch 2.1's "capacty", the old advice)
CAPACTY = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a "
    "total capacty of 6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is "
    "allocated by PyTorch, and 2.30 GiB is reserved by PyTorch but unallocated."
)


def close(n, expected):
    return abs(n - expected) <= 0.01 * GiB


def test_a_fragmented_device_is_read_as_fragmented_with_its_numbers():
    oom = read_out_of_memory(FRAGMENTED)
    assert oom.situation == "fragmented"
    assert close(oom.requested, 35.60 * GiB) and close(oom.total, 79.33 * GiB)
    assert close(oom.free_plus_cache, (26.16 + 40.69) * GiB)
    reading = oom.reading()
    assert "Fragmented" in reading and "66.85 GiB" in reading and "35.60 GiB" in reading
    assert "expandable_segments:True" in reading and "recovers at most" not in reading


def test_free_plus_cache_below_the_request_is_not_enough_room_not_fragmentation():
    oom = read_out_of_memory(FULL)
    assert oom.situation == "not-enough-room"
    reading = oom.reading()
    assert "22.08 GiB" in reading and "22.78 GiB" in reading and "9.08 GiB" in reading and "72% of the device" in reading
    assert "would not make this fit" in reading


def test_a_small_cache_on_a_full_device_says_how_little_expandable_segments_recovers():
    oom = read_out_of_memory(NEARLY_FULL)
    assert oom.situation == "fragmented"
    reading = oom.reading()
    assert "recovers at most 194.87 MiB" in reading and "0.8%" in reading and "22.90 GiB" in reading


def test_a_request_larger_than_the_device_says_no_setting_helps():
    oom = read_out_of_memory(TOO_LARGE)
    assert oom.situation == "larger-than-device"
    assert close(oom.in_use_by_processes, (14.91 + 29.07) * GiB)
    assert "no allocator setting can help" in oom.reading()


def test_older_wordings_are_read_too():
    old = read_out_of_memory(OLD_WORDING)
    assert close(old.total, 10.92 * GiB) and close(old.free, 9.28 * GiB)
    assert old.reserved_unallocated is None and old.situation == "unknown"  # "cached" is not split out
    capacty = read_out_of_memory(CAPACTY)
    assert capacty.free == 0 and capacty.situation == "fragmented"  # 0 + 2.30 GiB cached >= 1.70 GiB


def test_the_cpu_allocators_message_from_a_real_failed_allocation():
    with pytest.raises(RuntimeError) as caught:
        torch.empty(2**50)  # 4 PiB: beyond any machine's address space
    oom = read_out_of_memory(caught.value)
    assert oom is not None and oom.device == "cpu" and oom.requested == 4 * 2**50
    assert "4.00 PiB" in oom.reading()


def test_other_messages_are_not_read():
    assert read_out_of_memory("RuntimeError: mat1 and mat2 shapes cannot be multiplied") is None
    assert read_out_of_memory(ValueError("CUDA out of memory, somewhere")) is None


def test_the_bars_draw_each_message_in_its_own_numbers():
    readings = {name: read_out_of_memory(text) for name, text in
                [("fragmented", FRAGMENTED), ("full", FULL), ("old", OLD_WORDING)]}
    fig = out_of_memory_bars(readings)
    axes = fig.axes
    assert len(axes) == 2  # the old wording has no reserved-but-unallocated number to draw
    titles = [ax.get_title(loc="left") for ax in axes]
    assert "fragmented" in titles[0] and "not-enough-room" in titles[1]
    widths = [patch.get_width() for patch in axes[0].patches]
    device = readings["fragmented"]
    assert abs(widths[0] - device.allocated / device.total) < 1e-6
    assert abs(widths[-1] - device.requested / device.total) < 1e-6
    with pytest.raises(ValueError, match="no CUDA message"):
        out_of_memory_bars({"old": readings["old"]})


def test_gib_uses_the_units_of_the_messages():
    assert gib(35.60 * GiB) == "35.60 GiB" and gib(194.87 * MiB) == "194.87 MiB" and gib(12) == "12 bytes"
    assert OutOfMemory("cuda", 1, total=None).situation == "unknown"
