"""Auxiliary router losses, each with its formula and normalisation."""

from __future__ import annotations

import torch
import torch.distributed as dist

from .diagnostics import _check_groups
from .routing import Routing
from .specialization import selection_scores

__all__ = [
    "load_balancing_loss",
    "load_equilibrium_loss",
    "router_z_loss",
    "usage_mse_loss",
]

_SOURCES = ("weights", "probs")


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
    gives exactly 1, total collapse onto one expert gives ``E``; an empty batch
    (``T = 0``) gives 0.

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
    P = prob_sum / n_tokens.clamp_min(1.0)  # an empty batch: P = 0, L = 0
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
    1e-3. An empty batch (``T = 0``) gives 0.

    Returns
    -------
    Tensor, scalar
    """
    lse2 = torch.logsumexp(routing.logits, dim=-1).square()
    return lse2.mean() if lse2.numel() else lse2.sum()


def load_equilibrium_loss(
    routing: Routing,
    groups: torch.Tensor | None = None,
    num_groups: int | None = None,
    source: str = "weights",
    eps: float = 1e-10,
) -> torch.Tensor:
    """Load-equilibrium loss: squared coefficient of variation of the expert importance.

    .. math::

        I^{(g)}_i = \\sum_{t \\in g} s_{ti}, \\qquad
        L_{le} = \\frac{1}{G}\\sum_{g=1}^{G}
            \\frac{\\mathrm{Var}_i\\big(I^{(g)}_i\\big)}
                 {\\big(\\mathrm{mean}_i I^{(g)}_i\\big)^2 + \\epsilon}

    (Shazeer et al. 2017, Eq. 6, "importance loss"; MvCGE, Wu et al. NeurIPS 2025, uses
    a load-equilibrium term of this kind so that every shared expert is used). ``s`` is
    the routing weight scattered into ``(T, E)`` (``source="weights"``, i.e.
    :func:`sci_moe.moe.specialization.selection_scores`: 0 for unselected experts, differentiable
    through the selected weights) or the full router score (``source="probs"``). ``Var``
    is the population variance over the ``E`` experts. Uniform importance gives 0; all
    weight on one expert gives ``E - 1``. With ``groups`` the loss is computed inside each
    group of tokens (e.g. the nodes or the pooled token of one view) and averaged over
    the groups, so every group must spread its load. Groups without tokens are skipped.

    Parameters
    ----------
    routing : Routing
        ``T`` tokens over ``E`` experts.
    groups : Tensor, shape (T,), integer, optional
        Group id of every token (default: one group).
    num_groups : int, optional
        ``G`` (default ``groups.max() + 1``).
    source : {"weights", "probs"}
    eps : float
        Added to the squared mean (guards empty or all-zero importance).

    Returns
    -------
    Tensor, scalar
    """
    if source not in _SOURCES:
        raise ValueError(f"source must be one of {_SOURCES}, got {source!r}")
    s = selection_scores(routing) if source == "weights" else routing.probs
    T, E = s.shape
    groups, G = _check_groups(groups, num_groups, T)
    if groups is None:
        importance = s.sum(0, keepdim=True)
        present = torch.ones(1, dtype=torch.bool, device=s.device)
    else:
        importance = s.new_zeros(G, E).index_add(0, groups, s)
        present = torch.bincount(groups, minlength=G) > 0
    mean = importance.mean(-1)
    var = importance.var(-1, unbiased=False)
    cv2 = var / (mean.square() + eps)
    if not bool(present.any()):
        return s.sum() * 0.0
    return cv2[present].mean()


def usage_mse_loss(probs: torch.Tensor) -> torch.Tensor:
    """MSE between the experts' mean score and the uniform share (MoRE-Brain).

    .. math:: f_{g,c} = \\frac{1}{N}\\sum_{n} P_{g,n,c}, \\qquad
              L = \\frac{1}{G\\,b}\\sum_{g,c} \\big(f_{g,c} - 1/b\\big)^2

    ``g`` runs over routing groups (e.g. a tree's parents), ``n`` over the candidates of
    a group (batch and tokens), ``c`` over the ``b`` experts they may go to.

    Parameters
    ----------
    probs : Tensor, shape (..., N, b) or (G, N, b)
        Scores summing to one over the last axis. A 2-D input is one group.

    Returns
    -------
    Tensor, shape ()
    """
    if probs.dim() < 2:
        raise ValueError(f"probs must have shape (..., N, b), got {tuple(probs.shape)}")
    if probs.dim() == 2:
        probs = probs.unsqueeze(0)
    probs = probs.reshape(-1, *probs.shape[-2:])
    b = probs.shape[-1]
    usage = probs.mean(dim=1)
    return ((usage - 1.0 / b) ** 2).mean()
