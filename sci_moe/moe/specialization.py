"""Expert-specialisation losses and routing diagnostics.

Guo et al., "Advancing Expert Specialization for Better MoE" (NeurIPS 2025,
arXiv 2505.22323): an orthogonality loss ``L_o`` that pushes the experts selected for one
token to produce orthogonal outputs, and a variance loss ``L_v`` that rewards routing
scores that vary across tokens. The total objective is
``L = L_task + α L_aux + β L_o + γ L_v`` (their Eq. 5).
"""

from __future__ import annotations

import torch

from .routing import Routing

__all__ = [
    "orthogonality_loss",
    "routing_diagnostics",
    "selected_outputs",
    "selection_scores",
    "variance_loss",
]


def selected_outputs(routing: Routing, expert_outputs: torch.Tensor) -> torch.Tensor:
    """Unweighted outputs of each token's selected experts, shape ``(T, k, d)``.

    Dropped slots are zero. ``expert_outputs`` is in expert order, as returned by
    ``dispatch(..., return_expert_outputs=True)`` (differentiable).
    """
    plan = routing.plan
    T, k = routing.indices.shape
    n_total = plan.order.numel()
    ys = expert_outputs
    if ys.shape[0] < n_total:
        ys = torch.cat([ys, ys.new_zeros(n_total - ys.shape[0], ys.shape[-1])])
    return ys[plan.inverse].view(T, k, ys.shape[-1])  # explicit d: T may be 0


def selection_scores(routing: Routing) -> torch.Tensor:
    """Routing scores after top-k, ``S`` of shape ``(T, E)``.

    ``w`` on the selected experts, 0 elsewhere.
    """
    T, E = routing.probs.shape
    kept = routing.kept
    idx = torch.where(kept, routing.indices, torch.zeros_like(routing.indices))
    w = torch.where(kept, routing.weights, torch.zeros_like(routing.weights))
    return torch.zeros(T, E, dtype=w.dtype, device=w.device).scatter_add(1, idx, w)


def orthogonality_loss(
    outputs: torch.Tensor, eps: float = 1e-6, reduction: str = "sum"
) -> torch.Tensor:
    """Orthogonality loss ``L_o`` (Eq. 6 of Guo et al. 2025).

    .. math::

        L_o = \\sum_{t} \\sum_{j} \\sum_{l \\ne j}
            \\Big\\| \\frac{\\langle \\tilde x_{tj}, \\tilde x_{tl}\\rangle}
                        {\\langle \\tilde x_{tl}, \\tilde x_{tl}\\rangle + \\varepsilon}
                   \\tilde x_{tl} \\Big\\|^2
          = \\sum_t \\sum_{j \\ne l} \\frac{G_{tjl}^2\\, G_{tll}}{(G_{tll} + \\varepsilon)^2}

    with ``x̃_tj`` the (unweighted) output of token ``t``'s ``j``-th selected expert and
    ``G_t = X̃_t X̃_tᵀ`` its Gram matrix: the squared projections between the outputs of
    experts selected together. Cost ``O(T k² d)``.

    Parameters
    ----------
    outputs : Tensor, shape (T, k, d)
        From :func:`selected_outputs` (zero rows for dropped slots contribute nothing).
    eps : float
    reduction : {"sum", "mean"}
        ``"sum"`` over tokens as in the paper, or the mean over tokens (0 for ``T = 0``).

    Returns
    -------
    Tensor, scalar
    """
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    gram = outputs @ outputs.transpose(-1, -2)  # (T, k, k)
    norms = gram.diagonal(dim1=-2, dim2=-1)  # (T, k): <x_l, x_l>
    k = outputs.shape[1]
    off = ~torch.eye(k, dtype=torch.bool, device=outputs.device)
    terms = gram.square() * (norms / (norms + eps).square()).unsqueeze(-2)
    per_token = (terms * off).sum((-1, -2))
    return per_token.sum() if reduction == "sum" or not per_token.numel() else per_token.mean()


def variance_loss(routing: Routing, reduction: str = "sum") -> torch.Tensor:
    """Variance loss ``L_v`` (Eq. 7 of Guo et al. 2025): minus the routing-score variance.

    .. math::

        L_v = -\\sum_{t=1}^{T}\\sum_{i=1}^{E} \\frac{1}{E}(s_{ti} - \\bar s_i)^2,
        \\qquad \\bar s_i = \\frac{1}{T}\\sum_t s_{ti}

    with ``S`` the scores after top-k (:func:`selection_scores`). Minimising it makes
    each expert's scores vary more across tokens (more decisive, specialised routing).

    Parameters
    ----------
    routing : Routing
    reduction : {"sum", "mean"}
        ``"sum"`` over tokens as in the paper, or the mean over tokens (0 for ``T = 0``).
    """
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    s = selection_scores(routing)
    dev = (s - s.mean(0, keepdim=True)).square().sum(-1) / s.shape[1]  # (T,)
    return -(dev.sum() if reduction == "sum" or not dev.numel() else dev.mean())


@torch.no_grad()
def routing_diagnostics(
    routing: Routing, expert_outputs: torch.Tensor | None = None
) -> dict[str, float]:
    """Summary statistics of one routing.

    Returns a dict with

    * ``load``: fraction of kept assignments per expert (list of ``E`` floats);
    * ``max_violation``: MaxVio = ``(max_i c_i - mean c) / mean c`` (Wang et al. 2024),
      0 for perfect balance;
    * ``entropy``: mean over tokens of ``-Σ_i p_ti log p_ti`` of the router scores
      normalised to sum to one (nats);
    * ``score_variance``: mean over experts of the variance over tokens of the top-k
      scores ``S`` (what ``L_v`` increases);
    * ``overlap`` (with ``expert_outputs``): mean cosine similarity between the outputs of
      two experts selected for the same token (what ``L_o`` decreases); NaN for ``k = 1``.
    """
    load = routing.load
    mean = load.mean().clamp_min(1e-12)
    p = routing.probs / routing.probs.sum(-1, keepdim=True).clamp_min(1e-30)
    entropy = -(p * p.clamp_min(1e-30).log()).sum(-1).mean()
    s = selection_scores(routing)
    out = {
        "load": (load / load.sum().clamp_min(1)).tolist(),
        "max_violation": float((load.max() - mean) / mean),
        "entropy": float(entropy),
        "score_variance": float(s.var(0, unbiased=False).mean()),
    }
    if expert_outputs is not None:
        x = selected_outputs(routing, expert_outputs)
        k = x.shape[1]
        if k < 2:
            out["overlap"] = float("nan")
        else:
            unit = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
            cos = unit @ unit.transpose(-1, -2)
            iu = torch.triu_indices(k, k, 1, device=x.device)
            kept = routing.kept
            pair_ok = kept[:, iu[0]] & kept[:, iu[1]]
            vals = cos[:, iu[0], iu[1]][pair_ok]
            out["overlap"] = float(vals.mean()) if vals.numel() else float("nan")
    return out
