"""Shared solver pieces: configuration, convergence error, residual, bias root-finding."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

__all__ = ["ConvergenceError", "SolverConfig", "relative_residual", "solve_bias"]

INTEGRATIONS = ("auto", "quadrature", "monte_carlo")


class ConvergenceError(ValueError):
    """A saddle-point iteration stopped without converging.

    Attributes
    ----------
    residual : float
        The last relative residual :math:`\\max_i |F(x)_i - x_i| / \\max(|F(x)_i|, |x_i|)`.
    iterations : int
        Iterations done.
    """

    def __init__(self, message: str, residual: float, iterations: int):
        super().__init__(message)
        self.residual = residual
        self.iterations = iterations


@dataclass(frozen=True)
class SolverConfig:
    r"""Settings of the replica-symmetric fixed-point solvers.

    The iteration is :math:`x_{k+1} = d\,x_k + (1-d)\,F(x_k)` with damping :math:`d`; it stops
    when the relative residual of :math:`F(x_k) - x_k` is below ``tol`` and raises
    :class:`ConvergenceError` after ``max_iter`` iterations otherwise.

    Parameters
    ----------
    damping : float
        Weight of the old iterate, in ``[0, 1)``; 0.3-0.5 is robust (0.1, i.e. 90 % new, can
        oscillate for MSE).
    tol : float
        Relative residual at which to stop.
    max_iter : int
        Iterations before :class:`ConvergenceError`.
    n_nodes : int
        Gauss-Hermite nodes for one stage.
    n_nodes_multi : int
        Gauss-Hermite nodes in a stage's own Gaussian direction for several stages.
    n_split_nodes : int
        Gauss-Legendre nodes per panel where the next stage's labels jump (hard labels, BCE
        soft labels; see :mod:`.grid`).
    integration : {"auto", "quadrature", "monte_carlo"}
        Multi-stage expectations; ``"auto"`` uses quadrature while the last stage has at most
        ``max_quadrature_points`` points and fixed Monte Carlo draws beyond.
    n_samples : int
        Monte Carlo draws (common random numbers, fixed by ``seed``).
    seed : int
        Seed of the Monte Carlo draws; keep it fixed inside hyper-parameter optimisation.
    max_quadrature_points : int
        See ``integration``.
    """

    damping: float = 0.5
    tol: float = 1e-10
    max_iter: int = 2000
    n_nodes: int = 121
    n_nodes_multi: int = 61
    n_split_nodes: int = 12
    integration: str = "auto"
    n_samples: int = 10_000
    seed: int = 0
    max_quadrature_points: int = 100_000

    def __post_init__(self):
        if not 0.0 <= self.damping < 1.0:
            raise ValueError(f"damping must be in [0, 1), got {self.damping!r}")
        if not (self.tol > 0 and math.isfinite(self.tol)):
            raise ValueError(f"tol must be a finite number > 0, got {self.tol!r}")
        if int(self.max_iter) != self.max_iter or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}")
        for name in (
            "n_nodes",
            "n_nodes_multi",
            "n_split_nodes",
            "n_samples",
            "max_quadrature_points",
        ):
            value = getattr(self, name)
            if int(value) != value or value < 2:
                raise ValueError(f"{name} must be an integer >= 2, got {value!r}")
        if self.integration not in INTEGRATIONS:
            raise ValueError(f"integration must be one of {INTEGRATIONS}, got {self.integration!r}")


def relative_residual(new: np.ndarray, old: np.ndarray) -> float:
    r"""Max over entries of :math:`|x^{new} - x^{old}| / \max(|x^{new}|, |x^{old}|)`.

    Entries that are 0 in both count as 0; non-finite input gives ``inf``.
    """
    new = np.asarray(new, dtype=float)
    old = np.asarray(old, dtype=float)
    if not (np.all(np.isfinite(new)) and np.all(np.isfinite(old))):
        return math.inf
    scale = np.maximum(np.abs(new), np.abs(old))
    diff = np.abs(new - old)
    ratio = np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
    return float(np.max(ratio, initial=0.0))


def solve_bias(mean_z: Callable[[float], tuple[float, float]], b0: float, width: float) -> float:
    r"""Root of the bias stationarity condition :math:`g(b) = \mathbb E[z^*](b) = 0`.

    ``mean_z(b)`` returns :math:`(g(b), g'(b))` with
    :math:`g' = \mathbb E[\partial z^*/\partial\omega] \in (-1, 0]`, so :math:`g` decreases.
    Newton from the warm start ``b0`` first; if it stalls, the bracket grows geometrically
    from ``b0 ± width`` and ``brentq`` finds the root.
    """
    width = max(width, 1e-12)
    xtol = 1e-13 * (width + abs(b0))
    b = b0
    for _ in range(30):
        g, dg = mean_z(b)
        if g == 0.0:
            return b
        if not (dg < 0 and math.isfinite(g)):
            break
        step = -g / dg
        if abs(step) > 10 * width:
            break
        b += step
        if abs(step) <= xtol:
            return b

    def g_only(bias):
        return mean_z(bias)[0]

    f0 = g_only(b0)
    if f0 == 0.0:
        return b0
    lo, hi = (b0, b0 + width) if f0 > 0 else (b0 - width, b0)
    for _ in range(200):
        flo, fhi = g_only(lo), g_only(hi)
        if flo >= 0 >= fhi:
            break
        if f0 > 0:
            lo, hi = hi, hi + 2 * (hi - lo)
        else:
            lo, hi = lo - 2 * (hi - lo), lo
    else:
        raise ConvergenceError(
            "could not bracket the bias condition E[z*](b) = 0; the fixed point may be "
            "degenerate (try learn_bias=False or a larger lambda)",
            residual=math.inf,
            iterations=0,
        )
    if flo == 0.0:
        return lo
    if fhi == 0.0:
        return hi
    return brentq(g_only, lo, hi, xtol=xtol, rtol=1e-15)
