"""Reverse SDE and probability-flow ODE reproduce Gaussian moments with the exact score."""

import pytest
import torch

from sci_moe.data.toy import DiffusedMixtureEnergy
from sci_moe.sampling.diffusion import (
    VESDE,
    VPSDE,
    probability_flow_sample,
    reverse_sde_sample,
)
from sci_moe.stats import GaussianMixture

MEAN = [[1.0, -2.0]]
COV = [[[0.5, 0.2], [0.2, 0.3]]]


def _exact(sde):
    return DiffusedMixtureEnergy(GaussianMixture(MEAN, COV, [1.0]), sde)


@pytest.mark.parametrize("method", ["sde", "ode"])
def test_sampler_moments(float_dtype, method):
    sde = VPSDE()
    model = _exact(sde)
    gen = torch.Generator().manual_seed(0)
    n = 4000
    if method == "sde":
        x = reverse_sde_sample(model.score, sde, (n, 1, 2), n_steps=300, t_end=1e-3, generator=gen)
    else:
        x = probability_flow_sample(model.score, sde, (n, 1, 2), n_steps=100, generator=gen)
    x = x[:, 0]
    mean, cov = torch.tensor(MEAN[0]), torch.tensor(COV[0])
    se = (torch.diagonal(cov) / n).sqrt()
    assert ((x.mean(0) - mean).abs() < 4 * se + 0.02).all()
    torch.testing.assert_close(torch.cov(x.T), cov, atol=0.05, rtol=0.1)


def test_ve_sampler_moments():
    sde = VESDE(0.01, 10.0)
    model = _exact(sde)
    # start from the exact p_1 = N(mu, Sigma + sigma_max^2 I) (VE's prior ignores mu)
    p1 = GaussianMixture(MEAN, torch.tensor(COV) + 100.0 * torch.eye(2), [1.0])
    x1 = p1.sample(3000, torch.Generator().manual_seed(1)).view(3000, 1, 2)
    x = probability_flow_sample(model.score, sde, (3000, 1, 2), n_steps=200, x_init=x1)[:, 0]
    torch.testing.assert_close(x.mean(0), torch.tensor(MEAN[0]), atol=0.08, rtol=0)
    torch.testing.assert_close(torch.cov(x.T), torch.tensor(COV[0]), atol=0.06, rtol=0.15)


def test_sampler_errors():
    sde = VPSDE()
    with pytest.raises(ValueError, match="n_steps"):
        reverse_sde_sample(_exact(sde).score, sde, (2, 1, 2), n_steps=0)
    with pytest.raises(ValueError, match="method"):
        probability_flow_sample(_exact(sde).score, sde, (2, 1, 2), method="rk4")


def _reverse_sde_unchunked(score_fn, sde, shape, n_steps, generator):
    """The sampler before chunking (one network call and fresh tensors per step)."""
    x = sde.prior_sample(shape, generator, dtype=torch.float64)
    ts = torch.linspace(1.0, 0.0, n_steps + 1, dtype=torch.float64)
    for i in range(n_steps):
        t, dt = ts[i].item(), (ts[i] - ts[i + 1]).item()
        tv = torch.full((shape[0],), t, dtype=torch.float64)
        a, g2 = sde.drift_coeff(tv).view(-1, 1, 1), sde.g2(tv).view(-1, 1, 1)
        drift = a * x - g2 * score_fn(x, tv).detach()
        z = torch.randn(x.shape, generator=generator, dtype=torch.float64)
        x = x - drift * dt + (g2 * dt).sqrt() * z
    return x


def _ode_unchunked(score_fn, sde, shape, n_steps, t_end, generator):
    x = sde.prior_sample(shape, generator, dtype=torch.float64)
    ts = torch.linspace(1.0, t_end, n_steps + 1, dtype=torch.float64)

    def vel(x, t):
        tv = torch.full((shape[0],), t, dtype=torch.float64)
        a, g2 = sde.drift_coeff(tv).view(-1, 1, 1), sde.g2(tv).view(-1, 1, 1)
        return a * x - 0.5 * g2 * score_fn(x, tv).detach()

    for i in range(n_steps):
        t0, t1 = ts[i].item(), ts[i + 1].item()
        k1 = vel(x, t0)
        x = x + 0.5 * (t1 - t0) * (k1 + vel(x + (t1 - t0) * k1, t1))
    return x


@pytest.mark.parametrize("chunk_size", [None, 7, 64])
def test_chunked_samplers_give_the_unchunked_trajectories(chunk_size):
    """Same seed, same samples: chunking and the preallocated buffers change only rounding."""
    from sci_moe.sampling.diffusion import MLPEnergy

    torch.manual_seed(0)
    net = MLPEnergy((1, 2), (16, 16), t_range=(0.0, 1.0)).double()
    sde, shape = VPSDE(), (50, 1, 2)
    ref = _reverse_sde_unchunked(net.score, sde, shape, 20, torch.Generator().manual_seed(3))
    got = reverse_sde_sample(
        net.score,
        sde,
        shape,
        n_steps=20,
        generator=torch.Generator().manual_seed(3),
        dtype=torch.float64,
        chunk_size=chunk_size,
    )
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    ref = _ode_unchunked(net.score, sde, shape, 10, 1e-3, torch.Generator().manual_seed(4))
    got = probability_flow_sample(
        net.score,
        sde,
        shape,
        n_steps=10,
        generator=torch.Generator().manual_seed(4),
        dtype=torch.float64,
        chunk_size=chunk_size,
    )
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)


def test_chunk_size_must_be_positive():
    with pytest.raises(ValueError, match="chunk_size"):
        reverse_sde_sample(_exact(VPSDE()).score, VPSDE(), (4, 1, 2), n_steps=2, chunk_size=0)
