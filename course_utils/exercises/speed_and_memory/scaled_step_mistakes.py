"""The classic mistakes of a scaled, clipped step (clipping the scaled gradients, no clipping,
a backward pass of the unscaled loss, update() before step()), written as
the steps they are: scaled_clipped_step's expect replays each from a case's starting state, on
the judge's side, to name a mistake only where the learner's update is exactly what it gives."""

from __future__ import annotations

import torch


# Wrong orders, run (on the judge's side) from a case's first start, to name a mistake only when
# the learner's update is exactly what that order gives.
def _clips_scaled(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # on scaled gradients
    scaler.step(optimizer)
    scaler.update()


def _no_clip(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


def _unscaled_backward(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss)  # made, but not back-propagated
    loss.backward()  # not scaled: unscale_ then divides the true gradients by the scale
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()


def _update_before_step(model, optimizer, scaler, loss_fn, batch, max_norm):
    x, y = batch
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.update()  # forgets that unscale_ ran: step() divides by the scale a second time
    scaler.step(optimizer)


_WRONG_ORDERS = {
    "update_first": _update_before_step,
    "clips_scaled": _clips_scaled,
    "no_clip": _no_clip,
    "unscaled_backward": _unscaled_backward,
}
