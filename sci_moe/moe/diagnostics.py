"""Routing diagnostics across groups of tokens (views, scales, tasks, modalities).

A router shared by several groups of tokens (MvCGE's views, MoME's Matryoshka scales,
the tasks of a multi-task model) should be judged per group: which experts each group
uses (:func:`group_expert_usage`) and how differently the groups use them
(:func:`pairwise_js_divergence`). The per-token summary of one routing is
:func:`~sci_moe.moe.routing_diagnostics`; the per-level summary of a
:class:`~sci_moe.moe.TreeExpertChoice` is :func:`tree_level_diagnostics`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from .routing import Routing

if TYPE_CHECKING:
    from .tree import TreeLevel

__all__ = ["group_expert_usage", "pairwise_js_divergence", "tree_level_diagnostics"]


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


def pairwise_js_divergence(p: torch.Tensor) -> torch.Tensor:
    """Mean Jensen-Shannon divergence between the rows of ``p`` (nats).

    .. math::

        \\mathrm{JS}(p, q) = \\tfrac12 \\mathrm{KL}(p \\| m) + \\tfrac12 \\mathrm{KL}(q \\| m),
        \\quad m = \\tfrac12 (p + q); \\qquad
        \\overline{\\mathrm{JS}} = \\frac{2}{G(G-1)}\\sum_{g < h} \\mathrm{JS}(p_g, p_h)

    0 when every group uses the experts alike, at most ``log 2``: a cross-view /
    cross-scale routing diagnostic.

    Parameters
    ----------
    p : Tensor, shape (G, E)
        Distributions (rows summing to one, e.g. :func:`group_expert_usage`), ``G >= 2``.

    Returns
    -------
    Tensor, scalar
    """
    if p.dim() != 2 or p.shape[0] < 2:
        raise ValueError(f"p must have shape (G, E) with G >= 2, got {tuple(p.shape)}")
    a, b = p.unsqueeze(1), p.unsqueeze(0)
    m = 0.5 * (a + b)

    def kl(x, y):
        return torch.where(x > 0, x * (x.clamp_min(1e-300).log() - y.clamp_min(1e-300).log()), 0.0)

    js = 0.5 * (kl(a, m) + kl(b, m)).sum(-1)
    G = p.shape[0]
    iu = torch.triu_indices(G, G, 1)
    return js[iu[0], iu[1]].mean()


@torch.no_grad()
def tree_level_diagnostics(level: TreeLevel, num_candidates: int) -> dict:
    """Summary statistics of one tree level.

    Parameters
    ----------
    level : TreeLevel
        One level of a :class:`~sci_moe.moe.TreeExpertChoice` forward.
    num_candidates : int
        Candidate rows per group at this level (``T`` at level 0, else
        ``E_{l-1} k_{l-1}``).

    Returns
    -------
    dict
        ``num_experts``, ``capacity``, ``load_min``/``load_max`` (rows per expert, over
        the batch), ``coverage`` (fraction of candidate rows chosen by >= 1 child),
        ``overlap`` (mean children per chosen row), ``usage_entropy`` (entropy of the
        mean sibling scores, divided by ``log b``; 1 = uniform), ``mean_weight``.
    """
    G, E, k = level.num_groups, level.num_experts, level.capacity
    load = torch.bincount(level.expert, minlength=E).double()
    src = level.source.remainder(num_candidates * G)
    chosen = torch.bincount(src, minlength=num_candidates * G)
    picked = (chosen > 0).double()
    usage = level.candidate_probs.double().flatten(0, 2).mean(0)
    b = level.branching
    ent = float(-(usage * usage.clamp_min(1e-300).log()).sum() / math.log(b)) if b > 1 else 1.0
    return {
        "num_experts": E,
        "capacity": k,
        "load_min": float(load.min()),
        "load_max": float(load.max()),
        "coverage": float(picked.mean()),
        "overlap": float(chosen[chosen > 0].double().mean()) if picked.any() else 0.0,
        "usage_entropy": ent,
        "mean_weight": float(level.weights.double().mean()),
    }
