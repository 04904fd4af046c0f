"""Graph pooling: one vector per graph from its node features (torch-geometric readouts)."""

from __future__ import annotations

import torch
from torch_geometric.nn import global_add_pool, global_max_pool, global_mean_pool

__all__ = ["POOLINGS", "pool_nodes"]

#: Names accepted by :func:`pool_nodes`.
POOLINGS = ("mean", "sum", "max")

_FUNCS = {"mean": global_mean_pool, "sum": global_add_pool, "max": global_max_pool}


def pool_nodes(
    x: torch.Tensor, mode: str = "mean", batch: torch.Tensor | None = None
) -> torch.Tensor:
    """Pool node features into graph features.

    Parameters
    ----------
    x : Tensor, shape (N, d)
    mode : {"mean", "sum", "max"}
        Permutation-invariant readout over the nodes of each graph.
    batch : Tensor, shape (N,), int64, optional
        Graph id of every node (default: one graph).

    Returns
    -------
    Tensor, shape (n_graphs, d)

    Examples
    --------
    >>> pool_nodes(torch.tensor([[1.0], [3.0]])).tolist()
    [[2.0]]
    """
    if mode not in _FUNCS:
        raise ValueError(f"pool must be one of {POOLINGS}, got {mode!r}")
    if x.dim() != 2:
        raise ValueError(f"x must have shape (N, d), got {tuple(x.shape)}")
    return _FUNCS[mode](x, batch)
