"""Theory tools: replica-method solvers and spectral-gap tools.

Needs only numpy and scipy. Subpackages:

- :mod:`sci_moe.theory.self_distillation` -- optimal multi-stage self-distillation in a noisy
  Gaussian mixture (replica-symmetric solvers, finite-N simulation, hyper-parameter tuning).
- :mod:`sci_moe.theory.spectral` -- spectral and restricted spectral gaps of finite
  reversible chains, projection/restriction chains, decomposition bounds, and builders of
  discretised RWMH and simulated-tempering chains on Gaussian mixtures.

Each name has one import path, in its subpackage: this package re-exports none.
"""

from . import self_distillation, spectral

__all__ = ["self_distillation", "spectral"]
