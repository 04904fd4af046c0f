r"""Replica-symmetric solver for multi-stage self-distillation (stages ``t = 1..T``).

Stage 1 trains on the noisy labels, stage ``t > 1`` on pseudo-labels of the previous stage's
training outputs: :math:`\tilde y_t = \sigma(\beta_{t-1} u_{t-1})` (BCE) or
:math:`(\beta_{t-1} u_{t-1} + 1)/2` (MSE); :math:`\beta = \infty` gives hard labels
:math:`\mathbb 1[u_{t-1} > 0]`. Cross-stage overlaps :math:`Q_{st} = w_s\cdot w_t/N` and responses
:math:`\chi_{st} = \partial w_t/\partial\zeta_s` are kept. Fields
:math:`\omega_s = c\,m_s + b_s + (U^\top\xi)_s` with :math:`U^\top U = \Delta Q` (upper Cholesky):

.. math::

    h_t = \omega_t + \sum_{s<t}\frac{\chi_{st}}{\chi_{ss}} z_s,\qquad
    z_t = \arg\min_z \ell(\tilde y_t, h_t + z) + \frac{z^2}{2\Delta\chi_{tt}},\qquad
    u_t = h_t + z_t,

    \hat m_t = \frac{\alpha}{\Delta\chi_{tt}}\mathbb E[c z_t],\quad
    \hat\chi_{st} = \frac{\alpha}{\Delta\chi_{ss}\chi_{tt}}\mathbb E[z_s z_t],\quad
    \hat Q_{1:t,t} = -\frac{\alpha}{\chi_{tt}} U^{-1}\mathbb E[\xi z_t],\quad
    \mathbb E[z_t] = 0\ (b_t).

Weight side, with :math:`w_t = (\hat m_t\mathbf 1 + \zeta_t - \sum_{s<t}\hat Q_{st} w_s)/
(\hat Q_{tt}+\lambda_t)`, :math:`\mathrm{Cov}(\zeta_s,\zeta_t) = \hat\chi_{st}`: writing
:math:`w_t = m_t\mathbf 1 + \sum_r C_{tr}\zeta_r`,

.. math::

    m_t = \frac{\hat m_t - \sum_{s<t}\hat Q_{st} m_s}{\hat Q_{tt}+\lambda_t},\quad
    C_{t\cdot} = \frac{e_t - \sum_{s<t}\hat Q_{st} C_{s\cdot}}{\hat Q_{tt}+\lambda_t},\quad
    Q_{st} = m_s m_t + C_{s\cdot}\hat\chi C_{t\cdot}^\top,\quad \chi_{st} = C_{ts}.

:math:`\chi_{st}` keeps every :math:`\hat Q_{rt}` (:math:`s \le r < t`); the authors' notebook
keeps only :math:`r = t-1`, which is the same for ``T <= 2``. A stage depends only on the earlier
ones, so the stages are solved one after another, each by damped fixed-point iteration.
Expectations use the stage-wise quadrature of :mod:`.grid` (Gauss-Hermite, with the jumps of
hard pseudo-labels split out) or fixed Monte Carlo draws (common random numbers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import expit

from .grid import Grid, split_targets
from .model import SelfDistillationModel, classification_error
from .prox import loss_derivative, solve_prox
from .quadrature import gaussian_points
from .solver import ConvergenceError, SolverConfig, relative_residual, solve_bias
from .stage0 import StageResult, check_lambda, hebbian_start

__all__ = ["MultiStageResult", "pseudo_labels", "solve_multistage"]


@dataclass(frozen=True)
class MultiStageResult:
    """Saddle point of ``T`` stages.

    Attributes
    ----------
    stages : list of StageResult
        Per stage (diagonal order parameters, error, iterations, residual).
    Q, chi, Q_hat, chi_hat : ndarray, shape (T, T)
        Cross-stage overlaps (symmetric ``Q``, ``chi_hat``; ``chi[s, t]`` and ``Q_hat[s, t]``
        for ``s <= t``, zero below the diagonal).
    lambdas, betas : tuple of float
        The hyper-parameters solved for (``betas`` has ``T - 1`` entries).
    integration : str
        ``"quadrature"`` or ``"monte_carlo"``.
    """

    stages: list[StageResult]
    Q: np.ndarray
    chi: np.ndarray
    Q_hat: np.ndarray
    chi_hat: np.ndarray
    lambdas: tuple[float, ...]
    betas: tuple[float, ...]
    integration: str

    @property
    def errors(self) -> np.ndarray:
        """Test error of every stage, shape (T,)."""
        return np.array([s.error for s in self.stages])

    @property
    def error(self) -> float:
        """Test error of the final stage."""
        return self.stages[-1].error


def pseudo_labels(loss: str, u, beta: float):
    r"""Pseudo-labels from training outputs ``u`` at inverse temperature ``beta``.

    .. math::

        \tilde y = \sigma(\beta u)\ (\text{BCE}),\qquad \tilde y = (\beta u + 1)/2\ (\text{MSE}),
        \qquad \tilde y = \mathbb 1[u > 0]\ (\beta = \infty).
    """
    u = np.asarray(u, dtype=float)
    if math.isinf(beta):
        return (u > 0).astype(float)
    if loss == "bce":
        return expit(beta * u)
    return (beta * u + 1) / 2


def _check_hyper(lambdas, betas) -> tuple[tuple[float, ...], tuple[float, ...]]:
    lambdas = tuple(check_lambda(lam, "lambdas[i]") for lam in np.atleast_1d(lambdas))
    betas = tuple(float(b) for b in np.atleast_1d(betas if betas is not None else []))
    if len(lambdas) < 1:
        raise ValueError("lambdas must hold one ridge strength per stage (at least one)")
    if len(betas) != len(lambdas) - 1:
        raise ValueError(
            f"betas must hold T - 1 = {len(lambdas) - 1} inverse temperatures (one per "
            f"teacher stage; use numpy.inf for hard labels), got {len(betas)}"
        )
    for beta in betas:
        if not beta > 0 or math.isnan(beta):
            raise ValueError(f"every beta must be > 0 (numpy.inf for hard labels), got {beta!r}")
    return lambdas, betas


def _n_points(loss: str, T: int, betas, config: SolverConfig) -> int:
    """Number of quadrature points of the last stage."""
    if T == 1:
        return 4 * config.n_nodes
    n = 4
    for t in range(T - 1):
        k = len(split_targets(loss, betas[t]))
        n *= (k + 7) * config.n_split_nodes if k else config.n_nodes_multi
    return n * config.n_nodes_multi


def solve_multistage(
    model: SelfDistillationModel,
    lambdas: Sequence[float],
    betas: Sequence[float] = (),
    config: SolverConfig | None = None,
) -> MultiStageResult:
    r"""Solve the saddle-point equations of ``T = len(lambdas)`` self-distillation stages.

    Parameters
    ----------
    model : SelfDistillationModel
    lambdas : sequence of float, length T
        Ridge strength of every stage.
    betas : sequence of float, length T - 1
        Inverse temperature of the pseudo-labels made by stages ``1..T-1``; ``numpy.inf`` for
        hard labels.
    config : SolverConfig, optional

    Returns
    -------
    MultiStageResult

    Raises
    ------
    ConvergenceError
        When a stage's iteration has not converged after ``config.max_iter`` iterations.
    """
    config = config or SolverConfig()
    lambdas, betas = _check_hyper(lambdas, betas)
    T = len(lambdas)
    alpha, delta, loss = model.alpha, model.delta, model.loss
    method = config.integration
    if method == "auto":
        small = _n_points(loss, T, betas, config) <= config.max_quadrature_points
        method = "quadrature" if small else "monte_carlo"
    c4, y4, p4 = model.class_table()
    grid = Grid.classes(c4, y4, p4)
    if method == "monte_carlo":
        xi, wq = gaussian_points(T, 2, "monte_carlo", config.n_samples, config.seed)
        n = len(wq)
        grid = Grid(
            c=np.repeat(c4, n),
            y=np.repeat(y4, n),
            weight=np.repeat(p4, n) * np.tile(wq, 4),
            xi=np.tile(xi, (4, 1)),
        )
    # rho = 1/2: loss, labels and pseudo-labels are odd under (c, y, u) -> (-c, 1-y, -u): b = 0
    symmetric = model.rho == 0.5
    m = np.zeros(T)
    b = np.zeros(T)
    Q = np.zeros((T, T))
    U = np.zeros((T, T))
    C = np.zeros((T, T))
    Q_hat = np.zeros((T, T))
    chi_hat = np.zeros((T, T))
    stages = []
    for t in range(T):
        lam = lambdas[t]
        parent = grid
        if method == "quadrature":
            grid = parent.add_hermite(config.n_nodes if T == 1 else config.n_nodes_multi)
        c, xi_t = grid.c, grid.xi[:, : t + 1]
        labels = grid.y if t == 0 else grid.arrays["labels"]
        z_prev = [grid.arrays[f"z{s}"] for s in range(t)]
        m0, Q0, chi0 = hebbian_start(model, lam)
        # unknowns: m_t, Q[:t+1, t], C[t, :t+1]
        x = np.concatenate([[m0], np.zeros(t), [Q0], np.zeros(t), [chi0]])
        residual = math.inf
        bt = 0.0
        for it in range(1, config.max_iter + 1):
            m_t, Qcol, Crow = x[0], x[1 : t + 2], x[t + 2 :]
            # Cholesky column: U[:t, t] solves U[:t, :t]^T u = Delta Q[:t, t]
            ucol = solve_triangular(U[:t, :t], delta * Qcol[:t], trans="T") if t else np.zeros(0)
            utt2 = delta * Qcol[t] - ucol @ ucol
            if not utt2 > 0:
                raise ConvergenceError(
                    f"stage {t + 1}: overlap matrix lost positive definiteness at iteration "
                    f"{it}; try a larger damping",
                    residual=residual,
                    iterations=it,
                )
            ucol_full = np.append(ucol, math.sqrt(utt2))
            rest = c * m_t + xi_t @ ucol_full
            for s in range(t):
                rest = rest + (Crow[s] / C[s, s]) * z_prev[s]
            scale = delta * Crow[t]
            if model.learn_bias and not symmetric:

                def mean_z(bias, rest=rest, scale=scale, labels=labels, grid=grid):
                    z, dz = solve_prox(loss, rest + bias, labels, scale)
                    return grid.expect(z), grid.expect(dz)

                bt = solve_bias(mean_z, bt, math.sqrt(utt2) + abs(m_t) + 1e-300)
            z = solve_prox(loss, rest + bt, labels, scale)[0]
            m_hat = alpha / scale * grid.expect(c * z)
            chi_hat_col = np.array(
                [alpha / (delta * C[s, s] * Crow[t]) * grid.expect(z_prev[s] * z) for s in range(t)]
                + [alpha / (delta * Crow[t] ** 2) * grid.expect(z * z)]
            )
            Uk = U[: t + 1, : t + 1].copy()
            Uk[:, t] = ucol_full
            e_xi_z = np.array([grid.expect(xi_t[:, i] * z) for i in range(t + 1)])
            qhat_col = -alpha / Crow[t] * solve_triangular(Uk, e_xi_z)
            denom = qhat_col[t] + lam
            new_m = (m_hat - qhat_col[:t] @ m[:t]) / denom
            new_C = (np.eye(T)[t, : t + 1] - qhat_col[:t] @ C[:t, : t + 1]) / denom
            chi_hat_k = chi_hat[: t + 1, : t + 1].copy()
            chi_hat_k[:t, t] = chi_hat_col[:t]
            chi_hat_k[t, :t] = chi_hat_col[:t]
            chi_hat_k[t, t] = chi_hat_col[t]
            C_k = C[: t + 1, : t + 1].copy()
            C_k[t] = new_C
            new_Q = np.append(m[:t], new_m) * new_m + C_k @ chi_hat_k @ new_C
            new = np.concatenate([[new_m], new_Q, new_C])
            residual = relative_residual(new, x)
            if not math.isfinite(residual) or new_Q[t] <= 0 or new_C[t] <= 0:
                raise ConvergenceError(
                    f"stage {t + 1}: iteration became degenerate at iteration {it}; try a "
                    "larger damping or lambda",
                    residual=residual,
                    iterations=it,
                )
            if residual < config.tol:
                x = new
                break
            x = config.damping * x + (1 - config.damping) * new
        else:
            raise ConvergenceError(
                f"stage {t + 1} of {T} did not converge in {config.max_iter} iterations: last "
                f"residual {residual:.3e} > tol {config.tol:.1e} (model={model}, "
                f"lambdas={lambdas}, betas={betas}); raise max_iter or damping",
                residual=residual,
                iterations=config.max_iter,
            )
        # store the converged stage (x = F(x) to tol)
        m[t], b[t] = x[0], bt
        Q[: t + 1, t] = Q[t, : t + 1] = x[1 : t + 2]
        C[t, : t + 1] = x[t + 2 :]
        ucol = solve_triangular(U[:t, :t], delta * Q[:t, t], trans="T") if t else np.zeros(0)
        U[: t + 1, t] = np.append(ucol, math.sqrt(delta * Q[t, t] - ucol @ ucol))
        Q_hat[: t + 1, t] = qhat_col
        chi_hat[: t + 1, : t + 1] = chi_hat_k
        stages.append(
            StageResult(
                m=float(m[t]),
                Q=float(Q[t, t]),
                chi=float(C[t, t]),
                b=float(b[t]),
                m_hat=float(m_hat),
                Q_hat=float(qhat_col[t]),
                chi_hat=float(chi_hat_k[t, t]),
                error=classification_error(m[t], Q[t, t], b[t], model),
                iterations=it,
                residual=residual,
            )
        )
        if t + 1 == T:
            break
        # the stage's per-point output, for the later stages
        targets = split_targets(loss, betas[t])
        if method == "quadrature" and targets:
            # rebuild the xi_t axis around the jumps of the next labels
            rest0 = parent.c * m[t] + b[t] + parent.xi[:, :t] @ U[:t, t]
            for s in range(t):
                rest0 = rest0 + (C[t, s] / C[s, s]) * parent.arrays[f"z{s}"]
            lab0 = parent.y if t == 0 else parent.arrays["labels"]
            tau = np.array(targets)[None, :]
            h_jump = tau + delta * C[t, t] * loss_derivative(loss, lab0[:, None], tau)
            grid = parent.add_split((h_jump - rest0[:, None]) / U[t, t], config.n_split_nodes)
        labels = grid.y if t == 0 else grid.arrays["labels"]
        h = grid.c * m[t] + b[t] + grid.xi[:, : t + 1] @ U[: t + 1, t]
        for s in range(t):
            h = h + (C[t, s] / C[s, s]) * grid.arrays[f"z{s}"]
        z_t = solve_prox(loss, h, labels, delta * C[t, t])[0]
        grid.arrays[f"z{t}"] = z_t
        grid.arrays["labels"] = pseudo_labels(loss, h + z_t, betas[t])
    return MultiStageResult(
        stages=stages,
        Q=Q,
        chi=C.T.copy(),
        Q_hat=Q_hat,
        chi_hat=chi_hat,
        lambdas=lambdas,
        betas=betas,
        integration=method,
    )
