"""Chapter 07 — Reliable practice: weights that load safely, checkpoints that resume exactly,
and old weights mapped onto renamed layers.

Each reference solution below is what ``.solution()`` shows, so it is written the way a learner
would write it. Every probe works in its own temporary folder, on the CPU, with its own seeds;
the framework puts the learner's random streams back afterwards.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import tempfile
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils import checkpoints
from course_utils.checkpoints import _loader_generators, restore_rng_state, save_checkpoint
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.running import set_up_torch_once

CHAPTER = "reliable_practice"

# The checks use optimizers: torch's one-time set-up for them is paid here, in the notebook's
# import cell, not by the first check.
set_up_torch_once()


def _kind(value) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _error_text(error: BaseException, limit: int = 400) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip()  # torch colours part of its message
    text = f"{type(error).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unpickler_complaint(message: str) -> str:
    """The sentence of a weights-only error that names what was refused, else its first line."""
    found = re.search(r"(Unsupported global: GLOBAL \S+ was not an allowed global by default\.)", message)
    return found.group(1) if found else message.splitlines()[0]


@contextlib.contextmanager
def _one_thread():
    """Tiny models run faster on one thread, and much faster on a busy machine; put it back after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _arrays(state: dict) -> dict:
    return {key: value.detach().cpu().numpy().copy() for key, value in state.items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _max_difference(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)))) for k in a)


# ============================================================================================
# S1 — save the state_dict, so that torch.load(weights_only=True) can read it
# ============================================================================================
def save_weights(model, path):
    torch.save(model.state_dict(), path)


def _weights_model() -> nn.Module:
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    with torch.no_grad():  # one batch in training mode: the running statistics move off their defaults
        model(torch.randn(16, 6, generator=torch.Generator().manual_seed(50)))
    return model


_WEIGHTS_ON = "a Sequential(Linear, BatchNorm1d, ReLU, Linear) and a path in an empty temporary folder"


def _readable(tensor: torch.Tensor):
    """The numbers of a tensor as a NumPy array, or None when it has none (meta)."""
    tensor = torch.Tensor.detach(tensor)
    if tensor.device.type == "meta":
        return None
    tensor = tensor.cpu()
    if tensor.dtype in (torch.bfloat16, torch.float16):
        tensor = tensor.float()
    return tensor.numpy().copy()


def _state_changes(before: dict, model: nn.Module) -> list[str]:
    """What changed in the model's state_dict since ``before`` (a dict of name → tensor copy)."""
    after = model.state_dict()
    changes = []
    for name, old in before.items():
        new = after.get(name)
        if new is None:
            changes.append(f"{name} (gone)")
        elif new.device != old.device:
            changes.append(f"{name} (now on {new.device})")
        elif new.dtype != old.dtype:
            changes.append(f"{name} (now {str(new.dtype).removeprefix('torch.')})")
        elif new.shape != old.shape or not torch.equal(new, old):
            changes.append(name)
    return changes


def _file_record(path: str, expected: dict) -> dict:
    """What torch.load(weights_only=True) and a fresh model's load_state_dict make of the file."""
    record = {}
    try:
        with warnings.catch_warnings():  # torch's own remarks on a file the learner wrote
            warnings.simplefilter("ignore")
            loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # what weights_only=True says about the file is the lesson
        record["load_error"] = _unpickler_complaint(_error_text(error, 2000))
        found = re.search(r"GLOBAL (\S+)", str(error))
        record["global"] = found.group(1) if found else ""
        return record
    record["kind"] = _kind(loaded)
    if isinstance(loaded, (list, tuple)):
        record["length"] = len(loaded)
        return record
    if not isinstance(loaded, dict):
        return record
    record["keys"] = [str(k) for k in loaded]
    record["not_tensors"] = [str(k) for k, v in loaded.items() if not isinstance(v, torch.Tensor)]
    tensors = {str(k): v for k, v in loaded.items() if isinstance(v, torch.Tensor)}
    record["differ"] = sorted(
        k for k, v in tensors.items()
        if k in expected and (v.dtype != expected[k].dtype or not np.array_equal(_readable(v), _readable(expected[k])))
    )
    # Stored in another dtype, yet every value survived (a wider dtype): the values are not the
    # problem, the dtype is.
    record["exact_values"] = all(
        (r := _readable(tensors[k])) is not None and r.shape == _readable(expected[k]).shape
        and np.array_equal(r.astype(np.float64), _readable(expected[k]).astype(np.float64))
        for k in record["differ"]
    )
    record["dtypes"] = {k: str(v.dtype).removeprefix("torch.") for k, v in tensors.items()}
    fresh = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    try:
        fresh.load_state_dict(loaded, strict=True)
        record["strict_error"] = None
    except Exception as error:
        record["strict_error"] = _error_text(error)
    return record


def _probe_save_weights(answer, run):
    model = _weights_model()
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    parameters = [name for name, _ in model.named_parameters()]
    modes = [m.training for m in model.modules()]
    record = {"expected_keys": list(state), "parameters": parameters}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "weights.pt")
        run(answer, model, path, on=_WEIGHTS_ON)
        record["files"] = sorted(os.listdir(folder))
        record["changed"] = _state_changes(state, model)
        record["mode_changed"] = [m.training for m in model.modules()] != modes
        if not os.path.isfile(path) or record["changed"]:
            return record
        record.update(_file_record(path, state))
        if "strict_error" not in record or record["strict_error"] or record["differ"]:
            return record
        # A second save to the same path, after the model trained on and was put in eval mode
        # (saved after an evaluation): the file must follow, and the mode must stay.
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(0.25)
            model[1].running_mean.add_(0.5)
        model.eval()
        modes = [m.training for m in model.modules()]
        state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
        run(answer, model, path, on=f"a second call, {_SECOND_SAVE}")
        second = _file_record(path, state) if os.path.isfile(path) else {"load_error": "the file is gone"}
        record["second"] = {
            "differ": second.get("differ"),
            "problem": second.get("load_error") or second.get("strict_error"),
            "changed": _state_changes(state, model),
            "mode_changed": [m.training for m in model.modules()] != modes,
        }
    return record


_SECOND_SAVE = ("after the model trained on and was put in eval mode, with the same path (the file "
                "exists already)")


def _judge_save_weights(record):
    if record["changed"]:
        return Mistake("changed-the-model", (
            f"Your function changed the model ({', '.join(record['changed'][:4])}); saving must "
            "only read it. Save model.state_dict() as it is; convert or move copies, if ever, "
            "not the model."
        ))
    if record["mode_changed"]:
        return Mistake("changed-mode", (
            "Your function changed the model's mode (train/eval) and did not put it back: the "
            "caller's training goes on with dropout and BatchNorm in the wrong mode. Saving "
            "needs no mode; leave model.training as it was."
        ))
    if "weights.pt" not in record["files"]:
        others = f" It wrote {', '.join(record['files'])} instead." if record["files"] else ""
        return Mistake("wrong-path", f"No file was written at the path you were given.{others} Save to exactly that path.")
    if "load_error" in record:
        found = record["global"]
        if found.startswith("torch.nn.modules."):
            return Mistake("saved-whole-model", (
                "You saved the whole model object (torch.save(model, path)): the file holds a "
                f"pickled {found}, and torch.load(path, weights_only=True) refuses to rebuild "
                "classes, because unpickling a class can run any code. It says: "
                f"\"{record['load_error']}\" Save model.state_dict(): names and tensors only."
            ))
        return Mistake("unloadable-format", (
            "torch.load(path, weights_only=True) cannot read your file. Save only tensors in a "
            "dict (model.state_dict()) with torch.save, not other Python objects or another "
            f"file format. It says: \"{record['load_error']}\""
        ))
    kind = record.get("kind")
    if "length" in record:
        return Mistake("saved-parameter-list", (
            f"Your file holds {record['kind']} of {record['length']} tensors without their names "
            "(list(model.parameters())?). load_state_dict matches tensors to layers by name, so it "
            "cannot use them; and the BatchNorm running statistics are not parameters at all. "
            "Save model.state_dict()."
        ))
    if "keys" not in record:
        return Mistake("not-a-state-dict", f"Your file holds {kind}; expected the model's state_dict (a dict of named tensors).")
    keys, expected = record["keys"], record["expected_keys"]
    missing = [k for k in expected if k not in keys]
    if missing and set(keys) == set(record["parameters"]):
        return Mistake("parameters-only", (
            f"Your file has the parameters but not the buffers: {', '.join(missing[:3])} are "
            "missing. named_parameters() skips buffers such as BatchNorm's running mean and "
            "variance, which the model needs in eval mode. model.state_dict() holds both."
        ))
    if missing and set(keys) <= set(expected):
        quiet = all(k.endswith("num_batches_tracked") for k in missing)
        return Mistake("missing-entries", (
            f"Your file lacks {', '.join(missing[:3])} of the model's state_dict"
            + (" (load_state_dict(strict=True) does not even notice: BatchNorm fills in a "
               "missing num_batches_tracked, as for files older than it)" if quiet else "")
            + ". Save every entry of model.state_dict() as it is, buffers and integer tensors "
            "included."
        ))
    if record["not_tensors"]:
        return Mistake("not-tensors", (
            f"Your file's dict holds something other than tensors under "
            f"{', '.join(record['not_tensors'][:3])} (keys {keys[:4]}). Save the state_dict itself: "
            "torch.save(model.state_dict(), path)."
        ))
    if record["differ"] and record["exact_values"]:
        first = record["differ"][0]
        return Mistake("converted-dtype", (
            f"Your file stores {first} as {record['dtypes'].get(first, '?')}, not in the model's "
            "own dtype. The values survived, but the task asks for the weights as they are: a "
            "wider dtype makes the file larger and hands whoever loads it tensors of another "
            "dtype than the model's. Save model.state_dict() without converting it."
        ))
    if record["differ"]:
        first = record["differ"][0]
        dtype = record["dtypes"].get(first, "?")
        return Mistake("converted-dtype", (
            f"The tensors in your file differ from the model's, e.g. {first} (stored as {dtype}): "
            "save them as they are, in their own dtype; a fresh model loads the values exactly "
            "only if they were saved exactly."
        ))
    if record["strict_error"]:
        return Mistake("keys-not-loadable", (
            "A fresh model of the same architecture cannot load your file with "
            f"load_state_dict(strict=True): {record['strict_error']}"
        ))
    second = record["second"]
    if second["changed"]:
        return Mistake("changed-the-model", (
            f"The first save was right, but on a second call, {_SECOND_SAVE}, your function "
            f"changed the model ({', '.join(second['changed'][:4])}); saving must only read it."
        ))
    if second["mode_changed"]:
        return Mistake("changed-mode", (
            f"The first save was right, but on a second call, {_SECOND_SAVE}, your function "
            "switched the model back to train mode: the evaluation that follows would use "
            "dropout and batch statistics. Saving needs no mode; leave model.training as it was "
            "(no model.train() or model.eval() in a save function)."
        ))
    if second["problem"] or second["differ"]:
        what = (f"its {', '.join(second['differ'][:3])} still hold the first call's values"
                if second["differ"] else second["problem"])
        return Mistake("stale-file", (
            f"The first save was right, but on a second call, {_SECOND_SAVE}, the file does "
            "not hold the "
            f"model's new weights: {what}. Each call must write the weights the model has now, "
            "replacing the file."
        ))
    return None


save_weights = Exercise(
    "save_weights",
    chapter=CHAPTER,
    title="Save the weights, not the object",
    expects=Function("save_weights", ("model", "path"), returns="nothing (None): it writes the file at path"),
    probe=_probe_save_weights,
    judge=_judge_save_weights,
    reference=save_weights,
    passed_message=(
        "Correct: the file holds names and tensors only, so torch.load(path, weights_only=True) "
        "reads it without running any code, and any model with the same layer names can load it."
    ),
    hints=[
        "The check loads your file with torch.load(path, weights_only=True), then into a fresh "
        "model of the same architecture with load_state_dict(strict=True).",
        "weights_only=True accepts tensors, dicts, lists and plain numbers, never a class such as "
        "nn.Sequential: save a dict of named tensors.",
        "torch.save(model.state_dict(), path)",
    ],
)


# ============================================================================================
# S2 — resume from a checkpoint exactly
# ============================================================================================
def resume(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)  # the global generators and the loader's own
    return checkpoint["epoch"] + 1  # the saved epoch is finished: continue with the next one


_EPOCHS, _SAVED_EPOCH = 6, 2  # train 0..2, save, resume, train 3..5


def _resume_data():
    generator = torch.Generator().manual_seed(11)
    return torch.randn(48, 6, generator=generator), torch.randint(0, 3, (48,), generator=generator)


def _resume_parts(x, y):
    """Model, optimizer, scheduler, scaler and a loader with its own generator (as chapter 06
    teaches); the model's initial weights come from the global seed, the loader's order from
    its own seed, the same in every process."""
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=_EPOCHS)
    # Enabled on the CPU (torch >= 2.3); a small growth_interval makes its scale move.
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=3)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(7))
    return model, optimizer, scheduler, scaler, loader


def _train_epoch(parts):
    model, optimizer, scheduler, scaler, loader = parts
    model.train()
    for xb, yb in loader:  # the loader's own generator: the batch order depends on it
        loss = F.cross_entropy(model(xb), yb)  # dropout draws its masks from the global generator
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    scheduler.step()


def _lr(optimizer) -> float:
    return float(optimizer.param_groups[0]["lr"])


def _adam_moments(optimizer) -> list:
    return [
        state["exp_avg"].detach().cpu().numpy().copy()
        for state in (optimizer.state.get(p) for g in optimizer.param_groups for p in g["params"])
        if state and "exp_avg" in state
    ]


def _loader_states(loader) -> dict:
    """Where the loader's own generators sit (see checkpoints.rng_state) and their states."""
    return {key: generator.get_state().numpy().copy() for key, generator in _loader_generators(loader)[0].items()}


def _other_streams() -> dict:
    """Python's and NumPy's global random states, as arrays (restore_rng_state puts both back)."""
    numpy_state = np.random.get_state()
    return {
        "Python's random module": np.array(random.getstate()[1], dtype=np.int64),
        "NumPy's global generator": np.append(numpy_state[1].astype(np.int64), numpy_state[2]),
    }


def _probe_resume(answer, run):
    with _one_thread():
        return _resume_record(answer, run)


def _resume_record(answer, run):
    x, y = _resume_data()
    torch.manual_seed(0)
    straight = _resume_parts(x, y)
    lrs_straight = []
    for _ in range(_EPOCHS):
        lrs_straight.append(_lr(straight[1]))
        _train_epoch(straight)
    record = {
        "epochs": _EPOCHS,
        "saved_epoch": _SAVED_EPOCH,
        "straight": _arrays(straight[0].state_dict()),
        "lrs_straight": lrs_straight,
        "scaler_straight": float(straight[3].get_scale()),
    }
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.pt")
        torch.manual_seed(0)
        first = _resume_parts(x, y)
        for _ in range(_SAVED_EPOCH + 1):
            _train_epoch(first)
        save_checkpoint(path, _SAVED_EPOCH, *first)
        saved_rng = torch.get_rng_state()
        saved_others = _other_streams()
        saved_loader = _loader_states(first[4])
        record["saved_weights"] = _arrays(first[0].state_dict())
        record["saved_moments"] = _adam_moments(first[1])
        record["saved_scaler"] = {k: float(v) for k, v in first[3].state_dict().items()}
        del first
        # A new process: other seeds, freshly built objects with their own initial weights.
        torch.manual_seed(12345)
        torch.rand(7)
        random.seed(12345)  # Python's and NumPy's streams start elsewhere in a new process too
        np.random.seed(12345)
        fresh = _resume_parts(x, y)
        loads = []
        real_load = torch.load

        def recording_load(*args, **kwargs):  # the task's rule: weights_only=True
            loads.append(repr(kwargs.get("weights_only")))
            return real_load(*args, **kwargs)

        fresh_loader = _loader_states(fresh[4])
        torch.load = recording_load
        try:
            with checkpoints.calls_watched() as library_calls:
                start = run(answer, path, *fresh, on="a checkpoint saved after epoch 2 and freshly built objects")
        finally:
            torch.load = real_load
        record["library_calls"] = sorted(library_calls)
        record["weights_only"] = loads
        record["start_kind"] = _kind(start)
        record["start"] = (
            int(start) if isinstance(start, (int, np.integer)) and not isinstance(start, (bool, np.bool_))
            else None
        )
        record["weights_after"] = _arrays(fresh[0].state_dict())
        record["moments_after"] = _adam_moments(fresh[1])
        record["scaler_after"] = {k: float(v) for k, v in fresh[3].state_dict().items()}
        record["rng_restored"] = bool(torch.equal(torch.get_rng_state(), saved_rng))
        others = _other_streams()
        record["others_not_restored"] = [
            name for name in saved_others if not np.array_equal(others[name], saved_others[name])
        ]
        loader_after = _loader_states(fresh[4])
        # Moved off the fresh loader's state, yet not to the saved one: drawn from after a restore.
        record["loader_moved"] = loader_after.keys() == fresh_loader.keys() and not all(
            np.array_equal(loader_after[key], fresh_loader[key]) for key in fresh_loader
        )
        record["loader_saved"] = sorted(saved_loader)
        record["loader_after"] = sorted(loader_after)
        record["loader_restored"] = loader_after.keys() == saved_loader.keys() and all(
            np.array_equal(loader_after[key], saved_loader[key]) for key in saved_loader
        )
        if record["start"] is None or not 0 <= record["start"] <= _EPOCHS:
            return record
        lrs = []
        for _ in range(record["start"], _EPOCHS):
            lrs.append(_lr(fresh[1]))
            _train_epoch(fresh)
        record["lrs_resumed"] = lrs
        record["resumed"] = _arrays(fresh[0].state_dict())
    return record


def _judge_resume(record):
    saved = record["saved_epoch"]
    if "load_checkpoint" in record.get("library_calls", []):
        return Mistake("calls-load-checkpoint", (
            "resume calls course_utils.checkpoints.load_checkpoint, the course's worked answer to "
            "this very exercise. Write the loading yourself: torch.load(path, "
            "weights_only=True), then each part's load_state_dict, the generators' states, and "
            "the epoch to continue from."
        ))
    if record["start"] is None:
        return Mistake("no-epoch-returned", (
            f"resume returned {record['start_kind']}; it should return the epoch to continue "
            f"from, an int: the checkpoint was saved after epoch {saved}, so {saved + 1}."
        ))
    if "False" in record["weights_only"]:
        return Mistake("weights-only-false", (
            "Your function loads the checkpoint with torch.load(..., weights_only=False): that "
            "unpickles any class the file names, so a file you did not write can run code on "
            "your machine. A checkpoint of state_dicts and plain values needs no more than "
            "weights_only=True, as the task asks."
        ))
    if not _same(record["weights_after"], record["saved_weights"]):
        return Mistake("model-not-restored", (
            "After resume the model's weights are not the checkpoint's (they are still the fresh "
            "model's random start). Load them: model.load_state_dict(checkpoint['model'])."
        ))
    moments, expected_moments = record["moments_after"], record["saved_moments"]
    if not moments:
        return Mistake("optimizer-not-restored", (
            "After resume the optimizer has no state: Adam's moment estimates (exp_avg, "
            "exp_avg_sq) and its step count restarted at zero, so the first steps after the "
            "restart are larger than the uninterrupted run's and the weights drift apart. "
            "optimizer.load_state_dict(checkpoint['optimizer']), on the optimizer you are given: "
            "training goes on with that object."
        ))
    if len(moments) != len(expected_moments) or not all(
        np.array_equal(a, b) for a, b in zip(moments, expected_moments)
    ):
        return Mistake("optimizer-state-changed", "After resume Adam's moment estimates differ from the checkpoint's: load the optimizer's state_dict as it was saved.")
    if record["scaler_after"] != record["saved_scaler"]:
        got, want = record["scaler_after"], record["saved_scaler"]
        return Mistake("scaler-not-restored", (
            f"After resume the GradScaler's scale is {got.get('scale', float('nan')):g}, a fresh "
            f"scaler's; the checkpoint's was {want['scale']:g}. With float16 on a GPU the scale "
            "decides which steps are "
            "skipped, so restore it: scaler.load_state_dict(checkpoint['scaler'])."
        ))
    if not record["rng_restored"]:
        return Mistake("rng-not-restored", (
            "After resume the global random number generator is not where the checkpoint saved "
            "it: the dropout masks and the batch order after the "
            "restart differ from the uninterrupted run's. restore_rng_state(checkpoint['rng'], loader)."
        ))
    if record.get("others_not_restored"):
        return Mistake("other-streams-not-restored", (
            f"After resume {' and '.join(record['others_not_restored'])} "
            + ("is not where the checkpoint saved it: a run that draws from it"
               if len(record["others_not_restored"]) == 1 else
               "are not where the checkpoint saved them: a run that draws from them")
            + " (a random augmentation, a sampler) would go on "
            "differently from the uninterrupted one. restore_rng_state(checkpoint['rng'], loader) "
            "puts back every generator the checkpoint holds; draw nothing after it."
        ))
    if not record["loader_restored"] and record.get("loader_moved") and record["loader_after"] == record["loader_saved"]:
        return Mistake("loader-used-after-restore", (
            "After resume the DataLoader's own generator is neither where the checkpoint saved it "
            "nor where the freshly built loader's seed put it: it moved after it was set, so "
            "something in your function drew from it (iterating over the loader draws its "
            "shuffle) or gave it another state. Restore it with "
            "restore_rng_state(checkpoint['rng'], loader), and leave the loader alone after that."
        ))
    if not record["loader_restored"]:
        if record["loader_after"] != record["loader_saved"]:
            where = (
                f"The loader's generators now sit at {' and '.join(record['loader_after']) or 'no place'}; "
                f"the checkpoint saved them at {' and '.join(record['loader_saved'])}: give the loader "
                "its state back, not a new generator. "
            )
            named = "new-loader-generator"
        else:
            where = ""
            named = "loader-generator-not-restored"
        return Mistake(named, (
            "After resume the DataLoader's own generator (generator=torch.Generator().manual_seed(...)) "
            "is where the freshly built loader's seed put it, not where the checkpoint saved it: "
            "after the restart the loader shuffles as in epoch 0, not as the uninterrupted run. "
            f"{where}Restore it with the global generators: restore_rng_state(checkpoint['rng'], loader)."
        ))
    start = record["start"]
    if start != saved + 1:
        named = "repeats-saved-epoch" if start <= saved else "skips-an-epoch"
        if start == saved:
            what = f"epoch {saved} was finished before the save, so it runs twice"
        elif start < saved:
            what = f"epochs {start} to {saved} were finished before the save and run again"
        else:
            what = f"epoch{'s' if start > saved + 2 else ''} {saved + 1}{f' to {start - 1}' if start > saved + 2 else ''} never run{'s' if start == saved + 2 else ''}"
        return Mistake(named, (
            f"resume returned {start}, but the checkpoint's epoch is {saved} (the last finished "
            f"one): {what}. Return checkpoint['epoch'] + 1."
        ))
    lrs, expected_lrs = record["lrs_resumed"], record["lrs_straight"][saved + 1:]
    if not np.allclose(lrs, expected_lrs, rtol=1e-12, atol=0):
        index = next(i for i, (a, b) in enumerate(zip(lrs, expected_lrs)) if not np.isclose(a, b, rtol=1e-12, atol=0))
        straight = record["lrs_straight"]
        if np.allclose(lrs, straight[: len(lrs)], rtol=1e-12, atol=0):
            named = "scheduler-not-restored"
            why = "The scheduler started its schedule over: scheduler.load_state_dict(checkpoint['scheduler'])."
        elif np.allclose(lrs[:-1], straight[saved + 2:], rtol=1e-12, atol=0):
            named = "scheduler-stepped-again"
            why = (
                "The schedule is one step ahead of the uninterrupted run's: the checkpoint's "
                "scheduler state already counts the saved epoch, so load it as it is "
                "(scheduler.load_state_dict(checkpoint['scheduler'])) and do not step it again."
            )
        else:
            named = "scheduler-not-as-saved"
            why = "Restore the scheduler's state as it was saved: scheduler.load_state_dict(checkpoint['scheduler'])."
        return Mistake(named, (
            f"The learning rate after resume is wrong: epoch {saved + 1 + index} trained with "
            f"lr={lrs[index]:.6g}, the uninterrupted run with lr={expected_lrs[index]:.6g}. {why}"
        ))
    if not _same(record["resumed"], record["straight"]):
        return Mistake("incomplete-restore", (
            f"After resuming and training epochs {saved + 1} to {record['epochs'] - 1}, the weights "
            "differ from the uninterrupted run's by up to "
            f"{_max_difference(record['resumed'], record['straight']):.3g}. Restore everything the "
            "checkpoint holds: model, optimizer, scheduler, scaler and RNG states."
        ))
    return None


resume = Exercise(
    "resume",
    chapter=CHAPTER,
    title="Resume exactly where the run stopped",
    expects=Function("resume", ("path", "model", "optimizer", "scheduler", "scaler", "loader"), returns="an int, the epoch to continue from"),
    probe=_probe_resume,
    judge=_judge_resume,
    reference=resume,
    passed_message=(
        "Correct: 3 epochs, a checkpoint, a fresh start and 3 more epochs give bit for bit the "
        "weights of 6 epochs in one go, the loader's shuffle included."
    ),
    hints=[
        "Load the file with torch.load(path, map_location=..., weights_only=True); it is a dict "
        "with the keys epoch, model, optimizer, scheduler, scaler and rng.",
        "Each object has a load_state_dict method for its part; the random generators, the "
        "loader's own included, go back with restore_rng_state(checkpoint['rng'], loader). Then "
        "return the epoch to continue from.",
        "model / optimizer / scheduler / scaler .load_state_dict(checkpoint[...]); "
        "restore_rng_state(checkpoint['rng'], loader); return checkpoint['epoch'] + 1",
    ],
    # The first optimizer a process builds imports torch._dynamo, seconds on a busy machine;
    # the probe itself takes a fraction of a second.
    time_limit_s=20.0,
    error_notes=[
        (
            'Unexpected key(s) in state_dict: "epoch"',
            "the checkpoint is a dict of parts (epoch, model, optimizer, scheduler, scaler, rng): "
            "the model's weights are one of them, model.load_state_dict(checkpoint['model']).",
            "whole-checkpoint-into-model",
        ),
        (
            "Weights only load failed",
            "this checkpoint holds only tensors and plain values, so weights_only=True reads it; "
            "something else than the checkpoint path was loaded.",
            "loaded-something-else",
        ),
        (
            "The source state dict is empty",
            "an enabled GradScaler cannot load the {} that a disabled one saved; create the "
            "scaler with the same enabled= as the run that saved it.",
            "scaler-enabled-differently",
        ),
    ],
)


# ============================================================================================
# S3 — map old key prefixes onto renamed layers
# ============================================================================================
def remap_keys(state_dict, renames):
    remapped = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key[len(old):]
                break
        remapped[key] = value
    return remapped


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 4)
        self.out = nn.Linear(4, 4)


class _OldNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(6, 4)
        self.block = _Block()
        self.out = nn.Linear(4, 3)


class _NewNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 4)
        self.block = _Block()  # its inner layers keep their names
        self.head = nn.Linear(4, 3)


class _LegacyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(6, 6), nn.Linear(6, 4))
        self.norm = nn.BatchNorm1d(4)
        self.hidden = nn.Linear(4, 4)
        self.hidden2 = nn.Linear(4, 3)


class _ModernNet(nn.Module):
    """_LegacyNet with layers.0 taken out as stem, norm renamed bn, hidden renamed encoder."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(6, 6)
        self.layers = nn.Sequential(nn.Identity(), nn.Linear(6, 4))
        self.bn = nn.BatchNorm1d(4)
        self.encoder = nn.Linear(4, 4)
        self.hidden2 = nn.Linear(4, 3)


class _Wrapped(nn.Module):
    """What nn.DataParallel looks like to state_dict(): the model under the name module."""

    def __init__(self, module):
        super().__init__()
        self.module = module


def _remap_cases():
    torch.manual_seed(21)
    return [
        ("a model whose top-level hidden and out became encoder and head (its block keeps "
         "block.hidden and block.out)", _OldNet(), _NewNet, {"hidden.": "encoder.", "out.": "head."}),
        ("a Sequential that gained a Dropout at position 2", nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)),
         lambda: nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Dropout(0.1), nn.Linear(5, 2)), {"2.": "3."}),
        # Chained renames: "0." becomes "1.", the old "1." becomes "2."; each key is renamed once.
        ("a Sequential that gained a Dropout at the front", nn.Sequential(nn.Linear(4, 5), nn.Linear(5, 2)),
         lambda: nn.Sequential(nn.Dropout(0.1), nn.Linear(4, 5), nn.Linear(5, 2)), {"0.": "1.", "1.": "2."}),
        # Swapped renames: two layers of the same shape trade places.
        ("a Sequential whose two Linear(4, 4) layers swapped places",
         nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)),
         lambda: nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), {"0.": "1.", "1.": "0."}),
        # A prefix of two levels; a remainder that starts with letters of the prefix
        # (norm.running_mean); a layer whose name merely begins like a renamed one (hidden2).
        ("a model whose layers.0 became stem, norm became bn and hidden became encoder (hidden2 "
         "and layers.1 keep their names)", _LegacyNet(), _ModernNet,
         {"layers.0.": "stem.", "norm.": "bn.", "hidden.": "encoder."}),
        # Nested Sequentials: the old prefix "0." appears again inside the keys (0.0.weight).
        ("a Sequential of (a Sequential of two Linear layers, a Linear) that gained a Dropout at "
         "the front", nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), nn.Linear(4, 2)),
         lambda: nn.Sequential(nn.Dropout(0.1), nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), nn.Linear(4, 2)),
         {"0.": "1.", "1.": "2."}),
        # An empty new prefix: the "module." that nn.DataParallel (or "_orig_mod." that
        # torch.compile) puts in front of every key, cut off.
        ("weights saved from a model wrapped in nn.DataParallel (every key starts with module.), "
         "loaded into the bare model", _Wrapped(nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))),
         lambda: nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)), {"module.": ""}),
        # Nothing renamed: still a new dict, with the same tensors.
        ("a model whose layers kept their names", _OldNet(), _OldNet, {}),
    ]


def _chained_key(key, renames):
    """The key after every matching rename in turn: a renamed key renamed again."""
    for old, new in renames.items():
        if key.startswith(old):
            key = new + key[len(old):]
    return key


def _expected_key(key, renames):
    for old, new in renames.items():
        if key.startswith(old):
            return new + key[len(old):]
    return key


def _probe_remap_keys(answer, run):
    cases = []
    for on, old_model, make_new, renames in _remap_cases():
        given = old_model.state_dict()
        keys_before = list(given)
        tensors = dict(given)
        values = _arrays(given)
        renames_given = dict(renames)
        got = run(answer, given, renames_given, on=f"{on}, renames={renames}")
        case = {
            "on": on,
            "renames": dict(renames),
            "renames_changed": renames_given != renames,
            "keys_before": keys_before,
            "keys_after_call": list(given),
            "expected_keys": [_expected_key(k, renames) for k in keys_before],
            "kind": _kind(got),
            "same_object": got is given,
        }
        if not isinstance(got, dict):
            cases.append(case)
            return cases
        case["keys"] = [str(k) for k in got]
        originals = {_expected_key(k, renames): t for k, t in tensors.items()}
        case["copied"] = sorted(
            str(k) for k, v in got.items()
            if str(k) in originals and isinstance(v, torch.Tensor) and v.device.type != "meta"
            and (v.data_ptr() != originals[str(k)].data_ptr() or v.shape != originals[str(k)].shape)
        )
        expected_values = {_expected_key(k, renames): v for k, v in values.items()}
        case["wrong_values"] = sorted(
            str(k) for k, v in got.items()
            if str(k) in expected_values and not (
                isinstance(v, torch.Tensor) and v.device.type != "meta"
                and np.array_equal(torch.Tensor.detach(v).cpu().numpy(), expected_values[str(k)])
            )
        )
        new_model = make_new()
        try:
            new_model.load_state_dict(got, strict=True)
            case["strict_error"] = None
        except Exception as error:
            case["strict_error"] = _error_text(error, 500)
        cases.append(case)
    return cases


def _few(keys, limit=3) -> str:
    shown = ", ".join(repr(k) for k in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _judge_remap_keys(cases):
    earlier = set()  # the keys every earlier call should have returned
    for case in cases:
        on, renames = case["on"], case["renames"]
        if "keys" not in case:
            return Mistake("not-a-dict", f"remap_keys returned {case['kind']} (on {on}); return a new dict of renamed keys and the same tensors.")
        if case["keys_after_call"] != case["keys_before"]:
            gone = [k for k in case["keys_before"] if k not in case["keys_after_call"]]
            new = [k for k in case["keys_after_call"] if k not in case["keys_before"]]
            if gone or new:
                what = (f"{_few(gone)} {'is' if len(gone) == 1 else 'are'} gone from it"
                        + (f", and it has {_few(new)} instead" if new else ""))
            else:
                what = "its keys are the same but in another order"
            return Mistake("renamed-in-place", (
                f"remap_keys changed the dict it was given (on {on}): {what}. Build and return "
                "a new dict; whoever called you may still need the original, for instance to "
                "load it into the old model."
            ))
        if case["renames_changed"]:
            return Mistake("changed-renames", (
                f"remap_keys changed the renames dict it was given (on {on}, renames={renames}): "
                "read it, do not empty or edit it; the caller may use it again for the next "
                "checkpoint."
            ))
        if case["same_object"]:
            return Mistake("returned-input-dict", (
                f"remap_keys returned the very dict it was given (on {on}, renames={renames}), "
                "not a new one: a later change to either changes both. Return a new dict, even "
                "when no key is renamed (dict(state_dict) or a comprehension)."
            ))
        keys, expected = case["keys"], case["expected_keys"]
        if keys == expected or set(keys) == set(expected):
            if case["wrong_values"]:
                return Mistake("mismatched-tensors", (
                    f"The keys are right but {case['wrong_values'][0]} holds another tensor (on "
                    f"{on}): each tensor stays with its own key, only the key's prefix changes."
                ))
            if case["strict_error"]:
                return Mistake("refused-by-strict-load", f"load_state_dict(strict=True) refused your dict (on {on}): {case['strict_error']}")
            if case["copied"]:
                return Mistake("cloned-tensors", (
                    f"The keys and values are right, but {case['copied'][0]} holds a copy of the "
                    f"given tensor, not the tensor itself (on {on}): the task asks for the same "
                    "tensors. Put each given value in the new dict as it is, without .clone(); "
                    "for a large model, copies double the memory for nothing."
                ))
            earlier |= set(expected)
            continue
        chained = [_chained_key(k, renames) for k in case["keys_before"]]
        if set(keys) == set(chained) and set(chained) != set(expected):
            twice = next(
                (k, _expected_key(k, renames), c) for k, c, want in zip(case["keys_before"], chained, expected)
                if c != want
            )
            return Mistake("renamed-twice", (
                f"{twice[0]} became {twice[2]} (on {on}, renames={renames}): you renamed it to "
                f"{twice[1]}, then renamed that again because {twice[1]} starts with another old "
                "prefix. Each key gets at most one rename, the one its ORIGINAL name starts with: "
                "stop at the first match (break), and test the original key, not the renamed one."
            ))
        aligned = _aligned(case)
        stripped = _same_slip(case, _lstripped)
        if stripped:
            before, after, want = stripped
            return Mistake("lstrip-prefix", (
                f"{before} became {after}, not {want} (on {on}, renames={renames}): "
                "str.lstrip(old) removes every leading character that occurs anywhere in old, "
                "not the prefix old. Cut the prefix off by its length: new + key[len(old):] (or "
                "key.removeprefix(old))."
            ))
        wrong_inside = [
            (before, after) for before, after, want in zip(case["keys_before"], aligned, expected)
            if after is not None and after != want and before == want
        ]
        if wrong_inside and not any(old in wrong_inside[0][0] for old in renames):
            before, after = wrong_inside[0]
            return Mistake("unescaped-pattern", (
                f"{before} became {after} (on {on}, renames={renames}), though it does not "
                "contain any old prefix: your test matches more than the exact prefix (in a "
                "regular expression, '.' matches any character, so 'hidden.' matches "
                "'hidden2'). Test key.startswith(old), or escape it with re.escape(old)."
            ))
        if wrong_inside:
            before, after = wrong_inside[0]
            return Mistake("replaced-anywhere", (
                f"{before} became {after} (on {on}, renames={renames}): you replaced the old name "
                "wherever it appears in the key, but only keys that START with it belong to the "
                "renamed layer; the nested layer kept its name. Test key.startswith(old) and "
                "replace only that prefix: new + key[len(old):]. (str.replace(old, new, 1) also "
                "changes the first match, which may be inside the key.)"
            ))
        again = _same_slip(case, _replaced_everywhere)
        if again:
            before, after, want = again
            return Mistake("replaced-every-occurrence", (
                f"{before} became {after}, not {want} (on {on}, renames={renames}): your rename "
                "also replaced the old prefix where it appears again further inside the key. "
                "Replace only the prefix at the start: new + key[len(old):] (str.replace(old, new) "
                "changes every occurrence)."
            ))
        kept = [(before, want) for before, after, want in zip(case["keys_before"], aligned, expected)
                if after is not None and after == before and want != before]
        if kept:
            before, want = kept[0]
            old = next(o for o in renames if before.startswith(o))
            if renames[old] == "":
                return Mistake("skipped-empty-prefix", (
                    f"{before} kept its name (on {on}, renames={renames}), though it starts with "
                    f"the old prefix {old!r} and should become {want}: the new prefix here is the "
                    "empty string, and cutting the old prefix off is a rename too. An empty "
                    "string counts as False in a test such as `if new:` or `if "
                    "renames.get(...)`; test key.startswith(old) alone, then new + key[len(old):]."
                ))
            return Mistake("first-level-only", (
                f"{before} kept its name (on {on}, renames={renames}), though it starts with the "
                f"old prefix {old!r} and should become {want}. A prefix can be longer than the "
                "first part of the name (several levels, such as 'layers.0.'): test "
                "key.startswith(old) for every old prefix."
            ))
        missing = [k for k in expected if k not in keys]
        unchanged = [k for k in missing if k in case["keys_before"]]
        if unchanged and len(keys) < len(expected):
            return Mistake("dropped-unmatched-keys", (
                f"Keys that match no rename are gone, e.g. {unchanged[0]} (on {on}): copy them over "
                "unchanged, or load_state_dict(strict=True) reports them missing."
            ))
        extra = [k for k in keys if k not in expected]
        from_before = [k for k in extra if k in earlier and k not in case["keys_before"]]
        if extra and len(from_before) == len(extra):
            return Mistake("dict-kept-between-calls", (
                f"Your dict holds keys of an earlier call too, e.g. {from_before[0]} (on {on}, "
                f"renames={renames}): they belong to another model's state_dict. Start each call "
                "with a new, empty dict, made inside the function; a dict kept between calls "
                "collects every call's keys."
            ))
        return Mistake("wrong-keys", (
            f"Your keys differ from the new model's (on {on}, renames={renames}): missing "
            f"{missing[:3]}, unexpected {extra[:3]}. load_state_dict(strict=True) says: "
            f"{case['strict_error']}"
        ))
    return None


def _same_slip(case, slip):
    """(key, what ``slip`` makes of it, the right key) for the first key ``slip`` gets wrong,
    when the learner's keys are exactly what ``slip`` makes of every key; else None."""
    renames, expected = case["renames"], case["expected_keys"]
    slipped = [slip(key, renames) for key in case["keys_before"]]
    if set(case["keys"]) != set(slipped) or set(slipped) == set(expected):
        return None
    return next((key, after, want) for key, after, want in zip(case["keys_before"], slipped, expected)
                if after != want)


def _lstripped(key, renames):
    """The key after the first matching rename done with str.lstrip instead of a cut."""
    for old, new in renames.items():
        if key.startswith(old):
            return new + key.lstrip(old)
    return key


def _replaced_everywhere(key, renames):
    """The key after the first matching rename done with str.replace (every occurrence)."""
    for old, new in renames.items():
        if key.startswith(old):
            return key.replace(old, new)
    return key


def _aligned(case):
    """The learner's keys, paired with the input keys by position (dicts keep their order)."""
    keys = case["keys"]
    if len(keys) != len(case["keys_before"]):
        return [None] * len(case["keys_before"])
    return keys


remap_keys = Exercise(
    "remap_keys",
    chapter=CHAPTER,
    title="Load old weights into renamed layers",
    expects=Function("remap_keys", ("state_dict", "renames"), returns="a new dict of str keys to the same tensors"),
    probe=_probe_remap_keys,
    judge=_judge_remap_keys,
    reference=remap_keys,
    passed_message=(
        "Correct: only keys that start with an old prefix are renamed, the rest are copied as "
        "they are, and load_state_dict(strict=True) accepts the result with no missing or "
        "unexpected key."
    ),
    hints=[
        "Build a new dict. For each key, find the rename whose old prefix the key starts with; "
        "keep the key as it is when none does.",
        "A nested layer can have the same name as a top-level one (block.hidden vs hidden): "
        "replacing the old name anywhere in the key renames the wrong layer. Use "
        "key.startswith(old).",
        "new_key = new + key[len(old):] when key.startswith(old); remapped[new_key] = value",
    ],
)
