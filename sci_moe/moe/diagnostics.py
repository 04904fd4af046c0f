"""Routing diagnostics across groups of tokens (views, scales, tasks, modalities).

A router shared by several groups of tokens (MvCGE's views, MoME's Matryoshka scales,
the tasks of a multi-task model) should be judged per group: which experts each group
uses (:func:`group_expert_usage`); how differently the groups use them is
:func:`sci_moe.stats.pairwise_js_divergence` of those usages. The per-token summary
of one routing is
:func:`~sci_moe.moe.routing_diagnostics`.
"""

from __future__ import annotations

import torch

from .routing import Routing

__all__ = ["group_expert_usage"]


def _check_groups(
    groups: torch.Tensor | None, num_groups: int | None, T: int
) -> tuple[torch.Tensor | None, int]:
    """Validated group ids ``(T,)`` (int64) and the number of groups ``G``."""
    if groups is None:
        return None, 1
    if groups.shape != (T,):
        raise ValueError(
            f"groups must have shape ({T},) (one id per token), got {tuple(groups.shape)}"
        )
    if groups.dtype.is_floating_point or groups.dtype == torch.bool:
        raise TypeError(f"groups must be an integer tensor, got {groups.dtype}")
    groups = groups.to(torch.long)
    if num_groups is None:
        num_groups = int(groups.max()) + 1 if T else 1
    if T and (int(groups.min()) < 0 or int(groups.max()) >= num_groups):
        raise ValueError(f"group ids must lie in [0, {num_groups}); pass a larger num_groups")
    return groups, num_groups


@torch.no_grad()
def group_expert_usage(
    routing: Routing,
    groups: torch.Tensor | None = None,
    num_groups: int | None = None,
    weighted: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fraction of each group's kept assignments per expert, and its entropy.

    .. math::

        u_{gi} = \\frac{\\#\\{(t, j): t \\in g,\\ i_{tj} = i\\}}{\\#\\{(t, j): t \\in g\\}},
        \\qquad H_g = -\\sum_i u_{gi} \\log u_{gi}

    ``H_g`` is in nats, between 0 (one expert) and ``log E`` (uniform use). With
    ``weighted=True`` each assignment counts with its routing weight ``w_tj`` instead of 1
    (what matters when a group has few tokens, e.g. one pooled token per view).
    Accumulated in float64; no gradient.

    Parameters
    ----------
    routing : Routing
        ``T`` tokens over ``E`` experts.
    groups : Tensor, shape (T,), integer, optional
        Group id of every token (default: one group).
    num_groups : int, optional
        ``G`` (default ``groups.max() + 1``).
    weighted : bool

    Returns
    -------
    usage : Tensor, shape (G, E), float32
        Rows of groups without kept assignments are 0.
    entropy : Tensor, shape (G,), float32 (nats)
    """
    T, E = routing.probs.shape
    groups, G = _check_groups(groups, num_groups, T)
    if groups is None:
        groups = torch.zeros(T, dtype=torch.long, device=routing.indices.device)
    kept = routing.kept
    k = routing.indices.shape[1]
    flat_g = groups.repeat_interleave(k)[kept.reshape(-1)]
    flat_e = routing.indices.reshape(-1)[kept.reshape(-1)]
    counts = torch.zeros(G * E, dtype=torch.float64, device=flat_e.device)
    if weighted:
        mass = routing.weights.detach().reshape(-1)[kept.reshape(-1)].to(torch.float64)
    else:
        mass = torch.ones_like(flat_e, dtype=torch.float64)
    counts.index_add_(0, flat_g * E + flat_e, mass)
    counts = counts.view(G, E)
    usage = counts / counts.sum(-1, keepdim=True).clamp_min(1.0)
    entropy = -(usage * usage.clamp_min(1e-300).log()).sum(-1)
    return usage.float(), entropy.float()
