r"""Discretised RWMH and simulated-tempering (ST) chains on 1-D / 2-D Gaussian mixtures.

The construction of ``papers/sampling-theory.md`` B.3. The target is the mixture

.. math::

    p(x) = \sum_j w_j\, \mathcal N(x; \mu_j, \sigma^2 I)

on a regular grid of spacing ``h``. The local kernel is grid random-walk Metropolis–Hastings
with a discretised Gaussian proposal :math:`q(o) \propto \exp(-|o|^2 h^2 / 2s^2)` over nonzero
grid offsets within :math:`3s`; off-grid proposals are rejected, so the chain is exactly
reversible. Simulated tempering lives on (level, grid point) with target
:math:`\pi(i, x) \propto e^{c_i} \tilde p_i(x)`, where :math:`\tilde p_i = p^{\beta_i}`
(``tempering="power"``) or :math:`\sum_j w_j \mathcal N(\mu_j, \sigma^2/\beta_i)`
(``"component"``) and :math:`c_i` are the log level weights. One step is, with probability
1/2, the level's RWMH with proposal scale :math:`s/\sqrt{\beta_i}`, and otherwise a level
move :math:`i \to i \pm 1` (each with probability 1/2, off-ladder rejected) accepted with

.. math::

    \min\Big\{1, \frac{e^{c_{i'}}\tilde p_{i'}(x)}{e^{c_i}\tilde p_i(x)}\Big\}.

With ``level_weights="matched"``, :math:`c_i = \log r_i - \log Z_i` with the grid partition
functions :math:`Z_i = \sum_x \tilde p_i(x)`, so the level marginal is exactly :math:`r`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln, logsumexp

from .chains import ReversibleChain

__all__ = [
    "TemperingChain",
    "bimodal_means",
    "gaussian_mixture_rwmh",
    "geometric_ladder",
    "make_grid",
    "mixture_log_density",
    "mixture_responsibilities",
    "rwmh_chain",
    "simulated_tempering_chain",
]


def bimodal_means(separation: float, dim: int = 1) -> np.ndarray:
    r"""Means :math:`\pm (D/2) e_1` of a two-mode mixture in ``dim`` dimensions, shape (2, dim)."""
    if separation < 0 or dim < 1:
        raise ValueError("separation must be >= 0 and dim >= 1.")
    mu = np.zeros((2, dim))
    mu[0, 0], mu[1, 0] = -separation / 2, separation / 2
    return mu


def geometric_ladder(beta_min: float, n_levels: int) -> np.ndarray:
    r"""Geometric ladder :math:`\beta_i = \beta_{\min}^{(L-1-i)/(L-1)}`, ending at 1."""
    if not 0 < beta_min <= 1:
        raise ValueError(f"beta_min must lie in (0, 1], got {beta_min}.")
    if n_levels < 1:
        raise ValueError(f"n_levels must be >= 1, got {n_levels}.")
    if n_levels == 1:
        return np.ones(1)
    return beta_min ** (np.arange(n_levels - 1, -1, -1) / (n_levels - 1))


def _check_mixture(means, sigma, weights):
    means = np.atleast_2d(np.asarray(means, dtype=float))
    if means.ndim != 2:
        raise ValueError("means must have shape (K, d).")
    K = means.shape[0]
    if sigma <= 0:
        raise ValueError(f"sigma must be positive, got {sigma}.")
    w = np.full(K, 1.0 / K) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (K,) or np.any(w <= 0):
        raise ValueError(f"weights must be {K} positive numbers (one per mean).")
    return means, float(sigma), w / w.sum()


def make_grid(means, sigma: float = 1.0, h: float = 0.1, pad: float = 5.0):
    r"""Regular grid covering the means padded by ``pad * sigma`` in every direction.

    Returns
    -------
    points : ndarray, shape (n, d)
        Grid points in C order.
    shape : tuple of int
        Grid shape, ``prod(shape) == n``.
    """
    means = np.atleast_2d(np.asarray(means, dtype=float))
    if h <= 0:
        raise ValueError(f"grid step h must be positive, got {h}.")
    axes = []
    for a in range(means.shape[1]):
        lo, hi = means[:, a].min() - pad * sigma, means[:, a].max() + pad * sigma
        m = int(np.floor((hi - lo) / h + 1e-9)) + 1
        c = 0.5 * (lo + hi)
        axes.append(c + h * (np.arange(m) - (m - 1) / 2))
    mesh = np.meshgrid(*axes, indexing="ij")
    points = np.stack([g.ravel() for g in mesh], axis=1)
    return points, tuple(len(a) for a in axes)


def _component_logpdf(points, means, var, dof=None):
    d = points.shape[1]
    sq = ((points[:, None, :] - means[None, :, :]) ** 2).sum(-1)
    if dof is None:
        return -0.5 * sq / var - 0.5 * d * np.log(2 * np.pi * var)
    nu = float(dof)
    return (
        gammaln(0.5 * (nu + d))
        - gammaln(0.5 * nu)
        - 0.5 * d * np.log(nu * np.pi * var)
        - 0.5 * (nu + d) * np.log1p(sq / (nu * var))
    )


def _check_dof(dof):
    if dof is not None and not (np.isfinite(dof) and dof > 0):
        raise ValueError(
            f"dof must be a positive number (Student-t) or None (Gaussian), got {dof}."
        )
    return dof


def mixture_log_density(
    points,
    means,
    sigma=1.0,
    weights=None,
    beta: float = 1.0,
    tempering: str = "power",
    dof: float | None = None,
):
    r"""Log of the (tempered, unnormalised) mixture density at ``points`` (n, d).

    ``"power"``: :math:`\beta \log p(x)`; ``"component"``:
    :math:`\log \sum_j w_j \mathcal N(x; \mu_j, \sigma^2/\beta)`. With ``dof`` the
    components are Student-t with ``dof`` degrees of freedom and scale ``sigma`` (heavy
    tails: grid RWMH is then not geometrically ergodic as the grid grows) instead of
    Gaussians.
    """
    means, sigma, w = _check_mixture(means, sigma, weights)
    dof = _check_dof(dof)
    points = np.asarray(points, dtype=float).reshape(-1, means.shape[1])
    if tempering == "power":
        lc = _component_logpdf(points, means, sigma**2, dof)
        return beta * logsumexp(np.log(w) + lc, axis=1)
    if tempering == "component":
        lc = _component_logpdf(points, means, sigma**2 / beta, dof)
        return logsumexp(np.log(w) + lc, axis=1)
    raise ValueError(f"tempering must be 'power' or 'component', got {tempering!r}.")


def mixture_responsibilities(
    points,
    means,
    sigma=1.0,
    weights=None,
    beta: float = 1.0,
    tempering: str = "power",
    dof: float | None = None,
):
    r"""Component weights :math:`W(x, j)` (rows sum to 1), shape (n, K).

    ``"power"``: :math:`\propto (w_j \mathcal N_j(x))^{\beta}`; ``"component"``:
    :math:`\propto w_j \mathcal N(x; \mu_j, \sigma^2/\beta)` (Student-t components with
    ``dof``, as in :func:`mixture_log_density`).
    """
    means, sigma, w = _check_mixture(means, sigma, weights)
    dof = _check_dof(dof)
    points = np.asarray(points, dtype=float).reshape(-1, means.shape[1])
    if tempering == "power":
        lw = beta * (np.log(w) + _component_logpdf(points, means, sigma**2, dof))
    elif tempering == "component":
        lw = np.log(w) + _component_logpdf(points, means, sigma**2 / beta, dof)
    else:
        raise ValueError(f"tempering must be 'power' or 'component', got {tempering!r}.")
    return np.exp(lw - logsumexp(lw, axis=1, keepdims=True))


def _rwmh_coo(log_density, shape, h, step, n_sd=3.0):
    r"""Off-diagonal entries (rows, cols, vals) of grid RWMH."""
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape))
    lp = np.asarray(log_density, dtype=float).ravel()
    if lp.size != n:
        raise ValueError(f"log_density has {lp.size} values, the grid {shape} has {n}.")
    if step <= 0:
        raise ValueError(f"step must be positive, got {step}.")
    M = [min(int(np.ceil(n_sd * step / h)), s - 1) for s in shape]
    offsets = np.array(
        [o for o in itertools.product(*[range(-m, m + 1) for m in M]) if any(o)], dtype=int
    ).reshape(-1, len(shape))
    if offsets.size == 0:
        return np.zeros(0, int), np.zeros(0, int), np.zeros(0)
    q = np.exp(-0.5 * (offsets**2).sum(1) * h**2 / step**2)
    q /= q.sum()
    coords = np.stack(np.unravel_index(np.arange(n), shape), axis=1)
    rows, cols, vals = [], [], []
    for o, qo in zip(offsets, q, strict=True):
        tgt = coords + o
        ok = np.all((tgt >= 0) & (tgt < np.array(shape)), axis=1)
        src = np.flatnonzero(ok)
        dst = np.ravel_multi_index(tuple(tgt[ok].T), shape)
        rows.append(src)
        cols.append(dst)
        vals.append(qo * np.exp(np.minimum(0.0, lp[dst] - lp[src])))
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)


def _finish(rows, cols, vals, n):
    P = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    return (P + sp.diags(1.0 - np.asarray(P.sum(axis=1)).ravel())).tocsr()


def rwmh_chain(log_density, shape, h: float, step: float = 1.0) -> ReversibleChain:
    r"""Grid RWMH for an (unnormalised) log density given on a grid of ``shape``.

    Parameters
    ----------
    log_density : ndarray, shape (prod(shape),)
    shape : tuple of int
    h : float
        Grid spacing (sets the proposal's scale in grid units).
    step : float
        Proposal standard deviation :math:`s`.
    """
    lp = np.asarray(log_density, dtype=float).ravel()
    n = lp.size
    P = _finish(*_rwmh_coo(lp, shape, h, step), n)
    return ReversibleChain(P, np.exp(lp - lp.max()))


def gaussian_mixture_rwmh(
    means, sigma=1.0, weights=None, h: float = 0.1, step: float = 1.0, pad: float = 5.0
):
    r"""RWMH on a grid discretisation of a Gaussian mixture (1-D or 2-D).

    Returns
    -------
    chain : ReversibleChain
    points : ndarray, shape (n, d)
    labels : ndarray of int, shape (n,)
        Most responsible component of each grid point (a hard partition by mode).
    """
    points, shape = make_grid(means, sigma, h, pad)
    lp = mixture_log_density(points, means, sigma, weights)
    labels = mixture_responsibilities(points, means, sigma, weights).argmax(axis=1)
    return rwmh_chain(lp, shape, h, step), points, labels


@dataclass(frozen=True)
class TemperingChain:
    r"""A discretised ST chain on (level, grid point) with its decompositions.

    Attributes
    ----------
    chain : ReversibleChain
        State ``s = level * n_grid + grid_index``.
    points : ndarray, shape (n_grid, d)
    betas : ndarray, shape (L,)
    log_weights : ndarray, shape (L,)
        The :math:`c_i` used.
    level : ndarray of int, shape (n,)
    labels : ndarray of int, shape (n,)
        Hard partition ``level * K + most responsible component``.
    soft_weights : ndarray, shape (n, L * K)
        Component responsibilities on each level (zero on the other levels).
    """

    chain: ReversibleChain
    points: np.ndarray
    betas: np.ndarray
    log_weights: np.ndarray
    level: np.ndarray
    labels: np.ndarray
    soft_weights: np.ndarray

    def level_marginal(self) -> np.ndarray:
        r"""Stationary probability of each level."""
        return np.bincount(self.level, weights=self.chain.pi, minlength=self.betas.size)

    def target_mask(self) -> np.ndarray:
        r"""Boolean mask of the states at level ``beta = 1``."""
        return self.level == self.betas.size - 1


def simulated_tempering_chain(
    means,
    sigma: float = 1.0,
    weights=None,
    betas=None,
    h: float = 0.1,
    step: float = 1.0,
    level_weights="matched",
    level_probs=None,
    tempering: str = "power",
    pad: float = 5.0,
    dof: float | None = None,
) -> TemperingChain:
    r"""Build the B.3 simulated-tempering + RWMH chain on a 1-D or 2-D Gaussian mixture.

    Parameters
    ----------
    means : array_like, shape (K, d)
    sigma : float
    weights : array_like, shape (K,), optional
        Mixture weights (equal by default).
    betas : array_like, shape (L,), optional
        Increasing inverse temperatures ending at 1; default
        ``geometric_ladder(1 / D**2, ceil(2 ln D) + 2)`` with ``D`` the largest distance
        between means.
    h : float
        Grid spacing.
    step : float
        RWMH proposal scale at ``beta = 1``; level ``i`` uses ``step / sqrt(beta_i)``.
    level_weights : "matched", "equal" or array_like, shape (L,)
        Log level weights :math:`c_i`: ``"matched"`` gives :math:`\log r_i - \log Z_i`,
        ``"equal"`` gives 0 (level marginal :math:`\propto Z_i`).
    level_probs : array_like, shape (L,), optional
        Target level marginal :math:`r` for ``"matched"`` (uniform by default).
    tempering : {"power", "component"}
    pad : float
        Grid padding around the means, in units of ``sigma``.
    dof : float, optional
        Student-t components with ``dof`` degrees of freedom (scale ``sigma``) instead of
        Gaussians: heavy tails, where the grid chain's spectral gap shrinks as ``pad``
        grows while a restricted gap on a fixed ball does not.
    """
    means, sigma, w = _check_mixture(means, sigma, weights)
    dof = _check_dof(dof)
    if betas is None:
        D = max(np.max(np.linalg.norm(means[:, None] - means[None], axis=-1)), np.e)
        betas = geometric_ladder(1.0 / D**2, int(np.ceil(2 * np.log(D))) + 2)
    betas = np.asarray(betas, dtype=float)
    if betas.ndim != 1 or np.any(np.diff(betas) <= 0) or betas[-1] != 1.0 or betas[0] <= 0:
        raise ValueError("betas must be strictly increasing, positive, and end at 1.0.")
    L = betas.size
    points, shape = make_grid(means, sigma, h, pad)
    G, K = points.shape[0], means.shape[0]
    lps = np.stack([mixture_log_density(points, means, sigma, w, b, tempering, dof) for b in betas])
    logZ = logsumexp(lps, axis=1)
    if isinstance(level_weights, str):
        if level_weights == "matched":
            r = np.full(L, 1.0 / L) if level_probs is None else np.asarray(level_probs, float)
            if r.shape != (L,) or np.any(r <= 0):
                raise ValueError(f"level_probs must be {L} positive numbers.")
            c = np.log(r / r.sum()) - logZ
        elif level_weights == "equal":
            c = np.zeros(L)
        else:
            raise ValueError("level_weights must be 'matched', 'equal' or an array of length L.")
    else:
        c = np.asarray(level_weights, dtype=float)
        if c.shape != (L,):
            raise ValueError(f"level_weights must have length {L} (one per level).")
    rows, cols, vals = [], [], []
    for i, b in enumerate(betas):
        r_, c_, v_ = _rwmh_coo(lps[i], shape, h, step / np.sqrt(b))
        rows.append(i * G + r_)
        cols.append(i * G + c_)
        vals.append(0.5 * v_)
        for j in (i - 1, i + 1):
            if 0 <= j < L:
                acc = np.exp(np.minimum(0.0, c[j] + lps[j] - c[i] - lps[i]))
                rows.append(i * G + np.arange(G))
                cols.append(j * G + np.arange(G))
                vals.append(0.25 * acc)
    n = L * G
    P = _finish(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), n)
    logpi = (c[:, None] + lps).ravel()
    chain = ReversibleChain(P, np.exp(logpi - logpi.max()))
    level = np.repeat(np.arange(L), G)
    resp = np.stack(
        [mixture_responsibilities(points, means, sigma, w, b, tempering, dof) for b in betas]
    )  # (L, G, K)
    soft = np.zeros((n, L * K))
    for i in range(L):
        soft[i * G : (i + 1) * G, i * K : (i + 1) * K] = resp[i]
    labels = level * K + resp.reshape(n, K).argmax(axis=1)
    return TemperingChain(chain, points, betas, c, level, labels, soft)
