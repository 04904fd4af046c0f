"""Expert surgery (copy, merge, upcycle, slice) against naive per-parameter loops."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sci_moe.moe import (
    GLUExperts,
    LinearExperts,
    LoRAExperts,
    MLPExperts,
    Router,
    copy_expert,
    merge_experts,
    slice_experts,
    stacked_names,
    upcycle,
)
from sci_moe.testing import assert_routed_bank_matches_reference, default_tolerance
from tests.moe._residual import residual_bank

D = 6


def _banks():
    lora = LoRAExperts(nn.Linear(D, D), num_experts=4, rank=2)
    nn.init.normal_(lora.lora_b)
    return [
        LinearExperts(4, D, 5, bias=True),
        MLPExperts(4, D, 7, bias=True),
        GLUExperts(4, D, 3),
        lora,
        residual_bank(4, D, 2),
    ]


_IDS = ["linear", "mlp", "glu", "lora", "residual"]


@pytest.mark.parametrize("i", range(5), ids=_IDS)
def test_copy_expert_matches_naive_copy(float_dtype, i):
    bank = _banks()[i]
    before = {n: getattr(bank, n).detach().clone() for n in stacked_names(bank)}
    ids = {n: id(getattr(bank, n)) for n in before}
    copy_expert(bank, 2, [0, 3])
    for n, old in before.items():
        new = getattr(bank, n)
        assert id(new) == ids[n]  # same parameter objects (optimisers keep them)
        for e in range(4):
            expect = old[2] if e in (0, 3) else old[e]
            assert torch.equal(new[e], expect)
    x = torch.randn(5, D)
    torch.testing.assert_close(bank.forward_expert(0, x), bank.forward_expert(2, x))
    copy_expert(bank, 1, [3])  # one target inside one bank (the source is a view of it)
    assert all(torch.equal(getattr(bank, n)[3], getattr(bank, n)[1]) for n in before)


def test_copy_expert_from_a_dense_bank_and_optimizer_state():
    dense, bank = MLPExperts(1, D, 7, bias=True), MLPExperts(3, D, 7, bias=True)
    copy_expert(bank, 0, source=dense)
    x = torch.randn(4, D)
    for e in range(3):
        torch.testing.assert_close(bank.forward_expert(e, x), dense.forward_expert(0, x))
    opt = torch.optim.AdamW(bank.parameters())
    bank.forward_expert(1, x).sum().backward()
    opt.step()
    copy_expert(bank, 1, optimizer=opt)
    for p in bank.parameters():
        for key in ("exp_avg", "exp_avg_sq"):
            m = opt.state[p][key]
            assert torch.equal(m[0], m[1]) and torch.equal(m[2], m[1])
    with pytest.raises(ValueError, match="one kind"):
        copy_expert(bank, 0, source=LinearExperts(1, D, D))
    with pytest.raises(ValueError, match="out of range"):
        copy_expert(bank, 5)


@pytest.mark.parametrize("i", range(5), ids=_IDS)
def test_merge_experts_is_the_weighted_parameter_average(float_dtype, i):
    bank = _banks()[i]
    groups, weights = [[0, 1, 3], [2]], [[1.0, 2.0, 1.0], [5.0]]
    merged = merge_experts(bank, groups, weights)
    assert type(merged) is type(bank) and merged.num_experts == 2
    atol, rtol = default_tolerance(float_dtype)
    for n in stacked_names(bank):
        t = getattr(bank, n).detach()
        naive0 = (1 * t[0] + 2 * t[1] + 1 * t[3]) / 4
        torch.testing.assert_close(getattr(merged, n)[0], naive0, atol=atol, rtol=rtol)
        torch.testing.assert_close(getattr(merged, n)[1], t[2], atol=atol, rtol=rtol)
    assert (
        getattr(merged, stacked_names(bank)[0]).data_ptr()
        != getattr(bank, stacked_names(bank)[0]).data_ptr()
    )
    # a flat group gives one expert, uniform weights by default
    one = merge_experts(bank, [1, 2])
    n0 = stacked_names(bank)[0]
    t = getattr(bank, n0).detach()
    torch.testing.assert_close(getattr(one, n0)[0], (t[1] + t[2]) / 2, atol=atol, rtol=rtol)
    # the merged bank routes like any bank (fast path vs the naive reference)
    router = Router(d_model=D, num_experts=2, top_k=1)
    assert_routed_bank_matches_reference(router, merged, torch.randn(7, D))
    with pytest.raises(ValueError, match=">= 0"):
        merge_experts(bank, [0, 1], [1.0, -1.0])


def test_upcycle_linear_and_bank(float_dtype):
    lin = nn.Linear(D, 4)
    bank = upcycle(lin, 5)
    assert isinstance(bank, LinearExperts) and bank.num_experts == 5
    x = torch.randn(3, D)
    for e in range(5):
        torch.testing.assert_close(bank.forward_expert(e, x), lin(x))
    one = MLPExperts(1, D, 7)
    up = upcycle(one, 3)
    for e in range(3):
        torch.testing.assert_close(up.forward_expert(e, x), one.forward_expert(0, x))
    noisy = upcycle(one, 3, noise=0.1, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(noisy.up[0], noisy.up[1])
    rel = (noisy.up - one.up).norm() / (one.up.norm() * 3**0.5)
    assert 0.02 < float(rel.detach()) < 0.3
    with pytest.raises(ValueError, match="one-expert"):
        upcycle(MLPExperts(2, D, 7), 4)
    with pytest.raises(TypeError, match=r"nn\.Linear"):
        upcycle(nn.ReLU(), 4)


def test_slice_experts_keeps_nested_base():
    lora = _banks()[3]
    part = slice_experts(lora, 1, 3)
    assert part.num_experts == 2 and torch.equal(part.lora_a, lora.lora_a[1:3])
    x = torch.randn(2, D)
    torch.testing.assert_close(part.base(x), lora.base(x))
    torch.testing.assert_close(part.forward_expert(0, x), lora.forward_expert(1, x))


def test_stacked_names_rejects_unstacked_tensors():
    bank = MLPExperts(3, D, 4)
    bank.register_buffer("scale", torch.ones(2))
    with pytest.raises(TypeError, match="stacked"):
        stacked_names(bank)
