"""Validation of scalar arguments: integers, finite reals, loss coefficients.

Every check raises ``ValueError`` with a message that names the argument and says what to
pass instead.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["check_coef", "check_int", "check_int_attr", "check_real"]


def check_int(name: str, value) -> int:
    """``value`` as a Python ``int``; ``ValueError`` for a bool, float or non-number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}; pass an int such as 2")
    return int(value)


def check_int_attr(obj, name: str, minimum: int | None = None) -> int:
    """Attribute ``name`` of ``obj`` (a config field), checked to be an ``int`` >= ``minimum``.

    Strictly a Python ``int`` (not a bool, not a NumPy integer: configs are written to JSON
    as they are); ``minimum=None`` allows any integer. ``ValueError`` names the field:
    ``"steps must be an integer >= 1, got 0"``.
    """
    value = getattr(obj, name)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (minimum is not None and value < minimum)
    ):
        bound = "" if minimum is None else f" >= {minimum}"
        raise ValueError(f"{name} must be an integer{bound}, got {value!r}")
    return value


def check_real(name: str, value) -> float:
    """``value`` as a finite Python ``float``; ``ValueError`` for NaN/Inf or a non-number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}; pass a finite number")
    return float(value)


def check_coef(name: str, value) -> float:
    """A loss coefficient: a finite float >= 0 (NaN would poison every gradient)."""
    value = check_real(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}; use 0 to switch the loss off")
    return value
