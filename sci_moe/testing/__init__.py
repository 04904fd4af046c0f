"""Test toolkit shipped with sci-moe: naive references and assertions users can reuse."""

from .assertions import assert_moe_matches_reference, default_tolerance
from .reference import reference_moe_forward, reference_routing

__all__ = [
    "assert_moe_matches_reference",
    "default_tolerance",
    "reference_moe_forward",
    "reference_routing",
]
