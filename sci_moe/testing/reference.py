"""A deliberately naive Mixture-of-Experts: loops over tokens and their ``k`` experts.

Every fast path in :mod:`sci_moe.moe` is tested against it (outputs and all gradients).
It shares only the parameters with the layer under test, never its dispatch code.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..moe import ExpertBank, MoE, Router, Routing

__all__ = ["reference_moe_forward", "reference_routed_forward", "reference_routing"]


def _router_of(obj) -> Router:
    router = obj if isinstance(obj, Router) else getattr(obj, "router", None)
    if not isinstance(router, Router):
        raise TypeError(
            f"need a sci_moe.moe.Router or a layer with a .router, got {type(obj).__name__}"
        )
    return router


def reference_routing(moe: MoE | Router, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k routing computed token by token, without the router's vectorised code.

    Supports token-choice top-k (softmax or sigmoid, selection bias, group limiting,
    renormalisation, scaling) and dense gating. Expert-choice selection and capacity
    dropping are batch decisions: for those the *selection* is taken from the layer's
    router (under ``no_grad``) and only the weights are recomputed per token here.
    Training-mode noise and jitter are not reproduced: call it in eval mode.

    Parameters
    ----------
    moe : MoE or Router
        A layer (its ``router`` is used) or a router alone.
    x : Tensor, shape (T, d_model)
        What the router reads.

    Returns
    -------
    indices : Tensor, shape (T, k), int64
    weights : Tensor, shape (T, k)
    """
    router = _router_of(moe)
    c = router.config
    batch_indices = None
    if c.mode == "expert_choice" or c.capacity_factor is not None:
        with torch.no_grad():
            batch_indices = router(x).indices
    dtype = torch.promote_types(x.dtype, torch.float32)
    W = router.weight.to(dtype)
    E, k = c.num_experts, c.top_k
    all_idx, all_w = [], []
    for t in range(x.shape[0]):
        logits = W @ x[t].to(dtype)
        s = torch.softmax(logits, 0) if c.score == "softmax" else torch.sigmoid(logits)
        if c.mode == "dense":
            chosen = list(range(E))
        elif c.mode == "expert_choice":
            chosen = [int(e) for e in batch_indices[t] if int(e) < E]
        else:
            choice = s.detach().clone()
            if c.selection_bias:
                choice = choice + router.expert_bias.to(dtype)
            allowed = set(range(E))
            if c.num_groups > 1:
                size = E // c.num_groups
                group_score = []
                for g in range(c.num_groups):
                    vals = sorted(choice[g * size : (g + 1) * size].tolist(), reverse=True)
                    group_score.append(sum(vals[:2]))
                best = sorted(range(c.num_groups), key=lambda g: -group_score[g])[: c.topk_groups]
                allowed = {e for g in best for e in range(g * size, (g + 1) * size)}
            ranked = sorted(allowed, key=lambda e: -float(choice[e]))
            chosen = ranked[:k]
        w = torch.stack([s[e] for e in chosen]) if chosen else s[:0]
        if c.normalize and c.mode != "expert_choice":
            w = w / (w.sum() + c.norm_eps)
        w = w * c.scaling
        if batch_indices is not None:
            # Keep only what the batch decision kept; pad to the router's slot count.
            kept = set(int(e) for e in batch_indices[t] if int(e) < E)
            w = torch.stack(
                [w[j] if e in kept else w[j] * 0 for j, e in enumerate(chosen)] or [w.sum()]
            )
            chosen = [e if e in kept else E for e in chosen] or [E]
            pad = batch_indices.shape[1] - len(chosen)
            chosen = chosen + [E] * pad
            w = torch.cat([w, w.new_zeros(pad)])
        all_idx.append(torch.tensor(chosen))
        all_w.append(w)
    return torch.stack(all_idx), torch.stack(all_w)


def reference_moe_forward(
    moe: MoE, x: torch.Tensor, routing: Routing | None = None
) -> torch.Tensor:
    """Naive forward of ``moe``: ``y_t = sum_j w_tj E_{i_tj}(x_t) + shared(x_t) + base(x_t)``.

    Parameters
    ----------
    moe : MoE
    x : Tensor, shape (..., d_model)
    routing : Routing, optional
        Use these indices/weights instead of :func:`reference_routing` (needed for
        expert-choice, capacity dropping, or training-mode noise).

    Returns
    -------
    Tensor, shape (..., d_out)
    """
    return reference_routed_forward(moe.router, moe.experts, x, routing=routing, shared=moe.shared)


def _expert_parts(experts):
    """``(num_experts, call(e, x), base(x) or None, d_out(x))`` of a bank or modules."""
    if isinstance(experts, ExpertBank):
        return experts.num_experts, experts.forward_expert, experts.base, lambda x: experts.d_out
    mods = list(experts)
    return len(mods), lambda e, x: mods[e](x), lambda x: None, lambda x: mods[0](x[:0]).shape[-1]


def reference_routed_forward(
    router: Router | None,
    experts: ExpertBank | Sequence[nn.Module],
    x: torch.Tensor,
    routing: Routing | None = None,
    *,
    shared: nn.Module | None = None,
    router_input: torch.Tensor | None = None,
) -> torch.Tensor:
    """Naive forward of a (router, expert bank) pair, without an :class:`~sci_moe.moe.MoE`.

    .. math:: y_t = \\mathrm{base}(x_t) + \\sum_j w_{tj} E_{i_{tj}}(x_t) + \\mathrm{shared}(x_t)

    a loop over tokens and their slots calling the bank's ``forward_expert`` (or expert
    module ``e`` of a container).

    Parameters
    ----------
    router : Router or None
        Routes ``router_input`` through :func:`reference_routing` when ``routing`` is
        not given.
    experts : ExpertBank or sequence of nn.Module
        A bank, or ``E`` expert modules (no base term).
    x : Tensor, shape (..., d_in)
        What the experts read.
    routing : Routing, optional
        Fixed indices/weights (any object with ``indices`` and ``weights`` of shape
        ``(T, k)``).
    shared : nn.Module, optional
        Always-on module added to every token.
    router_input : Tensor, shape (T, d_router), optional
        What the router reads, when it differs from ``x`` (e.g. SPiCE's vector router
        reads invariant Gram features while its experts read ``[h, V]``).

    Returns
    -------
    Tensor, shape (..., d_out)
    """
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    if routing is None:
        if router is None:
            raise ValueError("give a router or a routing")
        feats = x2 if router_input is None else router_input
        indices, weights = reference_routing(router, feats)
    else:
        indices, weights = routing.indices, routing.weights
    E, expert, base_of, d_out = _expert_parts(experts)
    source = getattr(routing, "source", None)
    rows = []
    for t in range(indices.shape[0]):
        xt = x2[t : t + 1] if source is None else x2[int(source[t])].unsqueeze(0)
        acc = None
        for j in range(indices.shape[1]):
            e = int(indices[t, j])
            if e >= E:  # dropped slot
                continue
            term = weights[t, j].to(x.dtype) * expert(e, xt)
            acc = term if acc is None else acc + term
        if acc is None:
            acc = xt.new_zeros(1, d_out(xt))
        base = base_of(xt)
        if base is not None:
            acc = acc + base
        if shared is not None:
            acc = acc + shared(xt)
        rows.append(acc)
    y = torch.cat(rows) if rows else x2.new_zeros(0, d_out(x2))
    if source is not None:
        return y
    return y.reshape(*shape[:-1], y.shape[-1])
