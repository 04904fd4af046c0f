"""Label noise and train/held-out splits (stratified by label, or grouped by document)."""

from __future__ import annotations

import math

import numpy as np

from ._inputs import as_labels

__all__ = ["grouped_split", "inject_label_noise", "stratified_split"]


def inject_label_noise(y, theta: float, seed: int = 0) -> np.ndarray:
    r"""Flip :math:`\lfloor\theta M_c\rfloor` labels of each class :math:`c` (as in the paper).

    Parameters
    ----------
    y : array_like, shape (M,)
        Labels in {0, 1}.
    theta : float
        Fraction flipped per class, in [0, 0.5).
    seed : int
        Seed of the ``numpy.random.Generator`` choosing the flipped samples.

    Returns
    -------
    ndarray, shape (M,)
        Noisy labels (a new array, float).
    """
    if hasattr(y, "detach"):
        y = y.detach().cpu().numpy()
    y = as_labels(y, len(y) if np.ndim(y) == 1 else -1)
    theta = float(theta)
    if not 0 <= theta < 0.5:
        raise ValueError(f"theta must be a flip fraction in [0, 0.5), got {theta!r}")
    rng = np.random.default_rng(seed)
    out = y.copy()
    for c in (0.0, 1.0):
        idx = np.flatnonzero(y == c)
        k = math.floor(theta * len(idx))
        if k:
            out[rng.choice(idx, size=k, replace=False)] = 1.0 - c
    return out


def stratified_split(
    y: np.ndarray, val_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split holding out ``round(val_fraction * M_c)`` rows of each class ``c``.

    Parameters
    ----------
    y : ndarray, shape (M,)
        Labels in {0, 1}.
    val_fraction : float
        Held-out fraction of each class.
    seed : int

    Returns
    -------
    keep, held_out : ndarray of int
        Sorted row indices of the two parts.
    """
    rng = np.random.default_rng(seed)
    val = []
    for c in (0.0, 1.0):
        idx = np.flatnonzero(y == c)
        k = round(val_fraction * len(idx))
        if k < 1 or k >= len(idx):
            raise ValueError(
                f"class {int(c)} has {len(idx)} samples: too few to split off a validation "
                f"fraction {val_fraction}; supply more data or change val_fraction"
            )
        val.append(rng.choice(idx, size=k, replace=False))
    val = np.sort(np.concatenate(val))
    return np.setdiff1d(np.arange(len(y)), val), val


def grouped_split(y, groups, fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Split rows so that no group (e.g. the document a sentence comes from) straddles the parts.

    Groups are drawn in a seeded random order into the held-out part until it holds at least
    ``fraction`` of the rows of each label (a group counts for the label of its majority).

    Parameters
    ----------
    y : array_like, shape (M,)
        Labels in {0, 1}.
    groups : array_like, shape (M,)
        Group id of every row (any hashable numbers).
    fraction : float
        Held-out fraction, in (0, 1).
    seed : int

    Returns
    -------
    keep, held_out : ndarray of int
        Sorted row indices of the two parts; both contain both labels.
    """
    y = as_labels(y, len(y) if np.ndim(y) == 1 else -1)
    groups = np.asarray(groups)
    if groups.shape != y.shape:
        raise ValueError(f"groups must have shape {y.shape} (one id per row), got {groups.shape}")
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must lie in (0, 1), got {fraction!r}")
    ids, inverse = np.unique(groups, return_inverse=True)
    majority = np.array([np.mean(y[inverse == g]) >= 0.5 for g in range(len(ids))])
    rng = np.random.default_rng(seed)
    held = np.zeros(len(ids), dtype=bool)
    for label in (False, True):
        cand = rng.permutation(np.flatnonzero(majority == label))
        target = fraction * np.sum(np.isin(inverse, cand))
        count = 0
        for g in cand:
            if count >= target:
                break
            held[g] = True
            count += np.sum(inverse == g)
    out = held[inverse]
    keep, held_out = np.flatnonzero(~out), np.flatnonzero(out)
    for name, idx in (("kept", keep), ("held-out", held_out)):
        if len(np.unique(y[idx])) < 2:
            raise ValueError(
                f"the {name} part of the grouped split has one label only; supply more groups "
                "or change the fraction"
            )
    return keep, held_out
