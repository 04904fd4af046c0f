"""Sort-based dispatch: gather rows by expert, run a bank, weighted deterministic combine."""

from __future__ import annotations

import torch

from .experts import ExpertBank
from .routing import Routing

__all__ = ["dispatch"]


def dispatch(x: torch.Tensor, routing: Routing, experts: ExpertBank) -> torch.Tensor:
    """Apply routed experts: ``y_t = sum_j w_tj * E_{i_tj}(x_t)``.

    Parameters
    ----------
    x : Tensor, shape (T, d_in)
    routing : Routing
        For the same ``T`` tokens; ``routing.num_experts`` must equal the bank's.
    experts : ExpertBank

    Returns
    -------
    Tensor, shape (T, d_out)

    Notes
    -----
    Steps: (1) the routing's cached plan sorts the ``T k`` assignments by expert;
    (2) ``x[token]`` gathers rows in that order; (3) the bank runs one grouped GEMM per
    weight; (4) rows are scaled by their weights, put back in ``(token, slot)`` order
    with the inverse permutation (a gather, so no atomics) and summed over slots with
    ``view(T, k, d).sum(1)``. The combine is deterministic on every device.
    """
    if routing.num_experts != experts.num_experts:
        raise ValueError(
            f"routing is for {routing.num_experts} experts but the bank has "
            f"{experts.num_experts}; route with a router of the same size"
        )
    T, k = routing.indices.shape
    if x.shape[0] != T:
        raise ValueError(f"routing covers {T} tokens but x has {x.shape[0]} rows")
    plan = routing.plan
    kept = plan.num_kept
    order = plan.order[:kept]
    ys = experts.forward_sorted(x[plan.token[:kept]], plan)
    w = routing.weights.reshape(-1)[order].to(ys.dtype)
    ys = ys * w.unsqueeze(-1)
    if kept < T * k:
        ys = torch.cat([ys, ys.new_zeros(T * k - kept, ys.shape[-1])])
    return ys[plan.inverse].view(T, k, -1).sum(1)
