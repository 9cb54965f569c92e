"""Chapter 07's exercise resume: right answers pass, classic mistakes fail with the message that names them."""

import copy
import warnings

import pytest
import torch

from course_utils.checkpoints import load_checkpoint, restore_rng_state
from course_utils.exercises import reliable_practice as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


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


def resume_by_the_library(path, model, optimizer, scheduler, scaler, loader):
    from course_utils import checkpoints as library  # under another name: still seen

    return library.load_checkpoint(path, model, optimizer, scheduler, scaler, loader)


# -- issue 45 ----------------------------------------------------------------------------------
def resume_assigning_the_weights(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(checkpoint["model"], assign=True)
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint["epoch"] + 1


def resume_with_new_parameters(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    for name, _ in list(model.named_parameters()):
        owner, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(owner), attribute, torch.nn.Parameter(checkpoint["model"][name].clone()))
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint["epoch"] + 1


def resume_copying_the_weights(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            tensor.copy_(checkpoint["model"][name])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return int(checkpoint["epoch"]) + 1


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def _load_all(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint


def re_eval_after_loading(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = _load_all(path, model, optimizer, scheduler, scaler, loader)
    model.eval()  # loaded weights: evaluation mode
    return checkpoint["epoch"] + 1


def re_weights_only_unsaid(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path)  # the default is weights_only=True anyway
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint["epoch"] + 1


def re_last_epoch_set(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = _load_all(path, model, optimizer, scheduler, scaler, loader)
    scheduler.last_epoch = checkpoint["epoch"]
    return checkpoint["epoch"] + 1


def re_optimizer_state_by_hand(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.state.update(checkpoint["optimizer"]["state"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint["epoch"] + 1


def re_base_lrs_from_now(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = _load_all(path, model, optimizer, scheduler, scaler, loader)
    scheduler.base_lrs = [group["lr"] for group in optimizer.param_groups]
    return checkpoint["epoch"] + 1


def re_float_epoch(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = _load_all(path, model, optimizer, scheduler, scaler, loader)
    return checkpoint["epoch"] + 1.0


def re_replays_the_scheduler(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(checkpoint["scheduler"]["last_epoch"]):
            scheduler.step()
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint["epoch"] + 1


def re_into_a_copy(path, model, optimizer, scheduler, scaler, loader):
    model = copy.deepcopy(model)  # keep the caller's model safe until all is loaded
    checkpoint = _load_all(path, model, optimizer, scheduler, scaler, loader)
    return checkpoint["epoch"] + 1


def re_scale_by_hand(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    if checkpoint["scaler"]:
        scaler.update(new_scale=float(checkpoint["scaler"]["scale"]))
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint["epoch"] + 1


def re_updates_a_state_dict(path, model, optimizer, scheduler, scaler, loader):
    checkpoint = torch.load(path, weights_only=True)
    model.state_dict().update(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    scaler.load_state_dict(checkpoint["scaler"])
    restore_rng_state(checkpoint["rng"], loader)
    return checkpoint["epoch"] + 1


def resume_with_keywords_and_the_models_device(path, model, optimizer, scheduler, scaler, loader):
    device = next(model.parameters()).device
    checkpoint = torch.load(path, map_location=device, weights_only=True)
    for part, target in (("model", model), ("optimizer", optimizer), ("scheduler", scheduler), ("scaler", scaler)):
        target.load_state_dict(checkpoint[part])
    restore_rng_state(state=checkpoint["rng"], loader=loader)
    return int(checkpoint.get("epoch")) + 1


CATALOGUE = Catalogue({
    ex.resume: [
        wrong("calls load_checkpoint", resume_by_the_library, "the course's worked answer to this very exercise",
              kind=EDGE),
        wrong("the course helper load_checkpoint", resume_with_the_course_helper, "Refused:",
              "write the loading yourself", kind=EDGE),
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
        # -- issue 45: the model's parameters replaced, the optimizer left with the old ones
        wrong("load_state_dict(..., assign=True)", resume_assigning_the_weights, "assign=True",
              "no longer holds the model's parameters", kind=EDGE),
        wrong("new nn.Parameters set on the model", resume_with_new_parameters,
              "no longer holds the model's parameters", kind=EDGE),
        right("copy_ into the model's state_dict tensors", resume_copying_the_weights),
        # -- issue 45, fresh round (from the task text) --
        wrong('model.eval() after loading', re_eval_after_loading,
              'checkpoint changes states, not the mode: leave model.train()', kind=STATEFUL),
        wrong('torch.load without weights_only', re_weights_only_unsaid,
              'the file names is unpickled and can run code. Say it, as the'),
        wrong('scheduler.last_epoch set to the epoch', re_last_epoch_set,
              'The learning rate after resume is wrong: epoch'),
        wrong('optimizer.state updated by hand', re_optimizer_state_by_hand,
              "state: Adam's moment estimates (exp_avg, exp_avg_sq) and its"),
        wrong("the scheduler's base_lrs set from the loaded lr", re_base_lrs_from_now,
              "After resume the scheduler's state is not the checkpoint's", kind=STATEFUL),
        wrong('returns the epoch as a float', re_float_epoch,
              'return the epoch to continue from, an int: the checkpoint'),
        wrong("replays the scheduler's steps", re_replays_the_scheduler,
              'The learning rate after resume is wrong: epoch'),
        wrong('loads into a copy of the model', re_into_a_copy,
              'it made itself (a copy), not the model you were given, which'),
        wrong("the scaler's scale set with update(new_scale=...)", re_scale_by_hand,
              'AssertionError', outcome=Outcome.RAISED),
        wrong('updates the dict state_dict() returns', re_updates_a_state_dict,
              "the model's weights are not the checkpoint's (they are still"),
        right("map_location from the model, keyword arguments", resume_with_keywords_and_the_models_device),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()


@pytest.mark.parametrize("answer", [resume_with_the_course_helper, resume_by_the_library], ids=["import", "module"])
def test_the_exams_check_refuses_the_worked_answer_as_practice_does(answer):
    """The task says to write the loading by hand, and the check refuses a call of
    load_checkpoint: in practice, and in an exam, whose own check runs the public cases (the
    release ships load_checkpoint). One named mistake, worded once."""
    from course_utils.exercises.exam import public_verdict
    from course_utils.exercises.public_cases.reliable_practice import CALLS_LOAD_CHECKPOINT

    for verdict in (public_verdict(ex.resume, answer), ex.resume.verdict(answer)):
        assert verdict.outcome is Outcome.FAILED
        assert verdict.mistake == f"resume.{CALLS_LOAD_CHECKPOINT.id}"
        assert verdict.message == str(CALLS_LOAD_CHECKPOINT)
    assert public_verdict(ex.resume, resume_in_a_loop).outcome is Outcome.PASSED


def test_the_task_states_the_rule_the_checks_apply():
    import nbformat
    from pathlib import Path

    for folder in ("solutions", "notebooks"):
        nb = nbformat.read(Path(__file__).resolve().parents[3] / folder / "07_reliable_practice.ipynb", as_version=4)
        task = next(cell.source for cell in nb.cells if "Write `resume(path, model" in cell.source)
        assert "`course_utils.checkpoints.load_checkpoint` is the worked answer" in task, folder
        assert "the check refuses an answer that calls it" in " ".join(task.split()), folder
