"""Training-free routing: top-k experts by a competence score measured on data."""

from __future__ import annotations

import torch

from .routing import Routing

__all__ = ["competence_routing"]


def competence_routing(
    scores: torch.Tensor,
    top_k: int = 1,
    *,
    usage: torch.Tensor | None = None,
    recalibration: float = 0.0,
    temperature: float = 0.1,
) -> Routing:
    """A training-free router: top-k experts by a competence score computed from data.

    Each item (a graph, a data set, a task) has a score per expert measured by running
    the expert on the item's own data, with no learned gate (AnyGraph, Xia & Huang 2024:
    the mean ``σ(⟨z_u,z_v⟩ - ⟨z_u,z_n⟩)`` over observed edges and sampled negatives).
    With ``recalibration = ρ > 0`` the score of an expert trained on ``n_e`` examples is
    scaled as in AnyGraph, so that under-used experts get a chance:

    .. math::

        \\tilde s_{ge} = s_{ge}\\Big[\\rho\\Big(1 - \\frac{n_e}{\\sum_j n_j}\\Big) + 1
            - \\frac{\\rho}{2}\\Big], \\qquad
        w_{gj} = \\frac{\\exp(\\tilde s_{g i_j}/\\tau)}{\\sum_{l \\le k}
            \\exp(\\tilde s_{g i_l}/\\tau)}

    for the ``k`` highest ``i_1, ..., i_k`` (rank order kept in the slots). The result
    is an ordinary :class:`~sci_moe.moe.Routing` (built by
    :meth:`Routing.from_assignments <sci_moe.moe.Routing.from_assignments>`), so it feeds
    :func:`~sci_moe.moe.dispatch`, the auxiliary losses and the diagnostics like a
    learned router's. The scores are detached (no gradient flows through the selection).

    Parameters
    ----------
    scores : Tensor, shape (G, E)
        Competence of every expert on every item.
    top_k : int
        ``1 <= k <= E``.
    usage : Tensor, shape (E,), optional
        Training examples seen per expert ``n_e`` (needed when ``recalibration > 0``).
    recalibration : float
        ``ρ >= 0`` (AnyGraph's ``reca_range``; 0 switches it off).
    temperature : float
        ``τ > 0`` of the softmax over the selected scores.

    Returns
    -------
    Routing
        ``indices``/``weights`` of shape ``(G, k)`` (slot 0 is the rank-1 expert),
        ``probs`` the softmax of all recalibrated scores over the experts, ``logits``
        the recalibrated scores over ``τ``.

    Examples
    --------
    >>> r = competence_routing(torch.tensor([[0.2, 0.9, 0.4]]), top_k=2)
    >>> r.indices.tolist()
    [[1, 2]]
    """
    if scores.dim() != 2:
        raise ValueError(f"scores must have shape (items, experts), got {tuple(scores.shape)}")
    E = scores.shape[1]
    if not 1 <= top_k <= E:
        raise ValueError(f"top_k must lie in [1, {E}] (the number of experts), got {top_k}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if recalibration < 0:
        raise ValueError(f"recalibration must be >= 0, got {recalibration}")
    s = scores.detach().to(torch.promote_types(scores.dtype, torch.float32))
    if recalibration > 0:
        if usage is None or usage.shape != (E,):
            raise ValueError(f"recalibration > 0 needs usage of shape ({E},)")
        n = usage.to(s.dtype)
        total = float(n.sum())
        frac = n / total if total > 0 else torch.zeros_like(n)
        s = s * ((1.0 - frac) * recalibration + 1.0 - recalibration / 2.0)
    top, idx = s.topk(top_k, dim=-1)
    weights = (top / temperature).softmax(-1)
    probs = (s / temperature).softmax(-1)
    return Routing.from_assignments(idx, weights, E, probs=probs, logits=s / temperature)
