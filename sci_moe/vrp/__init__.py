"""Multi-task vehicle routing: the 16 CVRP variants, their instances, checks and solvers.

A batched torch environment for the 16 CVRP variants with {O, B, L, TW} (RouteFinder's
distribution), the instance generator, an independent feasibility checker, instance
checks that name the customer and field, VRPLIB instance files, and the reference
solvers: nearest neighbour, greedy savings and PyVRP 0.14 ILS (extra ``vrp``).

Papers, one subpackage each:

* :mod:`sci_moe.vrp.moses`: MoSES (Pan et al., NeurIPS 2025), a POMO policy with
  gated-LoRA basis experts per constraint.
"""

from .baselines import greedy_savings, nearest_neighbour, routes_to_actions
from .checker import check_solution, solution_cost
from .env import MTVRPEnv, actions_to_routes, tour_cost
from .generator import CAPACITIES, MAX_TIME, MTVRPInstance, generate_instances
from .pyvrp_solver import SCALE, pyvrp_model, pyvrp_route_distance, solve_pyvrp
from .validate import instance_problems, validate_instance
from .variants import BASIS, HELD_OUT, SEEN, VARIANTS, flags_tensor, variant_flags, variant_name
from .vrplib_io import read_vrplib, to_unit_square, write_solution, write_vrplib

__all__ = [
    "BASIS",
    "CAPACITIES",
    "HELD_OUT",
    "MAX_TIME",
    "SCALE",
    "SEEN",
    "VARIANTS",
    "MTVRPEnv",
    "MTVRPInstance",
    "actions_to_routes",
    "check_solution",
    "flags_tensor",
    "generate_instances",
    "greedy_savings",
    "instance_problems",
    "nearest_neighbour",
    "pyvrp_model",
    "pyvrp_route_distance",
    "read_vrplib",
    "routes_to_actions",
    "solution_cost",
    "solve_pyvrp",
    "to_unit_square",
    "tour_cost",
    "validate_instance",
    "variant_flags",
    "variant_name",
    "write_solution",
    "write_vrplib",
]
