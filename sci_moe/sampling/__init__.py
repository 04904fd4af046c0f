"""Sampling: energy-based diffusion, molecular dynamics and simulated tempering.

* :mod:`sci_moe.sampling.diffusion`: energy-parameterised diffusion models with the
  Fokker-Planck regulariser, whose score at small diffusion time is a force field;
* :mod:`sci_moe.sampling.md`: potentials, force providers (analytic, learned, OpenMM),
  Langevin integrators, the run loop with reporters and checkpoints behind ``sci-moe md``;
* :mod:`sci_moe.sampling.tempering`: simulated and parallel tempering with local MCMC
  kernels, ladders, weight estimators and mixing diagnostics.

Each name has one import path, in its subpackage (``from sci_moe.sampling.tempering import
SimulatedTempering``); this package re-exports none of them.
"""

from . import diffusion, md, tempering

__all__ = ["diffusion", "md", "tempering"]
