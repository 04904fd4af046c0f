"""Graph mixtures of experts, a thin layer on :mod:`sci_moe.moe` built on torch-geometric.

* MvCGE, multi-view collaborative graph experts (Wu et al., NeurIPS 2025):
  :class:`MvCGE` with :class:`MvCGEConfig`; GNN expert banks (:class:`GCNExperts`);
  baselines (:class:`GCN`, :class:`EarlyFusionGCN`, :class:`LateFusionGCN`,
  :class:`PerViewGCN`); the multi-view contextual SBM with its Bayes-optimal accuracy
  (:func:`make_multiview_csbm`, :func:`bayes_optimal_accuracy`); multi-view graphs on
  disk (:class:`MultiViewGraph`, :func:`load_multiview_graph`).
"""

from ._core_pending import (
    group_expert_usage,
    load_equilibrium_loss,
    mmd2,
    pairwise_discrepancy_loss,
)
from .baselines import GCN, EarlyFusionGCN, LateFusionGCN, PerViewGCN
from .experts import GCNExperts, GCNPropagation, gcn_normalize
from .io import MultiViewGraph, load_multiview_graph, save_multiview_graph
from .mvcge import MvCGE, MvCGEConfig, MvCGEOutput, SemanticAttention
from .pooling import POOLINGS, pool_nodes
from .sbm import (
    BayesAccuracy,
    MultiViewCSBMConfig,
    bayes_optimal_accuracy,
    bayes_posterior,
    make_multiview_csbm,
)
from .train import TrainConfig, TrainResult, accuracy, macro_f1, train_node_classifier

__all__ = [
    "GCN",
    "POOLINGS",
    "BayesAccuracy",
    "EarlyFusionGCN",
    "GCNExperts",
    "GCNPropagation",
    "LateFusionGCN",
    "MultiViewCSBMConfig",
    "MultiViewGraph",
    "MvCGE",
    "MvCGEConfig",
    "MvCGEOutput",
    "PerViewGCN",
    "SemanticAttention",
    "TrainConfig",
    "TrainResult",
    "accuracy",
    "bayes_optimal_accuracy",
    "bayes_posterior",
    "gcn_normalize",
    "group_expert_usage",
    "load_equilibrium_loss",
    "load_multiview_graph",
    "macro_f1",
    "make_multiview_csbm",
    "mmd2",
    "pairwise_discrepancy_loss",
    "pool_nodes",
    "save_multiview_graph",
    "train_node_classifier",
]
