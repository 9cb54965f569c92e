"""Chapter 04's train_step: its catalogue of right and wrong answers, and its other tests."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils.exercises import training_loop as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- train_step (L1) ---------------------------------------------------------------------------
def clear_after_step(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def clear_to_zero_first(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad(set_to_none=False)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def model_zero_grad(model, optimizer, loss_fn, x, y):
    model.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach().item()


def grads_to_none_by_hand(model, optimizer, loss_fn, x, y):
    for p in model.parameters():
        p.grad = None
    prediction = model.forward(x)
    loss = loss_fn(prediction, y)
    torch.autograd.backward(loss)
    optimizer.step()
    return loss.item()


def with_a_closure(model, optimizer, loss_fn, x, y):
    def closure():
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    return optimizer.step(closure).item()


def never_clears(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def clears_between_backward_and_step(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    return loss.item()


def no_step(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    return loss.item()


def step_before_backward(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    optimizer.step()
    loss.backward()
    return loss.item()


def backward_twice(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    loss.backward()
    optimizer.step()
    return loss.item()


def two_forwards_two_backwards(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def returns_tensor(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def forgets_return(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()


notebook_model = torch.nn.Linear(4, 3)


def uses_globals(model, optimizer, loss_fn, x, y):
    return loss_fn(notebook_model(x), y).item()


def updates_by_hand(model, optimizer, loss_fn, x, y):
    model.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.5 * p.grad
    return loss.item()


def clears_the_optimizer_state(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    optimizer.state.clear()  # "start the step from a clean optimizer"
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def own_cross_entropy(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def casts_to_float32(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x.float()), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def standardises_in_place(model, optimizer, loss_fn, x, y):
    x.sub_(x.mean(dim=0)).div_(x.std(dim=0))
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def switches_grad_off_to_log(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    torch.set_grad_enabled(False)  # the logged value needs no graph
    return loss.item()


# -- round 2: answers outside testers wrote ------------------------------------------------------
def step_in_eval_mode(model, optimizer, loss_fn, x, y):
    model.eval()  # "no dropout noise in my step"
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def step_then_eval_mode(model, optimizer, loss_fn, x, y):
    model.train()
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.eval()  # "ready for validation"
    return loss.item()


def logs_a_second_forward(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    with torch.no_grad():
        logged = loss_fn(model(x), y).item()
    optimizer.step()
    return logged


def marks_x_as_requiring_grad(model, optimizer, loss_fn, x, y):
    x.requires_grad_(True)
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def clips_the_gradient(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    optimizer.step()
    return loss.item()


def returns_the_loss_after_the_step(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        return loss_fn(model(x), y).item()


def step_with_autograd_grad(model, optimizer, loss_fn, x, y):
    params = [p for p in model.parameters() if p.requires_grad]
    loss = loss_fn(model(x), y)
    for p, g in zip(params, torch.autograd.grad(loss, params)):
        p.grad = g
    optimizer.step()
    return np.float64(loss.item())


def step_in_train_mode_explicitly(model, optimizer, loss_fn, x, y):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach().cpu().item()


def step_with_swapped_loss_arguments(model, optimizer, loss_fn, x, y):
    loss = loss_fn(y, model(x))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


_FIRST_OPTIMIZER = {}


def keeps_the_first_optimizer(model, optimizer, loss_fn, x, y):
    """Keeps the optimizer of its first call: right until a new model and optimizer come."""
    optimizer = _FIRST_OPTIMIZER.setdefault("optimizer", optimizer)
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


# -- round 3 -----------------------------------------------------------------------------------
def step_by_keywords_zeroing_param_groups(model, optimizer, loss_fn, x, y):
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                p.grad.detach_()
                p.grad.zero_()
    loss = loss_fn(input=model(x), target=y)
    loss.backward()
    optimizer.step()
    return np.float64(loss.item())


def step_that_puts_the_mode_back_to_train(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.train()  # "back to training" after a step, whatever the mode was
    return loss.item()


def clips_the_gradient_to_norm_1(model, optimizer, loss_fn, x, y):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    return loss.item()


def decays_the_learning_rate_every_call(model, optimizer, loss_fn, x, y):
    for group in optimizer.param_groups:
        group["lr"] *= 0.9
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def converts_the_model_to_float32(model, optimizer, loss_fn, x, y):
    model.float()
    loss = loss_fn(model(x.float()), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


# -- issue 45: frozen parameters must neither move nor be unfrozen ----------------------------
def unfreezes_the_model(model, optimizer, loss_fn, x, y):
    model.requires_grad_(True)
    model.train()
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def sets_requires_grad_in_a_loop(model, optimizer, loss_fn, x, y):
    for p in model.parameters():
        p.requires_grad = True  # "make sure gradients are computed"
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def unfreezes_for_the_step_only(model, optimizer, loss_fn, x, y):
    frozen = [p for p in model.parameters() if not p.requires_grad]
    for p in frozen:
        p.requires_grad_(True)
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    for p in frozen:
        p.requires_grad_(False)
    return loss.item()


def zero_grads_made_by_hand(model, optimizer, loss_fn, x, y):
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # a zero gradient for every parameter, frozen ones too
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def zeroes_only_the_trainable_grads(model, optimizer, loss_fn, x, y):
    trainable = [p for p in model.parameters() if p.requires_grad]
    for p in trainable:
        if p.grad is not None:
            p.grad.zero_()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()



# -- issue 45, fresh round (from the task text) --
def ts_returns_batch_total(model, optimizer, loss_fn, x, y):
    """Returns the batch's total (loss.item() * len(x)), as the notebook's epoch loop sums it."""
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item() * len(x)


def ts_returns_numpy_scalar(model, optimizer, loss_fn, x, y):
    """Returns the loss as a NumPy scalar of the loss's dtype (np.float32 for a float32 model)."""
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach().numpy()[()]


def ts_seeds_for_reproducibility(model, optimizer, loss_fn, x, y):
    """Seeds the global generator inside the step 'for reproducibility'."""
    torch.manual_seed(0)
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def ts_loss_in_float32(model, optimizer, loss_fn, x, y):
    """Computes the loss from a float32 copy of the prediction ('losses are float32')."""
    loss = loss_fn(model(x).float(), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def ts_backward_of_the_sum(model, optimizer, loss_fn, x, y):
    """Back-propagates the batch's sum (loss * len(x)), returns the mean."""
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    (loss * len(x)).backward()
    optimizer.step()
    return loss.item()


def ts_clears_only_the_first_param_group(model, optimizer, loss_fn, x, y):
    """Clears the gradients of optimizer.param_groups[0] only (one group assumed)."""
    for p in optimizer.param_groups[0]["params"]:
        p.grad = None
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


def ts_squeezes_the_prediction(model, optimizer, loss_fn, x, y):
    """Squeezes the prediction (for a (N, 1) regression output), which drops the batch dim of one."""
    loss = loss_fn(model(x).squeeze(), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def ts_sets_the_default_dtype(model, optimizer, loss_fn, x, y):
    """Sets the default dtype to the batch's dtype and leaves it so."""
    torch.set_default_dtype(x.dtype)
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def ts_rounds_the_logged_loss(model, optimizer, loss_fn, x, y):
    """Rounds the loss it returns to 4 decimals, for a tidy log."""
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return round(loss.item(), 4)


def ts_returns_the_running_mean(model, optimizer, loss_fn, x, y):
    """Returns the running mean of the losses of every call so far (what a progress bar shows)."""
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    seen = ts_returns_the_running_mean.__dict__.setdefault("seen", [])
    seen.append(loss.item())
    return sum(seen) / len(seen)


def ts_clears_every_group_by_hand_under_enable_grad(model, optimizer, loss_fn, x, y):
    """Right: every param group's gradients set to None by hand, the step under enable_grad()."""
    with torch.enable_grad():
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                parameter.grad = None
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.detach().double().item()


# -- issue 45, second fresh round (from the task text) --
def ts_clips_to_norm_2(model, optimizer, loss_fn, x, y):
    """Clips "for safety" with a generous max_norm: only a large gradient shows it."""
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
    optimizer.step()
    return loss.item()


def ts_long_targets(model, optimizer, loss_fn, x, y):
    """Casts the targets to class indices "to be safe": wrong for float targets (MSELoss)."""
    loss = loss_fn(model(x), y.long())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


CATALOGUE = Catalogue({
    ex.train_step: [
        wrong("loss_fn(y, model(x))", step_with_swapped_loss_arguments, "(prediction, target), in that order",
              outcome=Outcome.RAISED),
        right("zero_grad() after step()", clear_after_step),
        right("zero_grad(set_to_none=False) first, float(loss.detach())", clear_to_zero_first),
        right("model.zero_grad()", model_zero_grad),
        right("grads set to None by hand, torch.autograd.backward", grads_to_none_by_hand),
        right("optimizer.step(closure)", with_a_closure),
        wrong("never clears the gradients", never_clears,
              "gradients accumulate", "sum of both batches", "zero_grad()", kind=STATEFUL),
        wrong("clears between backward and step", clears_between_backward_and_step,
              "did not change", "between backward() and step()"),
        wrong("no optimizer.step()", no_step, "optimizer.step() of the optimizer you were given never ran"),
        wrong("step() before backward()", step_before_backward,
              "step() ran before backward()", "zero_grad(), backward(), step()"),
        wrong("backward() twice on one loss", backward_twice,
              "backward through the graph a second time", "Likely cause: loss.backward() called twice",
              outcome=Outcome.RAISED),
        wrong("two forwards, two backwards", two_forwards_two_backwards,
              "backward() ran 2 times", "backward() once per step"),
        wrong("returns the loss tensor", returns_tensor, "as a tensor", "loss.item()"),
        wrong("forgets return", forgets_return, "returned None"),
        wrong("uses the notebook's model", uses_globals, "never ran the model it was given"),
        wrong("SGD by hand", updates_by_hand, "the optimizer you were given never took a step"),
        wrong("clears the optimizer's state every call", clears_the_optimizer_state,
              "brand-new Adam", "second call", kind=STATEFUL),
        wrong("switches autograd off and leaves it off", switches_grad_off_to_log,
              "left autograd switched off", kind=STATEFUL),
        wrong("F.cross_entropy instead of loss_fn", own_cross_entropy,
              "not the loss_fn you were given", "label smoothing", kind=EDGE),
        wrong("casts x to float32", casts_to_float32,
              "must have the same dtype", "Likely cause: the model and the batch you were given have the same dtype", kind=EDGE,
              outcome=Outcome.RAISED),
        wrong("standardises the batch in place", standardises_in_place,
              "changed its input x in place", kind=EDGE),
        right("model.train() first, as many training loops do", step_in_train_mode_explicitly),
        right("model.train() after the step", step_that_puts_the_mode_back_to_train),
        right("keyword arguments to loss_fn, zeroed via param_groups, a NumPy float",
              step_by_keywords_zeroing_param_groups),
        wrong("clips the gradient to norm 1", clips_the_gradient_to_norm_1,
              "times its length", "clip_grad_norm_", kind=EDGE),
        wrong("decays the learning rate inside train_step", decays_the_learning_rate_every_call,
              "learning rate was 0.45 instead of 0.5", kind=STATEFUL),
        wrong("model.float() and x.float()", converts_the_model_to_float32,
              "changed the model's dtype", "given as float64", kind=EDGE),
        right("torch.autograd.grad into .grad, a NumPy float", step_with_autograd_grad),
        wrong("trains in eval mode", step_in_eval_mode, "ran with the model in eval mode", kind=EDGE),
        wrong("hands the model back in eval mode", step_then_eval_mode,
              "gave the model back in eval mode", kind=STATEFUL),
        wrong("logs the loss of a second forward pass", logs_a_second_forward,
              "2 forward passes", "one training step is one forward pass", kind=EDGE),
        wrong("marks x as requiring grad", marks_x_as_requiring_grad, "changed its input x in place",
              kind=EDGE),
        wrong("keeps the optimizer of its first call", keeps_the_first_optimizer,
              "the optimizer you were given never ran", kind=STATEFUL),
        wrong("clips the gradient", clips_the_gradient, "times its length", "gradient clipping"),
        wrong("returns the loss after the step", returns_the_loss_after_the_step,
              "the loss of this batch is", "this call's forward pass"),
        wrong("model.requires_grad_(True) first", unfreezes_the_model,
              "switched requires_grad back on for 0.bias, 2.weight, 2.bias", "given frozen", kind=STATEFUL),
        wrong("requires_grad = True in a loop", sets_requires_grad_in_a_loop,
              "switched requires_grad back on", "Leave requires_grad as it was given", kind=STATEFUL),
        wrong("unfreezes for the step, freezes again after", unfreezes_for_the_step_only,
              "Your step moved 0.bias, 2.weight, 2.bias", "given frozen", kind=STATEFUL),
        wrong("a zero .grad made by hand for every parameter", zero_grads_made_by_hand,
              "Your step moved", "a zero .grad made by hand", kind=STATEFUL),
        right("zeroes the trainable parameters' gradients in place", zeroes_only_the_trainable_grads),
        # -- issue 45, fresh round (from the task text) --
        wrong("returns the batch total", ts_returns_batch_total, "the loss of this batch is"),
        wrong("returns a NumPy scalar of the loss's dtype", ts_returns_numpy_scalar, "returned numpy.float32",
              kind=EDGE),
        wrong("torch.manual_seed inside", ts_seeds_for_reproducibility, "changed the global random state",
              kind=STATEFUL),
        wrong("the loss computed in float32", ts_loss_in_float32, "computed in float32", "float64", kind=EDGE),
        wrong("backward of loss * len(x)", ts_backward_of_the_sum, "times its length"),
        wrong("clears param_groups[0] only", ts_clears_only_the_first_param_group,
              "still held the gradients of earlier batches", "every param group", kind=STATEFUL),
        wrong("squeezes the prediction", ts_squeezes_the_prediction, "a batch of one example",
              "Likely cause: the prediction and the target no longer line up", kind=EDGE, outcome=Outcome.RAISED),
        wrong("sets the default dtype", ts_sets_the_default_dtype, "changed the default dtype", kind=STATEFUL),
        wrong("rounds the loss it returns", ts_rounds_the_logged_loss, "rounded to 4 decimals", kind=EDGE),
        wrong("returns the running mean", ts_returns_the_running_mean, "the loss of this batch is", kind=STATEFUL),
        right("every group's .grad to None by hand, under enable_grad, a float64 item",
              ts_clears_every_group_by_hand_under_enable_grad),
        # -- issue 45, second fresh round (from the task text) --
        wrong("clips the gradient to norm 2", ts_clips_to_norm_2, "nn.MSELoss()", "times its length",
              "gradient clipping", kind=EDGE),
        wrong("y.long() on the targets", ts_long_targets, "nn.MSELoss()", "targets made whole numbers",
              "Use y as it is given", kind=EDGE),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()


def test_float_of_a_loss_that_requires_grad_passes_with_a_note_on_item():
    """float(loss) is correct, but torch warns about it: the verdict passes and says why."""
    from course_utils.exercises import training_loop as ex

    def step_with_float(model, optimizer, loss_fn, x, y):
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss)

    verdict = ex.train_step.verdict(step_with_float)
    assert verdict.passed
    assert "Note: torch warned" in verdict.message and "loss.item()" in verdict.message
    reference = ex.train_step.verdict(ex.train_step.reference)
    assert reference.passed and "Note:" not in reference.message
