"""Chapter 07's exercise save_weights: right answers pass, classic mistakes fail with the message that names them."""

import copy
import os
import pathlib
import pickle
from collections import OrderedDict

import pytest
import torch

from course_utils.checkpoints import save_atomically
from course_utils.exercises import reliable_practice as ex
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


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


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def sw_append_mode(model, path):
    with open(path, "ab") as f:  # keep every version
        torch.save(model.state_dict(), f)


def sw_zero_d_as_numbers(model, path):
    torch.save({k: (v.item() if v.dim() == 0 else v) for k, v in model.state_dict().items()}, path)


def sw_float_everywhere(model, path):
    torch.save({k: v.float() for k, v in model.state_dict().items()}, path)


def sw_freezes_first(model, path):
    model.requires_grad_(False)  # nothing should change while saving
    torch.save(model.state_dict(), path)


def sw_tuple_of_pairs(model, path):
    torch.save(tuple(model.state_dict().items()), path)


def sw_requires_grad_only(model, path):
    torch.save({k: v for k, v in model.state_dict().items() if v.requires_grad or k.endswith("weight")}, path)


def sw_torchscript(model, path):
    torch.jit.script(model).save(path)


def sw_metadata_next_to_weights(model, path):
    state = dict(model.state_dict())
    state["format_version"] = torch.tensor(1)
    torch.save(state, path)


def sw_verifies_with_assign(model, path):
    torch.save(model.state_dict(), path)
    model.load_state_dict(torch.load(path, weights_only=True), assign=True)


def sw_keys_without_dots(model, path):
    torch.save({k.replace(".", "_"): v for k, v in model.state_dict().items()}, path)


def save_detached_through_a_path(model, path):
    torch.save({name: tensor.detach() for name, tensor in model.state_dict().items()}, pathlib.Path(path))


# -- issue 45, second fresh round (from the task text) ---------------------------------------
def sw_float32(model, path):
    # Saves every floating tensor as float32 "to be safe": a float64 model's file holds float32.
    state = {k: (v.float() if v.is_floating_point() else v) for k, v in model.state_dict().items()}
    torch.save(state, path)


def sw_cpu_in_place(model, path):
    # Module.cpu() moves the model itself: a model on a GPU is left on the CPU.
    torch.save(model.cpu().state_dict(), path)


def sw_to_cpu_device(model, path):
    # The same move with .to(torch.device("cpu")).
    model.to(torch.device("cpu"))
    torch.save(model.state_dict(), path)


def sw_copy_moved_to_cpu(model, path):
    # A deep copy is moved, not the model: right.
    torch.save(copy.deepcopy(model).cpu().state_dict(), path)


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
        # -- issue 45, fresh round (from the task text) --
        wrong('appends to the file instead of replacing it', sw_append_mode,
              'but on a second call, after the model trained on and was put', kind=STATEFUL),
        wrong('0-d tensors saved as Python numbers', sw_zero_d_as_numbers,
              'Save the state_dict itself: torch.save(model.state_dict(),', kind=EDGE),
        wrong('float() on every tensor', sw_float_everywhere,
              'but the task asks for the weights as they are: a wider dtype', kind=EDGE),
        wrong('freezes the model before saving', sw_freezes_first,
              'Saving only reads the model; leave it as it was', kind=STATEFUL),
        wrong('saves a tuple of (name, tensor) pairs',
              sw_tuple_of_pairs, 'BatchNorm running statistics are not parameters at all. Save'),
        wrong('keeps the tensors that require grad, and weights',
              sw_requires_grad_only, 'Save every entry of model.state_dict() as it is, buffers and'),
        wrong('a TorchScript archive', sw_torchscript,
              'torch.save, not other Python objects or another file format.'),
        wrong('a format version next to the weights', sw_metadata_next_to_weights,
              'A fresh model of the same architecture cannot load your file'),
        wrong('reads the file back into the model with assign=True', sw_verifies_with_assign,
              'does that): an optimizer built before holds the old ones, so', kind=STATEFUL),
        wrong('dots in the keys replaced', sw_keys_without_dots,
              'A fresh model of the same architecture cannot load your file'),
        right("a comprehension of detached tensors, a pathlib.Path", save_detached_through_a_path),
        # -- issue 45, second fresh round (from the task text) --
        wrong("floating tensors saved as float32", sw_float32, "stores 0.bias as float32",
              "not as the model's float64", kind=EDGE),
        wrong("model.cpu().state_dict()", sw_cpu_in_place, "moved the model itself (model.cpu())",
              "meta device", kind=EDGE),
        wrong("model.to(torch.device('cpu')) before saving", sw_to_cpu_device,
              "moved the model itself (model.to(...))", kind=EDGE),
        right("a deep copy moved to the CPU", sw_copy_moved_to_cpu),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
