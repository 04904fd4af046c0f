"""Function-on-function regression with FAME (Gao, Chen & Zhang, NeurIPS 2025).

Irregularly observed input functions drive bidirectional neural CDEs whose vector fields
are mixtures of ``K`` experts weighted once per function (the core's dense
:class:`~sci_moe.moe.Router` and one grouped expert bank); continuous attention over time,
cross-attention across functions and an NCDE decoder give the output function at any
time. Needs the ``functional`` extra (torchcde).

* :class:`FunctionOnFunctionRegressor`: ``fit(inputs, outputs)`` / ``predict(inputs,
  query_times)`` on lists of ``(times, values)``, trained on the package's engine with
  :class:`FAMETrainConfig` (``sci-moe train fame`` on the command line).
* :class:`FAME`, :class:`FAMEConfig`, :class:`MixtureVectorField`,
  :class:`ContinuousAttention`, :class:`FunctionCrossAttention`: the network.
* :func:`build_paths`, :func:`spline_coefficients`, :func:`path_summary`: control paths.
* Baselines: :class:`FunctionalLinearModel`, :class:`GridMLP`, :class:`ObservationGRU`.
* Data with an exact ground truth: :func:`make_oscillator_data` (scipy ``solve_ivp``).
"""

from .attention import ContinuousAttention, FunctionCrossAttention, trapezoid_weights
from .baselines import FunctionalLinearModel, GridMLP, ObservationGRU, bspline_basis
from .data import (
    FourierFunction,
    OscillatorData,
    make_oscillator_data,
    oscillator_response,
    relative_l2,
    subsample,
)
from .fame import FAME, FAMEConfig, import_torchcde
from .paths import (
    SPLINE_KINDS,
    build_paths,
    interpolant,
    path_summary,
    spline_coefficients,
    symmetric_grid,
)
from .regressor import FAMETrainConfig, FunctionOnFunctionRegressor, PreparedInputs
from .samples import check_function, check_inputs, check_outputs, observed_range
from .scaling import FunctionScaler
from .vector_field import MixtureVectorField

__all__ = [
    "FAME",
    "SPLINE_KINDS",
    "ContinuousAttention",
    "FAMEConfig",
    "FAMETrainConfig",
    "FourierFunction",
    "FunctionCrossAttention",
    "FunctionOnFunctionRegressor",
    "FunctionScaler",
    "FunctionalLinearModel",
    "GridMLP",
    "MixtureVectorField",
    "ObservationGRU",
    "OscillatorData",
    "PreparedInputs",
    "bspline_basis",
    "build_paths",
    "check_function",
    "check_inputs",
    "check_outputs",
    "import_torchcde",
    "interpolant",
    "make_oscillator_data",
    "observed_range",
    "oscillator_response",
    "path_summary",
    "relative_l2",
    "spline_coefficients",
    "subsample",
    "symmetric_grid",
    "trapezoid_weights",
]
