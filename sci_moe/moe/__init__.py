"""The Mixture-of-Experts core shared by every part of sci-moe.

Three pieces: a :class:`Router` produces a :class:`Routing`; an :class:`ExpertBank`
holds ``E`` experts with stacked weights and runs them as grouped GEMMs; :func:`dispatch`
sorts tokens by expert and combines the weighted outputs. :class:`MoE` assembles them.
"""

from .activations import get_activation
from .balancing import BiasBalancer
from .convert import from_transformers, to_transformers
from .default_moe import DefaultOutputs
from .dispatch import dispatch
from .experts import (
    AdapterExperts,
    ExpertBank,
    GLUExperts,
    LinearExperts,
    LoRAExperts,
    MLPExperts,
)
from .grouped import grouped_linear, grouped_mm_supported
from .layer import MoE, MoEConfig, MoEInfo, SharedExperts
from .losses import load_balancing_loss, router_z_loss
from .router import Router, RouterConfig
from .routing import DispatchPlan, Routing, make_plan
from .specialization import (
    orthogonality_loss,
    routing_diagnostics,
    selected_outputs,
    selection_scores,
    variance_loss,
)

__all__ = [
    "AdapterExperts",
    "BiasBalancer",
    "DefaultOutputs",
    "DispatchPlan",
    "ExpertBank",
    "GLUExperts",
    "LinearExperts",
    "LoRAExperts",
    "MLPExperts",
    "MoE",
    "MoEConfig",
    "MoEInfo",
    "Router",
    "RouterConfig",
    "Routing",
    "SharedExperts",
    "dispatch",
    "from_transformers",
    "get_activation",
    "grouped_linear",
    "grouped_mm_supported",
    "load_balancing_loss",
    "make_plan",
    "orthogonality_loss",
    "router_z_loss",
    "routing_diagnostics",
    "selected_outputs",
    "selection_scores",
    "to_transformers",
    "variance_loss",
]
