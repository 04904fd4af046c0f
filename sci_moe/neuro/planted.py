"""Synthetic voxels in planted hierarchical ROIs encoding subspaces of given target embeddings.

The ground truth is known: which voxel belongs to which region at every level of a
``2 -> 4 -> 8 -> 16`` hierarchy, which target subspace each region encodes, and each
subject's voxel permutation and gain. Targets are passed in as an array (real sentence
embeddings in the benchmark: :func:`sci_moe.data.planted_fmri.planted_fmri`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PlantedFMRI", "plant_voxels", "roi_labels"]


def roi_labels(num_voxels: int, branching: Sequence[int] = (2, 4, 8, 16)) -> np.ndarray:
    """Planted region of every voxel (reference order) at each level.

    Voxels are split into ``branching[-1]`` contiguous leaf regions of (almost) equal
    size; a level-``l`` region is the union of its descendant leaves.

    Parameters
    ----------
    num_voxels : int
    branching : sequence of int
        Regions per level, each a multiple of the previous.

    Returns
    -------
    ndarray of int, shape (L, num_voxels)
    """
    branching = [int(b) for b in branching]
    for a, b in itertools.pairwise(branching):
        if b % a:
            raise ValueError(f"regions per level must be multiples of each other, got {branching}")
    leaves = branching[-1]
    if num_voxels < leaves:
        raise ValueError(f"need >= {leaves} voxels for {leaves} leaf regions, got {num_voxels}")
    leaf = (np.arange(num_voxels) * leaves) // num_voxels
    return np.stack([leaf // (leaves // b) for b in branching])


@dataclass
class PlantedFMRI:
    """Planted multi-subject voxel data with its ground truth.

    Attributes
    ----------
    voxels : dict of str to ndarray, shape (M, V), float32
        Responses of each subject to the ``M`` stimuli (voxels in the subject's order).
    targets : ndarray, shape (M, D), float32
        The target embeddings (as given).
    roi : dict of str to ndarray of int, shape (L, V)
        Planted region of each of the subject's voxels at every level.
    permutation : dict of str to ndarray of int, shape (V,)
        Subject voxel ``j`` is reference voxel ``permutation[j]``.
    gain : dict of str to ndarray, shape (V,)
        Per-voxel gain of each subject.
    basis : ndarray, shape (D, n_nodes * dims_per_region)
        Orthonormal columns; region node ``n`` encodes columns ``n*m:(n+1)*m``.
    snr : float
        Signal-to-noise variance ratio of every voxel.
    branching : tuple of int
    """

    voxels: dict
    targets: np.ndarray
    roi: dict
    permutation: dict
    gain: dict
    basis: np.ndarray
    snr: float
    branching: tuple

    @property
    def subjects(self) -> list[str]:
        """Subject names."""
        return list(self.voxels)


def plant_voxels(
    targets: np.ndarray,
    num_voxels: int = 512,
    num_subjects: int = 3,
    snr: float = 1.0,
    branching: Sequence[int] = (2, 4, 8, 16),
    dims_per_region: int | None = None,
    gain_spread: float = 0.3,
    seed: int = 0,
) -> PlantedFMRI:
    """Voxels in planted hierarchical regions, each region encoding its own target subspace.

    Every node ``n`` of the region tree (2 + 4 + 8 + 16 = 30 nodes) owns an orthonormal
    ``m``-dimensional subspace ``B_n`` of the (centred, whitened-scale) target. Reference
    voxel ``v`` with ancestors ``n_0(v), ..., n_{L-1}(v)`` responds

    .. math:: s_v = \\sum_{l} \\alpha_{v,l}^\\top B_{n_l(v)}^\\top \\tilde y, \\qquad
              x^{(s)}_{j} = g^{(s)}_j\\big(\\sqrt{\\mathrm{snr}}\\; s_{\\pi_s(j)} / \\sigma_s
              + \\varepsilon\\big), \\quad \\varepsilon \\sim N(0, 1)

    so voxels of one region share signal (the region's subspace) at every level, the
    signal-to-noise variance ratio is ``snr`` (before gain), and subject ``s`` sees the
    voxels permuted by ``pi_s`` (subject 0 too) with log-normal gains ``g``.

    Parameters
    ----------
    targets : ndarray, shape (M, D)
        Target embeddings (e.g. MiniLM sentence embeddings); any finite array.
    num_voxels : int
        Voxels per subject (>= the number of leaf regions).
    num_subjects : int
    snr : float
        Signal-to-noise variance ratio (> 0).
    branching : sequence of int
        Regions per level.
    dims_per_region : int, optional
        ``m``; default ``D // n_nodes`` (12 for D = 384 and 30 nodes).
    gain_spread : float
        Standard deviation of ``log g``.
    seed : int

    Returns
    -------
    PlantedFMRI
    """
    y = np.asarray(targets, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 2 or not np.isfinite(y).all():
        raise ValueError(f"targets must be a finite (M >= 2, D) array, got shape {y.shape}")
    if not snr > 0:
        raise ValueError(f"snr must be > 0, got {snr}")
    if num_subjects < 1:
        raise ValueError(f"num_subjects must be >= 1, got {num_subjects}")
    labels = roi_labels(num_voxels, branching)
    M, D = y.shape
    offsets = np.cumsum([0, *branching])  # node id = offsets[l] + region
    n_nodes = int(offsets[-1])
    m = D // n_nodes if dims_per_region is None else int(dims_per_region)
    if m < 1 or m * n_nodes > D:
        raise ValueError(
            f"{n_nodes} regions x {m} dims do not fit a {D}-dim target; lower "
            "dims_per_region or use fewer levels"
        )
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((D, n_nodes * m)))
    yc = y - y.mean(0)
    proj = yc @ basis  # (M, n_nodes * m)
    proj /= proj.std(0, keepdims=True) + 1e-12
    signal = np.zeros((M, num_voxels))
    for level in range(len(branching)):
        nodes = offsets[level] + labels[level]
        alpha = rng.standard_normal((num_voxels, m)) / np.sqrt(m * len(branching))
        cols = nodes[:, None] * m + np.arange(m)  # (V, m)
        signal += np.einsum("mvk,vk->mv", proj[:, cols], alpha)
    signal /= signal.std(0, keepdims=True) + 1e-12
    out = PlantedFMRI(
        {},
        np.asarray(targets, np.float32),
        {},
        {},
        {},
        basis,
        float(snr),
        tuple(int(b) for b in branching),
    )
    for s in range(num_subjects):
        name = f"subj{s + 1:02d}"
        perm = rng.permutation(num_voxels)
        gain = np.exp(gain_spread * rng.standard_normal(num_voxels))
        noise = rng.standard_normal((M, num_voxels))
        x = gain * (np.sqrt(snr) * signal[:, perm] + noise)
        out.voxels[name] = x.astype(np.float32)
        out.roi[name] = labels[:, perm]
        out.permutation[name] = perm
        out.gain[name] = gain
    return out
