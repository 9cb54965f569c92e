"""Chapter 07's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them (the catalogue at the end)."""

import copy
import os
import pickle
import re
import warnings
from collections import OrderedDict

import pytest
import torch
from torch import nn

from course_utils.checkpoints import load_checkpoint, restore_rng_state, save_atomically
from course_utils.exercises import reliable_practice as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import assert_references_pass_and_leave_the_session_alone
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong

EXERCISES = (ex.save_weights, ex.resume, ex.remap_keys)


def test_every_reference_passes_quickly_and_leaves_the_session_alone():
    torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)  # the first optimizer imports dynamo
    assert_references_pass_and_leave_the_session_alone(EXERCISES)


def test_a_blank_answer_is_not_attempted():
    def blank(*args):
        raise NotImplementedError()

    for exercise in EXERCISES:
        assert exercise.verdict(blank).outcome is Outcome.NOT_ATTEMPTED


# -- save_weights (S1) -----------------------------------------------------------------------
def save_with_a_file_object(model, path):
    with open(path, "wb") as file:
        torch.save(model.state_dict(), file)


def save_on_the_cpu_as_a_plain_dict(model, path):
    torch.save({name: t.detach().cpu().clone() for name, t in model.state_dict().items()}, path)


def save_atomically_with_the_course_helper(model, path):
    save_atomically(model.state_dict(), path)


def save_an_ordered_copy(model, path):
    state = OrderedDict((k, v) for k, v in copy.deepcopy(model.state_dict()).items())
    torch.save(state, os.fspath(path), _use_new_zipfile_serialization=True)


def save_the_object(model, path):
    torch.save(model, path)


def save_the_parameter_list(model, path):
    torch.save(list(model.parameters()), path)


def save_named_parameters(model, path):
    torch.save(dict(model.named_parameters()), path)


def save_the_bound_method(model, path):
    torch.save(model.state_dict, path)


def save_inside_a_dict(model, path):
    torch.save({"model": model.state_dict()}, path)


def save_next_to_the_path(model, path):
    torch.save(model.state_dict(), path + ".bak")


def save_after_zeroing(model, path):
    with torch.no_grad():
        model[0].weight.zero_()
    torch.save(model.state_dict(), path)


def save_in_eval_mode(model, path):
    model.eval()  # "the weights for inference"
    torch.save(model.state_dict(), path)


def save_unless_the_file_exists(model, path):
    if os.path.exists(path):  # "never overwrite a checkpoint"
        return
    torch.save(model.state_dict(), path)


def save_in_half_precision(model, path):
    torch.save({k: v.half() if v.is_floating_point() else v for k, v in model.state_dict().items()}, path)


def save_the_model_halved(model, path):
    torch.save(model.half().state_dict(), path)  # "half the file size"


def save_with_pickle(model, path):
    with open(path, "wb") as file:
        pickle.dump(model.state_dict(), file)


def save_with_keep_vars(model, path):
    torch.save(model.state_dict(keep_vars=True), path)


def save_in_the_legacy_format(model, path):
    torch.save(OrderedDict(model.state_dict()), path, _use_new_zipfile_serialization=False)


def save_into_a_made_folder(model, path):
    from pathlib import Path

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), target)


def save_in_train_mode(model, path):
    model.train()  # "state_dict() of a model in training"
    torch.save(model.state_dict(), path)


def save_in_float64(model, path):
    torch.save({k: v.double() if v.is_floating_point() else v for k, v in model.state_dict().items()}, path)


def save_once_per_path(model, path, _saved=set()):
    if path in _saved:  # "already saved there"
        return
    _saved.add(path)
    torch.save(model.state_dict(), path)


def save_numpy_arrays(model, path):
    torch.save({k: v.numpy() for k, v in model.state_dict().items()}, path)


def save_with_a_prefix(model, path):
    torch.save(model.state_dict(prefix="model."), path)


# -- resume (S2) -----------------------------------------------------------------------------
def _resume(model=True, optimizer=True, scheduler=True, scaler=True, rng=True, loader=True, offset=1):
    def resume(path, model_, optimizer_, scheduler_, scaler_, loader_):
        checkpoint = torch.load(path, weights_only=True)
        if model:
            model_.load_state_dict(checkpoint["model"])
        if optimizer:
            optimizer_.load_state_dict(checkpoint["optimizer"])
        if scheduler:
            scheduler_.load_state_dict(checkpoint["scheduler"])
        if scaler:
            scaler_.load_state_dict(checkpoint["scaler"])
        if rng:
            with warnings.catch_warnings(record=True):  # "no loader was given", when it was not
                restore_rng_state(checkpoint["rng"], loader_ if loader else None)
        return checkpoint["epoch"] + offset

    return resume


def resume_in_another_order(path, model, optimizer, scheduler, scaler, loader):
    state = torch.load(path, map_location=torch.device("cpu"), weights_only=True)
    restore_rng_state(state["rng"], loader=[loader])
    scheduler.load_state_dict(state["scheduler"])
    optimizer.load_state_dict(state["optimizer"])
    model.load_state_dict(state["model"], strict=True)
    scaler.load_state_dict(state["scaler"])
    return int(state["epoch"]) + 1


def resume_torch_generators_only(path, model, optimizer, scheduler, scaler, loader):
    # Enough for the probe's training run (it draws from torch's generator and the loader's
    # only), but Python's and NumPy's streams stay where the new process left them: a run with
    # random augmentations would not continue as before. The task asks for every generator.
    state = torch.load(path, weights_only=True)
    for obj, key in ((model, "model"), (optimizer, "optimizer"), (scheduler, "scheduler"), (scaler, "scaler")):
        obj.load_state_dict(state[key])
    torch.set_rng_state(state["rng"]["torch"])
    (loader_state,) = state["rng"]["loaders"][0].values()
    loader.generator.set_state(loader_state)
    return state["epoch"] + 1


def resume_with_the_course_helper(path, model, optimizer, scheduler, scaler, loader):
    return load_checkpoint(path, model, optimizer, scheduler, scaler, loader)


def resume_returns_nothing(path, model, optimizer, scheduler, scaler, loader):
    _resume()(path, model, optimizer, scheduler, scaler, loader)


def resume_reseeds_the_loader(path, model, optimizer, scheduler, scaler, loader):
    start = _resume(loader=False)(path, model, optimizer, scheduler, scaler, loader)
    loader.generator.manual_seed(7)  # the seed it was built with: epoch 0's order again
    return start


def resume_gives_the_loader_a_new_generator(path, model, optimizer, scheduler, scaler, loader):
    # The state goes into a new object; the sampler still shuffles with the old one.
    start = _resume(loader=False)(path, model, optimizer, scheduler, scaler, loader)
    (loader_state,) = torch.load(path, weights_only=True)["rng"]["loaders"][0].values()
    loader.generator = torch.Generator()
    loader.generator.set_state(loader_state)
    return start


def resume_old_five_arguments(path, model, optimizer, scheduler, scaler):
    return ex.resume.reference(path, model, optimizer, scheduler, scaler, None)


def resume_weights_only_false(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, weights_only=False)  # "my own file, so it is safe"
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint["epoch"] + 1


def resume_into_a_new_optimizer(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer = torch.optim.Adam(model.parameters())  # rebuilt after loading the weights
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint["epoch"] + 1


def resume_steps_the_scheduler(path, model, optimizer, scheduler, scaler, loader):
    start = ex.resume.reference(path, model, optimizer, scheduler, scaler, loader)
    scheduler.step()  # "the saved epoch is finished, so move the schedule on"
    return start


def resume_seeds_by_epoch(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    torch.manual_seed(checkpoint["epoch"])  # "a seed per epoch is reproducible too"
    loader.generator.manual_seed(checkpoint["epoch"])
    return checkpoint["epoch"] + 1


def resume_in_a_loop(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    restore_rng_state(checkpoint["rng"], loader)  # first: nothing below draws random numbers
    for part, key in ((model, "model"), (optimizer, "optimizer"), (scheduler, "scheduler"), (scaler, "scaler")):
        part.load_state_dict(checkpoint[key])
    return int(checkpoint["epoch"]) + 1


def resume_not_strict_with_a_path_string(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(str(path), weights_only=True, map_location=torch.device("cpu"))
    model.load_state_dict(checkpoint["model"], strict=False)
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], [loader])
    return checkpoint["epoch"] + 1


def resume_then_draws(path, model, optimizer, scheduler, scaler, loader):
    start = ex.resume.reference(path, model, optimizer, scheduler, scaler, loader)
    torch.randn(1)  # "a quick sanity check" after restoring: the global stream moves on
    return start


def resume_resets_the_lr(path, model, optimizer, scheduler, scaler, loader):
    start = ex.resume.reference(path, model, optimizer, scheduler, scaler, loader)
    for group in optimizer.param_groups:  # "start the new process at the base lr"
        group["lr"] = group["initial_lr"]
    return start


# -- remap_keys (S3) -------------------------------------------------------------------------
def remap_with_partition(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        head, dot, rest = key.partition(".")
        out[renames.get(head + dot, head + dot)[:-1] + dot + rest if head + dot in renames else key] = value
    return out


def remap_with_regex(state_dict, renames):
    if not renames:
        return dict(state_dict)
    pattern = re.compile("^(" + "|".join(re.escape(old) for old in renames) + ")")
    return {pattern.sub(lambda m: renames[m.group(1)], key): value for key, value in state_dict.items()}


def remap_testing_the_original_key(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        new_key = key
        for old, new in renames.items():
            if key.startswith(old):
                new_key = new + key[len(old):]
        out[new_key] = value
    return out


def remap_with_next(state_dict, renames):
    def rename(key):
        old = next((old for old in renames if key.startswith(old)), None)
        return key if old is None else renames[old] + key.removeprefix(old)

    return OrderedDict((rename(key), value) for key, value in state_dict.items())


def remap_with_removeprefix(state_dict, renames):
    def rename(key):
        for old, new in renames.items():
            if key.startswith(old):
                return new + key.removeprefix(old)
        return key

    return {rename(key): value for key, value in state_dict.items()}


def remap_with_an_escaped_regex(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            renamed, count = re.subn("^" + re.escape(old), lambda match, new=new: new, key)
            if count:
                key = renamed
                break
        out[key] = value
    return out


def remap_with_lstrip(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key.lstrip(old)  # "strip the old prefix"
                break
        out[key] = value
    return out


def remap_replaces_every_occurrence(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = key.replace(old, new)
                break
        out[key] = value
    return out


def remap_with_an_unescaped_regex(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            renamed = re.sub("^" + old, new, key)
            if renamed != key:
                key = renamed
                break
        out[key] = value
    return out


def remap_replace_anywhere(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            key = key.replace(old, new)
        out[key] = value
    return out


def remap_replace_first(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            key = key.replace(old, new, 1)
        out[key] = value
    return out


def remap_in_place(state_dict, renames):
    for key in list(state_dict):
        for old, new in renames.items():
            if key.startswith(old):
                state_dict[new + key[len(old):]] = state_dict.pop(key)
    return state_dict


def remap_drops_the_rest(state_dict, renames):
    return {new + k[len(old):]: v for k, v in state_dict.items() for old, new in renames.items() if k.startswith(old)}


def remap_swaps_values(state_dict, renames):
    good = ex.remap_keys.reference(state_dict, renames)
    keys = list(good)
    return {keys[0]: good[keys[1]], keys[1]: good[keys[0]], **{k: good[k] for k in keys[2:]}}


def remap_renames_again(state_dict, renames):  # no break: a renamed key meets the next rename
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key[len(old):]
        out[key] = value
    return out


def remap_clones(state_dict, renames):
    return {key: value.clone() for key, value in ex.remap_keys.reference(state_dict, renames).items()}


def remap_nothing_to_do(state_dict, renames):
    if not renames:
        return state_dict  # "nothing to rename"
    return ex.remap_keys.reference(state_dict, renames)


def remap_fills_in_the_renames(state_dict, renames):
    for key in state_dict:  # a complete mapping: every top-level name, renamed or not
        head = key.split(".")[0] + "."
        renames.setdefault(head, head)
    return {renames[key.split(".")[0] + "."] + key.split(".", 1)[1]: value for key, value in state_dict.items()}


# -- round 3 (tester Z) ----------------------------------------------------------------------
def save_without_the_batch_counter(model, path):
    torch.save({k: v for k, v in model.state_dict().items() if "num_batches" not in k}, path)


def save_float_tensors_only(model, path):
    torch.save({k: v for k, v in model.state_dict().items() if v.is_floating_point()}, path)


def save_eval_then_mode_back(model, path):
    was_training = model.training
    model.eval()
    torch.save(model.state_dict(), path)
    model.train(was_training)


def save_a_deep_copy(model, path):
    torch.save(copy.deepcopy(model).state_dict(), str(path))


def resume_then_iterates_the_loader(path, model, optimizer, scheduler, scaler, loader):
    start = ex.resume.reference(path, model, optimizer, scheduler, scaler, loader)
    next(iter(loader))  # "check that the loader still works"
    return start


def resume_then_draws_python_and_numpy(path, model, optimizer, scheduler, scaler, loader):
    import random

    import numpy as np
    start = ex.resume.reference(path, model, optimizer, scheduler, scaler, loader)
    random.random(), np.random.rand()  # "a quick look" at the other streams
    return start


def resume_rng_first_then_train_mode(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, map_location=torch.device("cpu"), weights_only=True)
    restore_rng_state(checkpoint["rng"], loader=loader)
    scaler.load_state_dict(checkpoint["scaler"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    model.load_state_dict(checkpoint["model"])
    model.train()
    return int(checkpoint["epoch"]) + 1


def resume_loads_the_whole_checkpoint_into_the_model(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint)
    return checkpoint["epoch"] + 1


def remap_by_popping(state_dict, renames):
    for key in list(state_dict):
        for old, new in renames.items():
            if key.startswith(old):
                state_dict[new + key[len(old):]] = state_dict.pop(key)
                break
    return state_dict


def resume_by_the_library(path, model, optimizer, scheduler, scaler, loader):
    from course_utils import checkpoints as library  # under another name: still seen

    return library.load_checkpoint(path, model, optimizer, scheduler, scaler, loader)


_ACCUMULATED = {}


def remap_into_a_module_level_dict(state_dict, renames):
    for key, value in state_dict.items():  # the dict outlives the call
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key[len(old):]
                break
        _ACCUMULATED[key] = value
    return dict(_ACCUMULATED)


def remap_skips_an_empty_new_prefix(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if new and key.startswith(old):  # "nothing to put in front: nothing to do"
                key = new + key[len(old):]
                break
        out[key] = value
    return out


def remap_by_the_longest_dotted_prefix(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        parts = key.split(".")
        for i in range(len(parts), 0, -1):
            prefix = ".".join(parts[:i]) + "."
            if prefix in renames:
                key = renames[prefix] + ".".join(parts[i:])
                break
        out[key] = value
    return out


def remap_with_map_and_next(state_dict, renames):
    def renamed(item):
        key, value = item
        return next((renames[o] + key[len(o):] for o in renames if key.startswith(o)), key), value
    return dict(map(renamed, state_dict.items()))


CATALOGUE = Catalogue({
    ex.save_weights: [
        right("through a file object", save_with_a_file_object),
        right("a plain dict of CPU clones", save_on_the_cpu_as_a_plain_dict),
        right("atomically, with the course helper", save_atomically_with_the_course_helper),
        right("a deep-copied OrderedDict, os.fspath", save_an_ordered_copy),
        wrong("saves the whole model", save_the_object, "whole model object",
              "Unsupported global: GLOBAL torch.nn.modules.container.Sequential"),
        wrong("saves list(model.parameters())", save_the_parameter_list, "without their names"),
        wrong("saves named_parameters", save_named_parameters, "not the buffers", "1.running_mean"),
        wrong("saves the bound method state_dict", save_the_bound_method, "cannot read your file"),
        wrong("nests the state_dict in a dict", save_inside_a_dict, "other than tensors"),
        wrong("writes another path", save_next_to_the_path, "No file was written"),
        wrong("changes a weight before saving", save_after_zeroing, "changed the model", "0.weight",
              kind=STATEFUL),
        wrong("switches the model to eval", save_in_eval_mode, "changed the model's mode", kind=STATEFUL),
        wrong("never overwrites an existing file", save_unless_the_file_exists, "a second call",
              "still hold the first call's values", kind=STATEFUL),
        wrong("saves float16 copies", save_in_half_precision, "differ from the model's", "stored as float16",
              kind=EDGE),
        wrong("halves the model itself", save_the_model_halved, "changed the model", "now float16", kind=EDGE),
        wrong("pickles with the pickle module", save_with_pickle, "cannot read your file",
              "Weights only load failed", kind=EDGE),
        right("state_dict(keep_vars=True)", save_with_keep_vars),
        right("an OrderedDict in the legacy format", save_in_the_legacy_format),
        right("a pathlib.Path, parent folder made", save_into_a_made_folder),
        wrong("switches the model to train", save_in_train_mode, "a second call", "back to train mode",
              kind=STATEFUL),
        wrong("saves float64 copies", save_in_float64, "stores 0.bias as float64", "without converting it",
              kind=EDGE),
        wrong("saves once per path", save_once_per_path, "a second call", "still hold the first call's values",
              kind=STATEFUL),
        wrong("saves NumPy arrays", save_numpy_arrays, "cannot read your file", "numpy"),
        wrong("state_dict with a prefix", save_with_a_prefix, "cannot load your file", "Missing key(s)"),
        wrong("leaves out num_batches_tracked", save_without_the_batch_counter, "lacks 1.num_batches_tracked",
              "does not even notice", kind=EDGE),
        wrong("saves the floating-point tensors only", save_float_tensors_only, "lacks 1.num_batches_tracked",
              "integer tensors", kind=EDGE),
        right("eval for the save, mode put back", save_eval_then_mode_back),
        right("a deep copy's state_dict, a str path", save_a_deep_copy),
    ],
    ex.resume: [
        wrong("calls load_checkpoint", resume_by_the_library, "the course's worked answer to this very exercise",
              kind=EDGE),
        wrong("the course helper load_checkpoint", resume_with_the_course_helper, "Write the loading yourself",
              kind=EDGE),
        right("another order, map_location, strict=True", resume_in_another_order),

        wrong("optimizer not restored", _resume(optimizer=False), "Adam's moment estimates", "restarted at zero"),
        wrong("scheduler not restored", _resume(scheduler=False), "learning rate after resume", "lr=",
              "scheduler.load_state_dict"),
        wrong("random generators not restored", _resume(rng=False), "dropout masks",
              "restore_rng_state(checkpoint['rng'], loader)"),
        wrong("the loader's generator not restored", _resume(loader=False), "DataLoader's own generator",
              "shuffles as in epoch 0", "restore_rng_state(checkpoint['rng'], loader)", kind=STATEFUL),
        wrong("returns the saved epoch", _resume(offset=0), "returned 2", "runs twice", "checkpoint['epoch'] + 1"),
        wrong("skips an epoch", _resume(offset=2), "returned 4", "epoch 3 never runs"),
        wrong("scaler not restored", _resume(scaler=False), "GradScaler's scale is 1024", "scaler.load_state_dict"),
        wrong("model not restored", _resume(model=False), "model.load_state_dict(checkpoint['model'])"),
        wrong("returns nothing", resume_returns_nothing, "returned NoneType", "an int"),
        wrong("reseeds the loader's generator", resume_reseeds_the_loader, "DataLoader's own generator",
              kind=STATEFUL),
        wrong("gives the loader a new generator", resume_gives_the_loader_a_new_generator,
              "DataLoader's own generator", "now sit at generator and sampler.generator",
              "not a new generator", kind=STATEFUL),
        wrong("the old five-argument signature", resume_old_five_arguments, "takes 6 arguments", "loader"),
        wrong("loads with weights_only=False", resume_weights_only_false, "weights_only=False",
              "weights_only=True"),
        wrong("loads into a new optimizer", resume_into_a_new_optimizer, "the optimizer has no state", "on the optimizer you are given",
              kind=STATEFUL),
        wrong("steps the scheduler once more", resume_steps_the_scheduler, "learning rate after resume",
              "epoch 3 trained with", "one step ahead", kind=STATEFUL),
        right("the random state first, the parts in a loop", resume_in_a_loop),
        right("strict=False, a str path, the loader in a list", resume_not_strict_with_a_path_string),
        wrong("draws from the global stream after restoring it", resume_then_draws,
              "global random number generator is not where the checkpoint saved it", kind=STATEFUL),
        wrong("resets the learning rate to initial_lr", resume_resets_the_lr, "learning rate after resume",
              "scheduler.load_state_dict"),
        wrong("seeds the generators with the epoch", resume_seeds_by_epoch,
              "global random number generator is not where the checkpoint saved it", kind=STATEFUL),
        wrong("torch's and the loader's generators only", resume_torch_generators_only,
              "Python's random module and NumPy's global generator", "restore_rng_state(checkpoint['rng'], loader)",
              kind=EDGE),
        wrong("iterates over the loader after restoring", resume_then_iterates_the_loader,
              "neither where the checkpoint saved it nor where the freshly built loader's seed put it",
              kind=STATEFUL),
        wrong("draws from Python's and NumPy's streams after restoring", resume_then_draws_python_and_numpy,
              "not where the checkpoint saved them", kind=STATEFUL),
        right("the random state first, int(epoch), model.train()", resume_rng_first_then_train_mode),
        wrong("loads the whole checkpoint into the model", resume_loads_the_whole_checkpoint_into_the_model,
              "Unexpected key(s)", "model.load_state_dict(checkpoint['model'])", outcome=Outcome.RAISED),
    ],
    ex.remap_keys: [
        wrong("pops and re-adds keys in the given dict", remap_by_popping, "'hidden.weight'", "are gone from it",
              "'encoder.weight'"),
        right("str.removeprefix in a comprehension", remap_with_removeprefix),
        right("an escaped regular expression per prefix", remap_with_an_escaped_regex),
        wrong("str.partition: first level of the name only", remap_with_partition,
              "layers.0.weight kept its name", "several levels", kind=EDGE),
        wrong("strips the prefix with str.lstrip", remap_with_lstrip, "norm.running_mean became bn.unning_mean",
              "key[len(old):]", kind=EDGE),
        wrong("startswith, then str.replace of every occurrence", remap_replaces_every_occurrence,
              "0.0.weight became 1.1.weight", "further inside the key", kind=EDGE),
        wrong("an unescaped regular expression", remap_with_an_unescaped_regex,
              "hidden2.weight became encoder..weight", "re.escape(old)", kind=EDGE),
        right("one regular expression", remap_with_regex),
        right("tests the original key, no break", remap_testing_the_original_key),
        right("next() over the prefixes, an OrderedDict", remap_with_next),
        wrong("replaces the old name anywhere", remap_replace_anywhere,
              "block.hidden.weight became block.encoder.weight", "startswith"),
        wrong("replaces the first occurrence", remap_replace_first, "block.hidden.weight became block.encoder.weight"),
        wrong("renames inside the given dict", remap_in_place, "changed the dict it was given", kind=STATEFUL),
        wrong("drops the keys that match no rename", remap_drops_the_rest, "match no rename are gone",
              "block.hidden.weight"),
        wrong("pairs keys with the wrong tensors", remap_swaps_values, "holds another tensor"),
        wrong("returns a list of pairs", lambda sd, renames: list(sd.items()), "returned list"),
        wrong("renames a renamed key again", remap_renames_again, "0.weight became 2.weight", "renamed that again",
              "ORIGINAL name", "break", kind=EDGE),
        wrong("clones every tensor", remap_clones, "holds a copy of the given tensor", "same tensors"),
        wrong("returns the given dict when nothing is renamed", remap_nothing_to_do,
              "returned the very dict it was given", "renames={}", kind=EDGE),
        wrong("fills the renames dict in", remap_fills_in_the_renames, "changed the renames dict", kind=STATEFUL),
        wrong("one dict kept between calls", remap_into_a_module_level_dict, "keys of an earlier call",
              "new, empty dict", kind=STATEFUL),
        wrong("skips an empty new prefix", remap_skips_an_empty_new_prefix, "module.0.weight kept its name",
              "empty string", kind=EDGE),
        right("the longest dotted prefix first", remap_by_the_longest_dotted_prefix),
        right("map() and next()", remap_with_map_and_next),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
