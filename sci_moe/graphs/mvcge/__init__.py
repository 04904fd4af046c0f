"""MvCGE: multi-view collaborative graph experts (Wu et al., NeurIPS 2025).

* :mod:`~sci_moe.graphs.mvcge.model`: :class:`MvCGE` (one pool of GCN experts per layer
  shared by all views, graph-aware routing, load-equilibrium and graph-discrepancy losses,
  semantic-attention fusion), its options :class:`MvCGEConfig` in
  :mod:`~sci_moe.graphs.mvcge.config`;
* :mod:`~sci_moe.graphs.mvcge.baselines`: :class:`GCN`, :class:`MLP`,
  :class:`EarlyFusionGCN`, :class:`LateFusionGCN`, :class:`AttentionFusionGCN` (HAN's
  semantic attention), :class:`PerViewGCN` with the same budget;
* :mod:`~sci_moe.graphs.mvcge.data`: the benchmark's complementary and consistent
  multi-view settings (:func:`mvcge_csbm_config`);
* :mod:`~sci_moe.graphs.mvcge.train`: full-batch node classification on the training
  engine (:func:`train_node_classifier`) and one run (:func:`run_mvcge`,
  ``sci-moe train mvcge``).

The GCN expert banks, the pooling, the multi-view contextual SBM with its Bayes-optimal
accuracy and the multi-view graphs on disk are the field's
(:class:`~sci_moe.graphs.GCNExperts`, :func:`~sci_moe.graphs.make_multiview_csbm`,
:class:`~sci_moe.graphs.MultiViewGraph`).
"""

from .baselines import GCN, MLP, AttentionFusionGCN, EarlyFusionGCN, LateFusionGCN, PerViewGCN
from .config import MvCGEConfig
from .data import MVCGE_SETTINGS, mvcge_csbm_config
from .model import MvCGE, MvCGELayer, MvCGEOutput, SemanticAttention
from .train import (
    NODE_MODELS,
    MvCGETrainConfig,
    TrainConfig,
    TrainResult,
    accuracy,
    build_node_classifier,
    macro_f1,
    run_mvcge,
    train_node_classifier,
)

__all__ = [
    "GCN",
    "MLP",
    "MVCGE_SETTINGS",
    "NODE_MODELS",
    "AttentionFusionGCN",
    "EarlyFusionGCN",
    "LateFusionGCN",
    "MvCGE",
    "MvCGEConfig",
    "MvCGELayer",
    "MvCGEOutput",
    "MvCGETrainConfig",
    "PerViewGCN",
    "SemanticAttention",
    "TrainConfig",
    "TrainResult",
    "accuracy",
    "build_node_classifier",
    "macro_f1",
    "mvcge_csbm_config",
    "run_mvcge",
    "train_node_classifier",
]
