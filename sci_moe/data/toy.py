"""Toy systems with exact densities for energy-based diffusion (ScoreMD's toys, Mueller-Brown).

* :class:`GaussianMixture`: exact density, exact samples, and the exact VP/VE-diffused
  density :math:`p_t = \\sum_k w_k N(m_t\\mu_k, m_t^2\\Sigma_k + \\sigma_t^2 I)`, which
  :class:`DiffusedMixtureEnergy` exposes as an energy model ``E(x, t) = -log p_t(x)``
  (the ground truth for the Fokker-Planck and sampler tests).
* ScoreMD's toys: :func:`two_mode_mixture_2d` (0.2 N((-5,-5), I) + 0.8 N((5,5), I)) and
  :func:`two_mode_mixture_1d` (N(-5,1)/2 + N(5,1)/2).
* :func:`muller_brown_samples`: long Langevin runs on the Mueller-Brown potential with the
  paper's settings (kT = 23, mass 0.5, friction 1, dt 5e-3, 50 steps per sample),
  integrated with :class:`sci_moe.sampling.md.integrators.LangevinBAOAB`, and
  :func:`muller_brown_density` (the exact Boltzmann histogram on a grid).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

__all__ = [
    "MULLER_BROWN_BOX",
    "DiffusedMixtureEnergy",
    "GaussianMixture",
    "muller_brown_density",
    "muller_brown_samples",
    "two_mode_mixture_1d",
    "two_mode_mixture_2d",
]

#: Plotting / histogram box of ScoreMD's Mueller-Brown evaluation: (x range, y range).
MULLER_BROWN_BOX = ((-1.8, 1.1), (-0.5, 2.0))


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

    def covariance(self) -> torch.Tensor:
        """Mixture covariance, shape (D, D)."""
        mu = self.mean()
        d = self.means - mu
        outer = d.unsqueeze(-1) * d.unsqueeze(-2)
        return (self.weights.reshape(-1, 1, 1) * (self.covs + outer)).sum(0)


class DiffusedMixtureEnergy(nn.Module):
    """Exact energy model ``E(x, t) = -log p_t(x) - offset(t)`` of a diffused mixture.

    Parameters
    ----------
    mixture : GaussianMixture
    sde : SDE
    event_shape : sequence of int, optional
        Shape of one sample (default ``(1, D)``; positions are ``(B, 1, D)`` like
        particle systems). ``x`` is flattened to ``(B, D)`` internally.
    code_offset : bool
        Subtract ``(D - 1) log m_t`` from ``log p_t``: the time-dependent constant that
        makes the residual of ScoreMD's code (``+1`` instead of ``+D``) vanish.
    """

    conservative = True

    def __init__(
        self,
        mixture: GaussianMixture,
        sde,
        event_shape: Sequence[int] | None = None,
        code_offset: bool = False,
    ) -> None:
        super().__init__()
        self.mixture, self.sde, self.code_offset = mixture, sde, code_offset
        self.event_shape = tuple(event_shape or (1, mixture.dim))
        if math.prod(self.event_shape) != mixture.dim:
            raise ValueError(f"event_shape {self.event_shape} does not hold {mixture.dim} values")

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Energy (B,) at positions ``x`` (B, \\*event_shape) and times ``t`` (B,)."""
        lp = self.mixture.diffused_log_prob(x.flatten(1), t, self.sde)
        if self.code_offset:
            lp = lp + (self.mixture.dim - 1) * self.sde.log_mean_coeff(t)
        return -lp

    def energy(self, x, t):
        """Alias of ``forward``."""
        return self(x, t)

    def score(self, x, t, create_graph: bool = False):
        """Exact score ``grad log p_t``."""
        from ..sampling.diffusion.networks import score_from_energy

        return score_from_energy(self, x, t, create_graph)


def two_mode_mixture_2d(dtype=None) -> GaussianMixture:
    """ScoreMD's 2-D toy: 0.2 N((-5,-5), I) + 0.8 N((5,5), I) (kT = 1)."""
    return GaussianMixture([[-5.0, -5.0], [5.0, 5.0]], 1.0, [0.2, 0.8], dtype=dtype)


def two_mode_mixture_1d(dtype=None) -> GaussianMixture:
    """ScoreMD's 1-D toy: N(-5, 1)/2 + N(5, 1)/2 (kT = 1)."""
    return GaussianMixture([[-5.0], [5.0]], 1.0, [0.5, 0.5], dtype=dtype)


def muller_brown_samples(
    n_samples: int = 100_000,
    n_walkers: int = 100,
    kT: float = 23.0,
    mass: float = 0.5,
    friction: float = 1.0,
    dt: float = 5e-3,
    stride: int = 50,
    burn_in: int = 2000,
    start: tuple[float, float] = (-0.558, 1.442),
    seed: int = 0,
    progress: bool = True,
) -> np.ndarray:
    """Mueller-Brown samples from long Langevin (BAOAB) runs with ScoreMD's settings.

    ``n_walkers`` independent trajectories start at ``start`` (ScoreMD's start point), run
    ``burn_in`` steps, then store every ``stride``-th step until ``n_samples`` samples are
    collected. Units are reduced: energies in the potential's units, ``kT`` given
    explicitly (the integrator's temperature is ``kT / k_B``).

    Parameters
    ----------
    n_samples : int
        Total samples (rounded up to a multiple of ``n_walkers``).
    n_walkers : int
        Independent trajectories integrated as one batch.
    kT, mass, friction, dt, stride : float / int
        ScoreMD: 23, 0.5, 1, 5e-3, 50.
    burn_in : int
        Steps discarded at the start.
    start : (float, float)
    seed : int
    progress : bool
        tqdm progress bar.

    Returns
    -------
    numpy.ndarray, shape (n_samples, 2)
    """
    from tqdm.auto import tqdm

    from ..sampling.md.forces import PotentialForces
    from ..sampling.md.integrators import LangevinBAOAB
    from ..sampling.md.potentials import MuellerBrown

    if n_samples < 1 or n_walkers < 1 or stride < 1 or burn_in < 0:
        raise ValueError("n_samples, n_walkers, stride must be >= 1 and burn_in >= 0")
    gen = torch.Generator().manual_seed(seed)
    pot = MuellerBrown()
    provider = PotentialForces(pot, torch.tensor([mass], dtype=torch.float64))
    integ = LangevinBAOAB(dt, friction_per_ps=friction, kT=kT)
    x0 = torch.tensor(start, dtype=torch.float64).expand(n_walkers, 1, 2).clone()
    state = integ.init_state(provider, x0, gen)
    n_frames = -(-n_samples // n_walkers)
    state = integ.step(state, provider, gen, n_steps=burn_in) if burn_in else state
    out = np.empty((n_frames, n_walkers, 2))
    for i in tqdm(range(n_frames), disable=not progress, desc="Mueller-Brown Langevin"):
        state = integ.step(state, provider, gen, n_steps=stride)
        out[i] = state.positions[:, 0].detach().numpy()
    return out.transpose(1, 0, 2).reshape(-1, 2)[:n_samples]


def muller_brown_density(
    kT: float = 23.0, bins: int = 100, box=MULLER_BROWN_BOX, oversample: int = 8
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact Boltzmann bin probabilities of Mueller-Brown on a ``bins x bins`` grid.

    Each bin's mass is integrated with ``oversample^2`` midpoints; mass outside ``box``
    is ignored (normalised inside the box).

    Returns
    -------
    prob : numpy.ndarray, shape (bins, bins)
        ``prob[i, j]`` for x-bin ``i`` and y-bin ``j``, summing to 1.
    x_edges, y_edges : numpy.ndarray, shape (bins + 1,)
    """
    from ..sampling.md.potentials import MuellerBrown

    (x0, x1), (y0, y1) = box
    xe, ye = np.linspace(x0, x1, bins + 1), np.linspace(y0, y1, bins + 1)
    n = bins * oversample
    xc = x0 + (np.arange(n) + 0.5) * (x1 - x0) / n
    yc = y0 + (np.arange(n) + 0.5) * (y1 - y0) / n
    X, Y = np.meshgrid(xc, yc, indexing="ij")
    pts = torch.tensor(np.stack([X.ravel(), Y.ravel()], -1), dtype=torch.float64)
    with torch.no_grad():
        e = MuellerBrown()(pts.view(-1, 1, 2)).numpy().reshape(n, n)
    w = np.exp(-(e - e.min()) / kT)
    prob = w.reshape(bins, oversample, bins, oversample).sum((1, 3))
    return prob / prob.sum(), xe, ye
