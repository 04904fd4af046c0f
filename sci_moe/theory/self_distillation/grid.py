r"""Integration points for the multi-stage saddle point, built stage by stage.

Stage :math:`t` needs :math:`\mathbb E` over the class :math:`(c, y)` and
:math:`\xi_1..\xi_t \sim \mathcal N(0, 1)`. Quadrature grids are built one dimension per stage:
Gauss-Hermite in the new :math:`\xi_t` (the stage's own integrand is smooth in it). When the
next stage's pseudo-labels are hard (or sharp sigmoids), they jump where the training output
:math:`u_t = 0`; given :math:`\xi_{<t}`, :math:`u_t` increases in :math:`\xi_t`, and inverting
the prox stationarity :math:`h = u + \Delta\chi_{tt}\,\ell'(\tilde y, u)` gives the jump point in
closed form. The :math:`\xi_t` axis is then rebuilt from Gauss-Legendre panels on
:math:`[-L, L]` whose edges include these points, so the discontinuity is integrated exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.polynomial.legendre import leggauss

from .quadrature import gauss_hermite

__all__ = ["SPLIT_EDGES", "Grid", "split_targets"]

#: Fixed panel edges (in units of the standard normal) used with the jump points.
SPLIT_EDGES = (-10.0, -6.0, -3.0, -1.0, 1.0, 3.0, 6.0, 10.0)


def split_targets(loss: str, beta: float) -> tuple[float, ...]:
    r"""Values of :math:`u_t` where the next labels change fast; ``()`` when they are smooth.

    Hard labels jump at :math:`u = 0`; BCE soft labels :math:`\sigma(\beta u)` bend at
    :math:`\beta u \in \{0, \pm 2, \pm 6\}`; MSE soft labels are linear (no split).
    """
    if math.isinf(beta):
        return (0.0,)
    if loss == "bce":
        return tuple(v / beta for v in (-6.0, -2.0, 0.0, 2.0, 6.0))
    return ()


@dataclass
class Grid:
    """Weighted points ``(c, y, xi)``, with per-point arrays of the stages solved so far.

    Attributes
    ----------
    c, y, weight : ndarray, shape (P,)
    xi : ndarray, shape (P, d)
    arrays : dict of str to ndarray, shape (P,) each
        Per-point quantities of earlier stages (``z0``, ``z1``, ..., ``labels``), repeated
        along with the points when a dimension is added.
    """

    c: np.ndarray
    y: np.ndarray
    weight: np.ndarray
    xi: np.ndarray
    arrays: dict = field(default_factory=dict)

    @classmethod
    def classes(cls, c, y, p) -> Grid:
        """The four class points, no Gaussian dimension yet."""
        return cls(c=c.copy(), y=y.copy(), weight=p.copy(), xi=np.zeros((len(c), 0)))

    def expect(self, f) -> float:
        """Weighted sum of ``f`` over the points."""
        return float(self.weight @ f)

    def _extend(self, nodes: np.ndarray, weights: np.ndarray) -> Grid:
        """Per-point nodes/weights of the new axis, shape (P, K)."""
        K = nodes.shape[1]
        return Grid(
            c=np.repeat(self.c, K),
            y=np.repeat(self.y, K),
            weight=(self.weight[:, None] * weights).ravel(),
            xi=np.column_stack([np.repeat(self.xi, K, axis=0), nodes.ravel()]),
            arrays={k: np.repeat(v, K) for k, v in self.arrays.items()},
        )

    def add_hermite(self, n_nodes: int) -> Grid:
        """Add an axis with ``n_nodes`` Gauss-Hermite nodes (tensor product)."""
        x, w = gauss_hermite(n_nodes)
        P = len(self.weight)
        return self._extend(np.tile(x, (P, 1)), np.tile(w, (P, 1)))

    def add_split(self, jumps: np.ndarray, n_per_panel: int) -> Grid:
        r"""Add an axis from Gauss-Legendre panels whose edges include ``jumps`` (shape (P, J)).

        Panel :math:`[a, b]` gets nodes :math:`x_i = \frac{a+b}2 + \frac{b-a}2 s_i` and weights
        :math:`\frac{b-a}2 v_i\,\varphi(x_i)` (Legendre :math:`s_i, v_i`); edges are clipped
        to :math:`[-10, 10]` (Gaussian mass outside: :math:`1.5\cdot 10^{-23}`).
        """
        P = len(self.weight)
        fixed = np.tile(np.array(SPLIT_EDGES), (P, 1))
        edges = np.sort(np.column_stack([fixed, np.clip(jumps, -10.0, 10.0)]), axis=1)
        a, b = edges[:, :-1], edges[:, 1:]  # (P, K)
        s, v = leggauss(n_per_panel)
        mid, half = (a + b) / 2, (b - a) / 2
        nodes = (mid[:, :, None] + half[:, :, None] * s).reshape(P, -1)
        weights = (half[:, :, None] * v).reshape(P, -1)
        weights = weights * np.exp(-(nodes**2) / 2) / math.sqrt(2 * math.pi)
        return self._extend(nodes, weights)
