"""Gaussian expectations: Gauss-Hermite tensor grids and fixed Monte Carlo draws."""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.polynomial.hermite_e import hermegauss

__all__ = ["gauss_hermite", "gaussian_points"]


def gauss_hermite(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Probabilists' Gauss-Hermite rule for :math:`\xi \sim \mathcal N(0, 1)`.

    .. math::

        \mathbb E[f(\xi)] \approx \sum_{i=1}^{n} w_i f(\xi_i),\qquad \sum_i w_i = 1,

    exact for polynomials of degree ``< 2 n``.

    Returns
    -------
    nodes, weights : ndarray, shape (n_nodes,)
    """
    if int(n_nodes) != n_nodes or n_nodes < 1:
        raise ValueError(f"n_nodes must be a positive integer, got {n_nodes!r}")
    x, w = hermegauss(int(n_nodes))
    return x, w / math.sqrt(2 * math.pi)


def gaussian_points(
    dim: int, n_nodes: int, method: str = "quadrature", n_samples: int = 10_000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    r"""Points and weights for :math:`\mathbb E[f(\xi)]`, :math:`\xi \sim \mathcal N(0, I_{dim})`.

    ``method="quadrature"`` is the tensor product of :func:`gauss_hermite` rules
    (``n_nodes ** dim`` points); ``method="monte_carlo"`` draws ``n_samples`` fixed points from
    ``numpy.random.default_rng(seed)`` (common random numbers: the same points every call).

    Returns
    -------
    xi : ndarray, shape (n_points, dim)
    weights : ndarray, shape (n_points,), summing to 1
    """
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim!r}")
    if method == "quadrature":
        x, w = gauss_hermite(n_nodes)
        xi = np.array(list(itertools.product(x, repeat=dim)))
        weights = np.prod(np.array(list(itertools.product(w, repeat=dim))), axis=1)
        return xi, weights
    if method == "monte_carlo":
        if n_samples < 2:
            raise ValueError(f"n_samples must be >= 2, got {n_samples!r}")
        xi = np.random.default_rng(seed).standard_normal((int(n_samples), dim))
        return xi, np.full(int(n_samples), 1.0 / n_samples)
    raise ValueError(f"method must be 'quadrature' or 'monte_carlo', got {method!r}")
