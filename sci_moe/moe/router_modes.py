r"""The selection rules of :class:`~sci_moe.moe.Router`'s special modes.

Implementation detail of :mod:`sci_moe.moe.router` (use the router's modes):

* ``mode="slot_top_m"``: :func:`slot_expanded_top_m` and its slot map
  :func:`slot_to_expert` (FedLEASE, Wang, Bian, Zhang and Xu, NeurIPS 2025,
  arXiv:2509.15087);
* ``mode="competence"``: :func:`competence_routing` (AnyGraph, Xia & Huang 2024);
* ``mode="tree"``: :func:`tree_capacity` and :func:`tree_select` (one level of an
  expert-choice tree, MoRE-Brain, Wei et al., NeurIPS 2025).
"""

from __future__ import annotations

import math

import torch

from .routing import Routing

__all__ = [
    "competence_routing",
    "slot_expanded_top_m",
    "slot_to_expert",
    "tree_capacity",
    "tree_select",
]


def _check_own(own: int | torch.Tensor, T: int, num_experts: int, device) -> torch.Tensor:
    if isinstance(own, bool):
        raise TypeError("own must be an int or an integer tensor, got a bool")
    if isinstance(own, int):
        own = torch.full((T,), own, dtype=torch.long, device=device)
    elif isinstance(own, torch.Tensor):
        if own.dtype.is_floating_point or own.dtype == torch.bool:
            raise TypeError(f"own must be an integer tensor, got {own.dtype}")
        if own.dim() == 0:
            own = own.expand(T)
        if own.shape != (T,):
            raise ValueError(f"own must be an int or shape ({T},), got {tuple(own.shape)}")
        own = own.to(device=device, dtype=torch.long)
    else:
        raise TypeError(f"own must be an int or an integer tensor, got {type(own).__name__}")
    if own.numel() and (int(own.min()) < 0 or int(own.max()) >= num_experts):
        raise ValueError(
            f"own expert ids must lie in [0, {num_experts - 1}], got values in "
            f"[{int(own.min())}, {int(own.max())}]"
        )
    return own


def slot_to_expert(own: torch.Tensor, num_experts: int) -> torch.Tensor:
    """Expert of each of the ``2M - 1`` slots, per token.

    .. math:: e(p) = \\begin{cases} o & p < M \\\\ \\mathrm{others}(o)_{p - M} & p \\ge M
       \\end{cases}

    where :math:`\\mathrm{others}(o) = (0, \\dots, o - 1, o + 1, \\dots, M - 1)` lists the
    experts other than the own expert ``o`` in increasing order.

    Parameters
    ----------
    own : Tensor, shape (T,), int64
        Own expert of each token, in ``[0, M)``.
    num_experts : int
        ``M``.

    Returns
    -------
    Tensor, shape (T, 2M - 1), int64

    Examples
    --------
    >>> slot_to_expert(torch.tensor([0, 2]), 3).tolist()
    [[0, 0, 0, 1, 2], [2, 2, 2, 0, 1]]
    """
    M = num_experts
    j = torch.arange(M - 1, device=own.device)
    others = j.unsqueeze(0) + (j.unsqueeze(0) >= own.unsqueeze(1)).long()  # (T, M-1)
    return torch.cat([own.unsqueeze(1).expand(-1, M), others], 1)


def slot_expanded_top_m(
    slot_logits: torch.Tensor, own: int | torch.Tensor, *, normalize: bool = False
) -> Routing:
    """Slot-expanded adaptive top-``M`` routing (FedLEASE, arXiv:2509.15087, Sec. 3.3).

    With ``M`` experts and slot scores :math:`z \\in \\mathbb{R}^{2M-1}` per token,

    .. math::
        \\hat\\omega = \\mathrm{softmax}(z), \\qquad
        S = \\mathrm{TopM}(\\hat\\omega), \\qquad
        w_e = \\sum_{p \\in S,\\ e(p) = e} \\hat\\omega_p,

    where slots :math:`p < M` map to the own expert ``o`` and slots
    :math:`M \\le p \\le 2M - 2` to the other ``M - 1`` experts (:func:`slot_to_expert`). As
    only ``M - 1`` slots point elsewhere, at least one own slot is in ``S``: expert ``o`` is
    always used, and a token uses between 1 and ``M`` distinct experts. The layer output is
    :math:`y = \\mathrm{base}(x) + \\sum_e w_e\\, E_e(x)` (e.g. with
    :class:`~sci_moe.moe.LoRAExperts` and :func:`~sci_moe.moe.dispatch`).

    Parameters
    ----------
    slot_logits : Tensor, shape (T, 2M - 1)
        Slot scores :math:`z = G h`.
    own : int or Tensor, shape (T,)
        Own expert, one for all tokens or one per token.
    normalize : bool
        Divide the weights by :math:`\\sum_{p \\in S} \\hat\\omega_p` (the paper does not;
        default ``False``).

    Returns
    -------
    Routing
        ``indices`` of shape ``(T, M)``: column 0 is the own expert, column ``j >= 1`` the
        expert of slot ``M - 1 + j`` if selected, else ``M`` (a dropped slot, weight 0).
        ``weights`` the aggregated :math:`w_e` (differentiable in ``slot_logits``);
        ``probs`` of shape ``(T, M)`` the slot probabilities summed per expert over all
        slots, ``logits`` their logarithm.

    Examples
    --------
    >>> r = slot_expanded_top_m(torch.tensor([[0.0, 0.0, 5.0]]), own=0)
    >>> r.indices.tolist(), [round(w, 3) for w in r.weights[0].tolist()]
    ([[0, 1]], [0.007, 0.987])
    """
    if slot_logits.dim() != 2 or slot_logits.shape[1] % 2 != 1:
        raise ValueError(
            "slot_logits must have shape (T, 2M - 1) with an odd number of slots, got "
            f"{tuple(slot_logits.shape)}"
        )
    T, P = slot_logits.shape
    M = (P + 1) // 2
    own = _check_own(own, T, M, slot_logits.device)
    probs_slots = torch.softmax(slot_logits, dim=-1)
    top = torch.topk(probs_slots, M, dim=-1).indices  # (T, M)
    selected = torch.zeros(T, P, dtype=torch.bool, device=slot_logits.device)
    selected.scatter_(1, top, True)
    sel_probs = probs_slots * selected
    w_own = sel_probs[:, :M].sum(1, keepdim=True)
    w_other = sel_probs[:, M:]  # (T, M - 1)
    weights = torch.cat([w_own, w_other], 1)
    if normalize:
        weights = weights / sel_probs.sum(1, keepdim=True)
    experts = slot_to_expert(own, M)  # (T, 2M - 1)
    other_ids = experts[:, M:]
    other_idx = torch.where(selected[:, M:], other_ids, torch.full_like(other_ids, M))
    indices = torch.cat([own.unsqueeze(1), other_idx], 1)
    dtype = torch.promote_types(probs_slots.dtype, torch.float32)
    probs = torch.zeros(T, M, dtype=dtype, device=slot_logits.device)
    probs = probs.scatter_add(1, experts, probs_slots.to(dtype))
    return Routing.from_assignments(
        indices, weights, M, probs=probs, logits=probs.log().clamp_min(-1e4)
    )


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


def tree_capacity(num_candidates: int, branching: int, capacity_factor: float) -> int:
    """Rows each child chooses among its parent's ``num_candidates`` rows.

    .. math:: k = \\min\\big(v, \\lfloor c_f\\, v / b \\rfloor\\big)

    (MoRE-Brain: ``k = floor(v / e_l * c_f)`` with ``v`` the candidates of an expert and
    ``b`` its children).

    Raises
    ------
    ValueError
        If the children would get no row (``k < 1``).
    """
    k = min(num_candidates, math.floor(capacity_factor * num_candidates / branching))
    if k < 1:
        raise ValueError(
            f"{branching} children share {num_candidates} candidate rows with "
            f"capacity_factor={capacity_factor}, leaving each expert 0 rows; use more "
            "tokens (voxels), fewer experts or a larger capacity_factor"
        )
    return k


def tree_select(probs: torch.Tensor, capacity: int, dtype: torch.dtype) -> Routing:
    """One tree level's expert-choice selection as a gather :class:`Routing`.

    Parameters
    ----------
    probs : Tensor, shape (G, P, k_prev, b)
        Score of every candidate row (``k_prev`` rows of each of the ``P`` parents, in
        ``G`` groups) over its parent's ``b`` children (softmax over the children).
    capacity : int
        Rows ``k`` each child chooses (top-``k`` over its parent's rows).
    dtype : torch.dtype
        Dtype of the routing weights (the rows' dtype).

    Returns
    -------
    Routing
        ``R = G E k`` routed rows ordered ``(group, expert, slot)`` with
        ``E = P b``: ``indices`` ``(R, 1)`` the expert, ``weights`` ``(R, 1)`` its score,
        ``source`` ``(R,)`` the candidate row (``(g P + p) k_prev + i``) each routed row
        reads; ``probs`` and ``logits`` the scores scattered into ``(R, E)``.
    """
    G, P, k_prev, b = probs.shape
    E, k = P * b, capacity
    score, idx = probs.topk(k, dim=2)  # (G, P, k, b)
    score = score.permute(0, 1, 3, 2).reshape(-1)  # rows (g, p, c, slot)
    idx = idx.permute(0, 1, 3, 2)
    base = (torch.arange(G * P, device=probs.device) * k_prev).view(G, P, 1, 1)
    source = (base + idx).reshape(-1)
    expert = torch.arange(E, device=probs.device).view(1, E, 1).expand(G, E, k).reshape(-1, 1)
    w = score.view(-1, 1).to(dtype)
    # The selection was made here; scores over all E (for aux losses) are the weights
    # scattered (0 elsewhere), logits their zero-based stand-in.
    flat = torch.zeros(w.shape[0], E, dtype=probs.dtype, device=probs.device)
    flat = flat.scatter(1, expert, score.view(-1, 1))
    routing = Routing.from_assignments(expert, w, E, probs=flat, logits=flat)
    routing.source = source
    return routing
