r"""Practical heuristics of multi-stage self-distillation, and a convergence check of a stage.

Takanami, Takahashi and Sakata (NeurIPS 2025, arXiv:2501.16226) name two heuristics: *early
stopping that limits the number of stages* and *bias fixing under label imbalance* (the
latter is ``learn_bias=False`` of :class:`.SelfDistillationModel`, :func:`.train_stage` and
:class:`.EmpiricalSDConfig`). :func:`early_stopping_stage` is the usual validation rule for
the former (the paper's exact rule is not available as text); :func:`stage_gradient` checks
that a trained stage is at the optimum of its convex objective.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import expit

from .model import LOSSES

__all__ = ["early_stopping_stage", "stage_gradient"]


def early_stopping_stage(
    val_errors: Sequence[float], patience: int = 1, min_delta: float = 0.0
) -> int:
    r"""The stage at which validation-based early stopping of self-distillation stops.

    Stages are trained one after another; the best stage so far is kept. A stage
    *improves* when its validation error is below the best so far by more than
    ``min_delta``; after ``patience`` stages in a row that do not improve, training stops
    and the best stage so far is returned (stages ``0..T`` of ``val_errors`` at most). With
    ``patience=1`` the rule stops at the first stage that does not improve. It looks at the
    validation errors of the stages it trained only, so it can be applied after the fact to
    stages trained in order (each stage depends only on the earlier ones).

    Parameters
    ----------
    val_errors : sequence of float, shape (T + 1,)
        Validation error of stages ``0..T`` (stage 0: trained on the labels).
    patience : int
        Non-improving stages tolerated before stopping, ``>= 1``.
    min_delta : float
        Smallest decrease of the validation error that counts as an improvement, ``>= 0``.

    Returns
    -------
    int
        The chosen stage, in ``0..T``.
    """
    errs = [float(v) for v in val_errors]
    if not errs or not all(math.isfinite(v) for v in errs):
        raise ValueError("val_errors must be a non-empty sequence of finite numbers")
    if int(patience) != patience or patience < 1:
        raise ValueError(f"patience must be an integer >= 1, got {patience!r}")
    if not (math.isfinite(min_delta) and min_delta >= 0):
        raise ValueError(f"min_delta must be a finite number >= 0, got {min_delta!r}")
    best, bad = 0, 0
    for t in range(1, len(errs)):
        if errs[t] < errs[best] - min_delta:
            best, bad = t, 0
        else:
            bad += 1
            if bad >= patience:
                break
    return best


def stage_gradient(
    X: np.ndarray,
    labels: np.ndarray,
    loss: str,
    lam: float,
    learn_bias: bool,
    w: np.ndarray,
    B: float,
) -> float:
    r"""Largest absolute gradient entry of a stage's objective at ``(w, B)``, per sample.

    The objective of :func:`.train_stage`,
    :math:`\sum_\mu \ell(\tilde y_\mu, w\cdot x_\mu/\sqrt N + B) + \frac\lambda2\lVert w
    \rVert^2` (MSE: :math:`\ell = \frac14(u - (2\tilde y - 1))^2`), has the gradient
    :math:`A^\top r + \lambda w` in ``w`` and :math:`\sum_\mu r_\mu` in ``B`` (when learned),
    with :math:`A = X/\sqrt N` and :math:`r = \sigma(u) - \tilde y` (BCE) or
    :math:`(u - (2\tilde y - 1))/2` (MSE). Returns its max-norm divided by ``M``: zero at the
    (unique, convex) optimum, so a small value says the stage was trained to convergence.

    Parameters
    ----------
    X : ndarray, shape (M, N)
    labels : ndarray, shape (M,)
        Targets in [0, 1] the stage was trained on.
    loss : {"bce", "mse"}
    lam : float
        Ridge strength, ``> 0``.
    learn_bias : bool
    w : ndarray, shape (N,)
    B : float

    Returns
    -------
    float
        :math:`\lVert\nabla\rVert_\infty / M`.
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    X = np.asarray(X, dtype=float)
    labels = np.asarray(labels, dtype=float)
    w = np.asarray(w, dtype=float)
    if X.ndim != 2 or labels.shape != (X.shape[0],) or w.shape != (X.shape[1],):
        raise ValueError(
            f"need X (M, N), labels (M,), w (N,); got {X.shape}, {labels.shape}, {w.shape}"
        )
    M, N = X.shape
    A = X / np.sqrt(N)
    u = A @ w + B
    r = expit(u) - labels if loss == "bce" else (u - (2 * labels - 1)) / 2
    g = np.abs(A.T @ r + lam * w).max()
    if learn_bias:
        g = max(g, abs(r.sum()))
    return float(g / M)
