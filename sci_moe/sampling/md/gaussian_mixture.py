"""Gaussian mixtures: the density and its Boltzmann energy, in one place.

* :class:`GaussianMixture`: :math:`p(x) = \\sum_k w_k N(x; \\mu_k, \\Sigma_k)` on ``(B, D)``
  points, with exact samples and the exact VP/VE-diffused density
  :math:`p_t = \\sum_k w_k N(m_t\\mu_k, m_t^2\\Sigma_k + \\sigma_t^2 I)` (the ground truth of
  the energy-diffusion tests; :class:`sci_moe.sampling.diffusion.DiffusedMixtureEnergy` is
  its energy model);
* :class:`GaussianMixturePotential`: :math:`E(x) = -kT \\log p(x)` as an MD
  :class:`~sci_moe.sampling.md.potentials.Potential` of walker positions ``(W, N, D)``
  (:meth:`GaussianMixture.potential` makes one from a mixture).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from .potentials import Potential, _check_kT

__all__ = ["GaussianMixture", "GaussianMixturePotential"]


class GaussianMixture:
    """Gaussian mixture :math:`p(x) = \\sum_k w_k N(x; \\mu_k, \\Sigma_k)` in ``D`` dims.

    Parameters
    ----------
    means : array-like, shape (K, D)
    covs : array-like, shape (K, D, D), or (K,) / scalar for isotropic components
    weights : array-like, shape (K,)
        Non-negative, normalised internally.
    dtype : torch.dtype, optional
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

    def _log_prob(self, x, means, covs):
        # x (B, D); means (B or 1, K, D); covs (B or 1, K, D, D)
        L = torch.linalg.cholesky(covs)
        diff = (x.unsqueeze(1) - means).unsqueeze(-1)
        sol = torch.linalg.solve_triangular(L, diff, upper=False).squeeze(-1)
        logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
        D = x.shape[-1]
        lp = -0.5 * sol.pow(2).sum(-1) - 0.5 * logdet - 0.5 * D * math.log(2 * math.pi)
        return torch.logsumexp(lp + torch.log(self.weights.to(x)), dim=1)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Exact log-density, shape (B,), of ``x`` (B, D)."""
        return self._log_prob(x, self.means.to(x).unsqueeze(0), self.covs.to(x).unsqueeze(0))

    def diffused_log_prob(self, x: torch.Tensor, t: torch.Tensor, sde) -> torch.Tensor:
        """Exact log-density of the diffused marginal ``p_t`` at ``x`` (B, D), ``t`` (B,)."""
        m, s = sde.marginal(t)
        m = m.to(x).reshape(-1, 1, 1)
        s2 = s.to(x).pow(2).reshape(-1, 1, 1, 1)
        means = m * self.means.to(x).unsqueeze(0)
        eye = torch.eye(self.dim, dtype=x.dtype, device=x.device)
        covs = m.unsqueeze(-1) ** 2 * self.covs.to(x).unsqueeze(0) + s2 * eye
        return self._log_prob(x, means, covs)

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` exact samples, shape (n, D)."""
        k = torch.multinomial(self.weights, n, replacement=True, generator=generator)
        z = torch.randn(n, self.dim, generator=generator, dtype=self.means.dtype)
        L = torch.linalg.cholesky(self.covs)[k]
        return self.means[k] + (L @ z.unsqueeze(-1)).squeeze(-1)

    def mean(self) -> torch.Tensor:
        """Mixture mean, shape (D,)."""
        return (self.weights.unsqueeze(-1) * self.means).sum(0)

    def potential(self, kT: float = 1.0, n_particles: int = 1) -> GaussianMixturePotential:
        """The Boltzmann energy :math:`E = -kT \\log p` of this mixture (float64)."""
        return GaussianMixturePotential(
            self.means.double(), self.covs.double(), self.weights.double(), kT, n_particles
        )

    def covariance(self) -> torch.Tensor:
        """Mixture covariance, shape (D, D)."""
        mu = self.mean()
        d = self.means - mu
        outer = d.unsqueeze(-1) * d.unsqueeze(-2)
        return (self.weights.reshape(-1, 1, 1) * (self.covs + outer)).sum(0)


class GaussianMixturePotential(Potential):
    """Energy of a Gaussian mixture, :math:`E(x) = -kT \\log p(x)`, so :math:`e^{-E/kT} = p`.

    .. math::

        p(x) = \\sum_k w_k\\, \\mathcal{N}(x; \\mu_k, \\Sigma_k)

    Parameters
    ----------
    means : Tensor or sequence, shape (K, D)
    covariances : float, Tensor of shape (K,) or (K, D, D)
        Isotropic variance (scalar or one per component) or full covariance matrices.
    weights : Tensor or sequence, shape (K,), optional
        Mixture weights (normalised here); equal by default.
    kT : float
        The temperature at which ``exp(-E/kT)`` is exactly ``p``.
    n_particles : int
        Independent particles, each distributed as ``p``.
    """

    normalized = True

    def __init__(
        self,
        means: Tensor | Sequence,
        covariances: float | Tensor | Sequence = 1.0,
        weights: Tensor | Sequence | None = None,
        kT: float = 1.0,
        n_particles: int = 1,
    ) -> None:
        means = torch.as_tensor(means, dtype=torch.float64)
        if means.ndim != 2:
            raise ValueError(f"means must have shape (K, D), got {tuple(means.shape)}")
        k, d = means.shape
        super().__init__(d, n_particles)
        _check_kT(kT)
        cov = torch.as_tensor(covariances, dtype=torch.float64)
        if cov.ndim == 0:
            cov = cov.expand(k)
        if cov.ndim == 1:
            if cov.shape != (k,):
                raise ValueError(f"covariances of shape (K,) need K={k}, got {tuple(cov.shape)}")
            cov = cov[:, None, None] * torch.eye(d, dtype=torch.float64)
        if cov.shape != (k, d, d):
            raise ValueError(
                f"covariances must be scalar, (K,) or (K, D, D), got {tuple(cov.shape)}"
            )
        if weights is None:
            weights = torch.full((k,), 1.0 / k, dtype=torch.float64)
        w = torch.as_tensor(weights, dtype=torch.float64)
        if w.shape != (k,) or bool((w < 0).any()) or float(w.sum()) <= 0:
            raise ValueError(f"weights must be K={k} non-negative numbers with a positive sum")
        try:
            chol = torch.linalg.cholesky(cov)
        except RuntimeError as err:
            raise ValueError("covariances must be symmetric positive definite") from err
        self.kT = float(kT)
        self.register_buffer("means", means)
        self.register_buffer("covariances", cov)
        self.register_buffer("weights", w / w.sum())
        self.register_buffer("precisions", torch.cholesky_inverse(chol))
        self.register_buffer("chol", chol)
        logdet = 2 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
        self.register_buffer(
            "log_norm", torch.log(self.weights) - 0.5 * (d * math.log(2 * math.pi) + logdet)
        )

    def _component_logp(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Per-component log(w_k N_k), shape (W, N, K), and x - mu, shape (W, N, K, D)."""
        diff = x[..., None, :] - self.means.to(x.dtype)
        prec = self.precisions.to(x.dtype)
        maha = torch.einsum("...kd,kde,...ke->...k", diff, prec, diff)
        return self.log_norm.to(x.dtype) - 0.5 * maha, diff

    def particle_log_prob(self, x: Tensor) -> Tensor:
        """``log p`` of each particle, shape ``(W, N)``."""
        return torch.logsumexp(self._component_logp(x)[0], dim=-1)

    def energy_per_particle(self, x: Tensor) -> Tensor:
        return -self.kT * self.particle_log_prob(x)

    def analytic_forces(self, x: Tensor) -> Tensor:
        # F = kT * grad log p = -kT * sum_k r_k P_k (x - mu_k), r_k the responsibilities.
        lp, diff = self._component_logp(x)
        r = torch.softmax(lp, dim=-1)
        pd = torch.einsum("kde,...ke->...kd", self.precisions.to(x.dtype), diff)
        return -self.kT * (r[..., None] * pd).sum(-2)

    def log_prob(self, x: Tensor, kT: float | None = None) -> Tensor:
        """Exact ``log p(x)`` at the mixture's own ``kT`` (shape ``(W,)``).

        At another ``kT'`` the Boltzmann density is :math:`p^{kT/kT'}` and is not normalised
        in closed form; this returns ``kT/kT' * log p`` then (``normalized`` only for ``kT``).
        """
        lp = self.particle_log_prob(x).sum(-1)
        if kT is None or float(kT) == self.kT:
            return lp
        _check_kT(kT)
        return lp * (self.kT / float(kT))

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """Exact i.i.d. samples of shape ``(n, N, D)`` (float64)."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        m = n * self.n_particles
        comp = torch.multinomial(self.weights, m, replacement=True, generator=generator)
        z = torch.randn(m, self.dim, dtype=torch.float64, generator=generator)
        x = self.means[comp] + torch.einsum("mde,me->md", self.chol[comp], z)
        return x.reshape(n, self.n_particles, self.dim)
