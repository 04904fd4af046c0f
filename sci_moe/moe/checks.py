"""Validation of what users pass to the core: layer inputs (integers and reals: ``_util``).

Every check raises ``ValueError``/``TypeError`` with a message that names the argument
and says what to pass instead.
"""

from __future__ import annotations

from .._util import check_coef, check_int, check_layer_input, check_real

__all__ = ["check_coef", "check_int", "check_layer_input", "check_real"]
