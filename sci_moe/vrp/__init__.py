"""Multi-task vehicle routing with specialised LoRA experts (MoSES).

Pan et al., "Multi-Task Vehicle Routing Solver via Mixture of Specialized Experts under
State-Decomposable MDP", NeurIPS 2025 (arXiv 2510.21453). A batched torch environment
for the 16 CVRP variants with {O, B, L, TW} (RouteFinder's distribution), an independent
feasibility checker, a POMO attention policy whose linear layers carry one gated-LoRA
expert per basis constraint (the core's :class:`~sci_moe.moe.LoRAExperts`) mixed by an
adaptive gate (the core's dense :class:`~sci_moe.moe.Router`), REINFORCE with the POMO
shared baseline, nearest neighbour and PyVRP 0.14 ILS references (extra ``vrp``).
"""

from sci_moe.moe import GATE_SCORES, masked_dense_gate

from .baselines import nearest_neighbour
from .checker import check_solution, solution_cost
from .env import MTVRPEnv, actions_to_routes, tour_cost
from .generator import CAPACITIES, MAX_TIME, MTVRPInstance, generate_instances
from .layers import MODES, ROUTINGS, MoSESLinear
from .model import MTVRPPolicy, PolicyConfig, node_features
from .pyvrp_solver import SCALE, pyvrp_model, pyvrp_route_distance, solve_pyvrp
from .train import STAGES, TrainConfig, augment, solve, stage_parameters, train_stage
from .variants import BASIS, HELD_OUT, SEEN, VARIANTS, flags_tensor, variant_flags, variant_name

__all__ = [
    "BASIS",
    "CAPACITIES",
    "GATE_SCORES",
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
    "MoSESLinear",
    "PolicyConfig",
    "TrainConfig",
    "actions_to_routes",
    "augment",
    "check_solution",
    "flags_tensor",
    "generate_instances",
    "masked_dense_gate",
    "nearest_neighbour",
    "node_features",
    "pyvrp_model",
    "pyvrp_route_distance",
    "solution_cost",
    "solve",
    "solve_pyvrp",
    "stage_parameters",
    "tour_cost",
    "train_stage",
    "variant_flags",
    "variant_name",
]
