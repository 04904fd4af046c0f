"""Samplers: simulated tempering, parallel tempering and local MCMC kernels.

See :mod:`sci_moe.sampling.tempering`.
"""

from . import tempering
from .tempering import (
    MALA,
    RWMH,
    ParallelTempering,
    SimulatedTempering,
    TemperingConfig,
    TemperingResult,
    adaptive_ladder,
    geometric_ladder,
    integrated_autocorr_time,
    sample,
)

__all__ = [
    "MALA",
    "RWMH",
    "ParallelTempering",
    "SimulatedTempering",
    "TemperingConfig",
    "TemperingResult",
    "adaptive_ladder",
    "geometric_ladder",
    "integrated_autocorr_time",
    "sample",
    "tempering",
]
