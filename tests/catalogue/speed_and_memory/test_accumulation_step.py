"""Chapter 05's accumulation_step: its catalogue of right and wrong answers."""

import pytest
import torch

from course_utils.exercises import speed_and_memory as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- accumulation_step (P5) ------------------------------------------------------------------
def zero_both_ends(model, optimizer, loss_fn, batches):
    model.zero_grad(set_to_none=True)
    for x, y in batches:
        (loss_fn(model(x), y) * (1.0 / len(batches))).backward()
    optimizer.step()
    optimizer.zero_grad()


def weighted_by_size(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    total = sum(len(x) for x, _ in batches)
    for x, y in batches:
        loss = loss_fn(model(x), y) * len(x) / total  # equal sizes: the same as / k
        loss.backward()
    optimizer.step()


def with_enumerate_and_autograd_backward(model, optimizer, loss_fn, batches):
    for p in model.parameters():
        p.grad = None
    k = len(batches)
    for i, (x, y) in enumerate(batches):
        torch.autograd.backward(loss_fn(model.forward(x), y) / k)
    optimizer.step()


def zero_to_zeros_and_div(model, optimizer, loss_fn, batches):
    optimizer.zero_grad(set_to_none=False)
    for x, y in batches:
        loss_fn(model(x), y).div(len(batches)).backward()
    optimizer.step()


def _accumulate(divide=True, zero="before", step="after", one_backward=False):
    def answer(model, optimizer, loss_fn, batches):
        if zero == "before":
            optimizer.zero_grad()
        losses = []
        for x, y in batches:
            if zero == "inside":
                optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            if divide:
                loss = loss / len(batches)
            if one_backward:
                losses.append(loss)
            else:
                loss.backward()
            if step == "each":
                optimizer.step()
        if one_backward:
            sum(losses).backward()
        if step == "after":
            optimizer.step()

    return answer


def own_optimizer(model, optimizer, loss_fn, batches):
    mine = torch.optim.SGD(model.parameters(), lr=0.1)
    mine.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    mine.step()


def scales_the_learning_rate(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        loss_fn(model(x), y).backward()
    for group in optimizer.param_groups:
        group["lr"] /= len(batches)  # k times the gradient, a k times smaller step
    optimizer.step()


def scales_the_learning_rate_and_back(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        loss_fn(model(x), y).backward()
    lr = optimizer.param_groups[0]["lr"]
    optimizer.param_groups[0]["lr"] = lr / len(batches)
    optimizer.step()
    optimizer.param_groups[0]["lr"] = lr


def pops_the_batches(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    k = len(batches)
    while batches:
        x, y = batches.pop()
        (loss_fn(model(x), y) / k).backward()
    optimizer.step()


def one_big_batch(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    x = torch.cat([x for x, _ in batches])
    y = torch.cat([y for _, y in batches])
    loss_fn(model(x), y).backward()
    optimizer.step()


def divides_by_the_notebooks_k(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / 4).backward()  # the notebook's k = 4
    optimizer.step()


# -- round 2: answers outside testers wrote ------------------------------------------------------
_FIRST_OPTIMIZER = {}


def keeps_the_first_optimizer(model, optimizer, loss_fn, batches):
    optimizer = _FIRST_OPTIMIZER.setdefault("optimizer", optimizer)  # right until a new one comes
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    optimizer.step()


def accumulates_in_eval_mode(model, optimizer, loss_fn, batches):
    model.eval()  # "no dropout noise across micro-batches"
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    optimizer.step()


def divides_by_the_micro_batch_size(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(x)).backward()
    optimizer.step()


def divides_by_len_of_a_pair(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    k = len(batches[0])  # the length of one (x, y) pair: always 2
    for x, y in batches:
        (loss_fn(model(x), y) / k).backward()
    optimizer.step()


def backward_with_a_gradient_of_1_over_k(model, optimizer, loss_fn, batches):
    for p in model.parameters():
        p.grad = None
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss.backward(gradient=torch.tensor(1.0 / len(batches), dtype=loss.dtype))
    optimizer.step()


def sums_autograd_grads(model, optimizer, loss_fn, batches):
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    for x, y in batches:
        for t, g in zip(total, torch.autograd.grad(loss_fn(model(x), y) / len(batches), params)):
            t += g
    for p, t in zip(params, total):
        p.grad = t
    optimizer.step()


# -- round 3 -----------------------------------------------------------------------------------
def divides_the_gradients_after_the_loop(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        loss_fn(model(x), y).backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.grad /= len(batches)
    optimizer.step()


def clips_the_accumulated_gradient(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()


def divides_the_loss_in_place(model, optimizer, loss_fn, batches):
    optimizer.zero_grad()
    for x, y in batches:
        loss = loss_fn(model(x), y)
        loss /= len(batches)
        loss.backward()
    optimizer.step()


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def acc_train_mode(model, optimizer, loss_fn, batches):
    """model.train() first: a model given in eval mode runs (and is left) in train mode."""
    model.train()
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    optimizer.step()


def acc_divides_every_grad(model, optimizer, loss_fn, batches):
    """undivided losses, then p.grad /= k for every parameter of the model."""
    optimizer.zero_grad()
    for x, y in batches:
        loss_fn(model(x), y).backward()
    for p in model.parameters():
        p.grad /= len(batches)
    optimizer.step()


def acc_unfreezes(model, optimizer, loss_fn, batches):
    """requires_grad_(True) on the model "so that gradients flow"."""
    model.requires_grad_(True)
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    optimizer.step()


def acc_divides_group_zero(model, optimizer, loss_fn, batches):
    """undivided losses, then the gradients of the first parameter group divided by k."""
    optimizer.zero_grad()
    for x, y in batches:
        loss_fn(model(x), y).backward()
    for p in optimizer.param_groups[0]["params"]:
        if p.grad is not None:
            p.grad /= len(batches)
    optimizer.step()


def acc_bfloat16_autocast(model, optimizer, loss_fn, batches):
    """micro-batches under bfloat16 autocast, for speed."""
    optimizer.zero_grad()
    for x, y in batches:
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            loss = loss_fn(model(x), y) / len(batches)
        loss.backward()
    optimizer.step()


def acc_float_inputs(model, optimizer, loss_fn, batches):
    """x.float() before the model."""
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x.float()), y) / len(batches)).backward()
    optimizer.step()


def acc_seeds(model, optimizer, loss_fn, batches):
    """torch.manual_seed(0) first, for reproducible dropout: the caller's RNG is reset."""
    torch.manual_seed(0)
    optimizer.zero_grad()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    optimizer.step()


def acc_zero_with_zero_(model, optimizer, loss_fn, batches):
    """p.grad.zero_() on every parameter (a None .grad raises)."""
    for p in model.parameters():
        p.grad.zero_()
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    optimizer.step()


def acc_weights_by_numel(model, optimizer, loss_fn, batches):
    """each loss weighted by its share of x.numel() (elements, not examples)... of one batch."""
    optimizer.zero_grad()
    total = sum(x.numel() for x, _ in batches)
    for x, y in batches:
        (loss_fn(model(x), y) * len(x) / total).backward()
    optimizer.step()


def acc_zeroes_after_the_step(model, optimizer, loss_fn, batches):
    """zero_grad() after the step, for the next call (not before the first micro-batch)."""
    for x, y in batches:
        (loss_fn(model(x), y) / len(batches)).backward()
    optimizer.step()
    optimizer.zero_grad()


def acc_while_loop_mul(model, optimizer, loss_fn, batches):
    model.zero_grad(set_to_none=True)
    i, k = 0, len(batches)
    while i < k:
        x, y = batches[i]
        loss_fn(model(x), y).mul(1.0 / k).backward()
        i += 1
    optimizer.step()


CATALOGUE = Catalogue({
    ex.accumulation_step: [
        right("zero at both ends, multiply by 1/k", zero_both_ends),
        right("weighted by size", weighted_by_size),
        right("grads to None, enumerate, autograd.backward", with_enumerate_and_autograd_backward),
        right("zero_grad(set_to_none=False), loss.div(k)", zero_to_zeros_and_div),
        wrong("no division by k", _accumulate(divide=False), "4 times too large",
              "Divide each micro-batch's loss by 4"),
        wrong("zero_grad inside the loop", _accumulate(zero="inside"), "Only the last micro-batch",
              "Zero once, before the loop"),
        wrong("a step per micro-batch", _accumulate(step="each", zero="inside"),
              "ran 4 times for 4 micro-batches"),
        wrong("never zeroes", _accumulate(zero="never"), "left over",
              "zero_grad() once, before the first micro-batch", kind=STATEFUL),
        wrong("one backward of the summed losses", _accumulate(one_backward=True), "backward() ran once",
              "keeps all 4 graphs in memory"),
        wrong("one big batch", one_big_batch, "backward() ran once"),
        wrong("no step", _accumulate(step="never"), "never ran"),
        wrong("an optimizer of its own", own_optimizer, "not through the optimizer you were given",
              kind=STATEFUL),
        wrong("divides the learning rate and keeps it", scales_the_learning_rate,
              "learning rate was 0.025", kind=STATEFUL),
        wrong("divides the learning rate, then puts it back", scales_the_learning_rate_and_back,
              ".grad holds 4 times the big batch's gradient", kind=EDGE),
        wrong("pops the caller's batches", pops_the_batches,
              "changed the list of micro-batches", "4 micro-batches before the call and 0 after",
              kind=STATEFUL),
        wrong("divides by the notebook's k=4", divides_by_the_notebooks_k,
              "3 micro-batches", "It should equal the gradient of one big batch", kind=EDGE),
        right("backward(gradient=1/k)", backward_with_a_gradient_of_1_over_k),
        right("torch.autograd.grad summed by hand", sums_autograd_grads),
        right("undivided losses, gradients divided after the loop", divides_the_gradients_after_the_loop),
        right("loss /= len(batches) in place", divides_the_loss_in_place),
        wrong("clips the accumulated gradient to norm 1", clips_the_accumulated_gradient,
              "times its length", "clip_grad_norm_", kind=EDGE),
        wrong("keeps the optimizer of its first call", keeps_the_first_optimizer,
              "the optimizer you were given never ran", kind=STATEFUL),
        wrong("accumulates in eval mode", accumulates_in_eval_mode, "ran with the model in eval mode",
              kind=EDGE),
        wrong("divides by the micro-batch size", divides_by_the_micro_batch_size,
              "It should equal the gradient of one big batch", "micro-batch size (5)"),
        wrong("divides by len() of an (x, y) pair", divides_by_len_of_a_pair,
              "It should equal the gradient of one big batch", kind=EDGE),
        # -- issue 45, fresh round (from the task text) --
        wrong('model.train() on a model given in eval mode', acc_train_mode,
              'train mode', 'given in eval mode', kind=STATEFUL),
        wrong('p.grad /= k on every parameter (a frozen one has None)', acc_divides_every_grad,
              'TypeError', 'first weight frozen', kind=STATEFUL, outcome=Outcome.RAISED),
        wrong('requires_grad_(True) on the whole model', acc_unfreezes,
              'requires_grad=True', 'first weight frozen', kind=STATEFUL),
        wrong("divides the first parameter group's gradients only", acc_divides_group_zero,
              'wrong values', '2 parameter groups', kind=EDGE),
        wrong('bfloat16 autocast for speed', acc_bfloat16_autocast,
              'torch.bfloat16 outputs', 'another precision'),
        wrong('x.float() before the model (a float64 model)', acc_float_inputs,
              'RuntimeError', 'float64 model', kind=EDGE, outcome=Outcome.RAISED),
        wrong('torch.manual_seed(0) inside the step', acc_seeds,
              'global random state', 'torch.manual_seed', kind=STATEFUL),
        wrong('p.grad.zero_() on every parameter (.grad None)', acc_zero_with_zero_,
              'AttributeError', 'every .grad None', kind=STATEFUL, outcome=Outcome.RAISED),
        wrong('losses weighted by x.numel()', acc_weights_by_numel,
              '0.167 times its length'),
        wrong('zero_grad() after the step instead of before', acc_zeroes_after_the_step,
              'old gradient', 'zero_grad() once, before the first micro-batch', kind=STATEFUL),
        right('model.zero_grad(set_to_none=True), a while loop, loss.mul(1 / k)', acc_while_loop_mul),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
