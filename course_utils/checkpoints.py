"""Checkpoints that survive a crash and resume exactly (chapter 07).

Three small tools, each for a failure that costs a night of training:

* ``save_atomically(obj, path)``: a crash half-way through ``torch.save(obj, path)`` leaves a
  truncated file in place of your last good checkpoint. Writing to a temporary file in the same
  folder, flushing it to disk, then ``os.replace`` onto the real name means a crash during the
  write leaves the old file whole. On POSIX (Linux, macOS) the rename within one file system is
  atomic, so the name always points at a complete file: the old one or the new one, never half
  of either. On Windows ``os.replace`` replaces an existing file too, without that promise.
* ``rng_state(loader)`` / ``restore_rng_state(state, loader)``: dropout masks and shuffling draw
  from random number generators, so a resumed run only repeats the uninterrupted one if it
  continues from the same generator states: the global ones, and those a ``DataLoader`` holds
  itself (``DataLoader(..., generator=torch.Generator().manual_seed(0))``, chapter 06).
  Everything is stored as tensors, ints, floats, strings, tuples, lists and dicts, so the
  checkpoint loads with ``torch.load(..., weights_only=True)``.
* ``save_checkpoint(path, epoch, model, optimizer, scheduler, scaler, loader)``: everything a
  run needs to continue, written atomically; ``None`` for a part the run does not have.
  ``load_checkpoint`` puts it back. Writing that by hand is the learner's exercise in
  chapter 07.

What no checkpoint here can save (each is said in a warning when it can be seen): a random
generator from Python's ``random`` or NumPy held by a sampler or by the data set (use a
``torch.Generator``), the generators inside the worker processes of a loader with
``persistent_workers=True``, and a loader's position inside an epoch (save between epochs).
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
import warnings
from pathlib import Path

import torch


def save_atomically(obj, path) -> Path:
    """``torch.save(obj, path)``, such that ``path`` never holds a half-written file.

    The data goes to a temporary file in the same folder (``os.replace`` cannot rename across
    file systems, and is atomic on POSIX only within one), is flushed and fsync'ed (so it is on
    the disk, not only in the operating system's cache), and then replaces ``path`` in one step:
    an atomic rename on POSIX; on Windows a replace that Windows does not promise to be atomic,
    though a crash while writing still leaves ``path`` whole. If anything fails before that step,
    ``path`` still holds the previous checkpoint and the temporary file is removed. The folder
    must exist: a save never creates folders, so a typo in a path is an error, not a new folder.
    """
    path = Path(path)
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:  # its message would name the temporary file, not the target
        raise _cannot_write(path, error) from None
    try:
        _give_the_usual_mode(handle, path)
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


def _give_the_usual_mode(handle: int, path: Path) -> None:
    """mkstemp makes its file readable by its owner only (0o600); the checkpoint should get the
    mode any other file the run writes gets (the log beside it): the old checkpoint's, or what
    the umask leaves of 0o666."""
    if not hasattr(os, "fchmod"):  # Windows: no POSIX modes to match
        return
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.fchmod(handle, mode)


def _cannot_write(path: Path, error: OSError) -> OSError:
    """The same kind of error, naming the file the caller asked for and why it cannot be written."""
    folder = path.parent
    if not folder.exists():
        reason = (
            f"the folder {folder} does not exist; create it first: "
            f"Path({str(folder)!r}).mkdir(parents=True)"
        )
    elif not folder.is_dir():
        reason = f"{folder} is a file, not a folder"
    else:
        reason = f"{error.strerror or error} in the folder {folder}"
    return type(error)(error.errno, f"Cannot save {path}: {reason}")


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX); ``os.open`` cannot open a folder on Windows."""
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


def rng_state(loader=None) -> dict:
    """The states of the random number generators a training run draws from, as far as they
    can be found.

    Always: torch's CPU generator (a uint8 tensor), CUDA's and MPS's when present, Python's
    ``random`` (a tuple of ints, which ``weights_only`` loads as it is) and NumPy's global
    generator. NumPy's own state holds a NumPy array, which ``weights_only=True`` refuses to
    unpickle, so its key is stored as an int64 tensor and turned back into uint32 on restore.

    With ``loader`` (a ``DataLoader``, or a list of them), also every ``torch.Generator`` that
    loader holds itself, under ``"loaders"``: the loader's ``generator`` (it draws each epoch's
    seed for the worker processes, and the shuffle when ``shuffle=True``), its sampler's, its
    batch sampler's sampler's, and one its data set holds. A loader without a generator of its
    own draws from torch's global one, which is saved anyway.

    It cannot save, and warns about, what it can see but not store: a Python or NumPy generator
    held by a sampler, or by the data set when no worker processes are used (num_workers=0),
    and the generators inside persistent workers. A generator it cannot see (a module-level
    one in your own code, a library's) is not saved either.
    """
    return _rng_state(_as_loaders(loader))


def _rng_state(loaders: list) -> dict:
    """rng_state for rng_state and save_checkpoint; its warnings name their caller's line."""
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
    if loaders:
        state["loaders"] = []
        for loader in loaders:
            generators, unsaved = _loader_generators(loader)
            for problem in unsaved:
                warnings.warn(problem, UserWarning, stacklevel=3)
            state["loaders"].append({key: g.get_state() for key, g in generators.items()})
    return state


def restore_rng_state(state: dict, loader=None) -> None:
    """Put back what ``rng_state(loader)`` recorded; generators it did not record are left alone.

    Give the same loader(s) as when saving, freshly built the same way: their own generators
    get the saved states. Without ``loader``, a state that holds loader generators warns that
    they were not restored; a loader with generators of its own that the state does not hold
    (it was saved without the loader, or the loader is built differently) raises ``ValueError``.
    """
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
    _restore_loaders(state.get("loaders"), _as_loaders(loader))


def _restore_loaders(saved, loaders: list) -> None:
    if not loaders:
        held = [", ".join(states) for states in saved or () if states]
        if held:
            warnings.warn(
                f"This state also holds the generator(s) of a DataLoader ({'; '.join(held)}), and "
                "no loader was given, so they were not restored: the loader will shuffle "
                "differently from the run that saved them. Pass the loader: "
                "restore_rng_state(state, loader), or load_checkpoint(..., loader=loader).",
                UserWarning,
                stacklevel=3,
            )
        return
    saved = list(saved) if saved is not None else []
    found = [_loader_generators(loader)[0] for loader in loaders]
    if not saved and not any(found):
        return  # loaders that draw from the global generators only: nothing of their own
    if len(saved) != len(loaders):
        if not saved:
            own = "; ".join(", ".join(generators) for generators in found if generators)
            raise ValueError(
                f"The state holds no state for this loader's generator ({own}): it was saved "
                "without the loader, so the loader would shuffle differently from the run that "
                "saved it. Save with rng_state(loader) or save_checkpoint(..., loader=loader)."
            )
        raise ValueError(
            f"The state holds the generators of {len(saved)} loader(s), and {len(loaders)} were "
            "given: give the same loaders, in the same order, as when it was saved."
        )
    for position, (states, generators) in enumerate(zip(saved, found)):
        if set(states) != set(generators):
            which = f"loader {position}" if len(loaders) > 1 else "the loader"
            raise ValueError(
                f"The state saved {_listed(states)} for {which}, but the loader given has "
                f"{_listed(generators)}: build it as the run that saved it did (the same "
                "generator=, sampler= and batch_sampler= arguments)."
            )
        for key, generator in generators.items():
            generator.set_state(states[key].cpu())


def _listed(keys) -> str:
    keys = list(keys)
    return "generators at " + " and ".join(keys) if keys else "no generator of its own"


def _as_loaders(loader) -> list:
    if loader is None:
        return []
    loaders = list(loader) if isinstance(loader, (list, tuple)) else [loader]
    for one in loaders:
        if not isinstance(one, torch.utils.data.DataLoader):
            raise TypeError(
                f"loader= takes a torch.utils.data.DataLoader (or a list of them), not "
                f"{type(one).__module__}.{type(one).__qualname__}."
            )
    return loaders


def _loader_generators(loader) -> tuple[dict, list]:
    """The torch.Generators a DataLoader holds itself, and what it holds but cannot be saved.

    Returns ``({key: generator}, [warning, ...])``. A key names every place the generator
    sits, joined by " = " when one object sits in several (``DataLoader(shuffle=True,
    generator=g)`` gives its sampler the same ``g``: "generator = sampler.generator").
    """
    places: dict[int, tuple[list, torch.Generator]] = {}
    unsaved: list[str] = []

    def note(value, where: str, owner: str, matters: bool = True) -> None:
        if isinstance(value, torch.Generator):
            places.setdefault(id(value), ([], value))[0].append(where)
        elif matters and _foreign_generator(value):
            kind = f"{type(value).__module__}.{type(value).__qualname__}"
            unsaved.append(
                f"The checkpoint cannot save {where} ({kind}), a random generator that {owner} "
                "holds: only torch.Generator objects (and the global generators) are saved, so a "
                "resumed run draws other numbers from it than the run it continues. For a "
                "bit-for-bit resume, draw from a torch.Generator there instead."
            )

    for name, value in vars(loader).items():
        if name not in ("dataset", "sampler", "batch_sampler"):
            note(value, name, "the loader")
    seen: set[int] = set()
    samplers = [("sampler", loader.sampler), ("batch_sampler", loader.batch_sampler)]
    while samplers:
        prefix, sampler = samplers.pop(0)
        if sampler is None or id(sampler) in seen:
            continue
        seen.add(id(sampler))
        for name, value in getattr(sampler, "__dict__", {}).items():
            if name in ("sampler", "batch_sampler") and not isinstance(value, torch.Generator):
                samplers.append((f"{prefix}.{name}", value))
            elif name != "data_source":
                note(value, f"{prefix}.{name}", "its sampler")
    in_this_process = loader.num_workers == 0  # with workers, each epoch's workers get copies
    for name, value in getattr(loader.dataset, "__dict__", {}).items():
        owner = "its data set, in this process (num_workers=0),"
        note(value, f"dataset.{name}", owner, matters=in_this_process)
    if loader.num_workers > 0 and loader.persistent_workers:
        unsaved.append(
            "This loader has persistent_workers=True: it draws its workers' seeds once, when its "
            "first epoch starts, and the workers' random generators then carry on inside the "
            "worker processes, where no checkpoint can reach them. A resumed run starts new "
            "workers and draws their seeds again, so its shuffle and its workers' random numbers "
            "differ from the run it continues. For a bit-for-bit resume use persistent_workers=False."
        )
    generators = {" = ".join(paths): generator for paths, generator in places.values()}
    return generators, unsaved


def _foreign_generator(value) -> bool:
    """A random generator of Python's or NumPy's, which a checkpoint here does not store."""
    if isinstance(value, random.Random):
        return True
    numpy = _numpy_or_none()
    return numpy is not None and isinstance(
        value, (numpy.random.Generator, numpy.random.RandomState, numpy.random.BitGenerator)
    )


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


def save_checkpoint(path, epoch, model, optimizer, scheduler=None, scaler=None, loader=None) -> Path:
    """Write everything a run needs to continue after epoch ``epoch`` (0-based, just finished).

    ``optimizer``, ``scheduler`` and ``scaler`` are ``None`` when the run has none (a model
    only evaluated, or trained by hand); the checkpoint then holds ``None`` in their place. ``loader`` (a ``DataLoader`` or a list of them) adds the states of
    the generators the loader holds itself; see ``rng_state``. Only state dicts, tensors and
    plain Python values go in, so ``torch.load(path, weights_only=True)`` can read it back: no
    class is pickled, no code runs on loading. ``scaler.state_dict()`` is ``{}`` for a disabled
    GradScaler (the usual case off CUDA). Save between epochs: a loader's position inside an
    epoch is not saved.
    """
    checkpoint = {
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "scaler": None if scaler is None else scaler.state_dict(),
        "rng": _rng_state(_as_loaders(loader)),
    }
    return save_atomically(checkpoint, path)


_watching: list[set] = []


def _seen(name: str) -> None:
    for calls in _watching:
        calls.add(name)


@contextlib.contextmanager
def calls_watched():
    """The names of this module's loaders called inside the block, however they were reached
    (an alias, a module attribute): chapter 07's ``resume`` exercise is ``load_checkpoint``
    written by hand, so its check must know when an answer calls the worked one instead."""
    calls: set = set()
    _watching.append(calls)
    try:
        yield calls
    finally:
        _watching.remove(calls)


def load_checkpoint(
    path, model, optimizer, scheduler=None, scaler=None, loader=None, *, map_location=None
) -> int:
    """Put back what ``save_checkpoint`` wrote into freshly built objects; returns the epoch to
    continue from (the saved one finished, so the next one).

    Give the same parts as when saving, ``None`` for those the run does not have: a part the
    checkpoint holds but that is not given, or the other way round, raises ``ValueError``
    rather than resume a different run. (To take only the weights, ``torch.load`` the file
    and load ``checkpoint["model"]``.) Reads with ``weights_only=True``; ``map_location`` as
    in ``torch.load``.
    """
    _seen("load_checkpoint")
    checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    for name, part in (("optimizer", optimizer), ("scheduler", scheduler), ("scaler", scaler)):
        saved = checkpoint.get(name)
        if saved is None and part is not None:
            raise ValueError(
                f"{path} holds no {name} state (it was saved with {name}=None), but a {name} "
                f"was given: pass {name}=None, as the run that saved it did."
            )
        if saved is not None and part is None:
            raise ValueError(
                f"{path} holds the {name}'s state, but no {name} was given: build the {name} as "
                f"the run that saved it did and pass it, or the run does not continue as it was."
            )
    model.load_state_dict(checkpoint["model"])
    if optimizer is not None:
        optimizer.load_state_dict(checkpoint["optimizer"])
    if scheduler is not None:
        scheduler.load_state_dict(checkpoint["scheduler"])
    if scaler is not None:
        scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint["epoch"] + 1
