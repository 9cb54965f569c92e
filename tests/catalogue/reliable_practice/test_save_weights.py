"""Chapter 07's exercise save_weights: right answers pass, classic mistakes fail with the message that names them."""

import copy
import os
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
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
