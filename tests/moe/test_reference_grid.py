"""Fast path == naive reference (outputs and every gradient) over a grid of layouts."""

import pytest
import torch

from sci_moe.moe import MoE
from sci_moe.testing import assert_moe_matches_reference

GRID = [(E, k) for E in (1, 4, 64) for k in (1, 2, 8) if k <= E] + [(4, 4)]  # k == E too


@pytest.mark.parametrize("E,k", GRID)
@pytest.mark.parametrize("expert", ["glu", "mlp", "linear"])
def test_matches_reference(E, k, expert, float_dtype):
    moe = MoE(d_model=16, num_experts=E, top_k=k, d_hidden=12, expert=expert)
    # 12 tokens over 64 experts: most experts are empty.
    assert_moe_matches_reference(moe, num_tokens=12)


@pytest.mark.parametrize("num_tokens", [1, 3, 33])
def test_token_counts(num_tokens, float_dtype):
    moe = MoE(d_model=16, num_experts=4, top_k=2, d_hidden=8)
    assert_moe_matches_reference(moe, num_tokens=num_tokens)


def test_forced_empty_experts(float_dtype):
    moe = MoE(d_model=16, num_experts=8, top_k=2, d_hidden=8, selection_bias=True)
    # Make experts 0-5 unselectable: only 6 and 7 are ever used.
    moe.router.expert_bias[:6] = -100.0
    x = torch.randn(20, 16)
    assert set(moe.route(x).indices.unique().tolist()) == {6, 7}
    assert_moe_matches_reference(moe, x=x)


def test_aligned_sizes_take_grouped_mm_and_match(float_dtype):
    # d=32, hidden=64 are 16-byte aligned in float32 -> torch._grouped_mm; float64 -> bmm.
    moe = MoE(d_model=32, num_experts=8, top_k=2, d_hidden=64, num_shared_experts=2)
    assert_moe_matches_reference(moe, num_tokens=37)


@pytest.mark.parametrize(
    "options",
    [
        dict(score="sigmoid", normalize=True, norm_eps=1e-20, scaling=2.5),
        dict(score="sigmoid", num_groups=4, topk_groups=2, selection_bias=True),
        dict(score="softmax", normalize=False),
        dict(mode="dense"),
        dict(mode="dense", score="sigmoid", normalize=False),
        dict(mode="expert_choice", capacity_factor=1.0),
        dict(capacity_factor=0.5),
    ],
    ids=["sigmoid-scaled", "grouped-biased", "no-renorm", "dense", "dense-sigmoid", "ec", "cap"],
)
def test_router_variants(options, float_dtype):
    moe = MoE(d_model=16, num_experts=8, top_k=2, d_hidden=8, **options)
    if options.get("selection_bias"):
        moe.router.expert_bias.normal_()
    assert_moe_matches_reference(moe, num_tokens=24)


def test_shared_experts_gated(float_dtype):
    moe = MoE(
        d_model=16, num_experts=4, top_k=2, d_hidden=8, num_shared_experts=2, shared_gate=True
    )
    assert_moe_matches_reference(moe)


def test_bfloat16_documented_tolerance():
    moe = MoE(d_model=32, num_experts=8, top_k=2, d_hidden=64).to(torch.bfloat16)
    assert_moe_matches_reference(moe, num_tokens=40)


def test_reference_detects_a_wrong_layer():
    moe = MoE(d_model=16, num_experts=4, top_k=2, d_hidden=8)
    original = moe.experts.forward_sorted

    def broken(x, plan):
        return original(x, plan) * 1.01

    moe.experts.forward_sorted = broken
    with pytest.raises(AssertionError, match="output"):
        assert_moe_matches_reference(moe)
