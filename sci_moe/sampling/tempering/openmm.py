"""Simulated tempering of an OpenMM system (the public module; one concept per submodule).

This module keeps the import path ``sci_moe.sampling.tempering.openmm``; the pieces are:

* :mod:`.openmm_config` -- :class:`OpenMMTemperingConfig` (ladder, moves, weights);
* :mod:`.openmm_sampler` -- :class:`OpenMMSimulatedTempering`, the driver of OpenMM's
  ``ExpandedEnsembleSampler`` (run loop on the md reporter protocol);
* :mod:`.level_moves` -- Gibbs / neighbour level moves and their acceptance statistics;
* :mod:`.openmm_checkpoint` -- checkpoint files through :mod:`sci_moe.sampling.md.checkpoint`;
* :mod:`.openmm_result` -- :class:`OpenMMTemperingResult`, the trace and its diagnostics.

Importing this module imports OpenMM; ``import sci_moe.sampling.tempering`` does not.
"""

from __future__ import annotations

from ..._util import BOLTZMANN_KJ_PER_MOL_K
from .openmm_config import OpenMMTemperingConfig
from .openmm_result import OpenMMTemperingResult
from .openmm_sampler import OpenMMSimulatedTempering

__all__ = [
    "MOLAR_GAS_CONSTANT",
    "OpenMMSimulatedTempering",
    "OpenMMTemperingConfig",
    "OpenMMTemperingResult",
]

#: kJ/(mol K); alias of ``sci_moe._util.BOLTZMANN_KJ_PER_MOL_K`` (kept for a release).
MOLAR_GAS_CONSTANT = BOLTZMANN_KJ_PER_MOL_K
