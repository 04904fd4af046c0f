"""sci_moe.moe.convert against the transformers MoE blocks (tiny random configs, CPU)."""

from __future__ import annotations

import importlib
import re

import pytest
import torch
from torch import nn

pytest.importorskip("transformers")

from sci_moe.moe import MoE, SharedExperts, from_transformers, to_transformers
from sci_moe.testing import assert_moe_matches_reference

H = 64
COMMON = dict(hidden_size=H, num_experts_per_tok=2, hidden_act="silu")
# name -> (model module, config class, block class, config kwargs)
CASES = {
    "mixtral": (
        "mixtral",
        "MixtralConfig",
        "MixtralSparseMoeBlock",
        dict(intermediate_size=96, num_local_experts=8),
    ),
    "qwen2_moe": (
        "qwen2_moe",
        "Qwen2MoeConfig",
        "Qwen2MoeSparseMoeBlock",
        dict(
            moe_intermediate_size=96,
            shared_expert_intermediate_size=80,
            num_experts=8,
            norm_topk_prob=False,
        ),
    ),
    "qwen3_moe_norm": (
        "qwen3_moe",
        "Qwen3MoeConfig",
        "Qwen3MoeSparseMoeBlock",
        dict(moe_intermediate_size=96, num_experts=8, norm_topk_prob=True),
    ),
    "qwen3_moe_nonorm": (
        "qwen3_moe",
        "Qwen3MoeConfig",
        "Qwen3MoeSparseMoeBlock",
        dict(moe_intermediate_size=96, num_experts=8, norm_topk_prob=False),
    ),
    "olmoe": (
        "olmoe",
        "OlmoeConfig",
        "OlmoeSparseMoeBlock",
        dict(intermediate_size=96, num_experts=8, norm_topk_prob=False),
    ),
    "deepseek_v3": (
        "deepseek_v3",
        "DeepseekV3Config",
        "DeepseekV3MoE",
        dict(
            intermediate_size=128,
            moe_intermediate_size=96,
            n_routed_experts=8,
            n_group=4,
            topk_group=2,
            n_shared_experts=1,
            routed_scaling_factor=2.5,
            norm_topk_prob=True,
        ),
    ),
}


def make_block(case: str, seed: int = 0, impl: str = "eager", **overrides) -> nn.Module:
    module, config_cls, block_cls, kw = CASES[case]
    mod = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    config = getattr(mod, config_cls)(**COMMON, **{**kw, **overrides})
    config._experts_implementation = impl
    block = getattr(mod, block_cls)(config).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in block.parameters():  # some are torch.empty, the routers zeros
            p.copy_(torch.randn(p.shape, generator=g) * 0.02)
        if case == "deepseek_v3":  # sigmoid scores ~0.5: a bias of this size changes choices
            bias = block.gate.e_score_correction_bias
            bias.copy_(torch.randn(bias.shape, generator=g) * 0.05)
    return block


def inputs(seed: int = 1) -> torch.Tensor:
    # Large enough that the routers' logits spread and top-k choices are well separated.
    return torch.randn(2, 5, H, generator=torch.Generator().manual_seed(seed)) * 4.0


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def forward_backward(module: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.clone().requires_grad_(True)
    y = module(x)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(2))
    (grad,) = torch.autograd.grad((y * g).sum(), x)
    return y.detach(), grad


@pytest.mark.parametrize("impl", ["eager", "grouped_mm"])
@pytest.mark.parametrize("case", list(CASES))
def test_from_transformers_matches_block(case, impl):
    block = make_block(case, impl=impl)
    moe = from_transformers(block)
    assert isinstance(moe, MoE) and not moe.training
    x = inputs()
    y_ref, dx_ref = forward_backward(block, x)
    y, dx = forward_backward(moe, x)
    assert y.shape == (2, 5, H)
    assert max_err(y, y_ref) < 1e-5, f"{case}/{impl}: output differs by {max_err(y, y_ref):.2e}"
    assert max_err(dx, dx_ref) < 1e-5, f"{case}/{impl}: grad differs by {max_err(dx, dx_ref):.2e}"
    assert y_ref.abs().max() > 1e-3  # not a vacuous comparison
    assert_moe_matches_reference(moe)


@pytest.mark.parametrize("case", list(CASES))
def test_weights_are_cloned(case):
    block = make_block(case)
    moe = from_transformers(block)
    assert moe.experts.gate_up.data_ptr() != block.experts.gate_up_proj.data_ptr()
    assert moe.router.weight.dtype == block.gate.weight.dtype
    assert all(not t.is_meta for t in [*moe.parameters(), *moe.buffers()])
    with torch.no_grad():
        moe.experts.down.zero_()
    assert block.experts.down_proj.abs().sum() > 0


@pytest.mark.parametrize("case", list(CASES))
def test_to_transformers_round_trip(case):
    moe = from_transformers(make_block(case, seed=0))
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in moe.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.01)
        moe.router.expert_bias.add_(torch.randn(8, generator=g) * 0.02)
    fresh = make_block(case, seed=5)
    assert to_transformers(moe, fresh) is fresh
    x = inputs()
    y_ref, dx_ref = forward_backward(fresh, x)
    y, dx = forward_backward(moe, x)
    assert max_err(y, y_ref) < 1e-5, f"{case}: output differs by {max_err(y, y_ref):.2e}"
    assert max_err(dx, dx_ref) < 1e-5, f"{case}: grad differs by {max_err(dx, dx_ref):.2e}"
    if case == "deepseek_v3":
        assert torch.equal(fresh.gate.e_score_correction_bias, moe.router.expert_bias)


def test_deepseek_mapping():
    block = make_block("deepseek_v3")
    c = from_transformers(block).router.config
    assert (c.score, c.selection_bias, c.num_groups, c.topk_groups) == ("sigmoid", True, 4, 2)
    assert (c.scaling, c.normalize, c.norm_eps) == (2.5, True, 1e-20)


def test_qwen2_shared_expert_is_gated():
    moe = from_transformers(make_block("qwen2_moe"))
    assert isinstance(moe.shared, SharedExperts) and moe.shared.gate is not None
    assert moe.shared.mlp.gate_up.shape == (1, 160, H)


def test_unsupported_block_raises():
    with pytest.raises(TypeError, match="unsupported MoE block Linear"):
        from_transformers(nn.Linear(4, 4))


def test_to_transformers_shape_mismatch_names_tensor():
    moe = from_transformers(make_block("qwen3_moe_norm"))
    smaller = make_block("qwen3_moe_norm", moe_intermediate_size=48)
    before = smaller.gate.weight.clone()
    with pytest.raises(ValueError, match=r"experts\.gate_up_proj shape"):
        to_transformers(moe, smaller)
    assert torch.equal(smaller.gate.weight, before)  # nothing written


def test_to_transformers_routing_mismatch():
    moe = from_transformers(make_block("qwen3_moe_norm"))
    with pytest.raises(ValueError, match="normalize"):
        to_transformers(moe, make_block("qwen3_moe_nonorm"))
    with pytest.raises(ValueError, match="shared"):
        to_transformers(from_transformers(make_block("olmoe")), make_block("qwen2_moe"))


def test_mixtral_jitter_warns():
    block = make_block("mixtral")
    block.jitter_noise = 0.1
    with pytest.warns(UserWarning, match="jitter"):
        moe = from_transformers(block)
    assert moe.router.config.jitter == 0.0


@pytest.mark.parametrize(
    "case,tensor",
    [
        ("mixtral", "experts.gate_up_proj"),
        ("olmoe", "gate.weight"),
        ("qwen2_moe", "shared_expert.down_proj.weight"),
        ("qwen2_moe", "shared_expert_gate.weight"),
        ("deepseek_v3", "gate.e_score_correction_bias"),
        ("deepseek_v3", "experts.down_proj"),
    ],
)
@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_from_transformers_rejects_non_finite_weights(case, tensor, bad):
    """Issue 27: uninitialised (NaN/Inf) source weights raise, naming the tensor."""
    block = make_block(case)
    t = block.get_parameter(tensor) if "bias" not in tensor else block.get_buffer(tensor)
    with torch.no_grad():
        t.view(-1)[3] = bad
    with pytest.raises(ValueError, match=re.escape(f"{tensor} holds 1 non-finite")):
        from_transformers(block)
