"""Chapter 07's exercises: the reference passes, other right answers pass, classic mistakes
fail with the message that names them."""

import warnings

import torch
from torch import nn

from course_utils.checkpoints import load_checkpoint, restore_rng_state, save_atomically
from course_utils.exercises import reliable_practice as ex
from course_utils.exercises.core import Outcome
from exercise_asserts import (
    assert_fails,
    assert_passes,
    assert_references_pass_and_leave_the_session_alone,
)

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
def test_save_weights_alternatives_pass():
    def with_a_file_object(model, path):
        with open(path, "wb") as file:
            torch.save(model.state_dict(), file)

    def on_the_cpu_as_a_plain_dict(model, path):
        torch.save({name: t.detach().cpu().clone() for name, t in model.state_dict().items()}, path)

    def atomically(model, path):
        save_atomically(model.state_dict(), path)

    assert_passes(ex.save_weights, with_a_file_object)
    assert_passes(ex.save_weights, on_the_cpu_as_a_plain_dict)
    assert_passes(ex.save_weights, atomically)


def test_save_weights_classic_mistakes():
    assert_fails(
        ex.save_weights, lambda model, path: torch.save(model, path),
        "whole model object", "Unsupported global: GLOBAL torch.nn.modules.container.Sequential",
    )
    assert_fails(ex.save_weights, lambda model, path: torch.save(list(model.parameters()), path), "without their names")
    assert_fails(
        ex.save_weights, lambda model, path: torch.save(dict(model.named_parameters()), path),
        "not the buffers", "1.running_mean",
    )
    assert_fails(ex.save_weights, lambda model, path: torch.save(model.state_dict, path), "cannot read your file")
    assert_fails(ex.save_weights, lambda model, path: torch.save({"model": model.state_dict()}, path), "other than tensors")
    assert_fails(ex.save_weights, lambda model, path: torch.save(model.state_dict(), path + ".bak"), "No file was written")

    def changes_the_model(model, path):
        with torch.no_grad():
            model[0].weight.zero_()
        torch.save(model.state_dict(), path)

    assert_fails(ex.save_weights, changes_the_model, "changed the model")


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


def test_resume_alternatives_pass():
    def loaded_to_a_device_in_another_order(path, model, optimizer, scheduler, scaler, loader):
        state = torch.load(path, map_location=torch.device("cpu"), weights_only=True)
        restore_rng_state(state["rng"], loader=[loader])
        scheduler.load_state_dict(state["scheduler"])
        optimizer.load_state_dict(state["optimizer"])
        model.load_state_dict(state["model"], strict=True)
        scaler.load_state_dict(state["scaler"])
        return int(state["epoch"]) + 1

    def torch_generators_only(path, model, optimizer, scheduler, scaler, loader):
        # The probe's run draws from torch's CPU generator and the loader's only, so this is
        # enough there; the loader's generator is also its sampler's.
        state = torch.load(path, weights_only=True)
        for obj, key in ((model, "model"), (optimizer, "optimizer"), (scheduler, "scheduler"), (scaler, "scaler")):
            obj.load_state_dict(state[key])
        torch.set_rng_state(state["rng"]["torch"])
        (loader_state,) = state["rng"]["loaders"][0].values()
        loader.generator.set_state(loader_state)
        return state["epoch"] + 1

    def with_the_course_helper(path, model, optimizer, scheduler, scaler, loader):
        return load_checkpoint(path, model, optimizer, scheduler, scaler, loader)

    assert_passes(ex.resume, loaded_to_a_device_in_another_order)
    assert_passes(ex.resume, torch_generators_only)
    assert_passes(ex.resume, with_the_course_helper)


def test_resume_classic_mistakes():
    assert_fails(ex.resume, _resume(optimizer=False), "Adam's moment estimates", "restarted at zero")
    assert_fails(ex.resume, _resume(scheduler=False), "learning rate after resume", "lr=", "scheduler.load_state_dict")
    assert_fails(ex.resume, _resume(rng=False), "dropout masks", "restore_rng_state(checkpoint['rng'], loader)")
    assert_fails(ex.resume, _resume(loader=False), "DataLoader's own generator", "shuffles as in epoch 0",
                 "restore_rng_state(checkpoint['rng'], loader)")
    assert_fails(ex.resume, _resume(offset=0), "returned 2", "runs twice", "checkpoint['epoch'] + 1")
    assert_fails(ex.resume, _resume(offset=2), "returned 4", "epoch 3 never runs")
    assert_fails(ex.resume, _resume(scaler=False), "GradScaler's scale is 1024", "scaler.load_state_dict")
    assert_fails(ex.resume, _resume(model=False), "model.load_state_dict(checkpoint['model'])")

    def returns_nothing(path, model, optimizer, scheduler, scaler, loader):
        _resume()(path, model, optimizer, scheduler, scaler, loader)

    assert_fails(ex.resume, returns_nothing, "returned NoneType", "an int")

    def reseeds_the_loader(path, model, optimizer, scheduler, scaler, loader):
        start = _resume(loader=False)(path, model, optimizer, scheduler, scaler, loader)
        loader.generator.manual_seed(7)  # the seed it was built with: epoch 0's order again
        return start

    def gives_the_loader_a_new_generator(path, model, optimizer, scheduler, scaler, loader):
        # The state goes into a new object; the sampler still shuffles with the old one.
        start = _resume(loader=False)(path, model, optimizer, scheduler, scaler, loader)
        (loader_state,) = torch.load(path, weights_only=True)["rng"]["loaders"][0].values()
        loader.generator = torch.Generator()
        loader.generator.set_state(loader_state)
        return start

    assert_fails(ex.resume, reseeds_the_loader, "DataLoader's own generator")
    assert_fails(ex.resume, gives_the_loader_a_new_generator, "DataLoader's own generator",
                 "now sit at generator and sampler.generator", "not a new generator")

    def old_five_arguments(path, model, optimizer, scheduler, scaler):
        return ex.resume.reference(path, model, optimizer, scheduler, scaler, None)

    assert_fails(ex.resume, old_five_arguments, "takes 6 arguments", "loader")


# -- remap_keys (S3) -------------------------------------------------------------------------
def test_remap_keys_alternatives_pass():
    def with_partition(state_dict, renames):
        out = {}
        for key, value in state_dict.items():
            head, dot, rest = key.partition(".")
            out[renames.get(head + dot, head + dot)[:-1] + dot + rest if head + dot in renames else key] = value
        return out

    def with_regex(state_dict, renames):
        import re

        pattern = re.compile("^(" + "|".join(re.escape(old) for old in renames) + ")")
        return {pattern.sub(lambda m: renames[m.group(1)], key): value.clone() for key, value in state_dict.items()}

    assert_passes(ex.remap_keys, with_partition)
    assert_passes(ex.remap_keys, with_regex)


def test_remap_keys_classic_mistakes():
    def replace_anywhere(state_dict, renames):
        out = {}
        for key, value in state_dict.items():
            for old, new in renames.items():
                key = key.replace(old, new)
            out[key] = value
        return out

    def replace_first(state_dict, renames):
        out = {}
        for key, value in state_dict.items():
            for old, new in renames.items():
                key = key.replace(old, new, 1)
            out[key] = value
        return out

    def in_place(state_dict, renames):
        for key in list(state_dict):
            for old, new in renames.items():
                if key.startswith(old):
                    state_dict[new + key[len(old):]] = state_dict.pop(key)
        return state_dict

    def drops_the_rest(state_dict, renames):
        return {new + k[len(old):]: v for k, v in state_dict.items() for old, new in renames.items() if k.startswith(old)}

    def swaps_values(state_dict, renames):
        good = ex.remap_keys.reference(state_dict, renames)
        keys = list(good)
        return {keys[0]: good[keys[1]], keys[1]: good[keys[0]], **{k: good[k] for k in keys[2:]}}

    assert_fails(ex.remap_keys, replace_anywhere, "block.hidden.weight became block.encoder.weight", "startswith")
    assert_fails(ex.remap_keys, replace_first, "block.hidden.weight became block.encoder.weight")
    assert_fails(ex.remap_keys, in_place, "changed the dict it was given")
    assert_fails(ex.remap_keys, drops_the_rest, "match no rename are gone", "block.hidden.weight")
    assert_fails(ex.remap_keys, swaps_values, "holds another tensor")
    assert_fails(ex.remap_keys, lambda sd, renames: list(sd.items()), "returned list")


def test_remap_keys_renames_each_key_once():
    def renames_again(state_dict, renames):  # no break: a renamed key meets the next rename
        out = {}
        for key, value in state_dict.items():
            for old, new in renames.items():
                if key.startswith(old):
                    key = new + key[len(old):]
            out[key] = value
        return out

    assert_fails(ex.remap_keys, renames_again, "0.weight became 2.weight", "renamed that again",
                 "ORIGINAL name", "break")

    def tests_the_original_key(state_dict, renames):
        out = {}
        for key, value in state_dict.items():
            new_key = key
            for old, new in renames.items():
                if key.startswith(old):
                    new_key = new + key[len(old):]
            out[new_key] = value
        return out

    assert_passes(ex.remap_keys, tests_the_original_key)
