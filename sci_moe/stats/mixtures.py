"""Gaussian mixtures: per-component log-densities, EM fit, mixture log-likelihood, sampling.

* :func:`gaussian_component_log_prob`: per-component Gaussian log-densities
  :math:`\\log N(x_n; \\mu_k, \\Sigma_k)`, shape ``(N, K)``, for diagonal or full
  covariances (differentiable in ``x``, ``means`` and ``covariances``);
* :func:`gaussian_mixture_log_prob`: the mixture log-likelihood
  :math:`\\log \\sum_k \\pi_k N(x_n; \\mu_k, \\Sigma_k)`, shape ``(N,)``;
* :func:`fit_gaussian_mixture`: expectation-maximisation (EM) fit of a ``K``-component
  Gaussian mixture to points ``(N, D)``, k-means++ initialised, with a covariance floor.
  It returns plain tensors in :class:`GaussianMixtureFit` (a :class:`GaussianMixture`
  wraps them as a density and sampler);
* :func:`sample_gaussian_mixture`: draws from a mixture (component by ``pi``, then
  ``mu + L eps``);
* :class:`GaussianMixture`: a mixture as an object over these functions, with its moments
  and the exact density of the mixture diffused by a VP/VE SDE,
  :math:`p_t = \\sum_k w_k N(m_t\\mu_k, m_t^2\\Sigma_k + \\sigma_t^2 I)`.

Used by CoGaMiD (Zhu et al., NeurIPS 2025: per-class feature mixtures replayed as
pseudo-features), by the energy-diffusion toys and their ground truth
(:class:`sci_moe.sampling.diffusion.DiffusedMixtureEnergy`), by the MD potential
:class:`sci_moe.sampling.md.gaussian_mixture.GaussianMixturePotential`, and by any field
that needs a mixture density.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "GaussianMixture",
    "GaussianMixtureFit",
    "fit_gaussian_mixture",
    "gaussian_component_log_prob",
    "gaussian_mixture_log_prob",
    "sample_gaussian_mixture",
]

_COV_TYPES = ("full", "diag")


def _check_cov_type(covariance_type: str) -> None:
    if covariance_type not in _COV_TYPES:
        raise ValueError(f"covariance_type must be one of {_COV_TYPES}, got {covariance_type!r}")


def gaussian_component_log_prob(
    x: Tensor, means: Tensor, covariances: Tensor, covariance_type: str = "full"
) -> Tensor:
    """Log-density of every point under every Gaussian component.

    .. math::

        \\ell_{nk} = -\\tfrac12 (x_n-\\mu_k)^\\top \\Sigma_k^{-1} (x_n-\\mu_k)
                    - \\tfrac12 \\log\\det \\Sigma_k - \\tfrac{D}{2}\\log 2\\pi

    The components may also be given per point (``means`` of shape ``(N, K, D)``), e.g. a
    mixture diffused to a different time for every point
    (:meth:`GaussianMixture.diffused_log_prob`); then ``mu_k, Sigma_k`` above are those
    of point ``n``.

    Parameters
    ----------
    x : Tensor, shape (N, D)
    means : Tensor, shape (K, D) or (N, K, D)
    covariances : Tensor
        For ``"full"``: shape ``(K, D, D)`` (``(N, K, D, D)`` with per-point means); for
        ``"diag"`` (variances): the shape of ``means``.
    covariance_type : {"full", "diag"}

    Returns
    -------
    Tensor, shape (N, K)
    """
    _check_cov_type(covariance_type)
    per_point = means.dim() == 3
    if (
        x.dim() != 2
        or means.dim() not in (2, 3)
        or x.shape[1] != means.shape[-1]
        or (per_point and means.shape[0] != x.shape[0])
    ):
        raise ValueError(
            f"x must be (N, D) and means (K, D) or (N, K, D) with the same D (and N), got "
            f"{tuple(x.shape)} and {tuple(means.shape)}"
        )
    d = x.shape[1]
    const = 0.5 * d * math.log(2 * math.pi)
    diff = x.unsqueeze(1) - (means if per_point else means.unsqueeze(0))  # (N, K, D)
    if covariance_type == "diag":
        if covariances.shape != means.shape:
            raise ValueError(f"diag covariances must be {tuple(means.shape)} like the means")
        var = covariances if per_point else covariances.unsqueeze(0)
        maha = (diff.pow(2) / var).sum(-1)
        logdet = torch.log(covariances).sum(-1)
    else:
        shape = (*means.shape, d)
        if covariances.shape != shape:
            raise ValueError(f"full covariances must be {shape}: (K, D, D) or (N, K, D, D)")
        chol = torch.linalg.cholesky(covariances)  # (K, D, D) or (N, K, D, D)
        sol = torch.linalg.solve_triangular(
            chol if per_point else chol.unsqueeze(0), diff.unsqueeze(-1), upper=False
        ).squeeze(-1)
        maha = sol.pow(2).sum(-1)
        logdet = 2 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
    return -0.5 * maha - 0.5 * logdet - const


@dataclass
class GaussianMixtureFit:
    """Result of :func:`fit_gaussian_mixture`.

    Attributes
    ----------
    weights : Tensor, shape (K,)
    means : Tensor, shape (K, D)
    covariances : Tensor, shape (K, D, D) (``"full"``) or (K, D) (``"diag"``)
    covariance_type : str
    log_likelihood : float
        Mean log-likelihood per point of the training data at the returned parameters.
    n_iter : int
        EM iterations run.
    converged : bool
        Whether the mean log-likelihood changed by less than ``tol`` before ``max_iter``.
    """

    weights: Tensor
    means: Tensor
    covariances: Tensor
    covariance_type: str
    log_likelihood: float
    n_iter: int
    converged: bool

    def full_covariances(self) -> Tensor:
        """Covariances as full matrices, shape (K, D, D)."""
        if self.covariance_type == "full":
            return self.covariances
        return torch.diag_embed(self.covariances)

    def log_prob(self, x: Tensor) -> Tensor:
        """Mixture log-density of ``x`` (N, D), shape (N,) (:func:`gaussian_mixture_log_prob`)."""
        return gaussian_mixture_log_prob(
            x, self.weights, self.means, self.covariances, self.covariance_type
        )

    def sample(self, n: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """``n`` draws and their components (:func:`sample_gaussian_mixture`)."""
        return sample_gaussian_mixture(
            n, self.weights, self.means, self.covariances, self.covariance_type, generator
        )


def _kmeans_pp(x: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    n = x.shape[0]
    first = torch.randint(n, (1,), generator=generator)
    centres = [x[first[0]]]
    d2 = (x - centres[0]).pow(2).sum(-1)
    for _ in range(1, k):
        p = d2 / d2.sum() if float(d2.sum()) > 0 else torch.full_like(d2, 1.0 / n)
        idx = torch.multinomial(p, 1, generator=generator)[0]
        centres.append(x[idx])
        d2 = torch.minimum(d2, (x - x[idx]).pow(2).sum(-1))
    return torch.stack(centres)


def _m_step(x: Tensor, resp: Tensor, covariance_type: str, reg_covar: float):
    nk = resp.sum(0) + 10 * torch.finfo(x.dtype).eps  # (K,)
    means = resp.t() @ x / nk.unsqueeze(-1)
    diff = x.unsqueeze(1) - means.unsqueeze(0)  # (N, K, D)
    if covariance_type == "diag":
        cov = (resp.unsqueeze(-1) * diff.pow(2)).sum(0) / nk.unsqueeze(-1) + reg_covar
    else:
        cov = torch.einsum("nk,nkd,nke->kde", resp, diff, diff) / nk.reshape(-1, 1, 1)
        cov = 0.5 * (cov + cov.transpose(-1, -2))
        cov = cov + reg_covar * torch.eye(x.shape[1], dtype=x.dtype, device=x.device)
    return nk / nk.sum(), means, cov


def fit_gaussian_mixture(
    x: Tensor,
    n_components: int,
    covariance_type: str = "full",
    max_iter: int = 100,
    tol: float = 1e-5,
    reg_covar: float = 1e-6,
    generator: torch.Generator | None = None,
) -> GaussianMixtureFit:
    """Fit a Gaussian mixture by expectation-maximisation.

    E-step: responsibilities
    :math:`r_{nk} = \\pi_k N(x_n;\\mu_k,\\Sigma_k) / \\sum_j \\pi_j N(x_n;\\mu_j,\\Sigma_j)`;
    M-step: :math:`N_k = \\sum_n r_{nk}`, :math:`\\pi_k = N_k/N`,
    :math:`\\mu_k = \\sum_n r_{nk} x_n / N_k`,
    :math:`\\Sigma_k = \\sum_n r_{nk}(x_n-\\mu_k)(x_n-\\mu_k)^\\top / N_k + \\epsilon I`
    (only the diagonal for ``"diag"``). Initialised by k-means++ seeding and hard
    nearest-centre responsibilities; stops when the mean log-likelihood per point changes by
    less than ``tol``. Runs without gradients.

    Parameters
    ----------
    x : Tensor, shape (N, D)
        Points; needs ``N >= n_components``.
    n_components : int
        ``K >= 1``.
    covariance_type : {"full", "diag"}
    max_iter : int
    tol : float
    reg_covar : float
        :math:`\\epsilon`, added to every variance (keeps components non-singular).
    generator : torch.Generator, optional
        Drives the k-means++ seeding (the only randomness).

    Returns
    -------
    GaussianMixtureFit
    """
    _check_cov_type(covariance_type)
    if x.dim() != 2:
        raise ValueError(f"x must have shape (N, D), got {tuple(x.shape)}")
    if n_components < 1 or x.shape[0] < n_components:
        raise ValueError(
            f"need 1 <= n_components <= N, got n_components={n_components}, N={x.shape[0]}; "
            "collect more points or lower n_components"
        )
    if max_iter < 1 or reg_covar < 0:
        raise ValueError("max_iter must be >= 1 and reg_covar >= 0")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x contains NaN or inf; clean the features before fitting")
    with torch.no_grad():
        x = x.detach()
        centres = _kmeans_pp(x, n_components, generator)
        # exact distances: cdist's matrix-product formula (its default above 25 points)
        # loses the small differences of points far from the origin
        nearest = torch.cdist(x, centres, compute_mode="donot_use_mm_for_euclid_dist").argmin(1)
        resp = torch.nn.functional.one_hot(nearest, n_components).to(x.dtype)
        weights, means, cov = _m_step(x, resp, covariance_type, reg_covar)
        prev = -math.inf
        converged = False
        n_iter = 0
        for it in range(1, max_iter + 1):
            n_iter = it
            logp = gaussian_component_log_prob(x, means, cov, covariance_type) + torch.log(weights)
            norm = torch.logsumexp(logp, dim=1, keepdim=True)
            ll = float(norm.mean())
            resp = torch.exp(logp - norm)
            weights, means, cov = _m_step(x, resp, covariance_type, reg_covar)
            if abs(ll - prev) < tol:
                converged = True
                break
            prev = ll
        logp = gaussian_component_log_prob(x, means, cov, covariance_type) + torch.log(weights)
        ll = float(torch.logsumexp(logp, dim=1).mean())
    return GaussianMixtureFit(weights, means, cov, covariance_type, ll, n_iter, converged)


def _check_mixture(weights: Tensor, means: Tensor, per_point: bool = False) -> None:
    if means.dim() not in ((2, 3) if per_point else (2,)) or weights.shape != means.shape[-2:-1]:
        raise ValueError(
            f"weights must be (K,) and means (K, D), got {tuple(weights.shape)} and "
            f"{tuple(means.shape)}"
        )


def gaussian_mixture_log_prob(
    x: Tensor,
    weights: Tensor,
    means: Tensor,
    covariances: Tensor,
    covariance_type: str = "full",
) -> Tensor:
    """Log-density of every point under a Gaussian mixture.

    .. math::

        \\log p(x_n) = \\log \\sum_k \\pi_k N(x_n; \\mu_k, \\Sigma_k)

    computed with ``logsumexp`` over :func:`gaussian_component_log_prob` (whose
    per-point components, ``means`` of shape ``(N, K, D)``, it accepts too).

    Parameters
    ----------
    x : Tensor, shape (N, D)
    weights : Tensor, shape (K,)
        Mixing weights :math:`\\pi_k` (positive, summing to one).
    means : Tensor, shape (K, D) or (N, K, D)
    covariances : Tensor
        Shape ``(K, D, D)`` for ``"full"`` or ``(K, D)`` for ``"diag"`` (with a leading
        ``N`` for per-point means).
    covariance_type : {"full", "diag"}

    Returns
    -------
    Tensor, shape (N,)

    Examples
    --------
    >>> lp = gaussian_mixture_log_prob(torch.zeros(1, 1), torch.ones(1), torch.zeros(1, 1),
    ...                                torch.ones(1, 1), "diag")
    >>> round(float(lp), 4)
    -0.9189
    """
    _check_mixture(weights, means, per_point=True)
    logp = gaussian_component_log_prob(x, means, covariances, covariance_type)
    return torch.logsumexp(logp + torch.log(weights), dim=1)


def sample_gaussian_mixture(
    n: int,
    weights: Tensor,
    means: Tensor,
    covariances: Tensor,
    covariance_type: str = "full",
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Draw ``n`` points from a Gaussian mixture.

    .. math::

        k \\sim \\mathrm{Categorical}(\\pi), \\qquad
        x = \\mu_k + L_k \\varepsilon, \\quad \\varepsilon \\sim N(0, I), \\quad
        L_k L_k^\\top = \\Sigma_k

    (``L_k = diag(sqrt(sigma^2_k))`` for ``"diag"``).

    Parameters
    ----------
    n : int
        Number of draws, ``>= 0``.
    weights : Tensor, shape (K,)
    means : Tensor, shape (K, D)
    covariances : Tensor, shape (K, D, D) (``"full"``) or (K, D) (``"diag"``)
    covariance_type : {"full", "diag"}
    generator : torch.Generator, optional
        Drives both the component choice (drawn from ``weights`` in their own floating
        dtype) and the Gaussian noise (on CPU).

    Returns
    -------
    x : Tensor, shape (n, D)
        In the dtype of ``means``.
    components : Tensor, shape (n,), int64
        The component of each draw.

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> x, k = sample_gaussian_mixture(4, torch.tensor([0.5, 0.5]), torch.zeros(2, 3),
    ...                                torch.ones(2, 3), "diag", generator=g)
    >>> x.shape, k.shape
    (torch.Size([4, 3]), torch.Size([4]))
    """
    _check_cov_type(covariance_type)
    _check_mixture(weights, means)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    K, d = means.shape
    expected = (K, d) if covariance_type == "diag" else (K, d, d)
    if covariances.shape != expected:
        raise ValueError(
            f"{covariance_type} covariances must have shape {expected}, "
            f"got {tuple(covariances.shape)}"
        )
    if not bool((weights >= 0).all()) or float(weights.sum()) <= 0:
        raise ValueError("weights must be >= 0 with a positive sum")
    if n == 0:
        return means.new_empty(0, d), torch.empty(0, dtype=torch.long, device=means.device)
    probs = weights if weights.is_floating_point() else weights.to(torch.float64)
    comp = torch.multinomial(probs, n, replacement=True, generator=generator)
    comp = comp.to(means.device)
    eps = torch.randn(n, d, generator=generator, dtype=means.dtype).to(means.device)
    if covariance_type == "diag":
        x = means[comp] + eps * covariances[comp].sqrt()
    else:
        chol = torch.linalg.cholesky(covariances)
        x = means[comp] + (chol[comp] @ eps.unsqueeze(-1)).squeeze(-1)
    return x, comp


class GaussianMixture:
    """Gaussian mixture :math:`p(x) = \\sum_k w_k N(x; \\mu_k, \\Sigma_k)` in ``D`` dims.

    The density, exact samples, the moments and the exact density of the mixture
    diffused by a VP/VE SDE, over :func:`gaussian_mixture_log_prob` and
    :func:`sample_gaussian_mixture` (full covariances).

    Parameters
    ----------
    means : array-like, shape (K, D)
    covs : array-like, shape (K, D, D), or (K,) / scalar for isotropic components
    weights : array-like, shape (K,)
        Non-negative, normalised internally.
    dtype : torch.dtype, optional

    Attributes
    ----------
    means : Tensor, shape (K, D)
    covs : Tensor, shape (K, D, D)
    weights : Tensor, shape (K,)
        Summing to one.

    Examples
    --------
    >>> mix = GaussianMixture([[-5.0], [5.0]], 1.0, [0.5, 0.5], dtype=torch.float64)
    >>> round(float(mix.log_prob(torch.tensor([[5.0]], dtype=torch.float64))), 4)
    -1.6121
    >>> mix.sample(3, torch.Generator().manual_seed(0)).shape
    torch.Size([3, 1])
    """

    def __init__(self, means, covs=1.0, weights=None, dtype=None) -> None:
        dtype = dtype or torch.get_default_dtype()
        self.means = torch.as_tensor(means, dtype=dtype)
        if self.means.dim() != 2:
            raise ValueError(f"means must have shape (K, D), got {tuple(self.means.shape)}")
        K, D = self.means.shape
        covs = torch.as_tensor(covs, dtype=dtype)
        if covs.dim() <= 1:
            covs = covs.reshape(-1, 1, 1).expand(K, 1, 1) * torch.eye(D, dtype=dtype)
        if covs.shape != (K, D, D):
            raise ValueError(f"covs must have shape ({K}, {D}, {D}), (K,) or be scalar")
        self.covs = covs.contiguous()
        w = (
            torch.full((K,), 1.0 / K, dtype=dtype)
            if weights is None
            else torch.as_tensor(weights, dtype=dtype)
        )
        if w.shape != (K,) or (w < 0).any() or w.sum() <= 0:
            raise ValueError(f"weights must be {K} non-negative numbers with a positive sum")
        self.weights = w / w.sum()

    @property
    def dim(self) -> int:
        """Dimension ``D``."""
        return self.means.shape[1]

    def log_prob(self, x: Tensor) -> Tensor:
        """Exact log-density, shape (B,), of ``x`` (B, D)."""
        return gaussian_mixture_log_prob(
            x, self.weights.to(x), self.means.to(x), self.covs.to(x), "full"
        )

    def diffused_log_prob(self, x: Tensor, t: Tensor, sde) -> Tensor:
        """Exact log-density of the diffused marginal ``p_t`` at ``x`` (B, D), ``t`` (B,).

        :math:`p_t = \\sum_k w_k N(m_t\\mu_k, m_t^2\\Sigma_k + \\sigma_t^2 I)` with
        ``(m_t, sigma_t) = sde.marginal(t)`` (any object with that method, e.g.
        :class:`sci_moe.sampling.diffusion.VPSDE`).
        """
        m, s = sde.marginal(t)
        m = m.to(x).reshape(-1, 1, 1)
        s2 = s.to(x).pow(2).reshape(-1, 1, 1, 1)
        means = m * self.means.to(x).unsqueeze(0)
        eye = torch.eye(self.dim, dtype=x.dtype, device=x.device)
        covs = m.unsqueeze(-1) ** 2 * self.covs.to(x).unsqueeze(0) + s2 * eye
        return gaussian_mixture_log_prob(x, self.weights.to(x), means, covs, "full")

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """``n`` exact samples, shape (n, D) (:func:`sample_gaussian_mixture`)."""
        return sample_gaussian_mixture(n, self.weights, self.means, self.covs, "full", generator)[0]

    def mean(self) -> Tensor:
        """Mixture mean, shape (D,)."""
        return (self.weights.unsqueeze(-1) * self.means).sum(0)

    def covariance(self) -> Tensor:
        """Mixture covariance, shape (D, D)."""
        mu = self.mean()
        d = self.means - mu
        outer = d.unsqueeze(-1) * d.unsqueeze(-2)
        return (self.weights.reshape(-1, 1, 1) * (self.covs + outer)).sum(0)
