"""Dihedral angles of atom quadruples (IUPAC sign convention, as mdtraj)."""

from __future__ import annotations

import numpy as np

__all__ = ["dihedrals"]


def dihedrals(positions: np.ndarray, quads) -> np.ndarray:
    """Dihedral angles in radians in (-pi, pi] (IUPAC sign convention, as mdtraj).

    Parameters
    ----------
    positions : array-like, shape (F, N, 3) or (N, 3)
        Any length unit.
    quads : sequence of 4-tuples of atom indices, length Q

    Returns
    -------
    numpy.ndarray, shape (F, Q) (or (Q,) for a single frame)
    """
    x = np.asarray(positions, dtype=np.float64)
    single = x.ndim == 2
    if single:
        x = x[None]
    if x.ndim != 3 or x.shape[-1] != 3:
        raise ValueError(f"positions must have shape (F, N, 3), got {np.shape(positions)}")
    if not np.isfinite(x).all():
        raise ValueError("positions contain NaN or inf")
    q = np.asarray(quads, dtype=np.int64)
    if q.ndim != 2 or q.shape[1] != 4 or q.min() < 0 or q.max() >= x.shape[1]:
        raise ValueError(f"quads must be (Q, 4) atom indices below {x.shape[1]}")
    p0, p1, p2, p3 = (x[:, q[:, i]] for i in range(4))
    b0, b1, b2 = p1 - p0, p2 - p1, p3 - p2
    n1, n2 = np.cross(b0, b1), np.cross(b1, b2)
    b1n = b1 / np.linalg.norm(b1, axis=-1, keepdims=True)
    y = np.sum(np.cross(n1, n2) * b1n, axis=-1)
    xx = np.sum(n1 * n2, axis=-1)
    out = np.arctan2(y, xx)
    return out[0] if single else out
