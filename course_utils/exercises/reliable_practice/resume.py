"""Chapter 07, S2: resume from a checkpoint exactly (the exercise ``resume``)."""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils import checkpoints
from course_utils.checkpoints import _loader_generators, restore_rng_state, save_checkpoint
from course_utils.env import random_state_preserved
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import given, tensor_of
# The words of resume's rule (no call of load_checkpoint), shared with its public cases, which an
# exam release ships: both checks refuse such an answer alike.
from course_utils.exercises.public_cases.reliable_practice import CALLS_LOAD_CHECKPOINT
from course_utils.exercises.reliable_practice.common import CHAPTER, _kind, _arrays
from course_utils.exercises.reliable_practice.checkpoint_data import _max_difference, _plain_of, _same, _value_of


@contextlib.contextmanager
def _one_thread():
    """Tiny models run faster on one thread, and much faster on a busy machine; put it back after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


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


@contextlib.contextmanager
def _past_modes():
    """The check's own work (the run that writes the checkpoint, reading what the answer left,
    training after it) runs past any torch function mode an answer left on, on the CPU, in
    float32: a mode sees none of it and changes none of it (``facts.value_facts`` reads so too),
    and a notebook's default dtype or device does not make the judge's side rebuild another run."""
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        with torch._C.DisableTorchFunction():  # a mode's torch.set_default_device is off too
            yield
    finally:
        torch.set_default_dtype(dtype)


def _rng_after(loader) -> dict:
    """Where every generator the checkpoint holds sits now: torch's global one, Python's and
    NumPy's, and the loader's own (by where they sit in the loader)."""
    return {"torch": torch.get_rng_state().numpy().copy(), "others": _other_streams(),
            "loader": _loader_states(loader)}


def _probe_resume(answer, run):
    """The checkpoint the check wrote and the freshly built objects it gave ("given", as plain
    data), and what the answer did to them and how training went on after it. Never what the
    reference's resume leaves, nor an uninterrupted run: ``_expect_resume`` computes both, from
    the recorded checkpoint, on the judge's side."""
    with _one_thread():
        return _resume_record(answer, run)


def _resume_record(answer, run):
    record = {"epochs": _EPOCHS, "saved_epoch": _SAVED_EPOCH}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.pt")
        with _past_modes():
            x, y = _resume_data()
            torch.manual_seed(0)  # the run that saves: every stream it draws from seeded
            random.seed(0)
            np.random.seed(0)
            first = _resume_parts(x, y)
            lrs_before_save = []
            for _ in range(_SAVED_EPOCH + 1):
                lrs_before_save.append(_lr(first[1]))
                _train_epoch(first)
            save_checkpoint(path, _SAVED_EPOCH, *first)
            del first
            # A new process: other seeds, freshly built objects with their own initial weights.
            torch.manual_seed(12345)
            torch.rand(7)
            random.seed(12345)  # Python's and NumPy's streams start elsewhere in a new process too
            np.random.seed(12345)
            fresh = _resume_parts(x, y)
            record["given"] = {
                "x": given(x),
                "y": given(y),
                "lrs_before_save": lrs_before_save,
                # what the file holds, read back as the answer reads it
                "checkpoint": _plain_of(torch.load(path, map_location="cpu", weights_only=True)),
                "fresh": {
                    "model": _plain_of(fresh[0].state_dict()),
                    "optimizer": _plain_of(fresh[1].state_dict()),
                    "scheduler": _plain_of(fresh[2].state_dict()),
                    "scaler": _plain_of(fresh[3].state_dict()),
                    "loader": _loader_states(fresh[4]),
                },
            }
        loads = []
        real_load = torch.load

        def recording_load(*args, **kwargs):  # the task's rule: weights_only=True
            loads.append(repr(kwargs.get("weights_only")))
            return real_load(*args, **kwargs)

        assigned = []
        real_load_state_dict = torch.nn.Module.load_state_dict

        def recording_load_state_dict(module, *args, **kwargs):  # assign=True replaces parameters
            if kwargs.get("assign") or (len(args) > 2 and args[2]):
                assigned.append(type(module).__name__)
            return real_load_state_dict(module, *args, **kwargs)

        torch.load = recording_load
        torch.nn.Module.load_state_dict = recording_load_state_dict
        try:
            with checkpoints.calls_watched() as library_calls:
                start = run(answer, path, *fresh, on="a checkpoint saved after epoch 2 and freshly built objects")
        finally:
            torch.load = real_load
            torch.nn.Module.load_state_dict = real_load_state_dict
        # The tensors the optimizer steps must be the model's own: a model whose parameters were
        # replaced (load_state_dict(..., assign=True), new nn.Parameters) trains nothing.
        stepped = {id(p) for group in fresh[1].param_groups for p in group["params"]}
        record["parameters_replaced"] = [name for name, p in fresh[0].named_parameters() if id(p) not in stepped]
        record["assigned"] = assigned
        if record["parameters_replaced"]:
            record["start_kind"] = _kind(start)
            return record
        with _past_modes():
            record["rng_after"] = _rng_after(fresh[4])  # where the answer left every generator
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
            if record["start"] is None or not 0 <= record["start"] <= _EPOCHS:
                return record
            lrs = []
            for _ in range(record["start"], _EPOCHS):
                lrs.append(_lr(fresh[1]))
                _train_epoch(fresh)
            record["lrs_resumed"] = lrs
            record["resumed"] = _arrays(fresh[0].state_dict())
    return record


def _expect_resume(record):
    """What the reference's resume leaves, from the recorded checkpoint and fresh objects
    (rebuilt: the same architecture, the recorded states loaded, the file written again), and
    the run it continues: its learning rates and weights after the remaining epochs, which a
    resume that is exact makes those of the uninterrupted run. Whether each of the answer's
    generators sits where the reference's does, for the judge."""
    if record.get("parameters_replaced"):
        return record  # the judge's verdict needs no reference run
    try:
        with _one_thread(), _past_modes(), random_state_preserved(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = _reference_run(record["given"])
    except _UNREADABLE:
        raise  # the judge's "could not read the record" verdict
    except Exception as error:  # a record rewritten into what no checkpoint holds: the same verdict
        raise ValueError(f"the recorded checkpoint cannot be rebuilt ({type(error).__name__}: {error})") from None
    record.update({key: reference[key] for key in (
        "saved_weights", "saved_moments", "saved_scaler", "lrs_straight", "straight", "scaler_straight")})
    after, right = record["rng_after"], reference["rng"]
    record["rng_restored"] = bool(np.array_equal(after["torch"], right["torch"]))
    record["others_not_restored"] = [
        name for name in right["others"] if not np.array_equal(after["others"][name], right["others"][name])
    ]
    loader_after, loader_fresh, loader_saved = after["loader"], record["given"]["fresh"]["loader"], right["loader"]
    # Moved off the fresh loader's state, yet not to the saved one: drawn from after a restore.
    record["loader_moved"] = loader_after.keys() == loader_fresh.keys() and not all(
        np.array_equal(loader_after[key], loader_fresh[key]) for key in loader_fresh
    )
    record["loader_saved"] = sorted(loader_saved)
    record["loader_after"] = sorted(loader_after)
    record["loader_restored"] = loader_after.keys() == loader_saved.keys() and all(
        np.array_equal(loader_after[key], loader_saved[key]) for key in loader_saved
    )
    return record


# What Exercise.judge turns into its "could not read the record" verdict.
_UNREADABLE = (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError)


def _reference_run(given_run) -> dict:
    """The reference's resume on the objects the probe gave, rebuilt, then the remaining epochs."""
    x, y = tensor_of(given_run["x"]), tensor_of(given_run["y"])
    fresh = given_run["fresh"]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.pt")
        torch.save(_value_of(given_run["checkpoint"]), path)
        parts = _resume_parts(x, y)
        model, optimizer, scheduler, scaler, loader = parts
        model.load_state_dict(_value_of(fresh["model"]))
        optimizer.load_state_dict(_value_of(fresh["optimizer"]))
        scheduler.load_state_dict(_value_of(fresh["scheduler"]))
        scaler.load_state_dict(_value_of(fresh["scaler"]))
        generators = _loader_generators(loader)[0]
        if generators.keys() != fresh["loader"].keys():
            raise ValueError("the recorded loader's generators are not those of the loader the check builds")
        for key, generator in generators.items():
            generator.set_state(torch.from_numpy(np.array(fresh["loader"][key], dtype=np.uint8)))
        start = resume.reference(path, *parts)
    if type(start) is not int or not 0 <= start <= _EPOCHS:
        raise ValueError(f"the recorded checkpoint's epoch gives {start!r}, not an epoch of the run")
    run = {
        "saved_weights": _arrays(model.state_dict()),
        "saved_moments": _adam_moments(optimizer),
        "saved_scaler": {k: float(v) for k, v in scaler.state_dict().items()},
        "rng": _rng_after(loader),
    }
    lrs = [float(lr) for lr in given_run["lrs_before_save"]][:start]
    for _ in range(start, _EPOCHS):
        lrs.append(_lr(optimizer))
        _train_epoch(parts)
    run.update(lrs_straight=lrs, straight=_arrays(model.state_dict()), scaler_straight=float(scaler.get_scale()))
    return run


def _judge_resume(record):
    saved = record["saved_epoch"]
    replaced = record.get("parameters_replaced")
    if replaced:
        how = ("model.load_state_dict(..., assign=True) puts the checkpoint's tensors in the model "
               "in place of its parameters" if record.get("assigned") else
               "something in your function put new tensors in the model in place of its parameters")
        return Mistake("parameters-replaced", (
            f"After your function the optimizer no longer holds the model's parameters "
            f"({', '.join(replaced[:3])}{', ...' if len(replaced) > 3 else ''} are other tensors): "
            f"{how}, while the optimizer you were given still steps the old ones, so training "
            "on would update tensors the model no longer uses. Load the weights into the "
            "existing parameters and keep them: " + (
                "model.load_state_dict(checkpoint['model']), without assign=True, copies into them."
                if record.get("assigned") else
                "model.load_state_dict(checkpoint['model']) copies into them; do not set new ones.")
        ))
    if "load_checkpoint" in record.get("library_calls", []):
        return CALLS_LOAD_CHECKPOINT  # the task's rule, in the words the exam's check uses too
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
    expect=_expect_resume,
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
