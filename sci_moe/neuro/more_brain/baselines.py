"""Ridge regression from voxels to target embeddings (the MoRE-Brain / MindEye front end)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["RidgeDecoder"]


@dataclass
class RidgeDecoder:
    """Closed-form ridge map ``Y ~ X W + b`` with ``alpha`` picked on a held-out split.

    Parameters
    ----------
    alphas : sequence of float
        Candidate penalties (on standardised voxels).
    val_fraction : float
        Share of the training rows held out to choose ``alpha`` (then refit on all).
    seed : int
    """

    alphas: Sequence[float] = (1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)
    val_fraction: float = 0.2
    seed: int = 0

    @staticmethod
    def _solve(x, y, alpha):
        mu, sd = x.mean(0), x.std(0) + 1e-8
        z = (x - mu) / sd
        ym = y.mean(0)
        if z.shape[0] < z.shape[1]:  # dual form: fewer samples than voxels
            k = z @ z.T
            w = z.T @ np.linalg.solve(k + alpha * np.eye(k.shape[0]), y - ym)
        else:
            w = np.linalg.solve(z.T @ z + alpha * np.eye(z.shape[1]), z.T @ (y - ym))
        return mu, sd, w, ym

    def fit(self, voxels: np.ndarray, targets: np.ndarray) -> RidgeDecoder:
        """Fit on ``voxels`` (M, V) and ``targets`` (M, D); returns ``self``."""
        x = np.asarray(voxels, np.float64)
        y = np.asarray(targets, np.float64)
        if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0] or x.shape[0] < 4:
            raise ValueError(
                f"need (M >= 4, V) voxels and (M, D) targets, got {x.shape}, {y.shape}"
            )
        if not np.isfinite(x).all():
            raise ValueError("voxels contain NaN/inf; drop or impute those voxels first")
        rng = np.random.default_rng(self.seed)
        order = rng.permutation(x.shape[0])
        n_val = max(1, round(self.val_fraction * x.shape[0]))
        val, tr = order[:n_val], order[n_val:]
        best, best_err = None, np.inf
        for a in self.alphas:
            mu, sd, w, ym = self._solve(x[tr], y[tr], a)
            pred = ((x[val] - mu) / sd) @ w + ym
            p = pred / (np.linalg.norm(pred, axis=1, keepdims=True) + 1e-12)
            t = y[val] / (np.linalg.norm(y[val], axis=1, keepdims=True) + 1e-12)
            err = -float((p * t).sum(1).mean())  # mean cosine, the retrieval score
            if err < best_err:
                best, best_err = a, err
        self.alpha_ = float(best)
        self.mu_, self.sd_, self.coef_, self.intercept_ = self._solve(x, y, best)
        return self

    def predict(self, voxels: np.ndarray) -> np.ndarray:
        """Predicted embeddings, shape ``(M, D)``."""
        if not hasattr(self, "coef_"):
            raise ValueError("call fit before predict")
        x = np.asarray(voxels, np.float64)
        if x.ndim != 2 or x.shape[1] != self.coef_.shape[0]:
            raise ValueError(f"voxels must have {self.coef_.shape[0]} columns, got {x.shape}")
        return ((x - self.mu_) / self.sd_) @ self.coef_ + self.intercept_
