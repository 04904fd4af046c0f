"""SPiCE's routed layers (the scalar and vector paths, RoutedModules) against the naive loop."""

from __future__ import annotations

import pytest
import torch

from sci_moe.moe import RoutedModule
from sci_moe.molecules.graph import collate_ensembles
from sci_moe.molecules.spice.geometric_moe import (
    GeometricMoE,
    ScalarRoutedLayer,
    VectorRoutedLayer,
)
from sci_moe.molecules.spice.model import SPiCE, SPiCEConfig
from sci_moe.testing import assert_routed_module, random_ensemble_graph


@pytest.mark.parametrize("dense", [False, True])
def test_spice_model_routed_calls_match_the_naive_loop(dense):
    torch.manual_seed(0)
    cfg = SPiCEConfig(
        n_targets=2,
        atom_dim=5,
        bond_dim=3,
        hidden=8,
        num_layers=2,
        num_rbf=4,
        num_experts=4,
        top_k=2,
        cutoff_nm=0.35,
        upcycle=dense,
    )
    model = SPiCE(cfg).eval()
    assert model.is_dense == dense
    graphs = [random_ensemble_graph(6, 3, s, 2, atom_dim=5, bond_dim=3) for s in (1, 2)]
    # two layers, each a scalar and a vector path call
    assert assert_routed_module(model, collate_ensembles(graphs)) == 4


def test_geometric_moe_paths_are_routed_modules_and_route_alone():
    moe = GeometricMoE(hidden=8, num_experts=4, top_k=2).double()
    assert isinstance(moe.scalar, ScalarRoutedLayer) and isinstance(moe.vector, RoutedModule)
    g = torch.Generator().manual_seed(3)
    h = torch.randn(7, 8, generator=g, dtype=torch.float64)
    v = torch.randn(7, 3, 8, generator=g, dtype=torch.float64)
    assert assert_routed_module(moe, h, v) == 2
    # the vector path routes its own [h, vec(V)] tokens from the Gram features of V
    x = torch.cat([moe.norm(h), v.reshape(7, 24)], 1).detach()
    layer: VectorRoutedLayer = moe.vector
    assert torch.equal(layer.route(x).indices, layer.route_vectors(v).indices)
    assert assert_routed_module(layer, x.reshape(7, 1, 32)) == 1
    _, _, info = moe(h, v)
    torch.testing.assert_close(
        moe.vector(x, routing=info.vector_routing).reshape(7, 3, 8),
        moe(h, v)[1] - v,
    )
