"""Chapter 07, S2: resume from a checkpoint exactly (the exercise ``resume``).

Engine: applies states.py's idea of what is left behind, compared with what the reference's
resume leaves on the judge's side (the model's mode, the scheduler's whole state, Adam's moments,
the scaler, every generator), and the task's rule (torch.load with weights_only=True, said);
hand-written because the answer restores a training run whose mistakes are named from the run
that continues after it (bit for bit against the uninterrupted one). Its run lives in
resume_run.py.
"""

from __future__ import annotations

import os
import random
import tempfile
import warnings

import numpy as np
import torch

from course_utils import checkpoints
from course_utils.checkpoints import restore_rng_state, save_checkpoint
from course_utils.env import random_state_preserved
from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.facts import given
# The words of resume's rule (no call of load_checkpoint), shared with its public cases, which an
# exam release ships: both checks refuse such an answer alike.
from course_utils.exercises.public_cases.reliable_practice import CALLS_LOAD_CHECKPOINT
from course_utils.exercises.reliable_practice.common import CHAPTER, _kind, _arrays
from course_utils.exercises.reliable_practice.checkpoint_data import _max_difference, _plain_of, _same
from course_utils.exercises.reliable_practice.resume_run import (
    _EPOCHS, _SAVED_EPOCH, _adam_moments, _loader_states, _lr, _one_thread, _past_modes, _resume_data,
    _reference_run, _resume_parts, _rng_after, _scheduler_facts, _train_epoch)
from course_utils.exercises.messages import Message, Messages


MESSAGES = Messages("resume", {
    "parameters-replaced": (
        "After your function the optimizer no longer holds the model's parameters ({replaced}{more} "
        "are other tensors): {how}, while the optimizer you were given still steps the old ones, so "
        "training on would update tensors the model no longer uses. Load the weights into the "
        "existing parameters and keep them: {fix}"),
    "parameters-replaced-assigned-how": (
        "model.load_state_dict(..., assign=True) puts the checkpoint's tensors in the model in place "
        "of its parameters"),
    "parameters-replaced-other-how": (
        "something in your function put new tensors in the model in place of its parameters"),
    "parameters-replaced-assigned-fix": (
        "model.load_state_dict(checkpoint['model']), without assign=True, copies into them."),
    "parameters-replaced-other-fix": (
        "model.load_state_dict(checkpoint['model']) copies into them; do not set new ones."),
    "other-streams-not-restored": (
        "After resume {streams} are not where the checkpoint saved them: a run that draws from them "
        "(a random augmentation, a sampler) would go on differently from the uninterrupted one. "
        "restore_rng_state(checkpoint['rng'], loader) puts back every generator the checkpoint "
        "holds; draw nothing after it."),
    "other-streams-not-restored-one": (
        "After resume {streams} is not where the checkpoint saved it: a run that draws from it (a "
        "random augmentation, a sampler) would go on differently from the uninterrupted one. "
        "restore_rng_state(checkpoint['rng'], loader) puts back every generator the checkpoint "
        "holds; draw nothing after it."),
    "new-loader-generator": (
        "After resume the DataLoader's own generator (generator=torch.Generator().manual_seed(...)) "
        "is where the freshly built loader's seed put it, not where the checkpoint saved it: after "
        "the restart the loader shuffles as in epoch 0, not as the uninterrupted run. {where}Restore "
        "it with the global generators: restore_rng_state(checkpoint['rng'], loader)."),
    "loader-generator-not-restored": (
        "After resume the DataLoader's own generator (generator=torch.Generator().manual_seed(...)) "
        "is where the freshly built loader's seed put it, not where the checkpoint saved it: after "
        "the restart the loader shuffles as in epoch 0, not as the uninterrupted run. {where}Restore "
        "it with the global generators: restore_rng_state(checkpoint['rng'], loader)."),
    "new-loader-generator-where": (
        "The loader's generators now sit at {after}; the checkpoint saved them at {saved}: give the "
        "loader its state back, not a new generator. "),
    "no-place": "no place",
    "repeats-saved-epoch": (
        "resume returned {start}, but the checkpoint's epoch is {saved} (the last finished one): "
        "{what}. Return checkpoint['epoch'] + 1."),
    "skips-an-epoch": (
        "resume returned {start}, but the checkpoint's epoch is {saved} (the last finished one): "
        "{what}. Return checkpoint['epoch'] + 1."),
    "epoch-runs-twice": "epoch {saved} was finished before the save, so it runs twice",
    "epochs-run-again": "epochs {start} to {saved} were finished before the save and run again",
    "epoch-never-runs": "epoch {first} never runs",
    "epochs-never-run": "epochs {first} to {last} never run",
    "scheduler-not-restored": (
        "The learning rate after resume is wrong: epoch {epoch} trained with lr={lr:.6g}, the "
        "uninterrupted run with lr={expected_lr:.6g}. {why}"),
    "scheduler-stepped-again": (
        "The learning rate after resume is wrong: epoch {epoch} trained with lr={lr:.6g}, the "
        "uninterrupted run with lr={expected_lr:.6g}. {why}"),
    "scheduler-not-as-saved": (
        "The learning rate after resume is wrong: epoch {epoch} trained with lr={lr:.6g}, the "
        "uninterrupted run with lr={expected_lr:.6g}. {why}"),
    "scheduler-not-restored-why": (
        "The scheduler started its schedule over: scheduler.load_state_dict(checkpoint['scheduler'])."),
    "scheduler-stepped-again-why": (
        "The schedule is one step ahead of the uninterrupted run's: the checkpoint's scheduler state "
        "already counts the saved epoch, so load it as it is "
        "(scheduler.load_state_dict(checkpoint['scheduler'])) and do not step it again."),
    "scheduler-not-as-saved-why": (
        "Restore the scheduler's state as it was saved: scheduler.load_state_dict(checkpoint['scheduler'])."),
    "passed": (
        "Correct: 3 epochs, a checkpoint, a fresh start and 3 more epochs give bit for bit the "
        "weights of 6 epochs in one go, the loader's shuffle included."),
    "hint-1": (
        "Load the file with torch.load(path, map_location=..., weights_only=True); it is a dict with "
        "the keys epoch, model, optimizer, scheduler, scaler and rng."),
    "hint-2": (
        "Each object has a load_state_dict method for its part; the random generators, the loader's "
        "own included, go back with restore_rng_state(checkpoint['rng'], loader). Then return the "
        "epoch to continue from."),
    "hint-3": (
        "model / optimizer / scheduler / scaler .load_state_dict(checkpoint[...]); "
        "restore_rng_state(checkpoint['rng'], loader); return checkpoint['epoch'] + 1"),
    "whole-checkpoint-into-model": (
        "the checkpoint is a dict of parts (epoch, model, optimizer, scheduler, scaler, rng): the "
        "model's weights are one of them, model.load_state_dict(checkpoint['model'])."),
    "loaded-something-else": (
        "this checkpoint holds only tensors and plain values, so weights_only=True reads it; "
        "something else than the checkpoint path was loaded."),
    "scaler-enabled-differently": (
        "an enabled GradScaler cannot load the {{}} that a disabled one saved; create the scaler with"
        " the same enabled= as the run that saved it."),
    "no-epoch-returned": (
        "resume returned {start_kind}; it should return the epoch to continue from, an int: the "
        "checkpoint was saved after epoch {saved}, so {next}."),
    "weights-only-false": (
        "Your function loads the checkpoint with torch.load(..., weights_only=False): that unpickles "
        "any class the file names, so a file you did not write can run code on your machine. A "
        "checkpoint of state_dicts and plain values needs no more than weights_only=True, as the task"
        " asks."),
    "model-not-restored": Message(
        "After resume the model's weights are not the checkpoint's (they are still the fresh model's "
        "random start). Load them: model.load_state_dict(checkpoint['model']).",
        advises=("model.load_state_dict(checkpoint['model'])",)),
    "loaded-into-other-model": (
        "After resume the model's weights are not the checkpoint's: your function loaded them into "
        "another {kind}, one it made itself (a copy), not the model you were given, which the "
        "training after resume goes on with. Load them into the `model` argument itself."),
    "loaded-into-other-optimizer": (
        "After resume the optimizer has no state: your function loaded the checkpoint's optimizer "
        "state into another {kind}, one it made itself, which the training after resume does not "
        "use. Load it on the optimizer you are given, the `optimizer` argument, and make no "
        "optimizer of your own."),
    "optimizer-not-restored": Message(
        "After resume the optimizer has no state: Adam's moment estimates (exp_avg, exp_avg_sq) and "
        "its step count restarted at zero, so the first steps after the restart are larger than the "
        "uninterrupted run's and the weights drift apart. "
        "optimizer.load_state_dict(checkpoint['optimizer']), on the optimizer you are given: training"
        " goes on with that object.",
        advises=("optimizer.load_state_dict(checkpoint['optimizer'])",)),
    "optimizer-state-changed": (
        "After resume Adam's moment estimates differ from the checkpoint's: load the optimizer's "
        "state_dict as it was saved."),
    "scaler-not-restored": Message(
        "After resume the GradScaler's scale is {value:g}, a fresh scaler's; the checkpoint's was "
        "{scale:g}. With float16 on a GPU the scale decides which steps are skipped, so restore it: "
        "scaler.load_state_dict(checkpoint['scaler']).",
        advises=("scaler.load_state_dict(checkpoint['scaler'])",)),
    "weights-only-unsaid": (
        "Your function loads the checkpoint with torch.load without saying weights_only=True: it then"
        " depends on the default, which is False in PyTorch before 2.6, where any class the file "
        "names is unpickled and can run code. Say it, as the task asks: torch.load(path, "
        "weights_only=True)."),
    "rng-not-restored": Message(
        "After resume the global random number generator is not where the checkpoint saved it: the "
        "dropout masks and the batch order after the restart differ from the uninterrupted run's. "
        "restore_rng_state(checkpoint['rng'], loader).",
        advises=("restore_rng_state(checkpoint['rng'], loader)",)),
    "loader-used-after-restore": (
        "After resume the DataLoader's own generator is neither where the checkpoint saved it nor "
        "where the freshly built loader's seed put it: it moved after it was set, so something in "
        "your function drew from it (iterating over the loader draws its shuffle) or gave it another "
        "state. Restore it with restore_rng_state(checkpoint['rng'], loader), and leave the loader "
        "alone after that."),
    "incomplete-restore": (
        "After resuming and training epochs {saved} to {epochs}, the weights differ from the "
        "uninterrupted run's by up to {resumed:.3g}. Restore everything the checkpoint holds: model, "
        "optimizer, scheduler, scaler and RNG states."),
    "changed-mode": (
        "After resume the model is in eval mode; the freshly built model was in train mode, as the "
        "run it continues: a training loop that does not call model.train() itself would go on "
        "without dropout. Restoring a checkpoint changes states, not the mode: leave model.train() / "
        "model.eval() to the loop."),
    "scheduler-state-changed": (
        "After resume the scheduler's state is not the checkpoint's: {differ} differ. Load it as it "
        "was saved, scheduler.load_state_dict(checkpoint['scheduler']), and change nothing in it "
        "afterwards."),
})


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

        other_models = []

        def recording_load_state_dict(module, *args, **kwargs):  # assign=True replaces parameters
            if kwargs.get("assign") or (len(args) > 2 and args[2]):
                assigned.append(type(module).__name__)
            if module is not fresh[0] and type(module) is type(fresh[0]):  # into another model
                other_models.append(type(module).__name__)
            return real_load_state_dict(module, *args, **kwargs)

        other_optimizers = []
        real_optimizer_load = torch.optim.Optimizer.load_state_dict

        def recording_optimizer_load(optimizer, *args, **kwargs):  # into the optimizer given?
            if optimizer is not fresh[1]:
                other_optimizers.append(type(optimizer).__name__)
            return real_optimizer_load(optimizer, *args, **kwargs)

        torch.load = recording_load
        torch.nn.Module.load_state_dict = recording_load_state_dict
        torch.optim.Optimizer.load_state_dict = recording_optimizer_load
        try:
            with checkpoints.calls_watched() as library_calls:
                start = run(answer, path, *fresh, on="a checkpoint saved after epoch 2 and freshly built objects")
        finally:
            torch.load = real_load
            torch.nn.Module.load_state_dict = real_load_state_dict
            torch.optim.Optimizer.load_state_dict = real_optimizer_load
        record["other_optimizers"] = other_optimizers
        record["other_models"] = other_models
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
            # What else it left: the model's modes and the scheduler's whole state.
            record["modes_after"] = [m.training for m in fresh[0].modules()]
            record["scheduler_after"] = _scheduler_facts(fresh[2])
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
            reference = _reference_run(record["given"], resume.reference)
    except _UNREADABLE:
        raise  # the judge's "could not read the record" verdict
    except Exception as error:  # a record rewritten into what no checkpoint holds: the same verdict
        raise ValueError(f"the recorded checkpoint cannot be rebuilt ({type(error).__name__}: {error})") from None
    record.update({key: reference[key] for key in (
        "saved_weights", "saved_moments", "saved_scaler", "lrs_straight", "straight", "scaler_straight")})
    record["expected_modes"], record["expected_scheduler"] = reference["modes"], reference["scheduler"]
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


def _judge_resume(record):
    saved = record["saved_epoch"]
    replaced = record.get("parameters_replaced")
    if replaced:
        how = "assigned" if record.get("assigned") else "other"
        return MESSAGES("parameters-replaced", replaced=', '.join(replaced[:3]),
                        more=', ...' if len(replaced) > 3 else '',
                        how=MESSAGES.text(f"parameters-replaced-{how}-how"),
                        fix=MESSAGES.text(f"parameters-replaced-{how}-fix"))
    if "load_checkpoint" in record.get("library_calls", []):
        return CALLS_LOAD_CHECKPOINT  # the task's rule, in the words the exam's check uses too
    if record["start"] is None:
        return MESSAGES("no-epoch-returned", start_kind=record['start_kind'], saved=saved, next=saved + 1)
    if "False" in record["weights_only"]:
        return MESSAGES("weights-only-false")
    if not _same(record["weights_after"], record["saved_weights"]) and record.get("other_models"):
        return MESSAGES("loaded-into-other-model", kind=record["other_models"][0])
    if not _same(record["weights_after"], record["saved_weights"]):
        return MESSAGES("model-not-restored")
    moments, expected_moments = record["moments_after"], record["saved_moments"]
    if not moments and record.get("other_optimizers"):
        return MESSAGES("loaded-into-other-optimizer", kind=record["other_optimizers"][0])
    if not moments:
        return MESSAGES("optimizer-not-restored")
    if len(moments) != len(expected_moments) or not all(
        np.array_equal(a, b) for a, b in zip(moments, expected_moments)
    ):
        return MESSAGES("optimizer-state-changed")
    if record["scaler_after"] != record["saved_scaler"]:
        got, want = record["scaler_after"], record["saved_scaler"]
        return MESSAGES("scaler-not-restored", value=got.get('scale', float('nan')), scale=want['scale'])
    if "None" in record["weights_only"]:
        return MESSAGES("weights-only-unsaid")
    if not record["rng_restored"]:
        return MESSAGES("rng-not-restored")
    if record.get("others_not_restored"):
        streams = record["others_not_restored"]
        return Mistake("other-streams-not-restored", MESSAGES.text(
            "other-streams-not-restored-one" if len(streams) == 1 else "other-streams-not-restored",
            streams=' and '.join(streams)))
    if not record["loader_restored"] and record.get("loader_moved") and record["loader_after"] == record["loader_saved"]:
        return MESSAGES("loader-used-after-restore")
    if not record["loader_restored"]:
        if record["loader_after"] != record["loader_saved"]:
            where = MESSAGES.text("new-loader-generator-where",
                                  after=' and '.join(record['loader_after']) or MESSAGES.text("no-place"),
                                  saved=' and '.join(record['loader_saved']))
            named = "new-loader-generator"
        else:
            where = ""
            named = "loader-generator-not-restored"
        return MESSAGES(named, where=where)
    start = record["start"]
    if start != saved + 1:
        named = "repeats-saved-epoch" if start <= saved else "skips-an-epoch"
        if start == saved:
            what = MESSAGES.text("epoch-runs-twice", saved=saved)
        elif start < saved:
            what = MESSAGES.text("epochs-run-again", start=start, saved=saved)
        elif start == saved + 2:
            what = MESSAGES.text("epoch-never-runs", first=saved + 1)
        else:
            what = MESSAGES.text("epochs-never-run", first=saved + 1, last=start - 1)
        return MESSAGES(named, start=start, saved=saved, what=what)
    lrs, expected_lrs = record["lrs_resumed"], record["lrs_straight"][saved + 1:]
    if not np.allclose(lrs, expected_lrs, rtol=1e-12, atol=0):
        index = next(i for i, (a, b) in enumerate(zip(lrs, expected_lrs)) if not np.isclose(a, b, rtol=1e-12, atol=0))
        straight = record["lrs_straight"]
        if np.allclose(lrs, straight[: len(lrs)], rtol=1e-12, atol=0):
            named = "scheduler-not-restored"
        elif np.allclose(lrs[:-1], straight[saved + 2:], rtol=1e-12, atol=0):
            named = "scheduler-stepped-again"
        else:
            named = "scheduler-not-as-saved"
        return MESSAGES(named, epoch=saved + 1 + index, lr=lrs[index], expected_lr=expected_lrs[index],
                        why=MESSAGES.text(f"{named}-why"))
    if not _same(record["resumed"], record["straight"]):
        return MESSAGES("incomplete-restore",
                        saved=saved + 1,
                        epochs=record['epochs'] - 1,
                        resumed=_max_difference(record['resumed'], record['straight']))
    if record.get("expected_modes") is not None and record["modes_after"] != record["expected_modes"]:
        return MESSAGES("changed-mode")
    expected_scheduler = record.get("expected_scheduler")
    if expected_scheduler is not None and record["scheduler_after"] != expected_scheduler:
        differ = sorted(key for key in expected_scheduler if record["scheduler_after"].get(key) != expected_scheduler[key])
        return MESSAGES("scheduler-state-changed", differ=', '.join(differ))
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
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    # The first optimizer a process builds imports torch._dynamo, seconds on a busy machine;
    # the probe itself takes a fraction of a second.
    time_limit_s=20.0,
    error_notes=MESSAGES.notes({
        "whole-checkpoint-into-model": 'Unexpected key(s) in state_dict: "epoch"',
        "loaded-something-else": "Weights only load failed",
        "scaler-enabled-differently": "The source state dict is empty",
    }),
    messages=MESSAGES,
)
