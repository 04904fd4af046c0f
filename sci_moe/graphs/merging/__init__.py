"""Expert merging in MoE graph foundation models (Liu et al., NeurIPS 2025).

"Enhanced Expert Merging for Mixture-of-Experts in Graph Foundation Models", on an
AnyGraph-style base (Xia & Huang 2024):

* :mod:`~sci_moe.graphs.merging.model`: :class:`AnyGraphMoE` (SVD-unified features,
  parameter-free propagation, residual-MLP experts, competence router) and its link loss;
* :mod:`~sci_moe.graphs.merging.train`: AnyGraph's pre-training (:func:`pretrain`) on the
  training engine;
* :mod:`~sci_moe.graphs.merging.strategies`: the merging strategies (:class:`MergeConfig`,
  :func:`fine_tune_merging`, :func:`infer_embeddings`: top-1, ensemble, plain merge,
  KDEM, PPEM);
* :mod:`~sci_moe.graphs.merging.ensemble`: the top-k output ensemble and the KD and
  proximity losses that tie it to the merged expert;
* :mod:`~sci_moe.graphs.merging.run`: pre-training, routing and merging as one run
  (``sci-moe train graph-merging``).

The link-prediction graphs and metrics it is scored with are the field's
(:func:`~sci_moe.graphs.make_graph_collection`, :func:`~sci_moe.graphs.evaluate_scores`).
"""

from .ensemble import ensemble_distillation_loss, ensemble_forward, proximity_loss
from .model import (
    AnyGraphConfig,
    AnyGraphMoE,
    link_loss,
    normalized_adjacency,
    propagate,
    sample_link_batch,
    svd_embedding,
    unified_features,
)
from .run import BASE_STRATEGIES, GraphMergingConfig, mean_link_metrics, run_graph_merging
from .strategies import (
    STRATEGIES,
    MergeConfig,
    fine_tune_merging,
    infer_embeddings,
    inference_flops,
    selected_experts,
    train_merged_experts,
)
from .train import PretrainConfig, PretrainResult, link_batches, pretrain

__all__ = [
    "BASE_STRATEGIES",
    "STRATEGIES",
    "AnyGraphConfig",
    "AnyGraphMoE",
    "GraphMergingConfig",
    "MergeConfig",
    "PretrainConfig",
    "PretrainResult",
    "ensemble_distillation_loss",
    "ensemble_forward",
    "fine_tune_merging",
    "infer_embeddings",
    "inference_flops",
    "link_batches",
    "link_loss",
    "mean_link_metrics",
    "normalized_adjacency",
    "pretrain",
    "propagate",
    "proximity_loss",
    "run_graph_merging",
    "sample_link_batch",
    "selected_experts",
    "svd_embedding",
    "train_merged_experts",
    "unified_features",
]
