"""Checkpoints that survive a crash and resume exactly (chapter 07).

Three small tools, each for a failure that costs a night of training:

* ``save_atomically(obj, path)``: a crash half-way through ``torch.save(obj, path)`` leaves a
  truncated file in place of your last good checkpoint. Writing to a temporary file in the same
  folder, flushing it to disk, then ``os.replace`` onto the real name means the name always
  points at a complete file: the old one or the new one, never half of either.
* ``rng_state()`` / ``restore_rng_state(state)``: dropout masks and shuffling draw from the
  random number generators, so a resumed run only repeats the uninterrupted one if it continues
  from the same generator states. Everything is stored as tensors, ints, floats, strings, lists
  and dicts, so the checkpoint loads with ``torch.load(..., weights_only=True)``.
* ``save_checkpoint(path, epoch, model, optimizer, scheduler, scaler)``: everything a run needs
  to continue, written atomically. Reading it back is the learner's exercise in chapter 07.
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

import torch


def save_atomically(obj, path) -> Path:
    """``torch.save(obj, path)``, such that ``path`` never holds a half-written file.

    The data goes to a temporary file in the same folder (``os.replace`` is atomic only within
    one file system), is flushed and fsync'ed (so it is on the disk, not only in the operating
    system's cache), and then replaces ``path`` in one step. If anything fails before that step,
    ``path`` still holds the previous checkpoint and the temporary file is removed.
    """
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(obj, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)
    return path


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX); Windows cannot open a folder, and needs nothing."""
    if os.name != "posix":
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    except OSError:  # some file systems refuse fsync on a folder; the rename is done anyway
        pass
    finally:
        os.close(descriptor)


# --- random number generators ----------------------------------------------------------------


def rng_state() -> dict:
    """The state of every random number generator a training run draws from.

    torch's CPU generator (a uint8 tensor), CUDA's and MPS's when present, Python's ``random``
    (a tuple of ints, which ``weights_only`` loads as it is) and NumPy's global generator. NumPy's
    own state holds a NumPy array, which ``weights_only=True`` refuses to unpickle, so its key
    is stored as an int64 tensor and turned back into uint32 on restore.
    """
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    numpy = _numpy_or_none()
    if numpy is not None:
        legacy = numpy.random.get_state(legacy=False)
        state["numpy"] = {
            "bit_generator": legacy["bit_generator"],
            "key": torch.from_numpy(legacy["state"]["key"].astype(numpy.int64)),
            "pos": int(legacy["state"]["pos"]),
            "has_gauss": int(legacy["has_gauss"]),
            "gauss": float(legacy["gauss"]),
        }
    return state


def restore_rng_state(state: dict) -> None:
    """Put back what ``rng_state()`` recorded; generators it did not record are left alone."""
    torch.set_rng_state(state["torch"].cpu())
    random.setstate(_as_tuples(state["python"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
    if "mps" in state and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["mps"].cpu())
    numpy = _numpy_or_none()
    if "numpy" in state and numpy is not None:
        saved = state["numpy"]
        numpy.random.set_state({
            "bit_generator": saved["bit_generator"],
            "state": {"key": saved["key"].cpu().numpy().astype(numpy.uint32), "pos": saved["pos"]},
            "has_gauss": saved["has_gauss"],
            "gauss": saved["gauss"],
        })


def _as_tuples(value):
    """random.setstate wants tuples; a state that went through JSON or lists comes back as lists."""
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuples(v) for v in value)
    return value


def _numpy_or_none():
    try:
        import numpy
    except ImportError:  # pragma: no cover - NumPy ships with the course
        return None
    return numpy


# --- the checkpoint ----------------------------------------------------------------------------


def save_checkpoint(path, epoch, model, optimizer, scheduler, scaler) -> Path:
    """Write everything a run needs to continue after epoch ``epoch`` (0-based, just finished).

    Only state dicts, tensors and plain Python values go in, so ``torch.load(path,
    weights_only=True)`` can read it back: no class is pickled, no code runs on loading.
    ``scaler.state_dict()`` is ``{}`` for a disabled GradScaler (the usual case off CUDA).
    """
    checkpoint = {
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict(),
        "rng": rng_state(),
    }
    return save_atomically(checkpoint, path)
