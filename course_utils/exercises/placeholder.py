"""``____``: the blank a learner fills in.

Any use of it (calling it, computing with it, converting it) raises ``PlaceholderError``, a
``NotImplementedError``, so a check reports *not attempted* instead of a confusing TypeError.
"""

from __future__ import annotations

class _PlaceholderUsed:
    """Marks the errors raised by using ``____`` (not an exception on its own)."""


class PlaceholderError(NotImplementedError, _PlaceholderUsed):
    """Raised when code computes with ``____`` instead of a real value."""


class _Placeholder:
    """``____``: a blank to fill in. Any use of it stops with a clear message."""

    _MESSAGE = "____ is a blank for you to fill in: replace it with your code"

    def __repr__(self):
        return "____"

    def _refuse(self, *args, **kwargs):
        raise PlaceholderError(self._MESSAGE)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise PlaceholderError(self._MESSAGE)

    __call__ = __bool__ = __iter__ = __len__ = __getitem__ = _refuse
    __int__ = __float__ = __index__ = __complex__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __matmul__ = __rmatmul__ = __truediv__ = __rtruediv__ = __floordiv__ = _refuse
    __pow__ = __rpow__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse


____ = _Placeholder()


def holds_placeholder(value, depth: int = 0) -> bool:
    if value is ____:
        return True
    if depth > 3:
        return False
    if type(value) in (list, tuple, set):
        return any(holds_placeholder(item, depth + 1) for item in value)
    if type(value) is dict:
        return any(holds_placeholder(item, depth + 1) for item in value.values())
    return False
