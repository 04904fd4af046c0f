"""Simulated and parallel tempering over batched chains, with ladders and diagnostics.

- :mod:`.kernels` -- batched RWMH and MALA on tempered log-densities.
- :mod:`.langevin` -- Langevin BAOAB dynamics at temperature ``1/beta`` (velocities
  rescaled or resampled at level changes), and adapters from MD energies.
- :mod:`.ladder` -- geometric and acceptance-adapted inverse-temperature ladders.
- :mod:`.tempering` -- :class:`SimulatedTempering` (given, Park-Pande, SAMS, Wang-Landau
  weights) and the :class:`ParallelTempering` baseline.
- :mod:`.diagnostics` -- level histograms, round trips, Sokal IAT, ESS (per second).
- simulated tempering of OpenMM systems through OpenMM's ``ExpandedEnsembleSampler``
  (our ladders, weights, velocity rule and diagnostics; checkpoints and progress through
  the md run layer), split by concept: :mod:`.openmm_config` (:class:`OpenMMTemperingConfig`),
  :mod:`.openmm_sampler` (:class:`OpenMMSimulatedTempering`), :mod:`.level_moves`,
  :mod:`.openmm_checkpoint`, :mod:`.openmm_result` (:class:`OpenMMTemperingResult`).
  OpenMM is imported only when :class:`OpenMMSimulatedTempering` is first used.
"""

from ..._util import lazy_exports
from .diagnostics import (
    acceptance_summary,
    autocorrelation,
    effective_sample_size,
    ess_per_second,
    integrated_autocorr_time,
    level_histogram,
    masked_mean,
    round_trips,
)
from .kernels import MALA, RWMH, KernelStep, sample
from .ladder import adaptive_ladder, geometric_ladder, swap_acceptance
from .langevin import BAOAB, energy_log_prob
from .openmm_config import OpenMMTemperingConfig
from .openmm_result import OpenMMTemperingResult
from .tempering import (
    OnlineWeights,
    ParallelTempering,
    SimulatedTempering,
    TemperingConfig,
    TemperingResult,
    park_pande_weights,
)

__all__ = [
    "BAOAB",
    "MALA",
    "RWMH",
    "KernelStep",
    "OnlineWeights",
    "OpenMMSimulatedTempering",
    "OpenMMTemperingConfig",
    "OpenMMTemperingResult",
    "ParallelTempering",
    "SimulatedTempering",
    "TemperingConfig",
    "TemperingResult",
    "acceptance_summary",
    "adaptive_ladder",
    "autocorrelation",
    "effective_sample_size",
    "energy_log_prob",
    "ess_per_second",
    "geometric_ladder",
    "integrated_autocorr_time",
    "level_histogram",
    "masked_mean",
    "park_pande_weights",
    "round_trips",
    "sample",
    "swap_acceptance",
]

# The OpenMM driver is imported on first use (keeps ``import openmm`` out of this package).
__getattr__, __dir__ = lazy_exports(__name__, {"OpenMMSimulatedTempering": ".openmm_sampler"})
