"""MvCGE: multi-view collaborative graph experts (Wu et al., NeurIPS 2025).

"Where Graph Meets Heterogeneity: Multi-View Collaborative Graph Experts" (OpenReview
dsp8dUlZFq; no public code; equations reconstructed, see ``papers/applications.md`` §9).
Views ``G_v = (Â_v, X_v)`` over the same nodes; every layer holds one pool of ``M`` GNN
experts **shared by all views** and routes each view graph-aware:

.. math::

    P_v = \\hat A_v H_v^{(l)}, \\qquad
    g_v = \\mathrm{TopK}\\big(\\mathrm{softmax}(W_g\\,\\mathrm{Pool}(P_v) + \\epsilon)\\big),
    \\qquad
    H_v^{(l+1)} = \\sum_{i \\in \\mathrm{TopK}} g_{v,i}\\, \\sigma(P_v W_i + b_i)

(``token="view"``; ``token="node"`` routes every node of every view on its row of
``P_v`` instead). The fused embedding ``Z = \\sum_v \\beta_v H_v^{(L)}`` (semantic
attention or mean) feeds a linear classifier, trained with

.. math:: L = L_{CE} + \\alpha L_{le} + \\beta L_{gd}

where ``L_le`` is the load-equilibrium loss of every layer's routing
(:func:`~sci_moe.moe.load_equilibrium_loss`) and ``L_gd`` the graph
discrepancy loss, minus the mean pairwise ``MMD^2`` of the views' final node embeddings
(:func:`~sci_moe.moe.pairwise_discrepancy_loss`).

Routing uses the core :class:`~sci_moe.moe.Router`; experts are :class:`GCNExperts`
banks run by :func:`~sci_moe.moe.dispatch` (one grouped GEMM per layer for all views).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from sci_moe.moe import (
    Router,
    RouterConfig,
    Routing,
    dispatch,
    group_expert_usage,
    load_equilibrium_loss,
    pairwise_discrepancy_loss,
)

from .experts import GCNExperts, GCNPropagation, gcn_normalize
from .pooling import POOLINGS, pool_nodes

__all__ = ["MvCGE", "MvCGEConfig", "MvCGEOutput", "SemanticAttention"]

_TOKENS = ("view", "node")
_FUSIONS = ("attention", "mean")


@dataclass
class MvCGEConfig:
    """Options of :class:`MvCGE`.

    Parameters
    ----------
    in_dim, num_classes : int
    hidden_dim : int
    num_layers : int
        Graph-expert layers (each: propagate, route, experts).
    num_experts, top_k : int
        ``M`` experts per layer, ``k`` selected per token.
    token : {"view", "node"}
        Route one pooled token per view (the paper's graph-aware routing) or every node.
    pool : {"mean", "sum", "max"}
        Readout of the propagated features for ``token="view"``.
    shared_experts : bool
        One expert pool (and router) per layer shared by all views (MvCGE). ``False``
        gives every view its own router and bank (the unshared ablation; needs
        ``num_views``).
    num_views : int, optional
    fusion : {"attention", "mean"}
    dropout : float
        On every layer's input (training only).
    activation : str
    router_noise : float
        Std of the Gaussian logit noise ``epsilon`` (training only).
    le_weight, gd_weight : float
        ``alpha`` and ``beta`` of the objective.
    mmd_bandwidths : sequence of float, optional
        Squared-distance bandwidths of the MMD kernels (default: median heuristic).
    mmd_max_nodes : int
        Nodes sampled (the same for every view) for ``L_gd`` per step.
    """

    in_dim: int
    num_classes: int
    hidden_dim: int = 64
    num_layers: int = 2
    num_experts: int = 4
    top_k: int = 2
    token: str = "view"
    pool: str = "mean"
    shared_experts: bool = True
    num_views: int | None = None
    fusion: str = "attention"
    dropout: float = 0.5
    activation: str = "relu"
    router_noise: float = 0.0
    le_weight: float = 0.01
    gd_weight: float = 0.1
    mmd_bandwidths: Sequence[float] | None = None
    mmd_max_nodes: int = 128

    def __post_init__(self) -> None:
        for name in ("in_dim", "num_classes", "hidden_dim", "num_layers", "num_experts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 1 <= self.top_k <= self.num_experts:
            raise ValueError(f"top_k must be in [1, num_experts={self.num_experts}]")
        if self.token not in _TOKENS:
            raise ValueError(f"token must be one of {_TOKENS}, got {self.token!r}")
        if self.pool not in POOLINGS:
            raise ValueError(f"pool must be one of {POOLINGS}, got {self.pool!r}")
        if self.fusion not in _FUSIONS:
            raise ValueError(f"fusion must be one of {_FUSIONS}, got {self.fusion!r}")
        if not self.shared_experts and (self.num_views is None or self.num_views < 1):
            raise ValueError("shared_experts=False needs num_views (one expert pool per view)")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.router_noise < 0 or self.le_weight < 0 or self.gd_weight < 0:
            raise ValueError("router_noise, le_weight and gd_weight must be >= 0")
        if self.mmd_max_nodes < 2:
            raise ValueError(f"mmd_max_nodes must be >= 2, got {self.mmd_max_nodes}")


@dataclass
class MvCGEOutput:
    """What :meth:`MvCGE.forward` returns.

    Attributes
    ----------
    logits : Tensor, shape (N, C)
    embeddings : Tensor, shape (V, N, hidden_dim)
        Final-layer node embeddings of every view.
    fused : Tensor, shape (N, hidden_dim)
    view_weights : Tensor, shape (V,)
        Fusion weights ``beta_v``.
    routings : list of Routing
        One per layer, over its tokens (``V`` pooled tokens or ``V N`` nodes, view-major).
    token_views : list of Tensor, shape (T_l,), int64
        View id of every routing token of each layer.
    le_loss, gd_loss : Tensor, scalar
        ``L_le`` (mean over layers) and ``L_gd`` (0 when not computed).
    """

    logits: torch.Tensor
    embeddings: torch.Tensor
    fused: torch.Tensor
    view_weights: torch.Tensor
    routings: list[Routing]
    token_views: list[torch.Tensor]
    le_loss: torch.Tensor
    gd_loss: torch.Tensor


class SemanticAttention(nn.Module):
    """View-level attention (HAN's semantic attention), invariant to the order of views.

    .. math::

        s_v = \\frac{1}{N}\\sum_n q^\\top \\tanh(W h_{v,n} + b), \\qquad
        \\beta = \\mathrm{softmax}_v(s), \\qquad z_n = \\sum_v \\beta_v h_{v,n}

    Parameters
    ----------
    dim : int
    attn_dim : int
    """

    def __init__(self, dim: int, attn_dim: int = 32) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, attn_dim)
        self.q = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Fuse ``h`` of shape ``(V, N, d)``; returns ``z (N, d)`` and ``beta (V,)``."""
        s = self.q(torch.tanh(self.proj(h))).squeeze(-1).mean(-1)
        beta = s.softmax(0)
        return torch.einsum("v,vnd->nd", beta, h), beta


class _ExpertLayer(nn.Module):
    def __init__(self, d_in: int, d_out: int, cfg: MvCGEConfig) -> None:
        super().__init__()
        self.cfg = cfg
        n_pools = 1 if cfg.shared_experts else cfg.num_views
        rc = dict(d_model=d_in, num_experts=cfg.num_experts, top_k=cfg.top_k)
        self.routers = nn.ModuleList(
            Router(RouterConfig(**rc, noise_std=cfg.router_noise)) for _ in range(n_pools)
        )
        self.experts = nn.ModuleList(
            GCNExperts(cfg.num_experts, d_in, d_out, cfg.activation) for _ in range(n_pools)
        )

    def _route(self, router: Router, p: torch.Tensor):
        """Token routing and its expansion to the node rows of ``p`` (V', N, d)."""
        V, N, d = p.shape
        if self.cfg.token == "node":
            r = router(p.reshape(V * N, d))
            return r, r
        tokens = torch.cat([pool_nodes(p[v], self.cfg.pool) for v in range(V)])
        r = router(tokens)
        rows = Routing(
            r.indices.repeat_interleave(N, 0),
            r.weights.repeat_interleave(N, 0),
            r.logits.repeat_interleave(N, 0),
            r.probs.repeat_interleave(N, 0),
            r.num_experts,
        )
        return r, rows

    def forward(self, p: torch.Tensor) -> tuple[torch.Tensor, Routing, torch.Tensor]:
        V, N, _ = p.shape
        per_token = N if self.cfg.token == "node" else 1
        view_ids = torch.arange(V, device=p.device).repeat_interleave(per_token)
        if self.cfg.shared_experts:
            r, rows = self._route(self.routers[0], p)
            out = dispatch(p.reshape(V * N, -1), rows, self.experts[0]).view(V, N, -1)
            return out, r, view_ids
        outs, rs = [], []
        for v in range(V):
            r, rows = self._route(self.routers[v], p[v : v + 1])
            outs.append(dispatch(p[v], rows, self.experts[v]))
            rs.append(r)
        cat = Routing(
            torch.cat([r.indices for r in rs]),
            torch.cat([r.weights for r in rs]),
            torch.cat([r.logits for r in rs]),
            torch.cat([r.probs for r in rs]),
            rs[0].num_experts,
        )
        return torch.stack(outs), cat, view_ids


class MvCGE(nn.Module):
    """Multi-view collaborative graph experts (see the module docstring).

    Parameters
    ----------
    config : MvCGEConfig
        Keyword arguments build one when omitted.

    Examples
    --------
    >>> from sci_moe.graphs import make_multiview_csbm
    >>> g = make_multiview_csbm(num_nodes=40, mean_degree=4, seed=0)
    >>> model = MvCGE(in_dim=g.num_features, num_classes=4, hidden_dim=8).eval()
    >>> out = model(g.features(), g.edge_indices)
    >>> out.logits.shape, out.embeddings.shape
    (torch.Size([40, 4]), torch.Size([3, 40, 8]))
    """

    def __init__(self, config: MvCGEConfig | None = None, **kwargs) -> None:
        super().__init__()
        if config is None:
            config = MvCGEConfig(**kwargs)
        elif kwargs:
            raise TypeError("pass either an MvCGEConfig or keyword arguments, not both")
        self.config = c = config
        self.propagate = GCNPropagation()
        dims = [c.in_dim] + [c.hidden_dim] * c.num_layers
        self.layers = nn.ModuleList(
            _ExpertLayer(dims[i], dims[i + 1], c) for i in range(c.num_layers)
        )
        self.fusion = SemanticAttention(c.hidden_dim) if c.fusion == "attention" else None
        self.classifier = nn.Linear(c.hidden_dim, c.num_classes)

    def _views(self, x, edge_indices):
        edges = list(edge_indices)
        V = len(edges)
        if V == 0:
            raise ValueError("MvCGE needs at least one view")
        xs = [x] * V if isinstance(x, torch.Tensor) else list(x)
        if len(xs) != V:
            raise ValueError(f"{len(xs)} feature matrices for {V} views")
        N = xs[0].shape[0]
        if any(t.shape != xs[0].shape for t in xs):
            raise ValueError(
                "every view must have features of the same shape (N, d); got "
                f"{[tuple(t.shape) for t in xs]}"
            )
        if xs[0].shape[1] != self.config.in_dim:
            raise ValueError(
                f"features have {xs[0].shape[1]} columns, config.in_dim is {self.config.in_dim}"
            )
        if not self.config.shared_experts and V != self.config.num_views:
            raise ValueError(
                f"this unshared model has {self.config.num_views} expert pools but got {V} views"
            )
        for v, e in enumerate(edges):
            if e.numel() and (int(e.min()) < 0 or int(e.max()) >= N):
                raise ValueError(
                    f"view {v} names nodes outside [0, {N}): views must share the node set"
                )
        dtype = xs[0].dtype
        norm = [gcn_normalize(e, N, dtype=dtype) for e in edges]
        return torch.stack(xs), norm

    def forward(
        self,
        x: torch.Tensor | Sequence[torch.Tensor],
        edge_indices: Sequence[torch.Tensor],
        compute_losses: bool | None = None,
    ) -> MvCGEOutput:
        """Run all views.

        Parameters
        ----------
        x : Tensor, shape (N, d), or sequence of V Tensors of shape (N, d)
            Shared or per-view node features.
        edge_indices : sequence of V Tensors, shape (2, n_edges_v)
            Raw edges of each view (GCN-normalised here, self loops added).
        compute_losses : bool, optional
            Compute ``L_gd`` (default: in training mode). ``L_le`` is always computed.

        Returns
        -------
        MvCGEOutput
        """
        c = self.config
        h, norm = self._views(x, edge_indices)
        routings, token_views = [], []
        for layer in self.layers:
            h = F.dropout(h, c.dropout, self.training)
            p = torch.stack([self.propagate(h[v], *norm[v]) for v in range(h.shape[0])])
            h, r, views = layer(p)
            routings.append(r)
            token_views.append(views)
        if self.fusion is not None:
            fused, beta = self.fusion(h)
        else:
            fused = h.mean(0)
            beta = h.new_full((h.shape[0],), 1.0 / h.shape[0])
        logits = self.classifier(F.dropout(fused, c.dropout, self.training))
        groups = None if c.shared_experts else token_views
        le = torch.stack(
            [
                load_equilibrium_loss(r, None if groups is None else groups[i], h.shape[0])
                for i, r in enumerate(routings)
            ]
        ).mean()
        gd = h.new_zeros(())
        if (self.training if compute_losses is None else compute_losses) and h.shape[0] > 1:
            N = h.shape[1]
            idx = torch.randperm(N, device=h.device)[: c.mmd_max_nodes]
            gd = pairwise_discrepancy_loss(h[:, idx], c.mmd_bandwidths)
        return MvCGEOutput(logits, h, fused, beta, routings, token_views, le.to(h.dtype), gd)

    def loss(
        self, out: MvCGEOutput, y: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``L_CE + alpha L_le + beta L_gd`` on the nodes of ``mask`` (default all)."""
        logits = out.logits if mask is None else out.logits[mask]
        target = y if mask is None else y[mask]
        c = self.config
        return (
            F.cross_entropy(logits, target)
            + c.le_weight * out.le_loss
            + (c.gd_weight * out.gd_loss)
        )

    @staticmethod
    def expert_usage(out: MvCGEOutput, weighted: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-layer, per-view expert usage and its entropy.

        Parameters
        ----------
        out : MvCGEOutput
        weighted : bool
            Count assignments with their routing weights (see
            :func:`~sci_moe.moe.group_expert_usage`).

        Returns
        -------
        usage : Tensor, shape (L, V, E)
            Fraction of each view's assignments per expert (for unshared experts, the
            experts of that view's own pool).
        entropy : Tensor, shape (L, V), nats
        """
        V = out.embeddings.shape[0]
        res = [
            group_expert_usage(r, g, V) for r, g in zip(out.routings, out.token_views, strict=True)
        ]
        return torch.stack([u for u, _ in res]), torch.stack([e for _, e in res])
