r"""Closed-form large-ridge ("Hebbian") limits of one stage.

For :math:`\rho = 1/2` and :math:`\lambda\to\infty` both losses give
:math:`w \propto \sum_\mu (2y_\mu - 1) x_\mu`, with :math:`\hat m \to \alpha(1-2\theta)/2`,
:math:`\hat\chi \to \alpha\Delta/4`, so :math:`m/\sqrt{\Delta Q} \to \hat m/\sqrt{\Delta(\hat m^2 +
\hat\chi)}` and

.. math::

    \varepsilon_{\rm Hebb} = H\!\left(\frac{1-2\theta}
    {\sqrt{\Delta\,((1-2\theta)^2 + \Delta/\alpha)}}\right),

which is :math:`H(1/\sqrt{\Delta(1+\Delta/\alpha)})` without noise and the optimal 0-SD error
for MSE.
"""

from __future__ import annotations

import math

from scipy.special import ndtr

__all__ = ["hebbian_error", "hebbian_error_noiseless"]


def _check(alpha: float, theta: float, delta: float) -> None:
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    if not 0 <= theta <= 0.5:
        raise ValueError(f"theta must be in [0, 0.5], got {theta!r}")
    if not delta > 0:
        raise ValueError(f"delta must be > 0, got {delta!r}")


def hebbian_error_noiseless(alpha: float, delta: float = 1.0) -> float:
    r"""Noiseless Hebbian error :math:`H\big(1/\sqrt{\Delta(1 + \Delta/\alpha)}\big)`."""
    _check(alpha, 0.0, delta)
    return float(ndtr(-1.0 / math.sqrt(delta * (1.0 + delta / alpha))))


def hebbian_error(alpha: float, theta: float = 0.0, delta: float = 1.0) -> float:
    r"""Hebbian error with label noise :math:`\theta` (see the module docstring)."""
    _check(alpha, theta, delta)
    k = 1.0 - 2.0 * theta
    if k == 0.0:
        return 0.5
    return float(ndtr(-k / math.sqrt(delta * (k * k + delta / alpha))))
