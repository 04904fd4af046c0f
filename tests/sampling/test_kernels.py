"""Batched RWMH / MALA kernels: invariance, per-chain step sizes, validation, seeding."""

from __future__ import annotations

import pytest
import torch

from sci_moe.sampling.tempering import MALA, RWMH, masked_mean, sample

MEAN, VAR = 1.0, 4.0


def gauss_lp(x):
    return -0.5 * ((x - MEAN) ** 2).sum(1) / VAR


@pytest.mark.parametrize("kernel", [RWMH(2.5), MALA(1.5)], ids=["rwmh", "mala"])
@pytest.mark.parametrize("beta", [1.0, 0.25])
def test_kernel_leaves_tempered_gaussian_invariant(kernel, beta):
    x0 = torch.zeros(256, 1, dtype=torch.float64)
    h = kernel.step_size / beta**0.5
    s, acc = sample(type(kernel)(h), gauss_lp, x0, 800, beta=beta, seed=3)
    y = s[200:, :, 0]
    everywhere = torch.ones_like(y, dtype=torch.bool)
    m, se_m = masked_mean(y, everywhere)
    v, se_v = masked_mean((y - MEAN) ** 2, everywhere)
    assert abs(m - MEAN) < 4 * se_m
    assert abs(v - VAR / beta) < 4 * se_v
    assert 0.2 < float(acc.mean()) < 1.0


def test_per_chain_step_sizes_and_acceptance():
    x = torch.zeros(2000, 1, dtype=torch.float64)
    h = torch.where(torch.arange(2000) < 1000, 0.1, 20.0).to(torch.float64)
    gen = torch.Generator().manual_seed(0)
    out = RWMH().step(x, gauss_lp, 1.0, generator=gen, step_size=h)
    small, large = out.accepted[:1000].double().mean(), out.accepted[1000:].double().mean()
    assert small > 0.95 > 0.3 > large
    assert out.x.shape == x.shape and out.log_prob.shape == (2000,)
    assert torch.allclose(out.log_prob, gauss_lp(out.x))


def test_mala_beta_zero_gradient_is_tempered():
    # at beta -> small, MALA drift vanishes: proposals are almost a random walk
    x = torch.full((4, 1), 10.0, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    out = MALA(0.5).step(x, gauss_lp, 1e-12, generator=gen)
    assert out.accepted.all()


def test_kernel_validation():
    with pytest.raises(ValueError, match="step_size"):
        RWMH(0.0)
    with pytest.raises(ValueError, match="step_size"):
        MALA(float("nan"))
    with pytest.raises(ValueError, match=r"shape \(B, d\)"):
        RWMH().step(torch.zeros(5), gauss_lp)
    with pytest.raises(ValueError, match="shape"):
        RWMH().step(torch.zeros(5, 1), gauss_lp, step_size=torch.ones(3))
    with pytest.raises(ValueError, match="n_steps"):
        sample(RWMH(), gauss_lp, torch.zeros(5, 1), 0)


def test_sample_is_reproducible():
    x0 = torch.zeros(8, 2, dtype=torch.float64)
    a, _ = sample(MALA(0.8), gauss_lp, x0, 50, seed=7)
    b, _ = sample(MALA(0.8), gauss_lp, x0, 50, seed=7)
    c, _ = sample(MALA(0.8), gauss_lp, x0, 50, seed=8)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
