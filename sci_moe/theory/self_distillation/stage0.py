r"""Replica-symmetric solver for one stage (stage 0: training on the noisy labels).

Order parameters :math:`m = w\cdot\mathbf 1/N`, :math:`Q = \lVert w\rVert^2/N`, response
:math:`\chi`, bias :math:`b`, and conjugates :math:`\hat m, \hat Q, \hat\chi`. With
:math:`\omega = c\,m + b + \sqrt{\Delta Q}\,\xi`, :math:`\xi\sim\mathcal N(0,1)`, and the prox
:math:`z^*` of :mod:`.prox` at scale :math:`\Delta\chi`, expectations over :math:`(c, y, \xi)`:

.. math::

    \hat m = \frac{\alpha}{\Delta\chi}\mathbb E[c z^*],\quad
    \hat\chi = \frac{\alpha}{\Delta\chi^2}\mathbb E[z^{*2}],\quad
    \hat Q = -\frac{\alpha}{\chi}\mathbb E\Big[\frac{\partial z^*}{\partial\omega}\Big],\quad
    0 = \mathbb E[z^*]\ (\text{learned } b),

    m = \frac{\hat m}{\lambda + \hat Q},\quad Q = \frac{\hat m^2 + \hat\chi}{(\lambda+\hat Q)^2},
    \quad \chi = \frac{1}{\lambda + \hat Q}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .model import SelfDistillationModel, classification_error
from .prox import solve_prox
from .quadrature import gauss_hermite
from .solver import ConvergenceError, SolverConfig, relative_residual, solve_bias

__all__ = ["StageResult", "hebbian_start", "solve_stage0"]


@dataclass(frozen=True)
class StageResult:
    """Saddle point of one stage.

    Attributes
    ----------
    m, Q, chi, b : float
        Overlap with the cluster direction, self-overlap, response, bias.
    m_hat, Q_hat, chi_hat : float
        Conjugate parameters.
    error : float
        Population test error (:func:`.classification_error`).
    iterations : int
        Fixed-point iterations used.
    residual : float
        Final relative residual (below the configured ``tol``).
    """

    m: float
    Q: float
    chi: float
    b: float
    m_hat: float
    Q_hat: float
    chi_hat: float
    error: float
    iterations: int
    residual: float


def check_lambda(lam: float, name: str = "lam") -> float:
    """Validate a ridge strength (finite, > 0)."""
    lam = float(lam)
    if not (math.isfinite(lam) and lam > 0):
        raise ValueError(f"{name} must be a finite ridge strength > 0, got {lam!r}")
    return lam


def hebbian_start(model: SelfDistillationModel, lam: float) -> tuple[float, float, float]:
    r"""Starting point from the large-:math:`\lambda` expansion.

    :math:`\hat m \approx \alpha(1-2\theta)/2`, :math:`\hat\chi \approx \alpha\Delta/4`,
    :math:`\hat Q \approx \alpha\Delta/4`, then the weight-side equations.
    """
    m_hat = model.alpha * (1 - 2 * model.theta) / 2 + 1e-3
    chi_hat = model.alpha * model.delta / 4
    chi = 1.0 / (lam + model.alpha * model.delta / 4)
    return m_hat * chi, (m_hat**2 + chi_hat) * chi**2, chi


def solve_stage0(
    model: SelfDistillationModel, lam: float, config: SolverConfig | None = None
) -> StageResult:
    r"""Solve the stage-0 saddle-point equations by damped fixed-point iteration.

    Parameters
    ----------
    model : SelfDistillationModel
    lam : float
        Ridge strength :math:`\lambda > 0`.
    config : SolverConfig, optional

    Returns
    -------
    StageResult

    Raises
    ------
    ConvergenceError
        When the residual is still above ``config.tol`` after ``config.max_iter`` iterations
        (the message gives the last residual), or the iterate becomes non-finite.
    """
    config = config or SolverConfig()
    lam = check_lambda(lam)
    alpha, delta = model.alpha, model.delta
    c, y, p = model.class_table()
    xi, wq = gauss_hermite(config.n_nodes)
    c, y = c[:, None], y[:, None]
    weight = p[:, None] * wq[None, :]
    symmetric = model.rho == 0.5

    def expect(f):
        return float(np.sum(weight * f))

    x = np.array(hebbian_start(model, lam))
    b = 0.0
    residual = math.inf
    for it in range(1, config.max_iter + 1):
        m, Q, chi = x
        s = math.sqrt(delta * Q)
        scale = delta * chi

        def fields(bias, m=m, s=s):
            return c * m + bias + s * xi[None, :]

        if model.learn_bias and not symmetric:

            def mean_z(bias, fields=fields, scale=scale):
                z, dz = solve_prox(model.loss, fields(bias), y, scale)
                return expect(z), expect(dz)

            b = solve_bias(
                mean_z,
                b,
                s + abs(m) + 1e-300,
            )
        z, dz = solve_prox(model.loss, fields(b), y, scale)
        m_hat = alpha / scale * expect(c * z)
        chi_hat = alpha / (delta * chi**2) * expect(z**2)
        Q_hat = -alpha / chi * expect(dz)
        denom = lam + Q_hat
        new = np.array([m_hat / denom, (m_hat**2 + chi_hat) / denom**2, 1.0 / denom])
        residual = relative_residual(new, x)
        if not math.isfinite(residual) or new[1] <= 0 or new[2] <= 0:
            raise ConvergenceError(
                f"stage-0 iteration became degenerate at iteration {it} (m, Q, chi = {new}); "
                "try a larger damping or lambda",
                residual=residual,
                iterations=it,
            )
        if residual < config.tol:
            m, Q, chi = new
            return StageResult(
                m=float(m),
                Q=float(Q),
                chi=float(chi),
                b=float(b),
                m_hat=float(m_hat),
                Q_hat=float(Q_hat),
                chi_hat=float(chi_hat),
                error=classification_error(m, Q, b, model),
                iterations=it,
                residual=residual,
            )
        x = config.damping * x + (1 - config.damping) * new
    raise ConvergenceError(
        f"stage-0 fixed point did not converge in {config.max_iter} iterations: last residual "
        f"{residual:.3e} > tol {config.tol:.1e} (model={model}, lam={lam}); raise max_iter or "
        "damping",
        residual=residual,
        iterations=config.max_iter,
    )
