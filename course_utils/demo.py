"""Demonstrating an error without stopping the notebook.

A lesson about a pitfall should show PyTorch's real message, yet "Run All" must reach the end.
``expect_error`` runs the broken code, prints the error as Python would report it (type and
message), and fails loudly if the error does *not* happen, so a demonstration can never go
quietly stale when PyTorch changes.
"""

from __future__ import annotations

import contextlib
import re
import textwrap


class ExpectedErrorMissing(AssertionError):
    """The demonstrated mistake no longer raises: the lesson needs a look."""


class _Caught:
    """What ``expect_error`` caught, for cells that want to look further."""

    error: BaseException | None = None

    @property
    def message(self) -> str:
        return str(self.error) if self.error is not None else ""


@contextlib.contextmanager
def expect_error(*types: type[BaseException], match: str | None = None, lines: int = 4):
    """Run the block, expecting one of ``types``; print it as ``Type: message``.

    ``match`` is a regular expression the message must contain. ``lines`` limits how much of
    a long message is printed.
    """
    if not types:
        raise TypeError("expect_error needs at least one exception type, e.g. RuntimeError")
    caught = _Caught()
    try:
        yield caught
    except types as error:
        caught.error = error
        if match is not None and not re.search(match, str(error)):
            raise ExpectedErrorMissing(
                f"the error happened but its message changed; expected to find {match!r} in:\n"
                f"{error}"
            ) from error
        message = str(error).strip().splitlines() or [""]
        shown = message[:lines] + (["..."] if len(message) > lines else [])
        print(f"{type(error).__name__}: " + textwrap.indent("\n".join(shown), "  ").lstrip())
    else:
        names = " or ".join(t.__name__ for t in types)
        raise ExpectedErrorMissing(f"expected {names}, but the code ran without error")
