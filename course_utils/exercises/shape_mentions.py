"""Whether a message names a shape: the rule checked_mse's practice and public checks share.

A shape may be written (4, 1), [4, 1], torch.Size([4, 1]), 4x1 or 4 × 1; a 1-D shape (4,) may
also be the bare number 4 when no other size is attached to it (as in 4x1 or (4, 1)).
"""

from __future__ import annotations

import re


def shape_forms(shape) -> list[str]:
    dims = [str(n) for n in shape]
    forms = [str(tuple(shape)), str(list(shape)), "(" + ", ".join(dims) + ")"]
    if len(dims) > 1:
        forms += [sep.join(dims) for sep in ("x", "×", "*", " x ", " × ")]
    return forms


def mentions(message: str, forms: list[str]) -> bool:
    """Whether one of ``forms`` (from ``shape_forms``) appears in ``message``."""
    compact = message.replace(" ", "")
    if any(form.replace(" ", "") in compact for form in forms):
        return True
    bare = forms[0][1:-2] if forms[0].endswith(",)") else None  # "(4,)" -> "4"
    if bare is None:
        return False
    pattern = rf"(?<![\w.×*(\[,])(?<!, )(?<!x )(?<!× ){bare}(?![\w)\]]|\s*[x×*,.]\s*\d)"
    return re.search(pattern, message) is not None
