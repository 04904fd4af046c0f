"""Reverse SDE and probability-flow ODE reproduce Gaussian moments with the exact score."""

import pytest
import torch

from sci_moe.data.toy import DiffusedMixtureEnergy, GaussianMixture
from sci_moe.sampling.diffusion import (
    VESDE,
    VPSDE,
    probability_flow_sample,
    reverse_sde_sample,
)

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
