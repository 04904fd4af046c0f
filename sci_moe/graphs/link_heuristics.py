"""Non-learned link predictors: common neighbours and Adamic-Adar.

The classic neighbourhood heuristics (Liben-Nowell & Kleinberg 2007), scored on a graph's
training edges only (``data.edge_index``):

.. math::

    \\mathrm{CN}(u, v) = |N(u) \\cap N(v)|, \\qquad
    \\mathrm{AA}(u, v) = \\sum_{w \\in N(u) \\cap N(v)} \\frac{1}{\\log |N(w)|}

Both return a scorer in the form :func:`~sci_moe.graphs.evaluate_scores` takes: a function
of node pairs ``(2, m)`` giving ``(m,)`` scores, or the ``(n, n)`` matrix for ``None``.
They are the baselines a learned link predictor has to beat.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch_geometric.data import Data

__all__ = ["HEURISTICS", "adamic_adar", "common_neighbours", "heuristic_scorer"]


def _adjacency(data: Data) -> torch.Tensor:
    n = int(data.num_nodes)
    ei = data.edge_index.long()
    keep = ei[0] != ei[1]
    a = torch.zeros(n, n, dtype=torch.float64)
    a[ei[0, keep], ei[1, keep]] = 1.0
    return torch.maximum(a, a.T)  # undirected, no self-loops, no multi-edges


def _scorer(matrix: torch.Tensor) -> Callable[[torch.Tensor | None], torch.Tensor]:
    def score(pairs: torch.Tensor | None) -> torch.Tensor:
        if pairs is None:
            return matrix
        return matrix[pairs[0].long(), pairs[1].long()]

    return score


def common_neighbours(data: Data) -> Callable[[torch.Tensor | None], torch.Tensor]:
    """Common-neighbour counts on the training edges of ``data``.

    Parameters
    ----------
    data : Data
        ``edge_index`` (training edges), ``num_nodes``.

    Returns
    -------
    callable
        ``score(pairs)``: ``(m,)`` float64 counts for pairs ``(2, m)``; ``score(None)``:
        the ``(n, n)`` matrix.
    """
    a = _adjacency(data)
    return _scorer(a @ a)


def adamic_adar(data: Data) -> Callable[[torch.Tensor | None], torch.Tensor]:
    """Adamic-Adar index on the training edges of ``data``.

    Common neighbours weighted by ``1 / log(degree)``; a node of degree 1 is a common
    neighbour of no pair of distinct nodes, so its (infinite) weight is set to 0.

    Parameters
    ----------
    data : Data

    Returns
    -------
    callable
        As :func:`common_neighbours`.
    """
    a = _adjacency(data)
    deg = a.sum(1)
    w = torch.where(deg > 1, 1.0 / deg.clamp(min=2).log(), torch.zeros_like(deg))
    return _scorer((a * w) @ a)


#: Name -> heuristic, as the benchmarks list them.
HEURISTICS = {"common_neighbours": common_neighbours, "adamic_adar": adamic_adar}


def heuristic_scorer(name: str, data: Data) -> Callable[[torch.Tensor | None], torch.Tensor]:
    """The scorer of heuristic ``name`` (a key of the dict ``HEURISTICS``) on ``data``."""
    if name not in HEURISTICS:
        raise ValueError(f"heuristic must be one of {tuple(HEURISTICS)}, got {name!r}")
    return HEURISTICS[name](data)
