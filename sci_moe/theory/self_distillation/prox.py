r"""Proximal operators of the BCE and MSE losses (vectorised), with their derivatives.

For a field :math:`\omega`, label :math:`y` and scale :math:`s = \Delta\chi`,

.. math::

    z^*(\omega) = \arg\min_z\; \ell(y, \omega + z) + \frac{z^2}{2 s},

so that the training output is :math:`u = \omega + z^*` and :math:`\ell'(y, u) = -z^*/s`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = ["loss_derivative", "prox_bce", "prox_mse", "solve_prox"]


def prox_mse(omega, y, scale):
    r"""Closed-form prox of :math:`\ell = ((u+1)/2 - y)^2`.

    .. math::

        z^* = \frac{s\,(2y - 1 - \omega)}{2 + s},\qquad
        \frac{\partial z^*}{\partial\omega} = -\frac{s}{2 + s}.

    Returns
    -------
    z, dz_domega : ndarray, broadcast shape of the inputs
    """
    omega, y, scale = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (omega, y, scale)))
    z = scale * (2 * y - 1 - omega) / (2 + scale)
    return z, -scale / (2 + scale)


def prox_bce(omega, y, scale, tol: float = 1e-13, max_iter: int = 200):
    r"""Prox of :math:`\ell = \log(1+e^{-u}) + (1-y)u` by safeguarded Newton.

    Solves :math:`\sigma(\omega + z) - y + z/s = 0`; the root lies in
    :math:`(s(y-1), s y)` for :math:`y \in [0, 1]`, kept as a bracket (bisection when Newton
    leaves it or does not halve the residual); a point is done when the step, the bracket or
    the residual is at rounding level. The derivative is

    .. math::

        \frac{\partial z^*}{\partial\omega} = -\frac{\sigma'}{\sigma' + 1/s},\qquad
        \sigma' = \sigma(u)(1 - \sigma(u)).

    Returns
    -------
    z, dz_domega : ndarray, broadcast shape of the inputs
    """
    omega, y, scale = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (omega, y, scale)))
    lo = scale * (y - 1.0)
    hi = scale * y
    z = np.clip(scale * (y - expit(omega)), lo, hi)
    f_old = np.full(z.shape, np.inf)
    for _ in range(max_iter):
        sig = expit(omega + z)
        f = sig - y + z / scale
        lo = np.where(f < 0, z, lo)
        hi = np.where(f > 0, z, hi)
        z_new = z - f / (sig * (1 - sig) + 1 / scale)
        # bisect when Newton leaves the bracket or did not halve the residual (no ping-pong)
        slow = (z_new <= lo) | (z_new >= hi) | (np.abs(f) > 0.5 * np.abs(f_old))
        z_new = np.where(slow, 0.5 * (lo + hi), z_new)
        solved = np.abs(f) <= 1e-15 * (1 + np.abs(z) / scale)
        z_new = np.where(solved, z, z_new)
        f_old = f
        done = (
            solved
            | (np.abs(z_new - z) <= tol * (1 + np.abs(z)))
            | (hi - lo <= tol * (1 + np.abs(z)))
        )
        z = z_new
        if np.all(done):
            break
    else:
        raise ArithmeticError(f"BCE prox Newton did not converge in {max_iter} iterations")
    sig = expit(omega + z)
    d = sig * (1 - sig)
    return z, -d / (d + 1 / scale)


def solve_prox(loss: str, omega, y, scale):
    """Dispatch to :func:`prox_bce` or :func:`prox_mse` by ``loss`` name."""
    if loss == "bce":
        return prox_bce(omega, y, scale)
    if loss == "mse":
        return prox_mse(omega, y, scale)
    raise ValueError(f"loss must be 'bce' or 'mse', got {loss!r}")


def loss_derivative(loss: str, y, u):
    r""":math:`\partial_u\ell(y, u)`: :math:`\sigma(u) - y` (BCE), :math:`(u+1)/2 - y` (MSE)."""
    u = np.asarray(u, dtype=float)
    if loss == "bce":
        return expit(u) - y
    if loss == "mse":
        return (u + 1) / 2 - y
    raise ValueError(f"loss must be 'bce' or 'mse', got {loss!r}")
