"""Test toolkit shipped with sci-moe: naive references and assertions users can reuse."""

from .assertions import (
    assert_moe_matches_reference,
    assert_routed_bank_matches_reference,
    assert_routed_module,
    default_tolerance,
)
from .decoders import reference_decomposition_forward
from .equivariance import assert_equivariant, cartesian_action, equivariance_error
from .forces import assert_forces_match_energy, finite_difference_forces
from .molecules import random_ensemble_graph
from .reference import reference_moe_forward, reference_routed_forward, reference_routing

__all__ = [
    "assert_equivariant",
    "assert_forces_match_energy",
    "assert_moe_matches_reference",
    "assert_routed_bank_matches_reference",
    "assert_routed_module",
    "cartesian_action",
    "default_tolerance",
    "equivariance_error",
    "finite_difference_forces",
    "random_ensemble_graph",
    "reference_decomposition_forward",
    "reference_moe_forward",
    "reference_routed_forward",
    "reference_routing",
]
