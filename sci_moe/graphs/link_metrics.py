"""Link-prediction metrics: AUC, Recall@K and NDCG@K, for a model and for the oracle.

Conventions (AnyGraph's ranking protocol): for every anchor node ``u`` with held-out
edges, all other nodes are ranked by score with ``u``'s training neighbours (and ``u``
itself) masked out; with ``R_u`` the held-out neighbours,

.. math::

    \\mathrm{Recall@K} = \\frac{|\\mathrm{top}_K \\cap R_u|}{|R_u|}, \\qquad
    \\mathrm{NDCG@K} = \\frac{\\sum_{j \\le K} [v_j \\in R_u] / \\log_2(j + 1)}
                       {\\sum_{j \\le \\min(K, |R_u|)} 1 / \\log_2(j + 1)}

averaged over anchors (both ends of every held-out edge are anchors). AUC compares the
scores of held-out edges with those of as many sampled non-edges (Mann–Whitney, ties
counted one half).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch_geometric.data import Data

from .link_data import link_probability

__all__ = ["auc_score", "evaluate_scores", "oracle_metrics", "ranking_metrics"]


def auc_score(pos: torch.Tensor, neg: torch.Tensor) -> float:
    """Area under the ROC curve of positive vs negative scores (ties count 1/2).

    Parameters
    ----------
    pos : Tensor, shape (m,)
    neg : Tensor, shape (m',)

    Returns
    -------
    float
    """
    if pos.numel() == 0 or neg.numel() == 0:
        raise ValueError("AUC needs at least one positive and one negative score")
    pos, neg = pos.double().reshape(-1), neg.double().reshape(-1)
    s = torch.cat([pos, neg])
    order = s.argsort()
    ranks = torch.empty_like(s)
    ranks[order] = torch.arange(1, s.numel() + 1, dtype=s.dtype)
    # average ranks over ties
    uniq, inv = torch.unique(s, return_inverse=True)
    sums = torch.zeros(uniq.numel(), dtype=s.dtype).index_add_(0, inv, ranks)
    cnt = torch.zeros(uniq.numel(), dtype=s.dtype).index_add_(0, inv, torch.ones_like(s))
    ranks = (sums / cnt)[inv]
    m = pos.numel()
    return float((ranks[:m].sum() - m * (m + 1) / 2) / (m * neg.numel()))


def ranking_metrics(scores: torch.Tensor, data: Data, k: int = 20) -> dict[str, float]:
    """Recall@K and NDCG@K over the held-out edges of ``data``.

    Parameters
    ----------
    scores : Tensor, shape (n, n)
        Pair scores (symmetric or not; row = anchor).
    data : Data
        With ``edge_index`` (training) and ``test_edge_index``.
    k : int

    Returns
    -------
    dict
        ``{"recall": float, "ndcg": float}``.
    """
    n = data.num_nodes
    if scores.shape != (n, n):
        raise ValueError(f"scores must have shape ({n}, {n}), got {tuple(scores.shape)}")
    test = data.test_edge_index
    rows = torch.cat([test[0], test[1]])
    cols = torch.cat([test[1], test[0]])
    anchors = torch.unique(rows)
    s = scores[anchors].double().clone()
    local = torch.full((n,), -1, dtype=torch.long)
    local[anchors] = torch.arange(anchors.numel())
    tr = data.edge_index
    on_anchor = local[tr[0]] >= 0
    s[local[tr[0][on_anchor]], tr[1][on_anchor]] = -math.inf
    s[torch.arange(anchors.numel()), anchors] = -math.inf
    relevant = torch.zeros_like(s, dtype=torch.bool)
    relevant[local[rows], cols] = True
    kk = min(k, n)
    top = s.topk(kk, dim=1).indices
    hits = relevant.gather(1, top).double()
    n_rel = relevant.sum(1).double()
    discount = 1.0 / torch.log2(torch.arange(2, kk + 2, dtype=torch.float64))
    dcg = (hits * discount).sum(1)
    ideal = torch.cumsum(discount, 0)[(n_rel.clamp(max=kk) - 1).long()]
    return {
        "recall": float((hits.sum(1) / n_rel).mean()),
        "ndcg": float((dcg / ideal).mean()),
    }


def evaluate_scores(
    score_fn: Callable[[torch.Tensor], torch.Tensor] | torch.Tensor, data: Data, k: int = 20
) -> dict[str, float]:
    """AUC, Recall@K and NDCG@K of a link scorer on the held-out edges of ``data``.

    Parameters
    ----------
    score_fn : callable or Tensor
        Either node embeddings ``h`` of shape ``(n, d)`` (score ``⟨h_u, h_v⟩``) or a
        function mapping pairs ``(2, m)`` to scores ``(m,)`` (``pairs=None``: all pairs,
        ``(n, n)``).
    data : Data
    k : int

    Returns
    -------
    dict
        ``{"auc", "recall", "ndcg"}``.
    """
    if isinstance(score_fn, torch.Tensor):
        h = score_fn.detach()

        def score_fn(pairs):
            if pairs is None:
                return h @ h.T
            return (h[pairs[0]] * h[pairs[1]]).sum(-1)

    with torch.no_grad():
        out = ranking_metrics(score_fn(None), data, k)
        out["auc"] = auc_score(score_fn(data.test_edge_index), score_fn(data.test_neg_edge_index))
    return out


def oracle_metrics(data: Data, k: int = 20) -> dict[str, float] | None:
    """The metrics of ranking by the true link probability (Bayes-optimal), or ``None``.

    For independent-edge models (SBM, latent distance) the posterior probability that an
    unobserved pair is a held-out edge is increasing in ``P_ij``, so ranking by ``P_ij``
    is the Bayes-optimal ranking given the latent variables; its AUC on the same held-out
    edges and sampled non-edges is the ceiling of any link predictor.

    Parameters
    ----------
    data : Data
        From :func:`~sci_moe.graphs.make_link_graph`.
    k : int

    Returns
    -------
    dict or None
        ``None`` when the link model has no closed form (BA, WS, real graphs).
    """
    if link_probability(data, data.test_edge_index[:, :1]) is None:
        return None
    return evaluate_scores(lambda pairs: link_probability(data, pairs), data, k)
