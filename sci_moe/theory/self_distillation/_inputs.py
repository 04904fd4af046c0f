"""Validation of the feature matrices and binary labels given to the empirical SD code."""

from __future__ import annotations

import numpy as np

__all__: list[str] = []


def as_features(X, name: str = "X") -> np.ndarray:
    """Convert a numpy array or torch tensor to a finite float64 array of shape (M, N)."""
    if hasattr(X, "detach"):  # torch.Tensor without importing torch
        X = X.detach().cpu().numpy()
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"{name} must have shape (M, N) (samples x features), got {X.shape}")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name} must hold at least one sample and one feature, got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or inf; clean or impute the features first")
    return X


def as_labels(y, n: int, name: str = "y") -> np.ndarray:
    """Convert binary labels to a float array of shape (n,) with values in {0, 1}."""
    if hasattr(y, "detach"):
        y = y.detach().cpu().numpy()
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) to match the features, got {y.shape}")
    y = y.astype(float)
    if not np.all((y == 0) | (y == 1)):
        raise ValueError(f"{name} must be binary labels in {{0, 1}}; map your classes to 0/1 first")
    return y
