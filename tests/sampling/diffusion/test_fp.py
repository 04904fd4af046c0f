"""Fokker-Planck residual: exact on analytically diffused mixtures, two-probe estimator unbiased."""

import pytest
import torch

from sci_moe.data.toy import DiffusedMixtureEnergy, two_mode_mixture_2d
from sci_moe.sampling.diffusion import (
    VESDE,
    VPSDE,
    MLPEnergy,
    fp_error_curve,
    fp_loss,
    fp_residual_exact,
    fp_residual_probe,
)
from sci_moe.stats import GaussianMixture

TIMES = (1e-3, 0.03, 0.3)


def _xt(mix, sde, t, n, gen):
    x0 = mix.sample(n, gen).view(n, 1, -1)
    tv = torch.full((n,), t)
    noise = torch.randn(x0.shape, generator=gen)
    return sde.perturb(x0, tv, noise)[0], tv


@pytest.mark.parametrize("t", TIMES)
def test_exact_residual_vanishes(float_dtype, t):
    sde, mix = VPSDE(), two_mode_mixture_2d()
    gen = torch.Generator().manual_seed(1)
    x, tv = _xt(mix, sde, t, 256, gen)
    r = fp_residual_exact(DiffusedMixtureEnergy(mix, sde), sde, x, tv)
    tol = 1e-10 if float_dtype == torch.float64 else 1e-4 * max(1.0, float(sde.beta(tv[0])))
    assert r.abs().max() < tol
    # ScoreMD's "+1" residual on the normalised density equals beta/2 (1 - D) ...
    r1 = fp_residual_exact(DiffusedMixtureEnergy(mix, sde), sde, x, tv, dim_offset=1)
    expected = 0.5 * sde.beta(tv) * (1 - 2)
    torch.testing.assert_close(r1, expected, atol=tol, rtol=0)
    # ... and vanishes after the offset (D - 1) log m_t.
    r2 = fp_residual_exact(
        DiffusedMixtureEnergy(mix, sde, code_offset=True), sde, x, tv, dim_offset=1
    )
    assert r2.abs().max() < tol


def test_exact_residual_ve_and_full_covariance():
    torch.set_default_dtype(torch.float64)
    try:
        sde = VESDE(0.01, 5.0)
        mix = GaussianMixture(
            [[0.0, 1.0, -1.0], [2.0, 0.0, 0.5]],
            [
                [[1.0, 0.3, 0.0], [0.3, 0.5, 0.1], [0.0, 0.1, 0.8]],
                [[0.4, 0.0, 0.0], [0.0, 1.2, -0.2], [0.0, -0.2, 0.6]],
            ],
            [0.3, 0.7],
        )
        gen = torch.Generator().manual_seed(2)
        x, tv = _xt(mix, sde, 0.4, 64, gen)
        r = fp_residual_exact(DiffusedMixtureEnergy(mix, sde), sde, x, tv)
        assert r.abs().max() < 1e-9
    finally:
        torch.set_default_dtype(torch.float32)


def _mean_se(v):
    return v.mean().item(), (v.std() / len(v) ** 0.5).item()


@pytest.mark.parametrize("t", TIMES)
def test_two_probe_estimator_unbiased(float_dtype, t):
    sde, mix = VPSDE(), two_mode_mixture_2d()
    gen = torch.Generator().manual_seed(3)
    x, tv = _xt(mix, sde, t, 3000, gen)
    # consistent model: E[R1 R2] = r^2 = 0
    R = fp_residual_probe(
        DiffusedMixtureEnergy(mix, sde), sde, x, tv, create_graph=False, generator=gen
    )
    m, se = _mean_se(R[0] * R[1])
    assert abs(m) < 4 * se + 1e-6
    # inconsistent model ("+1" on the normalised density): E[R1 R2] = (beta/2 (1 - D))^2
    R = fp_residual_probe(
        DiffusedMixtureEnergy(mix, sde), sde, x, tv, dim_offset=1, create_graph=False, generator=gen
    )
    target = (0.5 * float(sde.beta(tv[0])) * (1 - 2)) ** 2
    m, se = _mean_se(R[0] * R[1])
    assert abs(m - target) < 4 * se + 1e-3 * target
    # a single probe estimates r itself without bias
    m, se = _mean_se(R[0] + 0.5 * sde.beta(tv))
    assert abs(m) < 4 * se + 1e-6


def test_probe_matches_exact_on_network():
    """On a (non-consistent) network, the mean single-probe estimate equals the exact r."""
    torch.manual_seed(0)
    net = MLPEnergy((1, 2), (16, 16)).double()
    sde = VPSDE()
    x = torch.randn(1, 1, 2, dtype=torch.float64).expand(4000, 1, 2).contiguous()
    tv = torch.full((4000,), 0.2, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    r = fp_residual_exact(net, sde, x[:1], tv[:1])
    R = fp_residual_probe(net, sde, x, tv, n_probes=1, create_graph=False, generator=gen)
    m, se = _mean_se(R[0])
    assert abs(m - r.item()) < 4 * se + 1e-3 * abs(r.item()) + 1e-5


def test_fp_loss_backprop_and_errors():
    net = MLPEnergy((1, 2), (8, 8))
    x, t = torch.randn(16, 1, 2), torch.rand(16) * 0.5 + 0.01
    loss = fp_loss(net, VPSDE(), x, t, generator=torch.Generator().manual_seed(0))
    loss.backward()
    grads = [p.grad for p in net.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
    with pytest.raises(ValueError, match="sigma"):
        fp_residual_probe(net, VPSDE(), x, t, sigma=0)


def test_fp_error_curve():
    torch.set_default_dtype(torch.float64)
    try:
        sde, mix = VPSDE(), two_mode_mixture_2d()
        data = mix.sample(2000, torch.Generator().manual_seed(0)).view(-1, 1, 2)
        gen = torch.Generator().manual_seed(1)
        good = fp_error_curve(DiffusedMixtureEnergy(mix, sde), sde, data, [0.01, 0.1], 1000, gen)
        bad = fp_error_curve(
            DiffusedMixtureEnergy(mix, sde), sde, data, [0.01, 0.1], 1000, gen, dim_offset=1
        )
        expected = [0.5 * float(sde.beta(torch.tensor(t))) / 2 for t in (0.01, 0.1)]
        assert (good < 0.3 * torch.tensor(expected).numpy()).all()
        torch.testing.assert_close(torch.tensor(bad), torch.tensor(expected), rtol=0.25, atol=0)
    finally:
        torch.set_default_dtype(torch.float32)
