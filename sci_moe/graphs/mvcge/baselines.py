"""Multi-view baselines for MvCGE with the same budget: per-view, early- and late-fusion GCNs.

* :class:`GCN`: a plain GCN (Kipf & Welling 2017) on one graph,
  ``H^{(l+1)} = act(Â H^{(l)} W_l)``, then a linear classifier.
* :class:`EarlyFusionGCN`: one GCN on the summed adjacency ``Σ_v A_v``
  (duplicate edges add their weights before normalisation).
* :class:`LateFusionGCN`: one GCN per view; logits averaged over views.
* :class:`PerViewGCN`: a GCN on one chosen view of a multi-view graph.
* :class:`AttentionFusionGCN`: one GCN encoder per view fused by HAN's semantic-level
  attention (Wang et al., WWW 2019), the core of attention-based multi-view GNNs.
* :class:`MLP`: the features alone (no graph).

All take ``(x, edge_indices)`` as :class:`~sci_moe.graphs.mvcge.MvCGE` does and return logits
of shape ``(N, C)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sci_moe._util import get_activation

from ..experts import GCNPropagation, gcn_normalize

__all__ = ["GCN", "MLP", "AttentionFusionGCN", "EarlyFusionGCN", "LateFusionGCN", "PerViewGCN"]


def _first(x):
    return x if isinstance(x, torch.Tensor) else x[0]


class _LayersAndClassifier(nn.Module):
    """``num_layers`` linear layers ``in_dim -> hidden_dim -> ...`` and a linear classifier."""

    def __init__(
        self,
        in_dim: int,
        hidden_dim: int,
        num_classes: int,
        num_layers: int = 2,
        dropout: float = 0.5,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        dims = [in_dim] + [hidden_dim] * num_layers
        self.lins = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(num_layers))
        self.classifier = nn.Linear(hidden_dim, num_classes)
        self.dropout = dropout
        self._act = get_activation(activation)


class GCN(_LayersAndClassifier):
    """Plain GCN on one graph.

    Parameters
    ----------
    in_dim, hidden_dim, num_classes : int
    num_layers : int
        Propagating layers before the linear classifier.
    dropout : float
    activation : str
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.propagate = GCNPropagation()

    def embed(
        self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Node embeddings, shape ``(N, hidden_dim)``."""
        ei, ew = gcn_normalize(edge_index, x.shape[0], edge_weight, dtype=x.dtype)
        h = x
        for lin in self.lins:
            h = F.dropout(h, self.dropout, self.training)
            h = self._act(lin(self.propagate(h, ei, ew)))
        return h

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits, shape ``(N, C)``, for features ``(N, d)`` and edges ``(2, n_edges)``."""
        h = self.embed(x, edge_index, edge_weight)
        return self.classifier(F.dropout(h, self.dropout, self.training))


class PerViewGCN(GCN):
    """:class:`GCN` that reads view ``view`` of a multi-view input.

    Parameters
    ----------
    view : int
    **kwargs
        As :class:`GCN`.
    """

    def __init__(self, view: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.view = view

    def forward(self, x, edge_indices: Sequence[torch.Tensor]) -> torch.Tensor:
        """Logits from view ``self.view`` only."""
        xv = x if isinstance(x, torch.Tensor) else x[self.view]
        return super().forward(xv, edge_indices[self.view])


class EarlyFusionGCN(GCN):
    """:class:`GCN` on the summed adjacency of all views (early fusion)."""

    def forward(self, x, edge_indices: Sequence[torch.Tensor]) -> torch.Tensor:
        """Logits from ``Σ_v A_v`` (features of the first view when per-view)."""
        return super().forward(_first(x), torch.cat(list(edge_indices), dim=1))


class _GCNPerView(nn.Module):
    """One :class:`GCN` per view (``self.gcns``)."""

    def __init__(self, num_views: int, **kwargs) -> None:
        super().__init__()
        self.gcns = nn.ModuleList(GCN(**kwargs) for _ in range(num_views))

    def _views(self, x, edge_indices: Sequence[torch.Tensor]):
        """``(gcn, features, edges)`` of every view (the same features for all when shared)."""
        edges = list(edge_indices)
        if len(edges) != len(self.gcns):
            raise ValueError(f"built for {len(self.gcns)} views, got {len(edges)}")
        xs = [x] * len(edges) if isinstance(x, torch.Tensor) else list(x)
        return zip(self.gcns, xs, edges, strict=True)


class LateFusionGCN(_GCNPerView):
    """One :class:`GCN` per view; logits averaged over views (late fusion).

    Parameters
    ----------
    num_views : int
    **kwargs
        As :class:`GCN`.
    """

    def forward(self, x, edge_indices: Sequence[torch.Tensor]) -> torch.Tensor:
        """Mean of the per-view logits."""
        return torch.stack([g(xv, e) for g, xv, e in self._views(x, edge_indices)]).mean(0)


class AttentionFusionGCN(_GCNPerView):
    """One :class:`GCN` encoder per view, fused by semantic attention (HAN).

    .. math:: z_n = \\sum_v \\beta_v h^{(v)}_n, \\qquad
              \\beta = \\mathrm{softmax}_v\\Big(\\frac{1}{N}\\sum_n
              q^\\top \\tanh(W h^{(v)}_n + b)\\Big)

    then a linear classifier on ``z`` (Wang et al., "Heterogeneous Graph Attention
    Network", WWW 2019, semantic-level attention over meta-path views).

    Parameters
    ----------
    num_views : int
    **kwargs
        As :class:`GCN`.
    """

    def __init__(self, num_views: int, **kwargs) -> None:
        super().__init__(num_views, **kwargs)
        from .model import SemanticAttention

        self.attention = SemanticAttention(kwargs["hidden_dim"])
        self.classifier = nn.Linear(kwargs["hidden_dim"], kwargs["num_classes"])
        self.dropout = self.gcns[0].dropout

    def forward(self, x, edge_indices: Sequence[torch.Tensor]) -> torch.Tensor:
        """Logits ``(N, C)`` of the attention-fused view embeddings."""
        h = torch.stack([g.embed(xv, e) for g, xv, e in self._views(x, edge_indices)])
        z, _ = self.attention(h)
        return self.classifier(F.dropout(z, self.dropout, self.training))


class MLP(_LayersAndClassifier):
    """A multilayer perceptron on the node features alone (the graphs are ignored).

    Parameters
    ----------
    in_dim, hidden_dim, num_classes : int
    num_layers : int
        Hidden layers before the linear classifier.
    dropout : float
    activation : str
    """

    def forward(self, x, edge_indices=None) -> torch.Tensor:
        """Logits ``(N, C)`` from the features (of the first view when per-view)."""
        h = _first(x)
        for lin in self.lins:
            h = self._act(lin(F.dropout(h, self.dropout, self.training)))
        return self.classifier(F.dropout(h, self.dropout, self.training))
