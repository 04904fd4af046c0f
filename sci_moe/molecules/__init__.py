"""SPiCE: equivariant geometric Mixture-of-Experts over conformer ensembles.

Data (conformer ensembles from SMILES, featurisation, ensemble graphs and batches) and
models (PaiNN backbone, geometric MoE, hierarchical ensemble encoder, SPiCE, baselines,
training API). Positions are in nm and energies in kJ/mol at every public boundary.

RDKit is imported only when an RDKit-backed name is first used (the conformer builders
:func:`embed_ensemble`, :func:`generate_ensembles` and their types, or featurising a
molecule): ``import sci_moe.molecules`` and the models alone do not load it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .._util import KJ_PER_KCAL
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
from .baselines import (
    GNN2D,
    MODEL_NAMES,
    MODELS,
    BaselineConfig,
    ConformerBaseline,
    build_model,
    pick_conformer,
)
from .ensemble import (
    CrossConformerIntegration,
    EnsembleEncoder,
    EnsembleEncoderConfig,
    pack_by_group,
    scatter_mean,
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
from .geometric_moe import (
    GeometricMoE,
    GeometricMoEConfig,
    GeometricMoEInfo,
    GramFeatures,
    VectorExperts,
    dense_routing,
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
from .model import (
    EnsembleRegressor,
    ModelOutput,
    SPiCE,
    SPiCEConfig,
    moe_load,
    segment_softmax,
)
from .set_readouts import SET_READOUTS, SetReadout
from .train import (
    CHECKPOINT_NAME,
    RESULTS_NAME,
    TrainConfig,
    evaluate,
    fit,
    load_checkpoint,
    load_model,
    save_model,
    split_indices,
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

#: kcal/mol -> kJ/mol (alias of ``sci_moe._util.KJ_PER_KCAL``).
KCAL_TO_KJ = KJ_PER_KCAL

# RDKit-backed names, imported on first access (PEP 562)
_LAZY = {
    "ConformerConfig": "embedding",
    "ConformerEnsemble": "embedding",
    "embed_ensemble": "embedding",
    "ensemble_from_arrays": "embedding",
    "EnsembleReport": "conformer_batch",
    "generate_ensembles": "conformer_batch",
    "ensemble_cache_key": "conformer_cache",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "ANGSTROM_TO_NM",
    "ATOM_FEATURE_DIM",
    "ATOM_FEATURE_NAMES",
    "BOND_FEATURE_DIM",
    "BOND_FEATURE_NAMES",
    "CHECKPOINT_NAME",
    "ELEMENTS",
    "GNN2D",
    "KCAL_TO_KJ",
    "MODELS",
    "MODEL_NAMES",
    "RESULTS_NAME",
    "SET_READOUTS",
    "BaselineConfig",
    "BesselBasis",
    "ConformerBaseline",
    "ConformerConfig",
    "ConformerEnsemble",
    "CrossConformerIntegration",
    "EnsembleBatch",
    "EnsembleDataset",
    "EnsembleEncoder",
    "EnsembleEncoderConfig",
    "EnsembleGraph",
    "EnsembleRegressor",
    "EnsembleReport",
    "EquivariantLayerNorm",
    "GeometricMoE",
    "GeometricMoEConfig",
    "GeometricMoEInfo",
    "GramFeatures",
    "ModelOutput",
    "PaiNNBlock",
    "PaiNNMessage",
    "PaiNNUpdate",
    "SPiCE",
    "SPiCEConfig",
    "SetReadout",
    "TrainConfig",
    "VectorExperts",
    "atom_features",
    "boltzmann_weights",
    "bond_features",
    "bond_index",
    "build_model",
    "collate_ensembles",
    "cosine_cutoff",
    "dense_routing",
    "edge_geometry",
    "embed_ensemble",
    "ensemble_cache_key",
    "ensemble_from_arrays",
    "evaluate",
    "fit",
    "generate_ensembles",
    "load_checkpoint",
    "load_model",
    "moe_load",
    "pack_by_group",
    "parallel_map",
    "pick_conformer",
    "radius_graph_per_conformer",
    "save_model",
    "scatter_mean",
    "scatter_sum",
    "segment_softmax",
    "split_indices",
    "vectors_to_irreps",
]
