"""Gaussian mixtures (sci_moe.stats): naive log-density references with gradients
(f32/f64), per-point components, EM recovers a known mixture, sampling matches the
moments, the mixture log-likelihood, the GaussianMixture object (density, moments,
diffused density), bad input."""

import math

import numpy as np
import pytest
import torch

from sci_moe.stats import (
    GaussianMixture,
    fit_gaussian_mixture,
    gaussian_component_log_prob,
    gaussian_mixture_log_prob,
    sample_gaussian_mixture,
)

TOL = {torch.float32: 1e-4, torch.float64: 1e-10}


class _VP:
    """The VP SDE's marginal (beta from 0.1 to 20): ``x_t = m_t x_0 + sigma_t eps``."""

    def marginal(self, t):
        log_m = -0.25 * t**2 * (20.0 - 0.1) - 0.5 * t * 0.1
        return torch.exp(log_m), torch.sqrt(1.0 - torch.exp(2.0 * log_m))


def _naive_component_log_prob(x, means, covs):
    out = torch.empty(x.shape[0], means.shape[0], dtype=x.dtype)
    for n in range(x.shape[0]):
        for k in range(means.shape[0]):
            d = x[n] - means[k]
            maha = d @ torch.linalg.inv(covs[k]) @ d
            out[n, k] = -0.5 * (maha + torch.logdet(covs[k]) + x.shape[1] * math.log(2 * math.pi))
    return out


@pytest.mark.parametrize("cov_type", ["full", "diag"])
def test_component_log_prob_matches_naive_with_gradients(float_dtype, cov_type):
    dt = float_dtype
    x = torch.randn(5, 3, dtype=dt, requires_grad=True)
    means = torch.randn(2, 3, dtype=dt, requires_grad=True)
    if cov_type == "full":
        a = torch.randn(2, 3, 3, dtype=dt)
        cov = (a @ a.transpose(-1, -2) + torch.eye(3, dtype=dt)).requires_grad_()
        full = cov
    else:
        cov = (torch.rand(2, 3, dtype=dt) + 0.5).requires_grad_()
        full = torch.diag_embed(cov)
    w = torch.randn(5, 2, dtype=dt)
    got = gaussian_component_log_prob(x, means, cov, cov_type)
    ref = _naive_component_log_prob(x, means, full)
    tol = TOL[dt] * 10
    torch.testing.assert_close(got, ref, atol=tol, rtol=tol)
    g1 = torch.autograd.grad((got * w).sum(), (x, means, cov))
    g2 = torch.autograd.grad((ref * w).sum(), (x, means, cov))
    for a_, b_ in zip(g1, g2, strict=True):
        torch.testing.assert_close(a_, b_, atol=tol * 10, rtol=tol * 10)


@pytest.mark.parametrize("cov_type", ["full", "diag"])
def test_em_recovers_known_mixture(float_dtype, cov_type):
    dt = float_dtype
    g = torch.Generator().manual_seed(0)
    means = torch.tensor([[-4.0, 0.0], [4.0, 1.0], [0.0, 6.0]], dtype=dt)
    std = torch.tensor([[0.5, 1.0], [1.0, 0.4], [0.7, 0.7]], dtype=dt)
    weights = torch.tensor([0.5, 0.3, 0.2], dtype=dt)
    n = 6000
    k = torch.multinomial(weights, n, replacement=True, generator=g)
    x = means[k] + std[k] * torch.randn(n, 2, generator=g, dtype=dt)
    fit = fit_gaussian_mixture(x, 3, cov_type, generator=torch.Generator().manual_seed(1))
    order = torch.cdist(means, fit.means).argmin(1)
    assert sorted(order.tolist()) == [0, 1, 2]
    torch.testing.assert_close(fit.means[order], means, atol=0.1, rtol=0)
    torch.testing.assert_close(fit.weights[order], weights, atol=0.03, rtol=0)
    var = torch.diagonal(fit.full_covariances(), dim1=-2, dim2=-1)[order]
    torch.testing.assert_close(var, std**2, atol=0.1, rtol=0.15)
    assert fit.converged and fit.n_iter >= 1
    # The fitted likelihood is at least the true one, up to sampling noise.
    true_ll = torch.logsumexp(
        gaussian_component_log_prob(x, means, torch.diag_embed(std**2), "full")
        + torch.log(weights),
        1,
    ).mean()
    assert fit.log_likelihood >= float(true_ll) - 1e-3


def test_em_k1_is_the_sample_moments():
    x = torch.randn(500, 3, dtype=torch.float64) @ torch.tensor(
        [[1.0, 0.5, 0.0], [0.0, 1.0, 0.2], [0.0, 0.0, 0.3]], dtype=torch.float64
    )
    fit = fit_gaussian_mixture(x, 1, "full", reg_covar=0.0)
    torch.testing.assert_close(fit.means[0], x.mean(0))
    torch.testing.assert_close(fit.covariances[0], torch.cov(x.t(), correction=0))


def test_bad_input():
    x = torch.randn(10, 2)
    with pytest.raises(ValueError, match="covariance_type"):
        fit_gaussian_mixture(x, 2, "spherical")
    with pytest.raises(ValueError, match="n_components"):
        fit_gaussian_mixture(x, 11)
    with pytest.raises(ValueError, match="NaN"):
        fit_gaussian_mixture(torch.full((10, 2), float("nan")), 2)
    with pytest.raises(ValueError, match="same D"):
        gaussian_component_log_prob(x, torch.zeros(2, 3), torch.ones(2, 3), "diag")


@pytest.mark.parametrize("cov_type", ["full", "diag"])
def test_mixture_log_prob_matches_naive(float_dtype, cov_type):
    dt = float_dtype
    g = torch.Generator().manual_seed(2)
    x = torch.randn(6, 3, generator=g, dtype=dt, requires_grad=True)
    means = torch.randn(2, 3, generator=g, dtype=dt)
    weights = torch.tensor([0.3, 0.7], dtype=dt)
    if cov_type == "full":
        a = torch.randn(2, 3, 3, generator=g, dtype=dt)
        cov = a @ a.transpose(-1, -2) + torch.eye(3, dtype=dt)
        full = cov
    else:
        cov = torch.rand(2, 3, generator=g, dtype=dt) + 0.5
        full = torch.diag_embed(cov)
    got = gaussian_mixture_log_prob(x, weights, means, cov, cov_type)
    comp = _naive_component_log_prob(x, means, full)
    ref = torch.log(sum(weights[k] * torch.exp(comp[:, k]) for k in range(2)))
    tol = TOL[dt] * 10
    torch.testing.assert_close(got, ref, atol=tol, rtol=tol)
    g1 = torch.autograd.grad(got.sum(), x)[0]
    g2 = torch.autograd.grad(ref.sum(), x)[0]
    torch.testing.assert_close(g1, g2, atol=tol, rtol=tol)


@pytest.mark.parametrize("cov_type", ["full", "diag"])
def test_sampling_matches_the_mixture_moments(cov_type):
    dt = torch.float64
    weights = torch.tensor([0.2, 0.8], dtype=dt)
    means = torch.tensor([[-3.0, 0.0], [2.0, 1.0]], dtype=dt)
    if cov_type == "full":
        cov = torch.tensor([[[1.0, 0.6], [0.6, 0.5]], [[0.3, -0.1], [-0.1, 0.8]]], dtype=dt)
        full = cov
    else:
        cov = torch.tensor([[1.0, 0.5], [0.3, 0.8]], dtype=dt)
        full = torch.diag_embed(cov)
    n = 40000
    x, comp = sample_gaussian_mixture(
        n, weights, means, cov, cov_type, generator=torch.Generator().manual_seed(0)
    )
    assert x.shape == (n, 2) and x.dtype == dt and comp.shape == (n,)
    frac = torch.bincount(comp, minlength=2).to(dt) / n
    torch.testing.assert_close(frac, weights, atol=0.01, rtol=0)
    for k in range(2):
        xk = x[comp == k]
        torch.testing.assert_close(xk.mean(0), means[k], atol=0.05, rtol=0)
        torch.testing.assert_close(torch.cov(xk.t()), full[k], atol=0.05, rtol=0)
    # the mixture's overall mean and covariance
    mean = (weights[:, None] * means).sum(0)
    second = sum(weights[k] * (full[k] + torch.outer(means[k], means[k])) for k in range(2))
    torch.testing.assert_close(x.mean(0), mean, atol=0.05, rtol=0)
    torch.testing.assert_close(torch.cov(x.t(), correction=0), second - torch.outer(mean, mean),
                               atol=0.1, rtol=0)  # fmt: skip
    # same seed, same draws
    again, _ = sample_gaussian_mixture(
        n, weights, means, cov, cov_type, generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(x, again)


def test_fit_methods_sample_and_log_prob():
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(300, 2, generator=g) - 3, torch.randn(300, 2, generator=g) + 3])
    fit = fit_gaussian_mixture(x, 2, "diag", generator=torch.Generator().manual_seed(1))
    assert abs(float(fit.log_prob(x).mean()) - fit.log_likelihood) < 1e-5
    draws, comp = fit.sample(50, generator=torch.Generator().manual_seed(3))
    assert draws.shape == (50, 2) and int(comp.max()) <= 1


def test_mixture_bad_input():
    w, m = torch.ones(2) / 2, torch.zeros(2, 3)
    with pytest.raises(ValueError, match="weights must be"):
        gaussian_mixture_log_prob(torch.zeros(4, 3), torch.ones(3), m, torch.ones(2, 3), "diag")
    with pytest.raises(ValueError, match="diag covariances must have shape"):
        sample_gaussian_mixture(5, w, m, torch.ones(2, 3, 3), "diag")
    with pytest.raises(ValueError, match="n must be"):
        sample_gaussian_mixture(-1, w, m, torch.ones(2, 3), "diag")
    with pytest.raises(ValueError, match="covariance_type"):
        sample_gaussian_mixture(5, w, m, torch.ones(2, 3), "spherical")
    with pytest.raises(ValueError, match="positive sum"):
        sample_gaussian_mixture(5, torch.zeros(2), m, torch.ones(2, 3), "diag")


def test_fit_is_translation_invariant_far_from_the_origin():
    """The k-means++ start uses exact distances (cdist's default matrix-product formula
    lost the clusters of float32 points near 3000 and collapsed a component)."""
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0], [1, 0], [0, 1], [1, 1]])
    x = torch.cat([torch.randn(100, 2, generator=g) * 0.05 + c for c in centres])
    near = fit_gaussian_mixture(x, 4, max_iter=1, generator=torch.Generator().manual_seed(1))
    far = fit_gaussian_mixture(x + 3000, 4, max_iter=1, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(far.means - 3000, near.means, atol=2e-3, rtol=0)
    torch.testing.assert_close(far.weights, near.weights, atol=1e-4, rtol=0)


@pytest.mark.parametrize("cov_type", ["full", "diag"])
def test_per_point_components_are_each_points_own_mixture(cov_type):
    dt = torch.float64
    g = torch.Generator().manual_seed(4)
    x = torch.randn(4, 3, generator=g, dtype=dt)
    means = torch.randn(4, 2, 3, generator=g, dtype=dt)
    if cov_type == "full":
        a = torch.randn(4, 2, 3, 3, generator=g, dtype=dt)
        cov = a @ a.transpose(-1, -2) + torch.eye(3, dtype=dt)
    else:
        cov = torch.rand(4, 2, 3, generator=g, dtype=dt) + 0.5
    weights = torch.tensor([0.4, 0.6], dtype=dt)
    got = gaussian_mixture_log_prob(x, weights, means, cov, cov_type)
    for n in range(4):
        one = gaussian_mixture_log_prob(x[n : n + 1], weights, means[n], cov[n], cov_type)
        torch.testing.assert_close(got[n : n + 1], one)
    with pytest.raises(ValueError, match="and N"):
        gaussian_component_log_prob(x[:3], means, cov, cov_type)


def test_mixture_density_normalised_and_moments():
    torch.set_default_dtype(torch.float64)
    try:
        mix = GaussianMixture(
            [[0.0, 1.0], [2.0, -1.0]],
            [[[1.0, 0.3], [0.3, 0.5]], [[0.4, 0.0], [0.0, 0.9]]],
            [0.3, 0.7],
        )
        g = torch.linspace(-8, 10, 361)
        X, Y = torch.meshgrid(g, g, indexing="ij")
        p = mix.log_prob(torch.stack([X.ravel(), Y.ravel()], -1)).exp()
        assert float(p.sum() * (g[1] - g[0]) ** 2) == pytest.approx(1.0, abs=1e-6)
        s = mix.sample(20000, torch.Generator().manual_seed(0))
        torch.testing.assert_close(s.mean(0), mix.mean(), atol=0.04, rtol=0)
        torch.testing.assert_close(torch.cov(s.T), mix.covariance(), atol=0.06, rtol=0)
        # the diffused density at t -> 0 is the density itself; at t = 1 close to N(0, I)
        x = s[:5]
        sde = _VP()
        torch.testing.assert_close(mix.diffused_log_prob(x, torch.zeros(5), sde), mix.log_prob(x))
        std = -0.5 * x.pow(2).sum(1) - np.log(2 * np.pi)
        torch.testing.assert_close(
            mix.diffused_log_prob(x, torch.ones(5), sde), std, atol=0.05, rtol=0
        )
    finally:
        torch.set_default_dtype(torch.float32)


def test_gaussian_mixture_object_is_the_functions_and_errors():
    mix = GaussianMixture([[0.0, 1.0], [2.0, -1.0]], [0.5, 2.0], [0.3, 0.7], dtype=torch.float64)
    x = torch.randn(5, 2, dtype=torch.float64)
    full = mix.covs
    assert full.shape == (2, 2, 2) and torch.equal(full[1], 2.0 * torch.eye(2, dtype=torch.float64))
    assert torch.equal(
        mix.log_prob(x), gaussian_mixture_log_prob(x, mix.weights, mix.means, full, "full")
    )
    draws = mix.sample(7, torch.Generator().manual_seed(1))
    again, _ = sample_gaussian_mixture(
        7, mix.weights, mix.means, full, generator=torch.Generator().manual_seed(1)
    )
    assert torch.equal(draws, again)
    assert mix.sample(0).shape == (0, 2)
    with pytest.raises(ValueError, match="weights"):
        GaussianMixture([[0.0], [1.0]], 1.0, [1.0, -1.0])
    with pytest.raises(ValueError, match="covs"):
        GaussianMixture([[0.0, 0.0]], torch.ones(2, 2, 2))
