"""Toy systems with exact densities for energy-based diffusion (ScoreMD's toys, Mueller-Brown).

* ScoreMD's toys: :func:`two_mode_mixture_2d` (0.2 N((-5,-5), I) + 0.8 N((5,5), I)) and
  :func:`two_mode_mixture_1d` (N(-5,1)/2 + N(5,1)/2), each a
  :class:`sci_moe.stats.GaussianMixture` (exact density, exact samples and the exact
  VP/VE-diffused density
  :math:`p_t = \\sum_k w_k N(m_t\\mu_k, m_t^2\\Sigma_k + \\sigma_t^2 I)`, which
  :class:`DiffusedMixtureEnergy` (home: :mod:`sci_moe.sampling.diffusion`, re-exported)
  exposes as an energy model ``E(x, t) = -log p_t(x)``, the ground truth for the
  Fokker-Planck and sampler tests).
* :func:`muller_brown_samples`: long Langevin runs on the Mueller-Brown potential with the
  paper's settings (kT = 23, mass 0.5, friction 1, dt 5e-3, 50 steps per sample),
  integrated with :class:`sci_moe.sampling.md.integrators.LangevinBAOAB`, and
  :func:`muller_brown_density` (the exact Boltzmann histogram on a grid).
"""

from __future__ import annotations

import numpy as np
import torch

from ..sampling.diffusion import DiffusedMixtureEnergy
from ..stats import GaussianMixture

__all__ = [
    "MULLER_BROWN_BOX",
    "DiffusedMixtureEnergy",
    "muller_brown_density",
    "muller_brown_samples",
    "two_mode_mixture_1d",
    "two_mode_mixture_2d",
]

#: Plotting / histogram box of ScoreMD's Mueller-Brown evaluation: (x range, y range).
MULLER_BROWN_BOX = ((-1.8, 1.1), (-0.5, 2.0))


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
    from .._util import progress_bar
    from ..sampling.md import LangevinBAOAB, MuellerBrown

    if n_samples < 1 or n_walkers < 1 or stride < 1 or burn_in < 0:
        raise ValueError("n_samples, n_walkers, stride must be >= 1 and burn_in >= 0")
    gen = torch.Generator().manual_seed(seed)
    provider = _muller_brown_provider(MuellerBrown(), mass)
    integ = LangevinBAOAB(dt, friction_per_ps=friction, kT=kT)
    x0 = torch.tensor(start, dtype=torch.float64).expand(n_walkers, 1, 2).clone()
    state = integ.init_state(provider, x0, gen)
    n_frames = -(-n_samples // n_walkers)
    state = integ.step(state, provider, gen, n_steps=burn_in) if burn_in else state
    out = np.empty((n_frames, n_walkers, 2))
    for i in progress_bar(range(n_frames), disable=not progress, desc="Mueller-Brown Langevin"):
        state = integ.step(state, provider, gen, n_steps=stride)
        out[i] = state.positions[:, 0].detach().numpy()
    if not np.isfinite(out).all():
        raise ValueError("Mueller-Brown Langevin run diverged (non-finite positions); lower dt")
    return out.transpose(1, 0, 2).reshape(-1, 2)[:n_samples]


def _muller_brown_provider(pot, mass: float):
    """Force provider of ``pot`` with the same arithmetic as ``PotentialForces(pot)``.

    ``MuellerBrown.energy_and_forces`` rebuilds its six parameter tensors twice per call,
    evaluates the exponentials twice (energy and forces) and checks the positions for
    finiteness (a host sync) on every step. This provider builds the parameters once and
    shares the exponentials; every elementwise op and every reduction is the one of
    :meth:`MuellerBrown.analytic_forces` / ``forward`` on the same shapes, so the
    trajectories are bit-identical (tested). Positions are checked once, at the end.
    """
    from ..sampling.md import ForceProvider

    p = {k: torch.tensor(getattr(pot, k), dtype=torch.float64) for k in ("A", "a", "b", "c")}
    x0 = torch.tensor(pot.x0, dtype=torch.float64)
    y0 = torch.tensor(pot.y0, dtype=torch.float64)
    A, a, b, c, scale = p["A"], p["a"], p["b"], p["c"], pot.scale

    class _Provider(ForceProvider):
        masses = torch.tensor([mass], dtype=torch.float64)
        dim = 2

        def energy_and_forces(self, x):
            dx = x[..., 0:1] - x0
            dy = x[..., 1:2] - y0
            ex = A * torch.exp(a * dx**2 + b * dx * dy + c * dy**2)
            gx = (ex * (2 * a * dx + b * dy)).sum(-1)
            gy = (ex * (b * dx + 2 * c * dy)).sum(-1)
            return (scale * ex.sum(-1)).sum(-1), -scale * torch.stack([gx, gy], dim=-1)

    return _Provider()


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
    from ..sampling.md import MuellerBrown

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
