"""Graph mixtures of experts, a thin layer on :mod:`sci_moe.moe` built on torch-geometric.

One subpackage per paper; import a paper's names from it:

* :mod:`sci_moe.graphs.mvcge`: MvCGE, multi-view collaborative graph experts (Wu et al.,
  NeurIPS 2025), its baselines and training;
* :mod:`sci_moe.graphs.merging`: expert merging in MoE graph foundation models (Liu et
  al., NeurIPS 2025) on an AnyGraph-style base: the strategies (top-1, ensemble, plain
  merge, KDEM, PPEM), pre-training and one run.

The field root holds what is no paper's method: GNN expert banks (:class:`GCNExperts`)
and node pooling (:func:`pool_nodes`); the multi-view contextual SBM with its
Bayes-optimal accuracy (:func:`make_multiview_csbm`, :func:`bayes_optimal_accuracy`) and
multi-view graphs on disk (:class:`MultiViewGraph`, :func:`load_multiview_graph`);
generated link-prediction graphs with known link models (:func:`make_graph_collection`,
:func:`link_probability`), real graphs (:func:`karate_club`, :func:`load_pyg_dataset`)
non-learned link predictors (:func:`common_neighbours`, :func:`adamic_adar`)
and link metrics (:func:`evaluate_scores`).
"""

from .experts import GCNExperts, GCNPropagation, gcn_normalize
from .io import MultiViewGraph, load_multiview_graph, save_multiview_graph
from .link_data import (
    ALL_FAMILIES,
    FAMILIES,
    SPECIALISED_FAMILIES,
    GraphCollection,
    karate_club,
    link_probability,
    link_split,
    load_pyg_dataset,
    make_graph_collection,
    make_link_graph,
)
from .link_heuristics import HEURISTICS, adamic_adar, common_neighbours, heuristic_scorer
from .link_metrics import auc_score, evaluate_scores, oracle_metrics, ranking_metrics
from .pooling import POOLINGS, pool_nodes
from .sbm import (
    BayesAccuracy,
    MultiViewCSBMConfig,
    bayes_optimal_accuracy,
    bayes_posterior,
    make_multiview_csbm,
)

__all__ = [
    "ALL_FAMILIES",
    "FAMILIES",
    "HEURISTICS",
    "POOLINGS",
    "SPECIALISED_FAMILIES",
    "BayesAccuracy",
    "GCNExperts",
    "GCNPropagation",
    "GraphCollection",
    "MultiViewCSBMConfig",
    "MultiViewGraph",
    "adamic_adar",
    "auc_score",
    "bayes_optimal_accuracy",
    "bayes_posterior",
    "common_neighbours",
    "evaluate_scores",
    "gcn_normalize",
    "heuristic_scorer",
    "karate_club",
    "link_probability",
    "link_split",
    "load_multiview_graph",
    "load_pyg_dataset",
    "make_graph_collection",
    "make_link_graph",
    "make_multiview_csbm",
    "oracle_metrics",
    "pool_nodes",
    "ranking_metrics",
    "save_multiview_graph",
]
