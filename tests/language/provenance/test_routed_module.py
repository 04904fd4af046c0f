"""The fingerprint study's MoE head: its routed layer (the core MoE, a RoutedModule)
against the naive loop."""

from __future__ import annotations

import torch

from sci_moe.language.provenance import EmbeddingHeadConfig, MoEClassifierHead
from sci_moe.moe import RoutedModule
from sci_moe.testing import assert_routed_module


def test_moe_head_routed_call_matches_the_naive_loop():
    torch.manual_seed(0)
    cfg = EmbeddingHeadConfig(num_experts=4, top_k=2, d_hidden=6)
    head = MoEClassifierHead(8, 3, cfg).double()
    assert isinstance(head.moe, RoutedModule)
    x = torch.randn(5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert assert_routed_module(head, x) == 1
