"""Load user voxel matrices (``.npy`` / ``.npz``) for the same decoding path."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["load_voxel_matrix"]


def load_voxel_matrix(
    path: str | os.PathLike, key: str | None = None, nan: str = "error"
) -> np.ndarray:
    """Read a ``(samples, voxels)`` response matrix.

    Parameters
    ----------
    path : path-like
        ``.npy`` (one array) or ``.npz`` (pick the array with ``key``; a file holding
        a single array needs no key). Loaded with ``allow_pickle=False``.
    key : str, optional
    nan : {"error", "drop"}
        NaN/inf voxels raise ``ValueError`` naming them, or are dropped (columns with
        any non-finite value removed; the kept column indices are not returned, so
        apply the same mask to every session).

    Returns
    -------
    ndarray, shape (M, V), float32
    """
    path = Path(path)
    if nan not in ("error", "drop"):
        raise ValueError(f"nan must be 'error' or 'drop', got {nan!r}")
    if not path.is_file():
        raise ValueError(f"no voxel file at {path}")
    if path.suffix == ".npy":
        x = np.load(path, allow_pickle=False)
    elif path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as f:
            names = list(f.keys())
            if key is None:
                if len(names) != 1:
                    raise ValueError(f"{path} holds {names}; pass key= to choose one")
                key = names[0]
            if key not in names:
                raise ValueError(f"{path} has no array {key!r}; it holds {names}")
            x = f[key]
    else:
        raise ValueError(f"voxel files must be .npy or .npz, got {path.name}")
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"expected a numeric (samples, voxels) matrix, got {x.dtype} {x.shape}")
    x = x.astype(np.float32)
    bad = ~np.isfinite(x).all(0)
    if bad.any():
        if nan == "error":
            raise ValueError(
                f"{path}: {int(bad.sum())} voxel columns contain NaN/inf (first "
                f"{np.flatnonzero(bad)[:5].tolist()}); pass nan='drop' or fix the mask"
            )
        x = x[:, ~bad]
    return x
