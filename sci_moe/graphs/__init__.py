"""Graph mixtures of experts, a thin layer on :mod:`sci_moe.moe` built on torch-geometric.

* MvCGE, multi-view collaborative graph experts (Wu et al., NeurIPS 2025):
  :class:`MvCGE` with :class:`MvCGEConfig`; GNN expert banks (:class:`GCNExperts`);
  baselines (:class:`GCN`, :class:`EarlyFusionGCN`, :class:`LateFusionGCN`,
  :class:`PerViewGCN`); the multi-view contextual SBM with its Bayes-optimal accuracy
  (:func:`make_multiview_csbm`, :func:`bayes_optimal_accuracy`); multi-view graphs on
  disk (:class:`MultiViewGraph`, :func:`load_multiview_graph`).
* Expert merging in MoE graph foundation models (Liu et al., NeurIPS 2025) on an
  AnyGraph-style base: :class:`AnyGraphMoE` (SVD-unified features, parameter-free
  propagation, residual-MLP experts, competence router), :func:`pretrain`, the merging
  strategies (:class:`MergeConfig`, :func:`fine_tune_merging`, :func:`infer_embeddings`:
  top-1, ensemble, plain merge, KDEM, PPEM); generated link-prediction graphs with known
  link models (:func:`make_graph_collection`, :func:`link_probability`) and real graphs
  (:func:`karate_club`, :func:`load_pyg_dataset`); link metrics (:func:`evaluate_scores`).
"""

from .anygraph import (
    AnyGraphConfig,
    AnyGraphMoE,
    link_loss,
    normalized_adjacency,
    propagate,
    sample_link_batch,
    svd_embedding,
    unified_features,
)
from .anygraph_train import PretrainConfig, PretrainResult, link_batches, pretrain
from .baselines import GCN, EarlyFusionGCN, LateFusionGCN, PerViewGCN
from .experts import GCNExperts, GCNPropagation, gcn_normalize
from .io import MultiViewGraph, load_multiview_graph, save_multiview_graph
from .link_data import (
    FAMILIES,
    GraphCollection,
    karate_club,
    link_probability,
    link_split,
    load_pyg_dataset,
    make_graph_collection,
    make_link_graph,
)
from .link_metrics import auc_score, evaluate_scores, oracle_metrics, ranking_metrics
from .merging import (
    STRATEGIES,
    MergeConfig,
    fine_tune_merging,
    infer_embeddings,
    inference_flops,
    selected_experts,
    train_merged_experts,
)
from .merging_run import GraphMergingConfig, mean_link_metrics, run_graph_merging
from .mvcge import MvCGE, MvCGEConfig, MvCGEOutput, SemanticAttention
from .pooling import POOLINGS, pool_nodes
from .sbm import (
    BayesAccuracy,
    MultiViewCSBMConfig,
    bayes_optimal_accuracy,
    bayes_posterior,
    make_multiview_csbm,
)
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
    "FAMILIES",
    "GCN",
    "NODE_MODELS",
    "POOLINGS",
    "STRATEGIES",
    "AnyGraphConfig",
    "AnyGraphMoE",
    "BayesAccuracy",
    "EarlyFusionGCN",
    "GCNExperts",
    "GCNPropagation",
    "GraphCollection",
    "GraphMergingConfig",
    "LateFusionGCN",
    "MergeConfig",
    "MultiViewCSBMConfig",
    "MultiViewGraph",
    "MvCGE",
    "MvCGEConfig",
    "MvCGEOutput",
    "MvCGETrainConfig",
    "PerViewGCN",
    "PretrainConfig",
    "PretrainResult",
    "SemanticAttention",
    "TrainConfig",
    "TrainResult",
    "accuracy",
    "auc_score",
    "bayes_optimal_accuracy",
    "bayes_posterior",
    "build_node_classifier",
    "evaluate_scores",
    "fine_tune_merging",
    "gcn_normalize",
    "infer_embeddings",
    "inference_flops",
    "karate_club",
    "link_batches",
    "link_loss",
    "link_probability",
    "link_split",
    "load_multiview_graph",
    "load_pyg_dataset",
    "macro_f1",
    "make_graph_collection",
    "make_link_graph",
    "make_multiview_csbm",
    "mean_link_metrics",
    "normalized_adjacency",
    "oracle_metrics",
    "pool_nodes",
    "pretrain",
    "propagate",
    "ranking_metrics",
    "run_graph_merging",
    "run_mvcge",
    "sample_link_batch",
    "save_multiview_graph",
    "selected_experts",
    "svd_embedding",
    "train_merged_experts",
    "train_node_classifier",
    "unified_features",
]
