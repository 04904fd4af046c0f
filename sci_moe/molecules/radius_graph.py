"""Radius graph of every conformer, in pure torch.

PyG 2.8's ``radius_graph`` needs ``pyg-lib``; here the points of each conformer are
scattered into a padded ``(C, n_max, 3)`` block and compared with ``torch.cdist``; edges
never cross conformers. Edge convention as in PyG: ``edge_index[0]`` is the source ``j``,
``edge_index[1]`` the target ``i``.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["radius_graph_per_conformer"]


def radius_graph_per_conformer(
    pos: Tensor,
    point_to_conf: Tensor,
    cutoff: float,
    max_neighbors: int | None = None,
    loop: bool = False,
    max_block_elements: int = 2**24,
) -> Tensor:
    """All pairs of points of the same conformer closer than ``cutoff`` (pure torch).

    Parameters
    ----------
    pos : Tensor, shape (P, 3)
        Positions (same length unit as ``cutoff``; nm for :class:`EnsembleBatch`).
    point_to_conf : Tensor, shape (P,), long
        Conformer of each point (need not be sorted).
    cutoff : float
        Pairs with ``|r_i - r_j| <= cutoff`` are connected.
    max_neighbors : int, optional
        Keep only the ``max_neighbors`` nearest sources of each target (ties broken by
        index).
    loop : bool
        Include self-loops ``(i, i)``.
    max_block_elements : int
        Conformers are processed in chunks so that each padded distance block has at most
        about this many entries (memory bound).

    Returns
    -------
    Tensor, shape (2, E), long
        ``edge_index[0]`` = source ``j``, ``edge_index[1]`` = target ``i``, sorted by
        conformer, then target, then source.
    """
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ValueError(f"pos must be (P, 3), got {tuple(pos.shape)}")
    point_to_conf = point_to_conf.reshape(-1).to(torch.long)
    if point_to_conf.numel() != pos.shape[0]:
        raise ValueError("point_to_conf needs one entry per point")
    if not cutoff > 0:
        raise ValueError(f"cutoff must be > 0, got {cutoff}")
    if max_neighbors is not None and max_neighbors < 1:
        raise ValueError(f"max_neighbors must be >= 1 or None, got {max_neighbors}")
    device = pos.device
    if pos.shape[0] == 0:
        return torch.zeros(2, 0, dtype=torch.long, device=device)
    order = torch.argsort(point_to_conf, stable=True)
    conf_sorted = point_to_conf[order]
    _, counts = torch.unique_consecutive(conf_sorted, return_counts=True)
    ptr = torch.zeros(counts.numel() + 1, dtype=torch.long, device=device)
    ptr[1:] = torch.cumsum(counts, 0)
    x = pos.detach()[order]
    out = []
    n_groups = counts.numel()
    counts_list = counts.tolist()
    start = 0
    while start < n_groups:
        stop, n_max = start, 0
        while stop < n_groups:
            cand = max(n_max, counts_list[stop])
            if stop > start and (stop - start + 1) * cand * cand > max_block_elements:
                break
            n_max = cand
            stop += 1
        out.append(_radius_block(x, ptr, counts, start, stop, n_max, cutoff, max_neighbors, loop))
        start = stop
    edges = torch.cat(out, dim=1)
    return order[edges]


def _radius_block(x, ptr, counts, start, stop, n_max, cutoff, max_neighbors, loop) -> Tensor:
    device = x.device
    cnt = counts[start:stop]
    base = ptr[start:stop]
    local = torch.arange(n_max, device=device)
    valid = local[None, :] < cnt[:, None]  # (g, n_max)
    idx = (base[:, None] + local[None, :]).clamp(max=x.shape[0] - 1)
    block = x[idx]  # (g, n_max, 3)
    d = torch.cdist(block, block, compute_mode="donot_use_mm_for_euclid_dist")  # (g, i, j)
    mask = valid[:, :, None] & valid[:, None, :] & (d <= cutoff)
    if not loop:
        mask &= ~torch.eye(n_max, dtype=torch.bool, device=device)[None]
    if max_neighbors is not None and max_neighbors < n_max:
        dm = torch.where(mask, d, torch.full_like(d, float("inf")))
        # stable sort so ties go to the lower source index
        srt = torch.sort(dm, dim=2, stable=True).indices[:, :, :max_neighbors]
        sel = torch.zeros_like(mask)
        sel.scatter_(2, srt, True)
        mask &= sel
    gi, i, j = mask.nonzero(as_tuple=True)
    return torch.stack([base[gi] + j, base[gi] + i])
