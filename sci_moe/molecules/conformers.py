"""Conformer ensembles from SMILES or RDKit molecules (the public face of the builders).

Recipe (RDKit 2024+): seeded ETKDGv3 embedding (Riniker & Landrum 2015; Wang et al. 2020)
of ``num_attempts`` conformers, MMFF94 optimisation, an energy window, greedy
symmetry-aware heavy-atom RMSD pruning in order of increasing energy
(``rdMolAlign.GetBestRMS``), at most ``max_confs`` conformers kept, energies in kJ/mol
and Boltzmann weights at ``temperature_k``.

:func:`generate_ensembles` runs this over many molecules in parallel (one process per
core, one thread each), caches every result on disk under a content hash (input +
settings + RDKit version) so a rerun costs nothing, and never drops a molecule silently:
every failure (invalid SMILES, no MMFF parameters, embedding failure, a crashed worker)
is listed by name with its reason in the returned :class:`EnsembleReport`.

The pieces live in one module each: settings, embedding and the result in
:mod:`~sci_moe.molecules.embedding`, the cache in
:mod:`~sci_moe.molecules.conformer_cache`, the batch builder and its report in
:mod:`~sci_moe.molecules.conformer_batch`; the process pool is
:func:`sci_moe._util.parallel_map` with an RDKit-silencing worker initializer.
"""

from __future__ import annotations

from .._util import KJ_PER_KCAL
from ._pool import parallel_map
from .conformer_batch import EnsembleReport, generate_ensembles
from .conformer_cache import ensemble_cache_key
from .embedding import ConformerConfig, ConformerEnsemble, embed_ensemble, ensemble_from_arrays

__all__ = [
    "KCAL_TO_KJ",
    "ConformerConfig",
    "ConformerEnsemble",
    "EnsembleReport",
    "embed_ensemble",
    "ensemble_cache_key",
    "ensemble_from_arrays",
    "generate_ensembles",
    "parallel_map",
]

#: kcal/mol -> kJ/mol (alias of ``sci_moe._util.KJ_PER_KCAL``).
KCAL_TO_KJ = KJ_PER_KCAL
