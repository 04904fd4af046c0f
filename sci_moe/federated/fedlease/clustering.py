"""Clients grouped by the directions of their LoRA ``B`` matrices (FedLEASE, Sec. 3.2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["ClusterResult", "b_matrix_distances", "cluster_clients"]


def b_matrix_distances(b_matrices: Sequence[Mapping[str, torch.Tensor]]) -> np.ndarray:
    """Mean cosine distance of the clients' ``B`` matrices over the adapted layers (Eq. 2).

    .. math:: d(i, j) = \\frac{1}{|\\mathcal{L}|} \\sum_{l \\in \\mathcal{L}}
       \\left(1 - \\cos(\\mathrm{vec}\\, B_i^l, \\mathrm{vec}\\, B_j^l)\\right)

    Parameters
    ----------
    b_matrices : sequence of dict of str to Tensor
        Per client, layer name -> ``B`` of that layer (any shape, same per layer; on any
        one device).

    Returns
    -------
    ndarray, shape (n, n)
        Symmetric, zero diagonal, in ``[0, 2]``. A zero ``B`` (an untrained client) has
        cosine 0 to everyone (distance 1).
    """
    n = len(b_matrices)
    if n < 2:
        raise ValueError(f"need at least two clients to compare, got {n}")
    names = sorted(b_matrices[0])
    for i, b in enumerate(b_matrices):
        if sorted(b) != names:
            raise ValueError(f"client {i} has layers {sorted(b)}, expected {names}")
    dist = np.zeros((n, n))
    for name in names:
        v = torch.stack([b[name].detach().double().reshape(-1) for b in b_matrices])
        norm = v.norm(dim=1, keepdim=True)
        u = torch.where(norm > 0, v / norm.clamp_min(1e-300), torch.zeros_like(v))
        dist += (1.0 - (u @ u.t())).cpu().numpy()
    dist /= len(names)
    dist = 0.5 * (dist + dist.T)
    np.fill_diagonal(dist, 0.0)
    return np.clip(dist, 0.0, 2.0)


@dataclass
class ClusterResult:
    """Outcome of :func:`cluster_clients`.

    Attributes
    ----------
    labels : ndarray of int, shape (n,)
        Cluster of each client, in ``[0, M)``, numbered by first appearance.
    num_clusters : int
        ``M``.
    silhouette : dict of int to float
        Silhouette score of each candidate ``k``.
    distances : ndarray, shape (n, n)
    """

    labels: np.ndarray
    num_clusters: int
    silhouette: dict[int, float]
    distances: np.ndarray


def cluster_clients(
    distances: np.ndarray, max_clusters: int, linkage: str = "average"
) -> ClusterResult:
    """Agglomerative clustering with ``M = argmax_{2 <= k <= M_max} silhouette(k)``.

    Parameters
    ----------
    distances : ndarray, shape (n, n)
        Symmetric client distances (:func:`b_matrix_distances`).
    max_clusters : int
        ``M_max``; clipped to ``n - 1`` (the silhouette needs ``k < n``).
    linkage : str
        ``scipy.cluster.hierarchy.linkage`` method for a precomputed distance
        (``"average"``, ``"complete"``, ``"single"``, ``"weighted"``).

    Returns
    -------
    ClusterResult
        Ties of the silhouette go to the smaller ``k``.
    """
    from scipy.cluster.hierarchy import fcluster
    from scipy.cluster.hierarchy import linkage as scipy_linkage
    from scipy.spatial.distance import squareform
    from sklearn.metrics import silhouette_score

    d = np.asarray(distances, dtype=float)
    n = d.shape[0]
    if d.shape != (n, n) or not np.allclose(d, d.T) or not np.isfinite(d).all():
        raise ValueError("distances must be a finite symmetric (n, n) matrix")
    if n < 3:
        raise ValueError(f"clustering by silhouette needs at least 3 clients, got {n}")
    if isinstance(max_clusters, bool) or not isinstance(max_clusters, int) or max_clusters < 2:
        raise ValueError(f"max_clusters must be an int >= 2, got {max_clusters!r}")
    if linkage not in ("average", "complete", "single", "weighted"):
        raise ValueError(f"linkage {linkage!r} needs coordinates; use 'average' or 'complete'")
    tree = scipy_linkage(squareform(d, checks=False), method=linkage)
    scores, best = {}, None
    for k in range(2, min(max_clusters, n - 1) + 1):
        labels = fcluster(tree, t=k, criterion="maxclust")
        if len(np.unique(labels)) < 2:
            continue
        scores[k] = float(silhouette_score(d, labels, metric="precomputed"))
        if best is None or scores[k] > scores[best[0]]:
            best = (k, labels)
    if best is None:
        raise ValueError("the clients could not be split into >= 2 clusters (identical B?)")
    _, raw = best
    _, first = np.unique(raw, return_index=True)
    order = {raw[i]: c for c, i in enumerate(sorted(first))}
    labels = np.array([order[v] for v in raw])
    return ClusterResult(labels, int(labels.max() + 1), scores, d)
