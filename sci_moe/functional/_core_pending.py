"""General MoE pieces FAME needs that the core lacks (to be moved into ``sci_moe.moe``).

Written as core code: generic names, nothing specific to functional data.

* :func:`concat_routings`: the block-diagonal union of several routings, so that token
  groups routed over *disjoint* expert banks (the forward and backward vector fields of a
  bidirectional CDE, per-task banks, per-direction banks) run as one grouped GEMM over
  one stacked bank with ``sum E_g`` experts.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sci_moe.moe import Routing

__all__ = ["concat_routings"]


def concat_routings(routings: Sequence[Routing]) -> Routing:
    """Stack routings of token groups over consecutive blocks of experts.

    Routing ``g`` (``T_g`` tokens over ``E_g`` experts) is shifted to the experts
    ``[o_g, o_g + E_g)`` with ``o_g = \\sum_{h < g} E_h``; the result routes the
    ``T = \\sum_g T_g`` tokens (group 0 first) over ``E = \\sum_g E_g`` experts:

    .. math::
        i'_{t j} = i_{t j} + o_{g(t)}, \\qquad w'_{t j} = w_{t j}, \\qquad
        p'_{t, o_g + e} = p^{(g)}_{t e}\\ (0 \\text{ outside the block})

    Dropped slots (``i = E_g``) stay dropped (``i' = E``). Logits outside a token's block
    are ``-1e4`` (so ``softmax(logits)`` is still its block's ``probs``). With a bank
    whose experts ``[o_g, o_g + E_g)`` are bank ``g`` (e.g. stacked with
    :func:`torch.cat` of their weights), ``dispatch(cat(x_g), concat_routings(r), bank)``
    equals ``cat(dispatch(x_g, r_g, bank_g))``.

    Parameters
    ----------
    routings : sequence of Routing
        At least one; slot counts ``k_g`` may differ (shorter ones are padded with
        dropped slots of weight 0).

    Returns
    -------
    Routing
        ``indices``/``weights`` of shape ``(T, max_g k_g)``, ``probs``/``logits`` of
        shape ``(T, E)``. Weights, probs and logits keep their autograd history.

    Examples
    --------
    >>> a = Routing.from_assignments(torch.tensor([[0], [1]]), torch.ones(2, 1), 2)
    >>> b = Routing.from_assignments(torch.tensor([[2]]), torch.ones(1, 1), 3)
    >>> r = concat_routings([a, b])
    >>> r.indices.flatten().tolist(), r.num_experts
    ([0, 1, 4], 5)
    """
    routings = list(routings)
    if not routings:
        raise ValueError("concat_routings needs at least one Routing")
    for g, r in enumerate(routings):
        if not isinstance(r, Routing):
            raise TypeError(f"routings[{g}] is a {type(r).__name__}, not a Routing")
    E = sum(r.num_experts for r in routings)
    k = max(r.top_k for r in routings)
    dtype = routings[0].weights.dtype
    pdtype = routings[0].probs.dtype
    indices, weights, probs, logits = [], [], [], []
    offset = 0
    for r in routings:
        T, Eg = r.num_tokens, r.num_experts
        idx = torch.where(r.kept, r.indices + offset, torch.full_like(r.indices, E))
        w = r.weights.to(dtype)
        if r.top_k < k:
            pad = k - r.top_k
            idx = torch.cat([idx, idx.new_full((T, pad), E)], 1)
            w = torch.cat([w, w.new_zeros(T, pad)], 1)
        indices.append(idx)
        weights.append(w)
        left, right = offset, E - offset - Eg
        p = r.probs.to(pdtype)
        probs.append(torch.cat([p.new_zeros(T, left), p, p.new_zeros(T, right)], 1))
        lg = r.logits.to(pdtype)
        logits.append(
            torch.cat([lg.new_full((T, left), -1e4), lg, lg.new_full((T, right), -1e4)], 1)
        )
        offset += Eg
    return Routing(torch.cat(indices), torch.cat(weights), torch.cat(logits), torch.cat(probs), E)
