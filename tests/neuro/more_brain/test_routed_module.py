"""MoRE-Brain's routed layer (TreeLevelLayer, a RoutedModule) against the naive loop."""

from __future__ import annotations

import pytest
import torch

from sci_moe.moe import MLPExperts, RoutedModule, Router, routed_paths
from sci_moe.neuro.more_brain import MoREBrainEncoder, TreeLevelLayer
from sci_moe.testing import assert_routed_module


@pytest.mark.parametrize("residual", [True, False])
def test_more_brain_routed_calls_match_the_naive_loop(residual):
    torch.manual_seed(0)
    model = MoREBrainEncoder(
        voxels_per_subject={"a": 20},
        target_dim=4,
        d_model=5,
        d_hidden=6,
        experts=(2, 4, 8),
        capacity_factor=1.5,
        residual=residual,
        noise_std=0.1,
    )
    levels = [m for m in model.modules() if isinstance(m, RoutedModule)]
    assert levels == list(model.tree.levels)
    x = torch.randn(3, 20, generator=torch.Generator().manual_seed(1))
    # every level is one gather-routed call (train mode: noisy scores, the call's routing)
    assert assert_routed_module(model, x, "a") == 3
    paths = routed_paths(model)
    assert [p.num_experts for p in paths] == [2, 4, 8] and all(p.top_k == 1 for p in paths)


def test_tree_level_alone_and_its_precomputed_routing():
    torch.manual_seed(2)
    router = Router(d_model=4, num_experts=6, mode="tree", capacity_factor=1.0)
    level = TreeLevelLayer(router, MLPExperts(6, 4, 8), parents=3, residual=False)
    x = torch.randn(2 * 3 * 5, 4)
    assert assert_routed_module(level, x, groups=2) == 1
    y, info = level(x, groups=2, return_routing=True)
    r = info.routing
    assert r.source is not None and y.shape == (2 * 6 * 2, 4)  # k = floor(5 / 2)
    assert torch.equal(level(x, r), y)
    # each child chose among its own parent's rows only
    parent_of_row = r.source // 5
    group = torch.arange(2).repeat_interleave(6 * 2)
    assert torch.equal(parent_of_row, group * 3 + r.indices[:, 0] // 2)
    with pytest.raises(ValueError, match="groups="):
        level(x)
    with pytest.raises(ValueError, match="mode='tree'"):
        TreeLevelLayer(Router(d_model=4, num_experts=6), MLPExperts(6, 4, 8))
    with pytest.raises(ValueError, match="divide"):
        TreeLevelLayer(router, MLPExperts(6, 4, 8), parents=4)
