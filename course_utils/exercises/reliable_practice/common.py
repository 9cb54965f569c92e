"""What the exercises of chapter 07 share: the chapter's name, torch's one-time set-up, a value's
kind and an error's text as a message names them, and a state_dict as NumPy arrays."""

from __future__ import annotations

import re

from course_utils.exercises.running import set_up_torch_once


CHAPTER = "reliable_practice"

# The checks use optimizers: torch's one-time set-up for them is paid here, in the notebook's
# import cell, not by the first check.
set_up_torch_once()


def _kind(value) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _error_text(error: BaseException, limit: int = 400) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip()  # torch colours part of its message
    text = f"{type(error).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _arrays(state: dict) -> dict:
    return {key: value.detach().cpu().numpy().copy() for key, value in state.items()}
