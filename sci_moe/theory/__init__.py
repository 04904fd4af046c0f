"""Theory tools: replica-method solvers and spectral-gap tools.

Needs only numpy and scipy. Subpackages:

- :mod:`sci_moe.theory.self_distillation` -- optimal multi-stage self-distillation in a noisy
  Gaussian mixture (replica-symmetric solvers, finite-N simulation, hyper-parameter tuning).
- :mod:`sci_moe.theory.spectral` -- spectral and restricted spectral gaps of finite
  reversible chains, projection/restriction chains, decomposition bounds, and builders of
  discretised RWMH and simulated-tempering chains on Gaussian mixtures.
"""

from . import self_distillation, spectral
from .self_distillation import (
    ConvergenceError,
    SelfDistillationModel,
    SolverConfig,
    optimize_sd,
    simulate,
    solve_multistage,
    solve_stage0,
)

__all__ = [
    "ConvergenceError",
    "SelfDistillationModel",
    "SolverConfig",
    "optimize_sd",
    "self_distillation",
    "simulate",
    "solve_multistage",
    "solve_stage0",
    "spectral",
]
