"""AnyGraph-style MoE graph foundation model for link prediction.

Xia & Huang, "AnyGraph: Graph Foundation Model in the Wild" (2024; HKUDS/AnyGraph), the
base model of Liu et al., "Enhanced Expert Merging for Mixture-of-Experts in Graph
Foundation Models" (NeurIPS 2025). As its ``model.py`` implements it:

1. **Unified input** (:func:`svd_embedding`, :func:`unified_features`): a truncated SVD
   ``U √S`` of the features and ``U √S + V √S`` of the normalised adjacency map every
   graph, whatever its feature dimension, to ``d`` columns ordered by singular value;
   LayerNorm (no affine).
2. **Parameter-free propagation** (:func:`propagate`): ``E = Σ_{l=1}^{L} Â^l E_0``.
3. **Experts**: residual MLPs (:class:`~sci_moe.moe.ResidualMLPExperts`), the embedding
   ``h = f_e(E)`` scores a link ``(u, v)`` as ``⟨h_u, h_v⟩``.
4. **Training-free router** (:meth:`AnyGraphMoE.competence`): each expert's mean
   ``σ(⟨h_u,h_v⟩ - ⟨h_u,h_n⟩)`` over the graph's observed edges and sampled negatives;
   the graph goes to the best expert (the core :class:`~sci_moe.moe.Router` in
   competence mode, ``mode="competence"``).

:class:`AnyGraphMoE` is a :class:`~sci_moe.moe.RoutedModule`: ``model(z, data=graph,
top_k=k)`` routes a graph's node rows to its top-k experts and returns their weighted
embeddings (the output ensemble; one token per graph, every node follows it).

The link loss (:func:`link_loss`) is AnyGraph's softmax cross-entropy of one positive
against sampled negatives, plus its L2 term.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch_geometric.data import Data

from sci_moe.moe import ResidualMLPExperts, RoutedModule, Router, Routing, merged_forward

from .ensemble import _ensemble_routing

__all__ = [
    "AnyGraphConfig",
    "AnyGraphMoE",
    "link_loss",
    "normalized_adjacency",
    "propagate",
    "sample_link_batch",
    "svd_embedding",
    "unified_features",
]


def normalized_adjacency(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """``Â = D^{-1/2} (A + I) D^{-1/2}`` as a sparse COO tensor (isolated nodes: ``Â_ii = 1``).

    Parameters
    ----------
    edge_index : Tensor, shape (2, M)
        Both directions of every undirected edge.
    num_nodes : int

    Returns
    -------
    Tensor, shape (n, n), sparse
    """
    loops = torch.arange(num_nodes).expand(2, -1)
    ei = torch.cat([edge_index.long(), loops], 1)
    ei = torch.unique(ei, dim=1)
    deg = torch.zeros(num_nodes).index_add_(0, ei[0], torch.ones(ei.shape[1]))
    w = deg[ei[0]].rsqrt() * deg[ei[1]].rsqrt()
    dtype = torch.get_default_dtype()
    return torch.sparse_coo_tensor(
        ei, w.to(dtype), (num_nodes, num_nodes), check_invariants=False
    ).coalesce()


def svd_embedding(
    matrix: torch.Tensor, dim: int, both_sides: bool = False, niter: int = 4, seed: int = 0
) -> torch.Tensor:
    """Truncated SVD embedding ``U √S`` (``+ V √S``), padded with zeros to ``dim`` columns.

    Signs are fixed so that every column of ``U`` has a non-negative sum (the SVD is
    unique only up to a sign per singular pair), making the map reproducible.

    Parameters
    ----------
    matrix : Tensor, shape (n, f), dense or sparse
    dim : int
        Output width ``d``; the rank used is ``q = min(d, n, f)``.
    both_sides : bool
        Add ``V √S`` (square matrices, AnyGraph's adjacency projector).
    niter : int
        Subspace iterations of :func:`torch.svd_lowrank`.
    seed : int
        For the random start of :func:`torch.svd_lowrank` (no global state is touched).

    Returns
    -------
    Tensor, shape (n, dim)
    """
    n, f = matrix.shape
    q = min(dim, n, f)
    out = torch.zeros(n, dim, dtype=torch.get_default_dtype())
    if q == 0:
        return out
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if q >= min(n, f) - 1:
            dense = matrix.to_dense() if matrix.is_sparse else matrix
            U, S, Vh = torch.linalg.svd(dense.double(), full_matrices=False)
            U, S, V = U[:, :q], S[:q], Vh[:q].T
        else:
            U, S, V = torch.svd_lowrank(matrix.double(), q=q, niter=niter)
    sign = torch.where(U.sum(0) < 0, -1.0, 1.0).to(U.dtype)
    U, V = U * sign, V * sign
    emb = U * S.sqrt()
    if both_sides:
        if n != f:
            raise ValueError("both_sides=True needs a square matrix")
        emb = emb + V * S.sqrt()
    out[:, :q] = emb.to(out.dtype)
    return out


def propagate(adjacency: torch.Tensor, embeddings: torch.Tensor, hops: int) -> torch.Tensor:
    """Parameter-free propagation ``E = Σ_{l=1}^{L} Â^l LN(E_0)`` (``L = 0``: ``LN(E_0)``).

    Parameters
    ----------
    adjacency : Tensor, shape (n, n), sparse
        From :func:`normalized_adjacency`.
    embeddings : Tensor, shape (n, d)
        ``E_0``.
    hops : int
        ``L >= 0``.

    Returns
    -------
    Tensor, shape (n, d)
    """
    if hops < 0:
        raise ValueError(f"hops must be >= 0, got {hops}")
    e = nn.functional.layer_norm(embeddings, embeddings.shape[-1:])
    if hops == 0:
        return e
    total = torch.zeros_like(e)
    for _ in range(hops):
        e = torch.sparse.mm(adjacency, e)
        total = total + e
    return total


def unified_features(
    data: Data, dim: int, hops: int = 2, use_features: bool = True, seed: int = 0
) -> torch.Tensor:
    """AnyGraph's input for one graph: SVD of features + SVD of ``Â``, then propagation.

    Only the training edges (``data.edge_index``) are used. A graph with no features
    (``x`` absent or of width 0) uses the structure alone.

    Parameters
    ----------
    data : Data
        ``edge_index`` (both directions), optional ``x`` of shape ``(n, f)``.
    dim : int
    hops : int
    use_features : bool
        Add the feature SVD (AnyGraph's ``proj_method="both"``).
    seed : int

    Returns
    -------
    Tensor, shape (n, dim)
        Fixed (no gradient) input of the experts.
    """
    n = int(data.num_nodes)
    if n < 1 or data.edge_index is None:
        raise ValueError("the graph needs nodes and an edge_index (use link_split first)")
    adj = normalized_adjacency(data.edge_index, n)
    e0 = svd_embedding(adj, dim, both_sides=True, seed=seed)
    x = getattr(data, "x", None)
    if use_features and x is not None and x.dim() == 2 and x.shape[1] > 0:
        e0 = e0 + svd_embedding(x.to(e0.dtype), dim, seed=seed)
    with torch.no_grad():
        return propagate(adj, e0, hops)


@dataclass
class AnyGraphConfig:
    """Configuration of :class:`AnyGraphMoE`.

    Attributes
    ----------
    d_model : int
        Embedding width ``d`` (AnyGraph's ``latdim``).
    num_experts : int
    num_layers : int
        Residual layers per expert (``fc_layer``).
    hops : int
        Propagation steps ``L`` (``gnn_layer``).
    activation : str
    dropout : float
    use_features : bool
    weight_decay : float
        AnyGraph's ``reg``: ``reg * Σ ||θ||²`` of the experts used.
    """

    d_model: int = 32
    num_experts: int = 4
    num_layers: int = 2
    hops: int = 2
    activation: str = "leaky_relu"
    dropout: float = 0.0
    use_features: bool = True
    weight_decay: float = 1e-6

    def __post_init__(self):
        if self.d_model < 1 or self.num_experts < 1 or self.num_layers < 1 or self.hops < 0:
            raise ValueError(
                "need d_model, num_experts, num_layers >= 1 and hops >= 0; got "
                f"{self.d_model}, {self.num_experts}, {self.num_layers}, {self.hops}"
            )


def sample_link_batch(
    data: Data, batch_size: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Anchors, positives (observed edges) and uniformly sampled negative nodes.

    Parameters
    ----------
    data : Data
    batch_size : int
    generator : torch.Generator, optional

    Returns
    -------
    anchors, positives, negatives : Tensor, shape (batch_size,), int64
    """
    ei = data.edge_index
    if ei.shape[1] == 0:
        raise ValueError(f"graph {getattr(data, 'name', '')!r} has no training edges")
    pick = torch.randint(0, ei.shape[1], (batch_size,), generator=generator)
    neg = torch.randint(0, int(data.num_nodes), (batch_size,), generator=generator)
    return ei[0, pick], ei[1, pick], neg


def link_loss(anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """AnyGraph's link loss: softmax cross-entropy of each positive against all negatives.

    .. math:: L = -\\frac{1}{B}\\sum_b \\Big[s^+_b - \\log\\Big(e^{s^+_b}
        + \\sum_{j} e^{s^-_{bj}}\\Big)\\Big], \\quad s^+_b = ⟨h_{a_b}, h_{p_b}⟩,\\;
        s^-_{bj} = ⟨h_{a_b}, h_{n_j}⟩

    Parameters
    ----------
    anchor, positive : Tensor, shape (B, d)
    negative : Tensor, shape (B', d)

    Returns
    -------
    Tensor, scalar
    """
    pos = (anchor * positive).sum(-1)
    neg = anchor @ negative.T
    logits = torch.cat([pos[:, None], neg], 1)
    return -(pos - logits.logsumexp(-1)).mean()


class AnyGraphMoE(RoutedModule):
    """A bank of residual-MLP experts over SVD-unified, propagated graph embeddings.

    The AnyGraph-style MoE layer, a :class:`~sci_moe.moe.RoutedModule` whose tokens are
    one graph's node rows: :meth:`route` scores the experts' competence on the graph
    and picks its top-k (the core :class:`~sci_moe.moe.Router` in competence mode, a
    training-free router made per call with the call's options), every node follows
    the graph's routing, and the forward is the weighted output ensemble
    ``Σ_k w_k f_{θ_k}(z)`` of the graph's experts through :func:`~sci_moe.moe.dispatch`.

    Parameters
    ----------
    config : AnyGraphConfig

    Attributes
    ----------
    experts : ResidualMLPExperts
    usage : Tensor, shape (E,)
        Training examples seen per expert (buffer; AnyGraph's ``trn_count``, used by
        the router's recalibration).

    Examples
    --------
    >>> from sci_moe.graphs import make_link_graph
    >>> g = make_link_graph("sbm", 40, 4, seed=0)
    >>> model = AnyGraphMoE(AnyGraphConfig(d_model=8, num_experts=3))
    >>> z = model.encode(g)
    >>> h, info = model(z, data=g, top_k=2, return_routing=True)
    >>> h.shape, info.routing.indices.shape
    (torch.Size([40, 8]), torch.Size([40, 2]))
    """

    def __init__(self, config: AnyGraphConfig | None = None) -> None:
        super().__init__()
        self.config = config or AnyGraphConfig()
        c = self.config
        self.d_model = c.d_model
        self.experts = ResidualMLPExperts(
            c.num_experts, c.d_model, c.num_layers, c.activation, c.dropout
        )
        self.register_buffer("usage", torch.ones(c.num_experts))

    def encode(self, data: Data, seed: int = 0) -> torch.Tensor:
        """Fixed input embeddings ``(n, d)`` of a graph (:func:`unified_features`)."""
        c = self.config
        return unified_features(data, c.d_model, c.hops, c.use_features, seed)

    def embed(self, z: torch.Tensor, experts, weights=None, mode: str = "merge") -> torch.Tensor:
        """Node embeddings from the selected experts.

        Parameters
        ----------
        z : Tensor, shape (n, d)
            From :meth:`encode`.
        experts : int or sequence of int
            Selected experts (rank order).
        weights : sequence of float, optional
            Their weights (default uniform).
        mode : {"merge", "ensemble"}
            ``"merge"``: one forward of ``θ = Σ w_k θ_k`` (differentiable);
            ``"ensemble"``: ``Σ w_k f_{θ_k}(z)`` (``k`` forwards).

        Returns
        -------
        Tensor, shape (n, d)
        """
        ids = [int(experts)] if isinstance(experts, int) else [int(e) for e in experts]
        if weights is None:
            weights = torch.full((len(ids),), 1.0 / len(ids))
        if len(ids) == 1:
            return self.experts.forward_expert(ids[0], z)
        if mode == "merge":
            return merged_forward(self.experts, z, ids, weights)
        if mode == "ensemble":
            return self(z, _ensemble_routing(self.experts, z, ids, weights))
        raise ValueError(f"mode must be 'merge' or 'ensemble', got {mode!r}")

    @torch.no_grad()
    def competence(
        self, z: torch.Tensor, data: Data, num_samples: int = 2048, seed: int = 0
    ) -> torch.Tensor:
        """AnyGraph's competence score of every expert on one graph.

        .. math:: s_e = \\frac{1}{m}\\sum_{(u,v,n)} \\sigma\\big(⟨h^e_u, h^e_v⟩
            - ⟨h^e_u, h^e_n⟩\\big)

        over ``m`` sampled observed edges ``(u, v)`` and random nodes ``n``.

        Parameters
        ----------
        z : Tensor, shape (n, d)
            Moved to the model's device where it is elsewhere.
        data : Data
        num_samples : int
        seed : int
            Of the edges and negatives, drawn on the CPU whatever the device.

        Returns
        -------
        Tensor, shape (E,)
        """
        z = z.to(self.usage.device)  # the encodings may still be on the CPU
        g = torch.Generator().manual_seed(seed)  # drawn on the CPU on every device
        a, p, n = (t.to(z.device) for t in sample_link_batch(data, num_samples, g))
        scores = []
        for e in range(self.config.num_experts):
            h = self.experts.forward_expert(e, z)
            diff = (h[a] * h[p]).sum(-1) - (h[a] * h[n]).sum(-1)
            scores.append(torch.sigmoid(diff).mean())
        return torch.stack(scores)

    def competence_router(
        self, top_k: int = 1, recalibration: float = 0.0, temperature: float = 0.1
    ) -> Router:
        """The training-free router: the core :class:`~sci_moe.moe.Router` in competence mode.

        It reads an ``(items, E)`` matrix of competence scores (:meth:`competence`) and
        takes the experts' :attr:`usage` as ``usage=``; see
        :class:`~sci_moe.moe.RouterConfig` (``top_k``, ``recalibration``,
        ``temperature``). No parameters: made per call with the call's options.
        """
        E = self.config.num_experts
        return Router(
            d_model=E,
            num_experts=E,
            top_k=top_k,
            mode="competence",
            recalibration=recalibration,
            temperature=temperature,
        )

    def route(
        self,
        x: torch.Tensor,
        *,
        data: Data,
        top_k: int = 1,
        recalibration: float = 0.0,
        temperature: float = 0.1,
        seed: int = 0,
    ) -> Routing:
        """Routing of one graph's node rows: its top-k experts by competence, for every node.

        Parameters
        ----------
        x : Tensor, shape (n, d)
            :meth:`encode` of ``data``.
        data : Data
        top_k, recalibration, temperature :
            See :meth:`competence_router`.
        seed : int
            Of the edges and negatives sampled by :meth:`competence`.

        Returns
        -------
        Routing
            ``n`` rows, all with the graph's experts (slot ``j`` the rank-``j+1``) and
            weights.
        """
        scores = self.competence(x, data, seed=seed).unsqueeze(0)
        r = self.competence_router(top_k, recalibration, temperature)(scores, usage=self.usage)
        n = x.shape[0]
        return Routing.from_assignments(
            r.indices.expand(n, -1),
            r.weights.expand(n, -1),
            r.num_experts,
            probs=r.probs.expand(n, -1),
            logits=r.logits.expand(n, -1),
        )

    def route_graphs(
        self,
        encoded: list[torch.Tensor],
        graphs: list[Data],
        top_k: int = 1,
        recalibration: float = 0.0,
        temperature: float = 0.1,
        seed: int = 0,
    ) -> Routing:
        """Graph-level routing of several graphs (one token per graph).

        Parameters
        ----------
        encoded : list of Tensor
            :meth:`encode` of each graph.
        graphs : list of Data
        top_k, recalibration, temperature :
            See :meth:`competence_router` (``usage`` is :attr:`usage`).
        seed : int
            Graph ``i``'s competence is sampled with ``seed + i``.

        Returns
        -------
        Routing
            ``G`` tokens, slot ``j`` the rank-``j+1`` expert.
        """
        if len(encoded) != len(graphs) or not graphs:
            raise ValueError("give one encoding per graph, at least one graph")
        scores = torch.stack(
            [
                self.competence(z, d, seed=seed + i)
                for i, (z, d) in enumerate(zip(encoded, graphs, strict=True))
            ]
        )
        router = self.competence_router(top_k, recalibration, temperature)
        return router(scores, usage=self.usage)

    def l2(self, experts) -> torch.Tensor:
        """``weight_decay * Σ_{e ∈ experts} ||θ_e||²`` (AnyGraph's ``reg`` term)."""
        ids = [int(experts)] if isinstance(experts, int) else [int(e) for e in experts]
        total = sum(p[ids].square().sum() for p in self.experts.parameters())
        return self.config.weight_decay * total
