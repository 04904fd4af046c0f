"""Multi-task vehicle routing with specialised LoRA experts (MoSES).

Pan et al., "Multi-Task Vehicle Routing Solver via Mixture of Specialized Experts under
State-Decomposable MDP", NeurIPS 2025 (arXiv 2510.21453). A batched torch environment
for the 16 CVRP variants with {O, B, L, TW} (RouteFinder's distribution), an independent
feasibility checker, a POMO attention policy whose linear layers carry one gated-LoRA
expert per basis constraint (the core's :class:`~sci_moe.moe.LoRAExperts`) mixed by an
adaptive gate (the core's dense :class:`~sci_moe.moe.Router`), REINFORCE with the POMO
shared baseline, nearest neighbour, greedy savings and PyVRP 0.14 ILS references (extra ``vrp``),
VRPLIB instance files with feasibility checks that name the customer and field.
"""

from .baselines import greedy_savings, nearest_neighbour, routes_to_actions
from .checker import check_solution, solution_cost
from .checkpoint import load_policy, save_policy
from .env import MTVRPEnv, actions_to_routes, tour_cost
from .generator import CAPACITIES, MAX_TIME, MTVRPInstance, generate_instances
from .layers import MODES, ROUTINGS, MoSESLinear
from .model import MTVRPPolicy, PolicyConfig, node_features
from .pyvrp_solver import SCALE, pyvrp_model, pyvrp_route_distance, solve_pyvrp
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
from .validate import instance_problems, validate_instance
from .variants import BASIS, HELD_OUT, SEEN, VARIANTS, flags_tensor, variant_flags, variant_name
from .vrplib_io import read_vrplib, to_unit_square, write_solution, write_vrplib

__all__ = [
    "BASIS",
    "BASIS_VARIANTS",
    "CAPACITIES",
    "HELD_OUT",
    "MAX_TIME",
    "MODES",
    "ROUTINGS",
    "SCALE",
    "SEEN",
    "STAGES",
    "VARIANTS",
    "MTVRPEnv",
    "MTVRPInstance",
    "MTVRPPolicy",
    "MoSESConfig",
    "MoSESLinear",
    "PolicyConfig",
    "TrainConfig",
    "actions_to_routes",
    "augment",
    "build_policy",
    "check_solution",
    "fit_moses",
    "flags_tensor",
    "generate_instances",
    "greedy_savings",
    "instance_problems",
    "load_policy",
    "nearest_neighbour",
    "node_features",
    "pyvrp_model",
    "pyvrp_route_distance",
    "read_vrplib",
    "reinforce_loss",
    "routes_to_actions",
    "save_policy",
    "solution_cost",
    "solve",
    "solve_pyvrp",
    "stage_parameters",
    "to_unit_square",
    "tour_cost",
    "train_moses",
    "train_stage",
    "validate_instance",
    "variant_flags",
    "variant_name",
    "write_solution",
    "write_vrplib",
]
