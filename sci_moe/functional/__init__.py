"""Functional data: regression between irregularly observed functions.

The field's shared pieces: checks of observed functions given as ``(times, values)``
pairs, their control paths for neural CDEs (cubic interpolants written exactly as
torchcde coefficients on a common grid) and the scaling fitted on training data. One
paper, one subpackage:

* :mod:`sci_moe.functional.fame`: FAME (Gao, Chen & Zhang, NeurIPS 2025),
  function-on-function regression with mixtures of neural CDE experts.
"""

from .paths import (
    SPLINE_KINDS,
    build_paths,
    interpolant,
    path_summary,
    spline_coefficients,
    symmetric_grid,
)
from .samples import check_function, check_inputs, check_outputs, observed_range
from .scaling import FunctionScaler

__all__ = [
    "SPLINE_KINDS",
    "FunctionScaler",
    "build_paths",
    "check_function",
    "check_inputs",
    "check_outputs",
    "interpolant",
    "observed_range",
    "path_summary",
    "spline_coefficients",
    "symmetric_grid",
]
