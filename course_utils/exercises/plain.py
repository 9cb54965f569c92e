"""Plain data: the only thing that crosses from a learner's code to a judge.

A probe runs the learner's code and records what it saw as plain data: ``None``, ``bool``,
``int``, ``float``, ``str``, lists, dicts with string keys, and NumPy arrays of numbers. Nothing
else is accepted, so an object with a rigged ``__eq__`` or a patched ``torch.allclose`` cannot
reach the judge. The grader stores the same data as JSON plus an ``.npz`` file, read back with
``allow_pickle=False``: nothing a submission produced is ever unpickled.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

ARRAY_KEY = "__array__"
_NUMERIC_KINDS = "biufc"  # bool, signed, unsigned, float, complex


class NotPlainData(TypeError):
    """A probe tried to record something that is not plain data (a bug in the probe)."""


def to_plain(value, _path: str = "data"):
    """Return a deep copy of ``value`` made only of plain types, or raise ``NotPlainData``.

    Exact types are required (``type(x) is int``), so a subclass that overrides comparison
    cannot slip through.
    """
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return int(value)
    if kind is float:
        return float(value)
    if kind in (np.bool_,):
        return bool(value)
    if isinstance(value, np.generic) and value.dtype.kind in _NUMERIC_KINDS:
        return value.item()
    if kind is np.ndarray:
        if value.dtype.kind not in _NUMERIC_KINDS:
            raise NotPlainData(f"{_path}: arrays must hold numbers, not {value.dtype}")
        return np.array(value, copy=True)
    if kind in (list, tuple):
        return [to_plain(item, f"{_path}[{i}]") for i, item in enumerate(value)]
    if kind is dict:
        plain = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotPlainData(f"{_path}: dict keys must be str, not {type(key).__name__}")
            plain[key] = to_plain(item, f"{_path}[{key!r}]")
        return plain
    raise NotPlainData(f"{_path}: {kind.__module__}.{kind.__qualname__} is not plain data")


def _split_arrays(value, arrays: dict):
    if isinstance(value, np.ndarray):
        name = f"a{len(arrays)}"
        arrays[name] = value
        return {ARRAY_KEY: name}
    if isinstance(value, list):
        return [_split_arrays(item, arrays) for item in value]
    if isinstance(value, dict):
        if ARRAY_KEY in value:
            raise NotPlainData(f"the key {ARRAY_KEY!r} is reserved")
        return {key: _split_arrays(item, arrays) for key, item in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return {"__float__": repr(value)}
    return value


def _join_arrays(value, arrays):
    if isinstance(value, list):
        return [_join_arrays(item, arrays) for item in value]
    if isinstance(value, dict):
        if set(value) == {ARRAY_KEY}:
            return arrays[value[ARRAY_KEY]]
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {key: _join_arrays(item, arrays) for key, item in value.items()}
    return value


def _write_atomically(path: Path, data: bytes) -> None:
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(value, json_path: str | os.PathLike) -> None:
    """Write plain data as ``NAME.json`` (+ ``NAME.npz`` when it holds arrays)."""
    json_path = Path(json_path)
    arrays: dict = {}
    structure = _split_arrays(to_plain(value), arrays)
    if arrays:
        npz_path = json_path.with_suffix(".npz")
        handle, tmp = tempfile.mkstemp(dir=json_path.parent, suffix=".npz")
        os.close(handle)
        np.savez(tmp, **arrays)
        os.replace(tmp, npz_path)
    _write_atomically(json_path, json.dumps(structure, allow_nan=False).encode("utf-8"))


def load(json_path: str | os.PathLike):
    """Read what ``save`` wrote; arrays are loaded without pickle."""
    json_path = Path(json_path)
    structure = json.loads(json_path.read_text(encoding="utf-8"))
    arrays = {}
    npz_path = json_path.with_suffix(".npz")
    if npz_path.exists():
        with np.load(npz_path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    return to_plain(_join_arrays(structure, arrays))


def dumps(value) -> bytes:
    """Plain data as one byte string: its JSON (length first), then an ``.npz`` of its arrays.
    What a grading kernel sends the grader."""
    arrays: dict = {}
    text = json.dumps(_split_arrays(to_plain(value), arrays), allow_nan=False).encode("utf-8")
    archive = io.BytesIO()
    if arrays:
        np.savez(archive, **arrays)
    return len(text).to_bytes(8, "big") + text + archive.getvalue()


def loads(data: bytes):
    """Read what ``dumps`` wrote; arrays are loaded without pickle."""
    size = int.from_bytes(data[:8], "big")
    structure = json.loads(data[8:8 + size].decode("utf-8"))
    arrays = {}
    if data[8 + size:]:
        with np.load(io.BytesIO(data[8 + size:]), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    return to_plain(_join_arrays(structure, arrays))
