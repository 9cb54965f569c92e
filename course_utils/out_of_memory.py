"""Read an out-of-memory message: which of three situations it is, from the numbers it holds.

A CUDA out-of-memory error carries everything needed to choose the fix (the request, the free
memory, what PyTorch's tensors hold, what its cache holds in pieces), but in one long sentence
that most people skim for the word "expandable_segments" and then set it whatever the numbers
say. ``read_out_of_memory`` takes the error (or its text), finds the numbers, and says which
situation they show, with the numbers beside the words so the reader can check the reasoning:

- the request alone is larger than the device: no setting helps, change the shapes;
- free memory plus the cache's unused pieces cannot hold it: not enough room beside the live
  tensors, whatever the layout;
- they could, but not in one piece: fragmentation, which ``expandable_segments`` addresses.

It reads today's CUDA message, the older one (torch < 2.1, still pasted around the web) and
the CPU allocator's. Before raising, the CUDA allocator has already handed its wholly unused
cached blocks back to the driver and retried, so "reserved but unallocated" is what remains in
segments that still hold live tensors: the pieces that only a different layout would join.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_UNITS = {"bytes": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}
_SIZE = r"([0-9][0-9.,]*)\s*(bytes|B|KiB|MiB|GiB|TiB|PiB)"


def _bytes(number: str, unit: str) -> int:
    return round(float(number.replace(",", "")) * _UNITS[unit])


def _size_after(pattern: str, text: str) -> int | None:
    match = re.search(pattern.replace("SIZE", _SIZE), text)
    return _bytes(match.group(1), match.group(2)) if match else None


def _sizes_after(pattern: str, text: str) -> list[int]:
    return [_bytes(n, u) for n, u in re.findall(pattern.replace("SIZE", _SIZE), text)]


def gib(n: int) -> str:
    """Bytes in the unit CUDA's messages use for them."""
    for unit in ("PiB", "TiB", "GiB", "MiB", "KiB"):
        if abs(n) >= _UNITS[unit]:
            return f"{n / _UNITS[unit]:.2f} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True)
class OutOfMemory:
    """The numbers of one out-of-memory message, in bytes (None: the message did not say)."""

    device: str  # "cuda" or "cpu"
    requested: int
    total: int | None = None
    free: int | None = None
    in_use_by_processes: int | None = None  # every process the driver listed, this one included
    allocated: int | None = None  # held by live tensors
    reserved_unallocated: int | None = None  # PyTorch's cache: reserved, holding no tensor

    @property
    def free_plus_cache(self) -> int | None:
        if self.free is None or self.reserved_unallocated is None:
            return None
        return self.free + self.reserved_unallocated

    @property
    def situation(self) -> str:
        """'larger-than-device', 'not-enough-room', 'fragmented' or 'unknown'."""
        if self.total is not None and self.requested > self.total:
            return "larger-than-device"
        room = self.free_plus_cache
        if room is None:
            return "unknown"
        return "not-enough-room" if self.requested > room else "fragmented"

    def reading(self) -> str:
        """The situation in words, each claim beside the numbers it follows from."""
        asked = gib(self.requested)
        if self.device == "cpu":
            ram = physical_memory()
            have = f"; this machine has {gib(ram)} of RAM" if ram else ""
            return (f"The CPU allocator was asked for {asked} in one piece{have}. "
                    + ("The request alone is larger than the memory: look at the shape that asked "
                       "for it (a batch dimension multiplied in twice, an (N, N) where (N,) was "
                       "meant)." if ram and self.requested > ram else
                       "The operating system refused it: other programs, or the tensors this "
                       "process keeps alive, hold the rest."))
        situation = self.situation
        if situation == "larger-than-device":
            return (f"The request alone ({asked}) is larger than the whole device ({gib(self.total)}): "
                    "no allocator setting can help. Look at the shape that asked for it, or make "
                    "that tensor smaller (a smaller batch, shorter sequences, chunks).")
        if situation == "unknown":
            return (f"Asked for {asked}; the message does not say how much is free and cached, "
                    "so the situation cannot be told from it. torch.cuda.memory_summary() says.")
        room, live = gib(self.free_plus_cache), gib(self.allocated) if self.allocated is not None else "?"
        numbers = (f"free {gib(self.free)} + reserved but unallocated {gib(self.reserved_unallocated)} "
                   f"= {room}")
        if situation == "not-enough-room":
            share = f", {self.requested / self.total:.0%} of the device" if self.total else ""
            return (f"Not enough room beside the live tensors: {numbers}, less than the {asked} "
                    f"asked for{share}, so even in one piece it would not fit. Live tensors hold "
                    f"{live}. Make the request, or what stays alive beside it, smaller: a smaller "
                    "batch (gradient accumulation keeps the effective batch), autocast, activation "
                    "checkpointing, no_grad in evaluation, no outputs kept with their graphs. "
                    "expandable_segments would not make this fit.")
        share = self.reserved_unallocated / self.total if self.total else None
        small = share is not None and share < 0.05
        return (f"Fragmented: {numbers}, enough for the {asked} asked for, but not in one piece "
                f"(the allocator already returned its wholly unused blocks and retried). "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets the cache grow one segment "
                "instead of leaving gaps between them."
                + (f" It recovers at most {gib(self.reserved_unallocated)}, "
                   f"{share:.1%} of the device: tensors hold {live}, so the next larger batch "
                   "fails anyway; fewer live bytes is the lasting fix." if small else ""))


def physical_memory() -> int | None:
    """This machine's RAM in bytes, where the operating system says (Linux, macOS)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def read_out_of_memory(error: BaseException | str) -> OutOfMemory | None:
    """The numbers of a CUDA or CPU out-of-memory message; None for any other message."""
    text = " ".join(str(error).split())
    if "CUDA out of memory" in text:
        return _read_cuda(text)
    requested = _size_after(r"DefaultCPUAllocator: .*?you tried to allocate SIZE", text)
    if requested is not None:
        return OutOfMemory("cpu", requested)
    return None


def _read_cuda(text: str) -> OutOfMemory | None:
    requested = _size_after(r"Tried to allocate SIZE", text)
    if requested is None:
        return None
    if "total capacity;" in text:  # torch < 2.1: "(GPU 0; 10.92 GiB total capacity; ...)"
        allocated = _size_after(r"SIZE already allocated", text)
        reserved = _size_after(r"SIZE reserved in total by PyTorch", text)
        return OutOfMemory(
            "cuda", requested,
            total=_size_after(r"SIZE total capacity", text),
            free=_size_after(r"SIZE free", text),
            allocated=allocated,
            reserved_unallocated=None if reserved is None or allocated is None else reserved - allocated,
        )
    in_use = _sizes_after(r"(?:this process|Process \d+) has SIZE memory in use", text)
    return OutOfMemory(
        "cuda", requested,
        total=_size_after(r"total capac\w* of SIZE", text),  # "capacty" in torch 2.1
        free=_size_after(r"of which SIZE is free", text),
        in_use_by_processes=sum(in_use) if in_use else None,
        allocated=_size_after(r"SIZE is allocated by PyTorch", text),
        reserved_unallocated=_size_after(r"SIZE is reserved by PyTorch but unallocated", text),
    )
