"""resume's checkpoint as plain data: what its probe records of the file it wrote, and what its
expect rebuilds the file from on the judge's side; and how two recorded state dicts compare."""

from __future__ import annotations

import numpy as np
import torch

from course_utils.exercises.facts import given, tensor_of


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _max_difference(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)))) for k in a)


def _plain_of(value):
    """A checkpoint's contents (state dicts, tensors, tuples, ints as keys) as plain data that
    ``_value_of`` turns back into the same objects: each dict as its items, each tuple tagged,
    each tensor as ``given`` records it."""
    if isinstance(value, torch.Tensor):
        return {"tensor": given(value)}
    if isinstance(value, dict):
        return {"dict": [[_plain_of(key), _plain_of(item)] for key, item in value.items()]}
    if isinstance(value, tuple):
        return {"tuple": [_plain_of(item) for item in value]}
    if isinstance(value, list):
        return [_plain_of(item) for item in value]
    if value is None or type(value) in (bool, int, float, str):
        return value
    raise TypeError(f"a checkpoint holds {type(value).__name__}, which the record cannot hold")


def _value_of(plain):
    """What ``_plain_of`` recorded, rebuilt (tensors on the CPU)."""
    if isinstance(plain, list):
        return [_value_of(item) for item in plain]
    if not isinstance(plain, dict):
        return plain
    (tag, content), = plain.items()
    if tag == "tensor":
        return tensor_of(content)
    if tag == "tuple":
        return tuple(_value_of(item) for item in content)
    if tag == "dict":
        return {_value_of(key): _value_of(item) for key, item in content}
    raise ValueError(f"a recorded checkpoint holds an unknown entry {tag!r}")
