"""SPiCE: equivariant geometric Mixture-of-Experts over conformer ensembles.

The paper's method on the field's chemistry (:mod:`sci_moe.molecules`: conformer
ensembles, features, ensemble graphs and batches, the PaiNN backbone):

* the routed layer: :class:`GeometricMoE` (:class:`GeometricMoEConfig`, its two routed
  paths :class:`ScalarRoutedLayer` and :class:`VectorRoutedLayer`, invariant
  :class:`GramFeatures` routing, :class:`VectorExperts` for the equivariant channels,
  :class:`GeometricMoEInfo`, :func:`dense_routing`);
* the hierarchical ensemble encoder: :class:`EnsembleEncoder`
  (:class:`EnsembleEncoderConfig`, :class:`CrossConformerIntegration`,
  :func:`pack_by_group`) and the set readouts (:class:`SetReadout`,
  :data:`SET_READOUTS`);
* the model: :class:`SPiCE` (:class:`SPiCEConfig`, :class:`ModelOutput`, the
  :class:`EnsembleRegressor` interface, :func:`moe_load`, :func:`segment_softmax`);
* training: :func:`fit`, :func:`evaluate`, :func:`split_indices` (:class:`TrainConfig`
  on the engine :mod:`sci_moe.train`), :func:`save_model`, :func:`load_model`,
  :func:`load_checkpoint`;
* baselines: :class:`GNN2D`, :class:`ConformerBaseline` (:class:`BaselineConfig`,
  :func:`pick_conformer`), :func:`build_model` over :data:`MODELS`.
"""

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
)
from .geometric_moe import (
    GeometricMoE,
    GeometricMoEConfig,
    GeometricMoEInfo,
    GramFeatures,
    ScalarRoutedLayer,
    VectorExperts,
    VectorRoutedLayer,
    dense_routing,
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
    RESULTS_NAME,
    TrainConfig,
    evaluate,
    fit,
    load_checkpoint,
    load_model,
    save_model,
    split_indices,
)

__all__ = [
    "GNN2D",
    "MODELS",
    "MODEL_NAMES",
    "RESULTS_NAME",
    "SET_READOUTS",
    "BaselineConfig",
    "ConformerBaseline",
    "CrossConformerIntegration",
    "EnsembleEncoder",
    "EnsembleEncoderConfig",
    "EnsembleRegressor",
    "GeometricMoE",
    "GeometricMoEConfig",
    "GeometricMoEInfo",
    "GramFeatures",
    "ModelOutput",
    "SPiCE",
    "SPiCEConfig",
    "ScalarRoutedLayer",
    "SetReadout",
    "TrainConfig",
    "VectorExperts",
    "VectorRoutedLayer",
    "build_model",
    "dense_routing",
    "evaluate",
    "fit",
    "load_checkpoint",
    "load_model",
    "moe_load",
    "pack_by_group",
    "pick_conformer",
    "save_model",
    "segment_softmax",
    "split_indices",
]
