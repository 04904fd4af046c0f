"""MoSES: multi-task vehicle routing with specialised LoRA experts.

Pan et al., "Multi-Task Vehicle Routing Solver via Mixture of Specialized Experts under
State-Decomposable MDP", NeurIPS 2025 (arXiv 2510.21453). A POMO attention policy
(:class:`MTVRPPolicy`) whose linear layers (:class:`MoSESLinear`, a
:class:`~sci_moe.moe.RoutedModule`) carry one gated-LoRA expert per basis constraint
beside the backbone (:class:`BasisLoRAExperts`) mixed by an adaptive gate (the core's
:class:`~sci_moe.moe.Router` in dense mode with a mask of allowed experts); REINFORCE with the POMO
shared baseline and the three training stages on the package's training engine
(:func:`train_moses`, :func:`fit_moses`; ``sci-moe train vrp``); greedy multi-start
decoding with augmentation (:func:`solve`); policy files (:func:`save_policy`,
:func:`load_policy`; the trained policy shipped with the package, when there is one:
:func:`shipped_policy`).

The problem is the field's (:mod:`sci_moe.vrp`): the 16 variants, the instance
generator, the environment, the feasibility checker, VRPLIB files, and the reference
solvers the paper is compared with (nearest neighbour, greedy savings, PyVRP).
"""

from .checkpoint import SHIPPED_POLICY, load_policy, save_policy, shipped_policy
from .layers import MODES, ROUTINGS, BasisLoRAExperts, MoSESLinear
from .model import MTVRPPolicy, PolicyConfig, node_features
from .train import (
    BASIS_VARIANTS,
    STAGES,
    MoSESConfig,
    TrainConfig,
    augment,
    build_policy,
    fit_moses,
    reinforce_loss,
    solve,
    stage_parameters,
    train_moses,
    train_stage,
)

__all__ = [
    "BASIS_VARIANTS",
    "MODES",
    "ROUTINGS",
    "SHIPPED_POLICY",
    "STAGES",
    "BasisLoRAExperts",
    "MTVRPPolicy",
    "MoSESConfig",
    "MoSESLinear",
    "PolicyConfig",
    "TrainConfig",
    "augment",
    "build_policy",
    "fit_moses",
    "load_policy",
    "node_features",
    "reinforce_loss",
    "save_policy",
    "shipped_policy",
    "solve",
    "stage_parameters",
    "train_moses",
    "train_stage",
]
