"""What chapter 02's exercises share: the chapter's name, torch's one-time set-up, a tensor's grad_fn."""

from __future__ import annotations

from course_utils.exercises.running import set_up_torch_once

CHAPTER = "autograd"

set_up_torch_once()  # input_gradient's probe uses the meta device: pay its one-time set-up at import


def _grad_fn_name(tensor) -> str | None:
    grad_fn = getattr(tensor, "grad_fn", None)
    return None if grad_fn is None else type(grad_fn).__name__
