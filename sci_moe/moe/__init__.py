"""The Mixture-of-Experts core shared by every part of sci-moe.

Three pieces: a :class:`Router` produces a :class:`Routing`; an :class:`ExpertBank`
holds ``E`` experts with stacked weights and runs them as grouped GEMMs; :func:`dispatch`
sorts tokens by expert and combines the weighted outputs. :class:`MoE` assembles them,
with a :class:`Dispatcher` strategy saying where the experts run (:class:`LocalDispatch`
by default, :class:`sci_moe.moe.parallel.ExpertParallel` for expert parallelism).

Everything a field package needs is importable from here (``__all__``); the submodules
are implementation detail.
"""

from .activations import get_activation
from .auxiliary import auxiliary_losses
from .balancing import BiasBalancer
from .chunked import chunked_path
from .competence import competence_routing
from .convert import from_transformers, to_transformers
from .decoder_budget import (
    DECOMPOSITION_KINDS,
    DecompositionSizes,
    decomposition_parameters,
    match_decomposition_sizes,
)
from .decoders import DecompositionOutput, MixtureOfDecoders, normalized_mse
from .default_moe import DefaultOutputs
from .diagnostics import group_expert_usage, pairwise_js_divergence, tree_level_diagnostics
from .discrepancy import mmd2, pairwise_discrepancy_loss
from .dispatch import dispatch, per_expert_path
from .dispatchers import Dispatcher, LocalDispatch
from .expert_ops import copy_expert, merge_experts, slice_experts, stacked_names, upcycle
from .experts import (
    AdapterExperts,
    ExpertBank,
    GLUExperts,
    LinearExperts,
    LoRAExperts,
    MLPExperts,
    ResidualMLPExperts,
)
from .gates import GATE_SCORES, gate_scores, masked_dense_gate
from .glu import glu_product
from .grouped import grouped_linear, grouped_mm_supported, grouped_path, set_grouped_path
from .layer import MoE, MoEConfig, MoEInfo, SharedExperts, check_layer_input
from .losses import (
    load_balancing_loss,
    load_equilibrium_loss,
    router_z_loss,
    tree_level_usage_loss,
    usage_mse_loss,
)
from .merging import (
    ensemble_distillation_loss,
    ensemble_forward,
    merged_forward,
    merged_parameters,
    proximity_loss,
)
from .mixtures import (
    GaussianMixtureFit,
    fit_gaussian_mixture,
    gaussian_component_log_prob,
    gaussian_mixture_log_prob,
    sample_gaussian_mixture,
)
from .routed import RoutedLayer, RoutedPath, routed_paths
from .router import Router, RouterConfig
from .routing import DispatchPlan, Routing, concat_routings, make_plan
from .slot_routing import SlotExpandedRouter, slot_expanded_top_m, slot_to_expert
from .specialization import (
    orthogonality_loss,
    routing_diagnostics,
    selected_outputs,
    selection_scores,
    variance_loss,
)
from .task_affine import (
    TaskAffineTable,
    bank_macs_per_token,
    task_affine_forward,
    task_affine_macs,
)
from .transcoders import SkipTranscoder, Transcoder
from .tree import TreeExpertChoice, TreeLevel, tree_capacities

__all__ = [
    "DECOMPOSITION_KINDS",
    "GATE_SCORES",
    "AdapterExperts",
    "BiasBalancer",
    "DecompositionOutput",
    "DecompositionSizes",
    "DefaultOutputs",
    "DispatchPlan",
    "Dispatcher",
    "ExpertBank",
    "GLUExperts",
    "GaussianMixtureFit",
    "LinearExperts",
    "LoRAExperts",
    "LocalDispatch",
    "MLPExperts",
    "MixtureOfDecoders",
    "MoE",
    "MoEConfig",
    "MoEInfo",
    "ResidualMLPExperts",
    "RoutedLayer",
    "RoutedPath",
    "Router",
    "RouterConfig",
    "Routing",
    "SharedExperts",
    "SkipTranscoder",
    "SlotExpandedRouter",
    "TaskAffineTable",
    "Transcoder",
    "TreeExpertChoice",
    "TreeLevel",
    "auxiliary_losses",
    "bank_macs_per_token",
    "check_layer_input",
    "chunked_path",
    "competence_routing",
    "concat_routings",
    "copy_expert",
    "decomposition_parameters",
    "dispatch",
    "ensemble_distillation_loss",
    "ensemble_forward",
    "fit_gaussian_mixture",
    "from_transformers",
    "gate_scores",
    "gaussian_component_log_prob",
    "gaussian_mixture_log_prob",
    "get_activation",
    "glu_product",
    "group_expert_usage",
    "grouped_linear",
    "grouped_mm_supported",
    "grouped_path",
    "load_balancing_loss",
    "load_equilibrium_loss",
    "make_plan",
    "masked_dense_gate",
    "match_decomposition_sizes",
    "merge_experts",
    "merged_forward",
    "merged_parameters",
    "mmd2",
    "normalized_mse",
    "orthogonality_loss",
    "pairwise_discrepancy_loss",
    "pairwise_js_divergence",
    "per_expert_path",
    "proximity_loss",
    "routed_paths",
    "router_z_loss",
    "routing_diagnostics",
    "sample_gaussian_mixture",
    "selected_outputs",
    "selection_scores",
    "set_grouped_path",
    "slice_experts",
    "slot_expanded_top_m",
    "slot_to_expert",
    "stacked_names",
    "task_affine_forward",
    "task_affine_macs",
    "to_transformers",
    "tree_capacities",
    "tree_level_diagnostics",
    "tree_level_usage_loss",
    "upcycle",
    "usage_mse_loss",
    "variance_loss",
]
