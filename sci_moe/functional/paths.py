"""Control paths of irregularly observed functions for neural CDEs.

Each observed function ``(t_i, x_i)`` becomes a continuous path ``X(t) = (t, x(t))``
(time as a channel) where ``x`` is a cubic interpolant through the observations and is
held constant before the first and after the last observation. The interpolant is then
written *exactly* as torchcde cubic coefficients on any common grid that contains the
observation times, so a batch of functions observed at different times shares one grid
(a piecewise cubic with knots at a subset of the grid is a piecewise cubic on the grid).

Interpolants (``kind``):

* ``"natural"``: natural cubic spline (``x'' = 0`` at the ends), as ``torchcde``'s
  ``natural_cubic_coeffs``; reproduces polynomials of degree <= 1.
* ``"not-a-knot"``: cubic spline with not-a-knot ends; reproduces cubics exactly.
* ``"hermite"``: monotone piecewise cubic Hermite (PCHIP, Fritsch-Carlson slopes);
  local, no overshoot, reproduces degree <= 1 away from extrema.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from scipy.interpolate import CubicSpline, PchipInterpolator

__all__ = [
    "SPLINE_KINDS",
    "build_paths",
    "interpolant",
    "path_summary",
    "spline_coefficients",
    "symmetric_grid",
]

SPLINE_KINDS = ("natural", "not-a-knot", "hermite")
#: Number of features returned by :func:`path_summary`.
SUMMARY_SIZE = 4


class _Constant:
    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self, t, nu: int = 0):
        t = np.asarray(t, dtype=np.float64)
        return np.full_like(t, self.value if nu == 0 else 0.0)


def interpolant(times: np.ndarray, values: np.ndarray, kind: str = "natural"):
    """Cubic interpolant through ``(times, values)``, callable as ``f(t, nu)``.

    Parameters
    ----------
    times, values : ndarray, shape (n,)
        Increasing times, finite values, ``n >= 1`` (one point gives a constant).
    kind : {"natural", "not-a-knot", "hermite"}

    Returns
    -------
    callable
        ``f(t, nu=0)`` evaluates the ``nu``-th derivative (scipy ``PPoly`` convention).
    """
    if kind not in SPLINE_KINDS:
        raise ValueError(f"kind must be one of {SPLINE_KINDS}, got {kind!r}")
    if len(times) == 1:
        return _Constant(float(values[0]))
    if kind == "hermite":
        return PchipInterpolator(times, values, extrapolate=True)
    if len(times) == 2:  # a cubic spline through two points is the chord
        return CubicSpline(times, values, bc_type="natural")
    bc = "natural" if kind == "natural" else "not-a-knot"
    return CubicSpline(times, values, bc_type=bc)


def spline_coefficients(
    times: np.ndarray, values: np.ndarray, grid: np.ndarray, kind: str = "natural"
) -> np.ndarray:
    """Cubic coefficients of the path value on every interval of ``grid``.

    On ``[g_k, g_{k+1}]`` the path is ``a + b s + (2c)/2 s^2 + (3d)/3 s^3`` with
    ``s = t - g_k`` (the ``torchcde.CubicSpline`` layout), i.e. ``a = x(g_k)``,
    ``b = x'(g_k)``, ``2c = x''(g_k)``, ``3d = x'''/2``, taken from the piece that
    covers the interval (Taylor expansion about its midpoint, exact for cubics). Outside
    ``[times[0], times[-1]]`` the path is constant.

    Parameters
    ----------
    times, values : ndarray, shape (n,)
    grid : ndarray, shape (L,)
        Increasing; must contain every observation time inside its range.
    kind : str
        See :data:`SPLINE_KINDS`.

    Returns
    -------
    ndarray, shape (L - 1, 4)
        Columns ``a, b, 2c, 3d``.
    """
    grid = np.asarray(grid, dtype=np.float64)
    f = interpolant(times, values, kind)
    left, right = grid[:-1], grid[1:]
    mid = 0.5 * (left + right)
    d = left - mid
    p = [f(mid, nu) for nu in range(4)]
    a = p[0] + p[1] * d + p[2] * d**2 / 2 + p[3] * d**3 / 6
    b = p[1] + p[2] * d + p[3] * d**2 / 2
    two_c = p[2] + p[3] * d
    three_d = p[3] / 2
    out = np.stack([a, b, two_c, three_d], axis=-1)
    before, after = right <= times[0], left >= times[-1]
    out[before] = [values[0], 0.0, 0.0, 0.0]
    out[after] = [values[-1], 0.0, 0.0, 0.0]
    inside = (times > grid[0]) & (times < grid[-1])
    if not np.isin(times[inside], grid).all():
        raise ValueError(
            "the grid must contain every observation time; build it with symmetric_grid"
        )
    return out


def symmetric_grid(times: Sequence[np.ndarray], base: np.ndarray, decimals: int = 12) -> np.ndarray:
    """Sorted union of ``base``, all ``times`` and their mirror images ``1 - t``.

    The mirror makes the grid of the time-reversed paths (backward CDE) the same grid.

    Parameters
    ----------
    times : sequence of ndarray
        Observation times scaled to ``[0, 1]``.
    base : ndarray
        Extra grid points (e.g. the attention quadrature grid, including 0 and 1).
    decimals : int
        Times equal after rounding to this many decimals are merged.

    Returns
    -------
    ndarray, shape (L,)
    """
    pts = np.concatenate([np.asarray(base, dtype=np.float64), *times])
    pts = np.concatenate([pts, 1.0 - pts])
    grid = np.unique(np.round(pts, decimals))
    return grid[(grid >= 0.0) & (grid <= 1.0)]


def build_paths(
    samples: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]],
    grid: np.ndarray,
    kind: str = "natural",
    reverse: bool = False,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """torchcde coefficients of the paths ``X = (t, x(t))`` of a batch of functions.

    Parameters
    ----------
    samples : sequence (B) of sequences (J) of (times, values)
        Times scaled to ``[0, 1]`` and rounded like ``grid``.
    grid : ndarray, shape (L,)
        From :func:`symmetric_grid`; ``[0, 1]`` its first and last points.
    kind : str
        See :data:`SPLINE_KINDS`.
    reverse : bool
        Build the time-reversed paths ``X(1 - s)`` (the backward CDE runs on them).
    dtype : torch.dtype, optional
        Default: torch's default dtype.

    Returns
    -------
    Tensor, shape (B, J, L - 1, 8)
        ``[a, b, 2c, 3d]`` for the two channels (time, value), torchcde layout.
    """
    grid = np.asarray(grid, dtype=np.float64)
    rgrid = np.round(1.0 - grid[::-1], 12)
    if reverse and not np.allclose(rgrid, grid, atol=1e-12):
        raise ValueError("reverse=True needs a mirror-symmetric grid (symmetric_grid)")
    dt = np.diff(grid)
    time_coeffs = np.stack([grid[:-1], np.ones_like(dt), 0 * dt, 0 * dt], axis=-1)
    out = np.empty((len(samples), len(samples[0]), len(grid) - 1, 8))
    for i, sample in enumerate(samples):
        for j, (t, v) in enumerate(sample):
            if reverse:
                t, v = np.round(1.0 - t[::-1], 12), v[::-1]
            c = spline_coefficients(t, v, grid, kind)
            out[i, j] = np.stack([time_coeffs, c], axis=1).transpose(0, 2, 1).reshape(-1, 8)
    return torch.as_tensor(out, dtype=dtype or torch.get_default_dtype())


def path_summary(
    times: np.ndarray, values: np.ndarray, kind: str = "natural", num_points: int = 129
) -> np.ndarray:
    """Sampling-robust summary ``s`` of one function, from its path (not its samples).

    .. math::
        s = \\big(\\bar x,\\ \\mathrm{sd}(x),\\ \\overline{|x'|},
        \\ \\log(1 + \\overline{|x''|})\\big)

    with bars the averages over ``num_points`` equispaced points of ``[0, 1]``
    (trapezoid rule). Refining the observations of a smooth function changes ``s`` only
    by the interpolation error.

    Parameters
    ----------
    times, values : ndarray, shape (n,)
        Times scaled to ``[0, 1]``.
    kind : str
    num_points : int

    Returns
    -------
    ndarray, shape (4,)
    """
    f = interpolant(times, values, kind)
    u = np.linspace(0.0, 1.0, num_points)
    inside = (u >= times[0]) & (u <= times[-1])

    def deriv(nu):
        return np.where(inside, f(np.clip(u, times[0], times[-1]), nu), 0.0)

    x = f(np.clip(u, times[0], times[-1]), 0)
    mean = np.trapezoid(x, u)
    sd = np.sqrt(max(np.trapezoid((x - mean) ** 2, u), 0.0))
    return np.array(
        [
            mean,
            sd,
            np.trapezoid(np.abs(deriv(1)), u),
            np.log1p(np.trapezoid(np.abs(deriv(2)), u)),
        ]
    )
