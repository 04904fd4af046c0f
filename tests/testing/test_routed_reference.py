"""assert_routed_bank_matches_reference: a (router, bank) pair without an MoE."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sci_moe.moe import ExpertBank, LoRAExperts, MLPExperts, Router, SharedExperts
from sci_moe.testing import assert_routed_bank_matches_reference

D, E = 8, 4


def test_passes_for_sound_banks(float_dtype):
    router = Router(d_model=D, num_experts=E, top_k=2, score="sigmoid", selection_bias=True)
    with torch.no_grad():
        router.expert_bias.normal_()
    assert_routed_bank_matches_reference(router, MLPExperts(E, D, 6, bias=True))
    lora = LoRAExperts(nn.Linear(D, D), num_experts=E, rank=2)
    nn.init.normal_(lora.lora_b)
    assert_routed_bank_matches_reference(
        Router(d_model=D, num_experts=E, top_k=1), lora, shared=SharedExperts(D, 4)
    )


def test_router_reading_other_features(float_dtype):
    router = Router(d_model=3, num_experts=E, top_k=2)
    bank = MLPExperts(E, D, 6)
    assert_routed_bank_matches_reference(
        router, bank, torch.randn(10, D), router_input=torch.randn(10, 3)
    )


class _Broken(MLPExperts):
    def forward_sorted(self, x, plan):  # forgets the last expert's rows
        y = super().forward_sorted(x, plan)
        keep = (plan.expert[: plan.num_kept] != self.num_experts - 1).unsqueeze(-1)
        return y * keep


def test_catches_a_wrong_fast_path():
    router = Router(d_model=D, num_experts=E, top_k=3)
    with pytest.raises(AssertionError, match="naive reference"):
        assert_routed_bank_matches_reference(router, _Broken(E, D, 6), num_tokens=20)
    assert issubclass(_Broken, ExpertBank)


def test_needs_router_or_routing():
    with pytest.raises(ValueError, match="router or a routing"):
        assert_routed_bank_matches_reference(None, MLPExperts(E, D, 6))
