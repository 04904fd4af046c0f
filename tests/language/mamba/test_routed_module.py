"""Routing Mamba's routed layers (RoMProjection, RoutedModules) against the naive loop."""

from __future__ import annotations

import pytest
import torch

from sci_moe.language.mamba import PROJECTIONS, RoMBlock, RoMProjection
from sci_moe.language.model import MoELMConfig, MoETransformerLM
from sci_moe.moe import routed_paths
from sci_moe.testing import assert_routed_module


@pytest.mark.parametrize("routing", ["shared", "independent"])
def test_rom_block_routed_calls_match_the_naive_loop(routing):
    torch.manual_seed(0)
    block = RoMBlock(d_model=8, d_state=3, num_experts=4, top_k=2, routing=routing, bias=True)
    block = block.double()
    for name in PROJECTIONS:
        assert isinstance(getattr(block, f"{name}_proj"), RoMProjection)
    x = torch.randn(2, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    # the Conv, Gate and Out projections: three routed calls per block call
    assert assert_routed_module(block, x) == 3
    # the block reports each path once, with the router that routes it
    paths = routed_paths(block)
    assert [p.experts for p in paths] == [block.banks()[n] for n in PROJECTIONS]


def test_rom_language_model_routed_calls_match_the_naive_loop():
    torch.manual_seed(0)
    cfg = MoELMConfig(
        vocab_size=11,
        d_model=8,
        n_layers=2,
        n_heads=2,
        seq_len=8,
        d_hidden=8,
        num_experts=4,
        top_k=2,
        layers="ra",
    )
    lm = MoETransformerLM(cfg)
    idx = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(2))
    # block 0: RoM's three projections (no FFN by default); block 1: its MoE FFN
    assert assert_routed_module(lm, idx) == 4


def test_projection_needs_the_blocks_routing():
    proj = RoMProjection(4, 8, 6)
    with pytest.raises(ValueError, match="routed by its RoMBlock"):
        proj(torch.randn(3, 8))
