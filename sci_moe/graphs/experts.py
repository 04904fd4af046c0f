"""GNN expert banks: GCN-style experts with stacked weights, run as grouped GEMMs.

A GCN expert (Kipf & Welling 2017) maps a node's features ``H`` on a graph with
normalised adjacency ``Â`` to ``act(Â H W_i + b_i)``. Propagation is linear and shared by
every expert of a layer, so ``Â H`` is computed **once** per graph
(:class:`GCNPropagation`, torch-geometric message passing with its ``gcn_norm``) and the
experts are affine maps of the propagated rows: :class:`GCNExperts` is an
:class:`~sci_moe.moe.ExpertBank`, dispatched by :func:`sci_moe.moe.dispatch` with one
grouped GEMM for all experts, never a Python loop over them.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch_geometric.nn import MessagePassing
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from sci_moe._util import get_activation
from sci_moe.moe import ExpertBank

__all__ = ["GCNExperts", "GCNPropagation", "gcn_normalize"]


def gcn_normalize(
    edge_index: torch.Tensor,
    num_nodes: int,
    edge_weight: torch.Tensor | None = None,
    add_self_loops: bool = True,
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric GCN normalisation ``D^{-1/2} (A + I) D^{-1/2}`` as an edge list.

    A thin wrapper of torch-geometric's ``gcn_norm``. Isolated nodes (disconnected
    graphs) keep only their self loop, so their row of ``Â H`` is their own features;
    without self loops their row is zero.

    Parameters
    ----------
    edge_index : Tensor, shape (2, n_edges), int64
        Directed edges ``source -> target``; give both directions for an undirected graph.
    num_nodes : int
    edge_weight : Tensor, shape (n_edges,), optional
        Default 1 (summed adjacencies may carry weights > 1).
    add_self_loops : bool
    dtype : torch.dtype, optional
        Of the returned weights (default: the default dtype).

    Returns
    -------
    edge_index : Tensor, shape (2, n_edges')
    edge_weight : Tensor, shape (n_edges',)
    """
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if edge_weight is None:
        edge_weight = torch.ones(edge_index.shape[1], dtype=dtype, device=edge_index.device)
    ei, ew = gcn_norm(
        edge_index, edge_weight.to(dtype), num_nodes, improved=False, add_self_loops=add_self_loops
    )
    return ei, ew


class GCNPropagation(MessagePassing):
    """Sparse propagation ``Â H`` with torch-geometric message passing (sum aggregation).

    .. math:: (\\hat A H)_i = \\sum_{j \\to i} \\hat a_{ji} H_j

    Examples
    --------
    >>> ei = torch.tensor([[0, 1], [1, 0]])
    >>> GCNPropagation()(torch.eye(2), *gcn_normalize(ei, 2)).round(decimals=4).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """

    def __init__(self) -> None:
        super().__init__(aggr="add")

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor
    ) -> torch.Tensor:
        """Propagate node features.

        Parameters
        ----------
        x : Tensor, shape (N, d)
        edge_index : Tensor, shape (2, n_edges)
        edge_weight : Tensor, shape (n_edges,)

        Returns
        -------
        Tensor, shape (N, d)
        """
        return self.propagate(edge_index, x=x, edge_weight=edge_weight)

    def message(self, x_j: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
        """Message ``a_ji H_j`` along each edge."""
        return edge_weight.view(-1, 1).to(x_j.dtype) * x_j


class GCNExperts(ExpertBank):
    """``E`` GCN experts acting on propagated rows: ``y = act(W_i (Â H)_n + b_i)``.

    Stacked weights ``(E, d_out, d_in)``; :meth:`forward_sorted` is one grouped GEMM.
    Feed it the propagated features of :class:`GCNPropagation` (the propagation is common
    to all experts, so ``E_i(H, Â) = act(Â H W_i + b_i)`` exactly).

    Parameters
    ----------
    num_experts, d_in, d_out : int
    activation : str
        See ``sci_moe._util.get_activation`` (``"identity"`` for a linear expert).
    bias : bool
    """

    def __init__(
        self, num_experts: int, d_in: int, d_out: int, activation: str = "relu", bias: bool = True
    ) -> None:
        super().__init__()
        if min(num_experts, d_in, d_out) < 1:
            raise ValueError(
                f"num_experts, d_in and d_out must be >= 1, got {num_experts}, {d_in}, {d_out}"
            )
        self.num_experts, self.d_in, self.d_out = num_experts, d_in, d_out
        self.activation = activation
        self._act = get_activation(activation)
        self.weight = nn.Parameter(torch.empty(num_experts, d_out, d_in))
        bound = 1.0 / math.sqrt(d_in)
        nn.init.uniform_(self.weight, -bound, bound)
        self.bias = nn.Parameter(torch.zeros(num_experts, d_out)) if bias else None

    def forward_sorted(self, x, plan):
        """All experts on rows sorted by expert (see :class:`~sci_moe.moe.ExpertBank`)."""
        return self._act(self.grouped_linear(x, self.weight, plan, self.bias))

    def forward_expert(self, e, x):
        """Expert ``e`` on rows ``x`` of shape ``(n, d_in)``; returns ``(n, d_out)``."""
        b = None if self.bias is None else self.bias[e]
        return self._act(nn.functional.linear(x, self.weight[e], b))
