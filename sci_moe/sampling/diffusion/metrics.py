"""Evaluation metrics of ScoreMD (Plainer et al. 2025), re-implemented in numpy.

* :func:`js_divergence`: 2-D histograms (``density=True``) of reference and model samples
  on a common grid, :math:`\\mathrm{JS}(P, Q)` in nats
  (``scipy.spatial.distance.jensenshannon(P, Q) ** 2``), computed by the one histogram
  JS of :func:`sci_moe.sampling.md.js_divergence`.
* :func:`pmf_error`: the "PMF error" (ScoreMD ``rms_fe_sq_error``): a grid of
  ``n_bins - 2`` interior bins per axis plus one outlier bin on each side, bin
  probabilities :math:`p` (count / total), every bin occupied by either set taking 1e-6 where
  empty, per-bin :math:`(\\log p_{model} - \\log p_{ref})^2` weighted by
  :math:`(p_{model} + p_{ref})/2` normalised to one. A mean **squared** free-energy
  difference in :math:`(k_BT)^2`; no square root despite the name.
* :func:`bond_wasserstein`: per-bond 1-Wasserstein distances of bond-length distributions.
* :func:`fp_error_curve`: the FP residual as a function of ``t`` (two-probe estimator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from ..md import js_divergence as histogram_js_divergence
from .losses import fp_residual_probe

__all__ = [
    "bond_wasserstein",
    "fp_error_curve",
    "js_divergence",
    "pmf_error",
]


def _as2d(a, name):
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"{name} must have shape (n, 2), got {a.shape}")
    a = a[np.isfinite(a).all(1)]
    if len(a) == 0:
        raise ValueError(f"{name} has no finite samples")
    return a


def js_divergence(reference, samples, bins: int = 64, limits=((-math.pi, math.pi),) * 2) -> float:
    """Jensen-Shannon divergence (nats) of two 2-D sample sets on a histogram grid.

    Parameters
    ----------
    reference, samples : array-like, shape (n, 2)
        E.g. (phi, psi) in radians or Mueller-Brown coordinates; non-finite rows dropped.
    bins : int
        Bins per axis (ScoreMD: 64 for phi/psi, 100 for Mueller-Brown).
    limits : ((float, float), (float, float)) or None
        Histogram box; ``None`` takes the joint data range.

    Returns
    -------
    float, in [0, log 2]
    """
    p, q = _as2d(reference, "reference"), _as2d(samples, "samples")
    if limits is None:
        both = np.vstack([p, q])
        limits = ((both[:, 0].min(), both[:, 0].max()), (both[:, 1].min(), both[:, 1].max()))
    edges = [np.linspace(lo, hi, bins + 1) for lo, hi in limits]
    P, _, _ = np.histogram2d(p[:, 0], p[:, 1], bins=edges, density=True)
    Q, _, _ = np.histogram2d(q[:, 0], q[:, 1], bins=edges, density=True)
    if not np.isfinite(P).all() or not np.isfinite(Q).all() or P.sum() == 0 or Q.sum() == 0:
        return float(np.log(2))  # no overlap with the box: maximal divergence
    return histogram_js_divergence(P, Q)


def _bin_probs(a, limits, n_bins):
    idx = []
    for d, (lo, hi) in enumerate(limits):
        grid = np.linspace(lo, hi, n_bins - 1)
        idx.append(np.digitize(a[:, d], grid))
    flat = idx[0] * n_bins + idx[1]
    return np.bincount(flat, minlength=n_bins * n_bins) / len(a)


def pmf_error(
    reference, samples, n_bins: int = 64, limits=((-math.pi, math.pi),) * 2, baseline: float = 1e-6
) -> float:
    """Probability-weighted mean squared free-energy difference (ScoreMD's PMF metric).

    Parameters
    ----------
    reference, samples : array-like, shape (n, 2)
    n_bins : int
        Bins per axis including the two outlier bins (ScoreMD: 64).
    limits : ((float, float), (float, float))
    baseline : float
        Probability given to bins occupied by only one of the sets.

    Returns
    -------
    float, in :math:`(k_BT)^2`
    """
    p = _bin_probs(_as2d(reference, "reference"), limits, n_bins)
    q = _bin_probs(_as2d(samples, "samples"), limits, n_bins)
    occ = (p > 0) | (q > 0)
    p, q = np.where(p > 0, p, baseline)[occ], np.where(q > 0, q, baseline)[occ]
    w = (p + q) / 2
    w = w / w.sum()
    return float((w * (np.log(q) - np.log(p)) ** 2).sum())


def bond_wasserstein(reference, samples, bonds: Sequence[tuple[int, int]]) -> np.ndarray:
    """1-Wasserstein distance of each bond-length distribution.

    Parameters
    ----------
    reference, samples : array-like, shape (n, N, 3)
        Positions (any length unit; the result is in the same unit).
    bonds : sequence of (int, int)

    Returns
    -------
    numpy.ndarray, shape (len(bonds),)
    """
    a, b = np.asarray(reference, np.float64), np.asarray(samples, np.float64)
    if a.ndim != 3 or b.ndim != 3 or a.shape[1:] != b.shape[1:]:
        raise ValueError(f"positions must be (n, N, 3) with equal N, got {a.shape}, {b.shape}")
    b = b[np.isfinite(b).all((1, 2))]
    from scipy.stats import wasserstein_distance  # scipy.stats: ~1 s at import, only here

    out = []
    for i, j in bonds:
        la = np.linalg.norm(a[:, i] - a[:, j], axis=-1)
        lb = np.linalg.norm(b[:, i] - b[:, j], axis=-1)
        out.append(wasserstein_distance(la, lb))
    return np.asarray(out)


def fp_error_curve(
    energy_fn,
    sde,
    data: torch.Tensor,
    ts: Sequence[float],
    n_per_t: int = 256,
    generator: torch.Generator | None = None,
    **probe_kw,
) -> np.ndarray:
    """FP residual size versus diffusion time (ScoreMD's FP-error curve).

    At each ``t``, ``n_per_t`` data points are perturbed to ``x_t`` and the two-probe
    product estimates :math:`E[r^2]`; the curve is :math:`\\sqrt{\\max(E[r^2], 0)}/D`.

    Parameters
    ----------
    energy_fn : callable ``(x, t) -> E``
    sde : SDE
    data : Tensor, shape (n, ...)
    ts : sequence of float
    n_per_t : int
    generator : torch.Generator, optional
    **probe_kw
        Passed to :func:`~.losses.fp_residual_probe`.

    Returns
    -------
    numpy.ndarray, shape (len(ts),)
    """
    D = data[0].numel()
    out = []
    for t in ts:
        idx = torch.randint(len(data), (n_per_t,), generator=generator)
        tv = torch.full((n_per_t,), float(t), dtype=data.dtype)
        noise = torch.randn(data[idx].shape, generator=generator, dtype=data.dtype)
        xt, _ = sde.perturb(data[idx], tv, noise)
        r = fp_residual_probe(
            energy_fn, sde, xt, tv, create_graph=False, generator=generator, **probe_kw
        )
        out.append(math.sqrt(max(float((r[0] * r[1]).mean().detach()), 0.0)) / D)
    return np.asarray(out)
