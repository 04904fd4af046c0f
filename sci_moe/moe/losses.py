"""Auxiliary router losses, each with its formula and normalisation."""

from __future__ import annotations

import torch
import torch.distributed as dist

from .routing import Routing

__all__ = ["load_balancing_loss", "router_z_loss"]


def load_balancing_loss(
    routing: Routing,
    global_batch: bool = False,
    process_group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Switch-Transformer load-balancing loss, normalised so that uniform routing gives 1.

    .. math::

        L_{bal} = E \\sum_{i=1}^{E} f_i P_i, \\qquad
        f_i = \\frac{1}{T k}\\sum_t \\sum_{j=1}^k \\mathbb 1[i_{tj} = i], \\qquad
        P_i = \\frac{1}{T}\\sum_t p_{ti}

    ``f_i`` is the fraction of the ``T k`` (kept) assignments that go to expert ``i``
    (dividing by ``k`` as MegaBlocks does; transformers' ``load_balancing_loss_func``
    does not, so its minimum is ``k``), ``P_i`` the mean router probability. ``f`` has
    no gradient; the loss trains the router through ``P``. Perfectly balanced routing
    gives exactly 1, total collapse onto one expert gives ``E``.

    Parameters
    ----------
    routing : Routing
    global_batch : bool
        Sum ``f`` and ``P`` over all ranks of ``process_group`` before the product
        (global-batch balancing, Qiu et al. 2025). A no-op when ``torch.distributed``
        is not initialised.
    process_group : ProcessGroup, optional

    Returns
    -------
    Tensor, scalar
    """
    E = routing.num_experts
    counts = routing.load.to(routing.probs.dtype)
    prob_sum = routing.probs.sum(0)
    n_tokens = torch.tensor(float(routing.num_tokens), dtype=prob_sum.dtype, device=prob_sum.device)
    if global_batch and dist.is_available() and dist.is_initialized():
        stats = torch.cat([counts, n_tokens.view(1)])
        dist.all_reduce(stats, group=process_group)
        counts, n_tokens = stats[:E], stats[E]
        prob_sum = _all_reduce_with_grad(prob_sum, process_group)
    f = counts / counts.sum().clamp_min(1.0)
    P = prob_sum / n_tokens
    return E * (f * P).sum()


def _all_reduce_with_grad(t: torch.Tensor, group) -> torch.Tensor:
    # The sum over ranks carries this rank's gradient; other ranks' terms are constants.
    total = t.detach().clone()
    dist.all_reduce(total, group=group)
    return t + (total - t.detach())


def router_z_loss(routing: Routing) -> torch.Tensor:
    """Router z-loss (ST-MoE, Zoph et al. 2022): mean squared log-partition function.

    .. math:: L_z = \\frac{1}{T}\\sum_{t=1}^{T}\\Big(\\log\\sum_{i=1}^{E} e^{\\ell_{ti}}\\Big)^2

    Penalises large logits and keeps the router numerically stable; a typical weight is
    1e-3.

    Returns
    -------
    Tensor, scalar
    """
    return torch.logsumexp(routing.logits, dim=-1).square().mean()
