"""MoME adapters: the routed path against the core's naive reference, zero init, baselines."""

import pytest
import torch
from torch import nn

from sci_moe.moe import routed_paths
from sci_moe.speech.mome import (
    MoMEAdapter,
    MoMEConfig,
    ParallelAdapters,
    PerRateAdapter,
    SingleAdapter,
    adapter_parameter_count,
    matched_bottleneck,
)
from sci_moe.testing import (
    assert_routed_bank_matches_reference,
    default_tolerance,
    reference_routed_forward,
)


def _randomize(adapter: MoMEAdapter) -> MoMEAdapter:
    with torch.no_grad():
        adapter.experts.down.normal_()
        adapter.experts.down_bias.normal_()
        adapter.shared.mlp.down.normal_()
    return adapter


@pytest.mark.parametrize("normalize", [False, True])
def test_routed_path_matches_naive_reference(float_dtype, normalize):
    a = _randomize(
        MoMEAdapter(d_model=12, num_experts=5, top_k=2, bottleneck=3, normalize=normalize)
    )
    x = torch.randn(20, 12)
    assert_routed_bank_matches_reference(a.router, a.experts, x, shared=a.shared)
    # the adapter's own forward is that same routed path + shared experts
    atol, rtol = default_tolerance(float_dtype)
    ref = reference_routed_forward(a.router, a.experts, x, shared=a.shared)
    torch.testing.assert_close(a(x), ref, atol=atol, rtol=rtol)


def test_mask_routes_only_real_tokens():
    block = nn.Linear(8, 8)
    pa = ParallelAdapters(
        [block], lambda i: _randomize(MoMEAdapter(d_model=8, num_experts=4, top_k=1, bottleneck=2))
    )
    a = pa.adapters[0]
    x = torch.randn(2, 5, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    with pa.context("r", mask) as infos:
        y = block(x) - nn.functional.linear(x, block.weight, block.bias)
    assert a.last_routing.num_tokens == 8 and infos[0].routing is a.last_routing
    assert torch.equal(y[0, 3:], torch.zeros(2, 8))
    torch.testing.assert_close(y[mask], a(x[mask]))
    assert torch.equal(pa.aux_loss(infos), infos[0].aux_loss)


def test_fresh_adapter_outputs_zero_and_paths_are_exposed():
    a = MoMEAdapter(d_model=8, num_experts=4, top_k=2, num_shared=2, bottleneck=2)
    y, info = a(torch.randn(6, 8), return_routing=True)
    assert torch.equal(y, torch.zeros(6, 8))
    (path,) = routed_paths(a)
    assert path.router is a.router and path.experts is a.experts and path.num_shared_experts == 2
    assert path.top_k == 2 and path.num_experts == 4 and path.shared is a.shared
    # Switch loss: 1 when perfectly balanced; it is the info's whole auxiliary loss
    assert float(info.losses["load_balance"].detach()) >= 1.0 - 1e-6
    assert torch.equal(info.aux_loss, info.losses["load_balance"])


def test_dense_adapters_add_no_auxiliary_loss():
    block = nn.Linear(8, 8)
    pa = ParallelAdapters([block], lambda i: SingleAdapter(8, 2))
    with pa.context("r", torch.ones(2, 3, dtype=torch.bool)) as infos:
        block(torch.randn(2, 3, 8))
    assert infos == [None] and float(pa.aux_loss(infos)) == 0.0


def test_zero_up_projection_leaves_frozen_model_unchanged():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
    x = torch.randn(3, 4, 8)
    before = model(x)
    pa = ParallelAdapters([model[0], model[2]], lambda i: MoMEAdapter(d_model=8, num_experts=3))
    assert torch.equal(model(x), before)  # bit-identical with zero up-projections
    assert not any(p.requires_grad for p in model.parameters())
    _randomize(pa.adapters[1])
    assert not torch.equal(model(x), before)
    pa.remove()
    assert torch.equal(model(x), before)


def test_per_rate_adapter_picks_the_rate_and_rejects_unknown():
    a = PerRateAdapter(8, 2, ["audio=4", "audio=16"])
    with torch.no_grad():
        a.adapters["audio=16"].bank.down.normal_()
    x = torch.randn(5, 8)
    a.rate = "audio=4"
    assert torch.equal(a(x), torch.zeros(5, 8))
    a.rate = "audio=16"
    assert a(x).abs().sum() > 0
    a.rate = "audio=8"
    with pytest.raises(ValueError, match="no adapter for rate"):
        a(x)


def test_matched_bottlenecks_equalise_parameters():
    mc = MoMEConfig(d_model=32, num_experts=8, top_k=2, num_shared=1, bottleneck=4)
    p_mome = sum(p.numel() for p in MoMEAdapter(mc).parameters())
    b3 = matched_bottleneck(mc, 3)
    b1 = matched_bottleneck(mc, 1)
    p3 = sum(p.numel() for p in PerRateAdapter(32, b3, ["a", "b", "c"]).parameters())
    p1 = sum(p.numel() for p in SingleAdapter(32, b1).parameters())
    step = adapter_parameter_count(32, 2) - adapter_parameter_count(32, 1)
    assert abs(p3 - p_mome) <= 3 * step and abs(p1 - p_mome) <= step
    assert MoMEAdapter(mc).active_parameters() < p_mome


def test_config_errors():
    with pytest.raises(ValueError, match="top_k"):
        MoMEConfig(d_model=8, num_experts=2, top_k=3)
    with pytest.raises(ValueError, match="bottleneck"):
        MoMEConfig(d_model=8, bottleneck=0)
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 8\)"):
        MoMEAdapter(d_model=8)(torch.randn(3, 9))
    with pytest.raises(ValueError, match="features of size"):
        SingleAdapter(8, 2)(torch.randn(3, 9))
