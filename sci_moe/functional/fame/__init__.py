"""FAME: function-on-function regression (Gao, Chen & Zhang, NeurIPS 2025).

Irregularly observed input functions drive bidirectional neural CDEs whose vector fields
are mixtures of ``K`` experts weighted once per function (the core's dense
:class:`~sci_moe.moe.Router` and one grouped expert bank); continuous attention over time,
cross-attention across functions and an NCDE decoder give the output function at any
time. Needs the ``functional`` extra (torchcde).

* :class:`FunctionOnFunctionRegressor`: ``fit(inputs, outputs)`` / ``predict(inputs,
  query_times)`` on lists of ``(times, values)``, trained on the package's engine with
  :class:`FAMETrainConfig` (``sci-moe train fame`` on the command line).
* :class:`FAME`, :class:`FAMEConfig`, :class:`MixtureVectorField` (the routed layer),
  :class:`ContinuousAttention`, :class:`FunctionCrossAttention`: the network.
* Baselines: :class:`FunctionalLinearModel`, :class:`GridMLP`, :class:`ObservationGRU`.
* Data with an exact ground truth: :func:`make_oscillator_data` (scipy ``solve_ivp``);
  the El Nino data is :mod:`sci_moe.data.elnino`.

The control paths, the checks of observed functions and the scaling are the field's, in
:mod:`sci_moe.functional`.
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
from .model import FAME, FAMEConfig, import_torchcde
from .tasks import ODE_TASKS, make_ode_data, ode_response, regime_of
from .train import FAMETrainConfig, FunctionOnFunctionRegressor, PreparedInputs
from .vector_field import MixtureVectorField

__all__ = [
    "FAME",
    "ODE_TASKS",
    "ContinuousAttention",
    "FAMEConfig",
    "FAMETrainConfig",
    "FourierFunction",
    "FunctionCrossAttention",
    "FunctionOnFunctionRegressor",
    "FunctionalLinearModel",
    "GridMLP",
    "MixtureVectorField",
    "ObservationGRU",
    "OscillatorData",
    "PreparedInputs",
    "bspline_basis",
    "import_torchcde",
    "make_ode_data",
    "make_oscillator_data",
    "ode_response",
    "oscillator_response",
    "regime_of",
    "relative_l2",
    "subsample",
    "trapezoid_weights",
]
