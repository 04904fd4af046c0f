"""Sort-based dispatch: gather rows by expert, run a bank, weighted deterministic combine."""

from __future__ import annotations

import torch

from .experts import ExpertBank
from .permute import combine_by_token, gather_by_expert
from .routing import Routing

__all__ = ["dispatch"]


def dispatch(
    x: torch.Tensor,
    routing: Routing,
    experts: ExpertBank,
    return_expert_outputs: bool = False,
    *,
    include_base: bool = True,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Apply a routed expert bank: ``y_t = base(x_t) + sum_j w_tj * E_{i_tj}(x_t)``.

    ``base`` is the bank's ungated term (:meth:`ExpertBank.base`, e.g. the frozen
    ``W0 x + b0`` of :class:`~sci_moe.moe.LoRAExperts`; nothing for the other built-in
    banks), so ``dispatch(x, routing, bank)`` is the whole bank output, the same as the
    routed part of :class:`~sci_moe.moe.MoE`.

    Parameters
    ----------
    x : Tensor, shape (T, d_in)
    routing : Routing
        For the same ``T`` tokens; ``routing.num_experts`` must equal the bank's.
    experts : ExpertBank
    return_expert_outputs : bool
        Also return the unweighted expert outputs in expert order (what Default MoE's
        EMA and the orthogonality loss need).
    include_base : bool
        Add the bank's :meth:`~ExpertBank.base` term (default). ``False`` gives only the
        routed sum (what a layer that adds the base itself, once, needs).

    Returns
    -------
    y : Tensor, shape (T, d_out)
    expert_outputs : Tensor, shape (routing.plan.num_kept, d_out)
        Only with ``return_expert_outputs=True``; row ``r`` is
        ``E_{plan.expert[r]}(x[plan.token[r]])``.

    Notes
    -----
    Steps: (1) the routing's cached plan sorts the ``T k`` assignments by expert;
    (2) ``x[token]`` gathers rows in that order; (3) the bank runs one grouped GEMM per
    weight; (4) rows are scaled by their weights, put back in ``(token, slot)`` order
    with the inverse permutation and summed over slots with ``view(T, k, d).sum(1)``.
    Forward and backward of (2) and (4) only gather (see :mod:`sci_moe.moe.permute`),
    so the layer is deterministic on every device.
    """
    if routing.num_experts != experts.num_experts:
        raise ValueError(
            f"routing is for {routing.num_experts} experts but the bank has "
            f"{experts.num_experts}; route with a router of the same size"
        )
    T = routing.indices.shape[0]
    if x.shape[0] != T:
        raise ValueError(f"routing covers {T} tokens but x has {x.shape[0]} rows")
    plan = routing.plan
    ys = experts.forward_sorted(gather_by_expert(x, plan), plan)
    w = routing.weights.reshape(-1)[plan.order[: plan.num_kept]].to(ys.dtype)
    y = combine_by_token(ys, w, plan, T)
    if include_base:
        base = experts.base(x)
        if base is not None:
            y = y + base
    return (y, ys) if return_expert_outputs else y
