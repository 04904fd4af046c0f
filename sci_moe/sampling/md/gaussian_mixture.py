"""The Boltzmann energy of a Gaussian mixture as an MD potential.

:class:`GaussianMixturePotential`: :math:`E(x) = -kT \\log p(x)` as an MD
:class:`~sci_moe.sampling.md.potentials.Potential` of walker positions ``(W, N, D)``
(:meth:`GaussianMixturePotential.from_mixture` makes one from a
:class:`sci_moe.stats.GaussianMixture`, the density and sampler).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from ...stats import GaussianMixture
from .potentials import Potential, _check_kT

__all__ = ["GaussianMixturePotential"]


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

    @classmethod
    def from_mixture(
        cls, mixture: GaussianMixture, kT: float = 1.0, n_particles: int = 1
    ) -> GaussianMixturePotential:
        """The Boltzmann energy :math:`E = -kT \\log p` of ``mixture`` (float64).

        Parameters
        ----------
        mixture : sci_moe.stats.GaussianMixture
        kT : float
        n_particles : int
        """
        return cls(
            mixture.means.double(), mixture.covs.double(), mixture.weights.double(), kT, n_particles
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
