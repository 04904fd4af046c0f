"""Molecules as conformer ensembles: conformers, features, graphs, batches, a PaiNN backbone.

The chemistry every molecular method here builds on: conformer ensembles from SMILES
(RDKit embedding, MMFF energies, cache, batch generation), Boltzmann weights, atom and
bond features, ensemble graphs with per-conformer radius graphs and their batches, and
the equivariant PaiNN backbone. A paper's method is a subpackage
(:mod:`sci_moe.molecules.spice`: SPiCE's geometric MoE, ensemble encoder, set readouts,
model, training and baselines). Positions are in nm and energies in kJ/mol at every
public boundary.

RDKit is imported only when an RDKit-backed name is first used (the conformer builders
:func:`embed_ensemble`, :func:`generate_ensembles` and their types, or featurising a
molecule): ``import sci_moe.molecules`` and the models alone do not load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util import KJ_PER_KCAL, lazy_exports, scatter_mean
from ._pool import parallel_map
from .backbone import (
    BesselBasis,
    EquivariantLayerNorm,
    PaiNNBlock,
    PaiNNMessage,
    PaiNNUpdate,
    cosine_cutoff,
    edge_geometry,
    scatter_sum,
    vectors_to_irreps,
)
from .features import (
    ATOM_FEATURE_DIM,
    ATOM_FEATURE_NAMES,
    BOND_FEATURE_DIM,
    BOND_FEATURE_NAMES,
    ELEMENTS,
    atom_features,
    bond_features,
    bond_index,
)
from .graph import (
    ANGSTROM_TO_NM,
    EnsembleBatch,
    EnsembleDataset,
    EnsembleGraph,
    boltzmann_weights,
    collate_ensembles,
    radius_graph_per_conformer,
)

if TYPE_CHECKING:
    from .conformers import (
        ConformerConfig,
        ConformerEnsemble,
        EnsembleReport,
        embed_ensemble,
        ensemble_cache_key,
        ensemble_from_arrays,
        generate_ensembles,
    )
    from .embedding import set_conformers

#: kcal/mol -> kJ/mol (alias of ``sci_moe._util.KJ_PER_KCAL``).
KCAL_TO_KJ = KJ_PER_KCAL

# RDKit-backed names, imported on first access (PEP 562)
_LAZY = {
    "ConformerConfig": ".embedding",
    "ConformerEnsemble": ".embedding",
    "embed_ensemble": ".embedding",
    "ensemble_from_arrays": ".embedding",
    "set_conformers": ".embedding",
    "EnsembleReport": ".conformer_batch",
    "generate_ensembles": ".conformer_batch",
    "ensemble_cache_key": ".conformer_cache",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "ANGSTROM_TO_NM",
    "ATOM_FEATURE_DIM",
    "ATOM_FEATURE_NAMES",
    "BOND_FEATURE_DIM",
    "BOND_FEATURE_NAMES",
    "ELEMENTS",
    "KCAL_TO_KJ",
    "BesselBasis",
    "ConformerConfig",
    "ConformerEnsemble",
    "EnsembleBatch",
    "EnsembleDataset",
    "EnsembleGraph",
    "EnsembleReport",
    "EquivariantLayerNorm",
    "PaiNNBlock",
    "PaiNNMessage",
    "PaiNNUpdate",
    "atom_features",
    "boltzmann_weights",
    "bond_features",
    "bond_index",
    "collate_ensembles",
    "cosine_cutoff",
    "edge_geometry",
    "embed_ensemble",
    "ensemble_cache_key",
    "ensemble_from_arrays",
    "generate_ensembles",
    "parallel_map",
    "radius_graph_per_conformer",
    "scatter_mean",
    "scatter_sum",
    "set_conformers",
    "vectors_to_irreps",
]
