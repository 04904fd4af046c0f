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

(``token="view"``, the paper's pooled form). The default, ``token="node"`` with
``router_input="graph"``, routes every node ``i`` of every view on
``[(P_v)_i, (P_v)_i - (H_v)_i, \\log(1 + \\deg_v i)]``: with shared node features the
pooled ``P_v`` are nearly equal across views (a normalised adjacency keeps the feature
mean), so view tokens route every view alike (issue 45). The fused embedding, semantic
attention ``Z = \\sum_v \\beta_v H_v^{(L)}``, the mean, or the concatenation
``[H_1^{(L)}, ..., H_V^{(L)}]`` (which keeps which view said what; a sum of shared-expert
embeddings does not), feeds a linear classifier, trained with

.. math:: L = L_{CE} + \\alpha L_{le} + \\beta L_{gd}

where ``L_le`` is the load-equilibrium loss of every layer's routing
(:func:`~sci_moe.moe.load_equilibrium_loss`, by default on the router's full softmax: on
the renormalised top-k weights it cannot reach an unselected expert) and ``L_gd`` the graph
discrepancy loss, minus the mean pairwise ``MMD^2`` of the views' final node embeddings
(:func:`~sci_moe.stats.pairwise_discrepancy_loss`).

Every layer is an :class:`MvCGELayer` (a :class:`~sci_moe.moe.RoutedModule`): routing uses
the core :class:`~sci_moe.moe.Router`; experts are one :class:`~sci_moe.graphs.GCNExperts`
bank run by :func:`~sci_moe.moe.dispatch` (one grouped GEMM per layer for all views, also
without shared experts: the views' routings stacked by :meth:`~sci_moe.moe.Routing.concat`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from sci_moe.moe import (
    RoutedModule,
    RoutedPath,
    Router,
    RouterConfig,
    Routing,
    group_expert_usage,
    load_equilibrium_loss,
)
from sci_moe.stats import pairwise_discrepancy_loss

from ..experts import GCNExperts, GCNPropagation, gcn_normalize
from ..pooling import pool_nodes
from .config import MvCGEConfig

__all__ = ["MvCGE", "MvCGEConfig", "MvCGELayer", "MvCGEOutput", "SemanticAttention"]


@dataclass
class MvCGEOutput:
    """What :meth:`MvCGE.forward` returns.

    Attributes
    ----------
    logits : Tensor, shape (N, C)
    embeddings : Tensor, shape (V, N, hidden_dim)
        Final-layer node embeddings of every view.
    fused : Tensor, shape (N, hidden_dim) or (N, V hidden_dim)
        The classifier's input (concatenated views with ``fusion="concat"``).
    view_weights : Tensor, shape (V,)
        Fusion weights ``beta_v`` (``1/V`` for the mean and the concatenation).
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


def _repeat_rows(r: Routing, n: int) -> Routing:
    """Each token's routing for its ``n`` rows (a view token for its nodes)."""
    return Routing(
        r.indices.repeat_interleave(n, 0),
        r.weights.repeat_interleave(n, 0),
        r.logits.repeat_interleave(n, 0),
        r.probs.repeat_interleave(n, 0),
        r.num_experts,
    )


class MvCGELayer(RoutedModule):
    """One MvCGE layer: every view's propagated rows routed graph-aware to GCN experts.

    MvCGE's routed layer (a :class:`~sci_moe.moe.RoutedModule`). The input is the
    propagated features ``P_v`` of the ``V`` views, shape ``(V, N, d)`` (all views'
    rows are routed and run in one call). Routing tokens are one pooled row per view
    (``token="view"``, its routing used by all the view's ``N`` rows) or every row
    (``token="node"``), each routed top-``k`` by the core :class:`~sci_moe.moe.Router`.
    With shared experts one router and one :class:`~sci_moe.graphs.GCNExperts` bank of
    ``M`` experts serve all views; without (the unshared ablation) view ``v`` has router
    ``v`` and experts ``[v M, (v + 1) M)`` of one bank of ``V M`` experts, and the
    views' routings are stacked by :meth:`Routing.concat <sci_moe.moe.Routing.concat>`,
    so every layer is one :func:`~sci_moe.moe.dispatch` (one grouped GEMM) either way.
    Call it as ``layer(p, views=V)``.

    Parameters
    ----------
    d_in, d_out : int
    cfg : MvCGEConfig

    Attributes
    ----------
    routers : ModuleList of Router
        One (shared experts) or ``V`` (one per view).
    experts : GCNExperts
        ``M`` or ``V M`` experts.
    token_routing : Routing or None
        The routing of the last call's tokens over each view's ``M`` experts
        (view-major: ``V`` pooled tokens or ``V N`` nodes), for the load-equilibrium
        loss and the usage statistics.
    """

    def __init__(self, d_in: int, d_out: int, cfg: MvCGEConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.d_model = d_in
        #: Width of the router's input (``2 d_in + 1`` with ``router_input="graph"``).
        self.d_route = d_in if cfg.router_input == "propagated" else 2 * d_in + 1
        n_pools = 1 if cfg.shared_experts else cfg.num_views
        rc = dict(d_model=self.d_route, num_experts=cfg.num_experts, top_k=cfg.top_k)
        self.routers = nn.ModuleList(
            Router(RouterConfig(**rc, noise_std=cfg.router_noise)) for _ in range(n_pools)
        )
        self.experts = GCNExperts(n_pools * cfg.num_experts, d_in, d_out, cfg.activation)
        self.token_routing: Routing | None = None

    def _tokens(self, p: torch.Tensor) -> torch.Tensor:
        """Routing tokens of the views' rows ``p`` (V', N, d)."""
        if self.cfg.token == "node":
            return p.reshape(-1, p.shape[-1])
        return torch.cat([pool_nodes(p[v], self.cfg.pool) for v in range(p.shape[0])])

    def route(self, x: torch.Tensor, *, views: int, context: torch.Tensor | None = None) -> Routing:
        """The rows' routing over the bank; keeps the tokens' in :attr:`token_routing`.

        Parameters
        ----------
        x : Tensor, shape (V * N, d)
            The views' rows, view-major.
        views : int
            ``V``.
        context : Tensor, shape (V * N, d + 1), optional
            With ``router_input="graph"`` (then required): every row's structural
            context, ``(Â_v H_v)_i - H_{v,i}`` and ``log(1 + deg_v(i))``, appended to the
            row before routing (see :meth:`MvCGE.forward`).

        Returns
        -------
        Routing
            ``V N`` rows over the bank's experts (unshared: view ``v``'s routing
            shifted to its block by :meth:`Routing.concat <sci_moe.moe.Routing.concat>`).
        """
        V = int(views)
        if V < 1 or x.shape[0] % V:
            raise ValueError(f"{x.shape[0]} rows are not {views} views of equal size")
        if not self.cfg.shared_experts and V != len(self.routers):
            raise ValueError(f"this unshared layer has {len(self.routers)} pools, got {V} views")
        N = x.shape[0] // V
        if self.d_route != x.shape[-1]:
            if context is None or context.shape != (x.shape[0], self.d_route - x.shape[-1]):
                raise ValueError(
                    f"router_input='graph' needs context of shape ({x.shape[0]}, "
                    f"{self.d_route - x.shape[-1]}), got "
                    f"{None if context is None else tuple(context.shape)}"
                )
            x = torch.cat([x, context], -1)
        elif context is not None:
            raise ValueError("context is only used with router_input='graph'")
        p = x.view(V, N, x.shape[-1])
        if self.cfg.shared_experts:
            pools = [(self.routers[0], p)]
        else:
            pools = [(self.routers[v], p[v : v + 1]) for v in range(V)]
        tokens, rows = [], []
        for router, pv in pools:
            r = router(self._tokens(pv))
            tokens.append(r)
            rows.append(r if self.cfg.token == "node" else _repeat_rows(r, N))
        if self.cfg.shared_experts:
            self.token_routing = tokens[0]
            return rows[0]
        self.token_routing = Routing(
            torch.cat([r.indices for r in tokens]),
            torch.cat([r.weights for r in tokens]),
            torch.cat([r.logits for r in tokens]),
            torch.cat([r.probs for r in tokens]),
            self.cfg.num_experts,
        )
        return Routing.concat(rows)

    def routed_paths(self) -> list[RoutedPath]:
        """One path per router (unshared: ``"view<v>"``, all on the one bank)."""
        named = len(self.routers) > 1
        return [
            RoutedPath(
                owner=self,
                router=router,
                experts=self.experts,
                num_experts=self.experts.num_experts,
                top_k=self.cfg.top_k,
                d_model=self.d_route,
                name=f"view{v}" if named else "",
            )
            for v, router in enumerate(self.routers)
        ]


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
            MvCGELayer(dims[i], dims[i + 1], c) for i in range(c.num_layers)
        )
        self.fusion = SemanticAttention(c.hidden_dim) if c.fusion == "attention" else None
        width = c.hidden_dim * (c.num_views if c.fusion == "concat" else 1)
        self.classifier = nn.Linear(width, c.num_classes)

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
        logdeg = torch.stack(
            [torch.bincount(e[0], minlength=N).to(dtype).log1p() for e in edges]
        ).unsqueeze(-1)
        return torch.stack(xs), norm, logdeg

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
        h, norm, logdeg = self._views(x, edge_indices)
        routings, token_views = [], []
        for layer in self.layers:
            h = F.dropout(h, c.dropout, self.training)
            V, N = h.shape[:2]
            p = torch.stack([self.propagate(h[v], *norm[v]) for v in range(V)])
            ctx = None
            if c.router_input == "graph":
                ctx = torch.cat([p - h, logdeg.to(p.dtype)], -1).reshape(V * N, -1)
            h = layer(p, views=V, context=ctx)
            routings.append(layer.token_routing)
            per_token = N if c.token == "node" else 1
            token_views.append(torch.arange(V, device=p.device).repeat_interleave(per_token))
        if self.fusion is not None:
            fused, beta = self.fusion(h)
        elif c.fusion == "concat":
            if h.shape[0] != c.num_views:
                raise ValueError(f"fusion='concat' was built for {c.num_views} views, got {V}")
            fused = h.permute(1, 0, 2).reshape(h.shape[1], -1)
            beta = h.new_full((h.shape[0],), 1.0 / h.shape[0])
        else:
            fused = h.mean(0)
            beta = h.new_full((h.shape[0],), 1.0 / h.shape[0])
        logits = self.classifier(F.dropout(fused, c.dropout, self.training))
        groups = None if c.shared_experts else token_views
        le = torch.stack(
            [
                load_equilibrium_loss(
                    r, None if groups is None else groups[i], h.shape[0], source=c.le_source
                )
                for i, r in enumerate(routings)
            ]
        ).mean()
        gd = h.new_zeros(())
        if (self.training if compute_losses is None else compute_losses) and h.shape[0] > 1:
            N = h.shape[1]
            # drawn on the CPU (the draws of a CPU run on every device)
            idx = torch.randperm(N)[: c.mmd_max_nodes].to(h.device)
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
