"""FAME's routed layer (MixtureVectorField, a RoutedModule) against the naive loop."""

from __future__ import annotations

import torch

from sci_moe.functional.fame import FAME, FAMEConfig, MixtureVectorField
from sci_moe.moe import RoutedModule
from sci_moe.testing import assert_routed_module
from tests.functional.fame.test_model import TINY, _batch


def test_fame_model_routed_calls_match_the_naive_loop():
    torch.manual_seed(0)
    model = FAME(FAMEConfig(num_functions=2, num_experts=3, **TINY))
    assert isinstance(model.field, RoutedModule)
    coeffs, grid, summary, rev = _batch(B=2)
    # every vector-field evaluation of the forward and backward CDE solves (one per RK4 stage)
    calls = assert_routed_module(model, coeffs, grid, summary, torch.linspace(0, 1, 3), rev)
    assert calls >= 4


def test_vector_field_routes_with_the_stored_per_path_mixture():
    vf = MixtureVectorField(
        hidden=3, channels=2, num_experts=2, expert_hidden=4, summary_size=5, groups=2
    ).double()
    g = torch.Generator().manual_seed(1)
    s = torch.randn(4, 5, generator=g, dtype=torch.float64)
    z = torch.randn(8, 3, generator=g, dtype=torch.float64)
    pi = vf.set_paths(s).weights
    assert vf.num_experts == 4 and vf.experts_per_group == 2
    assert assert_routed_module(vf, z) == 1
    routing = vf.route(z)
    assert torch.equal(routing.weights[:4], pi) and torch.equal(routing.weights[4:], pi)
    assert torch.equal(routing.indices[4:], routing.indices[:4] + 2)  # group 1's experts
    torch.testing.assert_close(vf.vector_field(torch.tensor(0.0), z), vf(z).view(8, 3, 2))
