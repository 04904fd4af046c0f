r"""Accuracy with confidence intervals, confusion matrices and mixture estimation."""

from __future__ import annotations

import numpy as np
from scipy import optimize, stats

__all__ = ["accuracy_interval", "confusion_matrix", "estimate_mixture", "wilson_interval"]


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    r"""Wilson score interval of a binomial proportion.

    .. math::
        \frac{\hat p + z^2/2n \pm z\sqrt{\hat p(1-\hat p)/n + z^2/4n^2}}{1 + z^2/n}

    Parameters
    ----------
    successes, n : int
    confidence : float

    Returns
    -------
    low, high : float
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n={n}], got {successes}")
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = successes / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return float(mid - half), float(mid + half)


def accuracy_interval(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    confidence: float = 0.95,
    groups=None,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Accuracy and its confidence interval: ``(accuracy, low, high)``.

    Without ``groups``: the Wilson interval (:func:`wilson_interval`), which treats the
    sequences as independent. With ``groups`` (the document of each sequence): a cluster
    bootstrap — documents are resampled with replacement ``n_boot`` times and the interval
    is the percentile interval of the pooled accuracy. Sequences of one document share
    topic and style, so the effective sample size is nearer the number of documents and
    the Wilson interval is too narrow.

    Parameters
    ----------
    y_true, y_pred : ndarray of int, shape (n,)
    confidence : float
    groups : sequence, length n, optional
    n_boot, seed : int
        Bootstrap replicates and their seed.
    """
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape or y_true.ndim != 1 or y_true.size == 0:
        raise ValueError(
            f"y_true and y_pred must be 1-D of one non-zero length, got {y_true.shape} "
            f"and {y_pred.shape}"
        )
    correct = y_true == y_pred
    k = int(correct.sum())
    if groups is None:
        lo, hi = wilson_interval(k, y_true.size, confidence)
        return k / y_true.size, lo, hi
    if len(groups) != y_true.size:
        raise ValueError(f"groups must have one entry per prediction ({y_true.size})")
    _, inv = np.unique(np.asarray(groups, dtype=str), return_inverse=True)
    hits = np.bincount(inv, weights=correct.astype(np.float64))
    sizes = np.bincount(inv).astype(np.float64)
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, sizes.size, size=(n_boot, sizes.size))
    boot = hits[draw].sum(1) / sizes[draw].sum(1)
    a = (1 - confidence) / 2
    lo, hi = np.quantile(boot, [a, 1 - a])
    return k / y_true.size, float(lo), float(hi)


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> np.ndarray:
    """Counts ``C[i, j]`` of sequences of class ``i`` predicted as ``j``, shape (K, K)."""
    c = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(c, (np.asarray(y_true), np.asarray(y_pred)), 1)
    return c


def estimate_mixture(predicted_fractions: np.ndarray, confusion: np.ndarray | None = None):
    r"""Estimate mixture proportions from the predicted class fractions of a sample.

    Without ``confusion`` this is classify-and-count (the fingerprint paper's estimate):
    :math:`\hat\pi = q`. With a row-normalised confusion matrix
    :math:`R_{ij} = P(\text{pred } j \mid \text{class } i)` measured on data like the sample
    (adjusted classify-and-count), it solves

    .. math:: \min_{\pi \ge 0,\ \sum \pi = 1} \| R^\top \pi - q \|_2 ,

    by non-negative least squares with the constraint as a heavily weighted extra row.

    Parameters
    ----------
    predicted_fractions : ndarray, shape (K,)
        :math:`q`, sums to 1.
    confusion : ndarray, shape (K, K), optional
        Counts or rates; rows are normalised here.

    Returns
    -------
    ndarray, shape (K,)
    """
    q = np.asarray(predicted_fractions, dtype=np.float64)
    if q.ndim != 1 or not np.isclose(q.sum(), 1.0):
        raise ValueError("predicted_fractions must be a 1-D array that sums to 1")
    if confusion is None:
        return q.copy()
    r = np.asarray(confusion, dtype=np.float64)
    if r.shape != (q.size, q.size):
        raise ValueError(f"confusion must have shape ({q.size}, {q.size}), got {r.shape}")
    rows = r.sum(axis=1, keepdims=True)
    if np.any(rows <= 0):
        raise ValueError("every row of confusion needs at least one count")
    r = r / rows
    # non-negative least squares with the sum-to-one row weighted heavily (exact active set)
    w = 1e4
    a_mat = np.vstack([r.T, np.full((1, q.size), w)])
    p, _ = optimize.nnls(a_mat, np.concatenate([q, [w]]))
    return p / p.sum()
