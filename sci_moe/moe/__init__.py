"""The Mixture-of-Experts core: the contract every paper of sci-moe builds on.

A :class:`Router` produces a :class:`Routing` (routing variants are options of the one
router: top-k, expert choice, dense with a mask, slot-expanded top-M, competence, tree);
an :class:`ExpertBank` (found by kind in a registry) holds ``E`` experts with stacked
weights and runs them as grouped GEMMs; :func:`dispatch` sorts tokens by expert and
combines the weighted outputs. :class:`RoutedModule` is the skeleton of every routed
layer (flatten, route, dispatch, reshape, :class:`MoEInfo`); :class:`MoE` is its
configurable subclass, with a :class:`Dispatcher` saying where the experts run
(:class:`LocalDispatch` by default, :class:`sci_moe.moe.parallel.ExpertParallel` for
expert parallelism). Auxiliary losses, expert surgery and conversion to and from
``transformers`` complete it; :mod:`sci_moe.testing` checks any routed model against the
naive reference.

Everything a paper may use is importable from here (``__all__``); the submodules are
implementation detail.
"""

from .auxiliary import auxiliary_losses
from .balancing import BiasBalancer
from .chunked import chunked_path
from .convert import from_transformers, to_transformers
from .dense import DenseSwiGLU
from .diagnostics import group_expert_usage
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
from .gates import GATE_SCORES
from .grouped import grouped_path, set_grouped_path
from .layer import MoE, MoEConfig, SharedExperts
from .losses import (
    load_balancing_loss,
    load_equilibrium_loss,
    router_z_loss,
    usage_mse_loss,
)
from .merging import merged_forward, merged_parameters
from .routed import MoEInfo, RoutedModule, RoutedPath, routed_paths
from .router import Router, RouterConfig
from .routing import DispatchPlan, Routing
from .specialization import (
    orthogonality_loss,
    routing_diagnostics,
    variance_loss,
)

__all__ = [
    "GATE_SCORES",
    "AdapterExperts",
    "BiasBalancer",
    "DenseSwiGLU",
    "DispatchPlan",
    "Dispatcher",
    "ExpertBank",
    "GLUExperts",
    "LinearExperts",
    "LoRAExperts",
    "LocalDispatch",
    "MLPExperts",
    "MoE",
    "MoEConfig",
    "MoEInfo",
    "ResidualMLPExperts",
    "RoutedModule",
    "RoutedPath",
    "Router",
    "RouterConfig",
    "Routing",
    "SharedExperts",
    "auxiliary_losses",
    "chunked_path",
    "copy_expert",
    "dispatch",
    "from_transformers",
    "group_expert_usage",
    "grouped_path",
    "load_balancing_loss",
    "load_equilibrium_loss",
    "merge_experts",
    "merged_forward",
    "merged_parameters",
    "orthogonality_loss",
    "per_expert_path",
    "routed_paths",
    "router_z_loss",
    "routing_diagnostics",
    "set_grouped_path",
    "slice_experts",
    "stacked_names",
    "to_transformers",
    "upcycle",
    "usage_mse_loss",
    "variance_loss",
]
