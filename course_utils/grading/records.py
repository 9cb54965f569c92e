"""How a probe's record leaves the kernel: a pipe the kernel can write to and nothing else.

A record written to a file in the kernel's folder could be read, and rewritten, by code the
submission left running beside the check (a thread that waits for the file, copies the right
answers the probe recorded into the learner's, and writes it back before the grader reads it).
So the grader makes a named pipe outside the folder the kernel can see, keeps its read end, and
the kernel's launcher (``limits --records-fifo``, started outside the sandbox) opens its write end
as file descriptor ``RECORDS_FD``, which the kernel inherits. Nothing in the kernel can read from
it. Something can write to it; so each record carries the name of its check cell, and a check
that sends more than one record (or none) gets no score.

A frame is ``MAGIC``, the name's length (2 bytes) and the name, the record's length (8 bytes)
and the record (``plain.dumps``).
"""

from __future__ import annotations

import os
from pathlib import Path

RECORDS_FD = 190  # high, so that the kernel's own files never take its number first
MAGIC = b"CREC"
_MAX_RECORD = 512 * 1024 * 1024


def frame(name: str, payload: bytes) -> bytes:
    encoded = name.encode("utf-8")
    return MAGIC + len(encoded).to_bytes(2, "big") + encoded + len(payload).to_bytes(8, "big") + payload


def send(name: str, payload: bytes, fd: int = RECORDS_FD, _write=os.write) -> None:
    """Write one record to the grader (in the kernel)."""
    data = memoryview(frame(name, payload))
    while data:
        data = data[_write(fd, data):]


class Channel:
    """The grader's end: a named pipe, read without blocking while the notebook runs.

    ``records[name]`` lists every record that arrived for that check cell; ``broken`` says why
    the stream stopped making sense (something wrote there that is not a record), if it did.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        os.mkfifo(self.path, 0o600)
        self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self.buffer = bytearray()
        self.records: dict[str, list[bytes]] = {}
        self.broken: str | None = None
        self.closed = False

    def drain(self) -> None:
        """Read whatever has arrived, and file each complete record under its name."""
        while not self.closed:
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                break
            if not chunk:  # every writer has gone: the kernel ended
                break
            if self.broken is None:
                self.buffer += chunk
        self._parse()

    def _parse(self) -> None:
        while self.broken is None and len(self.buffer) >= 6:
            if self.buffer[:4] != MAGIC:
                self.broken = "something in the notebook wrote to the grader's record channel"
                return
            size = int.from_bytes(self.buffer[4:6], "big")
            if len(self.buffer) < 6 + size + 8:
                return
            name = bytes(self.buffer[6:6 + size]).decode("utf-8", "replace")
            length = int.from_bytes(self.buffer[6 + size:14 + size], "big")
            if length > _MAX_RECORD:
                self.broken = "a record on the grader's channel claims an impossible size"
                return
            end = 14 + size + length
            if len(self.buffer) < end:
                return
            self.records.setdefault(name, []).append(bytes(self.buffer[14 + size:end]))
            del self.buffer[:end]

    def take(self, name: str) -> tuple[bytes | None, str | None]:
        """The one record of check ``name``, or None and why there is none usable."""
        self.drain()
        found = self.records.pop(name, [])
        if len(found) > 1:
            return None, (f"the check's record arrived {len(found)} times: something in the notebook "
                          "wrote to the grader's record channel")
        if self.broken is not None:
            return None, self.broken
        return (found[0], None) if found else (None, None)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)
            self.path.unlink(missing_ok=True)
