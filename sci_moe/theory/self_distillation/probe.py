r"""Linear probes on standardised features, trained stage after stage on pseudo-labels.

A probe :math:`u = v\cdot x + B` on features standardised with training statistics
(:class:`Standardizer`); :func:`train_probe_stages` trains stage 0 on the labels and stage
:math:`t` on the pseudo-labels of stage :math:`t-1` (Takanami, Takahashi and Sakata, NeurIPS
2025, arXiv:2501.16226, Sec. 5), reusing :func:`.train_stage` (L-BFGS for BCE, closed form
for MSE).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ._inputs import as_features
from .model import LOSSES
from .multistage import pseudo_labels
from .simulate import train_stage

__all__ = ["LinearProbe", "Standardizer", "train_probe_stages"]


@dataclass(frozen=True)
class Standardizer:
    """Per-feature standardisation ``(X - mean) / scale`` (constant features get scale 1)."""

    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, X) -> Standardizer:
        """Fit on ``X`` of shape (M, N)."""
        X = as_features(X)
        scale = X.std(axis=0)
        return cls(mean=X.mean(axis=0), scale=np.where(scale > 0, scale, 1.0))

    def transform(self, X) -> np.ndarray:
        """Standardise ``X`` of shape (M, N)."""
        X = as_features(X)
        if X.shape[1] != self.mean.shape[0]:
            raise ValueError(f"X has {X.shape[1]} features, the standardiser {len(self.mean)}")
        return (X - self.mean) / self.scale


@dataclass(frozen=True)
class LinearProbe:
    """Linear classifier :math:`u = v\\cdot x + B` on standardised features.

    Attributes
    ----------
    weights : ndarray, shape (N,)
    bias : float
    """

    weights: np.ndarray
    bias: float

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Outputs ``u`` on standardised features ``X`` of shape (M, N); shape (M,)."""
        return X @ self.weights + self.bias

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """:math:`\\sigma(u)`, shape (M,) (meaningful for BCE probes)."""
        return expit(self.decision_function(X))

    def error(self, X: np.ndarray, y: np.ndarray) -> float:
        """Fraction of ``y`` in {0, 1} that ``1[u > 0]`` gets wrong."""
        return float(np.mean((self.decision_function(X) > 0) != (y > 0.5)))


def train_probe_stages(
    X: np.ndarray,
    y: np.ndarray,
    lambdas: Sequence[float],
    betas: Sequence[float] = (),
    loss: str = "bce",
    learn_bias: bool = True,
) -> list[LinearProbe]:
    r"""Train stages ``0..T`` from scratch on the same (already standardised) inputs.

    Parameters
    ----------
    X : ndarray, shape (M, N)
        Standardised training features.
    y : ndarray, shape (M,)
        Training labels in {0, 1}.
    lambdas : sequence of float, length T + 1
        Ridge strengths :math:`\lambda_t > 0` (scikit-learn's ``1/C`` for BCE).
    betas : sequence of float, length T
        Inverse temperatures of the teachers' pseudo-labels; ``numpy.inf`` for hard labels.
    loss : {"bce", "mse"}
    learn_bias : bool
        Learn the (unregularised) bias, or fix it at 0 (the paper's bias fixing).

    Returns
    -------
    list of LinearProbe, one per stage
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if len(betas) != len(lambdas) - 1:
        raise ValueError(f"need len(betas) = len(lambdas) - 1, got {len(betas)}, {len(lambdas)}")
    probes, labels = [], y
    for t, lam in enumerate(lambdas):
        probes.append(_train_one(X, labels, loss, float(lam), learn_bias))
        if t < len(betas):
            labels = pseudo_labels(loss, probes[-1].decision_function(X), betas[t])
    return probes


def _train_one(X: np.ndarray, labels: np.ndarray, loss: str, lam: float, learn_bias: bool):
    """One stage via :func:`.train_stage` on the :math:`v = w/\\sqrt N` scale."""
    N = X.shape[1]
    # train_stage penalises (lam/2)|w|^2 with u = w.x/sqrt(N) + B; v = w/sqrt(N) gives lam*N.
    w, B = train_stage(X, labels, loss, lam / N, learn_bias)
    return LinearProbe(weights=w / np.sqrt(N), bias=B)
