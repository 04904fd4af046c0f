"""Sampling: energy-based diffusion, molecular dynamics and simulated tempering.

* :mod:`sci_moe.sampling.diffusion`: energy-parameterised diffusion models with the
  Fokker-Planck regulariser, whose score at small diffusion time is a force field;
* :mod:`sci_moe.sampling.md`: potentials, force providers (analytic, learned, OpenMM),
  Langevin integrators, the run loop with reporters and checkpoints behind ``sci-moe md``;
* :mod:`sci_moe.sampling.tempering`: simulated and parallel tempering with local MCMC
  kernels, ladders, weight estimators and mixing diagnostics.
"""

from . import diffusion, md, tempering
from .tempering import (
    BAOAB,
    MALA,
    RWMH,
    OpenMMTemperingConfig,
    OpenMMTemperingResult,
    ParallelTempering,
    SimulatedTempering,
    TemperingConfig,
    TemperingResult,
    adaptive_ladder,
    energy_log_prob,
    geometric_ladder,
    integrated_autocorr_time,
    sample,
)

__all__ = [
    "BAOAB",
    "MALA",
    "RWMH",
    "OpenMMSimulatedTempering",
    "OpenMMTemperingConfig",
    "OpenMMTemperingResult",
    "ParallelTempering",
    "SimulatedTempering",
    "TemperingConfig",
    "TemperingResult",
    "adaptive_ladder",
    "diffusion",
    "energy_log_prob",
    "geometric_ladder",
    "integrated_autocorr_time",
    "md",
    "sample",
    "tempering",
]


def __getattr__(name: str):
    """``OpenMMSimulatedTempering`` is imported on first use (it imports OpenMM)."""
    if name == "OpenMMSimulatedTempering":
        return tempering.OpenMMSimulatedTempering
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
