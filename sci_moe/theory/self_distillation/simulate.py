r"""Finite-N simulation of multi-stage self-distillation in the noisy Gaussian mixture.

Exactly the model of :class:`.SelfDistillationModel`: data from a seeded
``numpy.random.Generator``, stage-wise training from scratch on the same inputs (closed-form
ridge with an unregularised bias for MSE, L-BFGS on the exact convex objective for BCE), and the
exact population error of every trained classifier from its :math:`(m, Q, b)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from .model import SelfDistillationModel, classification_error
from .multistage import _check_hyper, pseudo_labels

__all__ = ["SimulationResult", "sample_mixture", "simulate", "train_stage", "train_stages"]


def sample_mixture(
    model: SelfDistillationModel, n_features: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Draw :math:`M = \mathrm{round}(\alpha N)` samples of the mixture.

    Returns
    -------
    X : ndarray, shape (M, N)
        :math:`x_\mu = c_\mu\mathbf 1/\sqrt N + \sqrt\Delta g_\mu`.
    c : ndarray, shape (M,)
        Clusters in {+1, -1}.
    y : ndarray, shape (M,)
        Noisy labels in {0, 1} (flipped w.p. ``theta``).
    """
    if int(n_features) != n_features or n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
    N = int(n_features)
    M = max(1, round(model.alpha * N))
    c = np.where(rng.random(M) < model.rho, 1.0, -1.0)
    X = c[:, None] / np.sqrt(N) + np.sqrt(model.delta) * rng.standard_normal((M, N))
    flip = rng.random(M) < model.theta
    y = np.where(flip, (1 - c) / 2, (1 + c) / 2)
    return X, c, y


def train_stage(
    X: np.ndarray, labels: np.ndarray, loss: str, lam: float, learn_bias: bool
) -> tuple[np.ndarray, float]:
    r"""Train one stage from scratch.

    Minimises :math:`\sum_\mu \ell(\tilde y_\mu, w\cdot x_\mu/\sqrt N + B)
    + \frac\lambda2\lVert w\rVert^2`.

    MSE: :math:`\ell = \frac14(u - t)^2`, :math:`t = 2\tilde y - 1`, so
    :math:`(A_c^\top A_c + 2\lambda I) w = A_c^\top t_c` with :math:`A = X/\sqrt N` and the columns
    of :math:`A` and :math:`t` centred when the bias is learned (:math:`B = \overline{t - A w}`).
    BCE: L-BFGS with gradient :math:`A^\top(\sigma(u) - \tilde y) + \lambda w`,
    :math:`\partial_B = \sum_\mu(\sigma(u_\mu) - \tilde y_\mu)`.

    Returns
    -------
    w : ndarray, shape (N,)
    B : float
    """
    N = X.shape[1]
    A = X / np.sqrt(N)
    if loss == "mse":
        t = 2 * labels - 1
        if learn_bias:
            Am = A.mean(axis=0)
            Ac = A - Am
            w = np.linalg.solve(Ac.T @ Ac + 2 * lam * np.eye(N), Ac.T @ (t - t.mean()))
            return w, float(t.mean() - Am @ w)
        return np.linalg.solve(A.T @ A + 2 * lam * np.eye(N), A.T @ t), 0.0

    def objective(p):
        w, B = p[:N], (p[N] if learn_bias else 0.0)
        u = A @ w + B
        f = np.sum(np.logaddexp(0.0, -u) + (1 - labels) * u) + 0.5 * lam * (w @ w)
        r = expit(u) - labels
        g = np.append(A.T @ r + lam * w, r.sum()) if learn_bias else A.T @ r + lam * w
        return f, g

    p0 = np.zeros(N + 1 if learn_bias else N)
    res = minimize(
        objective,
        p0,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 20_000, "gtol": 1e-10, "ftol": 1e-15, "maxcor": 30},
    )
    return res.x[:N], (float(res.x[N]) if learn_bias else 0.0)


def train_stages(
    X: np.ndarray,
    y: np.ndarray,
    model: SelfDistillationModel,
    lambdas: Sequence[float],
    betas: Sequence[float] = (),
) -> list[tuple[np.ndarray, float]]:
    """Train all stages from scratch on the same inputs.

    Stage ``t > 1`` trains on :func:`.pseudo_labels` of stage ``t - 1``'s training outputs.

    Returns
    -------
    list of (w, B), one per stage
    """
    lambdas, betas = _check_hyper(lambdas, betas)
    out = []
    labels = y
    for t, lam in enumerate(lambdas):
        w, B = train_stage(X, labels, model.loss, lam, model.learn_bias)
        out.append((w, B))
        if t + 1 < len(lambdas):
            u = X @ w / np.sqrt(X.shape[1]) + B
            labels = pseudo_labels(model.loss, u, betas[t])
    return out


@dataclass(frozen=True)
class SimulationResult:
    """Per-seed population errors of every stage.

    Attributes
    ----------
    errors : ndarray, shape (n_seeds, T)
    m, Q, b : ndarray, shape (n_seeds, T)
        Order parameters of the trained weights.
    """

    errors: np.ndarray
    m: np.ndarray
    Q: np.ndarray
    b: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        """Mean error over seeds, shape (T,)."""
        return self.errors.mean(axis=0)

    @property
    def sem(self) -> np.ndarray:
        """Standard error of the mean over seeds, shape (T,)."""
        n = self.errors.shape[0]
        return (
            self.errors.std(axis=0, ddof=1) / np.sqrt(n)
            if n > 1
            else np.full(self.errors.shape[1], np.nan)
        )


def simulate(
    model: SelfDistillationModel,
    lambdas: Sequence[float],
    betas: Sequence[float] = (),
    n_features: int = 500,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
) -> SimulationResult:
    r"""Simulate self-distillation at finite ``N`` for several seeds.

    Each seed draws a data set with ``numpy.random.default_rng(seed)``, trains every stage and
    records :math:`m = w\cdot\mathbf 1/N`, :math:`Q = \lVert w\rVert^2/N`, :math:`b = B` and the
    exact population error :func:`.classification_error`.
    """
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must hold at least one seed")
    rows = []
    for seed in seeds:
        X, _, y = sample_mixture(model, n_features, np.random.default_rng(seed))
        row = []
        for w, B in train_stages(X, y, model, lambdas, betas):
            m, Q = float(w.mean()), float(w @ w / len(w))
            row.append((classification_error(m, Q, B, model), m, Q, B))
        rows.append(row)
    a = np.array(rows)  # (seeds, T, 4)
    return SimulationResult(errors=a[..., 0], m=a[..., 1], Q=a[..., 2], b=a[..., 3])
