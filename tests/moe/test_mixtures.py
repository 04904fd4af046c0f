"""Gaussian-mixture utilities of the core: naive log-density references with gradients
(f32/f64), EM recovers a known mixture, sampling matches the moments, the mixture
log-likelihood, bad input."""

import math

import pytest
import torch

from sci_moe.moe import (
    fit_gaussian_mixture,
    gaussian_component_log_prob,
    gaussian_mixture_log_prob,
    sample_gaussian_mixture,
)

TOL = {torch.float32: 1e-4, torch.float64: 1e-10}


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
