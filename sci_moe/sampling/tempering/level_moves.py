r"""Level moves and level-move statistics of simulated tempering on the joint target.

The joint target of simulated tempering is :math:`\pi(l, x) \propto \exp(g_l - u_l(x))`
(:math:`g` the level weights, :math:`u_l` the reduced energy at level :math:`l`); with
``logp = g - u`` (shape ``(L,)``, the unnormalised :math:`\log \pi(l \mid x)`):

* :func:`gibbs_move` samples :math:`l' \sim \pi(\cdot \mid x)` (independence sampling,
  OpenMM's ``ExpandedEnsembleSampler``);
* :func:`neighbour_move` proposes :math:`l \pm 1` and accepts with
  :math:`\min\{1, \pi(l' \mid x)/\pi(l \mid x)\}` (Marinari-Parisi);
* :func:`rao_blackwell_acceptance` accumulates the acceptance a neighbour move would have
  had (a ladder-spacing check comparable across move schemes);
* :func:`level_probabilities` gives :math:`\pi(\cdot \mid x)`, the Rao-Blackwellised
  visit estimate that :class:`~.tempering.OnlineWeights` (SAMS, Wang-Landau) adapts on.

NumPy only; the random numbers come from the ``numpy.random.Generator`` passed in (the
number drawn per move is fixed, so seeded runs are reproducible).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["gibbs_move", "level_probabilities", "neighbour_move", "rao_blackwell_acceptance"]


def level_probabilities(logp: np.ndarray) -> np.ndarray:
    """:math:`\\pi(l \\mid x)` from ``logp = g - u``, shape (L,), summing to 1."""
    p = np.exp(logp - logp.max())
    return p / p.sum()


def gibbs_move(logp: np.ndarray, rng: np.random.Generator) -> int:
    """Draw the next level from :math:`\\pi(\\cdot \\mid x)` (one ``rng.choice``)."""
    p = np.exp(logp - logp.max())
    p /= p.sum()
    return int(rng.choice(logp.size, p=p))


def neighbour_move(
    logp: np.ndarray, prev: int, rng: np.random.Generator, acc: np.ndarray, cnt: np.ndarray
) -> int:
    """Metropolis move to ``prev +- 1`` (two uniforms drawn always); counts in ``acc``/``cnt``.

    Parameters
    ----------
    logp : numpy.ndarray, shape (L,)
    prev : int
        Current level.
    rng : numpy.random.Generator
    acc, cnt : numpy.ndarray, shape (L-1,)
        Accepted / proposed moves between ``l`` and ``l+1``, updated in place.

    Returns
    -------
    int
        The new level (``prev`` when rejected or proposed off the ladder).
    """
    prop = prev + (1 if rng.random() < 0.5 else -1)
    new = prev
    r = rng.random()  # drawn always: fixed random-number consumption
    if 0 <= prop < logp.size:
        lo = min(prev, prop)
        cnt[lo] += 1
        if math.log(max(r, 1e-300)) < logp[prop] - logp[prev]:
            new = prop
            acc[lo] += 1
    return new


def rao_blackwell_acceptance(logp: np.ndarray, prev: int, acc: np.ndarray, cnt: np.ndarray) -> None:
    """Add :math:`\\min\\{1, \\pi(l' \\mid x)/\\pi(l \\mid x)\\}` for both neighbours of ``prev``.

    ``acc`` / ``cnt`` (shape (L-1,)) are updated in place; ``acc / cnt`` is then the mean
    acceptance a neighbour move would have had between ``l`` and ``l+1``.
    """
    for nb, lo in ((prev - 1, prev - 1), (prev + 1, prev)):
        if 0 <= nb < logp.size:
            acc[lo] += math.exp(min(0.0, logp[nb] - logp[prev]))
            cnt[lo] += 1
