"""Histogram metrics of sampled distributions: probabilities, free energies, KL/JS, PMF error.

The one home of these metrics in sci-moe (``sci_moe.sampling.diffusion.metrics`` and
``sci_moe.data.alanine_reference`` use them). They follow the ScoreMD evaluation (Plainer et
al. 2025; see ``../shared/papers/sampling-theory.md``, A.9): phi/psi histograms of 64 x 64
bins over :math:`[-\\pi, \\pi]^2`, the Jensen-Shannon divergence in nats
(``scipy.spatial.distance.jensenshannon(P, Q) ** 2``),

.. math::

    \\mathrm{JS}(P, Q) = \\tfrac12 \\mathrm{KL}(P \\| M) + \\tfrac12 \\mathrm{KL}(Q \\| M),
    \\qquad M = \\tfrac12 (P + Q),

bounded by :math:`\\ln 2`, and the probability-weighted squared free-energy difference
("PMF error", in :math:`(k_BT)^2`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "angle_counts",
    "angle_histogram",
    "boltzmann_histogram",
    "free_energy",
    "histogram",
    "js_divergence",
    "kl_divergence",
    "normalise",
    "pmf_error",
]


def normalise(p) -> np.ndarray:
    """Histogram ``p`` divided by its sum (``ValueError`` if negative, non-finite or empty)."""
    p = np.asarray(p, dtype=np.float64)
    if (p < 0).any() or not np.isfinite(p).all():
        raise ValueError("a histogram must be finite and non-negative")
    total = p.sum()
    if total <= 0:
        raise ValueError("a histogram must have positive mass (no samples fell in its range)")
    return p / total


def histogram(samples, bins, ranges, weights=None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Normalised histogram of ``samples`` (probability per bin, summing to 1).

    Parameters
    ----------
    samples : array_like, shape (F, d)
    bins : int or sequence of int
    ranges : sequence of (low, high), length d
        Samples outside are dropped.
    weights : array_like, shape (F,), optional

    Returns
    -------
    p : ndarray, shape (bins,) * d
    edges : list of ndarray
    """
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(f"samples must have shape (F, d) with F > 0, got {np.shape(samples)}")
    h, edges = np.histogramdd(x, bins=bins, range=ranges, weights=weights)
    return normalise(h), list(edges)


def angle_counts(angles, bins: int = 64, weights=None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Unnormalised histogram (counts, or summed weights) of dihedral pairs over
    :math:`[-\\pi, \\pi]^2`; see :func:`angle_histogram`.

    Returns
    -------
    counts : ndarray, shape (bins, bins), float64
        ``counts[i, j]``: phi bin ``i``, psi bin ``j``.
    edges : list of two ndarrays
    """
    a = np.asarray(angles, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"angles must have shape (F, 2), got {a.shape}")
    if len(a) == 0:
        raise ValueError("angles must hold at least one frame")
    # Wrap into [-pi, pi) so that +pi is not lost at the closed right edge.
    a = (a + np.pi) % (2 * np.pi) - np.pi
    h, edges = np.histogramdd(a, bins=bins, range=[(-np.pi, np.pi)] * 2, weights=weights)
    return h, list(edges)


def angle_histogram(angles, bins: int = 64, weights=None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Histogram of dihedral pairs, e.g. (phi, psi), over :math:`[-\\pi, \\pi]^2`.

    Parameters
    ----------
    angles : array_like, shape (F, 2)
        Radians.
    bins : int
        Bins per axis (64 as in ScoreMD).

    Returns
    -------
    p : ndarray, shape (bins, bins)
        Probabilities (sum 1); ``p[i, j]`` is phi bin ``i``, psi bin ``j``.
    edges : list of two ndarrays
    """
    h, edges = angle_counts(angles, bins, weights)
    return normalise(h), edges


def kl_divergence(p, q) -> float:
    """:math:`\\mathrm{KL}(P\\|Q) = \\sum_i p_i \\ln(p_i/q_i)` in nats (``inf`` if ``q`` misses
    mass of ``p``); inputs are normalised first."""
    p, q = normalise(p), normalise(q)
    if p.shape != q.shape:
        raise ValueError(f"histograms differ in shape: {p.shape} vs {q.shape}")
    m = p > 0
    if (q[m] == 0).any():
        return math.inf
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def js_divergence(p, q) -> float:
    """Jensen-Shannon divergence in nats, in :math:`[0, \\ln 2]` (see the module docstring).

    Equals ``scipy.spatial.distance.jensenshannon(p, q) ** 2``.
    """
    p, q = normalise(p), normalise(q)
    if p.shape != q.shape:
        raise ValueError(f"histograms differ in shape: {p.shape} vs {q.shape}")
    m = 0.5 * (p + q)
    return float(max(0.0, 0.5 * kl_divergence(p, m) + 0.5 * kl_divergence(q, m)))


def free_energy(p, kT: float = 1.0) -> np.ndarray:
    """:math:`F = -k_BT \\ln p`, shifted to a minimum of 0 (``inf`` in empty bins)."""
    p = normalise(p)
    with np.errstate(divide="ignore"):
        f = -kT * np.log(p)
    return f - f[np.isfinite(f)].min()


def pmf_error(p_ref, p_model, floor: float = 1e-6) -> float:
    """Probability-weighted squared free-energy difference, :math:`(k_BT)^2`.

    .. math::

        \\sum_i \\tfrac12 (p_i + q_i) (\\ln p_i - \\ln q_i)^2

    with empty bins set to ``floor`` (ScoreMD's ``rms_fe_sq_error``; no square root).
    """
    p, q = normalise(p_ref), normalise(p_model)
    if p.shape != q.shape:
        raise ValueError(f"histograms differ in shape: {p.shape} vs {q.shape}")
    w = 0.5 * (p + q)
    d = np.log(np.maximum(p, floor)) - np.log(np.maximum(q, floor))
    return float(np.sum(w * d**2))


def boltzmann_histogram(energy_fn, kT: float, edges, subdivisions: int = 8) -> np.ndarray:
    """Exact bin probabilities of :math:`p \\propto e^{-E/kT}` for a 1-D or 2-D potential
    (midpoint rule with ``subdivisions`` points per bin and axis).

    Parameters
    ----------
    energy_fn : callable
        ``(M, d)`` numpy array -> ``(M,)`` energies.
    kT : float
    edges : list of ndarray
        Bin edges per axis (as returned by :func:`histogram`).
    """
    axes = []
    for e in edges:
        e = np.asarray(e, dtype=np.float64)
        frac = (np.arange(subdivisions) + 0.5) / subdivisions
        axes.append((e[:-1, None] + np.diff(e)[:, None] * frac[None]).ravel())
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(edges))
    logw = -np.asarray(energy_fn(grid), dtype=np.float64) / kT
    w = np.exp(logw - logw.max()).reshape([len(a) for a in axes])
    for axis, e in enumerate(edges):
        w = np.moveaxis(w, axis, 0)
        w = w.reshape(len(e) - 1, subdivisions, *w.shape[1:]).sum(1)
        w = np.moveaxis(w, 0, axis)
    return normalise(w)
